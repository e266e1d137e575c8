"""The causal experiment (issue 16): byte-level decoders trained at ``L``, tested at ``L``, ``8L`` and ``16L``.

The questions of Su's decoder ablation (kexue.fm 9706/9708) and Qwen-7B's table, asked of models
the toolkit trains: does ``log n`` trained in beat ``log n`` added afterwards, with which RoPE
variant, and can the toolkit's own per-head scale do better than one global factor?

**Runs.**  Causal (next-byte) models with LLaMA's SwiGLU feed-forward (so that one can be
exported to GGUF and read by the numpy decoder, :mod:`softmax_scale.train.export`), trained at
``L`` with ``standard`` and with ``entropy_invariant`` pinned at ``L`` (``log_L n``, unclamped:
below 1 inside ``L``), the same data order per seed.

**Tests** (on the held-out text, the same windows for every model), per bucket of positions
(:func:`~softmax_scale.train.evaluation.position_buckets`), loss and next-byte accuracy under every
RoPE variant of :data:`softmax_scale.schemes.rope.ROPES` x every test-time scale:

- ``trained``: the scale the model was trained with;
- ``qwen_logn@L`` (``max(1, log_L n)``, added to a ``standard`` model) and ``yarn@L`` (YaRN's
  temperature ``(0.1 ln s + 1)^2``, ``s = max(1, n/L)``), both through ``schemes.pinned``;
- ``toolkit_iid`` and ``toolkit_measured``: the toolkit's own per-head scale
  (:mod:`softmax_scale.train.head_scales`);
- and the baseline: a sliding window of ``L`` bytes with the trained RoPE and scale (kind ``window``).

**Per-head entropy against n** (kind ``head_entropy``): each head's measured entropy and
``sigma`` per bucket at ``16L`` (RoPE ``none`` and ``rerope``, the trained scale) beside the exact
evaluator's i.i.d. prediction from the head's ``sigma`` and pooled standardised scores just below
``L``, the scale growing as the trained scheme says.

Every number is a row of ``figures/train_causal.csv`` (:data:`CAUSAL_COLUMNS`), written a run at a
time through :func:`softmax_scale.train.sweep.run_sweep`, so the experiment resumes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.validation import check_int
from ..schemes.rope import ROPES
from ..train.config import QUICK, TrainConfig
from ..train.head_scales import TOOLKIT_RULES, exact_entropy, factor_grid, head_factors, position_factors, probe_heads, query_rows

__all__ = ["CAUSAL_COLUMNS", "CAUSAL_SCALES", "DEFAULT_CAUSAL", "ENTROPY_ROPES", "PUBLISHED_CAUSAL", "QUICK_CAUSAL",
           "TEST_SCALES", "CausalTask", "causal_markdown", "causal_summary", "causal_tasks", "expected_causal_rows",
           "read_causal", "run_causal_task"]

#: Columns of ``train_causal.csv``.  ``kind``: ``run`` (hi = steps; final training loss and accuracy,
#: seconds), ``curve`` (hi = step), ``test`` and ``window`` (one bucket ``[lo, hi)`` of positions of
#: the test ``length``: loss, accuracy, count), ``head_L`` (each head just below ``L``: sigma,
#: entropy, ``predicted`` its i.i.d. entropy on its own scores, ``value`` the slope of its measured
#: entropy against ``ln n`` inside ``L``), ``factor`` (a toolkit rule's factor for one head at
#: ``length`` = n keys, in ``value``), ``head_entropy`` (one head in one bucket at ``16L``: measured
#: entropy and sigma; ``predicted`` on its own scores, ``value`` on normal scores), ``diverged``.
CAUSAL_COLUMNS = ("scheme", "seed", "status", "kind", "rope", "scale", "length", "lo", "hi", "layer", "head", "loss",
                  "accuracy", "entropy", "predicted", "sigma", "value", "count", "seconds", "note")
_TEXT = ("scheme", "status", "kind", "rope", "scale", "note")
_INTS = ("seed", "length", "lo", "hi", "layer", "head", "count")
#: Scales trained in: (scheme, pin length); ``None`` pins at the training length (``log_L n``).
CAUSAL_SCALES = (("standard", None), ("entropy_invariant", None))
#: Published scales added at test time to a ``standard`` model, pinned at ``L``.
TEST_SCALES = ("qwen_logn", "yarn")
#: RoPE variants under which each head's entropy is followed to ``16L``.
ENTROPY_ROPES = ("none", "rerope")
#: Test lengths as multiples of ``L``.
LENGTH_MULTIPLES = (1, 8, 16)

#: The causal models, sized for about 90 minutes on 2 cores with 2 workers (see the README):
#: SwiGLU with ``d_ff`` 344 (the ReLU model's parameters: 3 x 344 ~ 2 x 512; 8% slower per step),
#: trained at ``L = 128`` (a byte model at 64 sees about one line of code; at 128 two or three,
#: so there is structure past a line to learn and to lose past ``L``; training costs the same per
#: byte, the tests at ``16L = 2048`` about 1.7 times those at 1024), 16 x 128 bytes per step (the
#: bytes of the masked-LM runs' 32 x 64), 4000 steps.
DEFAULT_CAUSAL = TrainConfig(objective="causal", ffn="swiglu", d_ff=344, train_length=128, batch=16, steps=4000,
                             warmup=400)
#: The ``--quick`` causal model (the tiny one of the other experiments, causal and SwiGLU).
QUICK_CAUSAL = QUICK.replace(objective="causal", ffn="swiglu", d_ff=48)
_QUICK = {"curve_every": 10, "eval_tokens": 1024, "probe_windows": 4, "entropy_windows": 1}
_FULL = {"curve_every": 50, "eval_tokens": 16384, "probe_windows": 16, "entropy_windows": 2}

#: Su's decoder ablation (kexue.fm 9706/9708: a GAU decoder of about 100M parameters trained at
#: 512), per-token accuracy % at 512 and 4096 (and 4096 with repeated text removed).
PUBLISHED_CAUSAL = {
    "columns": ("512", "4096", "4096, no repeated text"),
    "Baseline": (49.41, 24.17, 23.16),
    "Baseline, log n trained in": (49.40, 24.60, 24.02),
    "NTK-RoPE (mixed base)": (49.41, 53.09, 40.12),
    "NTK-RoPE + log n at test only": (49.41, 59.11, 42.38),
    "NTK-RoPE + log n trained in": (49.40, 68.91, 45.41),
    "ReRoPE, window 256": (49.41, 77.90, 48.48),
    "ReRoPE, window 256 + log n trained in": (49.40, 85.12, 49.07),
}


@dataclass(frozen=True)
class CausalTask:
    """One causal training run and what to measure on it.

    Attributes
    ----------
    label : str
        The run's name in the ``scheme`` column (``standard``, ``entropy_invariant@64``).
    seed : int
    config : TrainConfig
    lengths : tuple of int
        Test lengths (``L, 8L, 16L``).
    ropes : tuple of str
        RoPE variants tested.
    overrides : tuple of (str, int)
        Published test-time scales ``(scheme, pin_length)`` (``standard`` models).
    toolkit : bool
        Also the toolkit's per-head scales (``standard`` models).
    curve_every : int
    eval_tokens : int
        Held-out bytes per test length.
    probe_windows : int
        Held-out windows of ``L`` bytes on which each head is measured.
    entropy_windows : int
        Held-out windows of ``16L`` bytes for the per-head entropy against ``n``.
    checkpoint : str or None
    progress : bool
    """

    label: str
    seed: int
    config: TrainConfig
    lengths: tuple
    ropes: tuple = ROPES
    overrides: tuple = ()
    toolkit: bool = False
    curve_every: int = 50
    eval_tokens: int = 16384
    probe_windows: int = 16
    entropy_windows: int = 2
    checkpoint: str | None = None
    progress: bool = False

    @property
    def scales(self) -> tuple:
        """The test-time scales, as written in the ``scale`` column."""
        return ("trained", *(f"{s}@{p}" for s, p in self.overrides), *(TOOLKIT_RULES if self.toolkit else ()))


def _buckets(L, n):
    from ..train.evaluation import position_buckets

    return position_buckets(L, n)


def expected_causal_rows(task: CausalTask) -> int:
    """Rows a finished (not diverged) task writes."""
    c = task.config
    L = c.train_length
    nb = {n: len(_buckets(L, n)) - 1 for n in task.lengths}
    rows = 1 + c.steps // task.curve_every
    rows += len(task.ropes) * len(task.scales) * sum(nb.values())
    rows += sum(nb[n] for n in task.lengths if n > L)  # the window baseline
    heads = c.layers * c.heads
    if task.toolkit:
        rows += heads + heads * len(TOOLKIT_RULES) * len(factor_grid(L, max(task.lengths)))
    rows += len(ENTROPY_ROPES) * nb[max(task.lengths)] * heads
    return rows


def causal_tasks(*, quick: bool = False, seeds: int | None = None, config: TrainConfig | None = None,
                 checkpoints=None, progress: bool = False) -> list:
    """The tasks of the causal experiment, seeds ``0 .. seeds-1`` (3 by default, 2 with ``quick``)."""
    from pathlib import Path

    k = (2 if quick else 3) if seeds is None else check_int(seeds, "seeds", minimum=1, maximum=1000)
    base = (QUICK_CAUSAL if quick else DEFAULT_CAUSAL) if config is None else config
    base = base.replace(objective="causal", scheme="standard", alpha=None, pin_length=None)
    L = base.train_length
    lengths = tuple(m * L for m in LENGTH_MULTIPLES)
    extra = _QUICK if quick else _FULL
    tasks = []
    for seed in range(k):
        for scheme, pin in CAUSAL_SCALES:
            c = base.replace(scheme=scheme, pin_length=pin)
            std = scheme == "standard"
            label = c.label()
            ckpt = None if checkpoints is None else str(Path(checkpoints) / f"causal-{label}-seed{seed}.npz")
            tasks.append(CausalTask(label, seed, c, lengths, ROPES, tuple((s, L) for s in TEST_SCALES) if std else (),
                                    std, checkpoint=ckpt, progress=progress, **extra))
    return tasks


# ---------------------------------------------------------------------------------------------
# One run


def _row(task, status, kind, *, rope="", scale="", length=0, lo=0, hi=0, layer=-1, head=-1, loss=np.nan,
         accuracy=np.nan, entropy=np.nan, predicted=np.nan, sigma=np.nan, value=np.nan, count=0, seconds=np.nan,
         note=""):
    return (task.label, task.seed, status, kind, rope, scale, length, lo, hi, layer, head, loss, accuracy, entropy,
            predicted, sigma, value, count, seconds, note)


def _trained_factor(config, n):
    from ..train.scales import query_factors

    return float(query_factors(config.scheme, int(n), config.d_head, causal=False, pin_length=config.pin)[0])


def _entropy_rows(task, params, probe):
    """Per head and bucket at ``16L``: measured entropy and sigma beside the i.i.d. prediction (kind ``head_entropy``)."""
    from ..heads import head_stats
    from ..train.evaluation import attention_scores

    c = task.config
    L, n = c.train_length, max(task.lengths)
    edges = _buckets(L, n)
    rows = []
    n_ref = float(np.mean(np.arange(L // 2, L) + 1))
    ref = _trained_factor(c, n_ref)
    predictions: dict = {}  # (bucket, head) -> (own, normal): the same for every RoPE
    for rope in ENTROPY_ROPES:
        s = attention_scores(params, c, n, windows=task.entropy_windows, rope=rope)
        for lo, hi in zip(edges[:-1], edges[1:]):
            lg, mk = query_rows(s, max(int(lo), 1), int(hi), task.entropy_windows)
            st = head_stats(lg, mask=mk, predict=False)
            n_b = float(np.mean(np.arange(max(int(lo), 1), int(hi)) + 1))
            grow = _trained_factor(c, n_b) / ref
            for h, (layer, head) in enumerate(np.ndindex(c.layers, c.heads)):
                if (lo, h) not in predictions:
                    a = float(probe["alpha"][layer, head]) * grow
                    dist = probe["pools"][h]
                    predictions[lo, h] = (exact_entropy(a, round(n_b), dist) if dist is not None and a > 0 else np.nan,
                                          exact_entropy(a, round(n_b), "normal") if a > 0 else np.nan)
                own, normal = predictions[lo, h]
                rows.append(_row(task, "ok", "head_entropy", rope=rope, scale="trained", length=n, lo=int(lo),
                                 hi=int(hi), layer=layer, head=head, entropy=float(st.entropy[layer, head]),
                                 sigma=float(st.sigma[layer, head]), predicted=own, value=normal,
                                 count=int(st.queries[layer, head])))
    return rows


def run_causal_task(task: CausalTask) -> list[tuple]:
    """Train, evaluate and measure one causal task; its rows (see :data:`CAUSAL_COLUMNS`).  Runs in a worker."""
    from ..train.evaluation import bucket_sums, evaluate
    from ..train.loop import train_model
    from ..train.sweep import limit_threads, run_summary

    limit_threads()
    c = task.config
    L = c.train_length
    res = train_model(c, rng=task.seed, checkpoint=task.checkpoint, progress=task.progress,
                      desc=f"{task.label} seed {task.seed}")
    if res.diverged:
        return [_row(task, "diverged", "diverged", hi=res.steps, seconds=res.seconds, note=res.message)]
    rows = [_row(task, "ok", kind, length=L, hi=step, loss=loss, accuracy=acc, count=count, seconds=sec)
            for kind, step, loss, acc, count, sec in run_summary(res, c, task.curve_every)]
    p = res.params
    hf = head_factors(p, c, windows=task.probe_windows, longest=max(task.lengths)) if task.toolkit else None
    longest = max(task.lengths)
    scales = [("trained", {})] + [(f"{s}@{pin}", {"scheme": s, "pin_length": pin}) for s, pin in task.overrides]
    if hf is not None:
        scales += [(r, {"factors": position_factors(hf, r, longest), "factors_label": r}) for r in TOOLKIT_RULES]

    def bucket_rows(kind, rope, scale, ev):
        for n in task.lengths:
            if kind == "window" and n <= L:
                continue
            b = bucket_sums(ev[n], _buckets(L, n))
            for j in range(b["lo"].size):
                rows.append(_row(task, "ok", kind, rope=rope, scale=scale, length=n, lo=int(b["lo"][j]),
                                 hi=int(b["hi"][j]), loss=float(b["loss"][j]), accuracy=float(b["accuracy"][j]),
                                 count=int(b["count"][j])))

    for rope in task.ropes:
        for scale, kw in scales:
            ev = evaluate(p, c, task.lengths, rope=rope, tokens=task.eval_tokens, **kw)
            bucket_rows("test", rope, scale, ev)
    far = tuple(n for n in task.lengths if n > L)
    if far:
        bucket_rows("window", "none", "trained", evaluate(p, c, far, rope="none", window=L, tokens=task.eval_tokens))
    if hf is not None:
        for h, (layer, head) in enumerate(np.ndindex(c.layers, c.heads)):
            rows.append(_row(task, "ok", "head_L", length=L, layer=layer, head=head,
                             entropy=float(hf.entropy[layer, head]), predicted=float(hf.predicted[layer, head]),
                             sigma=float(hf.sigma[layer, head]), value=float(hf.slope[layer, head])))
            for r in TOOLKIT_RULES:
                for j, n in enumerate(hf.ns):
                    rows.append(_row(task, "ok", "factor", scale=r, length=int(n), layer=layer, head=head,
                                     value=float(hf.factors[r][layer, head, j])))
        probe = {"alpha": hf.alpha, "pools": hf.pools}
    else:
        probe = probe_heads(p, c, task.probe_windows)
    rows += _entropy_rows(task, p, probe)
    return rows


# ---------------------------------------------------------------------------------------------
# Reading the results


def read_causal(path):
    """``train_causal.csv`` read back (numpy only)."""
    from .._util.store import read_table

    return read_table(path, CAUSAL_COLUMNS, text=_TEXT, ints=_INTS)


def causal_summary(table) -> dict:
    """Loss and accuracy per (trained scale, RoPE, test scale) at each test length, mean and std over seeds.

    Per run the whole-sequence value at a length is the count-weighted mean of its buckets.
    Returns ``{"lengths", "L", "rows": {(label, rope, scale): {"loss", "loss_std", "accuracy",
    "accuracy_std", "seeds"}}, "window": {...}, "diverged": [...]}``, the window keyed by
    ``(label, "none", "window")``; arrays over the test lengths.
    """
    r = table.rows
    ok = r["status"] == "ok"
    out: dict = {"diverged": sorted(zip(r["scheme"][~ok], r["seed"][~ok].tolist()))}
    test = ok & np.isin(r["kind"], ("test", "window"))
    lengths = np.unique(r["length"][test & (r["kind"] == "test")])
    L = int(lengths.min()) if lengths.size else 0
    out["lengths"], out["L"], out["rows"] = lengths, L, {}
    for kind in ("test", "window"):
        m0 = test & (r["kind"] == kind)
        for key in sorted(set(zip(r["scheme"][m0], r["rope"][m0], r["scale"][m0]))):
            m = m0 & (r["scheme"] == key[0]) & (r["rope"] == key[1]) & (r["scale"] == key[2])
            seeds = np.unique(r["seed"][m])
            v = {"loss": [], "accuracy": []}
            for n in lengths:
                per = {"loss": [], "accuracy": []}
                for sd in seeds:
                    mm = m & (r["seed"] == sd) & (r["length"] == n)
                    w = r["count"][mm].astype(float)
                    for what in per:
                        per[what].append(np.sum(r[what][mm] * w) / w.sum() if w.sum() else np.nan)
                for what in per:
                    v[what].append(per[what])
            name = (key[0], key[1], "window" if kind == "window" else key[2])
            entry = {"seeds": int(seeds.size)}
            for what in ("loss", "accuracy"):
                a = np.array(v[what], dtype=float).reshape(len(lengths), seeds.size)  # [lengths, seeds]
                entry[what], entry[f"{what}_std"] = _mean_std(a)
                entry[f"{what}_seeds"] = a
            out["rows"][name] = entry
    return out


def _mean_std(a):
    """Mean and sample std over the last axis, ignoring NaN (a length a row has no value at: NaN, no warning)."""
    ok = np.isfinite(a)
    k = ok.sum(axis=-1)
    x = np.where(ok, a, 0.0)
    mean = np.divide(x.sum(axis=-1), k, out=np.full(k.shape, np.nan), where=k > 0)
    dev = np.where(ok, a - mean[..., None], 0.0)
    std = np.sqrt(np.divide((dev * dev).sum(axis=-1), k - 1, out=np.full(k.shape, np.nan), where=k > 1))
    return mean, std


def _pm(mean, std, digits=3):
    if not np.isfinite(mean):
        return ""
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if np.isfinite(std) else "")


#: The rows of the ablation table: (name, trained label prefix, test scale).
_ABLATION = (("no log n", "standard", "trained"), ("log n at test only (qwen_logn)", "standard", "qwen_logn"),
             ("YaRN temperature at test only", "standard", "yarn"), ("log n trained in", "entropy_invariant", "trained"),
             ("toolkit per-head, i.i.d. rule", "standard", "toolkit_iid"),
             ("toolkit per-head, measured rule", "standard", "toolkit_measured"))


def causal_markdown(table, metric: str = "loss") -> str:
    """The ablation in the layout of the published one: rows RoPE x scale, columns ``L, 8L, 16L`` and the difference from the window.

    ``metric`` is ``"loss"`` (nats per byte) or ``"accuracy"`` (%); mean ± std over seeds; the
    last columns are each row's mean minus the sliding window's (same trained scale) at ``8L``
    and ``16L``.
    """
    from .._util.validation import check_choice

    check_choice(metric, "metric", ("loss", "accuracy"))
    s = causal_summary(table)
    lengths, L, rows = s["lengths"], s["L"], s["rows"]
    mult = 100.0 if metric == "accuracy" else 1.0
    dig = 2 if metric == "accuracy" else 3
    far = [i for i, n in enumerate(lengths) if n > L]
    unit = "accuracy %" if metric == "accuracy" else "loss, nats per byte"
    head = [f"{n // L}L = {n}" if n != L else f"L = {n}" for n in lengths]
    lines = [f"| RoPE | scale ({unit}; seeds) | " + " | ".join(head) + " | "
             + " | ".join(f"vs window at {lengths[i] // L}L" for i in far) + " |",
             "|---|---|" + "---:|" * (len(lengths) + len(far))]
    labels = sorted({k[0] for k in rows})
    for label in labels:
        w = rows.get((label, "none", "window"))
        if w is None or not label.startswith("standard"):
            continue
        cells = ["" if n <= L else _pm(mult * w[metric][i], mult * w[f"{metric}_std"][i], dig)
                 for i, n in enumerate(lengths)]
        lines.append(f"| sliding window of L | {label} ({w['seeds']}) | " + " | ".join(cells) + " |"
                     + " |" * len(far))
    for rope in ROPES:
        for name, prefix, scale in _ABLATION:
            key = next(((lab, rope, sc) for (lab, rp, sc) in rows if lab.startswith(prefix) and rp == rope
                        and sc.split("@")[0] == scale), None)
            if key is None:
                continue
            v = rows[key]
            win = rows.get((key[0], "none", "window"))
            cells = [_pm(mult * v[metric][i], mult * v[f"{metric}_std"][i], dig) for i in range(len(lengths))]
            diff = []
            for i in far:
                if win is None:
                    diff.append("")
                elif v[f"{metric}_seeds"].shape != win[f"{metric}_seeds"].shape:  # a seed missing on one side
                    diff.append(_pm(mult * (v[metric][i] - win[metric][i]), np.nan, dig))
                else:  # per seed, then mean ± std of the differences
                    d = mult * (v[f"{metric}_seeds"][i] - win[f"{metric}_seeds"][i])
                    m, sd = _mean_std(d[None, :])
                    diff.append(_pm(m[0], sd[0], dig))
            lines.append(f"| {rope} | {name} ({v['seeds']}) | " + " | ".join(cells + diff) + " |")
    if s["diverged"]:
        lines.append("")
        lines.append("diverged: " + ", ".join(f"{k} seed {sd}" for k, sd in s["diverged"]))
    return "\n".join(lines)

"""The causal experiment: byte-level decoders trained at ``L``, tested at ``L``, ``8L`` and ``16L``.

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
time through :func:`softmax_scale.experiments.run_experiment`, so the experiment resumes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..heads import TOOLKIT_RULES, exact_entropy
from ..schemes.rope import ROPES
from ..train.config import QUICK, TrainConfig
from ..train.head_scales import factor_grid, head_factors, position_factors, probe_heads, query_rows
from . import _training as tr
from .base import Evidence

__all__ = ["CAUSAL_COLUMNS", "CAUSAL_SCALES", "DEFAULT_CAUSAL", "ENTROPY_ROPES", "EXPERIMENT", "PUBLISHED_CAUSAL",
           "QUICK_CAUSAL", "TEST_SCALES", "CausalConfig", "CausalExperiment", "CausalTask", "causal_markdown",
           "causal_summary", "expected_causal_rows", "run_causal_task"]

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
#: The trained scale that the test-time scales are added to, and every other is compared with.
REFERENCE = CAUSAL_SCALES[0][0]
#: The trained scale with ``log n`` trained in.
TRAINED_LOGN = CAUSAL_SCALES[1][0]
#: Published scales added at test time to a ``standard`` model, pinned at ``L``.
TEST_SCALES = ("qwen_logn", "yarn")
#: RoPE variants under which each head's entropy is followed to ``16L``.
ENTROPY_ROPES = ("none", "rerope")
#: Test lengths as multiples of ``L``.
LENGTH_MULTIPLES = (1, 8, 16)

#: The causal models: SwiGLU with ``d_ff`` 344 (the ReLU model's parameters: 3 x 344 ~ 2 x 512),
#: trained at ``L = 128`` (a byte model at 64 sees about one line of code; at 128 two or three,
#: so there is structure past a line to learn and to lose past ``L``), 16 x 128 bytes per step
#: (the bytes of the masked-LM runs' 32 x 64), 4000 steps.
DEFAULT_CAUSAL = TrainConfig(objective="causal", ffn="swiglu", d_ff=344, train_length=128, batch=16, steps=4000,
                             warmup=400)
#: The ``--quick`` causal model (the tiny one of the other experiments, causal and SwiGLU).
QUICK_CAUSAL = QUICK.replace(objective="causal", ffn="swiglu", d_ff=48)

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


@dataclass(frozen=True)
class CausalConfig:
    """The causal experiment.

    Attributes
    ----------
    quick : bool
    seeds : int
        Seeds per trained scale.
    model : TrainConfig
        The model and optimiser (the scale is set per run).
    scales : tuple of (str, int or None)
        The scales trained in.
    multiples : tuple of int
        Test lengths as multiples of ``L``.
    ropes : tuple of str
        RoPE variants tested.
    test_scales : tuple of str
        Published scales added at test time to each ``standard`` model, pinned at ``L``.
    curve_every, eval_tokens, probe_windows, entropy_windows : int
        As in :class:`CausalTask`.
    short_budget : int
        The header's short budget (steps).
    """

    quick: bool = False
    seeds: int = 3
    model: TrainConfig = DEFAULT_CAUSAL
    scales: tuple = CAUSAL_SCALES
    multiples: tuple = LENGTH_MULTIPLES
    ropes: tuple = ROPES
    test_scales: tuple = TEST_SCALES
    curve_every: int = 50
    eval_tokens: int = 16384
    probe_windows: int = 16
    entropy_windows: int = 2
    short_budget: int = 300


#: The quick form: the tiny causal model, two seeds, small evaluations.
QUICK_CONFIG = CausalConfig(quick=True, seeds=2, model=QUICK_CAUSAL, curve_every=10, eval_tokens=1024, probe_windows=4,
                            entropy_windows=1, short_budget=10)


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


# ---------------------------------------------------------------------------------------------
# One run


def _trained_factor(config, n):
    from ..train.scales import query_factors

    return float(query_factors(config.scheme, int(n), config.d_head, causal=False, pin_length=config.pin)[0])


def _entropy_rows(row, task, params, probe):
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
                rows.append(row(task, "ok", "head_entropy", rope=rope, scale="trained", length=n, lo=int(lo),
                                 hi=int(hi), layer=layer, head=head, entropy=float(st.entropy[layer, head]),
                                 sigma=float(st.sigma[layer, head]), predicted=own, value=normal,
                                 count=int(st.queries[layer, head])))
    return rows


def run_causal_task(row, task: CausalTask) -> list[tuple]:
    """Train, evaluate and measure one causal task; its rows (see :data:`CAUSAL_COLUMNS`), made by ``row``.  Runs in a worker."""
    from ..train.evaluation import bucket_sums, evaluate
    from ..train.loop import train_model
    from .sweep import limit_threads

    limit_threads()
    c = task.config
    L = c.train_length
    res = train_model(c, rng=task.seed, checkpoint=task.checkpoint, progress=task.progress,
                      desc=f"{task.label} seed {task.seed}")
    if res.diverged:
        return [row(task, "diverged", "diverged", hi=res.steps, seconds=res.seconds, note=res.message)]
    rows = [row(task, "ok", kind, length=L, hi=step, loss=loss, accuracy=acc, count=count, seconds=sec)
            for kind, step, loss, acc, count, sec in tr.run_summary(res, c, task.curve_every)]
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
                rows.append(row(task, "ok", kind, rope=rope, scale=scale, length=n, lo=int(b["lo"][j]),
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
            rows.append(row(task, "ok", "head_L", length=L, layer=layer, head=head,
                             entropy=float(hf.entropy[layer, head]), predicted=float(hf.predicted[layer, head]),
                             sigma=float(hf.sigma[layer, head]), value=float(hf.slope[layer, head])))
            for r in TOOLKIT_RULES:
                for j, n in enumerate(hf.ns):
                    rows.append(row(task, "ok", "factor", scale=r, length=int(n), layer=layer, head=head,
                                     value=float(hf.factors[r][layer, head, j])))
        probe = {"alpha": hf.alpha, "pools": hf.pools}
    else:
        probe = probe_heads(p, c, task.probe_windows)
    rows += _entropy_rows(row, task, p, probe)
    return rows


# ---------------------------------------------------------------------------------------------
# Reading the results


def causal_summary(table) -> dict:
    """Loss and accuracy per (trained scale, RoPE, test scale) at each test length, mean and sample std over seeds.

    Per run the whole-sequence value at a length is the count-weighted mean of its buckets.
    Returns ``{"lengths", "L", "rows": {(label, rope, scale): {"loss", "loss_std", "loss_n", "accuracy",
    "accuracy_std", "accuracy_n", "seeds"}}, "window": {...}, "diverged": [...]}`` (``*_n``: the
    seeds with a value at each length), the window keyed by ``(label, "none", "window")``; arrays
    over the test lengths.
    """
    r = table.rows
    ok = tr.ok(table)
    out: dict = {"diverged": tr.diverged_runs(table)}
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
                entry[what], entry[f"{what}_std"] = tr.mean_std(a)
                entry[f"{what}_n"] = np.isfinite(a).sum(axis=-1)
                entry[f"{what}_seeds"] = a
            out["rows"][name] = entry
    return out


#: The rows of the ablation table: (name, trained label prefix, test scale).
_ABLATION = (("no log n", REFERENCE, "trained"), ("log n at test only (qwen_logn)", REFERENCE, TEST_SCALES[0]),
             ("YaRN temperature at test only", REFERENCE, TEST_SCALES[1]), ("log n trained in", TRAINED_LOGN, "trained"),
             ("toolkit per-head, i.i.d. rule", REFERENCE, TOOLKIT_RULES[0]),
             ("toolkit per-head, measured rule", REFERENCE, TOOLKIT_RULES[1]))


def causal_markdown(table, metric: str = "loss") -> str:
    """The ablation in the layout of the published one: rows RoPE x scale, columns ``L, 8L, 16L`` and the difference from the window.

    ``metric`` is ``"loss"`` (nats per byte) or ``"accuracy"`` (%); mean ± standard error over
    seeds; the last columns are each row's mean minus the sliding window's (same trained scale) at
    ``8L`` and ``16L``, per seed, then mean ± standard error of the differences.
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
    lines = [f"| RoPE | scale ({unit}, mean ± standard error over seeds; seeds) | " + " | ".join(head) + " | "
             + " | ".join(f"vs window at {lengths[i] // L}L" for i in far) + " |",
             "|---|---|" + "---:|" * (len(lengths) + len(far))]
    labels = sorted({k[0] for k in rows})
    for label in labels:
        w = rows.get((label, "none", "window"))
        if w is None or not label.startswith(REFERENCE):
            continue
        cells = ["" if n <= L else tr.pm(w[metric][i], w[f"{metric}_std"][i], w[f"{metric}_n"][i], mult, dig)
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
            cells = [tr.pm(v[metric][i], v[f"{metric}_std"][i], v[f"{metric}_n"][i], mult, dig)
                     for i in range(len(lengths))]
            diff = []
            for i in far:
                if win is None:
                    diff.append("")
                elif v[f"{metric}_seeds"].shape != win[f"{metric}_seeds"].shape:  # a seed missing on one side
                    diff.append(tr.pm(v[metric][i] - win[metric][i], np.nan, 1, mult, dig))
                else:  # per seed, then mean ± standard error of the differences
                    d = v[f"{metric}_seeds"][i] - win[f"{metric}_seeds"][i]
                    diff.append(tr.pm_of(d[np.isfinite(d)], mult, dig))
            lines.append(f"| {rope} | {name} ({v['seeds']}) | " + " | ".join(cells + diff) + " |")
    return "\n".join(lines + tr.diverged_line(s["diverged"]))


class CausalExperiment(tr.TrainingExperiment):
    """The causal experiment (see the module docstring)."""

    name = "causal"
    description = "decoders trained at L, tested at L, 8L and 16L under RoPE variants and test-time scales"
    columns, text, ints = CAUSAL_COLUMNS, _TEXT, _INTS
    figure_names = ("train_causal", "train_causal_heads")
    reference = REFERENCE

    def config(self, quick: bool = False) -> CausalConfig:
        """:class:`CausalConfig` or its quick form."""
        return QUICK_CONFIG if quick else CausalConfig()

    def tasks(self, config: CausalConfig, *, out=None, progress: bool = False) -> list:
        """One task per (seed, trained scale); the ``standard`` models also get the test-time and per-head scales."""
        base = config.model.replace(objective="causal", scheme=REFERENCE, alpha=None, pin_length=None)
        L = base.train_length
        lengths = tuple(m * L for m in config.multiples)
        extra = {"curve_every": config.curve_every, "eval_tokens": config.eval_tokens,
                 "probe_windows": config.probe_windows, "entropy_windows": config.entropy_windows}
        show = progress and not config.quick
        tasks = []
        for seed in range(config.seeds):
            for scheme, pin in config.scales:
                c = base.replace(scheme=scheme, pin_length=pin)
                ref = scheme == REFERENCE
                tasks.append(CausalTask(c.label(), seed, c, lengths, tuple(config.ropes),
                                        tuple((x, L) for x in config.test_scales) if ref else (), ref,
                                        checkpoint=self.checkpoint(out, c.label(), seed), progress=show, **extra))
        return tasks

    def run_task(self, task) -> list:
        """:func:`run_causal_task`."""
        return run_causal_task(self.row, task)

    def expected_rows(self, task) -> int:
        """:func:`expected_causal_rows`."""
        return expected_causal_rows(task)

    def extra_header(self, tasks) -> dict:
        """The RoPE variants, the test-time scales, the window baseline, what the heads are measured on."""
        from ..schemes.rope import rerope_window

        t = tasks[0]
        L = t.config.train_length
        return {"ropes": " ".join(t.ropes) + f" (rerope window {rerope_window(L)}; dynamic_ntk read per bucket of positions)",
                "scales": "; ".join(sorted({f"{x.label}: " + " ".join(x.scales) for x in tasks})),
                "window": f"sliding window of {L} bytes, rope none, scale as trained",
                "measure": f"heads on {t.probe_windows} windows of {L}; entropy against n on {t.entropy_windows} windows "
                           f"of {max(t.lengths)}"}

    def summaries(self, table) -> list:
        """The ablation in loss, then in accuracy."""
        return [causal_markdown(table, "loss"), causal_markdown(table, "accuracy")]

    def evidence(self, table) -> list:
        """Every (trained scale, RoPE, test scale) against the window and against ``standard`` as trained.

        At each test length past ``L``, the whole-sequence values paired by seed; ``standard`` under
        the same RoPE variant.
        """
        r = table.rows
        good = tr.ok(table)
        try:
            cfg = TrainConfig.from_json(table.header.get("config", "{}"))
        except (TypeError, ValueError):
            return []
        L = cfg.train_length
        test = good & (r["kind"] == "test")
        window = good & (r["kind"] == "window")
        out = []
        for label, rope, scale in sorted(set(zip(r["scheme"][test], r["rope"][test], r["scale"][test]))):
            m = test & (r["scheme"] == label) & (r["rope"] == rope) & (r["scale"] == scale)
            name = label if scale == "trained" else f"{label} + {scale} at test"
            refs = [("window", window & (r["scheme"] == label))]
            if (label, scale) != (REFERENCE, "trained"):
                refs.append((REFERENCE, test & (r["scheme"] == REFERENCE) & (r["rope"] == rope)
                             & (r["scale"] == "trained")))
            for n in np.unique(r["length"][m]):
                if n <= L:
                    continue
                for ref_name, ref in refs:
                    for metric in ("loss", "accuracy"):
                        a, b = _per_seed(r, m, n, metric), _per_seed(r, ref, n, metric)
                        seeds = tuple(sorted(set(a) & set(b)))
                        if not seeds:
                            continue
                        d = np.array([a[sd] - b[sd] for sd in seeds])
                        out.append(Evidence(self.name, "byte-level decoder", cfg.n_params, "parameters", rope,
                                            "next byte", float(n) / L, name,
                                            "sliding window of L" if ref_name == "window" else ref_name, metric,
                                            float(np.mean(d)), float(tr.std(d)), seeds, cfg.d_model // cfg.heads, L,
                                            "bytes", values=tuple(float(x) for x in d)))
        return out


def _per_seed(r, mask, n, metric) -> dict:
    """``{seed: count-weighted mean of metric over the buckets of length n}`` for the rows in ``mask``."""
    m = mask & (r["length"] == n)
    out = {}
    for sd in np.unique(r["seed"][m]):
        mm = m & (r["seed"] == sd)
        w = r["count"][mm].astype(float)
        if w.sum():
            out[int(sd)] = float(np.sum(r[metric][mm] * w) / w.sum())
    return out


EXPERIMENT = CausalExperiment()

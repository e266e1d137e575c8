"""The copy experiment: whether a byte model trained at ``L`` copies a segment from farther back than ``L``.

The one-key regime of Su's repeated-text test (kexue.fm 9706/9708): a held-out segment ``X`` of
``m`` bytes followed by ``X`` again (:func:`~softmax_scale.train.tasks.copy_batch`), scored on
the bytes of the second copy, each a copy of the byte ``m`` back, beside the same bytes after
other text (:func:`~softmax_scale.train.tasks.copy_control`, what the model gets without the
copy) and beside a sliding window of ``L`` (which cannot see a copy farther than ``L``: a floor
here, not a ceiling).  Copy distances ``m = L/2 .. 8L`` (sequences of ``2m``, to ``16L``).

The models are :mod:`._one_key`'s (trained with copies inside ``L`` in the mix), under every RoPE
variant of :data:`~softmax_scale.experiments._one_key.ONE_KEY_ROPES` and the test-time scales
(as trained; ``qwen_logn`` and YaRN's temperature pinned at ``L``; the toolkit's two entropy
rules and its share-holding rule).  The retrieving head's share of attention on the source byte
is measured at every distance (RoPE ``none``) and predicted from what it shows at ``L``.

Every number is a row of ``figures/one_key_copy.csv``
(:data:`~softmax_scale.experiments._one_key.COLUMNS`; test kinds ``copy``, ``control``,
``window``), written a model at a time through :func:`softmax_scale.experiments.run_experiment`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..train.data import EVAL_SEED
from . import _one_key as ok
from . import _training as tr
from .base import Evidence

__all__ = ["COPY_MULTIPLES", "EXPERIMENT", "QUICK_CONFIG", "SHARE_ROPES", "CopyConfig", "CopyExperiment", "copy_differences",
           "copy_differences_markdown", "copy_markdown",
           "copy_summary"]

#: Copy distances as multiples of ``L``.
COPY_MULTIPLES = (0.5, 1, 2, 4, 8)


@dataclass(frozen=True)
class CopyConfig(ok.OneKeyConfig):
    """The copy experiment: :class:`~softmax_scale.experiments._one_key.OneKeyConfig` and the copy distances.

    Attributes
    ----------
    multiples : tuple of float
        Copy distances as multiples of ``L``.

    ``count`` is the scored bytes per test cell (``max(2, count // m)`` sequences at distance ``m``).
    """

    multiples: tuple = COPY_MULTIPLES

    def __post_init__(self):
        super().__post_init__()
        L = self.model.train_length
        for f in self.multiples:
            if not isinstance(f, (int, float)) or isinstance(f, bool) or not round(f * L) >= 1 or 2 * f * L > self.model.max_length:
                raise ValueError(f"`multiples`: each copy distance m = multiple x L ({L}) must be at least 1 byte and "
                                 f"2m at most max_length {self.model.max_length}, got {f!r}")


#: RoPE variants the retrieving head's share is measured under (those of the config): the trained
#: positions, and ``rerope``, whose relative positions never leave the trained range, so that only
#: the number of keys grows, the i.i.d. prediction's one assumption about length.
SHARE_ROPES = ("none", "rerope")

#: The quick form: the tiny model, two seeds, two RoPE variants, one distance past ``L``, small tests.
QUICK_CONFIG = CopyConfig(quick=True, seeds=2, model=ok.QUICK_ONE_KEY_MODEL, ropes=("none", "rerope"), multiples=(2,),
                          count=256, share_windows=1, probe_windows=4, entropy_windows=2, curve_every=10)


def _share_ropes(task) -> tuple:
    return tuple(r for r in SHARE_ROPES if r in task.ropes)


def _batches(m, count):
    """The copy test at distance ``m`` and its control: the same sequences for every model."""
    from ..train.data import heldout_bytes
    from ..train.tasks import copy_batch, copy_control

    seqs = max(2, count // m)
    text = heldout_bytes()
    gen = np.random.default_rng([EVAL_SEED, m])
    copy = copy_batch(text, 2 * m, m, seqs, gen)
    control = copy_control(text, 2 * m, m, seqs, np.random.default_rng([EVAL_SEED, m]))
    return copy, control


class CopyExperiment(ok.OneKeyExperiment):
    """The copy experiment (see the module docstring)."""

    name = "copy"
    description = "copying a segment from up to 8L back: trained scales, RoPE variants, test-time scales, the share"
    figure_names = ("one_key_copy",)
    full_config = CopyConfig()
    quick_config = QUICK_CONFIG

    def tests_of(self, config) -> tuple:
        """The copy distances ``m``."""
        L = config.model.train_length
        return tuple(max(1, round(f * L)) for f in config.multiples)

    def test_lengths(self, task) -> tuple:
        """``2m`` for each distance."""
        return tuple(2 * m for m in task.tests)

    def probe_batch(self, task):
        """Copies at distance ``L/2`` in sequences of ``L``."""
        from ..train.data import heldout_bytes
        from ..train.tasks import copy_batch

        L = task.config.train_length
        return copy_batch(heldout_bytes(), L, L // 2, task.probe_windows, np.random.default_rng([EVAL_SEED, 1, L]))

    def describe_tests(self, task) -> str:
        """Distances, sequences, scored bytes."""
        L = task.config.train_length
        return (f"copy distances m = {' '.join(str(m) for m in task.tests)} (L = {L}) in sequences of 2m, "
                f"max(2, {task.count} // m) held-out segments each; scored on the second copy; control: the same bytes "
                f"after other text; window: sliding window of {L}, rope none, scale as trained")

    def test_row_count(self, task) -> int:
        """Rows: copy + control per RoPE x scale x distance, a window row per distance, a share row per share RoPE x scale x distance."""
        k = len(task.tests)
        return 2 * len(task.ropes) * len(task.scales) * k + k + len(_share_ropes(task)) * len(task.scales) * k

    def test_rows(self, row, task, params, probe) -> list:
        """The copy, control, window and share rows of one model."""
        from ..train.evaluation import evaluate_batch

        c = task.config
        L = c.train_length
        rows = []

        def cell(kind, batch, rope, scale, m, kwargs):
            nll, correct, count = evaluate_batch(params, c, batch.batch, rope=rope, **kwargs)
            rows.append(row(task, "ok", kind, rope=rope, scale=scale, length=2 * m, distance=m,
                            loss=float(nll.sum() / count.sum()), accuracy=float(correct.sum() / count.sum()),
                            count=int(count.sum())))

        for m in task.tests:
            copy, control = _batches(m, task.count)
            scales = ok.scales_of(task, probe, 2 * m)
            for rope in task.ropes:
                for scale, kwargs, _ in scales:
                    cell("copy", copy, rope, scale, m, kwargs)
                    cell("control", control, rope, scale, m, kwargs)
            cell("window", copy, "none", "trained", m, {"window": L})
            w = task.share_windows
            for rope in _share_ropes(task):
                for scale, kwargs, factors in scales:
                    rows.append(ok.share_row(row, task, probe, params, copy.batch.inputs[:w], copy.source[:w], scale,
                                             kwargs, factors, rope=rope, length=2 * m, distance=m))
        return rows

    def summaries(self, table) -> list:
        """Copy accuracy, copy loss, and the retrieving head's share measured against predicted."""
        return [copy_markdown(table, "accuracy"), copy_markdown(table, "loss"), copy_differences_markdown(table, "accuracy"),
                copy_differences_markdown(table, "loss"), ok.share_markdown(table, "length")]

    def evidence(self, table) -> list:
        """Every (trained scale, RoPE, test scale) against ``standard`` as trained and against the window, past ``L``."""
        from ..train.config import TrainConfig

        try:
            cfg = TrainConfig.from_json(table.header.get("config", "{}"))
        except (TypeError, ValueError):
            return []
        s = copy_summary(table)
        L = s["L"]
        out = []
        for (label, rope, scale), v in sorted(s["rows"].items()):
            if scale == "window":
                continue
            name = label if scale == "trained" else f"{label} + {scale} at test"
            refs = [("sliding window of L", s["rows"].get((label, "none", "window")))]
            if (label, scale) != (ok.REFERENCE, "trained"):
                refs.append((ok.REFERENCE, s["rows"].get((ok.REFERENCE, rope, "trained"))))
            for i, m in enumerate(s["distances"]):
                if 2 * m <= L:  # the copy at distance m is read in a sequence of 2m keys
                    continue
                for ref_name, ref in refs:
                    if ref is None:
                        continue
                    for metric in ("accuracy", "loss"):
                        p = ok.paired(v[f"{metric}_by_seed"][i], ref[f"{metric}_by_seed"][i])
                        if p is not None:
                            out.append(Evidence(self.name, "byte-level decoder", cfg.n_params, "parameters", rope,
                                                "copy a segment m bytes back", 2.0 * m / L, name, ref_name, metric,
                                                *p[:3], cfg.d_model // cfg.heads, L, "bytes", values=p[3]))
        return out


def copy_column(m: int, L: int) -> str:
    """A copy cell's column as the tables print it: the keys ``n = 2m`` it is read among over ``L``, then the distance."""
    return f"n = {2 * m} ({2 * m / L:g}L), m = {m}" if L else f"n = {2 * m}, m = {m}"


def copy_summary(table) -> dict:
    """Copy accuracy and loss per (trained scale, RoPE, test scale) and distance, over seeds.

    Returns ``{"L", "distances", "rows": {(label, rope, scale): {"accuracy", "accuracy_std", "accuracy_n",
    "loss", "loss_std", "loss_n", "seeds", "accuracy_by_seed", "loss_by_seed"}}, "control": {...},
    "diverged"}``; the window under the key ``(label, "none", "window")``; arrays over the
    distances (mean, sample std, ``*_n`` the seeds), ``*_by_seed`` a list over the distances of
    ``{seed: value}``.
    """
    r = table.rows
    good = tr.ok(table)
    out: dict = {"diverged": tr.diverged_runs(table), "rows": {}, "control": {}}
    test = good & np.isin(r["kind"], ("copy", "control", "window"))
    dist = np.unique(r["distance"][test])
    runs = good & (r["kind"] == "head_L")
    out["L"] = int(r["length"][runs][0]) if runs.any() else 0
    out["distances"] = dist
    for kind, where in (("copy", "rows"), ("window", "rows"), ("control", "control")):
        m0 = test & (r["kind"] == kind)
        for key in sorted(set(zip(r["scheme"][m0], r["rope"][m0], r["scale"][m0]))):
            m = m0 & (r["scheme"] == key[0]) & (r["rope"] == key[1]) & (r["scale"] == key[2])
            entry = {"seeds": int(np.unique(r["seed"][m]).size)}
            for metric in ("accuracy", "loss"):
                by = [{int(sd): float(v) for sd, v in zip(r["seed"][m & (r["distance"] == d)],
                                                          r[metric][m & (r["distance"] == d)])} for d in dist]
                entry[f"{metric}_by_seed"] = by
                mean = np.array([np.mean(list(b.values())) if b else np.nan for b in by])
                sd = np.array([tr.std(np.array(list(b.values()))) if b else np.nan for b in by])
                entry[metric], entry[f"{metric}_std"] = mean, sd
                entry[f"{metric}_n"] = np.array([len(b) for b in by])
            name = (key[0], key[1], "window" if kind == "window" else key[2])
            out[where][name] = entry
    return out


def copy_markdown(table, metric: str = "accuracy") -> str:
    """Rows trained scale x RoPE x test scale, columns the copy distances: mean ± standard error over seeds.

    The control (the same bytes without the copy, under the same RoPE and scale) follows each
    row in brackets; the sliding window's row comes first.  Accuracy in %, loss in nats per byte.
    """
    from .._util.validation import check_choice

    check_choice(metric, "metric", ("accuracy", "loss"))
    s = copy_summary(table)
    L, dist = s["L"], s["distances"]
    mult, dig = (100.0, 1) if metric == "accuracy" else (1.0, 3)
    unit = "accuracy % on the second copy" if metric == "accuracy" else "loss on the second copy, nats per byte"
    head = [copy_column(m, L) for m in dist]
    lines = [f"| trained | RoPE | scale ({unit}, mean ± standard error over seeds; [control]; seeds) | " + " | ".join(head) + " |",
             "|---|---|---|" + "---:|" * len(dist)]
    order = sorted(s["rows"], key=lambda k: (k[0] != ok.REFERENCE, k[0], k[2] != "window", k[1], k[2] != "trained", k[2]))
    for key in order:
        v = s["rows"][key]
        ctl = s["control"].get(key)
        cells = []
        for i in range(dist.size):
            c = tr.pm(v[metric][i], v[f"{metric}_std"][i], v[f"{metric}_n"][i], mult, dig)
            if ctl is not None and np.isfinite(ctl[metric][i]):
                c += f" [{mult * ctl[metric][i]:.{dig}f}]"
            cells.append(c)
        scale = "sliding window of L" if key[2] == "window" else key[2]
        lines.append(f"| {key[0]} | {key[1]} | {scale} ({v['seeds']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines + tr.diverged_line(s["diverged"]))


def copy_differences(table, metric: str = "accuracy", reference: str = "trained") -> dict:
    """Each (trained scale, RoPE, test scale) minus ``standard`` under ``reference``, and each copy minus its control, by seed.

    ``reference`` is the test scale of the ``standard`` rows subtracted (its label in the file, e.g.
    ``"qwen_logn@128"``; default as trained), under the same RoPE variant.

    Returns ``{"L", "distances", "scales": {(label, rope, scale): [(mean, std, above, seeds) per
    distance]}, "copying": {(label, rope, scale): [...]}}``: ``mean`` and ``std`` (sample) of the
    per-seed differences, ``above`` the number of seeds whose difference is positive, ``seeds``
    their number; ``None`` where no seed has both.  ``copying`` is what the copy adds over the
    same bytes without it (:func:`~softmax_scale.train.tasks.copy_control`), the window excluded.
    """
    from .._util.validation import check_choice

    check_choice(metric, "metric", ("accuracy", "loss"))
    s = copy_summary(table)
    check_choice(reference, "reference", sorted({k[2] for k in s["rows"] if k[0] == ok.REFERENCE and k[2] != "window"}))
    by = f"{metric}_by_seed"

    def diff(a, b):
        out = []
        for x, y in zip(a[by], b[by]):
            p = ok.paired(x, y)
            out.append(None if p is None else (p[0], p[1], int(sum(x[sd] > y[sd] for sd in p[2])), len(p[2])))
        return out

    scales, copying = {}, {}
    for key, v in s["rows"].items():
        ref = s["rows"].get((ok.REFERENCE, key[1], reference))
        if ref is not None and key != (ok.REFERENCE, key[1], reference) and key[2] != "window":
            scales[key] = diff(v, ref)
        if key in s["control"]:
            copying[key] = diff(v, s["control"][key])
    return {"L": s["L"], "distances": s["distances"], "scales": scales, "copying": copying}


def copy_differences_markdown(table, metric: str = "accuracy") -> str:
    """:func:`copy_differences` as two tables: what the copy adds over its control, then each scale minus ``standard``.

    Cells: mean ± standard error of the per-seed differences (accuracy in points, loss in nats per
    byte), then how many seeds are above zero of how many.
    """
    d = copy_differences(table, metric)
    L, dist = d["L"], d["distances"]
    mult, dig = (100.0, 1) if metric == "accuracy" else (1.0, 3)
    unit = "accuracy points" if metric == "accuracy" else "loss, nats per byte"
    head = " | ".join(copy_column(m, L) for m in dist)

    def cell(x):
        if x is None:
            return ""
        return f"{tr.pm(x[0], x[1], x[3], mult, dig, sign=True)} ({x[2]}/{x[3]})"

    def order(k):
        return (k[0] != ok.REFERENCE, k[0], k[1], k[2] != "trained", k[2])

    lines = [f"| trained | RoPE | scale (copy minus control, {unit}, mean ± standard error over seeds; seeds above) | {head} |",
             "|---|---|---|" + "---:|" * len(dist)]
    lines += [f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cell(x) for x in d["copying"][k]) + " |"
              for k in sorted(d["copying"], key=order)]
    lines += ["", f"| trained | RoPE | scale (minus {ok.REFERENCE} as trained, {unit}, mean ± standard error over seeds; "
              f"seeds above) | {head} |",
              "|---|---|---|" + "---:|" * len(dist)]
    lines += [f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cell(x) for x in d["scales"][k]) + " |"
              for k in sorted(d["scales"], key=order)]
    return "\n".join(lines)


EXPERIMENT = CopyExperiment()


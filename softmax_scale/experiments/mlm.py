"""The note's table (kexue.fm 8823) retrained: masked LMs trained at 64 with each scale, tested up to 1024.

Masked LM at training length 64, trained with ``standard``, ``entropy_invariant`` pinned at 512
(``log_512 n``, as in the note), ``ssmax`` and ``alpha_star``, the same data order per seed; each
model tested at 64, 128, 256, 512, 1024 on the held-out text (the same masked positions for every
model), and each ``standard`` model also with ``max(1, log_64 n)`` applied at test time only
(``qwen_logn`` pinned at 64).  The quick form runs the same pipeline on a tiny model.  Rows:
:data:`._training.COLUMNS`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..train.config import QUICK, TrainConfig
from . import _training as tr
from .base import Evidence, at_test_label

__all__ = ["DEFAULT_CONFIG", "EXPERIMENT", "LOGN_AT_TEST", "MLM_LENGTHS", "MLM_SCALES", "PUBLISHED", "MLMConfig",
           "MLMExperiment", "mlm_markdown", "mlm_summary"]

#: The scales trained in: (scheme, pin length).
MLM_SCALES = (("standard", None), ("entropy_invariant", 512), ("ssmax", None), ("alpha_star", None))
#: The scale every other is compared with, and the one the test-time scale is added to.
REFERENCE = MLM_SCALES[0][0]
#: Test lengths (the note's).
MLM_LENGTHS = (64, 128, 256, 512, 1024)
#: The test-time scale applied to each ``standard`` model: max(1, log_64 n) (pinned at ``L`` in the quick form).
LOGN_AT_TEST = ("qwen_logn", 64)
#: The model and optimiser of the masked-LM experiments.
DEFAULT_CONFIG = TrainConfig()

#: The note's table (kexue.fm 8823): RoFormer-small, masked LM trained at 64, masked-token accuracy (%).
PUBLISHED = {
    "lengths": (64, 128, 256, 512, 1024),
    "Attention-O, 1/sqrt(d)": (43.27, 36.53, 23.02, 15.12, 11.54),
    "Attention-E, log_512(n)/sqrt(d)": (43.11, 41.17, 34.04, 20.15, 13.58),
}


@dataclass(frozen=True)
class MLMConfig:
    """The mlm experiment: runs, test lengths, measurements.

    Attributes
    ----------
    quick : bool
    seeds : int
        Seeds per trained scale (``0 .. seeds - 1``).
    model : TrainConfig
        The model and optimiser (the objective and scale are set per run).
    scales : tuple of (str, int or None)
        The scales trained in, ``(scheme, pin length)``.
    lengths : tuple of int
        Test lengths.
    logn_at_test : (str, int)
        The test-time scale added to each ``standard`` model.
    curve_every, eval_tokens, short_budget : int
        Steps per curve point, held-out bytes per test length, the header's short budget.
    """

    quick: bool = False
    seeds: int = 3
    model: TrainConfig = DEFAULT_CONFIG
    scales: tuple = MLM_SCALES
    lengths: tuple = MLM_LENGTHS
    logn_at_test: tuple = LOGN_AT_TEST
    curve_every: int = 50
    eval_tokens: int = 32768
    short_budget: int = 300


#: The quick form: the tiny model, test lengths L, 2L, 4L, the test-time scale pinned at L.
QUICK_CONFIG = MLMConfig(quick=True, seeds=2, model=QUICK, lengths=(16, 32, 64), logn_at_test=(LOGN_AT_TEST[0], 16),
                         curve_every=10, eval_tokens=2048, short_budget=10)


class MLMExperiment(tr.TrainingExperiment):
    """The mlm experiment (see the module docstring)."""

    name = "mlm"
    description = "masked LMs trained at 64 with each scale, tested at 64 to 1024 (the note's table)"
    columns, text, ints = tr.COLUMNS, tr.TEXT, tr.INTS
    row_defaults = {"scale": "trained"}
    figure_names = ("train_mlm",)
    reference = REFERENCE

    def config(self, quick: bool = False) -> MLMConfig:
        """:class:`MLMConfig` or its quick form."""
        return QUICK_CONFIG if quick else MLMConfig()

    def tasks(self, config: MLMConfig, *, out=None, progress: bool = False) -> list:
        """One task per (seed, trained scale), seeds outermost."""
        base = config.model.replace(objective="mlm", scheme=REFERENCE, alpha=None, pin_length=None)
        runs = [(base.replace(scheme=s, pin_length=p), (config.logn_at_test,) if s == REFERENCE else ())
                for s, p in config.scales]
        show = progress and not config.quick
        return [tr.Task(c.label(), seed, c, tuple(config.lengths), tuple(o), config.curve_every, False,
                        config.eval_tokens, self.checkpoint(out, c.label(), seed), show)
                for seed in range(config.seeds) for c, o in runs]

    def run_task(self, task) -> list:
        """:func:`._training.run_task`."""
        return tr.run_task(self, task)

    def expected_rows(self, task) -> int:
        """:func:`._training.expected_rows`."""
        return tr.expected_rows(task)

    def summaries(self, table) -> list:
        """Accuracy (beside the published table), then loss."""
        return [mlm_markdown(table, "accuracy"), mlm_markdown(table, "loss")]

    def evidence(self, table) -> list:
        """Each trained scale (and the test-time one) against ``standard`` at every test length, paired by seed."""
        r = table.rows
        good = tr.ok(table) & (r["kind"] == "test")
        cfg = _model(table)
        L = int(cfg.get("train_length", 64))
        size = _parameters(cfg)
        ref = good & (r["scheme"] == REFERENCE) & (r["scale"] == "trained")
        out = []
        for label, scale in sorted(set(zip(r["scheme"][good], r["scale"][good]))):
            if (label, scale) == (REFERENCE, "trained"):
                continue
            m = good & (r["scheme"] == label) & (r["scale"] == scale)
            name = label if scale == "trained" else at_test_label(label, scale)
            for n in np.unique(r["x"][m]):
                for metric in ("loss", "accuracy"):
                    d, seeds = _paired(r, m & (r["x"] == n), ref & (r["x"] == n), metric)
                    if seeds:
                        out.append(Evidence(self.name, "byte-level masked LM", size, "parameters", "none",
                                            "masked bytes", float(n) / L, name, REFERENCE, metric, float(np.mean(d)),
                                            float(tr.std(d)), seeds, _head_dim(cfg), L, "bytes",
                                            values=tuple(float(x) for x in d)))
        return out


def _model(table) -> dict:
    import json

    return json.loads(table.header.get("config", "{}"))


def _head_dim(cfg: dict) -> int:
    try:
        c = TrainConfig(**cfg)
    except (TypeError, ValueError):
        return 0
    return c.d_model // c.heads


def _parameters(cfg: dict) -> int:
    try:
        return TrainConfig(**cfg).n_params
    except (TypeError, ValueError):
        return 0


def _paired(r, m, ref, metric):
    """Per seed present on both sides: ``metric`` under ``m`` minus under ``ref``; the differences and the seeds."""
    a = {int(s): v for s, v in zip(r["seed"][m], r[metric][m])}
    b = {int(s): v for s, v in zip(r["seed"][ref], r[metric][ref])}
    seeds = tuple(sorted(set(a) & set(b)))
    return np.array([a[s] - b[s] for s in seeds], dtype=float), seeds


def mlm_summary(table) -> dict:
    """Per (trained scale, test scale): test lengths, mean and sample std over seeds of accuracy and loss.

    Returns ``{(label, scale): {"lengths", "accuracy", "accuracy_std", "accuracy_n", "loss", "loss_std",
    "loss_n", "seeds"}}`` (``*_n``: the seeds at each length) and, under ``"diverged"``, the
    ``(label, seed)`` pairs that diverged.
    """
    r = table.rows
    out: dict = {"diverged": tr.diverged_runs(table)}
    test = tr.ok(table) & (r["kind"] == "test")
    for key in sorted(set(zip(r["scheme"][test], r["scale"][test]))):
        m = test & (r["scheme"] == key[0]) & (r["scale"] == key[1])
        lengths = np.unique(r["x"][m])
        acc = [r["accuracy"][m & (r["x"] == n)] for n in lengths]
        loss = [r["loss"][m & (r["x"] == n)] for n in lengths]
        out[key] = {"lengths": lengths, "seeds": min(len(a) for a in acc),
                    "accuracy": np.array([a.mean() for a in acc]), "loss": np.array([x.mean() for x in loss]),
                    "accuracy_std": np.array([tr.std(a) for a in acc]),
                    "loss_std": np.array([tr.std(x) for x in loss]),
                    "accuracy_n": np.array([a.size for a in acc]), "loss_n": np.array([x.size for x in loss])}
    return out


def mlm_markdown(table, metric: str = "accuracy") -> str:
    """The result as a markdown table, mean ± standard error over seeds: ``"accuracy"`` (%, beside the published table) or ``"loss"``."""
    from .._util.validation import check_choice

    check_choice(metric, "metric", ("accuracy", "loss"))
    s = mlm_summary(table)
    order = {k: i for i, k in enumerate(TrainConfig(scheme=sc, pin_length=p).label() for sc, p in MLM_SCALES)}
    keys = sorted((k for k in s if k != "diverged"), key=lambda k: (order.get(k[0], 9), k[0], k[1] != "trained"))
    lengths = s[keys[0]]["lengths"] if keys else ()
    unit = "accuracy %" if metric == "accuracy" else "loss, nats per masked byte"
    lines = [f"| model (seeds), {unit}, mean ± standard error over seeds | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|" + "---:|" * len(lengths)]
    for key in keys:
        v = s[key]
        name = key[0] if key[1] == "trained" else f"{key[0]}, {key[1]} at test only"
        cells = (tr.pm(a, sd, k, 100) if metric == "accuracy" else tr.pm(a, sd, k, digits=3)
                 for a, sd, k in zip(v[metric], v[f"{metric}_std"], v[f"{metric}_n"]))
        lines.append(f"| {name} ({v['seeds']}) | " + " | ".join(cells) + " |")
    if metric == "loss":
        return "\n".join(lines)
    lines.append("")
    lines.append("| published (kexue.fm 8823) | " + " | ".join(str(n) for n in PUBLISHED["lengths"]) + " |")
    lines.append("|---|" + "---:|" * len(PUBLISHED["lengths"]))
    for name in list(PUBLISHED)[1:]:
        lines.append(f"| {name} | " + " | ".join(f"{x:.2f}" for x in PUBLISHED[name]) + " |")
    return "\n".join(lines + tr.diverged_line(s["diverged"]))


EXPERIMENT = MLMExperiment()

"""The gradient-maximising alpha in training: masked LMs at 64 with a constant factor on unit-variance scores.

A constant factor ``alpha`` over a doubling grid (:data:`ALPHA_GRID`, 0.125 to 8) bracketing
``optimal_alpha(64)`` (mean-field, 1.55) and ``optimal_alpha(64, objective="geometric")`` (3.00
at rng=0), plus ``alpha_star`` per query; the training loss after a short budget (the curve point
at :data:`SHORT_BUDGET` steps) and at the end, the held-out loss at 64, and each head's ``sigma``
at initialisation and at the end.  Rows: :data:`._training.COLUMNS`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..train.config import QUICK, TrainConfig
from . import _training as tr
from .base import Evidence
from .mlm import DEFAULT_CONFIG

__all__ = ["ALPHA_GRID", "EXPERIMENT", "SHORT_BUDGET", "AlphaConfig", "AlphaExperiment", "alpha_markdown",
           "alpha_summary"]

#: The constant factors, doubling from 0.125 to 8 (1 is ``standard``): 0.5 .. 8 brackets both
#: alpha*(64), 0.125 and 0.25 show where the loss stops falling.
ALPHA_GRID = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: The short budget (steps).
SHORT_BUDGET = 300
#: The constant-factor scheme, and the per-query scale beside it.
CONSTANT, PER_QUERY = "alpha", "alpha_star"
#: The scheme of the base configuration (replaced in every run).
BASE = "standard"


@dataclass(frozen=True)
class AlphaConfig:
    """The alpha experiment.

    Attributes
    ----------
    quick : bool
    seeds : int
        Seeds per scale.
    model : TrainConfig
        The model and optimiser (trained and tested at its training length).
    grid : tuple of float
        The constant factors.
    curve_every, eval_tokens, short_budget : int
        Steps per curve point, held-out bytes, the short budget (steps; a curve point).
    """

    quick: bool = False
    seeds: int = 2
    model: TrainConfig = DEFAULT_CONFIG
    grid: tuple = ALPHA_GRID
    curve_every: int = 50
    eval_tokens: int = 32768
    short_budget: int = SHORT_BUDGET


#: The quick form: the tiny model, three factors.
QUICK_CONFIG = AlphaConfig(quick=True, model=QUICK, grid=(0.5, 2.0, 8.0), curve_every=10, eval_tokens=2048,
                           short_budget=10)


class AlphaExperiment(tr.TrainingExperiment):
    """The alpha experiment (see the module docstring)."""

    name = "alpha"
    description = "masked LMs trained at 64 with a constant alpha on unit-variance scores (0.125 to 8) and alpha_star"
    columns, text, ints = tr.COLUMNS, tr.TEXT, tr.INTS
    row_defaults = {"scale": "trained"}
    figure_names = ("train_alpha",)
    reference = BASE

    def config(self, quick: bool = False) -> AlphaConfig:
        """:class:`AlphaConfig` or its quick form."""
        return QUICK_CONFIG if quick else AlphaConfig()

    def tasks(self, config: AlphaConfig, *, out=None, progress: bool = False) -> list:
        """One task per (seed, scale): each constant factor, then ``alpha_star``."""
        base = config.model.replace(objective="mlm", scheme=BASE, alpha=None, pin_length=None)
        runs = [base.replace(scheme=CONSTANT, alpha=float(a)) for a in config.grid] + [base.replace(scheme=PER_QUERY)]
        show = progress and not config.quick
        return [tr.Task(c.label(), seed, c, (base.train_length,), (), config.curve_every, True, config.eval_tokens,
                        self.checkpoint(out, c.label(), seed), show)
                for seed in range(config.seeds) for c in runs]

    def run_task(self, task) -> list:
        """:func:`._training.run_task`."""
        return tr.run_task(self, task)

    def expected_rows(self, task) -> int:
        """:func:`._training.expected_rows`."""
        return tr.expected_rows(task)

    def summaries(self, table) -> list:
        """One table: the losses and the heads' sigma per scale."""
        return [alpha_markdown(table)]

    def evidence(self, table) -> list:
        """Each constant factor's held-out loss and accuracy at ``L`` against ``alpha_star``'s, paired by seed."""
        s = alpha_summary(table)
        if PER_QUERY not in s:
            return []
        cfg = table.header.get("config", "{}")
        try:
            size = TrainConfig.from_json(cfg).n_params
        except (TypeError, ValueError):
            size = 0
        ref = s[PER_QUERY]
        out = []
        for label in sorted(k for k in s if k not in ("short_budget", "diverged", PER_QUERY)):
            v = s[label]
            seeds = tuple(int(x) for x in sorted(set(v["seeds"].tolist()) & set(ref["seeds"].tolist())))
            if not seeds:
                continue
            i = [v["seeds"].tolist().index(x) for x in seeds]
            j = [ref["seeds"].tolist().index(x) for x in seeds]
            for metric, key in (("loss", "test_loss"), ("accuracy", "test_accuracy")):
                d = v[key][i] - ref[key][j]
                out.append(Evidence(self.name, "byte-level masked LM", size, "parameters", "none", "masked bytes", 1.0,
                                    label, PER_QUERY, metric, float(np.mean(d)), float(tr.std(d)), seeds,
                                    values=tuple(float(x) for x in d)))
        return out


def alpha_summary(table) -> dict:
    """Per trained scale: the loss at the short budget and at the end, the heads' sigma.

    Per scale the constant ``alpha`` (NaN for ``alpha_star``), and per seed the training loss at
    the short budget and at the end, the held-out loss and accuracy at the training length,
    each head's ``sigma`` at initialisation and at the end.

    Returns ``{label: {"alpha", "seeds", "short", "final", "test_loss", "test_accuracy",
    "sigma_init", "sigma_end"}}`` (arrays over seeds; sigmas ``[seeds, layers * heads]``), the
    short budget under ``"short_budget"`` and diverged ``(label, seed)`` pairs under ``"diverged"``.
    """
    r = table.rows
    budget = int(table.header.get("short_budget", SHORT_BUDGET))
    good = tr.ok(table)
    out: dict = {"short_budget": budget, "diverged": tr.diverged_runs(table)}
    for label in sorted(set(r["scheme"][good])):
        m = good & (r["scheme"] == label)
        seeds = np.unique(r["seed"][m])

        def pick(kind, column, x=None, seed_mask=m, seeds=seeds):
            rows = seed_mask & (r["kind"] == kind) & (True if x is None else r["x"] == x)
            return np.array([r[column][rows & (r["seed"] == sd)] for sd in seeds], dtype=float)

        alpha = float(label.split("=", 1)[1]) if label.startswith(f"{CONSTANT}=") else np.nan
        out[label] = {"alpha": alpha, "seeds": seeds, "short": pick("curve", "loss", budget)[:, 0],
                      "final": pick("run", "loss")[:, 0], "test_loss": pick("test", "loss")[:, 0],
                      "test_accuracy": pick("test", "accuracy")[:, 0], "sigma_init": pick("sigma_init", "sigma"),
                      "sigma_end": pick("sigma_end", "sigma")}
    return out


def alpha_markdown(table) -> str:
    """The result as a markdown table, mean ± standard error over seeds, one row per scale in order of ``alpha``."""
    s = alpha_summary(table)
    b = s["short_budget"]
    lines = [f"| scale (seeds; mean ± standard error over seeds) | train loss at {b} steps | final train loss | "
             "held-out loss | held-out acc. % | "
             "sigma at init (mean over heads) | sigma at end: mean [min, max] |", "|---|---:|---:|---:|---:|---:|---|"]
    labels = sorted((k for k in s if k not in ("short_budget", "diverged")),
                    key=lambda k: (np.isnan(s[k]["alpha"]), s[k]["alpha"]))
    for k in labels:
        v = s[k]
        se = v["sigma_end"]
        lines.append(f"| {k} ({len(v['seeds'])}) | {tr.pm_of(v['short'], digits=3)} | {tr.pm_of(v['final'], digits=3)} | "
                     f"{tr.pm_of(v['test_loss'], digits=3)} | {tr.pm_of(v['test_accuracy'], 100)} | "
                     f"{np.mean(v['sigma_init']):.2f} | {np.mean(se):.2f} [{np.min(se):.2f}, {np.max(se):.2f}] |")
    return "\n".join(lines + tr.diverged_line(s["diverged"]))


EXPERIMENT = AlphaExperiment()

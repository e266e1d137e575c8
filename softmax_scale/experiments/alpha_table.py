"""The alpha* table: mean-field optimal scales over the note's grid, with the fitted laws.

:func:`alpha_table` computes it (the main job, ``softmax-scale figures``, adds the Monte Carlo
objective tables and writes ``alpha_table.md`` and ``alpha_table.csv``); the experiment
``alpha_table`` (:data:`EXPERIMENT`, ``softmax-scale run alpha_table``) computes the same columns
as a resumable result file, one task per score distribution, and ``softmax-scale table`` prints
the table.
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from .._util.store import as_written, format_value, source_revision
from ..laws import LAW_FORMS, compare_alpha_laws
from ..optimize import optimal_alpha
from .base import Experiment

__all__ = ["ALPHA_FORMAT", "EXPERIMENT", "NOTE_GRID", "OBJECTIVE_TRIALS", "QUICK_OBJECTIVE_NS", "QUICK_OBJECTIVE_TRIALS", "TABLE_ROWS",
           "AlphaTable", "AlphaTableConfig", "AlphaTableExperiment", "alpha_table", "objective_tables", "score_columns",
           "table_from_columns"]

#: The note's grid: n = 40, 80, ..., 20000.
NOTE_GRID = np.arange(40, 20001, 40)
#: Rows shown in the printed table (the CSV has the whole grid).
TABLE_ROWS = (40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20000)
#: Monte Carlo trials per ``n`` of the typical/geometric objective tables (table and figure share them).
OBJECTIVE_TRIALS = 4000
#: The same for a smoke run (``--quick``).
QUICK_OBJECTIVE_NS, QUICK_OBJECTIVE_TRIALS = (40, 640, 10240), 1000
#: How result files write ``alpha*``: 10 significant digits, what the mean-field optimiser guarantees.
#: It is polished to about 1e-12 relative, and ``tests/test_optimize.py`` holds it within 1e-11 of
#: the closed form (Lambert W) over the grid for normal scores; the last digit written is 1e-10 to 1e-9 relative,
#: a hundred times more than two CPUs' results differ (AVX2 against AVX-512: at most 9e-13), so every
#: CPU writes the same file.
ALPHA_FORMAT = ".10g"


@dataclass(frozen=True)
class AlphaTable:
    """Optimal scales per ``n`` and the laws fitted to them.

    Attributes
    ----------
    ns : ndarray
        The ``n`` grid.
    columns : dict
        Column label -> ``alpha*`` values over ``ns`` (e.g. ``"normal"``,
        ``"cosine(d=128)"``).
    fits : dict
        Column label -> ``{form: LawFit}`` (best RMSE first).
    notes : list of str
        Lines printed under the table.
    objectives : dict
        Column label -> :class:`softmax_scale.objectives.typical.ObjectiveTable` (``alpha*``
        under the typical, geometric and expected objectives on a subgrid), or
        empty when not computed.
    cosine_d : int
        Dimension of the cosine scores.
    """

    ns: np.ndarray
    columns: dict
    fits: dict
    notes: list = field(default_factory=list)
    objectives: dict = field(default_factory=dict)
    cosine_d: int = 128

    def to_markdown(self, rows=TABLE_ROWS) -> str:
        """The table at ``rows`` and the fitted laws, as Markdown."""
        labels = list(self.columns)
        out = ["| n | " + " | ".join(f"alpha* {c}" for c in labels) + " |"]
        out.append("|---:|" + "---:|" * len(labels))
        for n in rows:
            i = int(np.searchsorted(self.ns, n))
            if i >= self.ns.size or self.ns[i] != n:
                continue
            out.append(f"| {n} | " + " | ".join(_fmt(self.columns[c][i]) for c in labels) + " |")
        out.append("")
        out.append(f"Laws fitted by least squares over n = {self.ns[0]}..{self.ns[-1]} ({self.ns.size} points):")
        out.append("")
        out.append("| scores | law | coefficients | RMSE | max rel. error | R^2 |")
        out.append("|---|---|---|---:|---:|---:|")
        for c, fits in self.fits.items():
            for fit in fits.values():
                coef = ", ".join(f"{k} = {v:.4g}" for k, v in fit.params.items())
                out.append(
                    f"| {c} | {fit.formula} | {coef} | {fit.rmse:.3g} | {fit.max_rel_error:.2%} | {fit.r2:.5f} |"
                )
        if self.notes:
            out.append("")
            out.extend(self.notes)
        for c, ot in self.objectives.items():
            out.append("")
            out.append(
                f"**{c} scores: alpha* under the other objectives** (Monte Carlo on {ot.trials} common draws per n, "
                "standard errors: bootstrap over the draws; `expected` has no finite maximiser, its supremum f_gap(0) is shown):"
            )
            out.append("")
            out.append("| n | mean-field | typical (median G) | geometric (exp E[log G]) | expected: alpha* | sup E[G] |")
            out.append("|---:|---:|---:|---:|---:|---:|")
            for r in ot.rows():
                out.append(
                    f"| {r['n']} | {r['mean_field']:.4f} | {r['typical']:.3f} ± {r['typical_se']:.2f} | "
                    f"{r['geometric']:.3f} ± {r['geometric_se']:.2f} | inf | {r['expected_sup']:.4g} |"
                )
            out.append("")
            for name, fit in (("typical", ot.typical_fit), ("geometric", ot.geometric_fit)):
                out.append(
                    f"- {name}: alpha* ~ {fit.params['c']:.3f} sqrt(log n) (RMSE {fit.rmse:.3g}, R^2 {fit.r2:.3f})"
                )
        return "\n".join(out) + "\n"

    def to_csv(self) -> str:
        """Every ``n`` of the grid with every column, as CSV (``alpha*`` to :data:`ALPHA_FORMAT`)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["n", *self.columns])
        for i, n in enumerate(self.ns):
            w.writerow([int(n), *(format_value(float(self.columns[c][i]), ALPHA_FORMAT) for c in self.columns)])
        return buf.getvalue()


def _fmt(x) -> str:
    x = float(x)
    return "inf" if np.isinf(x) else f"{x:.4f}"


def alpha_table(
    ns=NOTE_GRID,
    *,
    cosine_d: int = 128,
    forms=tuple(LAW_FORMS),
    objectives: bool = False,
    objective_ns=TABLE_ROWS,
    trials: int = OBJECTIVE_TRIALS,
    rng=0,
    tables: dict | None = None,
    progress: bool | None = None,
) -> AlphaTable:
    """Mean-field ``alpha*`` for normal and cosine(d) scores over ``ns`` (to :data:`ALPHA_FORMAT`), with every law fitted.

    Parameters
    ----------
    ns : array_like
        Grid of ``n`` (default: the note's 40, 80, ..., 20000).
    cosine_d : int
        Dimension of the cosine scores.
    forms : sequence of str
        Law forms to fit (see :data:`softmax_scale.laws.LAW_FORMS`).
    objectives : bool
        Also compute ``alpha*`` under the typical, geometric and expected
        objectives at ``objective_ns`` (Monte Carlo, ``trials`` draws per ``n``,
        seed ``rng``; about a minute for the default rows).
    objective_ns, trials, rng
        Grid, trials and seed of those objectives.
    tables : dict, optional
        The objective tables already computed (from :func:`objective_tables`), used
        instead of computing them: the main job shares them with a figure.
    progress : bool, optional
        Progress bars over the objectives' ``n`` (by default only where the draws are many).
    """
    ns = np.asarray(ns)
    columns = {label: as_written(optimal_alpha(ns, dist, d=d), ALPHA_FORMAT) for label, dist, d in score_columns(cosine_d)}
    extra = {}
    if tables is not None:
        extra = dict(tables)
    elif objectives:
        extra = objective_tables(objective_ns, cosine_d=cosine_d, trials=trials, rng=rng, progress=progress)
    return table_from_columns(ns, columns, cosine_d=cosine_d, forms=forms, objectives=extra)


def score_columns(cosine_d: int = 128) -> tuple:
    """The table's columns: ``(label, dist, d)`` for normal scores and cosine scores of dimension ``cosine_d``."""
    return (("normal", "normal", None), (f"cosine(d={cosine_d})", "cosine", cosine_d))


def table_from_columns(ns, columns: dict, *, cosine_d: int = 128, forms=tuple(LAW_FORMS), objectives=None) -> AlphaTable:
    """The :class:`AlphaTable` of the ``alpha*`` columns over ``ns`` (keyed as :func:`score_columns`): every law fitted, the notes."""
    ns = np.asarray(ns)
    fits = {c: compare_alpha_laws(ns, a, forms) for c, a in columns.items()}
    cos = fits[f"cosine(d={cosine_d})"]
    notes = [
        f"Normal scores: c sqrt(log n) with c = {fits['normal']['sqrt_log'].params['c']:.4f} (the note's 0.84).",
        f"Cosine scores, d = {cosine_d}: c log n gives c = {cos['log'].params['c']:.4f} (the source's 3.5 log n, "
        f"RMSE {cos['log'].rmse:.3g}); c sqrt(log n) gives c = {cos['sqrt_log'].params['c']:.4f} "
        f"(RMSE {cos['sqrt_log'].rmse:.3g}). The note's '3.5 sqrt(log n)' puts the 3.5 of the log form on the "
        "sqrt form, where it would be about three times too small.",
    ]
    return AlphaTable(ns=ns, columns=columns, fits=fits, notes=notes, objectives=dict(objectives or {}), cosine_d=cosine_d)


def objective_tables(ns=TABLE_ROWS, *, cosine_d: int = 128, trials: int = OBJECTIVE_TRIALS, rng=0, progress=None) -> dict:
    """The typical/geometric/expected ``alpha*`` tables for normal and cosine(d) scores, keyed as the columns.

    One computation serves both the alpha* table and the ``alpha_star_by_objective``
    figure in the main job (same ``n``, same draws, same trials).

    Parameters
    ----------
    ns : array_like
        Numbers of scores.
    cosine_d : int
        Dimension of the cosine scores.
    trials : int
        Monte Carlo trials per ``n``.
    rng : None, int, SeedSequence or Generator
        Seed; each distribution uses it afresh, so each table is the same as computed alone.
    progress : bool, optional
        Progress bars over ``ns``.

    Returns
    -------
    dict
        ``{"normal": ObjectiveTable, "cosine(d=...)": ObjectiveTable}``.
    """
    from ..objectives.typical import objective_table

    return {
        "normal": objective_table(ns, "normal", trials=trials, rng=rng, progress=progress),
        f"cosine(d={cosine_d})": objective_table(ns, "cosine", d=cosine_d, trials=trials, rng=rng, progress=progress),
    }



@dataclass(frozen=True)
class AlphaTableConfig:
    """The alpha_table experiment: every ``step``-th ``n`` of :data:`NOTE_GRID`, cosine scores of dimension ``cosine_d``."""

    quick: bool = False
    step: int = 1
    cosine_d: int = 128

    @property
    def ns(self) -> np.ndarray:
        """The grid of ``n``."""
        return NOTE_GRID[:: self.step]


@dataclass(frozen=True)
class AlphaColumn:
    """One column of the table: ``alpha*`` of one score distribution over the grid."""

    label: str
    dist: str
    d: int | None
    ns: tuple


class AlphaTableExperiment(Experiment):
    """The mean-field ``alpha*`` table as an experiment: one task per score distribution."""

    name = "alpha_table"
    description = "the mean-field alpha* over the note's grid (normal and cosine scores), with the fitted laws"
    file_stem = "alpha_star"
    columns = ("scores", "n", "alpha")
    text = ("scores",)
    ints = ("n",)
    key = task_columns = ("scores",)
    match = ("grid", "cosine_d")
    in_process = True
    figure_names = ("alpha_star_vs_n",)
    float_format = ALPHA_FORMAT

    def config(self, quick: bool = False) -> AlphaTableConfig:
        """The whole grid, or every tenth ``n`` (``quick``)."""
        return AlphaTableConfig(quick=True, step=10) if quick else AlphaTableConfig()

    def tasks(self, config: AlphaTableConfig, *, out=None, progress: bool = False) -> list:
        """Normal scores, then cosine scores."""
        ns = tuple(int(n) for n in config.ns)
        return [AlphaColumn(label, dist, d, ns) for label, dist, d in score_columns(config.cosine_d)]

    def task_cells(self, task) -> tuple:
        """``(label,)``."""
        return (task.label,)

    def expected_rows(self, task) -> int:
        """One row per ``n``."""
        return len(task.ns)

    def run_task(self, task) -> list:
        """``optimal_alpha`` over the grid, as :func:`alpha_table` computes it."""
        alpha = optimal_alpha(np.asarray(task.ns), task.dist, d=task.d)
        return [(task.label, n, float(a)) for n, a in zip(task.ns, alpha)]

    def header(self, config, tasks, command) -> dict:
        """The command, the grid, the dimension, the code."""
        ns = config.ns
        return {"command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                "experiment": f"{self.name}{' (quick)' if config.quick else ''}",
                "grid": f"n = {ns[0]}, {ns[1] if ns.size > 1 else ns[0]}, ..., {ns[-1]} ({ns.size} values)",
                "cosine_d": str(config.cosine_d), "objective": "mean_field",
                "code": f"softmax_scale at {source_revision()}", "date": datetime.date.today().isoformat()}

    def summaries(self, table) -> list:
        """The table with the fitted laws (:meth:`AlphaTable.to_markdown`)."""
        return [self.alpha_table(table).to_markdown()]

    def alpha_table(self, table) -> AlphaTable:
        """The :class:`AlphaTable` of a result file read back."""
        r = table.rows
        labels = list(dict.fromkeys(r["scores"]))
        ns = r["n"][r["scores"] == labels[0]] if labels else np.array([], dtype=np.int64)
        columns = {c: r["alpha"][r["scores"] == c] for c in labels}
        return table_from_columns(ns, columns, cosine_d=int(table.header.get("cosine_d", 128)))


EXPERIMENT = AlphaTableExperiment()

"""The alpha* table: mean-field optimal scales over the note's grid, with the fitted laws."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import numpy as np

from ..laws import LAW_FORMS, compare_alpha_laws
from ..optimize import optimal_alpha

__all__ = ["NOTE_GRID", "OBJECTIVE_TRIALS",
    "QUICK_OBJECTIVE_NS",
    "QUICK_OBJECTIVE_TRIALS", "TABLE_ROWS", "AlphaTable", "alpha_table", "objective_tables"]

#: The note's grid: n = 40, 80, ..., 20000.
NOTE_GRID = np.arange(40, 20001, 40)
#: Rows shown in the printed table (the CSV has the whole grid).
TABLE_ROWS = (40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20000)
#: Monte Carlo trials per ``n`` of the typical/geometric objective tables (table and figure share them).
OBJECTIVE_TRIALS = 4000
#: The same for a smoke run (``--quick``).
QUICK_OBJECTIVE_NS, QUICK_OBJECTIVE_TRIALS = (40, 640, 10240), 1000


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
    """

    ns: np.ndarray
    columns: dict
    fits: dict
    notes: list = field(default_factory=list)
    objectives: dict = field(default_factory=dict)

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
        """Every ``n`` of the grid with every column, as CSV."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["n", *self.columns])
        for i, n in enumerate(self.ns):
            w.writerow([int(n), *(repr(float(self.columns[c][i])) for c in self.columns)])
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
) -> AlphaTable:
    """Mean-field ``alpha*`` for normal and cosine(d) scores over ``ns``, with every law fitted.

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
    """
    ns = np.asarray(ns)
    columns = {
        "normal": optimal_alpha(ns, "normal"),
        f"cosine(d={cosine_d})": optimal_alpha(ns, "cosine", d=cosine_d),
    }
    fits = {c: compare_alpha_laws(ns, a, forms) for c, a in columns.items()}
    cos = fits[f"cosine(d={cosine_d})"]
    notes = [
        f"Normal scores: c sqrt(log n) with c = {fits['normal']['sqrt_log'].params['c']:.4f} (the note's 0.84).",
        f"Cosine scores, d = {cosine_d}: c log n gives c = {cos['log'].params['c']:.4f} (the source's 3.5 log n, "
        f"RMSE {cos['log'].rmse:.3g}); c sqrt(log n) gives c = {cos['sqrt_log'].params['c']:.4f} "
        f"(RMSE {cos['sqrt_log'].rmse:.3g}). The note's '3.5 sqrt(log n)' puts the 3.5 of the log form on the "
        "sqrt form, where it would be about three times too small.",
    ]
    extra = {}
    if tables is not None:
        extra = dict(tables)
    elif objectives:
        extra = objective_tables(objective_ns, cosine_d=cosine_d, trials=trials, rng=rng)
    return AlphaTable(ns=ns, columns=columns, fits=fits, notes=notes, objectives=extra)


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


"""measure's statistics and figure: the minimising constant multiplier, its interval over documents, every cell's paired difference."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._measure_run import BOOTSTRAP, CONSTANT, KEY_SEED, RECIPE, SHAPES, SMOKE


@dataclass(frozen=True)
class LengthCurve:
    """The result at one length.

    Attributes
    ----------
    length, train_length : int
    factors : ndarray
        The constant multipliers, ascending.
    loss : ndarray
        Mean loss over the documents at each (nats).
    loss_se : ndarray
        Standard error of each one's paired difference from the constant 1.
    documents : int
    minimiser : float
        The constant multiplier the loss prefers (see the module docstring).
    interval : tuple of float
        Its 95% bootstrap interval over documents (NaN with fewer than two documents).
    at_edge : bool
        The lowest mean loss is at an end of the grid: the minimiser may lie beyond it.
    recipe_factor : float
        The file's own multiplier past ``L`` (mean over the scored queries); NaN when not read.
    recipe_inside : bool or None
        Whether it lies inside :attr:`interval` (None when either is missing).
    cells : dict
        ``"scheme factor"`` -> ``{"factor_mean", "loss", "difference", "se", "retrieved", "prompts"}``:
        every cell's mean loss, its paired difference from the constant 1 (and standard error), and
        the pass keys it retrieved out of the prompts.
    smoke : str
        Where ``L`` is a pretend one (the quick form's smoke test): what the summary says in place of
        the minimiser, its interval and the recipe's place (none of them is printed); empty otherwise.
    """

    length: int
    train_length: int
    factors: np.ndarray
    loss: np.ndarray
    loss_se: np.ndarray
    documents: int
    minimiser: float
    interval: tuple
    at_edge: bool
    recipe_factor: float
    recipe_inside: bool | None
    cells: dict
    smoke: str = ""

    def to_json(self) -> dict:
        """The fields as a dict (arrays as arrays); a smoke test's minimiser, interval and recipe's place as None."""
        if self.smoke:
            return {"length": self.length, "train_length": self.train_length, "factors": self.factors,
                    "loss": self.loss, "loss_se": self.loss_se, "documents": self.documents, "minimiser": None,
                    "interval": None, "at_edge": None, "recipe_factor": self.recipe_factor, "recipe_inside": None,
                    "cells": self.cells, "smoke_test": self.smoke}
        return {"length": self.length, "train_length": self.train_length, "factors": self.factors,
                "loss": self.loss, "loss_se": self.loss_se, "documents": self.documents,
                "minimiser": self.minimiser, "interval": list(self.interval), "at_edge": self.at_edge,
                "recipe_factor": self.recipe_factor, "recipe_inside": self.recipe_inside, "cells": self.cells}

    def to_text(self) -> str:
        """A markdown table of the cells and the minimiser's line."""
        lines = [f"n = {self.length} (L = {self.train_length}), {self.documents} document"
                 f"{'s' * (self.documents != 1)}", "", "| cell | multiplier | loss | vs constant 1 | keys |",
                 "|---|---|---|---|---|"]
        for name, c in self.cells.items():
            keys = f"{c['retrieved']}/{c['prompts']}" if c["prompts"] else "-"
            se = f" ± {c['se']:.4f}" if np.isfinite(c["se"]) else ""  # one document: no standard error
            lines.append(f"| {name} | {c['factor_mean']:.4g} | {c['loss']:.4f} | {c['difference']:+.4f}{se} | {keys} |")
        lines.append("")
        if self.smoke:
            return "\n".join(lines + [self.smoke])
        lo, hi = self.interval
        edge = " (at the grid's edge)" if self.at_edge else ""
        spread = (f"95% interval [{lo:.4g}, {hi:.4g}]" if np.isfinite(lo) and np.isfinite(hi)
                  else "no interval (it needs two documents)")
        lines.append(f"minimising constant multiplier {self.minimiser:.4g}{edge}, {spread}")
        if self.recipe_inside is not None:
            lines.append(f"the file's recipe applies {self.recipe_factor:.4g}: "
                         f"{'inside' if self.recipe_inside else 'outside'} the interval")
        return "\n".join(lines)


def _vertices(factors: np.ndarray, means: np.ndarray) -> tuple:
    """:func:`_minimiser` of every row of ``means`` ``[B, factors]`` at once; ``(x [B], at_edge [B])``."""
    means = np.atleast_2d(np.asarray(means, dtype=np.float64))
    rows = np.arange(means.shape[0])
    j = np.argmin(means, axis=1)
    edge = (j == 0) | (j == factors.size - 1)
    x = factors[j].astype(np.float64)
    if factors.size < 3:
        return x, edge
    k = np.clip(j, 1, factors.size - 2)
    a, m, b = factors[k - 1], factors[k], factors[k + 1]
    ya, ym, yb = means[rows, k - 1], means[rows, k], means[rows, k + 1]
    curvature = ((yb - ym) / (b - m) - (ym - ya) / (m - a)) / (b - a)  # the parabola's leading coefficient
    ok = ~edge & (curvature > 0)
    slope = (ym - ya) / (m - a) - curvature * (a + m)  # its linear coefficient
    with np.errstate(divide="ignore", invalid="ignore"):
        x[ok] = np.clip(-slope[ok] / (2 * curvature[ok]), a[ok], b[ok])
    return x, edge


def _minimiser(factors: np.ndarray, mean: np.ndarray) -> tuple:
    """The parabola vertex through the lowest of ``mean`` and its neighbours; ``(x, at_edge)``."""
    x, edge = _vertices(np.asarray(factors, dtype=np.float64), mean)
    return float(x[0]), bool(edge[0])


#: The interval's widening past a mean's small-sample one: with it the stopping rule's final interval
#: held the minimiser in 94.4% of 2000 simulated runs at SmolLM2's spread of documents and 95.4% of
#: 1000 at three times it (tests/models/test_measure_stopping.py); without it 91.5% in both.
INFLATION = 1.2

#: The fewest documents the stopping rule (:func:`documents_wanted`) reads at a length.
MIN_DOCUMENTS = 4


def documents_table(rows) -> tuple:
    """``(factors, D)``: the constants every document read, ascending, and ``D[document, factor]``, their losses.

    The documents in the order their rows come; one whose loss is missing at a common constant is left out.
    """
    loss_rows = rows["task"] == "loss"
    docs = list(dict.fromkeys(rows["item"][loss_rows]))
    const = loss_rows & (rows["scheme"] == CONSTANT)
    per_doc = [set(rows["factor"][const & (rows["item"] == d)].tolist()) for d in docs]
    common = set.intersection(*per_doc) if per_doc else set()  # an adaptive sweep's first document reads more
    const &= np.isin(rows["factor"], sorted(common))
    factors = np.unique(rows["factor"][const]).astype(np.float64)
    D = np.full((len(docs), factors.size), np.nan)
    index = {d: i for i, d in enumerate(docs)}
    for d, f, v in zip(rows["item"][const], rows["factor"][const], rows["loss"][const]):
        D[index[d], np.searchsorted(factors, f)] = v
    return factors, D[np.all(np.isfinite(D), axis=1)]


def minimiser_interval(factors, D, seed) -> tuple:
    """The 95% interval of the minimiser over the documents ``D[document, factor]``: ``(low, high)``.

    The 2.5 and 97.5 percentiles of :func:`_minimiser` over :data:`BOOTSTRAP` resamples of the
    documents (seeded by ``seed``), each end's distance from the minimiser widened by
    ``INFLATION * t(D - 1) / z * sqrt(D / (D - 1))`` (a mean's small-sample widening, times
    :data:`INFLATION`; 1.72 at six documents); NaN with fewer than two documents.
    """
    D = np.asarray(D, dtype=np.float64)
    k = D.shape[0]
    if k < 2:
        return float("nan"), float("nan")
    from scipy.stats import norm, t

    x = _vertices(factors, D.mean(axis=0))[0][0]
    picks = np.random.default_rng(seed).integers(0, k, size=(BOOTSTRAP, k))
    boots = _vertices(factors, D[picks].mean(axis=1))[0]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    widen = INFLATION * float(t.ppf(0.975, k - 1) / norm.ppf(0.975)) * math.sqrt(k / (k - 1))
    return float(x - widen * (x - lo)), float(x + widen * (hi - x))


def known(factors, D, width: float, seed, minimum: int = MIN_DOCUMENTS) -> bool:
    """Whether the documents ``D[document, factor]`` read so far settle the minimiser to ``±width``.

    At least ``minimum`` documents, the lowest mean loss inside the grid (not at an end, where the
    minimiser may lie beyond it), and :func:`minimiser_interval` at most ``2 * width`` wide.
    """
    D = np.asarray(D, dtype=np.float64)
    if D.shape[0] < max(minimum, 2) or _minimiser(factors, D.mean(axis=0))[1]:
        return False
    lo, hi = minimiser_interval(factors, D, seed)
    return bool(hi - lo <= 2 * width)


def documents_wanted(factors, D, width: float, seed, cap: int, minimum: int = MIN_DOCUMENTS) -> int:
    """How many documents the stopping rule reads, given the first ``D.shape[0]`` read (in window order).

    ``min(minimum, cap)`` until that many are read; then the count read where the minimiser is
    :func:`known` or ``cap`` is reached (the rule stops), one more otherwise.
    """
    k = int(np.shape(D)[0])
    if k < min(minimum, cap):
        return min(minimum, cap)
    return k if k >= cap or known(factors, D, width, seed, minimum) else k + 1


def _curve(rows, n, L, smoke: str = "") -> LengthCurve:
    """The :class:`LengthCurve` of the rows at length ``n``."""
    loss_rows = rows["task"] == "loss"
    factors, D = documents_table(rows)
    mean = D.mean(axis=0) if D.size else np.full(factors.size, np.nan)
    one = int(np.argmin(np.abs(factors - 1.0)))
    diff_se = ((D - D[:, [one]]).std(axis=0, ddof=1) / math.sqrt(D.shape[0]) if D.shape[0] > 1
               else np.full(factors.size, np.nan))
    x, edge = _minimiser(factors, mean) if D.size else (float("nan"), False)
    interval = minimiser_interval(factors, D, [KEY_SEED, n])
    cells = {}
    ref = {(t, i): v for t, i, v, s, f in zip(rows["task"], rows["item"], rows["loss"], rows["scheme"], rows["factor"])
           if s == CONSTANT and f == factors[one]}
    keys = list(dict.fromkeys(zip(rows["scheme"], rows["factor"])))
    recipe_factor = float("nan")
    for scheme, f in keys:
        sel = (rows["scheme"] == scheme) & (rows["factor"] == f)
        lsel = sel & loss_rows
        psel = sel & (rows["task"] == "passkey")
        d = np.array([v - ref[("loss", i)] for i, v in zip(rows["item"][lsel], rows["loss"][lsel])
                      if ("loss", i) in ref])
        name = f"{scheme} {f:g}" if scheme == CONSTANT else scheme
        applied = float(np.mean(rows["factor_mean"][lsel])) if lsel.any() else float(np.mean(rows["factor_mean"][sel]))
        cells[name] = {"factor_mean": applied, "loss": float(np.mean(rows["loss"][lsel])) if lsel.any() else float("nan"),
                       "difference": float(d.mean()) if d.size else float("nan"),
                       "se": float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else float("nan"),
                       "retrieved": int(np.nansum(rows["retrieved"][psel])), "prompts": int(psel.sum())}
        if scheme == RECIPE:
            recipe_factor = applied
    inside = None
    if np.isfinite(recipe_factor) and np.all(np.isfinite(interval)):
        inside = bool(interval[0] <= recipe_factor <= interval[1])
    return LengthCurve(int(n), int(L), factors, mean, diff_se, int(D.shape[0]), x, interval, edge, recipe_factor,
                       inside, cells, smoke)


def summarise(table) -> list:
    """One :class:`LengthCurve` per length of a result file read back (:meth:`MeasureExperiment.read`)."""
    r = table.rows
    L = int(table.header["train_length"])
    bad = np.flatnonzero(~np.isfinite(r["loss"]))
    if bad.size:
        i = bad[0]
        raise ValueError(f"`path`: {table.path} has a non-finite loss ({r['task'][i]}, n = {r['length'][i]}, "
                         f"{r['item'][i]}, {r['scheme'][i]} {r['factor'][i]:g}); its statistics would drop it")
    experiment = table.header.get("experiment", "")
    smoke = ""
    if SMOKE in experiment:
        smoke = f"{SMOKE}: {experiment.split('; ', 1)[1].rstrip(')')}, so nothing past the model's L is measured"
    out = []
    for n in sorted(set(r["length"].tolist())):
        sel = r["length"] == n
        out.append(_curve({k: v[sel] for k, v in r.items()}, n, L, smoke))
    return out


# ---------------------------------------------------------------------------------------------
# The figure


def figure(curves, title: str = ""):
    """Loss against the constant multiplier, one line per length; the shapes and the recipe as markers, the interval as a bar."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    markers = {s: m for s, m in zip((*SHAPES, RECIPE), ("s", "^", "D", "*"))}
    for i, c in enumerate(curves):
        colour = f"C{i}"
        ax.errorbar(c.factors, c.loss, yerr=c.loss_se, color=colour, marker="o", ms=4, capsize=2,
                    label=f"n = {c.length} ({c.documents} documents)")
        y = np.nanmin(c.loss) if np.isfinite(c.loss).any() else 0.0
        lo, hi = c.interval
        if np.isfinite(lo) and np.isfinite(hi) and not c.smoke:
            ax.plot([lo, hi], [y, y], color=colour, lw=5, alpha=0.35, solid_capstyle="butt")
        for name, cell in c.cells.items():
            scheme = name.split()[0]
            if scheme in markers and np.isfinite(cell["loss"]):
                ax.plot(cell["factor_mean"], cell["loss"], marker=markers[scheme], color=colour, ls="none", ms=7,
                        mfc="none", label=scheme if i == 0 else None)
    ax.set_xlabel("multiplier on q·k past L (shapes: mean over the scored queries)")
    ax.set_ylabel("next-token loss past L (nats)")
    ax.set_title(title or "loss against the multiplier; bars: 95% bootstrap interval of the minimiser", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# The adaptive sweep's next cell


#: The golden section's smaller part, ``(3 - sqrt(5)) / 2``.
GOLDEN = (3 - math.sqrt(5)) / 2


def next_factor(xs, ys, spacing: float = 0.05) -> float:
    """The next constant multiplier to read, given the multipliers ``xs`` read so far and their losses ``ys``.

    Bracket, then refine: while the lowest loss is at an end of the cells read, step past that end
    (by 1.618 times the last gap, at least ``spacing``; halving towards 0 below the smallest); once it
    has a neighbour on each side, the vertex of the parabola through the three, or the golden-section
    point of the wider side where the vertex is within ``spacing`` of a cell read; where both are,
    the nearest free point ``spacing`` apart beside the lowest (the lower neighbour's side first).
    Every cell returned is positive and at least ``spacing`` from every cell read (halving below
    the smallest excepted: never at or below 0).

    Parameters
    ----------
    xs, ys : sequence of float
        At least one cell and its loss.
    spacing : float
        The least distance between two cells.

    Returns
    -------
    float
    """
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    if x.ndim != 1 or x.size < 1 or x.shape != y.shape:
        raise ValueError(f"`xs` and `ys` must be equal-length 1-D sequences of at least one cell, got {x.shape}, {y.shape}")
    if not (spacing > 0):
        raise ValueError(f"`spacing` must be positive, got {spacing!r}")
    order = np.argsort(x)
    x, y = x[order], y[order]
    if x.size == 1:
        return float(x[0] + 2 * spacing)
    j = int(np.argmin(y))
    free = lambda v: v > 0 and bool(np.all(np.abs(x - v) >= spacing * (1 - 1e-9)))  # noqa: E731
    if j == x.size - 1:
        return float(x[j] + max(1.618 * (x[j] - x[j - 1]), spacing))
    if j == 0:
        v = x[0] - max(1.618 * (x[1] - x[0]), spacing)
        return float(v if v > 0 else x[0] / 2)
    a, m, b = x[j - 1:j + 2]
    ya, ym, yb = y[j - 1:j + 2]
    den = (m - a) * (ym - yb) - (m - b) * (ym - ya)
    if den != 0:
        v = m - 0.5 * ((m - a) ** 2 * (ym - yb) - (m - b) ** 2 * (ym - ya)) / den
        if a < v < b and free(v):
            return float(v)
    g = m + GOLDEN * (b - m) if b - m > m - a else m - GOLDEN * (m - a)
    if free(g):
        return float(g)
    first = -1 if ya < yb else 1
    for k in range(1, 10 * x.size + 2):
        for side in (first, -first):
            v = m + side * k * spacing
            if free(v):
                return float(v)
    raise AssertionError("unreachable: a free point exists beside the lowest")  # pragma: no cover


def adaptive_cells(loss, start, cells: int, spacing: float = 0.05) -> tuple:
    """``cells`` constant multipliers read one after another by :func:`next_factor`, from ``start``.

    Parameters
    ----------
    loss : callable
        A multiplier's loss.
    start : sequence of float
        The first cells (1 and the recipe's multiplier); one at least ``spacing`` from another is kept.
    cells : int
        How many to read in all (at least ``len(start)``).
    spacing : float

    Returns
    -------
    tuple of (ndarray, ndarray)
        The multipliers, ascending, and their losses.
    """
    xs: list = []
    for s in start:
        if s > 0 and all(abs(s - v) >= spacing for v in xs):
            xs.append(float(s))
    ys = [float(loss(v)) for v in xs]
    while len(xs) < cells:
        v = next_factor(xs, ys, spacing)
        xs.append(v)
        ys.append(float(loss(v)))
    order = np.argsort(xs)
    return np.asarray(xs)[order], np.asarray(ys)[order]


def follow_factors(xs, ys) -> tuple:
    """The constants the other units read after an adaptive search: 1, and the lowest of ``ys`` with its two neighbours.

    At an end of ``xs``, the three cells at that end.
    """
    order = np.argsort(xs)
    x, y = np.asarray(xs, dtype=np.float64)[order], np.asarray(ys, dtype=np.float64)[order]
    j = min(max(int(np.argmin(y)) - 1, 0), max(x.size - 3, 0))
    return tuple(sorted({1.0, *(float(v) for v in x[j:j + 3])}))

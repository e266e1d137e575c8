"""Figures of the exact evaluator: ``E[G]`` against ``alpha``, ``alpha*`` per objective, mean-field validity."""

from __future__ import annotations

import numpy as np

from ..distributions import get_distribution
from ..exact import exact_stats, gap_density_at_zero
from ..experiments.alpha_table import OBJECTIVE_TRIALS, QUICK_OBJECTIVE_NS, QUICK_OBJECTIVE_TRIALS, TABLE_ROWS, objective_tables
from ..objectives import mean_field_error, mean_field_objective
from ..optimize import optimal_alpha
from ._style import new_figure

#: Default grids (module-level so that they are built once).
_NS_VALIDITY = np.geomspace(10, 1e12, 45)
_ALPHAS_VALIDITY = np.linspace(0.05, 6.0, 70)


def _title(dist, d):
    return "normal scores" if d is None else f"cosine scores, d = {d}"


def expected_gradient_vs_alpha(ns=(16, 512, 20000), n_alpha=120, cosine_d=128):
    """Exact ``E[G]`` against ``alpha`` for several ``n``, beside the mean-field curve and the supremum ``f_gap(0)``.

    Parameters
    ----------
    ns : sequence of int
        Numbers of scores, one colour each.
    n_alpha : int
        Points per curve.
    cosine_d : int
        Dimension of the cosine panel.
    """
    fig, axes = new_figure(2, width=11.5, height=4.6)
    for ax, (dist, d) in zip(axes, (("normal", None), ("cosine", cosine_d))):
        unit = 1.0 if d is None else np.sqrt(d)
        alphas = unit * np.geomspace(0.05, 300.0, n_alpha)
        dist_obj = get_distribution(dist, d)
        for k, n in enumerate(ns):
            color = f"C{k}"
            g = exact_stats(alphas, int(n), dist_obj, error_estimate=False).grad
            mf = mean_field_objective(alphas, float(n), dist_obj)
            sup = gap_density_at_zero(int(n), dist_obj)
            a_mf = optimal_alpha(int(n), dist_obj)
            ax.plot(alphas, g, color=color, lw=2, label=f"n = {n}: exact E[G]")
            pos = mf > 0
            ax.plot(alphas[pos], mf[pos], color=color, lw=1.2, ls=":", label=f"n = {n}: mean-field G_mf")
            ax.axhline(sup, color=color, lw=1, ls="--", label=f"n = {n}: sup E[G] = f_gap(0) = {sup:.3g}")
            ax.plot([a_mf], [mean_field_objective(a_mf, float(n), dist_obj)], "v", color=color, ms=7)
        ax.set_xscale("log")
        ax.set_ylim(0, None)
        ax.set_xlabel("scale alpha (log scale)" + ("" if d is None else ", on cosines"))
        ax.set_ylabel("gradient objective G = alpha (1 - sum p^2)")
        ax.set_title(_title(dist, d) + "  (triangle: mean-field alpha*)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", ncol=1)
    fig.suptitle(
        "The exact E[G] has no maximum: it keeps rising to f_gap(0), where the mean-field curve turns down and dies"
    )
    return fig


def alpha_star_by_objective(ns=TABLE_ROWS, trials=OBJECTIVE_TRIALS, cosine_d=128, rng=0, *, tables=None):
    """``alpha*`` against ``n`` for the mean-field, typical and geometric objectives, with ``c sqrt(log n)`` fits.

    Parameters
    ----------
    ns : sequence of int
        Numbers of scores (default: the rows of the alpha* table).
    trials : int
        Monte Carlo trials per ``n`` (typical and geometric share them).
    cosine_d : int
        Dimension of the cosine panel.
    rng : int
        Seed.
    tables : dict, optional
        The objective tables already computed by
        :func:`softmax_scale.experiments.alpha_table.objective_tables` (the main job passes those of
        the alpha* table); then ``ns``, ``trials`` and ``rng`` are theirs.
    """
    from ..laws import fit_alpha_law

    if tables is None:
        tables = objective_tables(ns, cosine_d=cosine_d, trials=trials, rng=rng)
    fig, axes = new_figure(2, width=11.5, height=4.6)
    fits = {}
    for ax, (dist, d) in zip(axes, (("normal", None), ("cosine", cosine_d))):
        tab = tables["normal" if d is None else f"cosine(d={d})"]
        ns = tab.ns
        fits[dist] = tab.geometric_fit
        fit_mf = fit_alpha_law(ns, tab.mean_field, "sqrt_log")
        rows = [
            ("mean-field", tab.mean_field, np.zeros(ns.size), fit_mf, "C0"),
            ("typical (median G)", tab.typical, tab.typical_se, tab.typical_fit, "C1"),
            ("geometric (exp E log G)", tab.geometric, tab.geometric_se, tab.geometric_fit, "C2"),
        ]
        for label, a, se, fit, color in rows:
            ax.errorbar(ns, a, yerr=2 * se, fmt="o", ms=4, color=color, capsize=2, label=f"{label} alpha* (± 2 SE)")
            ax.plot(ns, fit(ns), color=color, lw=1.2, ls="--", label=f"fit on these n: {fit.params['c']:.3g} sqrt(log n), R² {fit.r2:.3f}")
        ax.set_xscale("log")
        ax.set_xlabel("number of keys n (log scale)")
        ax.set_ylabel("optimal scale alpha*" + ("" if d is None else " (on cosines)"))
        ax.set_title(f"{_title(dist, d)}; E[G]: alpha* = inf", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(
        "A typical draw wants a larger scale than mean-field: the geometric-mean optimum follows "
        f"{fits['normal'].params['c']:.2f} sqrt(log n) (normal);\nthe median's optimum is flat-topped and noisy; "
        "the exact E[G] has none",
        fontsize=10.5,
    )
    return fig


def mean_field_validity(ns=_NS_VALIDITY, alphas=_ALPHAS_VALIDITY):
    """Heatmap of the relative error of the mean-field ``sum p^2`` over ``(log n, alpha)``, normal scores.

    The mean-field ``alpha*`` curve and the freezing scale ``sqrt(2 log n)`` are drawn on top.

    Parameters
    ----------
    ns : array_like
        Numbers of scores (log-spaced).
    alphas : array_like
        Scales.
    """
    ns = np.unique(np.round(np.asarray(ns, dtype=np.float64)))
    alphas = np.asarray(alphas, dtype=np.float64)
    res = mean_field_error(alphas, ns, "normal")
    err = np.log10(np.maximum(np.abs(res.rel_error), 1e-8))
    fig, ax = new_figure(1, width=7.6, height=5.0)
    logn = np.log(ns)
    mesh = ax.pcolormesh(logn, alphas, err.T, shading="nearest", cmap="viridis", vmin=-4, vmax=2)
    cs = ax.contour(logn, alphas, err.T, levels=[-2, -1, 0], colors=["w", "w", "k"], linewidths=[0.8, 1.4, 1.4])
    ax.clabel(cs, fmt={-2: "1%", -1: "10%", 0: "100%"}, fontsize=8)
    ax.plot(logn, optimal_alpha(ns), color="C3", lw=2.2, label="mean-field alpha*(n)")
    ax.plot(logn, np.sqrt(2 * logn), color="C1", lw=2, ls="--", label="sqrt(2 log n) (softmax freezes)")
    ax.set_ylim(alphas[0], alphas[-1])
    ax.set_xlabel("log n (natural log of the number of keys)")
    ax.set_ylabel("scale alpha (normal scores, unit variance)")
    cb = fig.colorbar(mesh, ax=ax)
    cb.set_label("log10 |mean-field sum p² / exact E[sum p²] - 1|")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(
        "Mean-field sum p² is 1.6x (n = 16) to 26x (n = 1e12) the exact value at its own alpha*;\n"
        "it is within 10% only below the white contour",
        fontsize=10,
    )
    return fig


FIGURES = [
    ("expected_gradient_vs_alpha", expected_gradient_vs_alpha, {}, {"ns": (16, 2000), "n_alpha": 40}),
    ("alpha_star_by_objective", alpha_star_by_objective, {}, {"ns": QUICK_OBJECTIVE_NS, "trials": QUICK_OBJECTIVE_TRIALS}),
    (
        "mean_field_validity",
        mean_field_validity,
        {},
        {"ns": np.geomspace(10, 1e12, 12), "alphas": np.linspace(0.05, 6.0, 20)},
    ),
]

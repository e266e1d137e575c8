"""Figure: mean-field alpha* against n, with the fitted laws."""

from __future__ import annotations

import numpy as np

from .._util.store import as_written
from ..experiments.alpha_table import ALPHA_FORMAT, NOTE_GRID
from ..laws import compare_alpha_laws
from ..optimize import optimal_alpha
from ._style import new_figure

_STYLES = {"sqrt_log": ":", "log": "--", "power": "-.", "affine_log": (0, (1, 1))}


def alpha_star_vs_n(ns=NOTE_GRID, cosine_d: int = 128, table=None):
    """Mean-field ``alpha*`` against ``n`` (normal and cosine scores), each law form fitted.

    Parameters
    ----------
    ns : array_like
        Grid of ``n`` (default the note's 40..20000).
    cosine_d : int
        Dimension of the cosine scores.
    table : AlphaTable, optional
        The values already computed (:class:`~softmax_scale.experiments.alpha_table.AlphaTable`, or
        the ``alpha_table`` experiment's result file read back); ``ns`` and ``cosine_d`` are then its own.
    """
    if table is not None and not hasattr(table, "columns"):
        from ..experiments.alpha_table import EXPERIMENT

        table = EXPERIMENT.alpha_table(table)
    if table is not None:
        ns, cosine_d = table.ns, table.cosine_d
    ns = np.asarray(ns)
    fig, axes = new_figure(2, 2, width=11, height=6.6, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    panels = [("normal", None, "normal scores"), ("cosine", cosine_d, f"cosine scores, d = {cosine_d}")]
    # alpha* as dots, evenly spaced on the log axis and drawn over the fits (a line would hide under the best one)
    dots = np.unique(np.searchsorted(ns, np.geomspace(ns[0], ns[-1], 18)).clip(0, ns.size - 1))
    for (ax, ax_r), (dist, d, title) in zip(axes.T, panels):
        a = np.asarray(as_written(optimal_alpha(ns, dist, d=d), ALPHA_FORMAT) if table is None
                       else list(table.columns.values())[d is not None])
        for form, fit in compare_alpha_laws(ns, a).items():
            coef = ", ".join(f"{k}={v:.3g}" for k, v in fit.params.items())
            line, = ax.plot(ns, fit(ns), ls=_STYLES[form], lw=1.6, label=f"{fit.formula} ({coef}); RMSE {fit.rmse:.2g}")
            ax_r.plot(ns, 100 * (fit(ns) - a) / a, ls=_STYLES[form], lw=1.6, color=line.get_color())
        ax.plot(ns[dots], a[dots], "o", color="k", ms=4.5, zorder=5, label="alpha* (mean-field)")
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[-1:] + handles[:-1], labels[-1:] + labels[:-1], fontsize=8, loc="upper left")
        ax.set_xscale("log")
        ax.set_ylabel("optimal scale alpha* (on unit-variance scores)" if d is None else "optimal scale alpha* (on cosines)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax_r.axhline(0.0, color="k", lw=0.8)
        ax_r.set_yscale("symlog", linthresh=0.1, linscale=0.5)
        ax_r.set_xlabel("number of keys n (log scale)")
        ax_r.set_ylabel("fit - alpha*  (% of alpha*)")
        ax_r.grid(alpha=0.3)
    fig.suptitle("Gradient-maximising scale grows slowly with n: 0.84 sqrt(log n) (normal), ~3.5 log n (cosine, d = 128)")
    return fig


FIGURES = [
    ("alpha_star_vs_n", alpha_star_vs_n, {}, {"ns": NOTE_GRID[::10]}),
]

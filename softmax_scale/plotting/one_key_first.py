"""The FIRST experiment's figure, drawn from the committed ``figures/one_key_first.csv``.

``make figures`` redraws it and never trains; without the CSV it is skipped with one line.
Reading needs numpy only, not JAX.
"""

from __future__ import annotations

import numpy as np

from ..schemes import QWEN_LOGN, SCHEMES, STANDARD
from ..train.scales import FIRST_SCALES
from ._style import new_figure

#: (trained scale, test scale, colour, line style) of each curve: FIRST's trained scales in their training
#: colours, then on ``standard``'s models their ``log n`` (drawn like ``qwen_logn`` in the registry) and the
#: toolkit's share-holding factor, each in its own.
_CURVES = tuple((scale, "trained", SCHEMES[scale].style.train_color, "-") for scale in FIRST_SCALES) + (
    (STANDARD, QWEN_LOGN, SCHEMES[QWEN_LOGN].style.train_color, "--"),
    (STANDARD, "toolkit_share", "C4", ":"))


def one_key_first_figure(table=None, csv=None):
    """Accuracy against ``n`` per training length, then the last layer's share on the first bit, measured and predicted.

    One column per training length ``L``.  Top: accuracy, the mean over seeds (each seed a dot),
    the published points at 1000 (``standard``: squares, ``log n``: diamonds).  Bottom: the last
    layer's share of ``$``'s attention on the first bit, measured (solid, mean over seeds) and
    predicted from ``L`` alone (open circles, dashed).
    """
    from ..experiments.first import EXPERIMENT, PUBLISHED_FIRST, first_cells, first_scale_name
    from .train import committed_table

    table = committed_table(EXPERIMENT, table, csv)
    acc = first_cells(table, "test", "accuracy")
    r = table.rows
    shares = r["kind"] == "share"
    last = int(r["layer"][shares].max()) if shares.any() else 0
    meas, pred = first_cells(table, "share", "share", last), first_cells(table, "share", "share_predicted", last)
    Ls = sorted({k[0] for k in acc})
    fig, axes = new_figure(len(Ls), 2, width=max(4.0 * len(Ls), 6.0), height=7.4)
    axes = np.asarray(axes).reshape(2, len(Ls))
    pub = dict(zip(PUBLISHED_FIRST["train_lengths"], range(len(PUBLISHED_FIRST["train_lengths"]))))
    for col, L in enumerate(Ls):
        top, bottom = axes[0, col], axes[1, col]
        for trained, scale, color, ls in _CURVES:
            runs = sorted({k[1] for k in acc if k[0] == L and k[1].split("@")[0] == trained and k[2] == scale})
            for scheme in runs:
                ns = sorted(k[3] for k in acc if k[:3] == (L, scheme, scale))
                label = first_scale_name(scheme, scale)
                y = [np.mean(list(acc[L, scheme, scale, n].values())) for n in ns]
                top.plot(ns, y, ls, color=color, lw=1.5, marker="o", ms=3, label=label)
                for n in ns:
                    v = list(acc[L, scheme, scale, n].values())
                    top.plot([n] * len(v), v, ".", color=color, ms=3, alpha=0.35)
                sm = [np.mean(list(meas[L, scheme, scale, n].values())) for n in ns]
                sp = [np.nanmean(list(pred[L, scheme, scale, n].values())) for n in ns]
                bottom.plot(ns, sm, ls, color=color, lw=1.5)
                bottom.plot(ns, sp, "--", color=color, lw=0.9, marker="o", mfc="none", ms=4)
        if L in pub:
            top.plot([1000], [PUBLISHED_FIRST[STANDARD][pub[L]]], "s", color="k", mfc="none", ms=8,
                     label="published, standard")
            top.plot([1000], [PUBLISHED_FIRST["chiang_cholak"][pub[L]]], "D", color="k", mfc="none", ms=8,
                     label="published, log n")
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_xticks(sorted({k[3] for k in acc if k[0] == L}), minor=False)
            ax.set_xticks([], minor=True)
            ax.xaxis.set_major_formatter("{x:.0f}")
            ax.axvline(L, color="0.6", lw=0.8)
            ax.set_xlabel("n (bits after $)")
        top.set_title(f"trained at L = {L}", fontsize=10)
        top.set_ylim(0.4, 1.03)
        top.axhline(0.5, color="0.7", lw=0.8)
        bottom.set_ylim(0.0, 1.02)
        if col == 0:
            top.set_ylabel("accuracy of the first bit")
            bottom.set_ylabel(f"layer {last}: share of $ on the first bit")
    axes[0, 0].legend(fontsize=6.5, loc="lower left")
    bottom = axes[1, 0]
    bottom.plot([], [], "--", color="0.3", marker="o", mfc="none", label="predicted from L (i.i.d. theory)")
    bottom.legend(fontsize=6.5, loc="upper right")
    seeds = len(np.unique(r["seed"][r["kind"] == "test"]))
    fig.suptitle(f"FIRST (Chiang & Cholak's model): mean over {seeds} seeds, dots the seeds", fontsize=11)
    return fig


FIGURES = [("one_key_first", one_key_first_figure, {}, {})]

"""The real-decoder one-key figures (``real_passkey``, ``real_copy``), drawn from their committed CSVs.

Panel (a): the accuracy per sequence length in multiples of ``L`` (lines: a (RoPE, scale) pair,
colour the scale, line style the RoPE variant); (b) the mean loss on the scored tokens; (c) the
retrieving heads' share on the source keys, measured against the share predicted from ``L``, one
point per (sequence, head) of each cell (filled past ``L``, open at or below it), over the diagonal;
(d) past ``L``, each scale's loss minus ``standard``'s under the same RoPE variant, one dot per
sequence (the paired difference the evidence reads) and a bar at their mean, a group of columns per
length and RoPE variant.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from ._style import new_figure

__all__ = ["real_copy_figure", "real_passkey_figure"]

_STYLES = {"none": "-", "ntk": "--", "yarn": ":", "pi": "-.", "dynamic_ntk": (0, (3, 1, 1, 1))}


def _figure(name, title, metric, table, csv, whole_range=True):
    from ..experiments import EXPERIMENTS
    from .train import committed_table

    t = committed_table(EXPERIMENTS[name], table, csv)
    r = t.rows
    L = int(t.header["train_length"])
    sc = (r["kind"] == "score") & (r["task"] != "control")
    fig, ((a, b), (c, d)) = new_figure(2, 2, width=12.0, height=8.8)
    scales = list(dict.fromkeys(r["scale"][sc]))
    colours = {s: f"C{i}" for i, s in enumerate(scales)}
    pairs = list(dict.fromkeys(zip(r["rope"][sc], r["scale"][sc])))
    for rope, scale in pairs:
        ns, acc, loss = [], [], []
        for n in sorted(set(r["length"][sc])):
            m = sc & (r["length"] == n) & (((r["rope"] == rope) & (r["scale"] == scale)) if n > L else True)
            if m.any():
                ns.append(n / L)
                acc.append(np.mean(r["accuracy"][m]))
                loss.append(np.mean(r["loss"][m]))
        kw = dict(color=colours[scale], ls=_STYLES.get(rope, "-"), marker="o", ms=3, label=f"{rope} + {scale}")
        a.plot(ns, acc, **kw)
        b.plot(ns, loss, **kw)
    for ax, lab in ((a, metric), (b, "mean loss on the scored tokens (nats)")):
        ax.set_xscale("log", base=2)
        ax.axvline(1.0, color="0.6", lw=0.8)
        ax.set_xlabel("sequence length / L")
        ax.set_ylabel(lab)
    if whole_range:
        a.set_ylim(-0.03, 1.03)
    a.legend(fontsize=8, handlelength=3.5)
    sh = (r["kind"] == "share") & np.isfinite(r["share"]) & np.isfinite(r["share_predicted"])
    for rope, scale in pairs:
        m = sh & (r["rope"] == rope) & (r["scale"] == scale)
        far = m & (r["length"] > L)
        c.scatter(r["share_predicted"][far], r["share"][far], s=12, color=colours[scale], marker="o")
        near = m & (r["length"] <= L)
        c.scatter(r["share_predicted"][near], r["share"][near], s=12, facecolors="none", edgecolors=colours[scale])
    c.plot([0, 1], [0, 1], color="0.6", lw=0.8)
    c.set_xlabel("share predicted from L (i.i.d. theory)")
    c.set_ylabel("share measured (retrieving heads)")
    c.set_title("one point per (sequence, head): filled past L, open at or below", fontsize=9)
    dot = dict(ls="none", marker="o", ms=5)
    keys = [Line2D([], [], color=colours[s], **dot) for s in scales]
    keys += [Line2D([], [], color="0.3", **dot), Line2D([], [], mfc="none", mec="0.3", **dot)]
    c.legend(keys, [*scales, "past L", "at or below L"], fontsize=8, title="scale at test", title_fontsize=8,
             loc="lower right")
    _paired(d, EXPERIMENTS[name], t, sc, L, colours)
    fig.suptitle(f"{title} (L = {L})", fontsize=11)
    return fig


def _paired(ax, experiment, t, sc, L, colours):
    """Panel (d): per-sequence loss differences against ``standard`` under the same RoPE, past ``L``.

    One group of columns per (length, RoPE), one column per scale in it, coloured as in panel (a).
    """
    r = t.rows
    groups: dict = {}
    for task, n, rope, scale in dict.fromkeys(zip(r["task"][sc], r["length"][sc], r["rope"][sc], r["scale"][sc])):
        if n <= L or scale == "standard":
            continue
        diff = np.array(list(experiment.paired_differences(t, task, n, rope, scale, "loss", rope).values()))
        if diff.size:
            groups.setdefault((n, rope), []).append((scale, diff))
    order = sorted(groups, key=lambda k: k[0])  # by length; the RoPE variants in the order they ran
    shown = {}
    for g, (n, rope) in enumerate(order):
        cols = groups[(n, rope)]
        width = 0.8 / len(cols)
        for j, (scale, diff) in enumerate(cols):
            x = g - 0.4 + width * (j + 0.5)
            shown[scale] = ax.scatter(np.full(diff.size, x), diff, s=10, color=colours[scale], alpha=0.7)
            ax.plot([x - 0.4 * width, x + 0.4 * width], [diff.mean()] * 2, color=colours[scale], lw=2)
        if g:
            ax.axvline(g - 0.5, color="0.85", lw=0.8)
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(order)), [f"{rope}, {n / L:g}L" for n, rope in order], fontsize=8)
    ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.legend(shown.values(), shown.keys(), fontsize=8, title="scale at test", title_fontsize=8)
    ax.set_ylabel("loss minus standard, same RoPE (nats)")
    ax.set_title("past L, paired by sequence (bar: mean)", fontsize=9)


def real_passkey_figure(table=None, csv=None):
    """SmolLM2-135M retrieving a pass key: retrieval, the digits' loss, the retrieving heads' share."""
    return _figure("real_passkey", "SmolLM2-135M: a pass key among n tokens",
                   "pass keys retrieved (all five digits)", table, csv)


def real_copy_figure(table=None, csv=None):
    """SmolLM2-135M copying text: the second copy's accuracy and loss, the retrieving heads' share."""
    return _figure("real_copy", "SmolLM2-135M: m tokens followed by themselves",
                   "second copy's tokens by greedy choice", table, csv, whole_range=False)


FIGURES = [("real_passkey", real_passkey_figure, {}, {}), ("real_copy", real_copy_figure, {}, {})]

"""Figure of the real-decoder length-extrapolation run, drawn from its committed CSV."""

from __future__ import annotations

import numpy as np

from ._style import new_figure


def extrapolation_figure(res):
    """Loss per bucket against the sliding-window baseline, and measured against predicted entropy."""
    fig, axes = new_figure(2, 1, width=12, height=4.6)
    ax = axes[0]
    table = res.loss_table()
    base = table.get(("window", "standard"))
    L = int(res.header.get("train_length", 0))
    styles = {"none": "-", "ntk": "--", "yarn": ":", "pi": "-."}
    for key, (edges, loss) in table.items():
        if key[0] in ("window", "iid"):
            continue
        mid = edges.mean(axis=1)
        ax.plot(mid, loss, styles.get(key[0], "-"), marker="o", ms=3, label=f"{key[0]} / {key[1]}")
    if base is not None:
        e, b = base
        ax.plot(e.mean(axis=1), b, "k-", lw=2.5, label="sliding window (baseline)")
    ax.axvline(L, color="0.5", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("position (bucket middle)")
    ax.set_ylabel("loss (nats / token)")
    ax.legend(fontsize=6, ncol=2)
    ax = axes[1]
    for scheme in ("standard", "qwen_logn", "entropy_invariant", "yarn"):
        try:
            meas, edges = res.head_stat("entropy", "none", scheme)
            pred, _ = res.head_stat("pred_normal", "iid", scheme)
        except ValueError:
            continue
        far = edges[:, 0] >= L
        ax.scatter(pred[..., far].ravel(), meas[..., far].ravel(), s=3, alpha=0.4, label=scheme)
    lim = ax.get_xlim()
    ax.plot(lim, lim, "k-", lw=0.8)
    ax.set_xlabel("i.i.d. prediction of E[H] (normal, from sigma inside L)")
    ax.set_ylabel("measured H past L (rope none)")
    ax.legend(fontsize=7)
    return fig


def save_extrapolation_figure(res, path):
    """Draw :func:`extrapolation_figure` and save it as a PNG."""
    fig = extrapolation_figure(res)
    fig.savefig(path, dpi=110)

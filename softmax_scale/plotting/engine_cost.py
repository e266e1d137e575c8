"""What an engine's wrong factor on ``q.k`` costs SmolLM2-135M (loss, next-token KL), beside the i.i.d. theory's KL."""

from __future__ import annotations

import numpy as np

from ._style import new_figure

__all__ = ["FIGURES", "engine_cost_figure"]

_STYLES = {"all": "-", "half": ":", "every_fourth": "--"}


def engine_cost_figure(table=None, csv=None):
    """The loss change and the next-token KL (measured) and the i.i.d. KL per head (theory) against the factor, per length and shape."""
    from ..experiments import EXPERIMENTS
    from .train import committed_table

    t = committed_table(EXPERIMENTS["engine_cost"], table, csv)
    r = t.rows
    fig, (a, k, b) = new_figure(3, width=15.0, height=4.4)
    lengths = sorted(set(r["length"].tolist()))
    for j, n in enumerate(lengths):
        for shape in dict.fromkeys(r["shape"].tolist()):
            m = (r["length"] == n) & (r["shape"] == shape)
            # the reference itself (factor 1) costs 0 by definition: the point joins the two sides
            x = np.append(r["ratio"][m], 1.0)
            order = np.argsort(x)
            kw = dict(color=f"C{j}", ls=_STYLES.get(shape, ":"), marker="o", ms=3, label=f"n = {n}, {shape}")
            a.errorbar(x[order], np.append(r["delta_loss"][m], 0.0)[order],
                       yerr=np.append(r["delta_se"][m], 0.0)[order], capsize=2, **kw)
            k.errorbar(x[order], np.append(r["kl"][m], 0.0)[order], yerr=np.append(r["kl_se"][m], 0.0)[order],
                       capsize=2, **kw)
            if np.isfinite(r["iid_kl"][m]).all():  # a factor on part of the dimensions has no i.i.d. theory
                b.plot(x[order], np.append(r["iid_kl"][m], 0.0)[order], **kw)
    a.axhline(0.0, color="0.6", lw=0.8)
    ticks = []
    for v in sorted({1.0, *r["ratio"].tolist()}):  # labels at least 6% apart
        if not ticks or v / ticks[-1] > 1.06:
            ticks.append(v)
    for ax in (a, k, b):
        ax.set_xscale("log")
        ax.set_xticks(ticks, [f"{v:.3g}" for v in ticks])
        ax.minorticks_off()
        ax.axvline(1.0, color="0.6", lw=0.8)
        ax.set_xlabel("factor on q.k (engine over the authors')")
        ax.legend(fontsize=7)
    a.set_ylabel("loss change, nats per token (measured, ± SE)")
    k.set_ylabel("next-token KL, nats (measured, ± SE)")
    b.set_ylabel("i.i.d. KL between a head's rows (theory, nats)")
    a.set_title(f"SmolLM2-135M: next-token loss on {t.header.get('doc', '?')}", fontsize=9)
    k.set_title("KL(as trained || engine's factor), same positions", fontsize=9)
    b.set_title("i.i.d. theory at the measured head scales (whole logits)", fontsize=9)
    return fig


FIGURES = [("engine_cost", engine_cost_figure, {}, {})]

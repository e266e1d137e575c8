"""The causal experiment's figures, drawn from the committed ``figures/train_causal.csv``.

``make figures`` redraws them and never trains; without the CSV both are skipped with one line.
Reading needs numpy only, not JAX.
"""

from __future__ import annotations

import json

import numpy as np

from ..schemes import ENTROPY_INVARIANT, QWEN_LOGN, SCHEMES, STANDARD, YARN
from ._style import new_figure


def _train_color(scheme):
    return SCHEMES[scheme].style.train_color


#: (trained scheme, test scale, label, color, line style) of each curve; a registry scale's colour is its
#: style's ``train_color`` (the trained scheme's when the test scale is the trained one).
_CURVES = ((STANDARD, "trained", "no log n", _train_color(STANDARD), "-"),
           (STANDARD, QWEN_LOGN, "log n at test (qwen_logn)", _train_color(QWEN_LOGN), "--"),
           (STANDARD, YARN, "YaRN temperature at test", _train_color(YARN), "--"),
           (ENTROPY_INVARIANT, "trained", "log n trained in", _train_color(ENTROPY_INVARIANT), "-"),
           (STANDARD, "toolkit_iid", "toolkit per-head (i.i.d.)", "C4", ":"),
           (STANDARD, "toolkit_measured", "toolkit per-head (measured)", "C5", ":"))


def _table(table, csv):
    from ..experiments.causal import EXPERIMENT
    from .train import committed_table

    return committed_table(EXPERIMENT, table, csv)


def _per_bucket(r, mask, n):
    """Per bucket of the test length ``n``: centres (positions), and per seed the metric arrays."""
    m = mask & (r["length"] == n)
    lo = np.unique(r["lo"][m])
    seeds = np.unique(r["seed"][m])
    hi = np.array([r["hi"][m & (r["lo"] == a)][0] for a in lo])
    out = {}
    for what in ("loss", "accuracy"):
        out[what] = np.array([[r[what][m & (r["lo"] == a) & (r["seed"] == s)].mean() for a in lo] for s in seeds])
    return lo, hi, out


def train_causal_figure(table=None, csv=None):
    """Loss and accuracy against position at ``16L`` for each (RoPE, scale) pair, beside the sliding window.

    One column per RoPE variant; each curve the mean over seeds with the spread (min to max) shaded.
    """
    from ..schemes.rope import ROPES

    table = _table(table, csv)
    r = table.rows
    ok = r["status"] == "ok"
    test = ok & (r["kind"] == "test")
    n = int(r["length"][test].max())
    cfg = json.loads(table.header.get("config", "{}"))
    L = int(cfg.get("train_length", 0)) or int(r["length"][test].min())
    fig, axes = new_figure(len(ROPES), 2, width=3.1 * len(ROPES), height=7.6, sharex=True)
    wmask = ok & (r["kind"] == "window") & np.char.startswith(r["scheme"].astype(str), STANDARD)
    for col, rope in enumerate(ROPES):
        for row, what in enumerate(("loss", "accuracy")):
            ax = axes[row, col]
            k = 100.0 if what == "accuracy" else 1.0
            if wmask.any():
                lo, hi, v = _per_bucket(r, wmask, n)
                x = (lo + hi) / 2 / L
                ax.plot(x, k * v[what].mean(0), "k-", lw=2.2, alpha=0.45, label=f"sliding window of L={L}")
            for trained, scale, label, color, ls in _CURVES:
                m = test & np.char.startswith(r["scheme"].astype(str), trained) & (r["rope"] == rope) \
                    & (np.char.partition(r["scale"].astype(str), "@")[:, 0] == scale)
                if not m.any():
                    continue
                lo, hi, v = _per_bucket(r, m, n)
                x = (lo + hi) / 2 / L
                y = k * v[what]
                ax.plot(x, y.mean(0), ls, color=color, lw=1.4, label=label)
                if y.shape[0] > 1:
                    ax.fill_between(x, y.min(0), y.max(0), color=color, alpha=0.15, lw=0)
            ax.axvline(1.0, color="0.6", lw=0.8)
            ax.set_xscale("log", base=2)
            if row == 0:
                ax.set_title(f"RoPE {rope}", fontsize=10)
            if row == 1:
                ax.set_xlabel(f"position / L (test length {n} = {n // L}L)")
            # every panel has its own y range, so each says what it shows (the first in full)
            if col == 0:
                ax.set_ylabel("loss (nats per byte)" if what == "loss" else "next-byte accuracy (%)")
            else:
                ax.set_ylabel("loss" if what == "loss" else "accuracy (%)", fontsize=8)
    axes[0, 0].legend(fontsize=7, loc="upper left")
    seeds = len(np.unique(r["seed"][test]))
    fig.suptitle(f"Causal byte models trained at L = {L}, tested at {n // L}L: mean over {seeds} seeds, "
                 "shading min to max", fontsize=11)
    return fig


def train_causal_heads_figure(table=None, csv=None):
    """Each head's entropy against ``n`` at ``16L`` beside the i.i.d. prediction, as a drift from its value just below ``L``.

    Panels: (``standard``, ``log n`` trained in) x (RoPE ``none``, ``rerope``).  Thin lines are
    heads (every seed), thick their median; solid measured, dashed the exact evaluator's
    prediction on the head's own pooled scores at its ``sigma`` just below ``L`` (the scale growing
    as the trained scheme says).
    """
    table = _table(table, csv)
    r = table.rows
    m0 = (r["status"] == "ok") & (r["kind"] == "head_entropy")
    models = [lab for lab in (STANDARD, ENTROPY_INVARIANT) if np.any(np.char.startswith(r["scheme"][m0].astype(str), lab))]
    ropes = [x for x in ("none", "rerope") if np.any(r["rope"][m0] == x)]
    fig, axes = new_figure(max(1, len(ropes)), max(1, len(models)), width=11.0, height=8.0, sharey=True)
    axes = np.asarray(axes).reshape(max(1, len(models)), max(1, len(ropes)))
    cfg = json.loads(table.header.get("config", "{}"))
    L = int(cfg.get("train_length", 1))
    for i, lab in enumerate(models):
        for j, rope in enumerate(ropes):
            ax = axes[i, j]
            m = m0 & np.char.startswith(r["scheme"].astype(str), lab) & (r["rope"] == rope)
            lo = np.unique(r["lo"][m])
            hi = np.array([r["hi"][m & (r["lo"] == a)][0] for a in lo])
            x = np.maximum((lo + hi) / 2, 1) / L
            ref = np.flatnonzero(hi <= L)[-1]  # the last bucket inside L
            curves = {"measured": [], "predicted": []}
            for sd in np.unique(r["seed"][m]):
                for layer, head in sorted(set(zip(r["layer"][m], r["head"][m]))):
                    mm = m & (r["seed"] == sd) & (r["layer"] == layer) & (r["head"] == head)
                    order = np.argsort(r["lo"][mm])
                    for what, col in (("measured", "entropy"), ("predicted", "predicted")):
                        y = r[col][mm][order]
                        curves[what].append(y - y[ref])
            for what, color, ls in (("measured", "C0", "-"), ("predicted", "C3", "--")):
                ys = np.array(curves[what])
                for y in ys:
                    ax.plot(x, y, ls, color=color, lw=0.5, alpha=0.25)
                ax.plot(x, np.nanmedian(ys, axis=0), ls, color=color, lw=2.2,
                        label=f"{what} (median over {len(ys)} heads)" if what == "measured" else
                        "i.i.d. prediction, head's own scores (median)")
            ax.axvline(1.0, color="0.6", lw=0.8)
            ax.axhline(0.0, color="0.6", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{'log n trained in' if lab == ENTROPY_INVARIANT else STANDARD}, RoPE {rope}", fontsize=10)
            ax.set_xlabel("position / L")
            if j == 0:
                ax.set_ylabel("entropy minus its value in [L/2, L) (nats)")
            ax.legend(fontsize=7)
    return fig


FIGURES = [("train_causal", train_causal_figure, {}, {}), ("train_causal_heads", train_causal_heads_figure, {}, {})]


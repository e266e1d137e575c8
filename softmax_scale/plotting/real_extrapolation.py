"""The real-decoder length-extrapolation figure, drawn from the CSV that the run committed.

``make figures`` redraws it from ``figures/real_extrapolation.csv`` and never recomputes it: the
run took 85 minutes on 2 cores (``softmax-scale extrapolate``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._style import new_figure

#: The committed result of the full run (inside a source checkout).
DEFAULT_CSV = Path(__file__).resolve().parents[2] / "figures" / "real_extrapolation.csv"

_COLORS = {"standard": "C0", "qwen_logn": "C1", "yarn": "C2", "entropy_invariant": "C3", "llama4": "C4",
           "ssmax": "C5"}
_STYLES = {"none": "-", "ntk": "--", "yarn": ":", "pi": "-."}


def _legend(ax, **kw):
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


def _kilo(x):
    """``12288`` as ``12k``, ``384`` as it is."""
    return f"{x / 1024:g}k" if x >= 1024 else str(x)


def _mid(edges):
    return np.sqrt(np.maximum(edges[:, 0], 1) * edges[:, 1])


def extrapolation_figure(res=None, csv=None):
    """Four panels from an :class:`~softmax_scale.models.extrapolation.ExtrapolationResult`.

    (a) loss per bucket minus the baseline of the same bucket (the sliding window past ``L``,
    the model itself below); (b) per-head entropy in the last bucket, measured under RoPE ``none``
    against the i.i.d. prediction from the head's ``sigma`` and scores inside ``L``; (c) the change
    of each head's entropy from ``[L/2, L)`` to the last bucket, measured against predicted;
    (d) the factor on each head's scale that would hold its ``E[H]`` (``invariant_scale``)
    against the factors the schemes apply.
    """
    if res is None:
        from ..models.extrapolation import read_extrapolation_csv

        path = Path(csv) if csv is not None else DEFAULT_CSV
        if not path.exists():
            from . import FigureUnavailable

            raise FigureUnavailable(f"{path} not found: it is written by `softmax-scale extrapolate` (85 minutes on 2 cores); "
                                    "`make figures` only redraws it")
        res = read_extrapolation_csv(path)
    fig, axes = new_figure(2, 2, width=12.5, height=9.0)
    (ax_a, ax_b), (ax_c, ax_d) = axes
    L = res.train_length
    n = res.length
    table = res.loss_table()
    edges = next(iter(table.values()))[0]
    nanrow = np.full(len(edges), np.nan)
    base = table.get(("window", "standard"), (edges, nanrow))[1].copy()  # a partial run may lack it
    inside = edges[:, 0] < L
    base[inside] = table.get(("none", "standard"), (edges, nanrow))[1][inside]
    for key, (e, loss) in sorted(table.items()):
        if key == ("window", "standard"):
            continue
        ax_a.plot(_mid(e), loss - base, _STYLES.get(key[0], "-"), color=_COLORS.get(key[1], "k"), marker="o", ms=3,
                  label=f"{key[0]} / {key[1]}")
    ax_a.axhline(0, color="k", lw=1)
    top = 1.7
    off = [(k, e, v) for k, (e, v) in table.items() if k != ("window", "standard") and np.nanmax(v - base) > top]
    if off:
        worst = max(np.nanmax(v - base) for _, _, v in off)
        ropes = ", ".join(sorted({k[0] for k, _, _ in off}))
        since = min(int(e[np.nonzero(v - base > top)[0][0], 0]) for _, e, v in off)  # the first bucket off the scale
        ax_a.set_ylim(-0.2, top)
        ax_a.text(0.97, 0.45, f"off the scale:\nRoPE {ropes} past {_kilo(since)},\nup to +{worst:.1f} nats",
                  transform=ax_a.transAxes, ha="right", va="center", fontsize=8)
    ax_a.axvline(L, color="0.5", lw=0.8)
    ax_a.set_xscale("log", base=2)
    ax_a.set_xlabel("position t of the predicted token (bucket, geometric middle)")
    ax_a.set_ylabel("loss - baseline (nats / token)")
    ax_a.set_title(f"(a) loss against the baseline; L = {L}, n = {n}\n(baseline: sliding window of L past L, "
                   "none/standard below)", fontsize=9)
    _legend(ax_a, fontsize=6, ncol=2)

    last = len(edges) - 1
    ref_b = int(np.nonzero(edges[:, 1] == L)[0][0])
    lo = np.inf
    hi = -np.inf
    rope = "yarn" if ("yarn", "standard") in table else "none"  # the RoPE that keeps the model working
    schemes = [s for s in ("standard", "qwen_logn", "yarn", "entropy_invariant") if (rope, s) in table]
    have_pred = res.has("none", "standard", kind="iid")
    for s in schemes if have_pred else ():
        meas, _ = res.head_stat("entropy", rope, s)
        pn, _ = res.prediction("pred_normal", s)
        pe, _ = res.prediction("pred_empirical", s)
        x, y = pe[..., last].ravel(), meas[..., last].ravel()
        ax_b.scatter(x, y, s=4, alpha=0.5, color=_COLORS[s], label=f"{s} (empirical)")
        ax_b.scatter(pn[..., last].ravel(), y, s=4, alpha=0.3, marker="x", color=_COLORS[s])
        lo, hi = min(lo, x.min(), y.min()), max(hi, x.max(), y.max())
    if np.isfinite(lo):
        ax_b.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax_b.set_xlabel("i.i.d. prediction of E[H] (dots: head's own scores; x: normal)")
    ax_b.set_ylabel(f"measured entropy (nats), RoPE {rope}")
    ax_b.set_title(f"(b) per head, last bucket [{edges[last, 0]}, {edges[last, 1]})", fontsize=9)
    _legend(ax_b, fontsize=7, markerscale=3)

    for s in [s for s in ("standard", "qwen_logn", "yarn") if s in schemes and have_pred]:
        meas, _ = res.head_stat("entropy", rope, s)
        pe, _ = res.prediction("pred_empirical", s)
        dm = (meas[..., last] - meas[..., ref_b]).ravel()
        dp = (pe[..., last] - pe[..., ref_b]).ravel()
        ax_c.scatter(dp, dm, s=5, alpha=0.5, color=_COLORS[s], label=s)
    lim = np.array(ax_c.get_xlim())
    ax_c.plot(lim, lim, "k-", lw=0.8)
    ax_c.axhline(0, color="0.6", lw=0.6)
    ax_c.set_xlabel("predicted change of E[H] (i.i.d., head's own scores)")
    ax_c.set_ylabel(f"measured change of H, RoPE {rope}")
    ax_c.set_title(f"(c) entropy change from [{edges[ref_b, 0]}, {L}) to the last bucket", fontsize=9)
    _legend(ax_c, fontsize=7, markerscale=3)

    try:
        inv, _ = res.prediction("invariant_factor", schemes[0])
    except ValueError:  # no predictions yet (partial run)
        inv = np.full((1, 1, 1, len(edges)), np.nan)
    v = inv[..., last].ravel()
    v = v[np.isfinite(v)]
    if v.size:
        ax_d.hist(v, bins=40, color="0.6")
    from ..models.buckets import bucket_keys
    from ..models.llama import scale_factors

    nb = float(bucket_keys(edges)[last])
    for s in schemes:
        f = float(scale_factors(s, [nb], res.head_dim, L)[0])
        ax_d.axvline(f, color=_COLORS[s], lw=2, label=f"{s}: x{f:.3f}")
    ax_d.set_xlabel(f"factor on the scale at n = {nb:.0f} that holds each head's E[H] (invariant_scale)")
    ax_d.set_ylabel("heads")
    ax_d.set_title(f"(d) {v.size} of {inv[..., last].size} heads solvable", fontsize=9)
    _legend(ax_d, fontsize=7)
    return fig


#: The figure runner redraws it from the committed CSV (quick or not: it recomputes nothing).
FIGURES = [("real_extrapolation", extrapolation_figure, {}, {})]


def save_extrapolation_figure(res, path, dpi: int = 110):
    """Draw :func:`extrapolation_figure` and save it as a PNG."""
    extrapolation_figure(res).savefig(path, dpi=dpi)

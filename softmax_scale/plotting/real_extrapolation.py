"""The real-decoder length-extrapolation figure, drawn from the CSV that the run committed.

``make figures`` redraws it from ``figures/real_extrapolation.csv`` and never recomputes it
(``softmax-scale extrapolate`` writes it).  Colours are the scales, line
styles the RoPE variants, and, as in ``real_heads_entropy``, dots the normal and crosses the
empirical i.i.d. prediction.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import MultipleLocator

from ..experiments.base import RESULTS
from ..schemes import SCHEMES, STANDARD
from ._style import new_figure

#: The committed result of the full run (inside a source checkout).
DEFAULT_CSV = RESULTS / "real_extrapolation.csv"

_STYLES = {"none": "-", "ntk": "--", "yarn": ":", "pi": "-."}
#: The baseline's key in the loss table.
_WINDOW = ("window", STANDARD)


#: Past ``L``, panel (b) zooms on the RoPE variants whose every pair stays within this of the window (nats per token).
ZOOM = 0.25
#: Panel (a)'s upper limit (nats per token above the baseline).
TOP = 1.7


def _kilo(x):
    """``12288`` as ``12k``, ``384`` as it is."""
    return f"{x / 1024:g}k" if x >= 1024 else str(x)


def _color(scheme):
    """A scale's colour: its registry style's ``decoder_color`` (black for a scale no longer registered)."""
    return SCHEMES[scheme].style.decoder_color if scheme in SCHEMES else "k"


def _label(scheme):
    return SCHEMES[scheme].style.label if scheme in SCHEMES else scheme


def _rank(scheme):
    """Scales in the order of their colours in the colour cycle (``C0`` first), then the others in registry order."""
    keys = list(SCHEMES)
    c = _color(scheme)
    cycle = int(c[1:]) if c[:1] == "C" and c[1:].isdigit() else len(keys)
    return cycle, keys.index(scheme) if scheme in SCHEMES else len(keys), scheme


def _mid(edges):
    return np.sqrt(np.maximum(edges[:, 0], 1) * edges[:, 1])


def _baseline(res, table, edges):
    """Per bucket: the sliding window past ``L``, the model itself (``none``/``standard``) below; NaN where missing."""
    nanrow = np.full(len(edges), np.nan)
    base = table.get(_WINDOW, (edges, nanrow))[1].copy()  # a partial run may lack it
    inside = edges[:, 0] < res.train_length
    base[inside] = table.get(("none", STANDARD), (edges, nanrow))[1][inside]
    return base


def _panel_loss(ax, res, table, edges, base):
    """(a) loss minus the baseline of its bucket, every (RoPE, scale) pair, over all positions."""
    L = res.train_length
    pairs = sorted(k for k in table if k != _WINDOW)
    for key in pairs:
        e, loss = table[key]
        mark = SCHEMES[key[1]].style.marker if key[1] in SCHEMES else "o"
        ax.plot(_mid(e), loss - base, _STYLES.get(key[0], "-"), color=_color(key[1]), marker=mark, ms=3)
    ax.axhline(0, color="k", lw=1)
    off = [(k, table[k][0], table[k][1]) for k in pairs if np.nanmax(table[k][1] - base) > TOP]
    if off:
        worst = max(np.nanmax(v - base) for _, _, v in off)
        ropes = ", ".join(sorted({k[0] for k, _, _ in off}))
        since = min(int(e[np.nonzero(v - base > TOP)[0][0], 0]) for _, e, v in off)  # the first bucket off the scale
        ax.set_ylim(-0.2, TOP)
        ax.text(0.97, 0.45, f"off the scale:\nRoPE {ropes} past {_kilo(since)},\nup to +{worst:.1f} nats",
                transform=ax.transAxes, ha="right", va="center", fontsize=9)
    ax.axvline(L, color="0.5", lw=0.8)
    ax.text(L, 1.0, " L", transform=ax.get_xaxis_transform(), ha="left", va="top", fontsize=9, color="0.4")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("position t of the predicted token (bucket, geometric middle)")
    ax.set_ylabel("loss - baseline (nats / token)")
    ax.set_title(f"(a) loss against the baseline, L = {L}, n = {res.length}\n"
                 "(baseline: sliding window of L past L; none / standard below)", fontsize=10)


def _panel_past(ax, res, table, edges, base):
    """(b) past ``L``: each pair's difference from the sliding window, per bucket and RoPE, on a scale that shows 0.01."""
    L = res.train_length
    past = np.nonzero((edges[:, 0] >= L) & np.isfinite(base))[0]
    pairs = sorted(k for k in table if k != _WINDOW)
    diff = {k: table[k][1][past] - base[past] for k in pairs}
    off_ropes = {k[0] for k in pairs if not past.size or np.nanmax(np.abs(diff[k])) > ZOOM}  # a RoPE is shown whole
    near = [k for k in pairs if k[0] not in off_ropes]
    far = [k for k in pairs if k[0] in off_ropes]
    ropes = sorted({k[0] for k in near}, key=list(_STYLES).index)
    scales = sorted({k[1] for k in near}, key=_rank)
    group = len(scales) + 1  # a gap after each RoPE's scales
    span = len(ropes) * group + 1  # and one more after each bucket
    centres, names = [], []
    for b in range(past.size):
        for i, r in enumerate(ropes):
            centres.append(b * span + i * group + (len(scales) - 1) / 2)
            names.append(f"RoPE\n{r}")
            for j, sc in enumerate(scales):
                if (r, sc) in near:
                    x, y = b * span + i * group + j, diff[(r, sc)][b]
                    ax.plot([x, x], [0.0, y], color=_color(sc), lw=3, solid_capstyle="butt")
                    ax.plot([x], [y], "o", color=_color(sc), ms=5)
        if b:
            ax.axvline(b * span - 1.0, color="0.6", lw=0.8)
        ax.text(b * span + (len(ropes) * group - 2) / 2, 1.0, f"bucket [{_kilo(edges[past[b], 0])}, "
                f"{_kilo(edges[past[b], 1])})", transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=9)
    ax.axhline(0, color="k", lw=1)
    ax.set_xticks(centres, names, fontsize=9)
    ax.set_xlim(-1.0, past.size * span - 1.0)
    if near:
        lo = min(0.0, min(np.nanmin(diff[k]) for k in near))
        hi = max(0.0, max(np.nanmax(diff[k]) for k in near))
        pad = 0.1 * (hi - lo) + 0.002
        ax.set_ylim(lo - 0.3 * pad, hi + pad)
        ax.yaxis.set_major_locator(MultipleLocator(0.01 if hi - lo < 0.12 else 0.05))
        ax.grid(axis="y", color="0.85", lw=0.6)
    if far:
        text = "; ".join(f"RoPE {r} {min(np.nanmin(diff[k]) for k in far if k[0] == r):+.2f} to "
                         f"{max(np.nanmax(diff[k]) for k in far if k[0] == r):+.2f}"
                         for r in sorted({k[0] for k in far}))
        ax.text(0.02, 0.97, f"off this scale: {text} (panel a)", transform=ax.transAxes, ha="left", va="top", fontsize=9)
    ax.set_ylabel("loss - sliding window (nats / token)")
    ax.set_title("(b) past L: each pair against the sliding window of its bucket\n"
                 "(0: as good as the window; below 0: the long context helps)", fontsize=10, pad=16)


def extrapolation_figure(table=None, csv=None):
    """Five panels and a legend from an :class:`~softmax_scale.experiments.real_extrapolation.ExtrapolationResult`.

    (a) loss per bucket minus the baseline of the same bucket (the sliding window past ``L``,
    the model itself below); (b) past ``L`` only, each (RoPE, scale) pair's difference from the
    sliding window per bucket, on a scale that resolves 0.01 nats (the RoPE variants whose pairs
    all stay within 0.25 nats; the others are named with their range); (c) per-head entropy in the last bucket,
    measured against the i.i.d. prediction from the head's ``sigma`` and scores inside ``L``
    (dot: normal scores, x: the head's own, as in ``real_heads_entropy``); (d) the change of each
    head's entropy from ``[L/2, L)`` to the last bucket, measured against predicted, under the
    scales equal to ``standard`` at every position inside ``L``; (e) the
    factor on each head's scale that would hold its ``E[H]`` (``invariant_scale``) against the
    factors the schemes apply; (f) one legend for all: colour = scale (its registry style's
    ``decoder_color``), line style = RoPE, marker = prediction.
    """
    res = table
    if res is None:
        from ..experiments.real_extrapolation import read_extrapolation_csv

        path = Path(csv) if csv is not None else DEFAULT_CSV
        if not path.exists():
            from . import FigureUnavailable

            raise FigureUnavailable(f"{path} not found: it is written by `softmax-scale extrapolate`; "
                                    "`make figures` only redraws it")
        res = read_extrapolation_csv(path)
    fig, axes = new_figure(2, 3, width=11.0, height=13.0)
    (ax_a, ax_b), (ax_c, ax_d), (ax_e, ax_f) = axes
    L = res.train_length
    table = res.loss_table()
    edges = next(iter(table.values()))[0]
    base = _baseline(res, table, edges)
    _panel_loss(ax_a, res, table, edges, base)
    _panel_past(ax_b, res, table, edges, base)

    last = len(edges) - 1
    ref_b = int(np.nonzero(edges[:, 1] == L)[0][0])
    lo = np.inf
    hi = -np.inf
    rope = "yarn" if ("yarn", STANDARD) in table else "none"  # the RoPE that keeps the model working
    schemes = sorted((s for r, s in table if r == rope), key=_rank)
    have_pred = res.has("none", STANDARD, kind="iid")
    for s in schemes if have_pred else ():
        meas, _ = res.head_stat("entropy", rope, s)
        pn, _ = res.prediction("pred_normal", s)
        pe, _ = res.prediction("pred_empirical", s)
        y = meas[..., last].ravel()
        x_n, x_e = pn[..., last].ravel(), pe[..., last].ravel()
        ax_c.scatter(x_n, y, s=5, alpha=0.35, color=_color(s))
        ax_c.scatter(x_e, y, s=9, alpha=0.35, marker="x", lw=0.6, color=_color(s))
        lo, hi = min(lo, x_n.min(), x_e.min(), y.min()), max(hi, x_n.max(), x_e.max(), y.max())
    if np.isfinite(lo):
        ax_c.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax_c.set_xlabel("i.i.d. prediction of E[H] (nats; dot: normal, x: empirical)")
    ax_c.set_ylabel(f"measured entropy (nats), RoPE {rope}")
    ax_c.set_title(f"(c) per head, last bucket [{_kilo(edges[last, 0])}, {_kilo(edges[last, 1])})", fontsize=10)

    from ..models.buckets import bucket_keys
    from ..models.llama import scale_factors

    inside = np.arange(1, L + 1)
    unit = [s for s in schemes if np.all(scale_factors(s, inside, res.head_dim, L) == 1.0)]  # standard inside L
    for s in unit if have_pred else ():
        meas, _ = res.head_stat("entropy", rope, s)
        pe, _ = res.prediction("pred_empirical", s)
        dm = (meas[..., last] - meas[..., ref_b]).ravel()
        dp = (pe[..., last] - pe[..., ref_b]).ravel()
        ax_d.scatter(dp, dm, s=6, alpha=0.5, color=_color(s))
    lim = np.array(ax_d.get_xlim())
    ax_d.plot(lim, lim, "k-", lw=0.8)
    ax_d.axhline(0, color="0.6", lw=0.6)
    ax_d.set_xlabel("predicted change of E[H] (i.i.d., head's own scores)")
    ax_d.set_ylabel(f"measured change of H, RoPE {rope}")
    ax_d.set_title(f"(d) entropy change from [{_kilo(edges[ref_b, 0])}, {_kilo(L)}) to the last bucket", fontsize=10)

    try:
        inv, _ = res.prediction("invariant_factor", schemes[0])
    except ValueError:  # no predictions yet (partial run)
        inv = np.full((1, 1, 1, len(edges)), np.nan)
    v = inv[..., last].ravel()
    v = v[np.isfinite(v)]
    if v.size:
        ax_e.hist(v, bins=40, color="0.6")
    nb = float(bucket_keys(edges)[last])
    factor = {s: float(scale_factors(s, [nb], res.head_dim, L)[0])
              for s in sorted({k[1] for k in table if k != _WINDOW}, key=_rank)}
    for s in schemes:
        ax_e.axvline(factor[s], color=_color(s), lw=2)
    ax_e.set_xlabel(f"factor on the scale at n = {nb:.0f} that holds the head's E[H]")
    ax_e.set_ylabel("heads")
    ax_e.set_title(f"(e) invariant_scale per head ({v.size} of {inv[..., last].size} solvable);\n"
                   "lines: the factors the scales apply", fontsize=10)

    _legend_panel(ax_f, factor, nb, sorted({k[0] for k in table if k != _WINDOW}, key=list(_STYLES).index))
    return fig


def _legend_panel(ax, factor, nb, ropes):
    """(f) the legend of every panel, grouped: scales (colour), RoPE variants (line style), predictions (marker)."""
    ax.axis("off")
    kw = {"fontsize": 10, "title_fontsize": 10, "frameon": False, "alignment": "left"}
    scales = [Line2D([], [], color=_color(s), lw=2.5, label=f"{_label(s)}  x{f:.3f}") for s, f in factor.items()]
    first = ax.legend(handles=scales, title=f"softmax scale (colour, every panel),\nits factor at n = {nb:.0f} (e)",
                      loc="upper left", bbox_to_anchor=(0.0, 1.0), **kw)
    ax.add_artist(first)
    styles = [Line2D([], [], color="0.3", ls=_STYLES.get(r, "-"), lw=1.5, label=f"RoPE {r}") for r in ropes]
    second = ax.legend(handles=styles, title="RoPE variant (line style, a)", loc="upper left", bbox_to_anchor=(0.0, 0.58),
                       **kw)
    ax.add_artist(second)
    marks = [Line2D([], [], color="0.3", ls="", marker="o", ms=5, label="i.i.d. normal scores at the head's sigma"),
             Line2D([], [], color="0.3", ls="", marker="x", ms=6, label="the head's own scores (empirical)")]
    ax.legend(handles=marks, title="i.i.d. prediction (marker, c)", loc="upper left", bbox_to_anchor=(0.0, 0.25), **kw)


#: The figure runner redraws it from the committed CSV (quick or not: it recomputes nothing).
FIGURES = [("real_extrapolation", extrapolation_figure, {}, {})]


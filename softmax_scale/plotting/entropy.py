"""Figures for entropy against length and the published scales.

One function per figure, each returning a :class:`matplotlib.figure.Figure`;
:data:`FIGURES` lists ``(name, function, full_kwargs, quick_kwargs)``.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .. import entropy as E
from ..contrastive import temperature_table
from ..entropy.invariant import invariant_scale
from ..laws import law_value
from ..objectives.causal import optimal_alpha_causal
from ..schemes import CRITICAL, ENTROPY_INVARIANT, SCHEMES, SSMAX, STANDARD, default_list, pinned
from ._style import SettledFigure

__all__ = ["FIGURES", "plot_causal_optimum", "plot_entropy_vs_n", "plot_extrapolation_drift",
           "plot_invariant_scale", "plot_phase_diagram", "plot_temperature_table"]

#: The schemes drawn by default: the registry's ``entropy_figures`` list (it follows registrations).
_SHOWN = default_list("entropy_figures")


def scheme_style(scheme) -> dict:
    """``plot`` keywords (colour, line style, width) of a scheme, the same in every figure: its registry style."""
    return SCHEMES[scheme].style.line()


def _label(scheme) -> str:
    return SCHEMES[scheme].style.label


def _colors(keys):
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {k: cmap(i % 10) for i, k in enumerate(keys)}


def plot_entropy_vs_n(ns=None, schemes=_SHOWN, *, d=128, train_length=512, match=1.0, score_model="cosine",
                      floor=1e-3, share_floor=1e-4) -> Figure:
    """Entropy against ``n`` per scheme: ``E[H]/log n`` with isotropic scores; ``E[H]`` and the share lost with a matching key.

    Panel (a) draws ``score_model``'s isotropic curves and says in its title how far the other score
    model's lie from them (at ``d = 128`` cosine and normal scores give nearly the same curves).

    Parameters
    ----------
    ns : array_like, optional
        Numbers of keys (default 24 values from 64 to 1e6).
    schemes : sequence of str
        Schemes drawn (by default the registry's ``entropy_figures`` list).
    d : int
        Head dimension.
    train_length : int
        Length at which length-aware schemes are pinned.
    match : float
        The matching key's cosine in panels (b) and (c).
    score_model : {"cosine", "normal"}
        The scores drawn; the other model is compared in panel (a)'s title.
    floor : float
        Lower edge of panel (b)'s logarithmic axis, nats; the schemes whose ``E[H]`` stays below it are named there.
    share_floor : float
        The same for panel (c), the share the matching key loses, ``1 - E[p0]``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    ns = np.unique(np.round(np.geomspace(64, 1e6, 24))) if ns is None else np.asarray(ns)
    other = {"cosine": "normal", "normal": "cosine"}[score_model]
    iso = E.entropy_curves(ns, schemes, d=d, score_model=score_model, pin_length=train_length)
    iso_other = E.entropy_curves(ns, schemes, d=d, score_model=other, pin_length=train_length)
    sig = E.entropy_curves(ns, schemes, d=d, score_model=score_model, match=match, pin_length=train_length)
    fig = SettledFigure(figsize=(11, 8), layout="constrained")
    (ax_a, ax_b), (ax_c, ax_l) = fig.subplots(2, 2)
    below, kept = [], []
    for s in iso:
        ax_a.plot(ns, iso[s].entropy_ratio, label=_label(s), **scheme_style(s))
        h = sig[s].entropy_ratio * np.log(ns)
        ax_b.plot(ns, np.where(h > floor, h, np.nan), **scheme_style(s))
        if np.all(h <= floor):
            below.append(_label(s))
        lost = 1.0 - sig[s].signal_share
        ax_c.plot(ns, np.where(lost > share_floor, lost, np.nan), **scheme_style(s))
        if np.all(lost <= share_floor):
            kept.append(_label(s))
    gap = max(np.max(np.abs(iso[s].entropy_ratio - iso_other[s].entropy_ratio)) for s in iso)
    where = f"{score_model} scores, d={d}" if score_model == "cosine" else f"{score_model} scores"
    ax_a.set_title(f"(a) isotropic {where}\n({other} scores: every curve within {gap:.2f} of these)", fontsize=10)
    ax_a.set_ylabel("E[H] / log n  (dimensionless)")
    ax_a.set_ylim(-0.02, 1.02)
    ax_b.set_yscale("log")
    ax_b.set_ylim(floor, None)
    ax_b.set_ylabel("E[H]  (nats, log scale)")
    under = f"\nbelow {floor:g} nats throughout: {', '.join(below)}" if below else ""
    ax_b.set_title(f"(b) with one key at cosine {match:g}: the entropy{under}", fontsize=10)
    ax_c.set_yscale("log")
    ax_c.set_ylim(share_floor, 1.5)
    ax_c.set_ylabel("1 - E[p0]  (share lost by the key, log scale)")
    under = f"\nbelow {share_floor:g} throughout: {', '.join(kept)}" if kept else ""
    ax_c.set_title(f"(c) the share of attention that key loses{under}", fontsize=10)
    for ax in (ax_a, ax_b, ax_c):
        ax.set_xscale("log")
        ax.set_xlabel("number of keys n")
        ax.axvline(train_length, color="0.55", lw=0.8)
        ax.annotate(f"L = {train_length}", (train_length, 0), xycoords=("data", "axes fraction"), xytext=(3, 3),
                    textcoords="offset points", ha="left", va="bottom", fontsize=8, color="0.35")
        ax.grid(alpha=0.25)
    ax_l.axis("off")
    handles, labels = ax_a.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center", bbox_to_anchor=(0.76, 0.25), fontsize=10, ncols=2,
               title=f"pinned at L = {train_length} (grey line)", title_fontsize=10)
    fig.suptitle("Without a matching key only log-n scales slow the entropy; with one, they hold it and the key's share")
    return fig


def plot_extrapolation_drift(train_length=512, schemes=_SHOWN, *, d=128, match=1.0) -> Figure:
    """Entropy drift ``E[H](n) - E[H](L)`` and signal share at ``n = L..64L``, cosine scores.

    Parameters
    ----------
    train_length : int
        ``L``.
    schemes : sequence of str
        Schemes drawn (by default the registry's ``entropy_figures`` list).
    d : int
        Head dimension.
    match : float
        Matching key's cosine.

    Returns
    -------
    matplotlib.figure.Figure
    """
    t = E.extrapolation_table(train_length, schemes, d=d, score_model="cosine", match=match)
    fig = SettledFigure(figsize=(14, 4.6), layout="constrained")
    axes = fig.subplots(1, 3)
    for k, s in enumerate(t.schemes):
        st = scheme_style(s)
        mark = SCHEMES[s].style.marker
        axes[0].plot(t.factors, t.drift_isotropic[k], marker=mark, label=_label(s), ms=3, **st)
        axes[1].plot(t.factors, t.drift_signal[k], marker=mark, ms=3, **st)
        axes[2].plot(t.factors, t.share_signal[k], marker=mark, ms=3, **st)
    axes[0].plot(t.factors, t.log_n_drift, "k--", lw=1, label="log(n/L)")
    for ax, title, yl in zip(axes, ("isotropic scores", f"with one key at cosine {match:g}", "that key's share"),
                             ("E[H](n) - E[H](L)  (nats)", "E[H](n) - E[H](L)  (nats)", "E[p0]  (probability)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"n / L  (L = {train_length})")
        ax.set_ylabel(yl)
        ax.set_title(title, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize=8)
    fig.suptitle(f"Extrapolating past L={train_length} (cosine, d={d}): standard loses the matching key, "
                 "log-n scales keep it")
    return fig


def plot_invariant_scale(ns=None, targets=(1.0, 2.0, 3.0)) -> Figure:
    """The scale holding ``E[H]`` at a target, against ``n``, with its fitted laws (normal scores).

    Parameters
    ----------
    ns : array_like, optional
        Numbers of keys (default 16 values from 64 to 1e6).
    targets : sequence of float
        Target entropies, nats.

    Returns
    -------
    matplotlib.figure.Figure
    """
    ns = np.unique(np.round(np.geomspace(64, 1e6, 16))) if ns is None else np.asarray(ns)
    fig = SettledFigure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    col = _colors([str(t) for t in targets])
    xx = np.geomspace(ns.min(), ns.max(), 200)
    powers = []
    for t in targets:
        r = invariant_scale(ns, t)
        pw = r.laws["power"]
        powers.append(pw.params["p"])
        lf = r.laws["log"]
        ax.plot(ns, r.alpha, "o", color=col[str(t)], label=f"H = {t:g} nats: solved")
        ax.plot(xx, pw(xx), "-", color=col[str(t)], lw=1.2,
                label=f"  {pw.params['c']:.2f} (log n)^{pw.params['p']:.2f} (rmse {pw.rmse:.2f})")
        ax.plot(xx, lf(xx), "-.", color=col[str(t)], lw=0.8, label=f"  {lf.params['c']:.3f} log n (rmse {lf.rmse:.2f})")
        sq = r.laws["sqrt_log"]
        ax.plot(xx, sq(xx), ":", color=col[str(t)], lw=1, label=f"  {sq.params['c']:.2f} sqrt(log n) (rmse {sq.rmse:.2f})")
    ax.plot(xx, law_value("sqrt_log", (np.sqrt(2),), xx), "k--", lw=1, label="sqrt(2 log n): freezing")
    ax.set_xscale("log")
    ax.set_xlabel("number of keys n")
    ax.set_ylabel("scale alpha on unit-variance scores")
    ax.legend(fontsize=7)
    ax.set_title(f"The scale holding E[H] fixed grows like (log n)^p, p = {min(powers):.2f} to {max(powers):.2f}: "
                 "between sqrt(log n) and log n", fontsize=10)
    return fig


def plot_phase_diagram(ns=None, ratios=None, schemes=_SHOWN, *, d=128, train_length=512) -> Figure:
    """``E[H]/log n`` over ``n`` and ``alpha/sqrt(2 log n)`` (normal scores) with the schemes drawn on it.

    Parameters
    ----------
    ns, ratios : array_like, optional
        Grid (see :func:`softmax_scale.entropy.phase_diagram`).
    schemes : sequence of str
        Schemes drawn as curves ``alpha(n)/sqrt(2 log n)`` (by default the registry's ``entropy_figures`` list).
    d : int
        Head dimension (alpha = m sqrt(d)).
    train_length : int
        Pinning length of length-aware schemes.

    Returns
    -------
    matplotlib.figure.Figure
    """
    pd = E.phase_diagram(ns, ratios)
    fig = SettledFigure(figsize=(10.5, 5.5), layout="constrained")
    ax = fig.add_subplot()
    # the log axis first: clabel cuts the contour's gap for its label in display space, so a
    # linear axis at that moment cut away decades of the left half of each contour
    ax.set_xscale("log")
    mesh = ax.pcolormesh(pd.ns, pd.ratios, pd.entropy_ratio, shading="gouraud", cmap="viridis", vmin=0, vmax=1)
    cs = ax.contour(pd.ns, pd.ratios, pd.entropy_ratio, levels=[0.1, 0.25, 0.5, 0.75, 0.9], colors="w",
                    linewidths=0.7)
    ax.clabel(cs, fontsize=7, manual=False, inline_spacing=2)
    fig.colorbar(mesh, ax=ax, label="E[H] / log n", pad=0.01)
    ax.axhline(1.0, color="k", lw=2.2, ls=(0, (1, 1.5)), label="freezing: alpha = sqrt(2 log n)")
    xx = np.geomspace(pd.ns.min(), pd.ns.max(), 200).round()
    frozen = []
    for s in schemes:
        if s == CRITICAL:
            continue
        r = pinned(s, train_length).alpha(xx, d, "normal") / np.sqrt(2 * np.log(xx))
        ax.plot(xx, r, label=_label(s), **scheme_style(s))
        if r[-1] >= 1.0:
            frozen.append(s)
    ax.set_ylim(0, pd.ratios.max())
    ax.set_xlabel("number of keys n")
    ax.set_ylabel("alpha / sqrt(2 log n)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=5, fontsize=8,
               title=f"schemes pinned at L={train_length} (critical lies on the freezing line)", title_fontsize=8)
    who = ", ".join(frozen) if frozen else "no scheme"
    ax.set_title(f"Normal scores: by n = {int(xx[-1]):,} {who} reached the freezing line; the pinned log n scales "
                 "stay below it", fontsize=10)
    return fig


def plot_causal_optimum(lengths=(16, 64, 256, 1024, 4096, 16384)) -> Figure:
    """Decoder: the constant scale maximising the position-averaged objective vs the heuristic ``alpha*(L/2)``.

    Parameters
    ----------
    lengths : sequence of int
        Training lengths ``L``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    res = [optimal_alpha_causal(L) for L in lengths]
    L = np.asarray(lengths)
    fig = SettledFigure(figsize=(11, 4.5), layout="constrained")
    a1, a2 = fig.subplots(1, 2)
    a1.plot(L, [r.alpha for r in res], "o-", label="optimum of mean over positions 2..L")
    a1.plot(L, [r.alpha_heuristic for r in res], "s--", label="heuristic alpha*(L/2)")
    a1.plot(L, [r.alpha_at_length for r in res], "^:", label="encoder alpha*(L)")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("training length L")
    a1.set_ylabel("scale alpha (normal scores)")
    a1.legend(fontsize=8)
    a2.plot(L, [100 * r.loss_heuristic for r in res], "s--", label="alpha*(L/2)")
    a2.plot(L, [100 * r.loss_at_length for r in res], "^:", label="alpha*(L)")
    a2.set_xscale("log", base=2)
    a2.set_xlabel("training length L")
    a2.set_ylabel("loss in averaged objective  (%)")
    a2.legend(fontsize=8)
    worst = max(r.loss_heuristic for r in res)
    fig.suptitle(f"Decoder: the heuristic alpha*(L/2) loses at most {100 * worst:.1f}% of the averaged "
                 "mean-field objective; alpha*(L) loses more")
    return fig


def plot_temperature_table(ds=(128, 256, 512, 768), ns=(256, 4096, 65536)) -> Figure:
    """The optimal contrastive temperature ``tau* = 1/alpha*`` against ``d`` and ``n``, beside the published ones.

    Parameters
    ----------
    ds, ns : sequence of int
        Dimensions and numbers of candidates.

    Returns
    -------
    matplotlib.figure.Figure
    """
    t = temperature_table(ds, ns)
    fig = SettledFigure(figsize=(9.5, 7.6), layout="constrained")
    a1, a2 = fig.subplots(2, 1, gridspec_kw={"height_ratios": [0.5 + 0.35 * len(t.ds), 4.0]})
    a1.axis("off")
    cells = [[f"{a:.1f}  (tau {tau:.4f})" for a, tau in zip(ra, rt)] for ra, rt in zip(t.alpha, t.tau)]
    tab = a1.table(cellText=cells, rowLabels=[f"d={d}" for d in t.ds], colLabels=[f"n={int(n)}" for n in t.ns],
                   bbox=[0.08, 0.0, 0.92, 1.0])
    tab.auto_set_font_size(False)
    tab.set_fontsize(11)
    a1.set_title("mean-field alpha* (tau* = 1/alpha*) for cosine scores", fontsize=11)
    for i, d in enumerate(t.ds):
        a2.plot(t.ns, t.tau[i], "o-", label=f"tau*, d={d}")
    groups = {}
    for k, v in t.published.items():
        groups.setdefault(round(v, 9), []).append(k)
    for v, keys in groups.items():
        a2.axhline(1 / v, ls=":", lw=1, color="0.3")
        a2.annotate(f"{', '.join(keys)}: {1 / v:.3g}", (t.ns.max(), 1 / v), fontsize=9, ha="right", va="bottom")
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.yaxis.set_major_formatter("{x:.3g}")
    a2.yaxis.set_minor_formatter("{x:.3g}")
    a2.tick_params(labelsize=9, which="both")
    a2.set_xlabel("number of candidates n")
    a2.set_ylabel("temperature tau  (1/scale)")
    a2.legend(fontsize=9, loc="lower left")
    a2.grid(alpha=0.25, which="both")
    fig.suptitle(f"Contrastive temperature: the mean-field tau* is {t.tau.min():.3f}-{t.tau.max():.3f},\n"
                 f"below the published {', '.join(f'{1 / v:.3g}' for v in sorted(groups))} for most (d, n)")
    return fig


FIGURES = [
    ("entropy_vs_n", plot_entropy_vs_n, {}, {"ns": [64, 512, 4096, 32768]}),
    ("entropy_extrapolation", plot_extrapolation_drift, {}, {"train_length": 64,
                                                            "schemes": (STANDARD, ENTROPY_INVARIANT, SSMAX)}),
    ("entropy_invariant_scale", plot_invariant_scale, {}, {"ns": [64, 1000, 30000, 10**6], "targets": (2.0,)}),
    ("entropy_phase_diagram", plot_phase_diagram, {}, {"ns": [16, 256, 4096, 65536, 10**6],
                                                      "ratios": np.linspace(0, 2, 9)}),
    ("decoder_scale", plot_causal_optimum, {}, {"lengths": (16, 256, 4096)}),
    ("contrastive_temperature", plot_temperature_table, {}, {"ds": (128, 768), "ns": (256, 65536)}),
]

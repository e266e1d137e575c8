"""The one-key experiments' figures (copying and passkey retrieval), drawn from their committed CSVs.

``make figures`` redraws them and never trains; without a CSV the figure is skipped with one
line.  Reading needs numpy only, not JAX.
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import NullFormatter

from ..schemes import ENTROPY_INVARIANT, QWEN_LOGN, SCHEMES, SSMAX, STANDARD, YARN
from ._style import new_figure


def _color(scheme):
    """A scheme's colour in the training runs' figures (its registry style's ``train_color``)."""
    return SCHEMES[scheme].style.train_color


#: The trained scales whose heads' share is drawn, each in its scheme's colour.
_TRAINED = (STANDARD, ENTROPY_INVARIANT, SSMAX)
#: Curves drawn: (trained label prefix, test scale, legend, colour, line style); a registry scale in its
#: scheme's colour, the toolkit's per-head rules (not schemes) in colours of their own.
_CURVES = ((STANDARD, "trained", "standard", _color(STANDARD), "-"),
           (STANDARD, QWEN_LOGN, "standard + log n at test", _color(QWEN_LOGN), "--"),
           (STANDARD, YARN, "standard + YaRN temperature at test", _color(YARN), "--"),
           (STANDARD, "toolkit_iid", "standard + toolkit i.i.d.", "C4", ":"),
           (STANDARD, "toolkit_measured", "standard + toolkit measured", "C5", ":"),
           (STANDARD, "toolkit_share", "standard + toolkit share", "C6", "-."),
           (ENTROPY_INVARIANT, "trained", "log_L n trained in", _color(ENTROPY_INVARIANT), "-"),
           (SSMAX, "trained", "ssmax trained in", _color(SSMAX), "-"))


def _find(rows, prefix, scale, rope):
    for key in rows:
        if key[0].startswith(prefix) and key[1] == rope and key[2].split("@")[0] == scale:
            return rows[key]
    return None


def _table(name, table, csv):
    from ..experiments import EXPERIMENTS
    from .train import committed_table

    return committed_table(EXPERIMENTS[name], table, csv)


def _band(ax, x, mean, sd, **kw):
    (line,) = ax.plot(x, mean, marker="o", ms=3, **kw)
    if np.any(np.isfinite(sd)):
        ax.fill_between(x, mean - sd, mean + sd, color=line.get_color(), alpha=0.12, lw=0)


def one_key_copy_figure(table=None, csv=None):
    """Copy accuracy against the keys ``n = 2m`` a copy at distance ``m`` is read among, over ``L`` (one panel per RoPE variant).

    The second copy at distance ``m`` closes a sequence of ``2m`` keys: the x axis is ``n/L = 2m/L``,
    the axis every experiment and ``advise`` use.  Top row: each curve is the mean over seeds with ± one
    standard error over seeds shaded; grey: the same
    bytes without the copy (``standard``, as trained); black: the sliding window of ``L``.  Bottom
    row: the retrieving head's share on the source key, measured and predicted from ``L``, under
    each RoPE variant the share was measured under (the models as trained).
    """
    from ..experiments._training import se
    from ..experiments.copy import copy_summary

    table = _table("copy", table, csv)
    s = copy_summary(table)
    L, dist = s["L"], s["distances"]
    ropes = sorted({k[1] for k in s["rows"] if k[2] != "window"}, key=lambda r: (r != "none", r))
    r = table.rows
    m0 = (r["status"] == "ok") & (r["kind"] == "share") & (r["scale"] == "trained")
    share_ropes = sorted(set(r["rope"][m0]), key=lambda x: (x != "none", x))
    x = 2 * dist / L
    fig, axes = new_figure(len(ropes), 2, width=3.2 * len(ropes), height=6.4)
    axes = np.asarray(axes).reshape(2, len(ropes))
    for ax, rope in zip(axes[0], ropes):
        for prefix, scale, label, color, ls in _CURVES:
            v = _find(s["rows"], prefix, scale, rope)
            if v is not None:
                _band(ax, x, 100 * v["accuracy"], 100 * se(v["accuracy_std"], v["accuracy_n"]), color=color, ls=ls,
                      label=label)
        ctl = _find(s["control"], STANDARD, "trained", rope)
        if ctl is not None:
            ax.plot(x, 100 * ctl["accuracy"], color="0.6", lw=1, label="no copy (control)")
        win = s["rows"].get(next((k for k in s["rows"] if k[0].startswith(STANDARD) and k[2] == "window"), None))
        if win is not None:
            ax.plot(x, 100 * win["accuracy"], color="k", lw=1, ls=":", label="sliding window of L")
        ax.axvline(1.0, color="0.8", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("keys n / L (n = 2m, m the distance)")
        ax.set_title(f"RoPE {rope}", fontsize=10)
    axes[0, 0].set_ylabel("accuracy on the second copy (%)")
    axes[0, 0].legend(fontsize=6, loc="lower left")
    for j, ax in enumerate(axes[1]):
        if j >= len(share_ropes):
            ax.set_axis_off()
            continue
        rope = share_ropes[j]
        for prefix, color in ((scheme, _color(scheme)) for scheme in _TRAINED):
            m = m0 & (r["rope"] == rope) & np.char.startswith(r["scheme"].astype(str), prefix)
            if not m.any():
                continue
            d = np.unique(r["distance"][m])
            meas = np.array([np.mean(r["share"][m & (r["distance"] == v)]) for v in d])
            pred = np.array([np.nanmean(r["share_predicted"][m & (r["distance"] == v)]) for v in d])
            ax.plot(2 * d / L, meas, color=color, marker="o", ms=3, label=f"{prefix}: measured")
            ax.plot(2 * d / L, pred, color=color, ls="--", label=f"{prefix}: predicted from L")
        ax.axvline(1.0, color="0.8", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1)
        ax.set_xlabel("keys n / L (n = 2m)")
        ax.set_title(f"share on the source key, RoPE {rope}", fontsize=10)
        ax.legend(fontsize=6)
    axes[1, 0].set_ylabel("share on the source key")
    return fig


def one_key_passkey_figure(table=None, csv=None):
    """Passkey exact-match rate against the test length (one panel per RoPE variant): the mean over seeds, each seed a dot."""
    from ..experiments.passkey import passkey_summary

    table = _table("passkey", table, csv)
    s = passkey_summary(table)
    lengths = s["lengths"]
    L = int(lengths.min())
    ropes = sorted({k[1] for k in s["rows"]}, key=lambda r: (r != "none", r))
    fig, axes = new_figure(len(ropes), 1, width=3.4 * len(ropes), height=3.4, sharey=True)
    axes = np.atleast_1d(axes)
    for ax, rope in zip(axes, ropes):
        for prefix, scale, label, color, ls in _CURVES:
            v = _find(s["rows"], prefix, scale, rope)
            if v is None:
                continue
            ax.plot(lengths / L, 100 * v["accuracy"], color=color, ls=ls, marker="o", ms=3, label=label)
            for x, per in zip(lengths / L, v["accuracy_by_seed"]):
                ax.plot([x] * len(per), [100 * a for a in per.values()], ls="none", marker=".", ms=4, color=color,
                        alpha=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("test length / L")
        ax.set_title(f"RoPE {rope}", fontsize=10)
    axes[0].set_ylabel("passkey exact match (%)")
    axes[0].set_ylim(-2, 102)
    axes[0].legend(fontsize=6)
    return fig


def one_key_size_figure(table=None, csv=None):
    """``log_L n`` trained in minus ``standard`` in copy accuracy against the parameters, one panel per RoPE variant.

    One line per copy past ``L``, labelled by the keys it is read among (``n = 2m`` for distance ``m``):
    the mean over seeds, each seed a dot.
    """
    from ..experiments.copy import copy_summary
    from ..experiments.size import size_differences, size_parameters

    table = _table("size", table, csv)
    diffs = size_differences(table)
    ropes = sorted({k[1] for k in diffs}, key=lambda r: (r != "none", r))
    dists = sorted({k[2] for k in diffs})
    L = copy_summary(table)["L"] or 1
    fig, axes = new_figure(max(1, len(ropes)), 1, width=3.2 * max(1, len(ropes)), height=3.2, sharey=True)
    axes = np.atleast_1d(axes)
    for ax, rope in zip(axes, ropes):
        for j, m in enumerate(dists):
            keys = sorted(k for k in diffs if k[1] == rope and k[2] == m)
            x = np.array([size_parameters(table, k[0]) for k in keys], dtype=float)
            per = [100 * np.array(list(diffs[k].values())) for k in keys]
            ax.plot(x, [p.mean() for p in per], marker="o", color=f"C{j}", label=f"n = {2 * m / L:g}L (m = {m / L:g}L)")
            for xi, p in zip(x, per):
                ax.scatter(np.full(p.size, xi), p, s=8, color=f"C{j}", alpha=0.5)
        ax.axhline(0.0, color="0.6", lw=0.8)
        ax.set_xscale("log")
        widths = sorted({k[0] for k in diffs if k[1] == rope})
        ticks = [size_parameters(table, w) for w in widths]
        ax.set_xticks(ticks, [f"d {w}\n{t / 1000:.0f}k" for w, t in zip(widths, ticks)])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(min(ticks) / 1.5, max(ticks) * 1.5)
        ax.set_xlabel("d_model, parameters")
        ax.set_title(f"RoPE {rope}", fontsize=10)
    axes[0].set_ylabel("log_L n trained in − standard (points)")
    axes[0].legend(fontsize=7)
    return fig


FIGURES = [("one_key_copy", one_key_copy_figure, {}, {}), ("one_key_passkey", one_key_passkey_figure, {}, {}),
           ("one_key_size", one_key_size_figure, {}, {})]

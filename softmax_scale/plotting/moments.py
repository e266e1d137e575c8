"""Figures for the note's first part: second moments through depth.

One function per figure, each returning a :class:`matplotlib.figure.Figure`
built without pyplot (no global state, no display).  :data:`FIGURES` lists
``(name, function, full_kwargs, quick_kwargs)`` for the figures runner, which
saves ``figures/<name>.png``.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .. import moments as m
from ._style import SettledFigure

__all__ = ["FIGURES", "plot_dot_product_variance", "plot_init_depth", "plot_residual_depth"]

_INIT_LABELS = {
    "lecun": "LeCun / Xavier (1/fan_in)",
    "xavier": "Xavier (2/(fan_in+fan_out))",
    "he": "He (2/fan_in)",
    "ntk": "NTK (N(0,1), ×1/√fan_in)",
    "preserving": "activation's own gain",
}


def _band(ax, x, y, se, **kw):
    """Plot ``y`` with a ±2 standard-error band."""
    (line,) = ax.plot(x, y, **kw)
    ax.fill_between(x, y - 2 * se, y + 2 * se, color=line.get_color(), alpha=0.2, linewidth=0)
    return line


def plot_init_depth(activations=("linear", "relu", "tanh", "shifted_sigmoid", "selu", "gelu"),
                    inits=("lecun", "he", "ntk", "preserving"), *, depth: int = 30,
                    width: int = 128, trials: int = 32, inputs: int = 8, rng=0) -> Figure:
    """Second moment of the pre-activations against depth, per activation and initialisation.

    Parameters
    ----------
    activations : sequence of str
        Activations, one panel each.
    inits : sequence of str
        Initialisations, one line each.
    depth, width, trials, inputs : int
        Passed to :func:`softmax_scale.moments.depth_second_moments`.
    rng : None, int or numpy.random.Generator
        Random source shared by all curves.

    Returns
    -------
    matplotlib.figure.Figure
        Monte Carlo (solid, ±2 SE band) and infinite-width recursion (dashed).
    """
    gen = np.random.default_rng(rng)
    ncols = min(3, len(activations))
    nrows = -(-len(activations) // ncols)
    fig = SettledFigure(figsize=(4.2 * ncols, 3.4 * nrows + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True, squeeze=False)).ravel()
    for ax, act in zip(axes, activations, strict=False):
        for init in inits:
            r = m.depth_second_moments(depth, act, init, width=width, trials=trials,
                                       inputs=inputs, rng=gen)
            line = _band(ax, r.layers, r.second_moment, r.stderr,
                         label=f"{_INIT_LABELS[init]}, g={r.gain:.3g}")
            ax.plot(r.layers, r.predicted, "--", color=line.get_color(), linewidth=1)
        ax.set_yscale("log")
        ax.axhline(1.0, color="0.5", linewidth=0.8, linestyle=":")
        ax.set_title(f"{act}", fontsize=10)
        ax.set_xlabel("layer l (number of dense layers)")
        ax.set_ylabel("E[h_l²] (input second moment = 1)")
        ax.legend(fontsize=6.5, loc="best")
    for ax in axes[len(activations):]:
        ax.set_visible(False)
    fig.suptitle(
        "Second moment through depth: LeCun/NTK halve ReLU's per layer, He doubles a linear one;\n"
        f"each activation's own gain keeps it at 1 (GELU's fixed point is unstable). "
        f"width {width}, {trials} networks; dashed: infinite-width recursion",
        fontsize=10)
    return fig


def plot_residual_depth(schemes=("plain", "post_norm", "pre_norm", "rezero"),
                        warmup_fractions=(0.25, 0.5), *, depth: int = 24, width: int = 128,
                        trials: int = 32, inputs: int = 8, rng=0) -> Figure:
    """Residual schemes against depth: second moment, update size, identity path.

    Parameters
    ----------
    schemes : sequence of str
        Schemes of :func:`softmax_scale.moments.residual_second_moments`
        (``rezero``/``skipinit`` at ``alpha = 0``).
    warmup_fractions : sequence of float
        Warm-up curves ``x + alpha_t F(x)`` at ``t / T`` equal to each fraction.
    depth, width, trials, inputs : int
        Passed to :func:`softmax_scale.moments.residual_second_moments`.
    rng : None, int or numpy.random.Generator
        Random source shared by all curves.

    Returns
    -------
    matplotlib.figure.Figure
        Three panels; closed forms dashed.
    """
    gen = np.random.default_rng(rng)
    runs = []
    for s in schemes:
        runs.append((s.replace("_", "-"), {"scheme": s}))
    steps = 1000
    for frac in warmup_fractions:
        runs.append((f"warm-up, alpha_t={min(1.0, frac):.2g}",
                     {"scheme": "warmup", "step": round(frac * steps), "warmup_steps": steps}))
    fig = SettledFigure(figsize=(14, 4.4), layout="constrained")
    ax_m, ax_u, ax_c = fig.subplots(1, 3)
    for label, kw in runs:
        r = m.residual_second_moments(depth, width=width, trials=trials, inputs=inputs,
                                      rng=gen, **kw)
        line = _band(ax_m, r.layers, r.second_moment, r.stderr, label=label)
        ax_m.plot(r.layers, r.closed_form, "--", color=line.get_color(), linewidth=1)
        _band(ax_u, r.layers[1:], r.update_ratio, r.update_stderr, label=label,
              color=line.get_color())
        _band(ax_c, r.layers, r.input_cosine, r.input_cosine_stderr, label=label,
              color=line.get_color())
    ax_m.set_yscale("log")
    ax_m.set_xlabel("block l (number of residual blocks)")
    ax_m.set_ylabel("E[x_l²] (input second moment = 1)")
    ax_m.set_title("second moment (dashed: closed form)", fontsize=10)
    ax_u.set_xlabel("block l (number of residual blocks)")
    ax_u.set_ylabel("|x_l − x_(l−1)| / |x_(l−1)| (ratio)")
    ax_u.set_title("relative size of each block's update", fontsize=10)
    ax_c.set_xlabel("block l (number of residual blocks)")
    ax_c.set_ylabel("cos(x_l, x_0) (dimensionless)")
    ax_c.set_title("what is left of the input (identity path)", fontsize=10)
    for ax in (ax_m, ax_u, ax_c):
        ax.legend(fontsize=7)
    fig.suptitle("Residuals: x + F(x) doubles the second moment per block (2^l), Pre-Norm grows "
                 "linearly (1 + l), Post-Norm pins it at 1\nbut erodes the identity path; ReZero "
                 f"(alpha = 0) starts at the identity. width {width}, {trials} networks",
                 fontsize=10)
    return fig


def plot_dot_product_variance(ds=(4, 8, 16, 32, 64, 128, 256), *, trials: int = 4000,
                              d_model: int = 256, d_kvs=(8, 16, 32, 64), t5_trials: int = 400,
                              rng=0) -> Figure:
    """``Var[q·k] / d`` per weight distribution, and T5's initialisation against the standard one.

    Parameters
    ----------
    ds : sequence of int
        Dimensions for :func:`softmax_scale.moments.dot_product_variance`.
    trials : int
        Pairs per dimension.
    d_model : int
        Model width for :func:`softmax_scale.moments.t5_score_variance`.
    d_kvs : sequence of int
        Head dimensions for the T5 panel.
    t5_trials : int
        Weight draws per head dimension.
    rng : None, int or numpy.random.Generator
        Random source shared by all points.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels with ±2 SE error bars; closed forms dashed.
    """
    gen = np.random.default_rng(rng)
    ds = np.asarray(ds)
    fig = SettledFigure(figsize=(11, 4.4), layout="constrained")
    ax_d, ax_t = fig.subplots(1, 2)
    cases = [("normal", True), ("uniform", True), ("truncated_normal", True),
             ("truncated_normal", False)]
    for dist, corr in cases:
        rs = [m.dot_product_variance(int(d), dist, trials=trials, correct_truncation=corr, rng=gen)
              for d in ds]
        est = np.array([r.estimate / r.d for r in rs])
        se = np.array([r.stderr / r.d for r in rs])
        label = dist.replace("_", " ") + ("" if corr else " (no ×1.137 correction)")
        cont = ax_d.errorbar(ds, est, yerr=2 * se, marker="o", capsize=3, label=label)
        ax_d.axhline(rs[0].closed_form / rs[0].d, linestyle="--", linewidth=1,
                     color=cont.lines[0].get_color())
    ax_d.set_xscale("log", base=2)
    ax_d.set_xlabel("dimension d (entries per vector)")
    ax_d.set_ylabel("Var[q·k] / d (ratio)")
    ax_d.set_title("Var[q·k] = d for unit-variance entries", fontsize=10)
    ax_d.legend(fontsize=7)
    d_kvs = np.asarray(d_kvs)
    for init, label in (("standard", "standard: std d_model^-1/2 on W_q, W_k"),
                        ("t5", "T5: std (d_model d_kv)^-1/2 on W_q")):
        rs = [m.t5_score_variance(d_model, int(k), init=init, trials=t5_trials, rng=gen)
              for k in d_kvs]
        cont = ax_t.errorbar(d_kvs, [r.estimate for r in rs], yerr=[2 * r.stderr for r in rs],
                             marker="o", capsize=3, label=label)
        ax_t.plot(d_kvs, [r.closed_form for r in rs], "--", linewidth=1,
                  color=cont.lines[0].get_color())
    ax_t.set_xscale("log", base=2)
    ax_t.set_yscale("log", base=2)
    ax_t.set_xlabel("head dimension d_kv (entries)")
    ax_t.set_ylabel("Var[q·k], unscaled (input variance = 1)")
    ax_t.set_title(f"unscaled scores, d_model = {d_model}", fontsize=10)
    ax_t.legend(fontsize=7)
    fig.suptitle("Var[q·k] grows like d, hence the 1/√d; an uncorrected truncated normal gives "
                 "0.60 d;\nT5's query initialisation folds the 1/√d in, so its unscaled scores "
                 "already have variance 1", fontsize=10)
    return fig


#: ``(name, function, full_kwargs, quick_kwargs)`` for the figures runner.
FIGURES = [
    ("moments_init_depth", plot_init_depth,
     {"depth": 30, "width": 128, "trials": 32, "inputs": 8, "rng": 0},
     {"activations": ("linear", "relu", "tanh", "selu"), "depth": 8, "width": 32, "trials": 8,
          "inputs": 4, "rng": 0}),
    ("moments_residual_depth", plot_residual_depth,
     {"depth": 24, "width": 128, "trials": 32, "inputs": 8, "rng": 0},
     {"depth": 6, "width": 32, "trials": 8, "inputs": 4, "rng": 0}),
    ("moments_dot_product", plot_dot_product_variance,
     {"ds": (4, 8, 16, 32, 64, 128, 256), "trials": 4000, "d_model": 256, "d_kvs": (8, 16, 32, 64),
          "t5_trials": 400, "rng": 0},
     {"ds": (4, 16, 64), "trials": 500, "d_model": 64, "d_kvs": (8, 32), "t5_trials": 50, "rng": 0}),
]

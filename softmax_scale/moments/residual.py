"""Residual schemes through depth: plain, Post-Norm, Pre-Norm, SkipInit/ReZero, warm-up."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._util.rng import generator, mean_stderr
from .._util.validation import check_choice, check_int, check_positive_float
from .normalization import NORM_FUNCS, NORMS

__all__ = [
    "RESIDUAL_SCHEMES",
    "ResidualMoments",
    "residual_second_moments",
    "warmup_alpha",
]

#: Residual schemes.
RESIDUAL_SCHEMES = ("plain", "post_norm", "pre_norm", "skipinit", "rezero", "warmup")


def warmup_alpha(step, warmup_steps: int) -> float | np.ndarray:
    """Linear warm-up ``alpha_t = min(1, step / warmup_steps)`` for ``x + alpha_t F(x)``.

    Parameters
    ----------
    step : int or array_like of int
        Training step(s), >= 0.
    warmup_steps : int
        Steps to reach 1, >= 1.

    Returns
    -------
    float or numpy.ndarray
        ``alpha_t`` in ``[0, 1]``.
    """
    warmup_steps = check_int(warmup_steps, "warmup_steps", minimum=1)
    t = np.asarray(step, dtype=np.float64)
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"`step` must be >= 0, got {step!r}")
    a = np.minimum(1.0, t / warmup_steps)
    return float(a) if a.ndim == 0 else a


@dataclass(frozen=True)
class ResidualMoments:
    """Second moment of the residual stream ``x_l`` through depth at initialisation.

    Arrays of length ``depth + 1`` are indexed by layer ``0..depth``; arrays
    of length ``depth`` by the block ``1..depth``.

    Attributes
    ----------
    scheme : str
        One of :data:`RESIDUAL_SCHEMES`.
    depth, width, trials, inputs : int
        Blocks, width, independent networks, inputs per network.
    alpha : float
        Branch multiplier (1 for plain, Post-Norm and Pre-Norm).
    layers : numpy.ndarray
        ``0, ..., depth``.
    second_moment, stderr : numpy.ndarray
        ``E[x_l^2]`` per entry and its standard error.
    closed_form : numpy.ndarray
        Plain ``2^l``; Post-Norm 1 (for ``l >= 1``); Pre-Norm ``1 + l``;
        SkipInit/ReZero/warm-up ``(1 + alpha^2)^l``.  Exact in expectation.
    update_ratio, update_stderr : numpy.ndarray
        ``|x_l - x_{l-1}| / |x_{l-1}|``, the relative size of block ``l``'s
        update, and its standard error (length ``depth``).
    input_cosine, input_cosine_stderr : numpy.ndarray
        Cosine between ``x_l`` and ``x_0``: how much of the identity path survives.
    """

    scheme: str
    depth: int
    width: int
    trials: int
    inputs: int
    alpha: float
    layers: np.ndarray
    second_moment: np.ndarray
    stderr: np.ndarray
    closed_form: np.ndarray
    update_ratio: np.ndarray
    update_stderr: np.ndarray
    input_cosine: np.ndarray
    input_cosine_stderr: np.ndarray


def residual_second_moments(depth: int, scheme: str = "plain", *, width: int = 128,
                            branch: str = "linear", norm: str = "layer", alpha: float = 0.0,
                            step: int = 0, warmup_steps: int = 1000, trials: int = 32,
                            inputs: int = 8, rng=None) -> ResidualMoments:
    """Monte Carlo second moment of a residual stream through ``depth`` blocks.

    Schemes, with ``F`` a random branch whose output has the second moment of
    its input and is uncorrelated with it:

    - ``plain``: ``x + F(x)``, second moment doubles per block (``2^l``);
    - ``post_norm``: ``Norm(x + F(x))``, stays at 1 but the identity path
      shrinks by ``1/sqrt(2)`` per block;
    - ``pre_norm``: ``x + F(Norm(x))``, grows linearly (``1 + l``);
    - ``skipinit``/``rezero``: ``x + alpha F(x)`` (identical forward pass;
      ``alpha = 0`` at initialisation), ``(1 + alpha^2)^l``;
    - ``warmup``: ``x + alpha_t F(x)`` with ``alpha_t = warmup_alpha(step, warmup_steps)``.

    Parameters
    ----------
    depth : int
        Number of blocks, >= 1.
    scheme : str
        One of :data:`RESIDUAL_SCHEMES`.
    width : int
        Width of the stream, >= 1 (>= 2 for the norm schemes).
    branch : {"linear", "mlp"}
        ``F(x) = W x`` with LeCun weights, or ``W2 relu(W1 x)`` with He then LeCun.
    norm : {"layer", "rms"}
        Normalisation used by ``post_norm`` and ``pre_norm``.
    alpha : float
        Branch multiplier for ``skipinit``/``rezero``, >= 0.
    step, warmup_steps : int
        Training step and warm-up length for ``warmup``.
    trials : int
        Independent networks, >= 2.
    inputs : int
        Independent inputs per network, >= 1.
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    ResidualMoments
        Per-layer second moments, update sizes and closed forms.
    """
    depth = check_int(depth, "depth", minimum=1)
    check_choice(scheme, "scheme", RESIDUAL_SCHEMES)
    uses_norm = scheme in ("post_norm", "pre_norm")
    width = check_int(width, "width", minimum=2 if uses_norm else 1)
    check_choice(branch, "branch", ("linear", "mlp"))
    check_choice(norm, "norm", NORMS)
    alpha = check_positive_float(alpha, "alpha", allow_zero=True)
    trials = check_int(trials, "trials", minimum=2)
    inputs = check_int(inputs, "inputs", minimum=1)
    if scheme == "warmup":
        step = check_int(step, "step", minimum=0)
        alpha = warmup_alpha(step, warmup_steps)
    elif scheme not in ("skipinit", "rezero"):
        alpha = 1.0
    gen = generator(rng)
    normalise = NORM_FUNCS[norm]
    scale = 1.0 / math.sqrt(width)

    def branch_fn(x):
        w = gen.standard_normal((width, width)) * scale
        if branch == "linear":
            return w @ x
        hidden = np.maximum(math.sqrt(2.0) * (w @ x), 0.0)
        w2 = gen.standard_normal((width, width)) * scale
        return w2 @ hidden

    sm = np.empty((trials, depth + 1))
    upd = np.empty((trials, depth))
    cos = np.empty((trials, depth + 1))
    for t in range(trials):
        x0 = gen.standard_normal((width, inputs))
        x = x0
        n0 = np.sqrt(np.sum(x0 * x0, axis=0))
        sm[t, 0], cos[t, 0] = np.mean(x * x), 1.0
        for layer in range(1, depth + 1):
            if scheme == "post_norm":
                new = normalise(x + branch_fn(x), axis=0)
            elif scheme == "pre_norm":
                new = x + branch_fn(normalise(x, axis=0))
            else:
                new = x + alpha * branch_fn(x)
            diff = new - x
            nx = np.sqrt(np.sum(x * x, axis=0))
            upd[t, layer - 1] = np.mean(np.sqrt(np.sum(diff * diff, axis=0)) / nx)
            x = new
            nx = np.sqrt(np.sum(x * x, axis=0))
            sm[t, layer] = np.mean(x * x)
            cos[t, layer] = np.mean(np.sum(x * x0, axis=0) / (nx * n0))
    layers = np.arange(depth + 1)
    if scheme == "plain":
        cf = 2.0 ** layers
    elif scheme == "post_norm":
        cf = np.ones(depth + 1)
    elif scheme == "pre_norm":
        cf = 1.0 + layers
    else:
        cf = (1.0 + alpha * alpha) ** layers
    m, se = mean_stderr(sm)
    u, use = mean_stderr(upd)
    c, cse = mean_stderr(cos)
    return ResidualMoments(scheme=scheme, depth=depth, width=width, trials=trials,
                           inputs=inputs, alpha=float(alpha), layers=layers,
                           second_moment=m, stderr=se, closed_form=cf.astype(np.float64),
                           update_ratio=u, update_stderr=use, input_cosine=c,
                           input_cosine_stderr=cse)



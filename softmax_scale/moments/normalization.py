"""LayerNorm against RMSNorm: what each does to the second moment."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._util.rng import generator, mean_stderr
from .._util.validation import check_choice, check_int, check_positive_float

__all__ = [
    "NORMS",
    "NormMoments",
    "layer_norm",
    "normalization_moments",
    "rms_norm",
]

#: Normalisations.
NORMS = ("layer", "rms")


def layer_norm(x, *, axis: int = -1, eps: float = 0.0) -> np.ndarray:
    """LayerNorm without learned parameters: ``(x - mean) / sqrt(var + eps)``.

    Parameters
    ----------
    x : array_like
        Input.
    axis : int
        Axis normalised over.
    eps : float
        Added to the variance, >= 0.

    Returns
    -------
    numpy.ndarray
        Mean 0 and variance ``var/(var + eps)`` (1 for ``eps = 0``) along ``axis``.
    """
    eps = check_positive_float(eps, "eps", allow_zero=True)
    x, axis = _check_norm_input(x, axis)
    centred = x - x.mean(axis=axis, keepdims=True)
    var = np.mean(centred * centred, axis=axis, keepdims=True)
    if eps == 0.0 and np.any(var == 0.0):
        raise ValueError("`x` has zero variance along `axis`: LayerNorm is undefined there; pass `eps` > 0")
    return centred / np.sqrt(var + eps)


def _check_norm_input(x, axis):
    """``x`` as a finite, non-empty float64 array and ``axis`` as a valid integer axis."""
    arr = np.asarray(x)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"`x` must be an array of real numbers, got {x!r}")
    if arr.size == 0 or arr.ndim == 0:
        raise ValueError(f"`x` must be a non-empty array with at least one axis, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("`x` must be finite (no NaN or inf)")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"`axis` must be an integer, got {axis!r}")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"`axis` must be in [{-arr.ndim}, {arr.ndim - 1}] for `x` of shape {arr.shape}, got {axis}")
    return arr.astype(np.float64), int(axis)


def rms_norm(x, *, axis: int = -1, eps: float = 0.0) -> np.ndarray:
    """RMSNorm without learned parameters: ``x / sqrt(mean(x^2) + eps)``; no centring.

    Parameters
    ----------
    x : array_like
        Input.
    axis : int
        Axis normalised over.
    eps : float
        Added to the mean square, >= 0.

    Returns
    -------
    numpy.ndarray
        Second moment 1 (for ``eps = 0``) along ``axis``; the mean is kept, shrunk.
    """
    eps = check_positive_float(eps, "eps", allow_zero=True)
    x, axis = _check_norm_input(x, axis)
    ms = np.mean(x * x, axis=axis, keepdims=True)
    if eps == 0.0 and np.any(ms == 0.0):
        raise ValueError("`x` is zero along `axis`: RMSNorm is undefined there; pass `eps` > 0")
    return x / np.sqrt(ms + eps)


#: Norm name -> function, for the modules that take ``norm="layer"`` or ``"rms"``.
NORM_FUNCS = {"layer": layer_norm, "rms": rms_norm}


@dataclass(frozen=True)
class NormMoments:
    """Moments of a normalised vector with i.i.d. normal entries of mean ``input_mean`` and std ``input_std``.

    Per-vector statistics (over the ``width`` units) are averaged over trials.

    Attributes
    ----------
    norm : str
        ``layer`` or ``rms``.
    width, trials : int
        Vector length and number of vectors.
    input_mean, input_std : float
        Distribution of the input entries.
    mean, mean_stderr : float
        Per-vector mean of the output, and its standard error.
    variance, variance_stderr : float
        Per-vector variance (``ddof = 0``) of the output.
    second_moment, second_moment_stderr : float
        Per-vector mean square of the output.
    closed_form_mean, closed_form_variance, closed_form_second_moment : float
        LayerNorm: 0, 1, 1 exactly.  RMSNorm: second moment 1 exactly; mean
        ``mu/sqrt(mu^2 + sigma^2)`` and variance ``sigma^2/(mu^2 + sigma^2)``
        in the limit of large width.
    """

    norm: str
    width: int
    trials: int
    input_mean: float
    input_std: float
    mean: float
    mean_stderr: float
    variance: float
    variance_stderr: float
    second_moment: float
    second_moment_stderr: float
    closed_form_mean: float
    closed_form_variance: float
    closed_form_second_moment: float


def normalization_moments(norm: str = "layer", *, width: int = 1024, mean: float = 0.5,
                          std: float = 1.0, trials: int = 256, rng=None) -> NormMoments:
    """Monte Carlo moments of :func:`layer_norm` or :func:`rms_norm` output.

    LayerNorm fixes mean 0 and variance 1; RMSNorm fixes the second moment
    at 1 and keeps (a shrunk) mean.

    Parameters
    ----------
    norm : {"layer", "rms"}
        Normalisation.
    width : int
        Vector length, >= 2.
    mean : float
        Mean of the input entries (finite).
    std : float
        Standard deviation of the input entries, > 0.
    trials : int
        Independent vectors, >= 2.
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    NormMoments
        Estimates, standard errors and closed forms.
    """
    check_choice(norm, "norm", NORMS)
    width = check_int(width, "width", minimum=2)
    mu = float(mean)
    if not math.isfinite(mu):
        raise ValueError(f"`mean` must be a finite number, got {mean!r}")
    sigma = check_positive_float(std, "std")
    trials = check_int(trials, "trials", minimum=2)
    gen = generator(rng)
    x = mu + sigma * gen.standard_normal((trials, width))
    y = NORM_FUNCS[norm](x)
    m = y.mean(axis=1)
    v = y.var(axis=1)
    s = np.mean(y * y, axis=1)
    (m, mse), (v, vse), (s, sse) = (mean_stderr(a) for a in (m, v, s))
    if norm == "layer":
        cf_m, cf_v = 0.0, 1.0
    else:
        r = mu * mu + sigma * sigma
        cf_m, cf_v = mu / math.sqrt(r), sigma * sigma / r
    return NormMoments(norm=norm, width=width, trials=trials, input_mean=mu, input_std=sigma,
                       mean=float(m), mean_stderr=float(mse), variance=float(v),
                       variance_stderr=float(vse), second_moment=float(s),
                       second_moment_stderr=float(sse), closed_form_mean=cf_m,
                       closed_form_variance=cf_v, closed_form_second_moment=1.0)



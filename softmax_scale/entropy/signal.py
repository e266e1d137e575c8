"""One key of fixed score among ``n - 1`` i.i.d. keys: :func:`signal_stats`.

The signal-plus-noise model of attention: the query has one matching key (score ``s0``) among
``n - 1`` random ones.  The statistics come from the Laplace-transform identity of
:mod:`softmax_scale.exact` with ``phi^(n-1)`` and one more factor ``exp(-t e^{alpha s0})``
(:func:`softmax_scale.exact.signal_at`), deterministic; Monte Carlo on numpy draws is the check.
The signal's attention share ``E[p_0]`` is reported beside the entropy.  The random keys are
normal, cosine, or drawn from a sample of scores (a head's own pooled scores), on which the same
quadrature sums over the sample's points.  :func:`signal_share_slope` adds the derivative of
``E[p_0]`` in ``alpha``, an exact integral over the same inner sums, for many ``n`` at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._util.rng import seed_sequence
from .._util.validation import (
    N_MAX,
    check_alpha_array,
    check_choice,
    check_int,
    check_mc_options,
    check_n_array,
    check_positive_float,
    check_real,
    show,
)
from ..distributions import Cosine, Empirical, Normal, WeightedSample, get_distribution
from ..exact import signal_at
from ..exact.evaluate import moments, signal_grid
from ..exact.inner import inner

__all__ = ["METHODS", "SignalStats", "signal_share_slope", "signal_stats"]

METHODS = ("exact", "mc")


@dataclass(frozen=True)
class SignalStats:
    """Expectations for one fixed key (score ``s0``) among ``n - 1`` i.i.d. keys.

    Fields are arrays over ``alpha`` (or floats for a scalar ``alpha``).

    Attributes
    ----------
    alpha : float or ndarray
        Scale(s).
    n : int
        Total number of keys (the signal plus ``n - 1`` random keys).
    dist : str
        Distribution of the random keys.
    s0 : float
        The signal's score.
    method : str
        ``"exact"`` (quadrature) or ``"mc"``.
    share, share_se : float or ndarray
        ``E[p_0]``, the signal's attention probability, and its standard error.
    sum_p2, sum_p2_se, entropy, entropy_se, grad, grad_se, log_z, log_z_se : float or ndarray
        As in :class:`softmax_scale.SoftmaxStats`.
    """

    alpha: float | np.ndarray
    n: int
    dist: str
    s0: float
    method: str
    share: float | np.ndarray
    share_se: float | np.ndarray
    sum_p2: float | np.ndarray
    sum_p2_se: float | np.ndarray
    entropy: float | np.ndarray
    entropy_se: float | np.ndarray
    grad: float | np.ndarray
    grad_se: float | np.ndarray
    log_z: float | np.ndarray
    log_z_se: float | np.ndarray


def _signal_mc(dist, alphas, n, s0, trials, rng):
    """Monte Carlo on numpy draws (a check of the quadrature): per-trial values, shape (trials, len(alphas))."""
    gen = np.random.default_rng(seed_sequence(rng))
    out = np.empty((5, trials, alphas.size))
    chunk = max(1, 2_000_000 // max(n - 1, 1))
    for lo in range(0, trials, chunk):
        hi = min(trials, lo + chunk)
        s = dist.sample((hi - lo, n - 1), rng=gen)
        mx = np.maximum(s.max(axis=1), s0)[:, None]
        for k, a in enumerate(alphas):
            e = np.exp(a * (s - mx))
            e0 = np.exp(a * (s0 - mx[:, 0]))
            z = e.sum(axis=1) + e0
            p = e / z[:, None]
            p0 = e0 / z
            sp2 = (p * p).sum(axis=1) + p0 * p0
            out[0, lo:hi, k] = p0
            out[1, lo:hi, k] = sp2
            out[2, lo:hi, k] = np.log(z) - a * ((p * (s - mx)).sum(axis=1) + p0 * (s0 - mx[:, 0]))
            out[3, lo:hi, k] = a * (1.0 - sp2)
            out[4, lo:hi, k] = a * mx[:, 0] + np.log(z)
    return out


def _check_s0(s0, dist) -> float:
    """``s0`` as a float: a finite real number, a cosine in [-1, 1] for cosine scores."""
    s0 = check_real(s0, "s0")
    if isinstance(dist, Cosine) and not -1.0 <= s0 <= 1.0:
        raise ValueError(f"`s0` must be a cosine in [-1, 1] for cosine scores, got {show(s0)}")
    return s0


def signal_stats(alpha, n, s0, dist="normal", *, d=None, method="exact", trials=None, rng=None) -> SignalStats:
    """Statistics of ``softmax(alpha s)`` with one fixed score ``s0`` among ``n - 1`` i.i.d. scores.

    Parameters
    ----------
    alpha : float or array_like
        Scale(s) ``>= 0``.
    n : int
        Total number of keys, ``>= 2``.
    s0 : float
        The fixed (signal) score, in the units of ``dist`` (a z-score, or a cosine in [-1, 1]).
    dist : {"normal", "cosine"}, array_like, Empirical or WeightedSample
        Distribution of the ``n - 1`` random scores: a named one, or a sample of scores (e.g. a
        head's pooled standardised scores, :func:`softmax_scale.heads.key_share`), ``s0`` then in
        the sample's units.
    d : int, optional
        Dimension for ``"cosine"``.
    method : {"exact", "mc"}
        Deterministic Laplace-transform quadrature, or Monte Carlo with standard errors.
    trials : int, optional
        Monte Carlo trials (``method="mc"`` only; default 4000).
    rng : None, int, SeedSequence or Generator
        Monte Carlo seed (``method="mc"`` only).

    Returns
    -------
    SignalStats
    """
    alphas, scalar = check_alpha_array(alpha)
    n = check_int(n, "n", minimum=2, maximum=N_MAX)
    check_choice(method, "method", METHODS)
    dist_obj = get_distribution(dist, d)
    if not isinstance(dist_obj, (Normal, Cosine, Empirical, WeightedSample)):
        raise TypeError(f"`dist` must be 'normal', 'cosine' or a sample of scores for the signal model, got {dist_obj.label}")
    s0 = _check_s0(s0, dist_obj)
    trials, rng = check_mc_options(method, trials, rng, default_trials=4000)
    if method == "mc":
        per = _signal_mc(dist_obj, alphas, n, s0, trials, rng)
        mean = per.mean(axis=1)
        se = per.std(axis=1, ddof=1) / math.sqrt(trials)
    else:
        mean = np.empty((5, alphas.size))
        for k, a in enumerate(alphas):
            if a == 0.0:
                mean[:, k] = [1.0 / n, 1.0 / n, math.log(n), 0.0, math.log(n)]
            else:
                mean[:, k] = signal_at(dist_obj, float(a), float(n), s0)
        se = np.zeros_like(mean)
        trials = 0

    def o(x):
        return float(x[0]) if scalar else x

    return SignalStats(alpha=o(alphas), n=n, dist=dist_obj.label, s0=s0, method=method,
                       share=o(mean[0]), share_se=o(se[0]), sum_p2=o(mean[1]), sum_p2_se=o(se[1]),
                       entropy=o(mean[2]), entropy_se=o(se[2]), grad=o(mean[3]), grad_se=o(se[3]),
                       log_z=o(mean[4]), log_z_se=o(se[4]))


def signal_share_slope(alpha, ns, s0, dist="normal", *, d=None) -> tuple[np.ndarray, np.ndarray]:
    """``E[p_0]`` and ``dE[p_0]/d alpha`` at one scale for every ``n`` of ``ns``, by the quadrature of :func:`signal_stats`.

    With ``y0 = e^(u + alpha s0)``, ``g0 = y0 e^-y0``, ``N = n - 1`` and the inner sums
    ``phi = E[e^-y]``, ``sm = E[s y e^-y] = -d phi / d alpha``, ``E[p_0] = ∫ g0 phi^N du`` and::

        dE[p_0]/d alpha = ∫ (s0 (1 - y0) g0 phi^N - N g0 sm phi^(N-1)) du

    (each draw's ``dp_0/d alpha = p_0 (s0 - sum_i p_i s_i)``).  One grid covers every ``n`` (the
    union of :func:`signal_stats`'s grids for the smallest and largest), one pass of the inner sums
    serves them all; at ``alpha = 0`` the values are ``1/n`` and ``(n - 1)(s0 - E[s]) / n^2``.

    Parameters
    ----------
    alpha : float
        Scale, ``>= 0``.
    ns : array_like of int
        Total numbers of keys, ``>= 2``.
    s0 : float
        The fixed (signal) score, in the units of ``dist``.
    dist, d
        As in :func:`signal_stats`.

    Returns
    -------
    share, slope : ndarray, shape (len(ns),)
        ``E[p_0]`` and its derivative in ``alpha``.
    """
    alpha = check_positive_float(alpha, "alpha", allow_zero=True)
    nn, _ = check_n_array(ns, "ns")
    dist_obj = get_distribution(dist, d)
    if not isinstance(dist_obj, (Normal, Cosine, Empirical, WeightedSample)):
        raise TypeError(f"`dist` must be 'normal', 'cosine' or a sample of scores for the signal model, got {dist_obj.label}")
    s0 = _check_s0(s0, dist_obj)
    if alpha == 0.0:
        return 1.0 / nn, (nn - 1.0) * (s0 - moments(dist_obj)[0]) / nn**2
    big = nn - 1.0
    lo, du = signal_grid(dist_obj, alpha, float(big.min()), s0)
    hi, _ = signal_grid(dist_obj, alpha, float(big.max()), s0)
    u_lo, u_hi = min(lo[0], hi[0]), max(lo[-1], hi[-1])
    u = u_lo + du * np.arange(int(np.ceil((u_hi - u_lo) / du - 1e-9)) + 1)
    inn = inner(dist_obj, alpha, u)
    log_phi = inn.log_phi()
    y0 = np.exp(np.minimum(u + alpha * s0, 700.0))
    g0 = y0 * np.exp(-y0)
    w_n = np.exp(big[:, None] * log_phi[None, :])
    w_n1 = np.exp((big[:, None] - 1.0) * log_phi[None, :])
    share = (w_n @ g0) * du
    slope = (w_n @ (s0 * (1.0 - y0) * g0) - big * (w_n1 @ (g0 * inn.sm))) * du
    return share, slope

"""One key of fixed score among ``n - 1`` i.i.d. keys: :func:`signal_stats`.

The signal-plus-noise model of attention: the query has one matching key (score ``s0``) among
``n - 1`` random ones.  The statistics come from the Laplace-transform identity of
:mod:`softmax_scale.exact` with ``phi^(n-1)`` and one more factor ``exp(-t e^{alpha s0})``
(:func:`softmax_scale.exact.signal_at`), deterministic; Monte Carlo on numpy draws is the check.
The signal's attention share ``E[p_0]`` is reported beside the entropy.  The random keys are
normal, cosine, or drawn from a sample of scores (a head's own pooled scores), on which the same
quadrature sums over the sample's points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._util.rng import seed_sequence
from .._util.validation import N_MAX, check_alpha_array, check_choice, check_int, check_real, show
from ..distributions import Cosine, Empirical, Normal, WeightedSample, get_distribution
from ..exact import signal_at

__all__ = ["METHODS", "SignalStats", "signal_stats"]

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


def signal_stats(alpha, n, s0, dist="normal", *, d=None, method="exact", trials=4000, rng=None) -> SignalStats:
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
    trials : int
        Monte Carlo trials.
    rng : None, int, SeedSequence or Generator
        Monte Carlo seed.

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
    s0 = check_real(s0, "s0")
    if isinstance(dist_obj, Cosine) and not -1.0 <= s0 <= 1.0:
        raise ValueError(f"`s0` must be a cosine in [-1, 1] for cosine scores, got {show(s0)}")
    if method == "mc":
        trials = check_int(trials, "trials", minimum=2)
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

"""``exact_stats``: exact finite-``n`` softmax statistics by the Laplace-transform quadrature of this package."""

from __future__ import annotations

import numpy as np

from .._stats_result import SoftmaxStats, as_output
from .._util.validation import N_MAX, check_alpha_array, check_bool, check_int, check_positive_float
from ..distributions import get_distribution
from .evaluate import stats_at

__all__ = ["exact_stats", "exact_sum_p_s"]


def exact_stats(alpha, n, dist="normal", *, d=None, refine=1.0, error_estimate=False) -> SoftmaxStats:
    """Exact ``E[sum p^2]``, ``E[H]``, ``E[G]`` and ``E[log Z]`` by deterministic quadrature.

    The cost does not depend on ``n`` (2 to 1e15) nor on ``alpha`` (0 to
    1e6 and beyond) for normal and cosine scores; for an empirical sample it
    grows with ``alpha`` times the spread of the sample.

    Parameters
    ----------
    alpha : float or array_like
        Scale(s) ``>= 0``.
    n : int
        Number of i.i.d. scores, ``>= 2``.
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        Score distribution; for an array (empirical sample) the inner
        expectation is the sample mean, exact for resampling.
    d : int, optional
        Dimension for ``dist="cosine"``.
    refine : float
        Resolution multiplier (2 halves every quadrature step).
    error_estimate : bool
        Also evaluate on the grid of the same step offset by half a step, and report the
        largest change of a statistic as ``quad_error`` (about twice the outer quadrature's
        error; it doubles the cost).  Without it ``quad_error`` is the residual of
        ``E[sum p] = 1`` alone, which costs nothing.

    Returns
    -------
    SoftmaxStats
        With ``trials = 0``, all standard errors 0 and ``method = "exact"``.

    Examples
    --------
    >>> import softmax_scale as ss
    >>> r = ss.softmax_stats(0.0, 100, method="exact")
    >>> r.sum_p2, round(r.entropy, 6)
    (0.01, 4.60517)
    """
    alphas, scalar = check_alpha_array(alpha)
    n = check_int(n, "n", minimum=2, maximum=N_MAX)
    refine = check_positive_float(refine, "refine")
    error_estimate = check_bool(error_estimate, "error_estimate")
    dist_obj = get_distribution(dist, d)
    out, err = stats_at(dist_obj, alphas, float(n), refine, error_estimate)
    zeros = as_output(np.zeros(alphas.size), scalar)
    return SoftmaxStats(
        alpha=as_output(alphas, scalar),
        n=n,
        dist=dist_obj.label,
        method="exact",
        trials=0,
        sum_p2=as_output(out[:, 0], scalar),
        sum_p2_se=zeros,
        entropy=as_output(out[:, 1], scalar),
        entropy_se=zeros,
        grad=as_output(out[:, 2], scalar),
        grad_se=zeros,
        log_z=as_output(out[:, 3], scalar),
        log_z_se=zeros,
        quad_error=float(err.max()),
    )


def exact_sum_p_s(alpha, n, dist="normal", *, d=None, refine=1.0):
    """``E[sum_i p_i s_i]`` (so that ``E[H] = E[log Z] - alpha E[sum p s]``), vectorised over ``alpha``."""
    alphas, scalar = check_alpha_array(alpha)
    n = check_int(n, "n", minimum=2, maximum=N_MAX)
    out, _ = stats_at(get_distribution(dist, d), alphas, float(n), float(refine), False)
    return as_output(out[:, 4], scalar)

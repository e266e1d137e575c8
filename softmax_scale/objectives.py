"""Gradient objectives ``G(alpha; n)``: what "the best scale" maximises.

``G = alpha (1 - sum_i p_i^2)`` is half the entrywise L1 norm of the softmax
Jacobian.  Its expectation over the scores can be approximated or computed in
several ways, kept apart here and never mixed silently:

``"mean_field"`` (default; the seed note's objective)
    Each sum replaced by ``n`` times an expectation,
    ``sum p^2 ~ M(2a) / (n M(a)^2)``, so ``G_mf = a (1 - M(2a) / (n M(a)^2))``.
    For normal scores ``a (1 - exp(a^2) / n)``.
``"expected"``
    The exact finite-``n`` ``E[G]`` (quadrature; :mod:`softmax_scale.exact`).
``"typical"`` / ``"geometric"``
    The median of ``G`` over draws and ``exp E[log G]`` (Monte Carlo on common
    random numbers).
"""

from __future__ import annotations

import numpy as np

from ._validation import check_alpha_array, check_choice, check_n_array
from .distributions import get_distribution

__all__ = ["OBJECTIVES", "gradient_objective", "mean_field_objective", "mean_field_sum_p2"]

OBJECTIVES = ("mean_field", "expected", "typical", "geometric")

#: Objective name -> function(alpha_1d, n_1d, dist_obj, **kwargs) -> values, for the non mean-field objectives.
#: Filled by the modules that implement them.
_EVALUATORS: dict = {}


def mean_field_sum_p2(alpha, n, dist):
    """Mean-field ``sum p^2 ~ M(2a) / (n M(a)^2)``, capped at 1 (its true range is [1/n, 1]).

    ``alpha`` and ``n`` broadcast; ``dist`` is a :class:`ScoreDistribution`.
    The cap only matters where the approximation has already broken down
    (``G_mf <= 0``); it keeps the objective finite for any scale and does not
    move its maximiser.
    """
    log_ratio = dist.mean_field_log_ratio(alpha) - np.log(n)
    return np.exp(np.minimum(log_ratio, 0.0))


def mean_field_objective(alpha, n, dist):
    """``a (1 - min(1, M(2a) / (n M(a)^2)))``, broadcasting ``alpha`` against ``n``.

    Written as ``-a expm1(log_ratio)`` so that it keeps its relative accuracy
    when ``sum p^2`` is small.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    log_ratio = dist.mean_field_log_ratio(alpha) - np.log(n)
    return -alpha * np.expm1(np.minimum(log_ratio, 0.0))


def gradient_objective(alpha, n, dist="normal", *, d=None, objective="mean_field", **kwargs):
    """The gradient objective ``G(alpha; n)`` under one of the objectives.

    Parameters
    ----------
    alpha : float or array_like
        Scale(s) ``>= 0``.
    n : int or array_like
        Number of scores, ``>= 2``; broadcasts against ``alpha``.
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        Score distribution (an array is an empirical sample).
    d : int, optional
        Dimension for ``dist="cosine"``.
    objective : {"mean_field", "expected", "typical", "geometric"}
        See the module docstring.
    **kwargs
        Passed to the evaluator (e.g. ``trials``, ``rng`` for Monte Carlo objectives).

    Returns
    -------
    float or ndarray
        A float when both ``alpha`` and ``n`` are scalars.
    """
    check_choice(objective, "objective", OBJECTIVES)
    a, a_scalar = check_alpha_array(alpha)
    nn, n_scalar = check_n_array(n)
    dist_obj = get_distribution(dist, d)
    if a.size != nn.size and a.size != 1 and nn.size != 1:
        raise ValueError(f"`alpha` and `n` must broadcast: got {a.size} scales and {nn.size} values of n")
    if objective == "mean_field":
        if kwargs:
            raise TypeError(f"objective='mean_field' takes no options, got {sorted(kwargs)}")
        out = mean_field_objective(a, nn, dist_obj)
    else:
        if objective not in _EVALUATORS:
            raise NotImplementedError(f"objective={objective!r} is not available in this build")
        out = _EVALUATORS[objective](a, nn, dist_obj, **kwargs)
    if a_scalar and n_scalar:
        return float(np.asarray(out).reshape(-1)[0])
    return np.asarray(out)

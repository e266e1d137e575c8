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
``"typical"``
    The median of ``G`` over draws (Monte Carlo on common random numbers;
    :mod:`softmax_scale.objectives.typical`).
``"geometric"``
    The geometric mean ``exp E[log G]`` over draws (the same Monte Carlo).

Each name is one objective: ``"typical"`` is the median only, ``"geometric"`` the geometric mean only.

Every objective is registered here, in :data:`REGISTRY`, and nowhere else: its evaluator (used by
:func:`gradient_objective`) and its optimiser (used by :func:`softmax_scale.optimize_alpha`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._util.validation import check_alpha_array, check_choice, check_n_array
from ..distributions import get_distribution, is_sample
from ..exact import expected_grad, expected_optimum
from .mean_field import mean_field_objective, mean_field_optimum, mean_field_sum_p2
from .typical import mc_evaluator, mc_optimiser

__all__ = ["OBJECTIVES", "REGISTRY", "Objective", "gradient_objective", "mean_field_objective", "mean_field_sum_p2"]


@dataclass(frozen=True)
class Objective:
    """One gradient objective: how to evaluate it and how to maximise it.

    Attributes
    ----------
    evaluate : callable
        ``evaluate(alpha_1d, n_1d, dist, **options) -> values`` (``alpha`` and ``n`` broadcast).
    optimise : callable
        ``optimise(n_1d, dist, **options) -> dict`` of :class:`~softmax_scale.AlphaOptimum` fields.
    what : str
        What it is, in a few words (printed beside its name by ``softmax-scale alpha``).
    """

    evaluate: Callable
    optimise: Callable
    what: str = ""


def _expected_optimum(n, dist, **kwargs):
    """The ``"expected"`` optimiser, refusing a sample: its ``E[G]`` has no finite supremum."""
    if is_sample(dist):
        raise ValueError("`objective`='expected' has no maximiser for an empirical sample `dist`: a finite sample "
                         "ties its top scores with positive probability, so E[G] grows without bound in alpha; "
                         "use objective='mean_field', 'typical' or 'geometric'")
    return expected_optimum(n, dist, **kwargs)


def _no_options(name, fn):
    def call(*args, **kwargs):
        if kwargs:
            raise TypeError(f"objective={name!r} takes no options, got {sorted(kwargs)}")
        return fn(*args)

    return call


#: Objective name -> :class:`Objective`, in the order of :data:`OBJECTIVES`.
REGISTRY = {
    "mean_field": Objective(_no_options("mean_field", mean_field_objective), _no_options("mean_field", mean_field_optimum),
                            "the note's mean-field G = a (1 - M(2a) / (n M(a)^2))"),
    "expected": Objective(expected_grad, _expected_optimum, "the exact E[G] over draws, no finite maximiser"),
    "typical": Objective(mc_evaluator("typical"), mc_optimiser("typical"), "the median of G over draws"),
    "geometric": Objective(mc_evaluator("geometric"), mc_optimiser("geometric"),
                           "the geometric mean exp E[log G] over draws"),
}

OBJECTIVES = tuple(REGISTRY)


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
    out = REGISTRY[objective].evaluate(a, nn, dist_obj, **kwargs)
    if a_scalar and n_scalar:
        return float(np.asarray(out).reshape(-1)[0])
    return np.asarray(out)

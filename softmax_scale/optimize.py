"""The scale that maximises a gradient objective: ``optimal_alpha`` and ``optimize_alpha``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._util.validation import check_choice, check_n_array
from .distributions import get_distribution
from .objectives import OBJECTIVES, REGISTRY

__all__ = ["AlphaOptimum", "optimal_alpha", "optimize_alpha"]


@dataclass(frozen=True)
class AlphaOptimum:
    """The maximiser of a gradient objective.

    Fields are floats for a scalar ``n`` and arrays for an array of ``n``.

    Attributes
    ----------
    alpha : float or ndarray
        The maximising scale ``alpha*``; ``inf`` where the objective has no
        finite maximiser (``bounded`` is then False).
    value : float or ndarray
        The objective at ``alpha*`` (its supremum when unbounded).
    n : float or ndarray
        Number of scores.
    dist : str
        Score distribution label.
    objective : str
        Objective maximised.
    success : bool or ndarray
        Whether the optimiser converged.
    bounded : bool or ndarray
        Whether a finite maximiser exists.
    message : str
        What happened, in words.
    nfev : int or ndarray
        Objective evaluations.
    alpha_se : float or ndarray
        Standard error of ``alpha*`` (0 for deterministic objectives).
    """

    alpha: float | np.ndarray
    value: float | np.ndarray
    n: float | np.ndarray
    dist: str
    objective: str
    success: bool | np.ndarray
    bounded: bool | np.ndarray
    message: str
    nfev: int | np.ndarray
    alpha_se: float | np.ndarray = 0.0


def optimize_alpha(n, dist="normal", *, d=None, objective="mean_field", **kwargs) -> AlphaOptimum:
    """Find the scale ``alpha*`` maximising a gradient objective, for one or many ``n``.

    Parameters
    ----------
    n : int or array_like
        Number of scores, ``>= 2``; an array is optimised in one vectorised pass.
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        Score distribution (an array is an empirical sample).
    d : int, optional
        Dimension for ``dist="cosine"``.
    objective : {"mean_field", "expected", "typical", "geometric"}
        See :mod:`softmax_scale.objectives`.
    **kwargs
        Options of the objective's optimiser (Monte Carlo ``trials``, ``rng``...).

    Returns
    -------
    AlphaOptimum
        Never a bracket edge posing as an optimum: where no finite maximiser
        exists, ``bounded`` is False and ``alpha`` is ``inf``.

    Raises
    ------
    ValueError
        Naming the parameter, for bad input; a sample ``dist`` needs at least 2 distinct values,
        and ``objective="expected"`` refuses a sample (its ``E[G]`` grows without bound).

    Examples
    --------
    >>> import softmax_scale as ss
    >>> round(ss.optimize_alpha(512).alpha, 4)
    2.0084
    """
    check_choice(objective, "objective", OBJECTIVES)
    nn, scalar = check_n_array(n)
    dist_obj = get_distribution(dist, d)
    out = REGISTRY[objective].optimise(nn, dist_obj, **kwargs)

    def pick(x, kind=float):
        x = np.asarray(x)
        return kind(x.reshape(-1)[0]) if scalar else x

    return AlphaOptimum(
        alpha=pick(out["alpha"]),
        value=pick(out["value"]),
        n=pick(nn),
        dist=dist_obj.label,
        objective=objective,
        success=pick(out["success"], bool),
        bounded=pick(out["bounded"], bool),
        message=out["message"],
        nfev=pick(out["nfev"], int),
        alpha_se=pick(out.get("alpha_se", np.zeros(nn.shape))),
    )


def optimal_alpha(n, dist="normal", *, d=None, objective="mean_field", **kwargs):
    """The maximising scale ``alpha*``: a float for a scalar ``n``, an ndarray for an array.

    Shorthand for ``optimize_alpha(...).alpha``; ``inf`` where the objective
    has no finite maximiser.  See :func:`optimize_alpha`.

    Parameters
    ----------
    n : int or array_like
        Number of scores, ``>= 2``.
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        Score distribution (an array is an empirical sample).
    d : int, optional
        Dimension for ``dist="cosine"``.
    objective : {"mean_field", "expected", "typical", "geometric"}
        See :mod:`softmax_scale.objectives`.
    **kwargs
        Options of the objective's optimiser (Monte Carlo ``trials``, ``rng``...).

    Returns
    -------
    float or ndarray
        ``alpha*``, the scale that multiplies the scores (unit-variance normal scores, or cosines).

    Examples
    --------
    >>> import softmax_scale as ss
    >>> ss.optimal_alpha([64, 512, 4096]).round(4)
    array([1.5494, 2.0084, 2.4055])
    """
    return optimize_alpha(n, dist, d=d, objective=objective, **kwargs).alpha

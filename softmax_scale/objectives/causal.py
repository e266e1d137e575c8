"""A decoder's constant scale: the mean-field objective averaged over the positions of a causal sequence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from .._util.validation import check_alpha_array, check_int
from ..distributions import get_distribution
from .mean_field import mean_field_objective, mean_field_optimum

__all__ = ["CausalOptimum", "causal_objective", "optimal_alpha_causal"]


@dataclass(frozen=True)
class CausalOptimum:
    """The constant scale maximising the mean-field objective averaged over positions ``2..L``.

    Attributes
    ----------
    train_length : int
        ``L``; the query at position ``i`` sees ``i`` keys.
    dist : str
        Score distribution.
    alpha : float
        The maximiser of ``mean_i G_mf(alpha; i)``.
    value : float
        The averaged objective there.
    alpha_heuristic : float
        The note's heuristic ``alpha*(L/2)`` (the per-position optimum at the mean length).
    value_heuristic : float
        The averaged objective at the heuristic.
    loss_heuristic : float
        ``1 - value_heuristic / value``: the relative loss of the heuristic.
    alpha_at_length : float
        ``alpha*(L)``, the encoder optimum at the full length.
    value_at_length, loss_at_length : float
        Averaged objective there and its relative loss.
    success : bool
        Whether the optimiser converged.
    """

    train_length: int
    dist: str
    alpha: float
    value: float
    alpha_heuristic: float
    value_heuristic: float
    loss_heuristic: float
    alpha_at_length: float
    value_at_length: float
    loss_at_length: float
    success: bool


def _alpha_star(n: int, dist) -> float:
    """The mean-field ``alpha*`` at ``n`` keys (what :func:`softmax_scale.optimal_alpha` returns)."""
    return float(mean_field_optimum(np.array([float(n)]), dist)["alpha"][0])


def causal_objective(alpha, L, dist="normal", *, d=None):
    """``mean_{i=2..L} G_mf(alpha; i)``: the mean-field objective averaged over a causal sequence.

    Parameters
    ----------
    alpha : float or array_like
        Scale(s).
    L : int
        Sequence length, ``>= 2``.
    dist, d
        Score distribution.

    Returns
    -------
    float or ndarray
    """
    a, scalar = check_alpha_array(alpha)
    L = check_int(L, "L", minimum=2, maximum=10**7)
    dist_obj = get_distribution(dist, d)
    i = np.arange(2, L + 1, dtype=np.float64)
    out = np.array([np.mean(mean_field_objective(x, i, dist_obj)) for x in a])
    return float(out[0]) if scalar else out


def optimal_alpha_causal(L, dist="normal", *, d=None) -> CausalOptimum:
    """The constant scale for a decoder: maximise the mean-field objective averaged over positions ``2..L``.

    A grid of 400 scales up to ``alpha*(L)``'s zero crossing locates the
    maximum, then ``scipy.optimize.minimize_scalar`` (bounded) refines it in
    the neighbouring grid cells.

    Parameters
    ----------
    L : int
        Sequence (training) length, ``>= 4``; the query at position ``i`` sees ``i`` keys.
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        Score distribution.
    d : int, optional
        Dimension for ``"cosine"``.

    Returns
    -------
    CausalOptimum
        With the note's heuristic ``alpha*(L/2)`` and ``alpha*(L)`` and their relative losses.
    """
    L = check_int(L, "L", minimum=4, maximum=10**7)
    dist_obj = get_distribution(dist, d)
    a_L = _alpha_star(L, dist_obj)
    # G_mf(.; L) vanishes at the root of R(a) = L, at most a few times alpha*(L); search up to 4 alpha*(L).
    grid = np.linspace(0.0, 4.0 * a_L, 401)[1:]
    vals = causal_objective(grid, L, dist_obj)
    k = int(np.argmax(vals))
    lo = grid[k - 1] if k > 0 else 0.0
    hi = grid[min(k + 1, grid.size - 1)]
    res = optimize.minimize_scalar(lambda x: -causal_objective(x, L, dist_obj), bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-10})
    alpha, value = float(res.x), -float(res.fun)
    a_h = _alpha_star(L // 2, dist_obj)
    v_h = causal_objective(a_h, L, dist_obj)
    v_L = causal_objective(a_L, L, dist_obj)
    return CausalOptimum(train_length=L, dist=dist_obj.label, alpha=alpha, value=value, alpha_heuristic=a_h,
                         value_heuristic=v_h, loss_heuristic=1.0 - v_h / value, alpha_at_length=a_L,
                         value_at_length=v_L, loss_at_length=1.0 - v_L / value, success=bool(res.success))

"""The result type of :func:`softmax_scale.softmax_stats`, shared by both evaluators.

It lives apart from :mod:`.stats` so that :mod:`.exact` and :mod:`.montecarlo`, which build it,
need not import the module that dispatches to them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SoftmaxStats"]


@dataclass(frozen=True)
class SoftmaxStats:
    """Expectations over i.i.d. scores of the statistics of ``p = softmax(alpha s)``.

    Every statistic comes with its standard error (``*_se``; 0 for the exact
    method).  Fields are floats for a scalar ``alpha`` and arrays (one entry
    per scale) for an array ``alpha``.

    Attributes
    ----------
    alpha : float or ndarray
        The scale(s).
    n : int
        Number of scores.
    dist : str
        Score distribution, e.g. ``"normal"`` or ``"cosine(d=128)"``.
    method : str
        ``"mc"`` (Monte Carlo) or ``"exact"`` (quadrature).
    trials : int
        Monte Carlo trials (0 for the exact method).
    sum_p2, sum_p2_se : float or ndarray
        ``E[sum_i p_i^2]`` (the collision probability) and its standard error.
    entropy, entropy_se : float or ndarray
        ``E[H]``, the Shannon entropy in nats, and its standard error.
    grad, grad_se : float or ndarray
        ``E[G]`` with ``G = alpha (1 - sum_i p_i^2)``, and its standard error.
    log_z, log_z_se : float or ndarray
        ``E[log Z]``, ``Z = sum_j exp(alpha s_j)``, and its standard error.
    quad_error : float
        The exact method's error estimate, largest over the scales: the residual of
        ``E[sum p] = 1``, and with ``error_estimate=True`` the change of each statistic on
        the grid offset by half a step (about twice the outer quadrature's error).  0 for
        Monte Carlo.
    """

    alpha: float | np.ndarray
    n: int
    dist: str
    method: str
    trials: int
    sum_p2: float | np.ndarray
    sum_p2_se: float | np.ndarray
    entropy: float | np.ndarray
    entropy_se: float | np.ndarray
    grad: float | np.ndarray
    grad_se: float | np.ndarray
    log_z: float | np.ndarray
    log_z_se: float | np.ndarray
    quad_error: float = 0.0


def as_output(x: np.ndarray, scalar: bool):
    """``x`` as a float for a scalar input, else as an array."""
    return float(x[0]) if scalar else np.asarray(x)

"""The statistics of a scaled softmax: the result type and the public entry point."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_choice

__all__ = ["METHODS", "SoftmaxStats", "softmax_stats"]

METHODS = ("mc", "exact")


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
        Estimated absolute quadrature error, largest over the statistics
        (0 for Monte Carlo).
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


def softmax_stats(alpha, n, dist="normal", *, d=None, method="mc", trials=10_000, rng=None, **kwargs):
    """Expected ``sum p^2``, entropy and gradient objective of ``softmax(alpha s)``.

    Parameters
    ----------
    alpha : float or array_like
        Scale(s) ``>= 0``; an array is evaluated on the same draws.
    n : int
        Number of i.i.d. scores, ``>= 2``.
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        Score distribution; an array is an empirical sample.
    d : int, optional
        Dimension for ``dist="cosine"``.
    method : {"mc", "exact"}
        Monte Carlo (with standard errors) or the deterministic quadrature.
    trials : int
        Monte Carlo trials (ignored by ``"exact"``).
    rng : None, int, SeedSequence or Generator
        Seed of the Monte Carlo draws; the same seed gives bit-identical results
        for any number of threads.
    **kwargs
        Passed to the method (e.g. ``progress`` for Monte Carlo).

    Returns
    -------
    SoftmaxStats
    """
    check_choice(method, "method", METHODS)
    if method == "mc":
        from .montecarlo import mc_stats

        return mc_stats(alpha, n, dist, d=d, trials=trials, rng=rng, **kwargs)
    try:
        from .exact import exact_stats
    except ImportError as exc:  # pragma: no cover - until the exact evaluator lands
        raise NotImplementedError("method='exact' is not available in this build") from exc
    return exact_stats(alpha, n, dist, d=d, **kwargs)


def _as_output(x: np.ndarray, scalar: bool):
    return float(x[0]) if scalar else np.asarray(x)

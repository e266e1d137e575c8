"""The statistics of a scaled softmax: the public entry point over the two evaluators."""

from __future__ import annotations

from ._stats_result import SoftmaxStats
from ._util.validation import check_choice, check_mc_options

__all__ = ["METHODS", "SoftmaxStats", "softmax_stats"]

METHODS = ("exact", "mc")


def softmax_stats(alpha, n, dist="normal", *, d=None, method="exact", trials=None, rng=None, **kwargs):
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
    method : {"exact", "mc"}
        The deterministic quadrature (the default: two identical calls give the same
        numbers) or Monte Carlo with standard errors (``trials`` and ``rng``).
    trials : int, optional
        Monte Carlo trials (``method="mc"`` only; default 10,000).
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
    trials, rng = check_mc_options(method, trials, rng, default_trials=10_000)
    if method == "mc":
        from .montecarlo import mc_stats

        return mc_stats(alpha, n, dist, d=d, trials=trials, rng=rng, **kwargs)
    from .exact import exact_stats

    return exact_stats(alpha, n, dist, d=d, **kwargs)

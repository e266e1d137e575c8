"""The three evaluations the toolkit makes with the engine, each a grid, the inner expectations and an outer sum.

- :func:`stats_at`: every statistic for one ``n`` at each scale (``exact_stats``; the isotropic
  entropy curves and the phase diagram go through it);
- :class:`EntropyForNs`: ``E[H]`` for a fixed set of ``n`` at once, the nodes that cannot matter
  left out (the head predictions of :func:`~softmax_scale.head_stats` and of the real decoder);
- :func:`signal_at`: one key of fixed score among ``n - 1`` i.i.d. keys (``signal_stats``).

Below ``alpha sd(s) = 1e-6`` the statistics come from their second-order expansion in ``alpha``
(:func:`series`): the grid in ``u`` would grow like ``log(1/alpha)`` and lose the ``alpha^2``
deviations from ``1/n`` and ``log n`` in rounding.
"""

from __future__ import annotations

import math

import numpy as np

from ..distributions import Empirical, Normal, WeightedSample, is_sample
from .grid import MAX_WORK, TAIL, TooMuchWork, quadrature_grid, spread, u_grid
from .inner import inner, phi_cut
from .outer import entropy_many, signal_one, stats_one

__all__ = ["OFFSET", "SERIES_BELOW", "EntropyForNs", "moments", "series", "signal_at", "stats_at"]

#: Below this ``alpha * sd(s)`` the statistics come from their expansion in ``alpha`` (exact to ~1e-18).
SERIES_BELOW = 1e-6


def moments(dist) -> tuple[float, float]:
    """Mean and variance of the scores."""
    if isinstance(dist, Empirical):
        return float(np.mean(dist.values)), float(np.var(dist.values))
    if isinstance(dist, WeightedSample):
        return dist.mean, dist.var
    return 0.0, spread(dist) ** 2


def series(alpha, n, mu, var) -> list:
    """The statistics of :func:`stats_at` to second order in ``alpha``: ``p_i = (1 + alpha (s_i - mean s) + ...) / n``."""
    logn = np.log(n)
    v = var * (n - 1.0) / n  # the alpha^3 terms are below 1e-18
    sum_p2 = 1.0 / n + alpha * alpha * v / n
    comp = (1.0 - 1.0 / n) - alpha * alpha * v / n
    return [sum_p2, logn - 0.5 * alpha * alpha * v, alpha * comp, logn + alpha * mu + 0.5 * alpha * alpha * v,
            mu + alpha * v, 0.0, comp]


def _check_work(u, dist):
    if is_sample(dist):
        size = dist.values.size if isinstance(dist, Empirical) else dist.x.size
        if u.size * size > MAX_WORK:
            raise TooMuchWork(f"({u.size} quadrature points x {size} scores)")


def _one(dist, alpha, n, refine, offset=0.0):
    try:
        u, wq = quadrature_grid(dist, alpha, n, refine, offset)
        _check_work(u, dist)
    except TooMuchWork as err:
        raise TooMuchWork(f"`alpha` * (spread of the empirical sample) is too large for the exact method ({err}); "
                          "use method='mc'") from None
    return stats_one(alpha, n, inner(dist, alpha, u, refine), wq)


#: Where the nodes of the error estimate's grid lie: half a step below those of the value's grid.
OFFSET = 0.5


def stats_at(dist, alphas, n, refine=1.0, error_estimate=False):
    """Statistics ``[alphas.size, 7]`` at one float ``n`` (columns as :func:`~.outer.stats_one`) and their error estimates.

    The error of each scale is the residual of ``E[sum p] = 1`` on its grid (free), and with
    ``error_estimate`` also the largest change of the first four statistics on the grid of the
    same step offset by half a step (:data:`OFFSET`).  For the trapezoid rule on these smooth,
    rapidly decaying integrands the leading error of a grid is an aliasing term whose sign the
    half-step offset flips, so the change is about twice the grid's own error (a grid of half the
    step, the alternative, measures the coarser grid's error instead: five orders too pessimistic).
    The inner quadratures' error is not in it (below 1e-12 in ``tests/exact``).
    """
    out = np.empty((alphas.size, 7))
    err = np.zeros(alphas.size)
    mu, var = moments(dist)
    for k, alpha in enumerate(alphas):
        if alpha * np.sqrt(var) < SERIES_BELOW:
            out[k] = series(alpha, n, mu, var)
            continue
        value = _one(dist, alpha, n, refine)
        out[k] = value
        err[k] = abs(value[5])
        if error_estimate:
            shifted = _one(dist, alpha, n, refine, OFFSET)
            err[k] = max(err[k], np.max(np.abs(value[:4] - shifted[:4])))
    return out, err


class EntropyForNs:
    """``E[H](alpha, n)`` for one distribution and a fixed set of ``n``, vectorised over ``n``: ``ev(alpha) -> [len(ns)]``.

    One grid serves every ``n`` of the set (:func:`~.grid.quadrature_grid`), the inner
    expectations are evaluated once per scale, and ``E[H]`` follows for all ``n`` as one matrix
    product (:func:`~.outer.entropy_many`): exact in ``n``, no interpolation.  Only the nodes that
    can matter are evaluated: the bottom of the grid (50 e-folds below the bulk) is cut where the
    terms left out add provably less than 1e-13 nats (:meth:`_first_needed`), and for a
    :class:`~softmax_scale.WeightedSample` the top where ``phi^(n-1) < e^-60`` and each node sums
    only the points with ``-45 <= u + alpha x <= 6.7`` (:func:`~.inner.inner`).
    ``reference=True`` evaluates every node and every point (the slow check of the tests).
    Raises :class:`~.grid.TooMuchWork` where a sample would need more than ``MAX_WORK`` terms.
    """

    def __init__(self, dist, ns, reference=False):
        self.reference = reference
        self.dist = dist
        self.ns = np.asarray(ns, dtype=np.float64)
        self.n_lo, self.n_hi = float(self.ns.min()), float(self.ns.max())
        self.mu, self.var = moments(dist)

    def _first_needed(self, alpha, u, du):
        """Index of the first ``u`` node whose term can matter: the nodes below it add < 1e-13 nats in all.

        At every node ``|E[y e^-y (log y + γ)]| <= e^u M(alpha) c`` with ``M`` the
        moment-generating function and ``c = |u_0| + alpha max|s| + 1`` (normal:
        ``c = |u_0| + alpha^2 + alpha + 1``, the mean of ``|u + alpha s + γ|`` under
        the tilted ``N(alpha, 1)`` being at most that), and ``phi^(n-1) <= 1``; so the
        nodes below ``u_c`` add at most ``n du e^(u_c) M c / (1 - e^-du)`` to ``|E[H]|``.
        The grid keeps 50 e-folds below the bulk (:data:`~.grid.TAIL`), far more than a
        trapezoid sum of ``n <= 1e6`` terms needs.
        """
        dist = self.dist
        if isinstance(dist, Normal):
            log_m = 0.5 * alpha * alpha
            c = abs(u[0]) + alpha * alpha + alpha + 1.0
        else:
            log_m = float(dist.log_mgf(alpha))
            c = abs(u[0]) + alpha * max(-dist.support[0], dist.support[1]) + 1.0
        u_c = np.log(1e-13 * -np.expm1(-du) / (self.n_hi * du * c)) - log_m
        return int(np.searchsorted(u, u_c))

    def __call__(self, alpha):
        """``E[H]`` at scale ``alpha >= 0`` for every ``n`` of the set."""
        dist, ns = self.dist, self.ns
        if alpha * np.sqrt(self.var) < SERIES_BELOW:
            return series(alpha, ns, self.mu, self.var)[1]
        u, wq = quadrature_grid(dist, alpha, ns)
        if not self.reference:
            first = self._first_needed(alpha, u, wq[0])
            u, wq = u[first:], wq[first:]
        _check_work(u, dist)
        if not self.reference and isinstance(dist, WeightedSample):
            cut = phi_cut(dist, alpha, u, self.n_lo)
            u, wq = u[:cut], wq[:cut]
        return entropy_many(ns, inner(dist, alpha, u, entropy_only=True, reference=self.reference), wq)


def signal_grid(dist, alpha, N, s0, refine=1.0):
    """Uniform nodes (step ``0.25/refine``) for ``N`` i.i.d. keys and one of score ``s0``: the i.i.d. range widened to ``s0``'s."""
    du = 0.25 / refine
    u = u_grid(dist, alpha, max(N, 2.0), du)
    u_lo = min(u[0], -alpha * s0 - TAIL)
    u_hi = max(min(u[-1], math.log(60.0) - alpha * s0), u_lo + 1.0)
    return u_lo + du * np.arange(int(np.ceil((u_hi - u_lo) / du)) + 1), du


def signal_at(dist, alpha, n, s0, refine=1.0):
    """``[E[p_0], E[sum p^2], E[H], E[G], E[log Z]]`` at one ``alpha > 0`` for one key of score ``s0`` among ``n - 1`` i.i.d. keys."""
    N = n - 1.0
    u, du = signal_grid(dist, alpha, N, s0, refine)
    return signal_one(alpha, N, s0, inner(dist, alpha, u, refine), du)

"""The mean-field gradient objective (the seed note's) and its maximiser.

Each sum of the softmax replaced by ``n`` times an expectation: ``sum p^2 ~ M(2a) / (n M(a)^2)``
with ``M`` the moment-generating function of the scores, so ``G_mf = a (1 - M(2a) / (n M(a)^2))``;
for normal scores ``a (1 - exp(a^2) / n)``.  Deterministic and cheap, for any distribution with a
log-MGF (an empirical or weighted sample included).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import elementwise

__all__ = ["mean_field_objective", "mean_field_optimum", "mean_field_sum_p2"]

#: No mean-field optimum is sought beyond this scale (in the standard form of the scores).  Cosine
#: scores of small ``d`` need it large: ``a_n`` grows like ``n^(2/(d-1))``, about 3e29 for ``d = 2``
#: at ``n = 1e15``.
_A_CAP = 1e300


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


def mean_field_optimum(n: np.ndarray, dist) -> dict:
    """Maximise ``a (1 - R(a)/n)``, ``R(a) = M(2a)/M(a)^2``, for every ``n`` at once.

    ``n`` is a float array, ``dist`` a :class:`~softmax_scale.ScoreDistribution`; returns the fields of
    :class:`~softmax_scale.optimize.AlphaOptimum` as arrays (``alpha``, ``value``, ``success``,
    ``bounded``, ``nfev``) and a ``message``.

    ``R`` rises from ``R(0) = 1`` (``K = log M`` is convex, so
    ``log R(a) = K(2a) - 2K(a)`` has derivative ``2(K'(2a) - K'(a)) >= 0``).
    Hence ``G > 0`` exactly on ``(0, a_n)`` where ``R(a_n) = n``, and
    ``(0, a_n/2, a_n)`` is a valid three-point bracket: ``G(0) = G(a_n) = 0 < G(a_n/2)``.
    ``a_n`` is found by ``scipy.optimize.elementwise.find_root`` after doubling
    an upper bound; the maximum by ``elementwise.find_minimum`` on ``-G``.
    If ``R`` stays below ``n`` for every scale (an empirical sample whose
    maximum is shared by at least ``len(sample)/n`` points), ``G`` grows without
    bound and no maximiser exists.

    The search runs on the standard form of the scores
    (:meth:`~softmax_scale.ScoreDistribution.standard_form`: a sample moved onto
    ``[-1, 1]``), so a sample's units do not matter; ``alpha`` and ``value`` are
    scaled back.
    """
    dist, scale = dist.standard_form()
    out = _optimum_standard(n, dist)
    out["alpha"] = out["alpha"] / scale
    out["value"] = out["value"] / scale
    return out


def _optimum_standard(n: np.ndarray, dist) -> dict:
    """:func:`mean_field_optimum` for scores in their standard form."""
    logn = np.log(n)
    unbounded = np.zeros(n.shape, dtype=bool)
    if hasattr(dist, "values"):  # empirical: sup R = m / (number of samples at the maximum)
        v = dist.values
        sup = np.log(v.size / np.count_nonzero(v == v.max()))
        unbounded = logn >= sup
    ok = ~unbounded
    alpha = np.full(n.shape, np.inf)
    value = np.full(n.shape, np.inf)
    success = np.ones(n.shape, dtype=bool)
    nfev = np.zeros(n.shape, dtype=np.int64)
    if ok.any():
        ln = logn[ok]

        def excess(a, ln):
            return dist.mean_field_log_ratio(a) - ln

        hi = np.ones(ln.shape)
        for _ in range(1100):
            low = excess(hi, ln) < 0
            if not low.any() or hi.max() > _A_CAP:
                break
            hi[low] *= 2.0
        root = elementwise.find_root(excess, (np.zeros_like(hi), hi), args=(ln,), tolerances={"xrtol": 1e-14})
        a_n = root.x
        n_ok = np.exp(ln)

        def neg_g(a, nn):
            return -mean_field_objective(a, nn, dist)

        res = elementwise.find_minimum(
            neg_g,
            (np.zeros_like(a_n), 0.5 * a_n, a_n),
            args=(n_ok,),
            tolerances={"xrtol": 1e-11, "xatol": 1e-14},
            maxiter=400,
        )
        x = _polish(res.x, n_ok, dist)
        alpha[ok] = x
        value[ok] = mean_field_objective(x, n_ok, dist)
        success[ok] = res.success & root.success
        nfev[ok] = res.nfev + root.nfev
    if unbounded.any():
        message = "no finite maximiser for some n: the mean-field objective grows without bound (alpha* = inf)"
    elif success.all():
        message = "converged: maximiser found inside the bracket (0, a_n) where R(a_n) = n"
    else:
        message = "the optimiser did not converge for some n"
    return dict(alpha=alpha, value=value, success=success, bounded=~unbounded, nfev=nfev, message=message)


def _stationarity(a, logn, dist):
    """``log(1 + a L'(a)) + L(a) - log n``, zero where ``d/da [a (1 - e^L / n)] = 0`` (``L = log R``).

    ``L'`` by a five-point stencil with step ``1e-3 a`` (truncation ~1e-12, rounding ~1e-13).
    """
    h = 1e-3 * a
    f = dist.mean_field_log_ratio
    dl = (f(a - 2 * h) - 8 * f(a - h) + 8 * f(a + h) - f(a + 2 * h)) / (12 * h)
    return np.log1p(a * dl) + f(a) - logn


def _polish(x, n, dist):
    """Refine the maximiser found by ``find_minimum`` (flat top: ~1e-9 relative) to ~1e-12.

    The stationarity condition is solved by ``elementwise.find_root`` on a bracket
    of relative width 1e-6 around ``x``; where it does not change sign there,
    ``x`` is kept.
    """
    logn = np.log(n)
    lo, hi = x * (1 - 1e-6), x * (1 + 1e-6)
    flo, fhi = _stationarity(lo, logn, dist), _stationarity(hi, logn, dist)
    ok = (flo < 0) & (fhi > 0)
    if not ok.any():
        return x
    root = elementwise.find_root(
        lambda a, ln: _stationarity(a, ln, dist),
        (lo[ok], hi[ok]),
        args=(logn[ok],),
        tolerances={"xrtol": 4e-16, "xatol": 0.0},
    )
    out = x.copy()
    good = root.success
    out[np.flatnonzero(ok)[good]] = root.x[good]
    return out

"""The scale that maximises a gradient objective: ``optimal_alpha`` and ``optimize_alpha``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import elementwise

from ._validation import check_choice, check_n_array
from .distributions import get_distribution
from .objectives import OBJECTIVES, mean_field_objective

__all__ = ["AlphaOptimum", "optimal_alpha", "optimize_alpha"]

#: Objective name -> function(n_1d, dist_obj, **kwargs) -> dict of AlphaOptimum fields (arrays).
#: ``mean_field`` is here; the other objectives register themselves.
_OPTIMISERS: dict = {}

_A_CAP = 1e9  # no mean-field optimum is sought beyond this scale


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


def _mean_field_optimum(n: np.ndarray, dist) -> dict:
    """Maximise ``a (1 - R(a)/n)``, ``R(a) = M(2a)/M(a)^2``, for every ``n`` at once.

    ``R`` rises from ``R(0) = 1`` (``K = log M`` is convex, so
    ``log R(a) = K(2a) - 2K(a)`` has derivative ``2(K'(2a) - K'(a)) >= 0``).
    Hence ``G > 0`` exactly on ``(0, a_n)`` where ``R(a_n) = n``, and
    ``(0, a_n/2, a_n)`` is a valid three-point bracket: ``G(0) = G(a_n) = 0 < G(a_n/2)``.
    ``a_n`` is found by ``scipy.optimize.elementwise.find_root`` after doubling
    an upper bound; the maximum by ``elementwise.find_minimum`` on ``-G``.
    If ``R`` stays below ``n`` for every scale (an empirical sample whose
    maximum is shared by at least ``len(sample)/n`` points), ``G`` grows without
    bound and no maximiser exists.
    """
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
        for _ in range(64):
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


_OPTIMISERS["mean_field"] = lambda n, dist, **kw: _mean_field_optimum(n, dist, **kw)


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

    Examples
    --------
    >>> import softmax_scale as ss
    >>> round(ss.optimize_alpha(512).alpha, 4)
    2.0084
    """
    check_choice(objective, "objective", OBJECTIVES)
    nn, scalar = check_n_array(n)
    dist_obj = get_distribution(dist, d)
    if objective not in _OPTIMISERS:
        raise NotImplementedError(f"objective={objective!r} is not available in this build")
    if objective == "mean_field" and kwargs:
        raise TypeError(f"objective='mean_field' takes no options, got {sorted(kwargs)}")
    out = _OPTIMISERS[objective](nn, dist_obj, **kwargs)

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

    Examples
    --------
    >>> import softmax_scale as ss
    >>> ss.optimal_alpha([64, 512, 4096]).round(4)
    array([1.5494, 2.0084, 2.4055])
    """
    return optimize_alpha(n, dist, d=d, objective=objective, **kwargs).alpha

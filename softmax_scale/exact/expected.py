"""The ``expected`` objective, ``E[G]``: no finite maximiser, and its supremum ``f_gap(0)``.

``E[G]`` rises with ``alpha`` towards ``f_gap(0) = n (n-1) ∫ f^2 F^(n-2)``, the density at 0 of the
gap between the two largest scores (near-ties keep the gradient alive).
"""

from __future__ import annotations

import numpy as np

from .._util.validation import N_MAX, check_int
from ..distributions import Cosine, get_distribution, is_sample
from .grid import isf, max_width, sf, spread
from .softmax import exact_stats

__all__ = ["expected_grad", "expected_optimum", "gap_density_at_zero"]


def gap_density_at_zero(n, dist="normal", *, d=None) -> float:
    """``f_gap(0) = n (n-1) ∫ f(x)^2 F(x)^(n-2) dx``: density at 0 of the gap between the two largest scores.

    The supremum of ``E[G]`` over ``alpha`` (approached as ``alpha -> inf``).
    Computed by ``scipy.integrate.quad`` in log space around the location of
    the maximum.  Infinite for cosine scores with ``d = 2``, whose density
    ``1/(pi sqrt(1-s^2))`` makes ``f^2`` non-integrable at ``s = 1``.
    """
    from scipy import integrate  # on first use: keeps `import softmax_scale` light

    n = check_int(n, "n", minimum=2, maximum=N_MAX)
    dist_obj = get_distribution(dist, d)
    if is_sample(dist_obj):
        raise TypeError("`dist`: the gap density is not defined for an empirical (discrete) sample")
    if isinstance(dist_obj, Cosine) and dist_obj.d == 2:
        return float("inf")  # f^2 ~ 1/(2(1-s)) is not integrable at s = 1, where F^(n-2) -> 1
    b = isf(dist_obj, 1.0 / n)
    w = max_width(dist_obj, n)
    lo, hi = dist_obj.support

    def integrand(x):
        f = float(dist_obj.pdf(x))
        if f <= 0.0:
            return 0.0
        tail = float(sf(dist_obj, x))
        log_cdf = np.log1p(-tail) if tail < 0.5 else np.log(float(dist_obj.cdf(x)))
        return np.exp(2.0 * np.log(f) + np.log(n) + np.log(n - 1.0) + (n - 2.0) * log_cdf)

    a0, b0 = max(lo, b - 40.0 * w - 3 * spread(dist_obj)), min(hi, b + 40.0 * w)
    pts = [p for p in (b - 5 * w, b - w, b, b + w, b + 5 * w) if a0 < p < b0]
    val, _ = integrate.quad(integrand, a0, b0, points=pts or None, limit=400, epsabs=0.0, epsrel=1e-11)
    return float(val)


def expected_grad(alpha, n, dist, **kwargs):
    """``E[G]`` for broadcast 1-D ``alpha`` and ``n`` (objective ``"expected"`` of :mod:`softmax_scale.objectives`)."""
    alpha, n = np.broadcast_arrays(alpha, n)
    out = np.empty(alpha.shape)
    for nv in np.unique(n):
        sel = n == nv
        out[sel] = exact_stats(alpha[sel], int(nv), dist, error_estimate=False, **kwargs).grad
    return out


def expected_optimum(n, dist, **kwargs):
    """No finite maximiser: ``E[G]`` rises with ``alpha`` towards ``f_gap(0)``."""
    if kwargs:
        raise TypeError(f"objective='expected' takes no options, got {sorted(kwargs)}")
    if is_sample(dist):
        raise TypeError("`dist`: objective='expected' has no finite supremum for an empirical (discrete) sample")
    sup = np.array([gap_density_at_zero(int(v), dist) for v in n])
    return {
        "alpha": np.full(n.shape, np.inf),
        "value": sup,
        "success": np.ones(n.shape, dtype=bool),
        "bounded": np.zeros(n.shape, dtype=bool),
        "nfev": np.zeros(n.shape, dtype=np.int64),
        "message": (
            "no finite maximiser: E[G] increases with alpha towards its supremum f_gap(0) = "
            "n(n-1) ∫ f^2 F^(n-2), the density at 0 of the gap between the two largest scores "
            "(near-ties keep the gradient alive); alpha* = inf and value = f_gap(0)"
        ),
    }

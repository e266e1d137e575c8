"""The inner expectations over the scores at every node ``u`` of the outer grid.

With ``y = e^(u + alpha s)`` and ``γ`` Euler's constant, at every node::

    a  = E[expm1(-y)]            (so phi = 1 + a)
    p1 = E[y e^-y]
    p2 = E[y^2 e^-y]
    kk = E[y e^-y (log y + γ)]
    sm = E[s y e^-y]

:func:`inner` computes them for any score distribution: a smooth density (normal, cosine(d)) by
composite Gauss-Legendre panels in ``z = u + alpha s`` (each ``u`` its own rule: the factor
``exp(-y)`` is a step of width 1 in ``z``, which fixed nodes in ``s`` cannot resolve for large
``alpha``), marching from ``z = 5`` (beyond it ``exp(-y) < e^-148``) down until the log-concave
integrand has dropped by ``e^-46``; cosine densities with small ``d`` get Gauss-Jacobi end panels.
An :class:`~softmax_scale.Empirical` sample is summed exactly (every point at every node); a
:class:`~softmax_scale.WeightedSample` likewise, or (``entropy_only``) over the window of points
that can matter, in parallel.  :func:`log_phi` turns ``a`` into ``log phi``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .._util.jit import jit
from ..distributions import Cosine, Empirical, Normal, WeightedSample
from .grid import GL_W, GL_X, jacobi_end_rules, sf, spread, tilted_window

__all__ = ["EULER", "EntropyInner", "Inner", "inner", "log_phi", "phi_cut"]

EULER = float(np.euler_gamma)
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
_Z_TOP = 5.0  # exp(-e^5) = e^-148: nothing to the right of it counts
_END_MARGIN = 2.0  # march from s = 1 rather than z = 5 if it lies within this of z = 5 (>= 2 panel widths)
_DROP = 46.0  # stop the inner march once the integrand is e^-46 below its peak
#: Beyond ``z = u + alpha x > _Z_ZERO`` a point's terms are exact constants in float64:
#: ``y = e^z > 746``, so ``exp(-y)`` underflows to 0 and ``expm1(-y)`` rounds to -1.
_Z_ZERO = 6.7
#: Below ``z = _Z_NEG`` a point is left out: ``|w y e^-y (z + γ)| < w 45 e^-45 = 1.3e-18 w`` and
#: ``|w expm1(-y)| < w e^-45``, so the inner sums change by at most 1.3e-18 in all.
_Z_NEG = -45.0
#: The ``u`` grid of a weighted sample stops where ``phi^(n-1) < e^-_PHI_TAIL`` for every ``n``.
_PHI_TAIL = 60.0
_NO_WEIGHTS = np.zeros(0)


@dataclass(frozen=True)
class EntropyInner:
    """What ``E[H]`` needs at the nodes ``u``: ``a`` and ``kk`` (arrays of ``u``'s length; see the module docstring)."""

    u: np.ndarray
    a: np.ndarray
    kk: np.ndarray

    def log_phi(self) -> np.ndarray:
        """``log phi(e^u)``, ``phi = 1 + a``."""
        return log_phi(self.a)


@dataclass(frozen=True)
class Inner(EntropyInner):
    """Every inner expectation at the nodes ``u``: also ``p1``, ``p2`` and ``sm``."""

    p1: np.ndarray
    p2: np.ndarray
    sm: np.ndarray


def log_phi(a):
    """``log(1 + a)`` for ``a = E[expm1(-y)]``, clipped to ``[-1, 0]`` (``log1p`` where it is accurate)."""
    a = np.clip(a, -1.0, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(a > -0.5, np.log1p(np.maximum(a, -0.5)), np.log(np.maximum(1.0 + a, 1e-300)))


def inner(dist, alpha, u, refine=1.0, *, entropy_only=False, reference=False) -> EntropyInner:
    """Inner expectations over ``dist`` at scale ``alpha > 0`` at every node of ``u``: an :class:`Inner`.

    ``refine`` multiplies the resolution of the panels of a smooth density.  For a
    :class:`~softmax_scale.WeightedSample` with ``entropy_only`` only ``a`` and ``kk`` are
    computed (an :class:`EntropyInner`), over the points with ``-45 <= u + alpha x <= 6.7`` (the rest add exact constants
    or less than 1.3e-18), unless ``reference`` (every point at every node: the slow check).
    """
    if isinstance(dist, Empirical):
        out = np.empty((5, u.size))
        _inner_sample(u, alpha, dist.values, _NO_WEIGHTS, out)
        return Inner(u, out[0], out[3], out[1], out[2], out[4])
    if isinstance(dist, WeightedSample):
        if entropy_only and not reference:
            out = np.empty((2, u.size))
            _inner_weighted(u, alpha, dist.x, dist.w, dist.above, out)
            return EntropyInner(u, out[0], out[1])
        out = np.empty((5, u.size))
        _inner_sample(u, alpha, dist.x, dist.w, out)
        return Inner(u, out[0], out[3], out[1], out[2], out[4])
    return _inner_smooth_on(dist, alpha, u, refine)


def _inner_smooth_on(dist, alpha, u, refine):
    m, sig = tilted_window(dist, alpha)
    hi = dist.support[1]
    s_cap = min(hi, m + 12.0 * sig)
    dz = min(1.0, 0.5 * alpha * sig, 0.5 * alpha * spread(dist)) / refine
    if isinstance(dist, Normal):
        kind, logc, beta, s_low = 0, 0.0, 0.0, -np.inf
    elif isinstance(dist, Cosine):
        kind, beta, s_low, logc = 1, 0.5 * (dist.d - 3), -1.0, dist.log_norm
    else:
        raise TypeError(f"`dist`: no quadrature for {type(dist).__name__}")
    out = np.empty((6, u.size))
    jx, jw = jacobi_end_rules(beta)
    _inner_smooth(u, alpha, kind, logc, beta, s_cap, s_low, dz, GL_X, GL_W, jx, jw, out)
    a = out[0].copy()
    top = out[5] > 0
    if top.any():
        a[top] -= sf(dist, (_Z_TOP - u[top]) / alpha)
    return Inner(u, a, out[3], out[1], out[2], out[4])


def phi_cut(dist, alpha, u, n_lo) -> int:
    """Number of leading nodes of ``u`` to keep for a weighted sample: past it ``phi^(n-1) < e^-60`` for every ``n >= n_lo``."""
    return _phi_cut(u, alpha, dist.x, dist.w, dist.above, n_lo)


# ---------------------------------------------------------------------------------------------
# kernels: smooth densities


@jit()
def _log1m_sq(s):
    """``log(1 - s^2)`` for ``|s| < 1``: ``log1p(-s^2)`` near 0 (relative accuracy when ``beta`` is huge), two ``log1p`` near the ends."""
    if abs(s) < 0.5:
        return np.log1p(-s * s)
    return np.log1p(-s) + np.log1p(s)


@jit()
def _panel(ui, alpha, zl, zr, kind, logc, beta, xs, ws, mode, acc):
    """Add one panel ``[zl, zr]`` in ``z`` to the five inner expectations ``acc``.

    ``mode`` 0: Gauss-Legendre with the density as a factor.  For the cosine
    density ``(1-s^2)^beta``, whose end points are singular or not smooth for
    small ``d``, a panel ending at ``s = 1`` (mode 1), starting at ``s = -1``
    (mode 2) or covering ``[-1, 1]`` (mode 3) uses Gauss-Jacobi nodes with
    that factor as the weight.
    """
    sl = (zl - ui) / alpha
    sr = (zr - ui) / alpha
    if mode == 1:
        sl = max(sl, -1.0)
        sr = 1.0
    elif mode == 2:
        sl = -1.0
        sr = min(sr, 1.0)
    elif mode == 3:
        sl, sr = -1.0, 1.0
    half = 0.5 * (sr - sl)
    mid = 0.5 * (sr + sl)
    scale = half if mode == 0 else half ** (beta + 1.0) * (1.0 if mode != 3 else half**beta)
    for j in range(xs.shape[0]):
        s = mid + half * xs[j]
        if kind == 0:
            lf = -0.5 * s * s - _LOG_SQRT_2PI
        elif mode == 0:
            if s <= -1.0 or s >= 1.0:
                continue
            lf = logc + beta * _log1m_sq(s)
        elif mode == 1:
            lf = logc + beta * np.log1p(s)
        elif mode == 2:
            lf = logc + beta * np.log1p(-s)
        else:
            lf = logc
        z = ui + alpha * s
        y = np.exp(z)
        e = np.exp(-y)
        w = ws[j] * scale * np.exp(lf)
        g1 = y * e
        acc[0] += w * np.expm1(-y)
        acc[1] += w * g1
        acc[2] += w * g1 * y
        acc[3] += w * g1 * (z + EULER)
        acc[4] += w * g1 * s


@jit()
def _inner_smooth(u, alpha, kind, logc, beta, s_cap, s_low, dz, gx, gw, jx, jw, out):
    """Inner expectations at every ``u`` for a normal (kind 0) or cosine (kind 1) density.

    ``out[0..4, i]`` = ``E[expm1(-y)]`` (without the part beyond ``z = 5``),
    ``E[y e^-y]``, ``E[y^2 e^-y]``, ``E[y e^-y (log y + γ)]``, ``E[s y e^-y]``;
    ``out[5, i]`` = 1 where the march started at ``z = 5`` (else 0).
    ``jx, jw[k]`` are the Gauss-Jacobi rules of the cosine end panels (mode k+1).
    """
    acc = np.zeros(5)
    for i in range(u.shape[0]):
        ui = u[i]
        z_hi = ui + alpha * s_cap
        started_top = 0.0
        # Cap the march at z = 5, except when the cosine end s = 1 lies less than _END_MARGIN beyond
        # it: a Gauss-Legendre panel ending close to that singular / non-smooth end would lose the
        # mass it carries in E[expm1(-y)] ~ -1; then march from the end itself (e^-y underflows to 0).
        if z_hi >= _Z_TOP and not (kind == 1 and s_cap >= 1.0 and z_hi < _Z_TOP + _END_MARGIN):
            z_hi = _Z_TOP
            started_top = 1.0
        right_end = kind == 1 and started_top == 0.0 and s_cap >= 1.0
        acc[:] = 0.0
        if (z_hi - ui) / alpha <= s_low:  # the whole support lies beyond z = 5
            for k in range(5):
                out[k, i] = 0.0
            out[5, i] = started_top
            continue
        lmax = -np.inf
        lprev = -np.inf
        zr = z_hi
        z_low = ui + alpha * s_low  # -inf for the normal density
        first = True
        for _ in range(1_000_000):
            # Panels of width dz down to the lower end of the support; the last two share what is
            # left (< 2 dz) equally, so a Gauss-Legendre panel never ends (nearly) at s = -1, where
            # the cosine density is singular or not smooth: its distance to the end is >= its width.
            rem = zr - z_low
            last = False
            if rem <= dz:
                zl = z_low
                last = True
            elif rem < 2.0 * dz:
                zl = zr - 0.5 * rem
            else:
                zl = zr - dz
            mode = 0
            if kind == 1:
                if first and right_end:
                    mode = 3 if last else 1
                elif last:
                    mode = 2
            if mode == 0:
                _panel(ui, alpha, zl, zr, kind, logc, beta, gx, gw, 0, acc)
            else:
                _panel(ui, alpha, zl, zr, kind, logc, beta, jx[mode - 1], jw[mode - 1], mode, acc)
            first = False
            if last:
                break
            s = (zl - ui) / alpha
            if kind == 0:
                lf = -0.5 * s * s
            else:
                lf = beta * _log1m_sq(s)
            lv = lf + min(zl, 0.0)  # log f min(1, y) bounds every integrand (log-concave in z)
            lmax = max(lmax, lv)
            if lv < lmax - _DROP and lv < lprev:
                break
            lprev = lv
            zr = zl
        for k in range(5):
            out[k, i] = acc[k]
        out[5, i] = started_top


# ---------------------------------------------------------------------------------------------
# kernels: samples


@jit()
def _inner_sample(u, alpha, v, w, out):
    """Inner expectations at every ``u`` as exact sums over the sample points ``v``.

    With weights ``w`` (summing to 1) the weighted sums; with ``w`` empty the plain means (the
    sums divided by the sample size at the end).  ``out[0..4]`` as :func:`_inner_smooth` fills them.
    """
    m = v.shape[0]
    weighted = w.shape[0] > 0
    for i in range(u.shape[0]):
        a = p1 = p2 = kk = sm = 0.0
        for j in range(m):
            wj = w[j] if weighted else 1.0
            z = u[i] + alpha * v[j]
            if z > 40.0:
                a -= wj
                continue
            y = np.exp(z)
            e = np.exp(-y)
            g1 = wj * (y * e)
            a += wj * np.expm1(-y)
            p1 += g1
            p2 += g1 * y
            kk += g1 * (z + EULER)
            sm += g1 * v[j]
        if not weighted:
            a, p1, p2, kk, sm = a / m, p1 / m, p2 / m, kk / m, sm / m
        out[0, i] = a
        out[1, i] = p1
        out[2, i] = p2
        out[3, i] = kk
        out[4, i] = sm


@jit()
def _a_weighted(ui, alpha, x, w, above):
    """``E[expm1(-y)]`` at one ``u`` over the window of :func:`_inner_weighted`."""
    j0 = np.searchsorted(x, (_Z_NEG - ui) / alpha)
    j1 = np.searchsorted(x, (_Z_ZERO - ui) / alpha, side="right")
    a = -above[j1]
    for j in range(j0, j1):
        a += w[j] * np.expm1(-np.exp(ui + alpha * x[j]))
    return a


@jit()
def _phi_cut(u, alpha, x, w, above, n_lo):
    """Number of leading ``u`` nodes to keep: past it ``phi^(n-1) < e^-_PHI_TAIL`` for every ``n >= n_lo``.

    ``phi(e^u)`` decreases in ``u``, so a bisection on the nodes finds the
    first node where ``(n_lo - 1) log phi < -_PHI_TAIL``; it and the nodes
    before it are kept (each node dropped carries a weight below ``e^-60``).
    """
    k = u.shape[0]

    def small(i):
        a = min(max(_a_weighted(u[i], alpha, x, w, above), -1.0), 0.0)
        lp = np.log1p(a) if a > -0.5 else np.log(max(1.0 + a, 1e-300))
        return (n_lo - 1.0) * lp < -_PHI_TAIL

    if not small(k - 1):
        return k
    lo, hi = 0, k - 1  # small(hi) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if small(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi + 1


@jit(parallel=True)
def _inner_weighted(u, alpha, x, w, above, out):
    """``out[0]`` = ``E[expm1(-y)]``, ``out[1]`` = ``E[y e^-y (log y + γ)]`` over the sorted weighted points.

    The same sums as :func:`_inner_sample` with weights, over the window of
    points with ``_Z_NEG <= z <= _Z_ZERO`` only (found by bisection in the
    sorted ``x``): the points above it add exactly ``-w`` to ``out[0]`` and 0
    to ``out[1]`` (``above`` holds their total weight), those below it less
    than 1.3e-18 in all.  Parallel over ``u``; each ``u`` is summed in a fixed
    order, so the result does not depend on the number of threads.
    """
    c = np.exp(alpha * x)
    for i in numba.prange(u.shape[0]):
        ui = u[i]
        j0 = np.searchsorted(x, (_Z_NEG - ui) / alpha)
        j1 = np.searchsorted(x, (_Z_ZERO - ui) / alpha, side="right")
        a = -above[j1]
        kk = 0.0
        # y = e^u e^(alpha x): one exp fewer per point, as accurate as exp(u + alpha x) (whose argument
        # is rounded); while |u| <= 600 both factors of a point in the window are normal numbers
        direct = abs(ui) > 600.0
        yu = np.exp(ui)
        for j in range(j0, j1):
            z = ui + alpha * x[j]
            y = np.exp(z) if direct else yu * c[j]
            if y < 1e-3:
                # Taylor series of expm1(-y) to y^6: the first term left out is below y^7/5040 < 2e-22 y
                em1 = -y * (1.0 - y * (0.5 - y * (1.0 / 6.0 - y * (1.0 / 24.0 - y * (1.0 / 120.0 - y / 720.0)))))
                e = 1.0 + em1
            else:
                e = np.exp(-y)
                # for y >= 1/2, e - 1 is within 1.1e-16 of expm1(-y) (one rounding at most)
                em1 = np.expm1(-y) if y < 0.5 else e - 1.0
            a += w[j] * em1
            kk += w[j] * y * e * (z + EULER)
        out[0, i] = a
        out[1, i] = kk

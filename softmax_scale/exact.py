"""Exact finite-``n`` softmax statistics by Laplace-transform quadrature.

With ``X = exp(alpha s)``, ``phi(t) = E[exp(-t X)]`` and ``u = log t``, ``y = t X
= exp(u + alpha s)``, independence of the ``n`` scores gives (DESIGN.md)::

    E[sum p^2]      = n      ∫ E[y^2 e^-y]            phi^(n-1) du
    1 - E[sum p^2]  = n(n-1) ∫ E[y e^-y]^2            phi^(n-2) du
    E[H]            = -n     ∫ E[y e^-y (log y + γ)]  phi^(n-1) du
    E[sum p s]      = n      ∫ E[s y e^-y]            phi^(n-1) du
    E[log Z]        = -γ + ∫ (1{u<0} - phi^n) du

(``γ`` is Euler's constant; the entropy formula comes from
``log Z / Z = -∫ (log t + γ) exp(-tZ) dt``, so it needs no difference of two
large numbers, and ``1 - sum p^2 = sum_{i≠j} p_i p_j`` is computed directly, so
``E[G] = alpha (1 - E[sum p^2])`` keeps its relative accuracy at large scales.)
``phi^(n-1)`` is formed as ``exp((n-1) log1p(E[expm1(-y)]))``.

The inner expectations over ``s`` are integrals in ``z = u + alpha s``: the
factor ``exp(-y)`` is a step of width 1 in ``z`` (width ``1/alpha`` in ``s``),
so fixed Gauss-Hermite/Jacobi nodes in ``s`` cannot resolve it for large
``alpha``.  Instead each ``u`` gets its own composite Gauss-Legendre rule in
``z`` (panels of width ``<= 1`` in ``z`` and ``<= sigma/2`` in ``s``), marching
from ``z = 5`` (beyond it ``exp(-y) < e^-148``) towards smaller ``z`` until the
log-concave integrand has dropped by ``e^-46``.  The outer integral in ``u`` is
a trapezoid rule (spectrally accurate: the integrands are analytic and vanish
at both ends) with a step ``<= 1/4`` or a quarter of ``alpha`` times the width
of the maximum of ``n`` scores, whichever is larger.  Hence the cost is flat
in ``n`` and in ``alpha``.  Cosine densities with small ``d`` are singular
(``d = 2``) or not smooth at ``s = ±1``: their end panels use Gauss-Jacobi
nodes, and for ``d < 8`` the ``u`` step stays 1/4 (cost then grows like
``alpha``; up to about ``alpha = 1e4``).  An empirical sample is handled
exactly: the inner expectation is the sample mean.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import special

from ._jit import jit
from ._progress import progress_bar
from ._validation import N_MAX, check_alpha_array, check_int, check_positive_float
from .distributions import Cosine, Empirical, Normal, get_distribution
from .stats_result import SoftmaxStats, _as_output

__all__ = ["MeanFieldError", "exact_stats", "exact_sum_p_s", "gap_density_at_zero", "mean_field_error"]

_EULER = float(np.euler_gamma)
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
_Z_TOP = 5.0  # exp(-e^5) = e^-148: nothing to the right of it counts
_END_MARGIN = 2.0  # march from s = 1 rather than z = 5 if it lies within this of z = 5 (>= 2 panel widths)
_DROP = 46.0  # stop the inner march once the integrand is e^-46 below its peak
_TAIL = 50.0  # log-probability neglected at the ends of the u range
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)
_MAX_WORK = 4 * 10**8
_SMOOTH_EDGE_D = 8  # cosine with d below this: u step 0.25 everywhere (cost grows like alpha)
_H_FINE = 0.5  # u step around the images u = ∓alpha of the cosine ends (d >= 8)
_MAX_EDGE_POINTS = 200_000  # empirical: largest (u points) x (sample size)


# ---------------------------------------------------------------------------------------------
# kernels


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
            lf = logc + beta * (np.log1p(-s) + np.log1p(s))
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
        acc[3] += w * g1 * (z + _EULER)
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
                lf = beta * (np.log1p(-s) + np.log1p(s))
            lv = lf + min(zl, 0.0)  # log f min(1, y) bounds every integrand (log-concave in z)
            lmax = max(lmax, lv)
            if lv < lmax - _DROP and lv < lprev:
                break
            lprev = lv
            zr = zl
        for k in range(5):
            out[k, i] = acc[k]
        out[5, i] = started_top


@jit()
def _inner_sample(u, alpha, v, out):
    """Inner expectations at every ``u`` as exact means over the sample ``v``."""
    m = v.shape[0]
    for i in range(u.shape[0]):
        a = p1 = p2 = kk = sm = 0.0
        for j in range(m):
            z = u[i] + alpha * v[j]
            if z > 40.0:
                a -= 1.0
                continue
            y = np.exp(z)
            e = np.exp(-y)
            g1 = y * e
            a += np.expm1(-y)
            p1 += g1
            p2 += g1 * y
            kk += g1 * (z + _EULER)
            sm += g1 * v[j]
        out[0, i] = a / m
        out[1, i] = p1 / m
        out[2, i] = p2 / m
        out[3, i] = kk / m
        out[4, i] = sm / m
        out[5, i] = 0.0


# ---------------------------------------------------------------------------------------------
# distribution helpers (tails, widths)


def _isf(dist, q):
    """Upper quantile: the ``s`` with ``P(S > s) = q`` (``q`` may be tiny)."""
    q = float(q)
    if isinstance(dist, Normal):
        return float(-special.ndtri(q))
    if isinstance(dist, Cosine):
        b = 0.5 * (dist.d - 1)
        return float(1.0 - 2.0 * special.betaincinv(b, b, q))
    raise TypeError(type(dist).__name__)


def _ppf(dist, p):
    """Lower quantile: the ``s`` with ``P(S <= s) = p``."""
    return -_isf(dist, p)  # both smooth distributions are symmetric


def _sf(dist, s):
    """Upper tail ``P(S > s)``, accurate where it is tiny."""
    s = np.asarray(s, dtype=np.float64)
    if isinstance(dist, Normal):
        return special.ndtr(-s)
    b = 0.5 * (dist.d - 1)
    return special.betainc(b, b, np.clip(0.5 * (1.0 - s), 0.0, 1.0))


def _scale(dist) -> float:
    return 1.0 if isinstance(dist, Normal) else 1.0 / np.sqrt(dist.d)


def _tilted_window(dist, alpha):
    """Mode and width of the density tilted by ``exp(alpha s)``."""
    if isinstance(dist, Normal):
        return alpha, 1.0
    beta = 0.5 * (dist.d - 3)
    if beta <= 0:
        return 0.0, 1.0
    m = alpha / (beta + np.sqrt(beta * beta + alpha * alpha))
    sig = (1.0 - m * m) / np.sqrt(2.0 * beta * (1.0 + m * m))
    return m, min(sig, 1.0)


def _max_width(dist, n) -> float:
    """Width of the largest of ``n`` scores, ``P(S > b)/f(b)`` at ``P(S > b) = 1/n``, capped by the spread."""
    b = _isf(dist, 1.0 / n)
    f = float(dist.pdf(b))
    w = (1.0 / n) / f if f > 0 else 0.0
    return float(min(w, _scale(dist))) if w > 0 else _scale(dist)


# ---------------------------------------------------------------------------------------------
# one scale, one n


@functools.lru_cache(maxsize=64)
def _jacobi_end_rules(beta):
    """Gauss-Jacobi rules on [-1, 1] for the weights (1-x)^beta, (1+x)^beta and (1-x^2)^beta."""
    m = _GL_X.size + 4
    rules = [special.roots_jacobi(m, a, b) for a, b in ((beta, 0.0), (0.0, beta), (beta, beta))]
    return np.array([r[0] for r in rules]), np.array([r[1] for r in rules])


def _u_grid(dist, alpha, n, du):
    """Uniform grid in ``u = log t`` covering everything that counts, ``u_lo <= -1``."""
    logn = np.log(n)
    if isinstance(dist, Empirical):
        s_top, s_bot = dist.support[1], dist.support[0]
    else:
        s_top = min(dist.support[1], _isf(dist, np.exp(-_TAIL) / n))
        q = -np.expm1(-_TAIL / (n - 1.0))  # P(S > s_bot): F(s_bot)^(n-1) = e^-50
        s_bot = _isf(dist, q) if q < 0.5 else _ppf(dist, np.exp(-_TAIL / (n - 1.0)))
        s_bot = max(dist.support[0], s_bot)
    log_m = float(dist.log_mgf(alpha))
    u_lo = min(-1.0, max(-alpha * s_top, -log_m) - logn - _TAIL)
    u_hi = np.log(60.0) - alpha * s_bot
    u_hi = max(u_hi, u_lo + 1.0)
    k = int(np.ceil((u_hi - u_lo) / du))
    return u_lo + du * np.arange(k + 1)


def _log_cosh(x):
    return np.logaddexp(x, -x) - np.log(2.0)


def _graded_grid(u_lo, u_hi, h_coarse, h_fine, ends):
    """Trapezoid nodes and weights in ``u``, step ``h_fine`` around the images of the support's ends.

    An end ``s_e`` of the support (where the cosine density is singular or not
    smooth) shows in the ``u``-integrands as a feature of width ~1 over
    ``u + alpha s_e`` in ``[-45, 5]`` (the kernels' reach); ``ends`` lists
    ``-alpha s_e``.  The nodes are ``u = g(v)`` at unit steps in ``v``, with
    ``1/g' = 1/h_coarse + sum_j (1/h_j - 1/h_(j+1)) B_j(u)``: nested smooth
    (tanh) windows ``B_j`` around each end, ``h_j = 2^j h_fine``, each
    transition spread over ``~6`` steps so that ``g`` stays analytic in a strip
    ``|Im v| >~ 4.7`` and the trapezoid rule in ``v`` keeps its spectral accuracy
    (to ~1e-13).  The weights are ``g'``; ``v(u)`` is in closed form (log cosh).
    """
    terms = []  # (coefficient, centre of the tanh, width): 1/g' = 1/h_coarse + sum c/2 (tanh((u-lo)/t) - tanh((u-hi)/t))
    for c in ends:
        lo, hi = c - 45.0, c + 5.0
        h, margin = h_fine, 0.0
        while h < h_coarse:
            h_next = min(2.0 * h, h_coarse)
            tau = 6.0 * h
            margin += 2.0 * tau
            terms.append((1.0 / h - 1.0 / h_next, lo - margin, hi + margin, tau))
            margin += 2.0 * tau
            h = h_next
    terms = [t for t in terms if t[2] + 3 * t[3] > u_lo and t[1] - 3 * t[3] < u_hi]
    if not terms:
        k = int(np.ceil((u_hi - u_lo) / h_coarse))
        return u_lo + h_coarse * np.arange(k + 1), np.full(k + 1, h_coarse)
    # start where every window is flat (tanh' < 1e-13): E[log Z] takes phi^n ~ 1 at the first node
    # with the plain trapezoid end weight, which needs g'' = 0 there
    u_lo = min(u_lo, min(t[1] - 16.0 * t[3] for t in terms))

    r, lo, hi, tau = (np.array(x)[:, None] for x in zip(*terms))

    def v_of(u):
        u = np.atleast_1d(u)[None, :]
        return u[0] / h_coarse + np.sum(0.5 * r * tau * (_log_cosh((u - lo) / tau) - _log_cosh((u - hi) / tau)), axis=0)

    def dv(u):
        u = np.atleast_1d(u)[None, :]
        return 1.0 / h_coarse + np.sum(0.5 * r * (np.tanh((u - lo) / tau) - np.tanh((u - hi) / tau)), axis=0)

    v0 = v_of(u_lo)[0]
    k = int(np.ceil(v_of(u_hi)[0] - v0))
    vk = v0 + np.arange(k + 1.0)
    tab = np.linspace(u_lo, u_hi + h_coarse, 4 * (k + 1))  # start for Newton
    u = np.interp(vk, v_of(tab), tab)
    # Newton on the increasing v(u), until the step reaches the rounding level of v (~1e-16 |v|, i.e.
    # |v| h 1e-16 in u) or stops shrinking (quadratic convergence: a handful of steps, not a fixed 50)
    tol = 4e-16 * max(1.0, float(np.max(np.abs(vk)))) * h_coarse
    last = np.inf
    for _ in range(50):
        step = (v_of(u) - vk) / dv(u)
        u = u - step
        big = float(np.max(np.abs(step)))
        if big <= tol or big >= 0.5 * last:
            break
        last = big
    u[0] = u_lo
    return u, 1.0 / dv(u)


def _inner_on_grid(dist, alpha, u, refine=1.0):
    """Inner expectations over a smooth (normal or cosine) density at every ``u`` of a grid.

    Returns ``(inner, a)``: ``inner[0..5]`` as filled by :func:`_inner_smooth`
    and ``a = E[expm1(-t X)]`` including the far tail, not yet clipped.
    Shared by :func:`_one` and the signal-plus-noise evaluator of
    :mod:`softmax_scale.entropy`.
    """
    m, sig = _tilted_window(dist, alpha)
    hi = dist.support[1]
    s_cap = min(hi, m + 12.0 * sig)
    dz = min(1.0, 0.5 * alpha * sig, 0.5 * alpha * _scale(dist)) / refine
    if isinstance(dist, Normal):
        kind, logc, beta, s_low = 0, 0.0, 0.0, -np.inf
    else:
        b = 0.5 * (dist.d - 1)
        kind, beta, s_low = 1, b - 1.0, -1.0
        logc = special.gammaln(2 * b) - 2 * special.gammaln(b) - (2 * b - 1) * np.log(2.0)
    inner = np.empty((6, u.size))
    jx, jw = _jacobi_end_rules(beta)
    _inner_smooth(u, alpha, kind, logc, beta, s_cap, s_low, dz, _GL_X, _GL_W, jx, jw, inner)
    a = inner[0].copy()
    top = inner[5] > 0
    if top.any():
        a[top] -= _sf(dist, (_Z_TOP - u[top]) / alpha)
    return inner, a


def _one(dist, alpha, n, refine):
    """All statistics at one ``alpha > 0`` and one ``n`` at resolution ``refine``."""
    edge = False
    if isinstance(dist, Empirical):
        du = 0.3 / refine
        u = _u_grid(dist, alpha, n, du)
        wq = np.full(u.size, du)
        if u.size * dist.values.size > _MAX_WORK:
            raise ValueError(
                f"`alpha` * (spread of the empirical sample) is too large for the exact method "
                f"({u.size} quadrature points x {dist.values.size} scores); use method='mc'"
            )
        inner = np.empty((6, u.size))
        _inner_sample(u, alpha, dist.values, inner)
        a = inner[0]
    else:
        stretch = max(1.0, alpha * _max_width(dist, n))
        du = 0.25 / refine * stretch
        u = _u_grid(dist, alpha, n, du)
        wq = np.full(u.size, du)
        edge = isinstance(dist, Cosine) and dist.d < _SMOOTH_EDGE_D and stretch > 1.0
        if isinstance(dist, Cosine) and not edge and stretch > 1.0:
            # the ends s = ±1 of the support make features of width ~1 in u near u = ∓alpha
            u, wq = _graded_grid(u[0], u[-1], du, _H_FINE / refine, (-alpha, alpha))
        if edge:  # d < 8: the density is not smooth at s = ±1; resolve its ends at the kernel's scale
            du = 0.25 / refine
            u = _u_grid(dist, alpha, n, du)
            wq = np.full(u.size, du)
            if u.size > _MAX_EDGE_POINTS:
                raise ValueError(
                    f"`alpha` = {alpha:g} is too large for the exact method with cosine d = {dist.d} < "
                    f"{_SMOOTH_EDGE_D} (cost grows like alpha; about alpha <= 1e4 is supported); use method='mc'"
                )
        inner, a = _inner_on_grid(dist, alpha, u, refine)
    a = np.clip(a, -1.0, 0.0)
    with np.errstate(divide="ignore"):
        log_phi = np.where(a > -0.5, np.log1p(np.maximum(a, -0.5)), np.log(np.maximum(1.0 + a, 1e-300)))
    w1 = np.exp((n - 1.0) * log_phi)
    w2 = np.exp((n - 2.0) * log_phi)
    wn = np.exp(n * log_phi)
    p1, p2, kk, sm = inner[1], inner[2], inner[3], inner[4]
    sum_p2 = n * np.sum(p2 * w1 * wq)
    comp = n * (n - 1.0) * np.sum(p1 * p1 * w2 * wq)
    norm = n * np.sum(p1 * w1 * wq)
    ent = -n * np.sum(kk * w1 * wq)
    sps = n * np.sum(sm * w1 * wq)
    log_z = -_EULER - u[0] - (np.sum(wn * wq) - 0.5 * (wn[0] * wq[0] + wn[-1] * wq[-1]))
    if sum_p2 > 0.5:
        sum_p2 = 1.0 - comp
    else:
        comp = 1.0 - sum_p2
    return np.array([sum_p2, ent, alpha * comp, log_z, sps, norm - 1.0, comp])


#: Below this ``alpha * sd(s)`` the statistics come from their second-order expansion in ``alpha``
#: (exact to ~1e-18); the quadrature's grid in ``u = log t`` would grow like ``log(1/alpha)`` and lose
#: the ``alpha^2`` deviations from ``1/n`` and ``log n`` in rounding.
_SERIES_BELOW = 1e-6


def _stats_at(dist, alphas, n, refine, error_estimate):
    out = np.empty((alphas.size, 7))
    err = np.zeros(alphas.size)
    logn = np.log(n)
    if isinstance(dist, Empirical):
        mu, var = float(np.mean(dist.values)), float(np.var(dist.values))
    else:
        mu, var = 0.0, _scale(dist) ** 2
    for k, alpha in enumerate(alphas):
        if alpha * np.sqrt(var) < _SERIES_BELOW:
            # second order in alpha: p_i = (1 + alpha (s_i - mean s) + ...) / n; the alpha^3 terms are below 1e-18
            v = var * (n - 1.0) / n
            sum_p2 = 1.0 / n + alpha * alpha * v / n
            comp = (1.0 - 1.0 / n) - alpha * alpha * v / n
            out[k] = [sum_p2, logn - 0.5 * alpha * alpha * v, alpha * comp, logn + alpha * mu + 0.5 * alpha * alpha * v,
                      mu + alpha * v, 0.0, comp]
            continue
        fine = _one(dist, alpha, n, refine)
        out[k] = fine
        if error_estimate:
            coarse = _one(dist, alpha, n, 0.5 * refine)
            err[k] = max(np.max(np.abs(fine[:4] - coarse[:4])), abs(fine[5]))
    return out, err


def exact_stats(alpha, n, dist="normal", *, d=None, refine=1.0, error_estimate=True) -> SoftmaxStats:
    """Exact ``E[sum p^2]``, ``E[H]``, ``E[G]`` and ``E[log Z]`` by deterministic quadrature.

    The cost does not depend on ``n`` (2 to 1e15) nor on ``alpha`` (0 to
    1e6 and beyond) for normal and cosine scores; for an empirical sample it
    grows with ``alpha`` times the spread of the sample.

    Parameters
    ----------
    alpha : float or array_like
        Scale(s) ``>= 0``.
    n : int
        Number of i.i.d. scores, ``>= 2``.
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        Score distribution; for an array (empirical sample) the inner
        expectation is the sample mean, exact for resampling.
    d : int, optional
        Dimension for ``dist="cosine"``.
    refine : float
        Resolution multiplier (2 halves every quadrature step).
    error_estimate : bool
        Also evaluate at half the resolution and report the largest change
        (and the error of ``E[sum p] = 1``) as ``quad_error``.

    Returns
    -------
    SoftmaxStats
        With ``trials = 0``, all standard errors 0 and ``method = "exact"``.

    Examples
    --------
    >>> import softmax_scale as ss
    >>> r = ss.softmax_stats(0.0, 100, method="exact")
    >>> r.sum_p2, round(r.entropy, 6)
    (0.01, 4.60517)
    """
    alphas, scalar = check_alpha_array(alpha)
    n = check_int(n, "n", minimum=2, maximum=N_MAX)
    refine = check_positive_float(refine, "refine")
    dist_obj = get_distribution(dist, d)
    out, err = _stats_at(dist_obj, alphas, float(n), refine, bool(error_estimate))
    zeros = _as_output(np.zeros(alphas.size), scalar)
    return SoftmaxStats(
        alpha=_as_output(alphas, scalar),
        n=n,
        dist=dist_obj.label,
        method="exact",
        trials=0,
        sum_p2=_as_output(out[:, 0], scalar),
        sum_p2_se=zeros,
        entropy=_as_output(out[:, 1], scalar),
        entropy_se=zeros,
        grad=_as_output(out[:, 2], scalar),
        grad_se=zeros,
        log_z=_as_output(out[:, 3], scalar),
        log_z_se=zeros,
        quad_error=float(err.max()),
    )


def exact_sum_p_s(alpha, n, dist="normal", *, d=None, refine=1.0):
    """``E[sum_i p_i s_i]`` (so that ``E[H] = E[log Z] - alpha E[sum p s]``), vectorised over ``alpha``."""
    alphas, scalar = check_alpha_array(alpha)
    n = check_int(n, "n", minimum=2, maximum=N_MAX)
    out, _ = _stats_at(get_distribution(dist, d), alphas, float(n), float(refine), False)
    return _as_output(out[:, 4], scalar)


def gap_density_at_zero(n, dist="normal", *, d=None) -> float:
    """``f_gap(0) = n (n-1) ∫ f(x)^2 F(x)^(n-2) dx``: density at 0 of the gap between the two largest scores.

    The supremum of ``E[G]`` over ``alpha`` (approached as ``alpha -> inf``).
    Computed by ``scipy.integrate.quad`` in log space around the location of
    the maximum.  Infinite for cosine scores with ``d = 2``, whose density
    ``1/(pi sqrt(1-s^2))`` makes ``f^2`` non-integrable at ``s = 1``.
    """
    from scipy import integrate

    n = check_int(n, "n", minimum=2, maximum=N_MAX)
    dist_obj = get_distribution(dist, d)
    if isinstance(dist_obj, Empirical):
        raise TypeError("`dist`: the gap density is not defined for an empirical (discrete) sample")
    if isinstance(dist_obj, Cosine) and dist_obj.d == 2:
        return float("inf")  # f^2 ~ 1/(2(1-s)) is not integrable at s = 1, where F^(n-2) -> 1
    b = _isf(dist_obj, 1.0 / n)
    w = _max_width(dist_obj, n)
    lo, hi = dist_obj.support

    def integrand(x):
        f = float(dist_obj.pdf(x))
        if f <= 0.0:
            return 0.0
        sf = float(_sf(dist_obj, x))
        log_cdf = np.log1p(-sf) if sf < 0.5 else np.log(float(dist_obj.cdf(x)))
        return np.exp(2.0 * np.log(f) + np.log(n) + np.log(n - 1.0) + (n - 2.0) * log_cdf)

    a0, b0 = max(lo, b - 40.0 * w - 3 * _scale(dist_obj)), min(hi, b + 40.0 * w)
    pts = [p for p in (b - 5 * w, b - w, b, b + w, b + 5 * w) if a0 < p < b0]
    val, _ = integrate.quad(integrand, a0, b0, points=pts or None, limit=400, epsabs=0.0, epsrel=1e-11)
    return float(val)


# ---------------------------------------------------------------------------------------------
# the "expected" objective: E[G] and its supremum


def _expected_evaluator(alpha, n, dist, **kwargs):
    """``E[G]`` for broadcast 1-D ``alpha`` and ``n`` (registered as objective ``"expected"``)."""
    alpha, n = np.broadcast_arrays(alpha, n)
    out = np.empty(alpha.shape)
    for nv in np.unique(n):
        sel = n == nv
        out[sel] = exact_stats(alpha[sel], int(nv), dist, error_estimate=False, **kwargs).grad
    return out


def _expected_optimum(n, dist, **kwargs):
    """No finite maximiser: ``E[G]`` rises with ``alpha`` towards ``f_gap(0)``."""
    if kwargs:
        raise TypeError(f"objective='expected' takes no options, got {sorted(kwargs)}")
    if isinstance(dist, Empirical):
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


def _register():
    from . import objectives, optimize

    objectives._EVALUATORS["expected"] = _expected_evaluator
    optimize._OPTIMISERS["expected"] = _expected_optimum


_register()


# ---------------------------------------------------------------------------------------------
# where mean-field holds


@dataclass(frozen=True)
class MeanFieldError:
    """The mean-field ``sum p^2`` against the exact ``E[sum p^2]`` over a grid.

    Attributes
    ----------
    alphas : ndarray
        Scales, shape ``(A,)``.
    ns : ndarray
        Numbers of scores, shape ``(N,)``.
    dist : str
        Score distribution label.
    exact : ndarray
        ``E[sum p^2]``, shape ``(N, A)``.
    mean_field : ndarray
        ``min(1, M(2a) / (n M(a)^2))``, shape ``(N, A)``.
    rel_error : ndarray
        ``mean_field / exact - 1``, shape ``(N, A)``.
    """

    alphas: np.ndarray
    ns: np.ndarray
    dist: str
    exact: np.ndarray
    mean_field: np.ndarray
    rel_error: np.ndarray


def mean_field_error(alphas, ns, dist="normal", *, d=None, progress=None) -> MeanFieldError:
    """Relative error of the mean-field ``sum p^2`` against the exact one over a grid of ``(alpha, n)``.

    Parameters
    ----------
    alphas : array_like
        Scales ``>= 0`` (1-D).
    ns : array_like
        Numbers of scores ``>= 2`` (1-D).
    dist, d
        Score distribution (normal or cosine).
    progress : bool, optional
        Progress bar over ``ns`` (default: for more than 20 values).

    Returns
    -------
    MeanFieldError
    """
    from ._validation import check_n_array
    from .objectives import mean_field_sum_p2

    a, _ = check_alpha_array(alphas, "alphas")
    nn, _ = check_n_array(ns, "ns")
    dist_obj = get_distribution(dist, d)
    ex = np.empty((nn.size, a.size))
    for i, nv in enumerate(progress_bar(nn, desc="exact", disable=not (progress or (progress is None and nn.size > 20)), leave=False)):
        ex[i] = exact_stats(a, int(nv), dist_obj, error_estimate=False).sum_p2
    mf = mean_field_sum_p2(a[None, :], nn[:, None], dist_obj)
    return MeanFieldError(a, nn, dist_obj.label, ex, mf, mf / ex - 1.0)

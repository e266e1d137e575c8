"""The outer grid in ``u = log t``: where the integrands live, the step, and the nodes.

One rule for every caller.  For ``n`` i.i.d. scores at scale ``alpha`` the integrands of
:mod:`softmax_scale.exact` live on ``[u_lo, u_hi]`` (:func:`u_bounds`): below ``u_lo`` every
``y = e^(u + alpha s)`` is ``e^-50`` below its bulk, above ``u_hi`` the weight ``phi^(n-1)`` is
below ``e^-50``.  A set of ``n`` is served by one grid from the lowest start (the largest ``n``)
to the highest end (the smallest ``n``), with the finest step any of them needs
(:func:`u_step`); :func:`quadrature_grid` returns its nodes and trapezoid weights, graded near the
images of the cosine support's ends where the step is coarse.

The step is ``<= 1/4`` or a quarter of ``alpha`` times the width of the maximum of ``n`` scores,
whichever is larger (``0.3`` for a sample); hence the cost is flat in ``n`` and in ``alpha``.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import special

from ..distributions import Cosine, Normal, is_sample

__all__ = [
    "MAX_U_POINTS",
    "TAIL",
    "TooMuchWork",
    "isf",
    "jacobi_end_rules",
    "max_width",
    "quadrature_grid",
    "sf",
    "spread",
    "tilted_window",
    "u_bounds",
    "u_grid",
    "u_step",
]

#: Log-probability neglected at the ends of the ``u`` range.
TAIL = 50.0
#: Largest (u points) x (sample size) of an exact evaluation over a sample.
MAX_WORK = 4 * 10**8
#: Largest number of ``u`` nodes any grid may have (80 MB of float64), checked before the nodes are
#: built: a scale of 1e9 on a sample's spread asks for 1e10 nodes, which must be a clear
#: :class:`TooMuchWork`, not a MemoryError.  A sample of 40 points or more meets ``MAX_WORK`` first.
MAX_U_POINTS = 10**7
#: Cosine with ``d`` below this: ``u`` step 0.25 everywhere (cost grows like ``alpha``).
SMOOTH_EDGE_D = 8
#: ``u`` step around the images ``u = ∓alpha`` of the cosine ends (``d >= SMOOTH_EDGE_D``).
H_FINE = 0.5
#: Largest number of ``u`` points for a cosine with ``d < SMOOTH_EDGE_D``.
MAX_EDGE_POINTS = 200_000
#: Gauss-Legendre rule of the inner panels.
GL_X, GL_W = np.polynomial.legendre.leggauss(8)


class TooMuchWork(ValueError):
    """The quadrature would need more than its budget of points; the caller says what to do instead."""


# ---------------------------------------------------------------------------------------------
# tails and widths of the smooth distributions


def isf(dist, q):
    """Upper quantile: the ``s`` with ``P(S > s) = q`` (``q`` may be tiny)."""
    q = float(q)
    if isinstance(dist, Normal):
        return float(-special.ndtri(q))
    if isinstance(dist, Cosine):
        return float(dist.isf(q))
    raise TypeError(type(dist).__name__)


def _ppf(dist, p):
    """Lower quantile: the ``s`` with ``P(S <= s) = p``."""
    return -isf(dist, p)  # both smooth distributions are symmetric


def sf(dist, s):
    """Upper tail ``P(S > s)``, accurate where it is tiny."""
    s = np.asarray(s, dtype=np.float64)
    if isinstance(dist, Normal):
        return special.ndtr(-s)
    return dist.sf(s)


def spread(dist) -> float:
    """Standard deviation of a smooth distribution: 1 (normal), ``1/sqrt(d)`` (cosine)."""
    return 1.0 if isinstance(dist, Normal) else 1.0 / np.sqrt(dist.d)


def tilted_window(dist, alpha):
    """Mode and width of the density tilted by ``exp(alpha s)``."""
    if isinstance(dist, Normal):
        return alpha, 1.0
    beta = 0.5 * (dist.d - 3)
    if beta <= 0:
        return 0.0, 1.0
    m = alpha / (beta + np.sqrt(beta * beta + alpha * alpha))
    sig = (1.0 - m * m) / np.sqrt(2.0 * beta * (1.0 + m * m))
    return m, min(sig, 1.0)


def max_width(dist, n) -> float:
    """Width of the largest of ``n`` scores, ``P(S > b)/f(b)`` at ``P(S > b) = 1/n``, capped by the spread."""
    b = isf(dist, 1.0 / n)
    f = float(dist.pdf(b))
    w = (1.0 / n) / f if f > 0 else 0.0
    return float(min(w, spread(dist))) if w > 0 else spread(dist)


# ---------------------------------------------------------------------------------------------
# the u range, the step and the nodes


def u_bounds(dist, alpha, n):
    """``(u_lo, u_hi)``: the range in ``u = log t`` that counts for ``n`` scores at scale ``alpha``, ``u_lo <= -1``."""
    logn = np.log(n)
    if is_sample(dist):
        s_top, s_bot = dist.support[1], dist.support[0]
    else:
        s_top = min(dist.support[1], isf(dist, np.exp(-TAIL) / n))
        q = -np.expm1(-TAIL / (n - 1.0))  # P(S > s_bot): F(s_bot)^(n-1) = e^-50
        s_bot = isf(dist, q) if q < 0.5 else _ppf(dist, np.exp(-TAIL / (n - 1.0)))
        s_bot = max(dist.support[0], s_bot)
    log_m = float(dist.log_mgf(alpha))
    u_lo = min(-1.0, max(-alpha * s_top, -log_m) - logn - TAIL)
    u_hi = np.log(60.0) - alpha * s_bot
    return u_lo, max(u_hi, u_lo + 1.0)


def _extent(ns):
    ns = np.atleast_1d(np.asarray(ns, dtype=np.float64))
    return float(ns.min()), float(ns.max())


def u_grid(dist, alpha, ns, du):
    """Uniform nodes of step ``du`` covering :func:`u_bounds` of every ``n`` in ``ns`` (a number or a set)."""
    n_lo, n_hi = _extent(ns)
    u_lo, u_hi = u_bounds(dist, alpha, n_hi)  # the largest n reaches furthest down
    if n_lo != n_hi:
        u_hi = u_bounds(dist, alpha, n_lo)[1]  # the smallest n furthest up
    k = np.ceil((u_hi - u_lo) / du)
    if not k < MAX_U_POINTS:  # also NaN or inf
        raise TooMuchWork(f"({k + 1:.3g} quadrature points, more than {MAX_U_POINTS:.0e})")
    return u_lo + du * np.arange(int(k) + 1)


def _stretch(dist, alpha, ns):
    """``max(1, alpha w)``, ``w`` the width of the maximum of the largest or smallest ``n`` scores, whichever is narrower."""
    n_lo, n_hi = _extent(ns)
    width = max_width(dist, n_hi) if n_lo == n_hi else min(max_width(dist, n) for n in (n_lo, n_hi))
    return max(1.0, alpha * width)


def u_step(dist, alpha, ns, refine=1.0):
    """The ``u`` step for a set of ``n``: 0.3 for a sample; else 0.25 stretched by ``alpha`` times the narrowest maximum."""
    if is_sample(dist):
        return 0.3 / refine
    return 0.25 / refine * _stretch(dist, alpha, ns)


def _log_cosh(x):
    return np.logaddexp(x, -x) - np.log(2.0)


def _shifted(u, du, offset):
    """Uniform nodes ``u`` moved down by ``offset`` steps, one node added on top so that they cover the same range."""
    if offset == 0.0:
        return u
    return np.append(u - offset * du, u[-1] + (1.0 - offset) * du)


def graded_grid(u_lo, u_hi, h_coarse, h_fine, ends, offset=0.0):
    """Trapezoid nodes and weights in ``u``, step ``h_fine`` around the images of the support's ends.

    An end ``s_e`` of the support (where the cosine density is singular or not
    smooth) shows in the ``u``-integrands as a feature of width ~1 over
    ``u + alpha s_e`` in ``[-45, 5]`` (the kernels' reach); ``ends`` lists
    ``-alpha s_e``.  The nodes are ``u = g(v)`` at unit steps in ``v``, with
    ``1/g' = 1/h_coarse + sum_j (1/h_j - 1/h_(j+1)) B_j(u)``: nested smooth
    (tanh) windows ``B_j`` around each end, ``h_j = 2^j h_fine``, each
    transition spread over ``~6`` steps so that ``g`` stays analytic in a strip
    ``|Im v| >~ 4.7`` and the trapezoid rule in ``v`` keeps its spectral accuracy
    (to ~1e-13).  The weights are ``g'``; ``v(u)`` is in closed form (log cosh).  ``offset``
    moves the nodes down by that fraction of a unit step in ``v`` (one node added on top).
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
        u = _shifted(u_lo + h_coarse * np.arange(k + 1), h_coarse, offset)
        return u, np.full(u.size, h_coarse)
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
    if offset:
        vk = np.append(vk - offset, vk[-1] + 1.0 - offset)
        tab = np.linspace(u_lo - h_coarse, u_hi + 2.0 * h_coarse, 4 * (k + 2))
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
    if not offset:
        u[0] = u_lo
    return u, 1.0 / dv(u)


def quadrature_grid(dist, alpha, ns, refine=1.0, offset=0.0):
    """Nodes ``u`` and trapezoid weights ``wq`` of the outer integral for every ``n`` in ``ns``.

    ``offset`` (a fraction of a step, 0 by default) moves every node down by that much at the same
    step: the offset grid of the error estimate (:func:`~.evaluate.stats_at`).

    Uniform with the step of :func:`u_step`, except for cosine scores whose step is stretched: for
    ``d >= SMOOTH_EDGE_D`` graded to ``H_FINE`` around the images ``u = ∓alpha`` of the support's
    ends (:func:`graded_grid`), for smaller ``d`` (not smooth at ``s = ±1``) the plain step 1/4
    everywhere, up to ``MAX_EDGE_POINTS`` nodes (:class:`TooMuchWork` beyond).
    """
    if is_sample(dist):
        du = 0.3 / refine
        u = _shifted(u_grid(dist, alpha, ns, du), du, offset)
        return u, np.full(u.size, du)
    stretch = _stretch(dist, alpha, ns)
    du = 0.25 / refine * stretch
    u = u_grid(dist, alpha, ns, du)
    if not isinstance(dist, Cosine) or stretch <= 1.0:
        u = _shifted(u, du, offset)
        return u, np.full(u.size, du)
    if dist.d >= SMOOTH_EDGE_D:  # the ends s = ±1 of the support make features of width ~1 in u near u = ∓alpha
        return graded_grid(u[0], u[-1], du, H_FINE / refine, (-alpha, alpha), offset)
    du = 0.25 / refine  # d < 8: the density is not smooth at s = ±1; resolve its ends at the kernel's scale
    u = u_grid(dist, alpha, ns, du)
    if u.size > MAX_EDGE_POINTS:
        raise TooMuchWork(
            f"`alpha` = {alpha:g} is too large for the exact method with cosine d = {dist.d} < "
            f"{SMOOTH_EDGE_D} (cost grows like alpha; about alpha <= 1e4 is supported); use method='mc'"
        )
    u = _shifted(u, du, offset)
    return u, np.full(u.size, du)


#: Cosine densities ``(1-s^2)^beta`` with ``beta`` above this never reach an end panel: the tilted
#: window ends at ``m + 12 sigma < 1`` for every ``alpha`` once ``beta > 144``, and the march down
#: stops ``e^-46`` below the peak long before ``s = -1``.  Their end rules are NaN (any use would show).
END_RULES_BETA = 1000.0


@functools.lru_cache(maxsize=64)
def jacobi_end_rules(beta):
    """Gauss-Jacobi rules on [-1, 1] for the weights (1-x)^beta, (1+x)^beta and (1-x^2)^beta.

    NaN for ``beta > END_RULES_BETA`` (never used there; ``roots_jacobi`` overflows for huge ``beta``).
    """
    m = GL_X.size + 4
    if beta > END_RULES_BETA:
        return np.full((3, m), np.nan), np.full((3, m), np.nan)
    rules = [special.roots_jacobi(m, a, b) for a, b in ((beta, 0.0), (0.0, beta), (beta, beta))]
    return np.array([r[0] for r in rules]), np.array([r[1] for r in rules])

"""Cosine scores: the cosine of two independent uniform directions in R^d, and its log-MGF for every ``d`` and scale."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special

from .._util.validation import check_int
from ._base import _EMPTY, KIND_COSINE, ScoreDistribution

__all__ = ["Cosine", "cosine_log_mgf"]

#: Cosine tails from this ``d`` on go through Student's t (:meth:`Cosine.sf`).
_T_FROM_D = 64


@dataclass(frozen=True)
class Cosine(ScoreDistribution):
    """Cosine of the angle between two independent uniform directions in R^d.

    Density proportional to ``(1 - s^2)^((d-3)/2)`` on (-1, 1); a draw is
    ``2 B - 1`` with ``B ~ Beta((d-1)/2, (d-1)/2)``.  Its variance is ``1/d``.
    """

    d: int
    name: str = field(default="cosine", init=False)

    def __post_init__(self):
        object.__setattr__(self, "d", check_int(self.d, "d", minimum=2))

    @property
    def label(self):
        """``cosine(d=...)``."""
        return f"cosine(d={self.d})"

    @property
    def _nu(self) -> float:
        return 0.5 * self.d - 1.0

    def pdf(self, s):
        """Density on (-1, 1), zero outside."""
        s = np.asarray(s, dtype=np.float64)
        b = 0.5 * (self.d - 1)
        inside = np.abs(s) < 1
        sc = np.where(inside, s, 0.0)
        with np.errstate(divide="ignore"):
            logp = self.log_norm + (b - 1) * np.log1p(-sc * sc)
        return np.where(inside, np.exp(logp), 0.0)

    def cdf(self, s):
        """Distribution function, ``P(S <= s) = P(S > -s)`` (:meth:`sf`)."""
        return self.sf(-np.asarray(s, dtype=np.float64))

    def sf(self, s):
        """Upper tail ``P(S > s)``, accurate where it is tiny and for every ``d``.

        Below ``d = 64`` the regularised incomplete beta of ``(1 - s)/2``; from
        there Student's t with ``d - 1`` degrees of freedom at
        ``s sqrt(d - 1) / sqrt(1 - s^2)`` (the same law), because
        ``scipy.special.betainc`` loses digits for shapes beyond ~1e9 (a relative
        error of 1e-4 at ``d = 1e12``) where ``stdtr`` keeps ~1e-14.
        """
        s = np.clip(np.asarray(s, dtype=np.float64), -1.0, 1.0)
        if self.d < _T_FROM_D:
            b = 0.5 * (self.d - 1)
            return special.betainc(b, b, 0.5 * (1.0 - s))
        df = self.d - 1.0
        with np.errstate(divide="ignore"):
            t = s * np.sqrt(df) / np.sqrt((1.0 - s) * (1.0 + s))
        return special.stdtr(df, -t)

    def isf(self, q):
        """Upper quantile: the ``s`` with ``P(S > s) = q`` (``q`` may be tiny); the inverse of :meth:`sf`."""
        q = np.asarray(q, dtype=np.float64)
        if self.d < _T_FROM_D:
            b = 0.5 * (self.d - 1)
            return 1.0 - 2.0 * special.betaincinv(b, b, q)
        df = self.d - 1.0
        t = -special.stdtrit(df, q)
        return t / np.hypot(np.sqrt(df), t)

    def log_mgf(self, a):
        """``log[Gamma(d/2) (2/a)^(d/2-1) I_(d/2-1)(a)]``, even in ``a``, accurate for every ``d`` and ``a``.

        See :func:`cosine_log_mgf` for the evaluation and its error.
        """
        return cosine_log_mgf(self.d, a)

    def mean_field_log_ratio(self, a):
        """``log(M(2a) / M(a)^2)``, from ``log M(a) - |a|`` where ``|a| > max(d/2 - 1, 1)``.

        There ``log M(a)`` is close to ``|a|`` and the difference of the two logs
        would lose ``|a|`` times the rounding error; the excess over ``|a|``
        keeps the ratio accurate up to the largest scales (``a ~ 1e30``, the
        mean-field optimum at ``d = 2``, ``n = 1e15``).
        """
        a = np.abs(np.asarray(a, dtype=np.float64))
        big = a > max(self._nu, 1.0)
        out = cosine_log_mgf(self.d, 2.0 * a) - 2.0 * cosine_log_mgf(self.d, a)
        if np.any(big):
            ab = a[big] if a.ndim else a
            val = cosine_log_mgf(self.d, 2.0 * ab, excess=True) - 2.0 * cosine_log_mgf(self.d, ab, excess=True)
            if a.ndim:
                out[big] = val
            else:
                out = val
        return out

    @property
    def log_norm(self) -> float:
        """Log of the constant ``c`` of the density ``c (1 - s^2)^((d-3)/2)``, accurate for every ``d``.

        ``c = Gamma(b + 1/2) / (sqrt(pi) Gamma(b))`` with ``b = (d-1)/2``; for large
        ``b`` the ratio is taken through Stirling remainders, which avoids the
        cancellation of two log-gammas of size ``b log b``.
        """
        return _log_gamma_ratio_half(0.5 * (self.d - 1)) - 0.5 * np.log(np.pi)

    def sample(self, size, rng=None):
        """``2 Beta((d-1)/2, (d-1)/2) - 1`` draws."""
        b = 0.5 * (self.d - 1)
        return 2.0 * np.random.default_rng(rng).beta(b, b, size) - 1.0

    def quadrature(self, m):
        """Gauss-Jacobi nodes for the weight ``(1-s^2)^((d-3)/2)``, weights summing to 1."""
        beta = 0.5 * (self.d - 3)
        x, w = special.roots_jacobi(m, beta, beta)
        return x, w / w.sum()

    @property
    def support(self):
        """(-1, 1)."""
        return (-1.0, 1.0)

    @property
    def kernel_spec(self):
        """Sampler code and the Beta shape ``(d-1)/2``."""
        return KIND_COSINE, 0.5 * (self.d - 1), _EMPTY


#: Cosine dimensions with ``nu = d/2 - 1`` at least this use Debye's expansion (:func:`cosine_log_mgf`).
_NU_DEBYE = 64.0
#: ``scipy.special.ive`` is used below this scale; it returns NaN from about 1e10.
_HANKEL_FROM = 1e8
#: The power series of ``0F1(; b; x)`` is used while ``x <= _SERIES_UPTO * b``.
_SERIES_UPTO = 0.25
_LOG_2PI = float(np.log(2.0 * np.pi))


def _debye_polynomials(k: int) -> list[np.polynomial.Polynomial]:
    """Debye's ``u_1 .. u_k`` by their recurrence (DLMF 10.41.9).

    ``u_(j+1)(t) = t^2 (1 - t^2) u_j'(t) / 2 + (1/8) int_0^t (1 - 5 s^2) u_j(s) ds``, ``u_0 = 1``.
    """
    t = np.polynomial.Polynomial([0.0, 1.0])
    u = [np.polynomial.Polynomial([1.0])]
    for _ in range(k):
        prev = u[-1]
        u.append(0.5 * t**2 * (1 - t**2) * prev.deriv() + 0.125 * ((1 - 5 * t**2) * prev).integ())
    return u[1:]


#: ``u_1 .. u_8`` of Debye's expansion; on ``0 <= t <= 1``, ``|u_9| <= 0.6`` (checked in the tests).
_DEBYE_U = _debye_polynomials(8)


def stirling_remainder(x):
    """``log Gamma(x) - ((x - 1/2) log x - x + log(2 pi)/2)`` for ``x > 0``, without cancellation for large ``x``.

    For ``x >= 8`` the Stirling series to ``x^-13`` (the next term is below
    ``3e-2 x^-15``, 1e-15 at ``x = 8``); below, the log-gamma itself.
    """
    x = np.asarray(x, dtype=np.float64)
    big = x >= 8.0
    xb = np.where(big, x, 8.0)
    y = 1.0 / (xb * xb)
    coef = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)
    acc = np.zeros_like(xb)
    for c in coef[::-1]:
        acc = acc * y + c
    series = acc / xb
    xs = np.where(big, 1.0, x)
    direct = special.gammaln(xs) - ((xs - 0.5) * np.log(xs) - xs + 0.5 * _LOG_2PI)
    return np.where(big, series, direct)


def _log_gamma_ratio_half(b: float) -> float:
    """``log Gamma(b + 1/2) - log Gamma(b)`` for ``b > 0``, accurate when ``b`` is large."""
    if b < 8.0:
        return float(special.gammaln(b + 0.5) - special.gammaln(b))
    return float(b * np.log1p(0.5 / b) - 0.5 + 0.5 * np.log(b) + stirling_remainder(b + 0.5) - stirling_remainder(b))


def cosine_log_mgf(d, a, *, excess=False):
    """Log-MGF of a cosine score in dimension ``d``, ``log 0F1(; d/2; a^2/4)``, or its excess over ``|a|``.

    Three regimes, each accurate to a few units of rounding in ``log M`` (relative
    where ``log M`` is small, absolute where it is large):

    - ``x = a^2/4 <= b/4`` (``b = d/2``): the power series of ``0F1(; b; x)``, 14
      terms (each term is at most ``1/4`` of the one before, over ``k``), summed
      under ``log1p``.  This holds the normal limit ``a^2/(2d)`` at any ``d``.
    - ``nu = b - 1 >= 64``, larger ``x``: Debye's uniform expansion of
      ``I_nu(nu z)`` (DLMF 10.41.3) with ``u_1 .. u_8``, written as
      ``R(nu) + nu (w - log(1 + w/2)) - log(1 + z^2)/4 + log(1 + sum u_k(t)/nu^k)``,
      ``w = sqrt(1 + z^2) - 1``, ``t = 1/sqrt(1 + z^2)``, ``R`` the Stirling remainder
      (:func:`stirling_remainder`): no term is larger than the result, so nothing
      cancels at any ``d``.  The first term left out is below ``0.6 / nu^9 < 3e-17``.
    - ``nu < 64``, larger ``x``: ``log Gamma(b) + nu log(2/a) + log ive(nu, a) + a``,
      with Hankel's expansion of ``ive`` (six terms, first omitted below 1e-25) for
      ``a >= 1e8``, where ``ive`` itself fails.

    Parameters
    ----------
    d : int
        Dimension, ``>= 2``.
    a : array_like
        Scales; the MGF is even in ``a``.
    excess : bool
        Return ``log M(a) - |a|`` (kept accurate for large ``|a|``, where ``log M ~ |a|``).
    """
    a = np.abs(np.asarray(a, dtype=np.float64))
    flat = np.atleast_1d(a).ravel()
    b = 0.5 * d
    nu = b - 1.0
    out = np.empty_like(flat)
    x = 0.25 * flat * flat
    ser = x <= _SERIES_UPTO * b
    if ser.any():
        out[ser] = _log_0f1_series(b, x[ser])
        if excess:
            out[ser] -= flat[ser]
    rest = ~ser
    if rest.any():
        ar = flat[rest]
        if nu >= _NU_DEBYE:
            out[rest] = _log_mgf_debye(nu, ar, excess)
        else:
            log_ive = np.empty_like(ar)
            hank = ar >= _HANKEL_FROM
            log_ive[hank] = _log_ive_hankel(nu, ar[hank])
            log_ive[~hank] = np.log(special.ive(nu, ar[~hank]))
            out[rest] = special.gammaln(b) + nu * np.log(2.0 / ar) + log_ive + (0.0 if excess else ar)
    return out.reshape(a.shape) if a.ndim else out[0]


def _log_0f1_series(b: float, x: np.ndarray) -> np.ndarray:
    """``log 0F1(; b; x)`` for ``0 <= x <= b/4`` from 14 terms of its power series.

    Term ``k`` is ``x^k / (k! (b)_k)``; the ratio of term ``k+1`` to term ``k`` is below
    ``1/(4 (k+1))``, so the first term left out is below ``1e-17`` of the sum.
    """
    terms = np.empty((14, x.size))
    t = np.ones_like(x)
    for k in range(1, 15):
        t = t * x / (k * (b + k - 1.0))
        terms[k - 1] = t
    return np.log1p(terms[::-1].sum(axis=0))


def _log_ive_hankel(nu: float, a: np.ndarray) -> np.ndarray:
    """``log ive(nu, a)`` by Hankel's expansion (DLMF 10.40.1), six terms, for ``a >= 1e8`` and ``nu < 64``.

    The ``k``-th term is at most ``(nu^2 / (2 a))^k / k!``, below ``(2e-5)^k / k!``.
    """
    mu = 4.0 * nu * nu
    term = np.ones_like(a)
    total = np.zeros_like(a)
    for k in range(1, 7):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * a)
        total = total + term
    return -0.5 * np.log(2.0 * np.pi * a) + np.log1p(total)


def _log_mgf_debye(nu: float, a: np.ndarray, excess: bool) -> np.ndarray:
    """Cosine log-MGF (or its excess over ``a``) from Debye's expansion of ``I_nu(nu z)``, ``z = a/nu``, ``nu >= 64``.

    ``log[Gamma(nu+1) (2/a)^nu I_nu(a)] = R(nu) + nu (w - log(1 + w/2)) - log(1 + z^2)/4 + log(1 + c)``
    with ``r = sqrt(1 + z^2)``, ``w = r - 1 = z^2/(1 + r)``, ``c = sum_k u_k(1/r) / nu^k``; the
    excess over ``a = nu z`` replaces ``w`` by ``w - z = 1/(r + z) - 1``.
    """
    z = a / nu
    r = np.hypot(1.0, z)
    w = z * (z / (1.0 + r))
    t = 1.0 / r
    c = np.zeros_like(z)
    for u in _DEBYE_U[::-1]:
        c = (c + u(t)) / nu
    main = (1.0 / (r + z) - 1.0) if excess else w
    return (
        stirling_remainder(nu)
        + nu * (main - np.log1p(0.5 * w))
        - 0.25 * np.log1p(z * z)
        + np.log1p(c)
    )

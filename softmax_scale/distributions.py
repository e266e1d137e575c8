"""Score distributions: normal, cosine(d), empirical, and weighted (a compressed sample).

Each distribution gives its density, its log moment-generating function
``log M(a) = log E[exp(a s)]`` vectorised over the scale ``a``, a sampler,
Gauss quadrature nodes for expectations over the density, and the small
integer/array description (:attr:`ScoreDistribution.kernel_spec`) that the
numba kernels in :mod:`softmax_scale._kernels` sample from.

Use :func:`get_distribution` to turn the ``dist``/``d`` arguments of the
public functions into one of these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special

from ._kernels import log_mgf_weighted, sort_floats
from ._util.validation import check_float_array, check_int, show

__all__ = [
    "DIST_NAMES",
    "Cosine",
    "Empirical",
    "Normal",
    "ScoreDistribution",
    "WeightedSample",
    "compress_pool",
    "cosine_log_mgf",
    "get_distribution",
    "is_sample",
]

#: Cosine tails from this ``d`` on go through Student's t (:meth:`Cosine.sf`).
_T_FROM_D = 64

#: Codes the numba kernels use to pick a sampler.
KIND_NORMAL, KIND_COSINE, KIND_EMPIRICAL = 0, 1, 2

DIST_NAMES = ("normal", "cosine", "empirical")

_EMPTY = np.zeros(1, dtype=np.float64)


class ScoreDistribution:
    """Base class of the score distributions (i.i.d. scores ``s_1..s_n``)."""

    name: str = ""

    def pdf(self, s):
        """Density at ``s``."""
        raise NotImplementedError

    def cdf(self, s):
        """Distribution function at ``s``."""
        raise NotImplementedError

    def log_mgf(self, a):
        """``log E[exp(a s)]``, vectorised over ``a``."""
        raise NotImplementedError

    def sample(self, size, rng=None) -> np.ndarray:
        """Draw ``size`` scores with a :class:`numpy.random.Generator`."""
        raise NotImplementedError

    def quadrature(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes and weights (summing to 1) for ``E[f(s)] ~ sum w_k f(s_k)``."""
        raise NotImplementedError

    @property
    def support(self) -> tuple[float, float]:
        """Interval holding all the mass."""
        raise NotImplementedError

    @property
    def kernel_spec(self) -> tuple[int, float, np.ndarray]:
        """``(kind, parameter, sample)`` for the numba samplers."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. ``cosine(d=128)``."""
        return self.name

    def mean_field_log_ratio(self, a):
        """``log(M(2a) / M(a)^2)``: ``n`` times the mean-field ``sum p_i^2``."""
        a = np.asarray(a, dtype=np.float64)
        return self.log_mgf(2.0 * a) - 2.0 * self.log_mgf(a)

    def standard_form(self) -> tuple[ScoreDistribution, float]:
        """``(std, scale)``: the scores are ``scale * s + shift`` with ``s ~ std``, ``scale > 0``.

        A softmax at scale ``alpha`` over these scores is the softmax at
        ``alpha * scale`` over ``std`` (the shift cancels), so a scale found for
        ``std`` is divided by ``scale``.  The smooth distributions are their own
        standard form; a sample is moved to ``[-1, 1]``.
        """
        return self, 1.0


@dataclass(frozen=True)
class Normal(ScoreDistribution):
    """Standard normal scores, ``q.k / sqrt(d)`` for i.i.d. unit-variance entries."""

    name: str = field(default="normal", init=False)

    def pdf(self, s):
        """Density of N(0, 1)."""
        s = np.asarray(s, dtype=np.float64)
        return np.exp(-0.5 * s * s) / np.sqrt(2.0 * np.pi)

    def cdf(self, s):
        """Distribution function of N(0, 1)."""
        return special.ndtr(np.asarray(s, dtype=np.float64))

    def log_mgf(self, a):
        """``a^2 / 2``."""
        a = np.asarray(a, dtype=np.float64)
        return 0.5 * a * a

    def sample(self, size, rng=None):
        """Standard normal draws."""
        return np.random.default_rng(rng).standard_normal(size)

    def quadrature(self, m):
        """Gauss-Hermite (probabilists') nodes with weights summing to 1."""
        x, w = special.roots_hermitenorm(m)
        return x, w / w.sum()

    @property
    def support(self):
        """The real line."""
        return (-np.inf, np.inf)

    @property
    def kernel_spec(self):
        """Sampler code for the kernels."""
        return KIND_NORMAL, 0.0, _EMPTY


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


class Empirical(ScoreDistribution):
    """Scores resampled from a measured 1-D sample (e.g. logits of a real model), of at least 2 distinct values."""

    name = "empirical"

    def __init__(self, sample, *, name: str = "sample"):
        # ``name``: the parameter to blame in messages (``dist`` when given through get_distribution)
        what = f"`{name}` (an empirical sample of scores)"
        arr = np.asarray(sample)
        if arr.dtype == bool or arr.dtype.kind not in "iuf":
            raise TypeError(f"{what} must be a 1-D array of real numbers, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.float64)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"{what} must be a non-empty 1-D array, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{what} must be finite (no NaN or inf)")
        if arr.min() == arr.max():
            got = f"the single value {show(arr[0])}" if arr.size == 1 else f"{arr.size} values all equal to {show(arr[0])}"
            raise ValueError(f"{what} must hold at least 2 distinct values, got {got}: "
                             "scores without spread make the softmax uniform at every scale")
        arr.setflags(write=False)
        self.values = arr

    def __repr__(self):
        return f"Empirical(<{self.values.size} scores>)"

    def standard_form(self):
        """The sample moved onto ``[-1, 1]`` (centre and half-range of its values), and that half-range."""
        z, scale = _onto_unit_interval(self.values)
        return Empirical(z), scale

    def __eq__(self, other):
        return isinstance(other, Empirical) and np.array_equal(self.values, other.values)

    def __hash__(self):
        return hash(self.values.tobytes())

    @property
    def label(self):
        """``empirical(m=...)``."""
        return f"empirical(m={self.values.size})"

    def pdf(self, s):
        """A Gaussian kernel density estimate (for plots only)."""
        s = np.asarray(s, dtype=np.float64)
        v = self.values
        h = 1.06 * max(v.std(), 1e-12) * v.size ** (-0.2)
        z = (s[..., None] - v) / h
        return np.exp(-0.5 * z * z).mean(axis=-1) / (h * np.sqrt(2 * np.pi))

    def cdf(self, s):
        """Empirical distribution function."""
        v = np.sort(self.values)
        return np.searchsorted(v, np.asarray(s, dtype=np.float64), side="right") / v.size

    def log_mgf(self, a):
        """Log-mean-exp of ``a s`` over the sample."""
        a = np.asarray(a, dtype=np.float64)
        flat = a.reshape(-1)
        out = np.empty_like(flat)
        v = self.values
        m = np.log(v.size)
        chunk = max(1, 2**22 // v.size)
        for i in range(0, flat.size, chunk):
            out[i : i + chunk] = special.logsumexp(np.multiply.outer(flat[i : i + chunk], v), axis=1) - m
        return out.reshape(a.shape)

    def sample(self, size, rng=None):
        """Resample with replacement."""
        return np.random.default_rng(rng).choice(self.values, size=size, replace=True)

    def quadrature(self, m=None):
        """The sample points, each with weight ``1/len(sample)`` (exact for resampling)."""
        v = self.values
        return v.copy(), np.full(v.size, 1.0 / v.size)

    @property
    def support(self):
        """Smallest and largest sample value."""
        return (float(self.values.min()), float(self.values.max()))

    @property
    def kernel_spec(self):
        """Sampler code and the sample itself."""
        return KIND_EMPIRICAL, 0.0, self.values


class WeightedSample(ScoreDistribution):
    """Scores as sorted points ``x`` with weights ``w`` (positive, summing to 1): a compressed sample.

    What :func:`~softmax_scale.head_stats` and the i.i.d. predictions of the real models use for a
    head's pooled standardised scores (:meth:`from_pool`: hundreds of thousands of values
    compressed to a few thousand points, tails exact).  The exact evaluator sums over the points
    (:func:`softmax_scale.exact_stats` takes one as ``dist``), and so does the mean-field
    objective (:meth:`log_mgf`); Monte Carlo needs an :class:`Empirical` sample instead.

    Parameters
    ----------
    x : array_like
        The points, 1-D, ascending.
    w : array_like
        Their weights, positive, summing to 1.
    pool_size : int, optional
        How many values the points stand for (information only).
    """

    name = "weighted"

    def __init__(self, x, w, *, pool_size=None):
        x = np.ascontiguousarray(check_float_array(x, "x"))
        w = np.ascontiguousarray(check_float_array(w, "w"))
        if w.shape != x.shape:
            raise ValueError(f"`w` must have one weight per point of `x`, got shapes {w.shape} and {x.shape}")
        if np.any(np.diff(x) < 0):
            raise ValueError("`x` must be sorted in ascending order")
        if np.any(w <= 0) or abs(float(np.sum(w)) - 1.0) > 1e-9:
            raise ValueError(f"`w` must be positive and sum to 1, got sum {show(float(np.sum(w)))}")
        self.x = x
        self.w = w
        self.logw = np.log(w)
        # above[j] = sum_{k >= j} w_k: the weight of the points beyond a window that ends before j
        self.above = np.append(np.cumsum(w[::-1])[::-1], 0.0)
        self.pool_size = int(x.size if pool_size is None else pool_size)
        for arr in (self.x, self.w, self.logw, self.above):
            arr.setflags(write=False)

    @classmethod
    def from_pool(cls, pool, size) -> WeightedSample:
        """Compress a pool of values to at most ``size`` points (:func:`compress_pool`), standardised to mean 0, variance 1."""
        pool = np.ascontiguousarray(pool, dtype=np.float64)
        x, w = compress_pool(pool, size)
        mean = float(np.dot(w, x))
        sd = float(np.sqrt(np.dot(w, (x - mean) ** 2)))
        return cls((x - mean) / sd, w, pool_size=pool.size)

    def __repr__(self):
        return f"WeightedSample(<{self.x.size} points for {self.pool_size} values>)"

    def standard_form(self):
        """The points moved onto ``[-1, 1]`` (centre and half-range), with their weights, and that half-range."""
        z, scale = _onto_unit_interval(self.x)
        return WeightedSample(z, self.w, pool_size=self.pool_size), scale

    @property
    def label(self):
        """``weighted(m=...)``."""
        return f"weighted(m={self.x.size})"

    def log_mgf(self, a):
        """``log sum_k w_k exp(a x_k)``, vectorised over ``a``."""
        a = np.asarray(a, dtype=np.float64)
        out = np.empty(a.size)
        log_mgf_weighted(np.ascontiguousarray(a).ravel(), self.x, self.logw, out)
        return out.reshape(a.shape) if a.ndim else out[0]

    def cdf(self, s):
        """``sum`` of the weights of the points ``<= s``."""
        cum = np.append(0.0, np.cumsum(self.w))
        return cum[np.searchsorted(self.x, np.asarray(s, dtype=np.float64), side="right")]

    def pdf(self, s):
        """Not defined for a discrete sample."""
        raise TypeError("a WeightedSample is discrete: it has no density")

    def sample(self, size, rng=None):
        """Draw points with their weights as probabilities."""
        return np.random.default_rng(rng).choice(self.x, size=size, replace=True, p=self.w)

    def quadrature(self, m=None):
        """The points and their weights (exact)."""
        return self.x.copy(), self.w.copy()

    @property
    def support(self):
        """Smallest and largest point."""
        return (float(self.x[0]), float(self.x[-1]))

    @property
    def mean(self) -> float:
        """``sum w x``."""
        return float(np.dot(self.w, self.x))

    @property
    def var(self) -> float:
        """``sum w (x - mean)^2``."""
        return float(np.dot(self.w, (self.x - self.mean) ** 2))

    @property
    def sup_ratio(self) -> float:
        """``sup_a M(2a)/M(a)^2 = 1 / (weight at the maximum)``."""
        return 1.0 / float(self.w[self.x == self.x[-1]].sum())

    @property
    def kernel_spec(self):
        """Not available: the Monte Carlo kernels resample an :class:`Empirical` sample uniformly."""
        raise TypeError("`dist`: Monte Carlo needs an Empirical sample (equal weights), not a WeightedSample")


def _onto_unit_interval(v: np.ndarray) -> tuple[np.ndarray, float]:
    """``(v - c) / h`` with ``c``, ``h`` the centre and half-range of ``v`` (at least 2 distinct values), and ``h``.

    Each half is taken before the sum or the difference, so values up to the
    largest float64 do not overflow.
    """
    lo, hi = float(v.min()), float(v.max())
    c, h = 0.5 * hi + 0.5 * lo, 0.5 * hi - 0.5 * lo
    return np.clip((v - c) / h, -1.0, 1.0), h


def is_sample(dist) -> bool:
    """Whether ``dist`` is a finite set of points (:class:`Empirical` or :class:`WeightedSample`)."""
    return isinstance(dist, (Empirical, WeightedSample))


def compress_pool(pool, size):
    """The pool as at most ``size`` weighted points: its tails exact, its bulk in equal-count bins.

    The ``size // 4`` largest and ``size // 4`` smallest values are kept as
    they are (weight ``1/m`` each, ``m`` the pool size): the softmax of ``n``
    scores is governed by the largest of them, and a tail squeezed into
    quantiles loses the very values that matter (at ``n = 512``, ``alpha = 2``
    a 2048-point quantile sample of normal scores overstates ``E[H]`` by 0.04).
    The rest is split into ``size // 2`` bins of (nearly) equal count, each
    represented by its mean with weight ``count/m`` (the first moment is kept
    exactly, up to rounding: a mean is clipped to its bin's values, so the points
    stay sorted where a bin holds a run of equal values).  Deterministic: no
    randomness is involved.
    """
    v = sort_floats(pool) if pool.size > 65536 else np.sort(pool)
    m = v.size
    if m <= size:
        return v, np.full(m, 1.0 / m)
    t = size // 4
    bulk = v[t : m - t]
    edges = np.linspace(0, bulk.size, size // 2 + 1).round().astype(np.int64)
    counts = np.diff(edges)
    sums = np.add.reduceat(bulk, edges[:-1])
    # a bin's mean lies within its own values; rounding can put the mean of a run of equal values
    # one ulp above them, past the next bin's first value: clip, so the points stay in order
    means = np.clip(sums / counts, bulk[edges[:-1]], bulk[edges[1:] - 1])
    x = np.concatenate([v[:t], means, v[m - t :]])
    w = np.concatenate([np.full(t, 1.0), counts.astype(np.float64), np.full(t, 1.0)]) / m
    return x, w


_NORMAL = Normal()


def get_distribution(dist="normal", d=None) -> ScoreDistribution:
    """Turn the public ``dist``/``d`` arguments into a :class:`ScoreDistribution`.

    Parameters
    ----------
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        A name, a distribution object, or a 1-D array of measured scores
        (shorthand for ``Empirical(array)``).
    d : int, optional
        Dimension, required for ``"cosine"`` (``d >= 2``); an error with any other
        distribution, which has no dimension (a ``d`` that would be silently ignored is
        usually a forgotten ``dist="cosine"``).
    """
    if isinstance(dist, ScoreDistribution):
        if d is not None and not (isinstance(dist, Cosine) and d == dist.d):
            raise ValueError(f"`d` must be None with a distribution object ({dist.label} fixes its own), got d={show(d)}")
        return dist
    if d is not None and not (isinstance(dist, str) and dist == "cosine"):
        name = repr(dist) if isinstance(dist, str) else "an empirical sample"
        raise ValueError(f"`d` applies to dist='cosine' only; {name} has no dimension, got d={show(d)} "
                         "(drop d, or pass dist='cosine')")
    if isinstance(dist, str):
        if dist == "normal":
            return _NORMAL
        if dist == "cosine":
            if d is None:
                raise ValueError("`d` is required for dist='cosine': an integer >= 2 (e.g. the head dimension)")
            return Cosine(d)
        if dist == "empirical":
            raise ValueError(
                "`dist`='empirical' needs the sample: pass the 1-D array itself as `dist` "
                "(or softmax_scale.Empirical(array))"
            )
        raise ValueError(f"`dist` must be one of {list(DIST_NAMES)} or a 1-D array of scores, got {dist!r}")
    if isinstance(dist, (list, tuple, np.ndarray)):
        return Empirical(dist, name="dist")
    raise TypeError(f"`dist` must be a name, a ScoreDistribution or a 1-D array, got {type(dist).__name__}")

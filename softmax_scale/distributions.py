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
    "get_distribution",
    "is_sample",
]

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
        logc = special.gammaln(2 * b) - 2 * special.gammaln(b) - (2 * b - 1) * np.log(2.0)
        with np.errstate(divide="ignore"):
            logp = logc + (b - 1) * np.log1p(-sc * sc)
        return np.where(inside, np.exp(logp), 0.0)

    def cdf(self, s):
        """Distribution function, through the regularised incomplete beta."""
        b = 0.5 * (self.d - 1)
        s = np.clip(np.asarray(s, dtype=np.float64), -1.0, 1.0)
        return special.betainc(b, b, 0.5 * (s + 1.0))

    def log_mgf(self, a):
        """``log[Gamma(d/2) (2/a)^(d/2-1) I_(d/2-1)(a)]``, stable for ``|a|`` from 0 to 1e6+.

        Uses the exponentially scaled Bessel function ``ive`` in log space where
        it is representable, a log-space series ``0F1(; d/2; a^2/4)`` where
        ``ive`` underflows (small ``a`` against large ``d``), and the Taylor
        series ``x/b - x^2/(2 b^2 (b+1))`` (``x = a^2/4``, ``b = d/2``) for tiny ``a``.
        The MGF is even in ``a``.
        """
        a = np.abs(np.asarray(a, dtype=np.float64))
        nu, b = self._nu, 0.5 * self.d
        out = np.empty_like(a)
        x = 0.25 * a * a
        tiny = a < 1e-4 * np.sqrt(b)
        out[tiny] = x[tiny] / b - x[tiny] ** 2 / (2 * b * b * (b + 1))
        rest = ~tiny
        if rest.any():
            ar = a[rest]
            with np.errstate(divide="ignore", under="ignore"):
                iv = special.ive(nu, ar)
            ok = iv > 1e-280
            res = np.empty_like(ar)
            with np.errstate(divide="ignore"):
                res[ok] = special.gammaln(b) + nu * np.log(2.0 / ar[ok]) + np.log(iv[ok]) + ar[ok]
            bad = ~ok
            series = bad & (ar < 4000.0)
            if series.any():
                res[series] = _log_hyp0f1(b, 0.25 * ar[series] ** 2)
            debye = bad & ~series  # only reached for d above ~4500
            if debye.any():
                res[debye] = _log_mgf_debye(nu, ar[debye])
            out[rest] = res
        return out

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


def _log_hyp0f1(b: float, x: np.ndarray) -> np.ndarray:
    """``log 0F1(; b; x)`` for ``x >= 0`` by summing the series in log space.

    Used only where ``ive`` underflows (small ``a`` against large ``d``) and
    ``a = 2 sqrt(x) < 4000``; the terms peak near ``k = sqrt(x)`` and a few
    hundred more suffice.
    """
    x = np.asarray(x, dtype=np.float64)
    logx = np.log(x)
    term = np.zeros_like(x)  # log of the current term, k = 0
    acc = np.zeros_like(x)  # log of the running sum
    kmax = int(np.sqrt(x.max())) + 600
    for k in range(1, kmax):
        term = term + logx - np.log(k) - np.log(b + k - 1)
        acc = np.logaddexp(acc, term)
        if k > np.sqrt(x.max()) and np.all(term - acc < -40):
            break
    return acc


def _log_mgf_debye(nu: float, a: np.ndarray) -> np.ndarray:
    """Cosine log-MGF from Debye's uniform expansion of ``I_nu(nu z)``, ``z = a/nu``.

    Three correction terms; for the ``nu > 2000`` where it is used the
    relative error of ``M`` is below 1e-14.
    """
    z = a / nu
    r = np.sqrt(1.0 + z * z)
    t = 1.0 / r
    t2 = t * t
    u1 = t * (3.0 - 5.0 * t2) / 24.0
    u2 = t2 * (81.0 - 462.0 * t2 + 385.0 * t2 * t2) / 1152.0
    u3 = t * t2 * (30375.0 - 369603.0 * t2 + 765765.0 * t2**2 - 425425.0 * t2**3) / 414720.0
    corr = np.log1p(u1 / nu + u2 / nu**2 + u3 / nu**3)
    # log[Gamma(nu+1) (2/a)^nu I_nu(a)], the (2/a)^nu and (z/(1+r))^nu folded together
    return (
        special.gammaln(nu + 1.0)
        + nu * (np.log(2.0 / nu) - np.log1p(r) + r)
        - 0.5 * np.log(2.0 * np.pi * nu)
        - 0.25 * np.log1p(z * z)
        + corr
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

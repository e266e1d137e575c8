"""Measured scores: an empirical sample, and a weighted one (a compressed pool of scores)."""

from __future__ import annotations

import numpy as np
from scipy import special

from .._kernels import log_mgf_weighted, sort_floats
from .._util.validation import check_float_array, show
from ._base import KIND_EMPIRICAL, ScoreDistribution

__all__ = ["Empirical", "WeightedSample", "compress_pool"]


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

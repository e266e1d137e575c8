"""Per-head diagnostics on any model's pre-softmax scores: :func:`head_stats`.

The scores of one head form a matrix ``(n_queries, n_keys)``; each query row
is one softmax.  For every row ``r`` with ``n_r`` allowed keys and scores
``s_rj``:

- ``sigma_r`` is the standard deviation of the row's allowed scores (``ddof=0``)
  and ``z_rj = (s_rj - mean_r) / sigma_r`` its standardised scores, so that
  ``s_r = const + sigma_r z_r``: in the toolkit's unit-variance language the
  row is a softmax of ``z_r`` at scale ``alpha = sigma_r``;
- ``p_r = softmax(s_r)`` in float64 (max-shifted), ``H_r = log Z_r - sum_j p_rj (s_rj - max_r)``,
  ``sum p^2``, ``G_r = sigma_r (1 - sum p^2)``, the largest probability and the
  probability on key 0 (the attention-sink token; 0 where key 0 is masked).

A head's statistic is the plain average over its rows (queries), each row
with its own ``n_r``: with a causal mask row ``i`` has ``i + 1`` keys, and
nothing is taken at the maximum ``n``.  The excess kurtosis is that of the
head's pooled standardised scores (every allowed entry of every row), which
is also the sample behind the empirical prediction.

**i.i.d. predictions, one per row, exact in ``n_r``.**  The prediction for a
row is the exact evaluator's ``E[H](alpha_r, n_r)`` for ``n_r`` i.i.d.
unit-variance scores at scale ``alpha_r = sigma_r sqrt(n_r / (n_r - 1))``;
the head's prediction is the average over its rows.  The factor
``sqrt(n/(n-1))`` makes the prediction unbiased under its own null: ``n``
i.i.d. scores of scale ``alpha`` have a ``ddof=0`` sample variance of mean
``alpha^2 (n-1)/n``, and ``E[H] ~ log n - alpha^2 (n-1)/(2n)`` is linear in
``alpha^2`` while the softmax is far from frozen (at ``n = 512``, ``alpha = 2``
the correction is 0.004 nats, a hundred times the Monte Carlo error of a
``(6, 12, 512, 512)`` tensor of i.i.d. scores).  Two score distributions:
the standard normal, and the head's own pooled standardised scores as an
:class:`~softmax_scale.Empirical` sample (mean 0, variance 1 by
construction).  ``delta_entropy = entropy - predicted_entropy`` then says how
much of the head's focus comes from structure (which key, not how many)
rather than from the scale and shape of its score distribution.

*How it is computed.*  The exact evaluator's inner expectations over the
score distribution at a given ``alpha`` (the costly part) do not depend on
``n``; only the outer integral over ``u = log t`` does, through
``phi(t)^(n-1)``.  So for each scale the inner expectations are evaluated
once on a ``u`` grid that serves every ``n`` of the head (the finest step and
the widest range that :mod:`softmax_scale.exact` would pick for any of them),
and ``E[H]`` follows for all the head's distinct ``n`` as one matrix product:
exact in ``n``, no interpolation.  Only the nodes that can matter are
evaluated: the bottom of the grid (50 e-folds below the bulk) is cut where the
terms left out add provably less than 1e-13 nats, and for the empirical sample
the top where ``phi^(n-1) < e^-60``; each ``u`` node sums only the sample
points with ``-45 <= u + alpha x <= 6.7`` (the points above add exact constants,
those below less than 1.3e-18).  Against the whole-grid evaluation
(``_EntropyForNs(..., reference=True)``) the values agree to ~1e-13 nats
(``tests/test_heads.py``).  In ``alpha`` the rows' scales are spread
over ``[min_r alpha_r, max_r alpha_r]``: ``E[H]`` is evaluated at 5, 9, 17, ... (up
to 65) nested Chebyshev-Lobatto nodes of that interval and interpolated
(barycentric formula) until the interpolants on successive node sets agree
within ``1e-5`` nats at every row; that difference, a bound on the coarser
interpolant's error, is reported as ``predict_error``.  The evaluator is
checked against :func:`softmax_scale.exact_stats` in ``tests/test_heads.py``.

*The empirical sample.*  A head's pooled standardised scores (up to
``n_queries * n_keys`` values, mean 0 and variance 1 by construction) are
compressed deterministically, without randomness, to at most
``size = max(sample_size, 4 max_r n_r)`` weighted points: the ``size/4``
largest and ``size/4`` smallest values exactly, the bulk as the means of
``size/2`` equal-count bins (see :func:`_compress`; a pool of at most ``size``
values is used whole), re-standardised to mean 0 and variance 1.  Against
the whole pool of 262144 normal scores, the compression to 2048 points
changes ``E[H]`` at ``n = 512`` by 5e-5, 5e-4, 2e-3 nats at ``alpha = 1, 2, 4``
(4096 points: 4e-6, 4e-5, 1e-4), well below the spread of ``E[H]`` between
two such pools (~0.015 nats at ``alpha = 2``: the extreme tail decides it).  The
expectations over it are exact weighted sums, as
:mod:`softmax_scale.exact` does for an :class:`~softmax_scale.Empirical`
sample.  The geometric ``alpha_star`` resamples the whole pool.
Rows whose scores are all equal
(``sigma_r = 0``, an exactly uniform softmax whose prediction ``log n_r`` is
exact for any distribution) contribute nothing to the pool.

**alpha_star.**  The mean-field objective averaged over the rows,
``mean_r a (1 - R(a)/n_r)`` with ``R(a) = M(2a)/M(a)^2`` (``M`` the empirical
sample's moment-generating function), is linear in ``1/n_r``: it equals the
single-``n`` objective at the harmonic mean ``n_h = 1 / mean_r(1/n_r)``.  So
``alpha_star`` is the exact maximiser of the row-averaged objective, the
mean-field ``alpha*`` at ``n_h`` (``n_h = n`` when every row has the same
``n``).  ``alpha_objective="geometric"`` maximises ``exp E[log G]`` by Monte
Carlo (:mod:`softmax_scale.typical`) at the integer nearest to ``n_h``,
with its standard error in ``alpha_star_se``.  Compare ``alpha_star`` with the
row scale ``alpha_r`` above (``sigma`` times ``sqrt(n/(n-1))``, 0.1 % more at
``n = 512``): a head whose ``sigma`` exceeds it is past the
gradient-maximising scale.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numba
import numpy as np

from ._jit import jit
from ._random import seed_sequence
from ._validation import check_choice, check_int
from .distributions import Empirical, Normal, ScoreDistribution

__all__ = ["HeadStats", "head_stats"]

_ALPHA_OBJECTIVES = ("mean_field", "geometric")
_NODE_LEVELS = (5, 9, 17, 33, 65)  # nested Chebyshev-Lobatto node counts in alpha
_INTERP_TOL = 1e-5  # nats: successive interpolants agree within this at every row


# ---------------------------------------------------------------------------------------------
# the result


@dataclass(frozen=True)
class HeadStats:
    """Per-head softmax diagnostics, one entry per head (arrays shaped like the leading axes).

    Averages are over a head's queries (rows), each with its own number of
    allowed keys.  See :mod:`softmax_scale.heads` for the definitions.

    Attributes
    ----------
    shape : tuple
        The leading axes of ``logits`` (one head per entry); ``()`` for one head.
    n_keys : int
        Keys per row before masking (the last axis of ``logits``).
    queries : ndarray of int
        Rows averaged per head (causal rows with a single key are skipped).
    n : ndarray
        Allowed keys per query, averaged over rows.
    n_harmonic : ndarray
        ``1 / mean(1/n_r)``: the ``n`` at which ``alpha_star`` is sought.
    sigma : ndarray
        Effective scale: the standard deviation (``ddof=0``) of a query's
        scores over its allowed keys, averaged over queries.
    entropy : ndarray
        Mean Shannon entropy ``H`` in nats.
    entropy_ratio : ndarray
        Mean of ``H_r / log n_r``, in ``[0, 1]``.
    sum_p2 : ndarray
        Mean collision probability ``sum p^2``.
    gradient : ndarray
        Mean ``sigma_r (1 - sum p^2)``: the gradient objective of the row.
    top1 : ndarray
        Mean largest probability.
    sink : ndarray
        Mean probability on key 0.
    kurtosis : ndarray
        Excess kurtosis of the pooled standardised scores (0 for normal
        scores, -1.2 for uniform); NaN if every row is constant.
    predicted_entropy : ndarray
        Mean over rows of the exact ``E[H]`` for i.i.d. standard normal
        scores at the row's ``n_r`` and scale ``sigma_r sqrt(n_r/(n_r-1))``
        (NaN with ``predict=False``).
    predicted_entropy_empirical : ndarray
        The same under the head's pooled standardised scores as the
        distribution (NaN with ``predict=False``).
    predict_error : ndarray
        Bound on the interpolation error in ``alpha`` of both predictions (nats).
    alpha_star : ndarray
        Gradient-maximising scale for the head's empirical score
        distribution at ``n_harmonic`` (NaN with ``predict=False``; ``inf`` if
        the objective has no finite maximiser).
    alpha_star_se : ndarray
        Monte Carlo standard error of ``alpha_star`` (0 for mean-field).
    alpha_objective : str
        ``"mean_field"`` or ``"geometric"``.
    sample_size : int
        The ``sample_size`` argument (compression of the empirical sample).
    """

    shape: tuple
    n_keys: int
    queries: np.ndarray
    n: np.ndarray
    n_harmonic: np.ndarray
    sigma: np.ndarray
    entropy: np.ndarray
    entropy_ratio: np.ndarray
    sum_p2: np.ndarray
    gradient: np.ndarray
    top1: np.ndarray
    sink: np.ndarray
    kurtosis: np.ndarray
    predicted_entropy: np.ndarray
    predicted_entropy_empirical: np.ndarray
    predict_error: np.ndarray
    alpha_star: np.ndarray
    alpha_star_se: np.ndarray
    alpha_objective: str
    sample_size: int

    @property
    def delta_entropy(self) -> np.ndarray:
        """``entropy - predicted_entropy``: focus beyond i.i.d. normal scores of the same scale (negative: sharper)."""
        return self.entropy - self.predicted_entropy

    @property
    def delta_entropy_empirical(self) -> np.ndarray:
        """``entropy - predicted_entropy_empirical``: focus from structure (which key), beyond the score distribution."""
        return self.entropy - self.predicted_entropy_empirical

    @property
    def sigma_over_alpha_star(self) -> np.ndarray:
        """``sigma / alpha_star``: above 1, the head is past its gradient-maximising scale."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.sigma / self.alpha_star

    def to_rows(self) -> list[dict]:
        """One dict per head, with its index tuple under ``"head"`` (for printing or a CSV writer)."""
        per_head = [f.name for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray)]
        derived = ["delta_entropy", "delta_entropy_empirical", "sigma_over_alpha_star"]
        arrays = {k: getattr(self, k) for k in per_head + derived}
        rows = []
        for idx in np.ndindex(*self.shape):
            row = {"head": idx}
            for k, v in arrays.items():
                x = v[idx]
                row[k] = int(x) if k == "queries" else float(x)
            rows.append(row)
        return rows

    def __repr__(self):
        def rng(x):
            x = np.asarray(x, dtype=np.float64)
            ok = x[np.isfinite(x)]
            return f"{ok.min():.3g}..{ok.max():.3g}" if ok.size else "n/a"

        return (
            f"HeadStats(heads={int(np.prod(self.shape, dtype=np.int64))}, shape={self.shape}, n={rng(self.n)}, "
            f"sigma={rng(self.sigma)}, entropy_ratio={rng(self.entropy_ratio)}, "
            f"delta_entropy={rng(self.delta_entropy)}, alpha_star={rng(self.alpha_star)} ({self.alpha_objective}))"
        )


# ---------------------------------------------------------------------------------------------
# validation


def _check_logits(logits) -> np.ndarray:
    arr = logits if isinstance(logits, np.ndarray) else np.asarray(logits)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"`logits` must be an array of real numbers, shape (..., n_queries, n_keys), got dtype {arr.dtype}")
    if arr.ndim < 2:
        raise ValueError(f"`logits` must have shape (..., n_queries, n_keys), got shape {arr.shape}")
    if arr.shape[-1] < 2:
        raise ValueError(f"`logits` must have at least 2 keys (last axis), got shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"`logits` must not be empty, got shape {arr.shape}")
    return arr


def _check_mask(mask, shape) -> np.ndarray | None:
    if mask is None:
        return None
    m = mask if isinstance(mask, np.ndarray) else np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(f"`mask` must be a boolean array (True = key allowed), got dtype {m.dtype}")
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise ValueError(f"`mask` of shape {m.shape} does not broadcast to the shape of `logits` {shape}") from None


def _check_bool(value, name) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)


# ---------------------------------------------------------------------------------------------
# one head: the measured statistics


def _measure(s, allowed, skip):
    """Row statistics of one head: ``s`` float64 ``(Q, K)``, ``allowed`` bool ``(Q, K)`` or None.

    Returns ``(rows, pool)``: ``rows`` a dict of per-row arrays over the kept
    rows (not in ``skip``), ``pool`` the standardised scores of the kept
    non-constant rows (1-D).
    """
    keep = ~skip
    s = s[keep]
    if allowed is not None:
        allowed = allowed[keep]
        n = allowed.sum(axis=1).astype(np.float64)
        s_masked = np.where(allowed, s, -np.inf)
    else:
        n = np.full(s.shape[0], float(s.shape[1]))
        s_masked = s
    top = s_masked.max(axis=1, keepdims=True)
    x = s_masked - top  # <= 0, -inf where masked
    e = np.exp(x)
    z_sum = e.sum(axis=1)
    p = e / z_sum[:, None]
    x0 = np.where(p > 0, x, 0.0)  # p log p with 0 log 0 = 0 (masked keys)
    entropy = np.log(z_sum) - np.sum(p * x0, axis=1)
    entropy = np.clip(entropy, 0.0, np.log(n))  # rounding only: H lies in [0, log n]
    sum_p2 = np.einsum("ij,ij->i", p, p)
    if allowed is not None:
        mean = np.where(allowed, s, 0.0).sum(axis=1) / n
        dev = np.where(allowed, s - mean[:, None], 0.0)
    else:
        mean = s.mean(axis=1)
        dev = s - mean[:, None]
    sigma = np.sqrt(np.einsum("ij,ij->i", dev, dev) / n)
    flat = sigma <= 0.0  # constant rows: sigma 0, uniform softmax
    rows = {
        "n": n,
        "sigma": sigma,
        "entropy": entropy,
        "ratio": entropy / np.log(n),
        "sum_p2": sum_p2,
        "gradient": sigma * (1.0 - sum_p2),
        "top1": p.max(axis=1),
        "sink": p[:, 0],
    }
    live = ~flat
    zs = dev[live] / sigma[live, None]
    pool = zs[allowed[live]] if allowed is not None else zs.ravel()
    return rows, pool


class _WeightedScores(ScoreDistribution):
    """A head's pooled standardised scores, compressed: points ``x`` with weights ``w`` (summing to 1).

    Mean 0 and variance 1 exactly.  Provides what the mean-field optimiser
    needs (``log_mgf``, hence ``mean_field_log_ratio``) and :class:`_EntropyForNs`.
    """

    name = "empirical"

    def __init__(self, x, w, pool_size):
        mean = float(np.dot(w, x))
        sd = float(np.sqrt(np.dot(w, (x - mean) ** 2)))
        self.x = np.ascontiguousarray((x - mean) / sd)
        self.w = np.ascontiguousarray(w)
        self.logw = np.log(self.w)
        # above[j] = sum_{k >= j} w_k: the weight of the points beyond the window of _inner_weighted
        self.above = np.append(np.cumsum(self.w[::-1])[::-1], 0.0)
        self.pool_size = pool_size

    def log_mgf(self, a):
        """``log sum_k w_k exp(a x_k)``, vectorised over ``a``."""
        a = np.asarray(a, dtype=np.float64)
        out = np.empty(a.size)
        _log_mgf_weighted(np.ascontiguousarray(a).ravel(), self.x, self.logw, out)
        return out.reshape(a.shape) if a.ndim else out[0]

    @property
    def support(self):
        """Smallest and largest point."""
        return (float(self.x[0]), float(self.x[-1]))

    @property
    def sup_ratio(self) -> float:
        """``sup_a M(2a)/M(a)^2 = 1 / (weight at the maximum)``."""
        return 1.0 / float(self.w[self.x == self.x[-1]].sum())


@jit()
def _sort(v):
    """``np.sort`` of a float64 array without NaN, by LSD radix sort (11-bit digits): ~2x faster for millions of values.

    The bits of a float, sign bit flipped for positive numbers and all bits
    flipped for negative ones, order like the numbers (``-0.0`` before ``0.0``).
    """
    n = v.size
    top = np.uint64(1) << np.uint64(63)
    bits = np.ascontiguousarray(v).view(np.uint64)
    k = np.empty(n, np.uint64)
    for i in range(n):
        b = bits[i]
        k[i] = ~b if b & top else b | top
    tmp = np.empty_like(k)
    mask = np.uint64(2047)
    count = np.empty(2049, np.int64)
    for p in range(6):
        shift = np.uint64(11 * p)
        count[:] = 0
        for i in range(n):
            count[((k[i] >> shift) & mask) + 1] += 1
        if count.max() == n:  # one digit for all: this pass would not move anything
            continue
        for d in range(2048):
            count[d + 1] += count[d]
        for i in range(n):
            d = (k[i] >> shift) & mask
            tmp[count[d]] = k[i]
            count[d] += 1
        k, tmp = tmp, k
    out = np.empty(n)
    ob = out.view(np.uint64)
    for i in range(n):
        b = k[i]
        ob[i] = b & ~top if b & top else ~b
    return out


def _compress(pool, size):
    """The pool as at most ``size`` weighted points: its tails exact, its bulk in equal-count bins.

    The ``size // 4`` largest and ``size // 4`` smallest values are kept as
    they are (weight ``1/m`` each, ``m`` the pool size): the softmax of ``n``
    scores is governed by the largest of them, and a tail squeezed into
    quantiles loses the very values that matter (at ``n = 512``, ``alpha = 2``
    a 2048-point quantile sample of normal scores overstates ``E[H]`` by 0.04).
    The rest is split into ``size // 2`` bins of (nearly) equal count, each
    represented by its mean with weight ``count/m`` (the first moment is kept
    exactly).  Deterministic: no randomness is involved.
    """
    v = _sort(pool) if pool.size > 65536 else np.sort(pool)
    m = v.size
    if m <= size:
        return v, np.full(m, 1.0 / m)
    t = size // 4
    bulk = v[t : m - t]
    edges = np.linspace(0, bulk.size, size // 2 + 1).round().astype(np.int64)
    counts = np.diff(edges)
    sums = np.add.reduceat(bulk, edges[:-1])
    x = np.concatenate([v[:t], sums / counts, v[m - t :]])
    w = np.concatenate([np.full(t, 1.0), counts.astype(np.float64), np.full(t, 1.0)]) / m
    return x, w


@jit()
def _log_mgf_weighted(a, x, logw, out):
    """``out[i] = log sum_k exp(a[i] x_k + logw_k)``, as ``scipy.special.logsumexp`` forms it: ``top + log1p(rest)``."""
    for i in range(a.shape[0]):
        top, kmax = -np.inf, 0
        for k in range(x.shape[0]):
            v = a[i] * x[k] + logw[k]
            if v > top:
                top, kmax = v, k
        acc = 0.0
        for k in range(x.shape[0]):
            if k != kmax:
                acc += np.exp(a[i] * x[k] + logw[k] - top)
        out[i] = top + np.log1p(acc)


#: Beyond ``z = u + alpha x > _Z_ZERO`` a point's terms are exact constants in float64:
#: ``y = e^z > 746``, so ``exp(-y)`` underflows to 0 and ``expm1(-y)`` rounds to -1.
_Z_ZERO = 6.7
#: Below ``z = _Z_NEG`` a point is left out: ``|w y e^-y (z + γ)| < w 45 e^-45 = 1.3e-18 w`` and
#: ``|w expm1(-y)| < w e^-45``, so the inner sums change by at most 1.3e-18 in all.
_Z_NEG = -45.0
#: The ``u`` grid of a weighted sample stops where ``phi^(n-1) < e^-_PHI_TAIL`` for every ``n``.
_PHI_TAIL = 60.0


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

    The same sums as :func:`_inner_weighted_reference`, over the window of
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
            kk += w[j] * y * e * (z + _EULER)
        out[0, i] = a
        out[1, i] = kk


@jit(parallel=True)
def _inner_weighted_reference(u, alpha, x, w, out):
    """``exact._inner_sample`` with weights, every point at every ``u``: the slow reference of :func:`_inner_weighted`.

    ``out[0]`` = ``E[expm1(-y)]``, ``out[1]`` = ``E[y e^-y (log y + γ)]``.  Parallel over ``u``; each
    ``u`` is summed in a fixed order, so the result does not depend on the number of threads.
    """
    for i in numba.prange(u.shape[0]):
        a = kk = 0.0
        for j in range(x.shape[0]):
            z = u[i] + alpha * x[j]
            if z > 40.0:
                a -= w[j]
                continue
            y = np.exp(z)
            e = np.exp(-y)
            a += w[j] * np.expm1(-y)
            kk += w[j] * y * e * (z + _EULER)
        out[0, i] = a
        out[1, i] = kk


_EULER = float(np.euler_gamma)


# ---------------------------------------------------------------------------------------------
# one head: exact E[H] for many n at once, interpolated in alpha


class _EntropyForNs:
    """Exact ``E[H](alpha, n)`` for one distribution and a fixed set of ``n``, vectorised over ``n``.

    The same quadrature as :func:`softmax_scale.exact.exact_stats` (its grid
    rules and inner kernels; a weighted copy of its sample kernel for
    :class:`_WeightedScores`), on one ``u`` grid fine and wide enough for
    every ``n`` of the set, its nodes that cannot matter left out
    (:meth:`_first_needed`, :func:`_phi_cut`).  ``reference=True`` evaluates
    every node of the grid and every point of the sample at each (the slow
    reference of the tests).
    """

    def __init__(self, dist, ns, reference=False):
        from . import exact

        self._exact = exact
        self.reference = reference  # every point at every u node, the whole grid: the slow reference
        self.dist = dist
        self.ns = np.asarray(ns, dtype=np.float64)
        self.n_lo, self.n_hi = float(self.ns.min()), float(self.ns.max())
        if isinstance(dist, Normal):
            # the exact evaluator's u step grows with alpha times the width of the largest of n scores
            self.width = min(exact._max_width(dist, n) for n in (self.n_lo, self.n_hi))

    def _grid(self, alpha):
        ex, dist = self._exact, self.dist
        if isinstance(dist, Normal):
            du = 0.25 * max(1.0, alpha * self.width)
            lo = ex._u_grid(dist, alpha, self.n_hi, du)[0]  # the largest n reaches furthest down
            hi = ex._u_grid(dist, alpha, self.n_lo, du)[-1]  # the smallest n furthest up
        else:  # exact._u_grid's rule for a sample
            du = 0.3
            s_bot, s_top = dist.support
            lo = min(-1.0, max(-alpha * s_top, -float(dist.log_mgf(alpha))) - np.log(self.n_hi) - ex._TAIL)
            hi = max(np.log(60.0) - alpha * s_bot, lo + 1.0)
        return lo + du * np.arange(int(np.ceil((hi - lo) / du)) + 1), du

    def _first_needed(self, alpha, u, du):
        """Index of the first ``u`` node whose term can matter: the nodes below it add < 1e-13 nats in all.

        At every node ``|E[y e^-y (log y + γ)]| <= e^u M(alpha) c`` with ``M`` the
        moment-generating function and ``c = |u_0| + alpha max|s| + 1`` (normal:
        ``c = |u_0| + alpha^2 + alpha + 1``, the mean of ``|u + alpha s + γ|`` under
        the tilted ``N(alpha, 1)`` being at most that), and ``phi^(n-1) <= 1``; so the
        nodes below ``u_c`` add at most ``n du e^(u_c) M c / (1 - e^-du)`` to ``|E[H]|``.
        The grid keeps 50 e-folds below the bulk (:data:`softmax_scale.exact._TAIL`),
        far more than a trapezoid sum of ``n <= 1e6`` terms needs.
        """
        dist = self.dist
        if isinstance(dist, Normal):
            log_m = 0.5 * alpha * alpha
            c = abs(u[0]) + alpha * alpha + alpha + 1.0
        else:
            log_m = float(dist.log_mgf(alpha))
            c = abs(u[0]) + alpha * max(-dist.x[0], dist.x[-1]) + 1.0
        u_c = np.log(1e-13 * -np.expm1(-du) / (self.n_hi * du * c)) - log_m
        return int(np.searchsorted(u, u_c))

    def __call__(self, alpha):
        ex, dist, ns = self._exact, self.dist, self.ns
        if alpha < ex._SERIES_BELOW:  # as in exact._stats_at (unit variance)
            return np.log(ns) - 0.5 * alpha * alpha * (ns - 1.0) / ns
        u, du = self._grid(alpha)
        if not self.reference:
            u = u[self._first_needed(alpha, u, du):]
        if isinstance(dist, Normal):
            inner, a = ex._inner_on_grid(dist, alpha, u)
            kk = inner[3]
        else:
            if u.size * dist.x.size > ex._MAX_WORK:
                raise ValueError(
                    f"`logits`: a row scale of {alpha:g} times the spread of the head's standardised scores is too "
                    f"large for the exact prediction; pass predict=False"
                )
            if self.reference:
                inner = np.empty((2, u.size))
                _inner_weighted_reference(u, alpha, dist.x, dist.w, inner)
            else:
                u = u[: _phi_cut(u, alpha, dist.x, dist.w, dist.above, self.n_lo)]
                inner = np.empty((2, u.size))
                _inner_weighted(u, alpha, dist.x, dist.w, dist.above, inner)
            a, kk = inner[0], inner[1]
        a = np.clip(a, -1.0, 0.0)
        with np.errstate(divide="ignore"):
            log_phi = np.where(a > -0.5, np.log1p(np.maximum(a, -0.5)), np.log(np.maximum(1.0 + a, 1e-300)))
        w1 = np.exp((ns[:, None] - 1.0) * log_phi[None, :])
        return -ns * (w1 @ (kk * du))


def _lobatto(k):
    """Chebyshev-Lobatto nodes on [-1, 1] (descending) and their barycentric weights."""
    if k == 1:
        return np.zeros(1), np.ones(1)
    x = np.cos(np.pi * np.arange(k) / (k - 1))
    w = (-1.0) ** np.arange(k)
    w[0] *= 0.5
    w[-1] *= 0.5
    return x, w


def _barycentric(xn, wn, values, x, cols):
    """Interpolant through ``(xn, values[:, c])`` at ``x[r]`` with ``c = cols[r]``."""
    d = x[:, None] - xn[None, :]
    hit = d == 0.0
    d[hit] = 1.0
    c = wn[None, :] / d
    vals = values[:, cols].T  # (rows, nodes)
    out = np.sum(c * vals, axis=1) / np.sum(c, axis=1)
    r, k = np.nonzero(hit)
    out[r] = vals[r, k]
    return out


def _predict(evaluator, alpha, cols):
    """Mean over rows of ``E[H](alpha_r, n_{cols_r})`` and a bound on its interpolation error."""
    lo, hi = float(alpha.min()), float(alpha.max())
    if hi - lo <= 1e-13 * max(hi, 1.0):
        v = evaluator(0.5 * (lo + hi))
        return float(np.mean(v[cols])), 0.0
    mid, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
    t = np.clip((alpha - mid) / half, -1.0, 1.0)
    cache: dict = {}
    prev = None
    err = np.inf
    for k in _NODE_LEVELS:
        xn, wn = _lobatto(k)
        for j, x in enumerate(xn):
            key = round(j * (_NODE_LEVELS[-1] - 1) / (k - 1))  # position on the finest level: nested nodes
            if key not in cache:
                cache[key] = evaluator(max(0.0, mid + half * x))
        values = np.array([cache[round(j * (_NODE_LEVELS[-1] - 1) / (k - 1))] for j in range(k)])
        cur = _barycentric(xn, wn, values, t, cols)
        if prev is not None:
            err = float(np.max(np.abs(cur - prev)))
            if err <= _INTERP_TOL:
                break
        prev = cur
    return float(np.mean(cur)), err


# ---------------------------------------------------------------------------------------------
# the public entry point


def head_stats(
    logits,
    *,
    mask=None,
    causal=False,
    predict=True,
    alpha_objective="mean_field",
    sample_size=2048,
    trials=2000,
    rng=None,
) -> HeadStats:
    """Softmax diagnostics per attention head, beside the i.i.d. predictions for the same ``n`` and scale.

    Parameters
    ----------
    logits : array_like
        Pre-softmax scores, shape ``(..., n_queries, n_keys)``, e.g.
        ``(layers, heads, n, n)`` (any real dtype; float32 is read one head
        at a time and computed in float64, the whole tensor is never copied).
        Must be finite wherever the mask allows a key.
    mask : array_like of bool, optional
        ``True`` where a key is allowed; broadcast to the shape of ``logits``
        (e.g. one ``(n_queries, n_keys)`` mask for all heads).  Every row must
        allow at least 2 keys (the scale of one score is undefined).
    causal : bool
        Allow key ``j`` for query ``i`` only if ``j <= i + n_keys - n_queries``
        (queries are the last positions); combined with ``mask`` by "and".
        Rows whose causal mask allows a single key (query 0 when
        ``n_queries == n_keys``) are skipped.
    predict : bool
        Also compute the i.i.d. predictions and ``alpha_star`` (otherwise
        those fields are NaN and only the cheap statistics are computed).
    alpha_objective : {"mean_field", "geometric"}
        Objective of ``alpha_star``: the row-averaged mean-field objective
        (deterministic, cheap) or ``exp E[log G]`` by Monte Carlo.
    sample_size : int
        Largest number of weighted points the pooled standardised scores of
        a head are compressed to (at least 4 times the largest ``n``; ``>= 16``).
    trials : int
        Monte Carlo trials of the geometric objective (ignored otherwise).
    rng : None, int, SeedSequence or Generator
        Seed of the geometric objective's draws (one spawned stream per head).

    Returns
    -------
    HeadStats

    Raises
    ------
    ValueError
        NaN or infinite scores where allowed (``logits``), fewer than 2 keys
        (``logits``), a mask that does not broadcast or leaves a row with
        fewer than 2 keys (``mask``).

    Examples
    --------
    >>> import numpy as np, softmax_scale as ss
    >>> x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)) * 2.0
    >>> r = ss.head_stats(x, causal=True)
    >>> r.entropy.shape
    (2, 3)
    """
    arr = _check_logits(logits)
    causal = _check_bool(causal, "causal")
    predict = _check_bool(predict, "predict")
    check_choice(alpha_objective, "alpha_objective", _ALPHA_OBJECTIVES)
    sample_size = check_int(sample_size, "sample_size", minimum=16, maximum=10**7)
    if alpha_objective == "geometric":
        trials = check_int(trials, "trials", minimum=100)
        seeds = seed_sequence(rng)
    m = _check_mask(mask, arr.shape)
    q, k = arr.shape[-2:]
    lead = arr.shape[:-2]
    causal_ok = None
    skip = np.zeros(q, dtype=bool)
    if causal:
        causal_ok = np.arange(k)[None, :] <= np.arange(q)[:, None] + (k - q)
        skip = causal_ok.sum(axis=1) < 2
        if skip.all():
            raise ValueError(f"`logits`: with causal=True no query of shape {arr.shape} has 2 or more keys")
    n_heads = int(np.prod(lead, dtype=np.int64))
    if alpha_objective == "geometric":
        head_seeds = seeds.spawn(n_heads)

    names = ["queries", "n", "n_harmonic", "sigma", "entropy", "entropy_ratio", "sum_p2", "gradient", "top1", "sink",
             "kurtosis", "predicted_entropy", "predicted_entropy_empirical", "predict_error", "alpha_star",
             "alpha_star_se"]
    out = {name: np.full(lead, np.nan) for name in names}
    out["queries"] = np.zeros(lead, dtype=np.int64)
    normal = Normal()
    evaluators: dict = {}  # the normal evaluator depends only on the set of n: share it across heads
    for h, idx in enumerate(np.ndindex(*lead)):
        s = np.asarray(arr[idx], dtype=np.float64)
        allowed = None if m is None else m[idx]
        if causal_ok is not None:
            allowed = causal_ok if allowed is None else (allowed & causal_ok)
        finite = np.isfinite(s)
        bad = ~finite if allowed is None else (~finite & allowed)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"`logits` must be finite where the mask allows a key: {s[where]} at {idx + where}")
        if allowed is not None:
            counts = allowed.sum(axis=1)
            short = (counts < 2) & ~skip
            if short.any():
                r = int(np.flatnonzero(short)[0])
                raise ValueError(
                    f"`mask` must allow at least 2 keys in every query row, row {idx + (r,)} allows {int(counts[r])}"
                )
        rows, pool = _measure(s, allowed, skip)
        n_r = rows["n"]
        out["queries"][idx] = n_r.size
        out["n"][idx] = n_r.mean()
        n_h = 1.0 / np.mean(1.0 / n_r)
        out["n_harmonic"][idx] = n_h
        for name, key in (("sigma", "sigma"), ("entropy", "entropy"), ("entropy_ratio", "ratio"),
                          ("sum_p2", "sum_p2"), ("gradient", "gradient"), ("top1", "top1"), ("sink", "sink")):
            out[name][idx] = rows[key].mean()
        if pool.size:
            sq = pool * pool  # pool**4 goes through pow(), ~60 ns a value: 0.1 s for a head of 8 x 512 x 512 scores
            out["kurtosis"][idx] = np.dot(sq, sq) / pool.size - 3.0  # the pool has mean 0 and variance 1
        if not predict:
            continue
        ns, cols = np.unique(n_r, return_inverse=True)
        alpha_r = rows["sigma"] * np.sqrt(n_r / (n_r - 1.0))
        key = ns.tobytes()
        if key not in evaluators:
            evaluators = {key: _EntropyForNs(normal, ns)}
        pred, err = _predict(evaluators[key], alpha_r, cols)
        out["predicted_entropy"][idx] = pred
        if pool.size == 0:  # every row constant: alpha_r = 0, where E[H] = log n for any distribution
            out["predicted_entropy_empirical"][idx] = pred
            out["predict_error"][idx] = err
            out["alpha_star"][idx] = np.nan
            out["alpha_star_se"][idx] = np.nan
            continue
        emp = _WeightedScores(*_compress(pool, max(sample_size, 4 * int(ns[-1]))), pool.size)
        pred_e, err_e = _predict(_EntropyForNs(emp, ns), alpha_r, cols)
        out["predicted_entropy_empirical"][idx] = pred_e
        out["predict_error"][idx] = max(err, err_e)
        if alpha_objective == "mean_field":
            a_star, a_se = _alpha_star_mean_field(n_h, emp), 0.0
        else:
            a_star, a_se = _alpha_star_geometric(n_h, pool, trials, head_seeds[h])
        out["alpha_star"][idx] = a_star
        out["alpha_star_se"][idx] = a_se
    return HeadStats(
        shape=tuple(lead),
        n_keys=int(k),
        **out,
        alpha_objective=alpha_objective,
        sample_size=sample_size,
    )


def _alpha_star_mean_field(n_h, dist):
    """``alpha*`` of the row-averaged mean-field objective: the single-``n`` one at the harmonic mean ``n_h``."""
    from .optimize import _mean_field_optimum

    if dist.sup_ratio <= n_h:  # R(a) < n_h for every a: the objective grows without bound
        return np.inf
    return float(_mean_field_optimum(np.array([n_h]), dist)["alpha"][0])


def _alpha_star_geometric(n_h, pool, trials, seed):
    """``alpha*`` of ``exp E[log G]`` by Monte Carlo, resampling the whole pool, at the integer nearest ``n_h``."""
    from .optimize import optimize_alpha

    res = optimize_alpha(max(2, int(round(n_h))), Empirical(pool, name="logits"), objective="geometric",
                         trials=trials, rng=seed)
    return float(res.alpha), float(res.alpha_se)

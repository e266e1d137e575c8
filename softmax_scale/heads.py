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
``phi(t)^(n-1)``.  So for each scale the engine of :mod:`softmax_scale.exact`
evaluates them once on a ``u`` grid that serves every ``n`` of the head, and
``E[H]`` follows for all the head's distinct ``n`` as one matrix product
(:class:`softmax_scale.exact.EntropyForNs`: exact in ``n``, no interpolation,
only the nodes and sample points that can matter evaluated, ~1e-13 nats from
the whole-grid reference).  In ``alpha`` the rows' scales are interpolated
(:func:`softmax_scale.heads_predict.row_average`), and the bound on that
interpolation error is reported as ``predict_error``.  The evaluator is
checked against :func:`softmax_scale.exact_stats` in ``tests/test_heads.py``.

*The empirical sample.*  A head's pooled standardised scores (up to
``n_queries * n_keys`` values, mean 0 and variance 1 by construction) are
compressed deterministically, without randomness, to at most
``size = max(sample_size, 4 max_r n_r)`` weighted points: the ``size/4``
largest and ``size/4`` smallest values exactly, the bulk as the means of
``size/2`` equal-count bins (a :class:`~softmax_scale.WeightedSample`, see
:func:`~softmax_scale.distributions.compress_pool`; a pool of at most ``size``
values is used whole), re-standardised to mean 0 and variance 1.  Against
the whole pool of 262144 normal scores, the compression to 2048 points
changes ``E[H]`` at ``n = 512`` by 5e-5, 5e-4, 2e-3 nats at ``alpha = 1, 2, 4``
(4096 points: 4e-6, 4e-5, 1e-4), well below the spread of ``E[H]`` between
two such pools (~0.015 nats at ``alpha = 2``: the extreme tail decides it).  The
expectations over it are exact weighted sums.  The geometric ``alpha_star`` resamples the whole pool.
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

import numpy as np

from ._random import seed_sequence
from ._validation import check_choice, check_int
from .distributions import Empirical, Normal, WeightedSample
from .exact import EntropyForNs, TooMuchWork
from .heads_predict import row_average
from .heads_result import HeadStats
from .mean_field import mean_field_optimum
from .optimize import optimize_alpha

__all__ = ["HeadStats", "head_pools", "head_stats"]

_ALPHA_OBJECTIVES = ("mean_field", "geometric")


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
            evaluators = {key: EntropyForNs(normal, ns)}
        pred, err = _predict(evaluators[key], alpha_r, cols)
        out["predicted_entropy"][idx] = pred
        if pool.size == 0:  # every row constant: alpha_r = 0, where E[H] = log n for any distribution
            out["predicted_entropy_empirical"][idx] = pred
            out["predict_error"][idx] = err
            out["alpha_star"][idx] = np.nan
            out["alpha_star_se"][idx] = np.nan
            continue
        emp = WeightedSample.from_pool(pool, max(sample_size, 4 * int(ns[-1])))
        pred_e, err_e = _predict(EntropyForNs(emp, ns), alpha_r, cols)
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


def _predict(evaluator, alpha_r, cols):
    """:func:`~softmax_scale.heads_predict.row_average`, with the prediction's limit said in the head's terms."""
    try:
        return row_average(evaluator, alpha_r, cols)
    except TooMuchWork:
        raise ValueError(
            f"`logits`: a row scale of {float(alpha_r.max()):g} times the spread of the head's standardised scores is too "
            f"large for the exact prediction; pass predict=False"
        ) from None


def _alpha_star_mean_field(n_h, dist):
    """``alpha*`` of the row-averaged mean-field objective: the single-``n`` one at the harmonic mean ``n_h``."""
    if dist.sup_ratio <= n_h:  # R(a) < n_h for every a: the objective grows without bound
        return np.inf
    return float(mean_field_optimum(np.array([n_h]), dist)["alpha"][0])


def _alpha_star_geometric(n_h, pool, trials, seed):
    """``alpha*`` of ``exp E[log G]`` by Monte Carlo, resampling the whole pool, at the integer nearest ``n_h``."""
    res = optimize_alpha(max(2, int(round(n_h))), Empirical(pool, name="logits"), objective="geometric",
                         trials=trials, rng=seed)
    return float(res.alpha), float(res.alpha_se)


def head_pools(logits, *, mask=None, causal=False, sample_size=2048) -> list:
    """Each head's pooled standardised scores as :func:`head_stats` builds them, compressed as it compresses them.

    The distribution behind ``predicted_entropy_empirical``: every allowed score of every
    non-constant row, standardised over its row, pooled, and compressed to at most
    ``max(sample_size, 4 n_keys)`` weighted points (:meth:`~softmax_scale.WeightedSample.from_pool`).
    Arguments as in :func:`head_stats`; returns a list over the heads (leading axes in C order)
    of :class:`~softmax_scale.WeightedSample` (``None`` for a head whose rows are all constant).
    """
    arr = logits if isinstance(logits, np.ndarray) else np.asarray(logits)
    if arr.dtype == bool or arr.dtype.kind not in "iuf" or arr.ndim < 2 or arr.shape[-1] < 2 or 0 in arr.shape:
        raise ValueError(f"`logits` must be real scores shaped (..., n_queries, n_keys >= 2), got {arr.dtype} {arr.shape}")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"`causal` must be True or False, got {causal!r}")
    sample_size = check_int(sample_size, "sample_size", minimum=16, maximum=10**7)
    m = _check_mask(mask, arr.shape)
    q, k = arr.shape[-2:]
    causal_ok = np.arange(k)[None, :] <= np.arange(q)[:, None] + (k - q) if causal else None
    skip = causal_ok.sum(axis=1) < 2 if causal else np.zeros(q, dtype=bool)
    out = []
    for idx in np.ndindex(*arr.shape[:-2]):
        allowed = None if m is None else m[idx]
        if causal_ok is not None:
            allowed = causal_ok if allowed is None else (allowed & causal_ok)
        _, pool = _measure(np.asarray(arr[idx], dtype=np.float64), allowed, skip)
        out.append(WeightedSample.from_pool(pool, max(sample_size, 4 * k)) if pool.size else None)
    return out

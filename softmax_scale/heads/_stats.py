"""Per-head diagnostics on any model's attention, pre-softmax scores or probabilities: :func:`head_stats`.

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

**As frameworks hand it over** (:mod:`softmax_scale.heads._input`): ``logits``
of shape ``(batch, heads, queries, keys)`` with the mask already added as a
large negative number (the float16 or float32 minimum, ``-1e9``, ``-1e4``) are
recognised (an allowed entry more than 745 below its row's largest logit, whose
probability is exactly 0, or a whole row at or below -1000) and refused in one
line that says how to pass ``mask=``/``causal=True``, or treated as masked with
``mask_fill="mask"``; ``probs`` (attention probabilities) give the entropy and
``sum p^2`` exactly and ``sigma`` from ``log p``, flagged as a lower bound where
a probability underflowed to 0 (``sigma_lower_bound``, ``underflow``).

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
(:func:`softmax_scale.heads._predict.row_average`), and the bound on that
interpolation error is reported as ``predict_error``.  The evaluator is
checked against :func:`softmax_scale.exact_stats` in ``tests/heads/test_stats.py``.

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
Rows whose scores are all equal up to rounding (``sigma_r`` at most
:data:`FLAT_ULPS` ulps of the row's largest ``|s_rj|``, taken as 0: an exactly
uniform softmax whose prediction ``log n_r`` is exact for any distribution)
contribute nothing to the pool.

**alpha_star.**  The mean-field objective averaged over the rows,
``mean_r a (1 - R(a)/n_r)`` with ``R(a) = M(2a)/M(a)^2`` (``M`` the empirical
sample's moment-generating function), is linear in ``1/n_r``: it equals the
single-``n`` objective at the harmonic mean ``n_h = 1 / mean_r(1/n_r)``.  So
``alpha_star`` is the exact maximiser of the row-averaged objective, the
mean-field ``alpha*`` at ``n_h`` (``n_h = n`` when every row has the same
``n``).  ``alpha_objective="geometric"`` maximises ``exp E[log G]`` by Monte
Carlo (:mod:`softmax_scale.objectives.typical`) at the integer nearest to ``n_h``,
with its standard error in ``alpha_star_se``.  Compare ``alpha_star`` with the
row scale ``alpha_r`` above (``sigma`` times ``sqrt(n/(n-1))``, 0.1 % more at
``n = 512``): a head whose ``sigma`` exceeds it is past the
gradient-maximising scale.
"""

from __future__ import annotations

import numpy as np

from .._util.rng import seed_sequence
from .._util.validation import check_bool, check_choice, check_int
from ..distributions import Empirical, Normal, WeightedSample
from ..exact import EntropyForNs, TooMuchWork
from ..objectives.mean_field import mean_field_optimum
from ..optimize import optimize_alpha
from ._input import check_head_input
from ._predict import row_average
from ._result import HeadStats

__all__ = ["HeadStats", "head_pools", "head_stats"]

_ALPHA_OBJECTIVES = ("mean_field", "geometric")
#: A row is constant (``sigma`` 0) when its ``sigma`` is at most this many ulps of its largest ``|score|``:
#: the rounding of the mean leaves ~2 ulps in a row of equal values (0.1 three times: 1.4e-17).
FLAT_ULPS = 8.0


# ---------------------------------------------------------------------------------------------
# one head: the measured statistics


def _measure(s, allowed, skip, probs=None):
    """Row statistics of one head: ``s`` float64 ``(Q, K)``, ``allowed`` bool ``(Q, K)`` or None.

    With ``probs`` (the head's probabilities, 0 where not allowed, rows summing to 1) the
    softmax is not recomputed: ``p = probs`` and ``s = log p`` (clamped where ``p`` underflowed).
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
    if probs is None:
        top = s_masked.max(axis=1, keepdims=True)
        x = s_masked - top  # <= 0, -inf where masked
        e = np.exp(x)
    else:
        e = probs[keep]
        x = np.log(np.where(e > 0, e, 1.0))  # log p, 0 where p = 0 (those terms vanish below)
    z_sum = e.sum(axis=1)
    p = e / z_sum[:, None]
    x0 = np.where(p > 0, x, 0.0)  # p log p with 0 log 0 = 0 (masked keys)
    entropy = np.log(z_sum) - np.sum(p * x0, axis=1)
    entropy = np.clip(entropy, 0.0, np.log(n))  # rounding only: H lies in [0, log n]
    sum_p2 = np.einsum("ij,ij->i", p, p)
    # Each row's moments in units of a power of two near its largest |score| (exact, no rounding): rows of
    # finite scores up to 1e308 neither overflow their sum nor their squares.
    top_abs = np.abs(s).max(axis=1) if allowed is None else np.where(allowed, np.abs(s), 0.0).max(axis=1)
    unit = np.ldexp(1.0, np.frexp(np.where(top_abs > 0, top_abs, 1.0))[1] - 1)  # 2^e <= top_abs < 2^(e+1)
    u = s / unit[:, None]
    if allowed is not None:
        mean = np.where(allowed, u, 0.0).sum(axis=1) / n
        dev = np.where(allowed, u - mean[:, None], 0.0)
    else:
        mean = u.mean(axis=1)
        dev = u - mean[:, None]
    sigma_u = np.sqrt(np.einsum("ij,ij->i", dev, dev) / n)
    flat = sigma_u <= FLAT_ULPS * np.finfo(np.float64).eps * (top_abs / unit)  # constant up to rounding: uniform
    sigma_u = np.where(flat, 0.0, sigma_u)
    sigma = sigma_u * unit
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
    zs = dev[live] / sigma_u[live, None]
    pool = zs[allowed[live]] if allowed is not None else zs.ravel()
    return rows, pool


# ---------------------------------------------------------------------------------------------
# the public entry point


def head_stats(
    logits=None,
    *,
    probs=None,
    mask=None,
    causal=False,
    mask_fill="refuse",
    predict=True,
    alpha_objective="mean_field",
    sample_size=2048,
    trials=2000,
    rng=None,
) -> HeadStats:
    """Softmax diagnostics per attention head, beside the i.i.d. predictions for the same ``n`` and scale.

    Pass the pre-softmax scores (``logits``, e.g. from a forward hook) or the attention
    probabilities (``probs``, e.g. ``output_attentions=True``), shaped as frameworks return them:
    ``(batch, heads, n_queries, n_keys)`` or any ``(..., n_queries, n_keys)``.

    Parameters
    ----------
    logits : array_like, optional
        Pre-softmax scores, shape ``(..., n_queries, n_keys)``, e.g.
        ``(layers, heads, n, n)`` (any real dtype; float32 is read one head
        at a time and computed in float64, the whole tensor is never copied).
        Must not be NaN or ``+inf`` where the mask allows a key.  Entries that look
        like a framework's mask fill (``-inf``, or finite: the float16 or float32
        minimum, ``-1e9``, ``-1e4`` plus the score) are handled by ``mask_fill``.
    probs : array_like, optional
        Attention probabilities instead of ``logits``, same shape; each row
        non-negative and summing to 1 over its allowed keys (within 1e-2; renormalised
        in float64), 0 on masked keys.  Entropy and ``sum p^2`` are exact.  ``sigma``
        is the standard deviation of ``log p`` (the logits up to a constant per row);
        where an allowed probability underflowed to 0 (float32: below 1.4e-45, i.e.
        a logit more than 103 below its row's largest) its ``log p`` is unknown and
        is taken as the log of the row's smallest positive probability, which is
        above the truth, so ``sigma`` is then a *lower bound*: see
        ``sigma_lower_bound`` and ``underflow`` in the result.
    mask : array_like, optional
        The keys each query sees, its axes stated by its shape: for scores ``(batch,
        heads, n_queries, n_keys)`` a 2-d mask is the ``(batch, n_keys)`` padding mask
        a tokenizer returns (each sequence's keys, for every head and query), a 4-d
        mask broadcasts by numpy's rules (``(batch, 1, n_queries, n_keys)``; a
        ``(n_queries, n_keys)`` mask for every head is ``mask[None, None]``), any other
        shape is refused; scores of another number of axes take any mask that
        broadcasts.  Booleans (True = allowed), 0/1 integers (1 = allowed) or an
        additive float mask (0 = allowed; ``-inf``, the dtype's minimum or at most
        -1e4 = masked), as transformers builds them.  Rows it leaves with
        fewer than 2 keys (the scale of one score is undefined: padding queries,
        the first query of a causal mask) are skipped; ``queries`` counts the rows kept.
    causal : bool
        Allow key ``j`` for query ``i`` only if ``j <= i + n_keys - n_queries``
        (queries are the last positions); combined with ``mask`` by "and".
        Rows whose causal mask allows a single key (query 0 when
        ``n_queries == n_keys``) are skipped.
    mask_fill : {"refuse", "mask", "keep"}
        What to do with allowed ``logits`` entries that look like a mask fill
        (more than 745 below their row's largest logit, where the probability is
        exactly 0 even in float64, or in a row whose every entry is at or below
        -1000; see :mod:`softmax_scale.heads._input`).  ``"refuse"`` (default):
        a ValueError in one line saying what they look like and how to pass
        ``mask=`` or ``causal=True``.  Refusing is the default because such a key
        silently counted would inflate ``n`` and ``sigma`` (the prediction would
        need 1e10 quadrature nodes), and because the mask that produced the fill is
        the reliable statement of which keys a query sees.  ``"mask"``: treat them
        as masked keys (counted in ``fills``).  ``"keep"``: count them as keys
        (logits that really spread that wide).
    predict : bool
        Also compute the i.i.d. predictions and ``alpha_star`` (otherwise
        those fields are NaN, ``predicted`` is False, and only the cheap statistics are computed).
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
        Neither or both of ``logits`` and ``probs``; NaN or ``+inf`` logits where
        allowed; entries that look like a mask fill (``logits``, with
        ``mask_fill="refuse"``); probabilities outside ``[0, 1]`` or rows not
        summing to 1 (``probs``), or whose exact zeros form a mask not passed (every key
        above the diagonal: pass ``causal=True``; a padding key: pass ``mask=``); fewer
        than 2 keys; a mask of a shape that does not state its axes, of values that are
        not a mask, or that leaves no row of a head with 2 keys (``mask``).

    Warns
    -----
    UserWarning
        ``logits`` whose every row is non-negative and sums to 1: probabilities
        passed as logits (use ``probs=``).

    Examples
    --------
    >>> import numpy as np, softmax_scale as ss
    >>> x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)) * 2.0
    >>> r = ss.head_stats(x, causal=True)
    >>> r.entropy.shape
    (2, 3)
    """
    inp = check_head_input(logits, probs, mask=mask, causal=causal, mask_fill=mask_fill)
    predict = check_bool(predict, "predict")
    check_choice(alpha_objective, "alpha_objective", _ALPHA_OBJECTIVES)
    sample_size = check_int(sample_size, "sample_size", minimum=16, maximum=10**7)
    if alpha_objective == "geometric":
        trials = check_int(trials, "trials", minimum=100)
        head_seeds = seed_sequence(rng).spawn(int(np.prod(inp.lead, dtype=np.int64)))
    lead = inp.lead

    names = ["queries", "n", "n_harmonic", "sigma", "entropy", "entropy_ratio", "sum_p2", "gradient", "top1", "sink",
             "kurtosis", "predicted_entropy", "predicted_entropy_empirical", "predict_error", "alpha_star",
             "alpha_star_se"]
    out = {name: np.full(lead, np.nan) for name in names}
    out["queries"] = np.zeros(lead, dtype=np.int64)
    out["fills"] = np.zeros(lead, dtype=np.int64)
    out["underflow"] = np.zeros(lead)
    out["sigma_lower_bound"] = np.zeros(lead, dtype=bool)
    normal = Normal()
    evaluators: dict = {}  # the normal evaluator depends only on the set of n: share it across heads
    for h, idx in enumerate(np.ndindex(*lead)):
        hd = inp.head(idx)
        out["fills"][idx] = hd.fills
        if hd.zeros is not None:
            n_allowed = hd.allowed.sum() if hd.allowed is not None else hd.scores.size
            out["underflow"][idx] = hd.zeros.sum() / n_allowed
            out["sigma_lower_bound"][idx] = bool(hd.zeros.any())
        rows, pool = _measure(hd.scores, hd.allowed, hd.skip, probs=hd.probs)
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
        emp = _compress(pool, n_r, sample_size)
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
        shape=lead,
        n_keys=int(inp.scores.shape[-1]),
        **out,
        source=inp.source,
        predicted=predict,
        alpha_objective=alpha_objective,
        sample_size=sample_size,
    )


def _predict(evaluator, alpha_r, cols):
    """:func:`~softmax_scale.heads._predict.row_average`, with the prediction's limit said in the head's terms."""
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


def _compress(pool, n_r, sample_size):
    """A head's pooled standardised scores as a :class:`~softmax_scale.WeightedSample` of ``max(sample_size, 4 max n_r)`` points."""
    return WeightedSample.from_pool(pool, max(sample_size, 4 * int(n_r.max())))


def head_pools(logits, *, mask=None, causal=False, mask_fill="refuse", sample_size=2048) -> list:
    """Each head's pooled standardised scores as :func:`head_stats` builds them, compressed as it compresses them.

    The distribution behind ``predicted_entropy_empirical``: every allowed score of every
    non-constant row, standardised over its row, pooled, and compressed to at most
    ``max(sample_size, 4 max_r n_r)`` weighted points (:meth:`~softmax_scale.WeightedSample.from_pool`).
    Arguments as in :func:`head_stats`, checked by the same rules; returns a list over the heads
    (leading axes in C order) of :class:`~softmax_scale.WeightedSample` (``None`` for a head whose
    rows are all constant).
    """
    inp = check_head_input(logits, mask=mask, causal=causal, mask_fill=mask_fill)
    sample_size = check_int(sample_size, "sample_size", minimum=16, maximum=10**7)
    out = []
    for idx in np.ndindex(*inp.lead):
        hd = inp.head(idx)
        rows, pool = _measure(hd.scores, hd.allowed, hd.skip)
        out.append(_compress(pool, rows["n"], sample_size) if pool.size else None)
    return out

"""One key among ``n``: how much of a head's attention goes to a known key, and what the i.i.d. theory predicts.

:func:`key_share` measures, for each head, the attention each scored query gives its *source*
key (the key that holds the answer: the byte a copy repeats, a passkey's digit, FIRST's first
bit) and the quantities the signal-plus-noise model needs: the head's scale on unit-variance
scores (``alpha``, the mean over queries of the standard deviation of the other keys' scores),
the source key's standardised gap (its score minus the others' mean, over their standard
deviation, averaged over queries) and the other keys' pooled standardised scores.
:func:`predict_share` feeds those, measured at one length, to
:func:`softmax_scale.signal_stats` at longer lengths: the share one key of fixed gap keeps among
``n - 1`` keys drawn from the head's own scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.validation import check_float_array, check_int, check_n_array, check_positive_float
from ..distributions import WeightedSample
from ._input import check_head_input

__all__ = ["GAP_BINS", "KeyShare", "key_share", "predict_share", "share_groups"]

#: Groups of queries (by their gap) that :class:`KeyShare` keeps for the prediction.
GAP_BINS = 16


@dataclass(frozen=True)
class KeyShare:
    """Each head's attention on its source key (arrays over the leading axes of the scores).

    Attributes
    ----------
    share : ndarray
        Mean over the scored queries of the softmax probability of the source key.
    gap : ndarray
        Mean over the scored queries of the source key's standardised score
        ``(s_src - mean) / sd``, the mean and standard deviation over the query's other keys.
    alpha : ndarray
        Mean over the scored queries of that standard deviation: the head's scale on
        unit-variance scores.
    n : ndarray
        Mean number of keys the scored queries see.
    queries : ndarray of int
        Scored queries (a query is scored where its source is an allowed key and it sees at
        least one other key).
    pools : list
        Per head (leading axes in C order), the other keys' standardised scores of every scored
        query, compressed to a :class:`~softmax_scale.WeightedSample` (``None`` for a head with no
        scored query, or whose other keys all tie).
    gap_bins, alpha_bins : ndarray, shape (..., bins)
        The scored queries sorted by their gap and cut into :data:`GAP_BINS` groups of (nearly)
        equal size: each group's mean gap and mean scale (NaN-padded for a head with fewer
        queries).  The spread of the gap over queries, which :func:`predict_share` averages over.
    """

    share: np.ndarray
    gap: np.ndarray
    alpha: np.ndarray
    n: np.ndarray
    queries: np.ndarray
    pools: list
    gap_bins: np.ndarray
    alpha_bins: np.ndarray


def key_share(logits, source, *, mask=None, causal=False, sample_size=4096) -> KeyShare:
    """Measure each head's attention on a known source key per query.

    Parameters
    ----------
    logits : array_like
        Pre-softmax scores (scale applied), shape ``(..., n_queries, n_keys)``, as
        :func:`softmax_scale.head_stats` takes them.
    source : array_like of int
        The source key's index for each query, broadcastable to ``logits.shape[:-1]``; ``-1``
        where a query is not scored.
    mask : array_like of bool, optional
        ``True`` where a key is allowed (as in :func:`softmax_scale.head_stats`).
    causal : bool
        Each query ``i`` sees keys ``0..i`` (plus any offset of a longer key axis).
    sample_size : int
        Points of each head's compressed pool.

    Returns
    -------
    KeyShare
    """
    inp = check_head_input(logits, mask=mask, causal=causal)
    sample_size = check_int(sample_size, "sample_size", minimum=16, maximum=10**7)
    q_len, k_len = inp.scores.shape[-2:]
    src = np.asarray(source)
    if src.dtype == bool or src.dtype.kind not in "iu":
        raise TypeError(f"`source` must be integer key indices (-1: not scored), got dtype {src.dtype}")
    try:
        src = np.broadcast_to(src, (*inp.lead, q_len))
    except ValueError:
        raise ValueError(f"`source` must broadcast to the scores' leading axes and queries {(*inp.lead, q_len)}, "
                         f"got shape {src.shape}") from None
    if np.any((src < -1) | (src >= k_len)):
        raise ValueError(f"`source` must be -1 or a key index in [0, {k_len}), got values in "
                         f"[{int(src.min())}, {int(src.max())}]")
    shape = inp.lead
    share, gap, alpha, n = (np.full(shape, np.nan) for _ in range(4))
    queries = np.zeros(shape, dtype=np.int64)
    gap_bins, alpha_bins = np.full((*shape, GAP_BINS), np.nan), np.full((*shape, GAP_BINS), np.nan)
    pools = []
    for idx in np.ndindex(*shape):
        hd = inp.head(idx)
        s = hd.scores
        allowed = np.ones(s.shape, dtype=bool) if hd.allowed is None else hd.allowed
        rows = np.flatnonzero(~hd.skip & (src[idx] >= 0))
        rows = rows[allowed[rows, src[idx][rows]]]
        others = allowed[rows].copy()
        others[np.arange(rows.size), src[idx][rows]] = False
        cnt = others.sum(axis=1)
        rows, others, cnt = rows[cnt >= 1], others[cnt >= 1], cnt[cnt >= 1]
        if rows.size == 0:
            pools.append(None)
            continue
        sr = s[rows]
        s_src = sr[np.arange(rows.size), src[idx][rows]]
        mean = np.where(others, sr, 0.0).sum(axis=1) / cnt
        sd = np.sqrt(np.where(others, (sr - mean[:, None]) ** 2, 0.0).sum(axis=1) / cnt)
        top = np.where(allowed[rows], sr, -np.inf).max(axis=1, keepdims=True)
        e = np.where(allowed[rows], np.exp(sr - top), 0.0)
        p_src = e[np.arange(rows.size), src[idx][rows]] / e.sum(axis=1)
        spread = sd > 0
        share[idx] = float(np.mean(p_src))
        n[idx] = float(np.mean(cnt + 1))
        queries[idx] = rows.size
        if not spread.any():
            pools.append(None)
            continue
        alpha[idx] = float(np.mean(sd[spread]))
        g_q = (s_src[spread] - mean[spread]) / sd[spread]
        gap[idx] = float(np.mean(g_q))
        order = np.argsort(g_q, kind="stable")
        for j, part in enumerate(np.array_split(order, min(GAP_BINS, order.size))):
            gap_bins[idx][j], alpha_bins[idx][j] = float(np.mean(g_q[part])), float(np.mean(sd[spread][part]))
        z = (sr[spread] - mean[spread, None]) / sd[spread, None]
        pools.append(WeightedSample.from_pool(z[others[spread]], sample_size))
    return KeyShare(share, gap, alpha, n, queries, pools, gap_bins, alpha_bins)


def predict_share(alpha, pool, gap, ns, *, growth=None) -> np.ndarray:
    """The i.i.d. share of one key of standardised score ``gap`` among ``n - 1`` keys drawn from ``pool``.

    Parameters
    ----------
    alpha : float or array_like
        The head's scale on unit-variance scores where it was measured (``> 0``); an array of
        one scale per group of queries (:attr:`KeyShare.alpha_bins`), with ``gap`` of the same length.
    pool : WeightedSample, Empirical or array_like
        The other keys' standardised scores (:attr:`KeyShare.pools`).
    gap : float or array_like
        The source key's standardised score (:attr:`KeyShare.gap`), or one per group of queries
        (:attr:`KeyShare.gap_bins`): the prediction is then the mean over the groups (NaN groups
        left out).
    ns : array_like of int
        Numbers of keys (``>= 2``).
    growth : array_like of float, optional
        The factor on the scores at each ``n`` relative to where the head was measured (the
        scale's own growth, e.g. ``log_L n``; default 1 at every ``n``).

    Returns
    -------
    ndarray
        ``E[p_0]`` at each ``n`` (:func:`softmax_scale.signal_stats`, exact quadrature).
    """
    from ..entropy.signal import signal_stats

    a, g0 = share_groups(alpha, gap)
    nn, _ = check_n_array(ns, "ns")
    g = np.ones(nn.size) if growth is None else np.broadcast_to(np.asarray(growth, dtype=np.float64), nn.shape)
    if not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ValueError("`growth` must be finite factors > 0, one per n")
    return np.array([np.mean([signal_stats(float(ai) * float(gj), int(n), float(gi), dist=pool).share
                              for ai, gi in zip(a, g0)]) for n, gj in zip(nn, g)])


def share_groups(alpha, gap, gap_name="gap") -> tuple[np.ndarray, np.ndarray]:
    """The groups of queries a predicted share is the mean over: the finite ``(alpha, gap)`` pairs.

    ``alpha`` and ``gap`` are one number each or one per group (:attr:`KeyShare.alpha_bins`,
    :attr:`KeyShare.gap_bins`, NaN-padded); a pair with a NaN or infinite value is left out, and
    at least one must remain, with every ``alpha > 0``.  Returns the two 1-D float arrays.
    """
    a = check_float_array(alpha, "alpha", finite=False)
    g0 = check_float_array(gap, gap_name, finite=False)
    if g0.shape != a.shape:
        raise ValueError(f"`{gap_name}` must have one value per `alpha`, got shapes {g0.shape} and {a.shape}")
    keep = np.isfinite(a) & np.isfinite(g0)
    if not keep.any():
        raise ValueError(f"`{gap_name}` must be finite (with `alpha`), got {gap!r}")
    a, g0 = a[keep], g0[keep]
    for x in a:
        check_positive_float(float(x), "alpha")
    return a, g0

"""Buckets of positions: the geometry the decoder's evaluation, the extrapolation run and the training harness share.

The query at position ``q`` sees ``q + 1`` keys and predicts the target (token) at ``q + 1``.  A
bucket ``[e_b, e_{b+1})`` holds the positions ``e_b .. e_{b+1} - 1`` of what its edges count
(:data:`BUCKET_COUNTS`): the *targets* in the decoder's evaluation and the real-model extrapolation
(:mod:`softmax_scale.models.llama`: target ``t``, predicted from ``t`` tokens of context by the
query at ``t - 1``), the *queries* in the training harness's causal evaluation
(:func:`softmax_scale.train.evaluation.position_buckets`: ``[0, L)`` are exactly the positions of
training).  :func:`bucket_queries` turns a bucket into its queries, :func:`bucket_keys` into its
mean number of keys, for either.
"""

from __future__ import annotations

import numpy as np

from .._util.validation import check_choice, check_int

__all__ = ["BUCKET_COUNTS", "DEFAULT_BUCKETS", "bucket_edges", "bucket_keys", "bucket_means", "bucket_queries",
           "check_edges"]

#: What a bucket's edges count: the predicted tokens (``"targets"``) or the positions of the queries (``"queries"``).
BUCKET_COUNTS = ("targets", "queries")

#: Default buckets of positions for :meth:`~softmax_scale.models.llama.LlamaDecoder.evaluate` (edges; the last is open).
DEFAULT_BUCKETS = (0, 1024, 2048, 4096, 8192, 12288, 16384)


def bucket_edges(train_length: int, length: int) -> np.ndarray:
    """``L x (0, 1/8, 1/4, 1/2, 1, 3/2, 2, 3, 4, 6, 8, ...)`` cut at ``length`` (the last edge).

    For ``L = 8192, n = 16384``: ``0, 1k, 2k, 4k, 8k, 12k, 16k``.
    """
    L = train_length
    mult = [0, 1 / 8, 1 / 4, 1 / 2, 1]
    k = 1
    while mult[-1] * L < length:
        mult += [1.5 * k, 2.0 * k]
        k *= 2
    e = sorted({min(length, int(m * L)) for m in mult})
    return np.asarray(e, dtype=np.int64)


def bucket_queries(lo: int, hi: int, counts: str = "targets") -> np.ndarray:
    """The positions of the queries of the bucket ``[lo, hi)`` that see two keys or more (query 0 sees one).

    With ``counts="targets"`` the bucket holds the targets ``lo .. hi-1``, predicted by the
    queries ``lo-1 .. hi-2``; with ``counts="queries"`` it holds the queries ``lo .. hi-1``.
    """
    lo = check_int(lo, "lo", minimum=0)
    hi = check_int(hi, "hi", minimum=lo)
    check_choice(counts, "counts", BUCKET_COUNTS)
    shift = 1 if counts == "targets" else 0  # target t is predicted by the query at t - 1
    q = np.arange(lo - shift, hi - shift)
    return q[q >= 1]


def bucket_keys(edges, counts: str = "targets") -> np.ndarray:
    """Each bucket's mean number of keys over its queries (:func:`bucket_queries`), rounded.

    ``edges`` are the bucket edges ``e_0 < ... < e_B`` (or ``[B, 2]`` pairs ``(lo, hi)``).
    """
    check_choice(counts, "counts", BUCKET_COUNTS)
    e = np.asarray(edges)
    pairs = e if e.ndim == 2 else np.stack([e[:-1], e[1:]], axis=1)
    return np.array([round(np.mean(bucket_queries(lo, hi, counts) + 1)) for lo, hi in pairs], dtype=float)


def check_edges(buckets, n) -> np.ndarray:
    """The bucket edges for a sequence of ``n`` tokens: ``buckets`` validated, or ``DEFAULT_BUCKETS`` cut at ``n``."""
    if buckets is None:
        e = [b for b in DEFAULT_BUCKETS if b < n] + [n]
    else:
        e = [check_int(b, "buckets", minimum=0) for b in buckets]
    e = np.asarray(e, dtype=np.int64)
    if e.size < 2 or np.any(np.diff(e) <= 0):
        raise ValueError(f"`buckets` must be at least two increasing edges, got {list(e)}")
    return e


def bucket_means(edges, stats, n: int):
    """Per-bucket means of a pass's per-position arrays: ``(loss, count, entropy, sigma, sink)``.

    ``stats`` is a :class:`~softmax_scale.models.llama.PositionStats` of positions ``0..n-1``;
    the loss is the mean over a bucket's targets, the attention statistics the means over the
    queries that predict them (query 0, which sees one key, is left out).
    """
    edges = np.asarray(edges)
    t = np.arange(1, n)  # targets
    nll = stats.nll[:n - 1]
    nb = len(edges) - 1
    loss = np.full(nb, np.nan)
    count = np.zeros(nb, dtype=np.int64)
    L, H = stats.entropy.shape[:2]
    ent, sig, snk = (np.full((L, H, nb), np.nan) for _ in range(3))
    for b in range(nb):
        sel = (t >= edges[b]) & (t < edges[b + 1])
        count[b] = sel.sum()
        if count[b]:
            loss[b] = nll[sel].mean()
            q = bucket_queries(edges[b], min(int(edges[b + 1]), n))  # the queries that predict the targets below n
            if q.size:
                ent[..., b] = stats.entropy[..., q].mean(-1)
                sig[..., b] = stats.sigma[..., q].mean(-1)
                snk[..., b] = stats.sink[..., q].mean(-1)
    return loss, count, ent, sig, snk

"""Grouped-query causal attention in blocks of queries, with each query's statistics gathered in the same pass.

Memory grows like ``n x block`` per key/value group, never ``n x n`` per head; the elementwise
steps run on row slabs in threads (numpy releases the GIL on large arrays).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..schemes.rope import rerope_near

__all__ = ["attention"]

_MASK = np.float32(-1e30)  # finite "minus infinity": exp gives 0 and 0 * _MASK stays 0, never NaN

#: Threads for the elementwise attention steps (numpy releases the GIL on large arrays).
_WORKERS = max(1, min(4, os.cpu_count() or 1))
_POOL = None


def _pool():
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=_WORKERS)
    return _POOL


def attention(q, k, v, q_pos0, *, block, stats, far=None):
    """Grouped-query causal attention in query blocks, with per-query statistics.

    q : [H, m, d] float32, already multiplied by ``factor / sqrt(d)`` per query;
    k, v : [G, n, d] float32 for key positions 0..n-1; query j sits at position ``q_pos0 + j``
    and sees keys ``0 .. q_pos0 + j``.
    far : ``(q_far [H, m, d], k_far [G, n, d], window)``, optional: ReRoPE (Su, kexue.fm 9708) --
    the score of a key at ``i - j >= window`` from its query is ``q_far . k_far`` (the query rotated
    at position ``window``, scaled like ``q``; the key not rotated) instead of ``q . k``; the two
    joined by :func:`softmax_scale.schemes.rope.rerope_near`.
    Returns the output [m, H*d] and, if ``stats``, (entropy, sigma, sink), each [H, m] float64.

    Per block and key/value group the ``rep = H/G`` heads' queries are stacked into one product
    ``[rep*B, d] @ [d, last]``; the elementwise steps (mask, max, shift, moments for ``sigma``,
    exp, ``sum e s`` for the entropy) run on row slabs in threads (:func:`_rows`);
    ``e @ [v | 1]`` gives the output and the normaliser ``Z`` in one product. The two
    ``[rep*B, n]`` buffers are allocated once per call.
    """
    H, m, d = q.shape
    G, n, _ = k.shape
    rep = H // G
    out = np.empty((m, H * d), dtype=np.float32)
    ent = np.empty((H, m)) if stats else None
    sig = np.empty((H, m)) if stats else None
    snk = np.empty((H, m)) if stats else None
    v1 = np.empty((G, n, d + 1), dtype=np.float32)
    v1[..., :d] = v
    v1[..., d] = 1.0
    size = rep * min(block, m) * (q_pos0 + m)
    s_buf = np.empty(size, dtype=np.float32)
    e_buf = np.empty(size, dtype=np.float32)
    for b0 in range(0, m, block):
        b1 = min(m, b0 + block)
        B = b1 - b0
        R = rep * B
        first, last = q_pos0 + b0, q_pos0 + b1  # keys < first: seen by every query; < last: by some
        qi = np.arange(first, last)
        blk = _Block(first, np.arange(first, last)[None, :] > qi[:, None], B,
                     np.tile((qi + 1).astype(np.float64), rep), np.empty(R), np.empty(R), stats)
        for g in range(G):
            s = s_buf[:R * last].reshape(R, last)
            e = e_buf[:R * last].reshape(R, last)
            np.matmul(q[g * rep:(g + 1) * rep, b0:b1].reshape(R, d), k[g, :last].T, out=s)
            if far is not None and last - far[2] > 0:  # keys 0 .. last-1-w are beyond the window of some query
                cut = last - far[2]
                s_far = far[0][g * rep:(g + 1) * rep, b0:b1].reshape(R, d) @ far[1][g, :cut].T
                near = rerope_near(np.tile(qi, rep), np.arange(cut), far[2])
                np.copyto(s[:, :cut], s_far, where=~near)
            _split(lambda r0, r1, s=s, e=e, blk=blk: _rows(r0, r1, s, e, blk), R)
            o = e @ v1[g, :last]  # [R, d+1]; last column: Z = sum e
            z = o[:, d:]
            o = (o[:, :d] / z).reshape(rep, B, d)
            for r in range(rep):
                h = g * rep + r
                out[b0:b1, h * d:(h + 1) * d] = o[r]
            if stats:
                zz = z[:, 0].astype(np.float64)
                hs = slice(g * rep, (g + 1) * rep)
                ent[hs, b0:b1] = (np.log(zz) - blk.row_ent / zz).reshape(rep, B)
                sig[hs, b0:b1] = blk.row_sig.reshape(rep, B)
                snk[hs, b0:b1] = (e[:, 0] / zz).reshape(rep, B)
    return out, ((ent, sig, snk) if stats else None)


@dataclass
class _Block:
    """What the row workers of one query block share (see :func:`_rows`)."""

    first: int  # keys before it are seen by every query of the block
    tri: np.ndarray  # [B, B] True where the key comes after the query
    B: int
    cnt: np.ndarray  # [rep*B] keys seen by each row
    row_sig: np.ndarray  # [rep*B] out: standard deviation of the row's logits over its keys
    row_ent: np.ndarray  # [rep*B] out: sum_j e_j (s_j - max)
    stats: bool


def _rows(r0, r1, s, e, blk: _Block):
    """Rows ``r0..r1-1`` of a block: mask, shift by the maximum, moments, exponentials (in place)."""
    sub, es = s[r0:r1], e[r0:r1]
    dg = sub[:, blk.first:]
    t = blk.tri[np.arange(r0, r1) % blk.B]
    dg[t] = _MASK
    mx = sub.max(axis=-1, keepdims=True)
    np.subtract(sub, mx, out=sub)
    if blk.stats:  # moments of the shifted logits over allowed keys (masked entries set to 0 meanwhile)
        dg[t] = 0.0
        s1 = sub.sum(-1, dtype=np.float32)
        s2 = np.vecdot(sub, sub)
        dg[t] = _MASK
    np.exp(sub, out=es)
    if blk.stats:
        c = blk.cnt[r0:r1]
        mean = s1.astype(np.float64) / c
        blk.row_sig[r0:r1] = np.sqrt(np.maximum(s2.astype(np.float64) / c - mean * mean, 0.0))
        blk.row_ent[r0:r1] = np.vecdot(es, sub).astype(np.float64)


def _split(fn, rows):
    """Run ``fn(j0, j1)`` over row ranges covering ``0..rows-1``, in threads."""
    k = _WORKERS
    if k == 1 or rows < 2 * k:
        fn(0, rows)
        return
    cuts = np.linspace(0, rows, k + 1).astype(int)
    list(_pool().map(lambda ab: fn(*ab), zip(cuts[:-1].tolist(), cuts[1:].tolist())))

"""Grouped-query causal attention in blocks of queries, with each query's statistics gathered in the same pass.

Memory grows like ``query_block x n`` per key/value group at most, never ``n x n`` per head.
Two implementations of one function, :func:`attention`:

- ``kernel="numba"`` (:func:`_attention_fused`): units of one query block and key/value group,
  each with the keys in tiles of :data:`KEY_BLOCK`; per tile the query-key product (BLAS), then one
  numba kernel (:func:`~.tiles.tile`) that passes over each score row -- the exponentials against
  the row's reference (a maximum) in float32, the normaliser in float64 and, with statistics, the
  moments for ``sigma`` and the entropy sums, rescaling what the earlier tiles left when the
  reference moves (:mod:`.tiles` says when) -- then the probability-value product (BLAS) into the
  running output.  The units run on threads (:func:`_pool`), each unit on one thread, with BLAS
  set to one thread meanwhile (where the BLAS is OpenBLAS 0.3.27 or later,
  :func:`blas_on_one_thread`), so the numbers do not depend on the thread count.
- ``kernel="numpy"`` (the default, :func:`_attention_numpy`): whole score rows, the elementwise
  steps as numpy passes on row slabs in threads; what the committed results of the decoder's
  experiments were computed with, and the reference the fused kernel is tested against.  The fused
  kernel is faster (``benchmarks/results_decoder.md`` measures both in one run) but not the
  default: its numbers differ from the committed results' in the last float32 bits.  ``measure``
  reads its cells with it: on SmolLM2 (4,096 tokens, a pretend ``L`` of 2,048) a cell's mean loss
  moves by under 1e-7 nats, a position's by under 1e-4.

The two agree to float32 rounding (the exponentials differ by an ulp or two, the sums are
accumulated in another order and precision), not bit for bit.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .._util.validation import check_int
from ..schemes.rope import rerope_near
from .tiles import tile

__all__ = ["KERNELS", "KEY_BLOCK", "MIN_SPLIT_ROWS", "attention", "blas_on_one_thread", "chunks", "matmul_rows", "split_rows"]

_MASK = np.float32(-1e30)  # finite "minus infinity": exp gives 0 and 0 * _MASK stays 0, never NaN

#: Threads for the elementwise attention steps (numba's kernels and numpy release the GIL).
_WORKERS = max(1, min(4, os.cpu_count() or 1))
_POOL = (0, None)  # (its size, the executor)

#: The implementations of :func:`attention`, the default first.
KERNELS = ("numba", "numpy")
#: Keys per tile of the fused kernel (``benchmarks/results_decoder.md`` times 256, 512 and 1,024: a few per cent apart).
KEY_BLOCK = 512


def _pool():
    """The attention threads, :data:`_WORKERS` of them."""
    global _POOL
    if _POOL[0] != _WORKERS:
        _POOL = (_WORKERS, ThreadPoolExecutor(max_workers=_WORKERS))
    return _POOL[1]


def attention(q, k, v, q_pos0, *, query_block, stats, far=None, kernel="numpy", key_block=KEY_BLOCK):
    """Grouped-query causal attention in blocks of ``query_block`` queries, with per-query statistics.

    Parameters
    ----------
    q : ndarray [H, m, d] float32
        Queries, already multiplied by ``factor / sqrt(d)`` per query; query ``j`` sits at
        position ``q_pos0 + j`` and sees keys ``0 .. q_pos0 + j``.
    k, v : ndarray [G, n, d] float32
        Keys and values of positions ``0 .. n-1`` (``G`` divides ``H``).
    q_pos0 : int
        Position of the first query.
    query_block : int
        Queries per block.
    stats : bool
        Whether to gather the statistics.
    far : tuple, optional
        ``(q_far [H, m, d], k_far [G, n, d], window)``: ReRoPE (Su, kexue.fm 9708) -- the score of
        a key at ``i - j >= window`` from its query is ``q_far . k_far`` (the query rotated at
        position ``window``, scaled like ``q``; the key not rotated) instead of ``q . k``; the two
        joined by :func:`softmax_scale.schemes.rope.rerope_near`.
    kernel : {"numba", "numpy"}
        The implementation (:data:`KERNELS`; see the module docstring).
    key_block : int
        Keys per tile of the fused kernel (``kernel="numba"``).

    Returns
    -------
    out : ndarray [m, H*d] float32
    stats : tuple or None
        ``(entropy, sigma, sink)``, each [H, m] float64: the Shannon entropy of the query's
        attention, the standard deviation of its logits over the keys it sees, the probability
        on key 0.
    """
    if kernel == "numba":
        check_int(key_block, "key_block", minimum=1)
        return _attention_fused(q, k, v, q_pos0, query_block=query_block, stats=stats, far=far, key_block=key_block)
    if kernel == "numpy":
        return _attention_numpy(q, k, v, q_pos0, query_block=query_block, stats=stats, far=far)
    raise ValueError(f"`kernel` must be one of {KERNELS}, got {kernel!r}")


def _outputs(q, k, stats):
    """The shapes of one call and its outputs: ``H, m, d, G, n, rep`` and the output and statistics arrays."""
    H, m, d = q.shape
    G, n, _ = k.shape
    out = np.empty((m, H * d), dtype=np.float32)
    ent, sig, snk = ((np.empty((H, m)) for _ in range(3)) if stats else (None, None, None))
    return H, m, d, G, n, H // G, out, ent, sig, snk


def _attention_fused(q, k, v, q_pos0, *, query_block, stats, far=None, key_block=KEY_BLOCK):
    """:func:`attention` with the keys in tiles and one numba pass per tile (``kernel="numba"``).

    The work is cut into units, one per query block and key/value group, that share nothing but
    their inputs and write disjoint parts of the outputs; the threads of :func:`_pool` take them,
    longest first, each with its own buffers (:func:`_buffers`) and BLAS on one thread
    (:func:`blas_on_one_thread`), so a unit's numbers are the same on any thread and for any count.
    """
    H, m, d, G, n, rep, out, ent, sig, snk = _outputs(q, k, stats)
    width = min(key_block, n)

    def unit(b0, g):
        b1 = min(m, b0 + query_block)
        B = b1 - b0
        R = rep * B
        first, last = q_pos0 + b0, q_pos0 + b1
        qi = np.arange(first, last)
        s_buf, p_buf, o, pv, mx = _buffers(rep * min(query_block, m), width, d)
        o, pv, mx = o[:R], pv[:R], mx[:R]
        acc = np.empty((8, R))  # z, t, s1, s2, ref, p0, and the scratch dm, alpha of tiles.tile
        qg = q[g * rep:(g + 1) * rep, b0:b1].reshape(R, d)
        o[...] = 0.0
        for key0 in range(0, last, width):
            w = min(width, last - key0)
            s = s_buf[:R * w].reshape(R, w)
            p = p_buf[:R * w].reshape(R, w)
            np.matmul(qg, k[g, key0:key0 + w].T, out=s)
            if far is not None and key0 < last - far[2]:  # keys below last - window are far from some query
                cut = min(w, last - far[2] - key0)
                s_far = far[0][g * rep:(g + 1) * rep, b0:b1].reshape(R, d) @ far[1][g, key0:key0 + cut].T
                near = rerope_near(np.tile(qi, rep), np.arange(key0, key0 + cut), far[2])
                np.copyto(s[:, :cut], s_far, where=~near)
            tile(s, p, o, key0, first, B, mx, acc, stats)
            np.matmul(p, v[g, key0:key0 + w], out=pv)
            o += pv
        z = acc[0]
        res = (o / z[:, None]).astype(np.float32).reshape(rep, B, d)
        for r in range(rep):
            h = g * rep + r
            out[b0:b1, h * d:(h + 1) * d] = res[r]
        if stats:
            hs = slice(g * rep, (g + 1) * rep)
            cnt = np.tile(qi + 1.0, rep)
            mean = acc[2] / cnt
            ent[hs, b0:b1] = (np.log(z) - acc[1] / z).reshape(rep, B)
            sig[hs, b0:b1] = np.sqrt(np.maximum(acc[3] / cnt - mean * mean, 0.0)).reshape(rep, B)
            snk[hs, b0:b1] = (acc[5] / z).reshape(rep, B)

    units = sorted(((b0, g) for b0 in range(0, m, query_block) for g in range(G)), key=lambda u: (-u[0], u[1]))
    with blas_on_one_thread():
        for _ in _pool().map(lambda u: unit(*u), units):  # re-raises a unit's error here
            pass
    return out, ((ent, sig, snk) if stats else None)


_LOCAL = threading.local()


def _buffers(rows, width, d):
    """Work arrays of the calling thread for units of up to ``rows`` rows and ``width`` keys of dimension ``d``.

    ``(scores [rows*width], probabilities [rows*width], output [rows, d], product [rows, d], maximum [rows])``,
    float32, kept for the next unit of the same shape: fresh megabytes cost a page fault per 4 kB
    on first touch, about as much as a tile's pass.
    """
    key = (rows, width, d)
    if getattr(_LOCAL, "key", None) != key:
        f = np.float32
        _LOCAL.bufs = (np.empty(rows * width, f), np.empty(rows * width, f), np.empty((rows, d), f),
                       np.empty((rows, d), f), np.empty(rows, f))
        _LOCAL.key = key
    return _LOCAL.bufs


@functools.cache
def _blas_thread_setters():
    """OpenBLAS's ``openblas_set_num_threads_local`` (0.3.27 and later) in each OpenBLAS loaded, as a tuple.

    Found by path in ``/proc/self/maps`` (numpy's wheels bundle OpenBLAS under a private name);
    empty where there is none (another BLAS, an older OpenBLAS, not Linux).  Despite its name the
    setting is the process's (a product on another thread afterwards runs on one thread too); the
    function returns the count it replaces.
    """
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split(None, 5)[5].strip() for line in f
                            if line.count(" ") >= 5 and "openblas" in os.path.basename(line.rstrip()).lower()})
    except OSError:
        return ()
    setters = []
    for path in paths:
        try:
            fn = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        setters.append(fn)
    return tuple(setters)


_BLAS_LOCK = threading.Lock()
_BLAS_HELD = [0, []]  # fused calls running now, and the counts the first of them replaced


@contextlib.contextmanager
def blas_on_one_thread(when: bool = True):
    """BLAS on one thread inside (the fused kernel's units, :func:`matmul_rows`, a fused forward), each product on the thread that calls it.

    With BLAS's own threads beside the pool's, the two sets compete for the cores, and BLAS's
    threads spin waiting between calls.  The first of overlapping calls sets the count, the last puts the
    old one back; other threads of the process calling BLAS meanwhile get one thread too.  ``when=False``:
    nothing changes.
    """
    if not when:
        yield
        return
    with _BLAS_LOCK:
        if _BLAS_HELD[0] == 0:
            _BLAS_HELD[1] = [fn(1) for fn in _blas_thread_setters()]
        _BLAS_HELD[0] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_HELD[0] -= 1
            if _BLAS_HELD[0] == 0:
                for fn, count in zip(_blas_thread_setters(), _BLAS_HELD[1]):
                    fn(count)


def _attention_numpy(q, k, v, q_pos0, *, query_block, stats, far=None):
    """:func:`attention` in numpy passes over whole score rows (``kernel="numpy"``).

    Per block and key/value group the ``rep = H/G`` heads' queries are stacked into one product
    ``[rep*B, d] @ [d, last]``; the elementwise steps (mask, max, shift, moments for ``sigma``,
    exp, ``sum e s`` for the entropy) run on row slabs in threads (:func:`_rows`, :func:`split_rows`);
    ``e @ [v | 1]`` gives the output and the normaliser ``Z`` in one product. The two
    ``[rep*B, n]`` buffers are allocated once per call.
    """
    H, m, d, G, n, rep, out, ent, sig, snk = _outputs(q, k, stats)
    v1 = np.empty((G, n, d + 1), dtype=np.float32)
    v1[..., :d] = v
    v1[..., d] = 1.0
    size = rep * min(query_block, m) * (q_pos0 + m)
    s_buf = np.empty(size, dtype=np.float32)
    e_buf = np.empty(size, dtype=np.float32)
    for b0 in range(0, m, query_block):
        b1 = min(m, b0 + query_block)
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
            split_rows(lambda r0, r1, s=s, e=e, blk=blk: _rows(r0, r1, s, e, blk), R)
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


def matmul_rows(a, b, *, out=None):
    """``a @ b`` of 2-D float32 arrays, the rows of ``a`` split over the attention threads, BLAS on one thread in each.

    Split only where each thread gets at least :data:`MIN_SPLIT_ROWS` rows: past its small-matrix
    kernels OpenBLAS computes each row of a product alone, so the result has the bits of
    ``np.matmul(a, b)`` on the layers' shapes (``tests/models/test_attention.py``).  ``out``: a
    C-contiguous float32 array ``[rows of a, columns of b]`` to write into (fresh where ``None``).
    """
    if out is None:
        out = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    with blas_on_one_thread():
        split_rows(lambda r0, r1: np.matmul(a[r0:r1], b, out=out[r0:r1]), a.shape[0], MIN_SPLIT_ROWS)
    return out


#: The fewest rows of a product one thread takes (:func:`matmul_rows`, :func:`chunks`).
MIN_SPLIT_ROWS = 256


def chunks(r0, r1, most):
    """Consecutive ranges ``(a, b)`` covering ``r0 .. r1-1`` in as few as hold at most ``most`` rows each, of even sizes.

    Even sizes: none falls below ``most / 2`` where ``r1 - r0 >= most``, so every product stays on
    BLAS's large-matrix path (:func:`matmul_rows`).
    """
    k = max(1, -(-(r1 - r0) // most))
    cuts = np.linspace(r0, r1, k + 1).astype(int).tolist()
    return list(zip(cuts[:-1], cuts[1:]))


def split_rows(fn, rows, min_rows=1):
    """Run ``fn(j0, j1)`` over row ranges covering ``0..rows-1`` in the attention threads (``fn`` releases the GIL).

    At most one range per thread, none of fewer than ``min_rows`` rows (all on the calling thread
    where there are fewer than twice that).
    """
    k = min(_WORKERS, rows // max(1, min_rows))
    if k <= 1 or rows < 2 * k:
        fn(0, rows)
        return
    cuts = np.linspace(0, rows, k + 1).astype(int)
    list(_pool().map(lambda ab: fn(*ab), zip(cuts[:-1].tolist(), cuts[1:].tolist())))

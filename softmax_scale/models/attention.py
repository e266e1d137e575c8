"""Grouped-query causal attention in blocks of queries, with each query's statistics gathered in the same pass.

Memory grows like ``query_block x n`` per key/value group at most, never ``n x n`` per head.
Two implementations of one function, :func:`attention`:

- ``kernel="numba"`` (:func:`_attention_fused`): units of one query block and key/value group,
  each with the keys in tiles of :data:`KEY_BLOCK`; per tile the query-key product (BLAS), then one
  numba kernel (:func:`_tile`) that passes over each score row -- the masked row's maximum
  (:func:`_row_max`, a vector reduction), then shift and exponential in one loop
  (:func:`_shift_exp32`, a float32 exponential that LLVM vectorises in 8 lanes, within 1 ulp), the
  normaliser in float64 and, with statistics, the moments for ``sigma`` and the entropy sums,
  rescaling what the earlier tiles left when the maximum moves -- then the probability-value
  product (BLAS) into the running output.  A tile stays in cache between the three steps.  The
  units run on threads (:func:`_pool`), each unit on one thread, with BLAS set to one thread
  meanwhile (where the BLAS is OpenBLAS 0.3.27 or later, :func:`_blas_on_one_thread`), so the
  numbers do not depend on the thread count.
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

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .._kernels import _exp_chunk
from .._util.jit import jit
from ..schemes.rope import rerope_near

__all__ = ["KERNELS", "KEY_BLOCK", "attention", "split_rows"]

_MASK = np.float32(-1e30)  # finite "minus infinity": exp gives 0 and 0 * _MASK stays 0, never NaN

#: Threads for the elementwise attention steps (numba's kernels and numpy release the GIL).
_WORKERS = max(1, min(4, os.cpu_count() or 1))
_POOL = (0, None)  # (its size, the executor)

#: The implementations of :func:`attention`, the default first.
KERNELS = ("numba", "numpy")
#: Keys per tile of the fused kernel: a ``3 x 256``-row tile of scores and one of probabilities stay in cache.
KEY_BLOCK = 1024


def _pool():
    """The attention threads, :data:`_WORKERS` of them."""
    global _POOL
    if _POOL[0] != _WORKERS:
        _POOL = (_WORKERS, ThreadPoolExecutor(max_workers=_WORKERS))
    return _POOL[1]


def attention(q, k, v, q_pos0, *, query_block, stats, far=None, kernel="numpy"):
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

    Returns
    -------
    out : ndarray [m, H*d] float32
    stats : tuple or None
        ``(entropy, sigma, sink)``, each [H, m] float64: the Shannon entropy of the query's
        attention, the standard deviation of its logits over the keys it sees, the probability
        on key 0.
    """
    if kernel == "numba":
        return _attention_fused(q, k, v, q_pos0, query_block=query_block, stats=stats, far=far)
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
    (:func:`_blas_on_one_thread`), so a unit's numbers are the same on any thread and for any count.
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
        acc = np.empty((8, R))  # z, t, s1, s2, ref, p0, and the scratch dm, alpha of _tile
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
            _tile(s, p, o, key0, first, B, mx, acc, stats)
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
    with _blas_on_one_thread():
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
def _blas_on_one_thread():
    """BLAS on one thread while the fused kernel's units run, each product on the thread that calls it.

    With BLAS's own threads beside the pool's, the two sets compete for the cores and BLAS's
    spin waiting between calls.  The first of overlapping calls sets the count, the last puts the
    old one back; other threads of the process calling BLAS meanwhile get one thread too.
    """
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


if numba.config.DISABLE_JIT:

    def _f32_from_bits(b):
        return np.int32(b).view(np.float32)

    def _f32_bits(f):
        return np.float32(f).view(np.int32)

    def _fmax32(a, b):
        return np.float32(np.fmax(a, b))

else:

    @intrinsic
    def _f32_from_bits(typingctx, b):
        """Reinterpret the bits of an int32 as a float32 (LLVM ``bitcast``: free, vectorisable)."""

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.FloatType())

        return types.float32(types.int32), codegen

    @intrinsic
    def _f32_bits(typingctx, f):
        """Reinterpret the bits of a float32 as an int32."""

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(32))

        return types.int32(types.float32), codegen

    @intrinsic
    def _fmax32(typingctx, a, b):
        """``fmax`` of two float32 (LLVM ``maxnum``: a NaN operand gives the other; vectorisable as a reduction)."""

        def codegen(context, builder, signature, args):
            f = ir.FloatType()
            fn = builder.module.declare_intrinsic("llvm.maxnum", [f], ir.FunctionType(f, [f, f]))
            return builder.call(fn, args)

        return types.float32(types.float32, types.float32), codegen


_F = np.float32
_LOG2E32 = _F(1.4426950408889634)
_LN2_HI32, _LN2_LO32 = _F(0.693359375), _F(-2.12194440e-4)  # Cephes: ln 2 in two parts, k * _LN2_HI32 exact
_ROUND32 = _F(12582912.0)  # 1.5 * 2**23: adding it rounds to an integer, which its low bits then hold
_ROUND32_BITS = np.int32(_ROUND32.view(np.int32))
_P32 = tuple(_F(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
                             5.0000001201e-1))  # Cephes expf: e^r = 1 + r + r^2 P(r), |r| <= ln2/2
_EXP32_MIN = _F(-87.0)  # below it the exponential is under 1.7e-38 and is returned as 0


@jit()
def _shift_exp32(row, hi, m, out):
    """``row[j] -= m``, then ``out[j] = exp(row[j])`` in float32 for ``j < hi`` (``row[j] <= m``); vectorised by LLVM.

    Cephes' ``expf``: ``y = k ln2 + r`` by adding ``1.5 * 2**23`` (round to nearest, ``k`` read from
    the low bits), a degree-7 polynomial, ``2**k`` from its bits; within 1 ulp of the true value on
    ``[-87, 0]`` (``tests/models/test_attention.py``), 0 below ``-87`` (``e^-87`` beside a row's
    largest term, 1).
    """
    p0, p1, p2, p3, p4, p5 = _P32
    for j in range(hi):
        y = row[j] - m
        row[j] = y
        c = max(y, _EXP32_MIN)
        t = c * _LOG2E32 + _ROUND32
        kf = t - _ROUND32
        r = (c - kf * _LN2_HI32) - kf * _LN2_LO32
        p = ((((p0 * r + p1) * r + p2) * r + p3) * r + p4) * r + p5
        e = (p * (r * r) + r + _F(1.0)) * _f32_from_bits((_f32_bits(t) - _ROUND32_BITS + np.int32(127)) << np.int32(23))
        out[j] = e if y >= _EXP32_MIN else _F(0.0)


@jit()
def _row_max(row, hi):
    """``max row[j]`` over ``j < hi`` (``hi >= 1``), NaNs ignored like ``np.nanmax``; vectorised by LLVM.

    Through ``maxnum`` (:func:`_fmax32`), which LLVM turns into a vector reduction (a comparison or
    Python's ``max`` is not vectorised); exact in any order, so the result does not depend on the
    vector width.
    """
    m = row[0]
    for j in range(1, hi):
        m = _fmax32(m, row[j])
    return m


@jit(reassociate=True)
def _tile_sum(p, hi):
    """``sum p`` over ``j < hi`` in float64 (reassociated: vectorised)."""
    z = 0.0
    for j in range(hi):
        z += np.float64(p[j])
    return z


@jit(reassociate=True)
def _tile_sums(y, p, hi, c):
    """``sum p, sum p y, sum (y + c), sum (y + c)^2`` over ``j < hi``, in float64 (reassociated: vectorised)."""
    z = 0.0
    t = 0.0
    s1 = 0.0
    s2 = 0.0
    for j in range(hi):
        pj = np.float64(p[j])
        yj = np.float64(y[j])
        z += pj
        t += pj * yj
        u = yj + c
        s1 += u
        s2 += u * u
    return z, t, s1, s2


@jit()
def _tile(s, p, o, key0, first, B, mx, acc, stats):
    """One tile of keys ``key0 .. key0 + w - 1`` for the ``R = rep B`` rows of a query block and group, in place.

    Row ``r`` is query ``first + r % B``; it sees the tile's keys ``j < hi``.  ``s`` [R, w]: the
    scores in, shifted by the row's running maximum ``mx`` out; ``p`` [R, w] out: ``exp`` of those
    (0 for unseen keys); ``o`` [R, d]: the rows' output so far, rescaled to the new maximum.
    ``acc`` [8, R] float64 holds per row, relative to the running maximum: ``z = sum p``,
    ``t = sum p (s - mx)``, the moments ``sum (s - ref)`` and ``sum (s - ref)^2`` about the first
    tile's maximum ``ref``, and ``p0``, the weight of key 0 (rows 6 and 7 are scratch for the
    rescale factor).  The first tile (``key0 = 0``) starts every row.
    """
    R, w = s.shape
    d = o.shape[1]
    for r in range(R):
        hi = min(w, first + r % B - key0 + 1)
        if hi <= 0:
            p[r, :] = 0.0
            continue
        row = s[r]
        m = _row_max(row, hi)
        if key0 == 0:
            mx[r] = m
            acc[4, r] = m
            acc[0, r] = 0.0
            acc[1, r] = 0.0
            acc[2, r] = 0.0
            acc[3, r] = 0.0
        elif m > mx[r]:  # the maximum moves: what the earlier tiles left, to the new one
            dm = np.float64(mx[r]) - np.float64(m)
            acc[6, r] = dm
            _exp_chunk(1.0, acc[6, r:r + 1], 1, acc[7, r:r + 1])
            a = acc[7, r]
            acc[1, r] = a * (acc[1, r] + dm * acc[0, r])
            acc[0, r] *= a
            acc[5, r] *= a
            for i in range(d):
                o[r, i] *= a
            mx[r] = m
        m = mx[r]
        pr = p[r]
        _shift_exp32(row, hi, m, pr)
        pr[hi:] = 0.0
        if stats:
            zz, tt, u1, u2 = _tile_sums(row, pr, hi, np.float64(m) - acc[4, r])
            acc[0, r] += zz
            acc[1, r] += tt
            acc[2, r] += u1
            acc[3, r] += u2
        else:
            acc[0, r] += _tile_sum(pr, hi)
        if key0 == 0:
            acc[5, r] = pr[0]


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


def split_rows(fn, rows):
    """Run ``fn(j0, j1)`` over row ranges covering ``0..rows-1`` in the attention threads (``fn`` releases the GIL)."""
    k = _WORKERS
    if k == 1 or rows < 2 * k:
        fn(0, rows)
        return
    cuts = np.linspace(0, rows, k + 1).astype(int)
    list(_pool().map(lambda ab: fn(*ab), zip(cuts[:-1].tolist(), cuts[1:].tolist())))

"""Numba kernels: the streaming softmax trial over block-seeded random streams.

Private module.  The public wrappers live in :mod:`softmax_scale.montecarlo`.

Random numbers: :mod:`._rng_kernels`.

The trial
---------
One trial streams its ``n`` scores once, in chunks of ``_CHUNK`` drawn into a
small per-thread buffer (never a trials x n matrix).  For every scale ``a`` of
the grid it keeps, relative to the running maximum ``m`` and *excluding* one
maximal score, ``r = sum e^{a(s-m)}``, ``r2 = sum e^{2a(s-m)}`` and
``t = sum (s-m) e^{a(s-m)}`` (rescaled when the maximum moves).  Then, with
``Z = e^{am}(1 + r)``:

* ``sum p^2 = (1 + r2) / (1 + r)^2``
* ``1 - sum p^2 = (2r + r^2 - r2) / (1 + r)^2``  (no cancellation: ``r2 <= r``)
* ``H = log1p(r) - a t / (1 + r)``                 (both terms >= 0)
* ``log Z = a m + log1p(r)``

so nothing overflows for any scale and the gradient objective keeps its
relative accuracy when the softmax is nearly one-hot.

Where the time goes, and why the kernel looks like this
-------------------------------------------------------
Per score: one draw; per score and scale: one exponential and three sums.

* Draws: :func:`_fill` draws a chunk with the xoshiro state held in registers
  (a call per draw, storing the state each time, cost more than the draw).
* Exponential: :func:`_exp_chunk`, a branch-free Cody-Waite reduction and a
  degree-13 polynomial (relative error <= 2 ulp, exact ``e^0 = 1``, gradual
  underflow to 0) over the chunk, which LLVM vectorises (libm's ``exp``
  cannot be).
* Sums: a plain loop compiled with reassociation allowed (``jit(reassociate=
  True)``), the only way LLVM vectorises a reduction.  The bits then depend on
  the machine's vector width, never on the number of threads.
* An increasing arithmetic grid (:func:`grid_step`) shares exponentials within
  groups of ``_GROUP`` scales: ``e^{a_{g+j} x} = e^{a_g x} (e^{h x})^j``, one
  product per score and scale, relative error ~``j`` ulp, used on a chunk only
  when no factor of the group falls below ``e^-700`` (so there is no loss to
  subnormals).  A scale then gets the same value to ~1e-15, but not the same
  bits, as when it is computed alone; a single scale (``alpha=x`` or
  ``alpha=[x]``) never shares, so the scalar and array forms of a call agree
  bit for bit.

Everything here also runs with ``NUMBA_DISABLE_JIT=1`` (as the draws of
:mod:`._rng_kernels` do): the statistics are then the same to rounding.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic

from ._rng_kernels import _draw, _fill
from ._util.jit import jit

#: Scores drawn per chunk of a trial (the per-thread buffers are a few times this, in float64).
_CHUNK = 512


# ---------------------------------------------------------------------------------------------
# Vectorisable exponential and sums over a chunk

if numba.config.DISABLE_JIT:

    def _bits_to_float(b):
        return np.int64(b).view(np.float64)

else:

    @intrinsic
    def _bits_to_float(typingctx, b):
        """Reinterpret the bits of an int64 as a float64 (LLVM ``bitcast``: free, vectorisable)."""

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.DoubleType())

        return types.float64(types.int64), codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm: 32 significant bits, so k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_EXP_MIN = -746.0  # exp(-746) < 2**-1075 rounds to 0
# 1/k! for k = 2..13: |r| <= ln2/2 leaves a Taylor remainder below 4e-18
_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13 = [1.0 / math.factorial(k) for k in range(2, 14)]
#: Scales sharing one anchor exponential on an arithmetic grid (bounds the chain of products).
_GROUP = 16
#: Sharing is used on a chunk only if no exponential of the group falls below e^-_SHARE_MIN_ARG.
_SHARE_MIN_ARG = -700.0


@jit()
def _exp_chunk(a, x, cnt, out):
    """``out[i] = exp(a * x[i])`` for ``i < cnt`` and ``a * x[i] <= 700``; vectorised by LLVM.

    Cody-Waite reduction ``a x = k ln2 + r``, ``|r| <= ln2/2``, a degree-13
    Taylor polynomial (remainder < 4e-18), and ``2**k`` built from its bits in
    two factors so that subnormal results round once.  Relative error <= 2 ulp;
    ``exp(0) = 1`` exactly; ``exp(y) = 0`` for ``y < -745.2``.
    """
    for i in range(cnt):
        y = max(a * x[i], _EXP_MIN)
        kf = np.floor(y * _LOG2E + 0.5)
        r = (y - kf * _LN2_HI) - kf * _LN2_LO
        p = _C13
        p = p * r + _C12
        p = p * r + _C11
        p = p * r + _C10
        p = p * r + _C9
        p = p * r + _C8
        p = p * r + _C7
        p = p * r + _C6
        p = p * r + _C5
        p = p * r + _C4
        p = p * r + _C3
        p = p * r + _C2
        p = p * r + 1.0
        p = p * r + 1.0
        k = np.int64(kf)
        k1 = k >> 1
        out[i] = p * _bits_to_float((k1 + 1023) << 52) * _bits_to_float((k - k1 + 1023) << 52)


@jit(reassociate=True)
def _chunk_sums(x, e, cnt, acc):
    """``acc[0..2] = sum e, sum e^2, sum x e`` over ``i < cnt`` (vectorised: reassociated sums)."""
    sr = 0.0
    sq = 0.0
    st = 0.0
    for i in range(cnt):
        ei = e[i]
        sr += ei
        sq += ei * ei
        st += x[i] * ei
    acc[0] = sr
    acc[1] = sq
    acc[2] = st


@jit(reassociate=True)
def _mul_sums(x, e, g, cnt, acc):
    """``e[i] *= g[i]``, then the sums of :func:`_chunk_sums`, in one pass."""
    sr = 0.0
    sq = 0.0
    st = 0.0
    for i in range(cnt):
        ei = e[i] * g[i]
        e[i] = ei
        sr += ei
        sq += ei * ei
        st += x[i] * ei
    acc[0] = sr
    acc[1] = sq
    acc[2] = st


@jit()
def _chunk_max(x, cnt):
    """Largest of ``x[:cnt]`` (``cnt >= 1``; no NaN), branch-free."""
    m = x[0]
    for i in range(1, cnt):
        m = max(m, x[i])
    return m


@jit()
def _chunk_min(x, cnt):
    """Smallest of ``x[:cnt]`` (0 for ``cnt = 0``)."""
    m = 0.0
    for i in range(cnt):
        m = min(m, x[i])
    return m


# ---------------------------------------------------------------------------------------------
# The trial and the blocks


@jit()
def _trial(alphas, step, n, kind, param, sample, st, ws, r, r2, t, sp2, ent, grad, logz, row):
    """Stream ``n`` scores; write the statistics for every scale into ``[row, :]``.

    ``ws`` is a (5, _CHUNK) float64 work array (scores, shifted scores,
    exponentials, shared factors, sums).  ``step > 0`` says that ``alphas`` is
    the arithmetic grid ``alphas[0] + k step``: within each group of
    ``_GROUP`` scales, ``e^{a_{g+j} x} = e^{a_g x} (e^{step x})^j`` (``j < 16``
    products: relative error ~1e-15), used on a chunk only when no factor
    underflows.
    """
    na = alphas.shape[0]
    buf = ws[0]
    xb = ws[1]
    eb = ws[2]
    gb = ws[3]
    acc = ws[4]
    m = 0.0
    first = True
    done = 0
    while done < n:
        cnt = min(_CHUNK, n - done)
        done += cnt
        _fill(kind, param, sample, st, buf, cnt)
        cm = _chunk_max(buf, cnt)
        if first or cm > m:
            j = 0
            while buf[j] != cm:  # the first maximal score (rare after the first chunks)
                j += 1
            if first:
                for k in range(na):
                    r[k] = 0.0
                    r2[k] = 0.0
                    t[k] = 0.0
                first = False
            else:
                delta = m - cm  # < 0: the old maximum joins the others
                for k in range(na):
                    f = np.exp(alphas[k] * delta)
                    t[k] = f * (t[k] + delta * (r[k] + 1.0))
                    r[k] = (r[k] + 1.0) * f
                    r2[k] = (r2[k] + 1.0) * f * f
            m = cm
            buf[j] = buf[0]  # the new maximum is left out of the sums; the first score takes its place
            lo = 1
        else:
            lo = 0
        cnt -= lo
        for i in range(cnt):
            xb[i] = buf[lo + i] - m
        xmin = _chunk_min(xb, cnt) if step > 0.0 else 0.0
        shared = False
        for k in range(na):
            if step > 0.0 and k % _GROUP == 0:
                last = min(na, k + _GROUP) - 1
                shared = last > k and alphas[last] * xmin > _SHARE_MIN_ARG
                if shared:
                    _exp_chunk(step, xb, cnt, gb)
            if shared and k % _GROUP != 0:
                _mul_sums(xb, eb, gb, cnt, acc)
            else:
                _exp_chunk(alphas[k], xb, cnt, eb)
                _chunk_sums(xb, eb, cnt, acc)
            r[k] += acc[0]
            r2[k] += acc[1]
            t[k] += acc[2]
    for k in range(na):
        a = alphas[k]
        s0 = 1.0 + r[k]
        inv2 = 1.0 / (s0 * s0)
        sp2[row, k] = (1.0 + r2[k]) * inv2
        grad[row, k] = a * ((2.0 * r[k] + r[k] * r[k] - r2[k]) * inv2)
        ent[row, k] = np.log1p(r[k]) - a * t[k] / s0
        logz[row, k] = a * m + np.log1p(r[k])


@jit()
def _run_block(b, alphas, step, n, trials, block, st, kind, param, sample, sp2, ent, grad, logz):
    """All trials of block ``b`` (rows ``b*block ..``), advancing the block's state ``st``."""
    na = alphas.shape[0]
    ws = np.empty((5, _CHUNK))
    r = np.empty(na)
    r2 = np.empty(na)
    t = np.empty(na)
    lo = b * block
    hi = min(trials, lo + block)
    for row in range(lo, hi):
        _trial(alphas, step, n, kind, param, sample, st, ws, r, r2, t, sp2, ent, grad, logz, row)


# Two distinct Python functions (not one function jitted twice): numba's on-disk cache is keyed
# by the function, so one source jitted with and without ``parallel`` would share cache entries.
@jit(parallel=True)
def mc_blocks_parallel(alphas, step, n, trials, block, states, kind, param, sample, first_block, sp2, ent, grad, logz):
    """Run blocks ``first_block .. first_block + len(states) - 1`` in parallel (rows are global trial indices)."""
    for bi in prange(states.shape[0]):
        st = states[bi].copy()
        _run_block(first_block + bi, alphas, step, n, trials, block, st, kind, param, sample, sp2, ent, grad, logz)


@jit()
def mc_blocks_serial(alphas, step, n, trials, block, states, kind, param, sample, first_block, sp2, ent, grad, logz):
    """Same as :func:`mc_blocks_parallel`, on one thread; the same bits."""
    for bi in range(states.shape[0]):
        st = states[bi].copy()
        _run_block(first_block + bi, alphas, step, n, trials, block, st, kind, param, sample, sp2, ent, grad, logz)


@jit()
def draw_scores(n, trials, block, states, kind, param, sample):
    """The exact scores the trial kernel sees, as a (trials, n) matrix (tests only).

    Drawn one by one with :func:`_draw`; the kernel fills chunks with
    :func:`_fill`, which must give the same sequence.
    """
    out = np.empty((trials, n))
    for b in range(states.shape[0]):
        st = states[b].copy()
        lo = b * block
        hi = min(trials, lo + block)
        for row in range(lo, hi):
            for i in range(n):
                out[row, i] = _draw(kind, param, sample, st)
    return out


@jit(parallel=True)
def sample_only(n, trials, block, states, kind, param, sample):
    """Draw the same scores as the trial kernel, in the same chunks, and only sum them (the sampling floor)."""
    out = np.zeros(trials)
    for b in prange(states.shape[0]):
        st = states[b].copy()
        buf = np.empty(_CHUNK)
        lo = b * block
        hi = min(trials, lo + block)
        for row in range(lo, hi):
            acc = 0.0
            done = 0
            while done < n:
                cnt = min(_CHUNK, n - done)
                done += cnt
                _fill(kind, param, sample, st, buf, cnt)
                for i in range(cnt):
                    acc += buf[i]
            out[row] = acc
    return out


@jit()
def exp_values(x):
    """The kernel's exponential of every entry of ``x`` (1-D, entries <= 700; tests only)."""
    out = np.empty(x.shape[0])
    _exp_chunk(1.0, x, x.shape[0], out)
    return out


def grid_step(alphas: np.ndarray) -> float:
    """``h`` if ``alphas`` is an increasing arithmetic grid ``a0 + k h`` to a few ulp, else 0.

    Only then may the kernel share exponentials between the scales of a group.
    """
    na = alphas.size
    if na < 2:
        return 0.0
    h = (alphas[-1] - alphas[0]) / (na - 1)
    if not h > 0.0:
        return 0.0
    ideal = alphas[0] + h * np.arange(na)
    if np.max(np.abs(alphas - ideal)) > 8.0 * np.spacing(alphas[-1]):
        return 0.0
    return float(h)


def block_layout(trials: int, max_blocks: int = 256) -> tuple[int, int]:
    """Trials per block and number of blocks: a function of ``trials`` only, never of threads."""
    nblocks = min(trials, max_blocks)
    block = -(-trials // nblocks)
    nblocks = -(-trials // block)
    return block, nblocks


def block_states(seed_seq: np.random.SeedSequence, nblocks: int) -> np.ndarray:
    """xoshiro256** states for blocks ``0..nblocks-1``: row ``b`` depends only on the seed and ``b``."""
    states = seed_seq.generate_state(4 * nblocks, np.uint64).reshape(nblocks, 4)
    zero = ~states.any(axis=1)
    states[zero, 0] = 1  # the all-zero state is the one xoshiro cannot leave
    return states


# ---------------------------------------------------------------------------------------------
# weighted samples (softmax_scale.distributions.WeightedSample)


@jit()
def sort_floats(v):
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


@jit()
def log_mgf_weighted(a, x, logw, out):
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

"""The numba kernels of the fused attention (``kernel="numba"`` of :func:`~softmax_scale.models.attention.attention`).

A tile is the ``R x w`` block of one query block's scores (``R = rep x B`` rows: the ``rep`` heads
of a key/value group over ``B`` queries) against ``w`` keys.  :func:`tile` turns it into
probabilities in place of the scores' copy, keeping per row the normaliser and the running output
rescaled to one reference:

- with statistics, each tile's exact masked maximum (:func:`row_max`) is the reference, and the
  shifted scores are kept for the moments of ``sigma`` and the entropy (:func:`tile_sums`);
- without (:func:`_row_plain`), a row's first tile's maximum stays its reference: later tiles'
  exponentials are clamped at ``e^30`` (:func:`exp_clamped32`) and the tile's sum checked, so a score
  29 or more above the reference moves the reference to the tile's maximum and the tile is redone;
  no other pass finds a maximum.

The exponential is Cephes' ``expf`` in float32 (:func:`shift_exp32`), which LLVM vectorises,
within 1 ulp; sums are float64.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .._kernels import _exp_chunk
from .._util.jit import jit

__all__ = ["exp_clamped32", "row_max", "shift_exp32", "tile", "tile_sum", "tile_sums"]


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
def _expf(y, c):
    """``e^c`` in float32 by Cephes' ``expf`` (``-87 <= c <= 88``), or 0 where ``y < -87`` (``c`` is ``y`` clamped)."""
    p0, p1, p2, p3, p4, p5 = _P32
    t = c * _LOG2E32 + _ROUND32
    kf = t - _ROUND32
    r = (c - kf * _LN2_HI32) - kf * _LN2_LO32
    p = ((((p0 * r + p1) * r + p2) * r + p3) * r + p4) * r + p5
    e = (p * (r * r) + r + _F(1.0)) * _f32_from_bits((_f32_bits(t) - _ROUND32_BITS + np.int32(127)) << np.int32(23))
    return e if y >= _EXP32_MIN else _F(0.0)


@jit()
def shift_exp32(row, hi, m, out):
    """``row[j] -= m``, then ``out[j] = exp(row[j])`` in float32 for ``j < hi`` (``row[j] <= m``); vectorised by LLVM.

    Cephes' ``expf``: ``y = k ln2 + r`` by adding ``1.5 * 2**23`` (round to nearest, ``k`` read from
    the low bits), a degree-7 polynomial, ``2**k`` from its bits; within 1 ulp of the true value on
    ``[-87, 0]`` (``tests/models/test_attention.py``), 0 below ``-87`` (``e^-87`` beside a row's
    largest term, 1).
    """
    for j in range(hi):
        y = row[j] - m
        row[j] = y
        out[j] = _expf(y, max(y, _EXP32_MIN))


@jit()
def row_max(row, hi):
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
def tile_sum(p, hi):
    """``sum p`` over ``j < hi`` in float64 (reassociated: vectorised)."""
    z = 0.0
    for j in range(hi):
        z += np.float64(p[j])
    return z


@jit(reassociate=True)
def tile_sums(y, p, hi, c):
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
def tile(s, p, o, key0, first, B, mx, acc, stats):
    """One tile of keys ``key0 .. key0 + w - 1`` for the ``R = rep B`` rows of a query block and group, in place.

    Row ``r`` is query ``first + r % B``; it sees the tile's keys ``j < hi``.  ``s`` [R, w]: the
    scores in, shifted by the row's running maximum ``mx`` out; ``p`` [R, w] out: ``exp`` of those
    (0 for unseen keys); ``o`` [R, d]: the rows' output so far, rescaled to the new maximum.
    ``acc`` [8, R] float64 holds per row, relative to the running maximum: ``z = sum p``,
    ``t = sum p (s - mx)``, the moments ``sum (s - ref)`` and ``sum (s - ref)^2`` about the first
    tile's maximum ``ref``, and ``p0``, the weight of key 0 (rows 6 and 7 are scratch for the
    rescale factor).  The first tile (``key0 = 0``) starts every row.  Without ``stats`` each row is
    :func:`_row_plain`'s: ``s`` is left as it was and only ``z`` and ``p0`` are kept, relative to the
    row's reference ``mx``.
    """
    R, w = s.shape
    for r in range(R):
        hi = min(w, first + r % B - key0 + 1)
        if hi <= 0:
            p[r, :] = 0.0
        elif stats:
            _row_stats(s[r], p[r], r, hi, key0, o, mx, acc)
        else:
            _row_plain(s[r], p[r], r, hi, key0, o, mx, acc)


@jit()
def _row_stats(row, pr, r, hi, key0, o, mx, acc):
    """Row ``r`` of :func:`tile` with statistics: the tile's exact maximum, the shifted scores kept for the moments."""
    m = row_max(row, hi)
    if key0 == 0:
        mx[r] = m
        acc[4, r] = m
        acc[0, r] = 0.0
        acc[1, r] = 0.0
        acc[2, r] = 0.0
        acc[3, r] = 0.0
    elif m > mx[r]:  # the maximum moves: what the earlier tiles left, to the new one
        dm = np.float64(mx[r]) - np.float64(m)
        t0 = acc[1, r] + dm * acc[0, r]
        _rescale(r, m, mx, acc, o)
        acc[1, r] = acc[7, r] * t0
    m = mx[r]
    shift_exp32(row, hi, m, pr)
    pr[hi:] = 0.0
    zz, tt, u1, u2 = tile_sums(row, pr, hi, np.float64(m) - acc[4, r])
    acc[0, r] += zz
    acc[1, r] += tt
    acc[2, r] += u1
    acc[3, r] += u2
    if key0 == 0:
        acc[5, r] = pr[0]


#: Where :func:`exp_clamped32` clamps the shifted score: ``e^30`` and a tile's sum stay far inside float32.
_CLAMP32 = _F(30.0)
#: A tile's sum at or above it (``e^29``) may hold a clamped exponential: :func:`_row_plain` redoes that row.
_REDO_SUM = float(np.exp(29.0))


@jit()
def exp_clamped32(row, hi, m, out):
    """``out[j] = exp(min(row[j] - m, 30))`` in float32 for ``j < hi`` (:func:`shift_exp32`'s ``expf``, ``row`` unchanged)."""
    for j in range(hi):
        y = row[j] - m
        out[j] = _expf(y, min(max(y, _EXP32_MIN), _CLAMP32))


@jit()
def _rescale(r, m, mx, acc, o):
    """Row ``r``'s reference moves from ``mx[r]`` to ``m``: what the earlier tiles left (normaliser, key 0, output) to it."""
    acc[6, r] = np.float64(mx[r]) - np.float64(m)
    _exp_chunk(1.0, acc[6, r:r + 1], 1, acc[7, r:r + 1])
    a = acc[7, r]
    acc[0, r] *= a
    acc[5, r] *= a
    for i in range(o.shape[1]):
        o[r, i] *= a
    mx[r] = m


@jit()
def _row_plain(row, pr, r, hi, key0, o, mx, acc):
    """Row ``r`` of :func:`tile` without statistics: ``row`` left as it was, ``acc[0]`` the normaliser relative to ``mx``.

    A row's reference ``mx`` is its first tile's maximum; a later tile's exponentials relative to it
    are clamped at ``e^30`` (:func:`exp_clamped32`), and where the tile's sum reaches ``e^29`` (a score
    29 or more above the reference, or thousands of keys near it) the reference moves to the tile's
    maximum (:func:`row_max`) and the row's tile is computed again.
    """
    if key0 == 0:
        mx[r] = row_max(row, hi)
        acc[0, r] = 0.0
    exp_clamped32(row, hi, mx[r], pr)
    z = tile_sum(pr, hi)
    if z >= _REDO_SUM:
        _rescale(r, row_max(row, hi), mx, acc, o)
        exp_clamped32(row, hi, mx[r], pr)
        z = tile_sum(pr, hi)
    pr[hi:] = 0.0
    acc[0, r] += z
    if key0 == 0:
        acc[5, r] = pr[0]

"""Numba kernels: the random streams of the Monte Carlo trials, one xoshiro256** generator per block.

Private module; :mod:`._kernels` runs the trials on these draws.

Each block of trials owns a xoshiro256** generator whose 256-bit state comes
from ``SeedSequence(seed).generate_state`` (words ``4b..4b+3`` for block
``b``), so the draws of a block depend only on ``(seed, block index)`` and the
results are bit-identical for any number of threads.  Normal draws use a
256-layer ziggurat (Marsaglia & Tsang 2000, the layout of numpy's
``standard_normal``: one 64-bit word gives the layer, the sign and 52 bits of
abscissa, and 99% of draws cost that one word and a table look-up); cosine
scores are ``(X - Y) / (X + Y)`` with ``X, Y`` independent ``Gamma((d-1)/2)``
(Marsaglia-Tsang), i.e. ``2 Beta - 1``, with the exact shortcuts
``cos(2 pi U)`` for ``d = 2`` and ``2U - 1`` for ``d = 3``.

Everything here also runs with ``NUMBA_DISABLE_JIT=1``: the only wrapping uint64 operations are the
two multiplications of xoshiro, done by :func:`_wmul`, which silences numpy's overflow warning in pure
Python; the draws are then the same bits.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._util.jit import jit

__all__ = ["_draw", "_fill", "_next_u64", "_uniform"]

_U53 = 1.0 / 9007199254740992.0  # 2**-53
_TWO_PI = 2.0 * np.pi


# ---------------------------------------------------------------------------------------------
# xoshiro256**


if numba.config.DISABLE_JIT:  # pure Python: numpy uint64 scalars warn when a product wraps

    def _wmul(x, c):
        with np.errstate(over="ignore"):
            return x * c

else:

    @jit()
    def _wmul(x, c):
        return x * c


@jit()
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@jit()
def _xoshiro(s0, s1, s2, s3):
    """One xoshiro256** step on a state held in locals: ``(word, s0, s1, s2, s3)``."""
    u = _wmul(_rotl(_wmul(s1, np.uint64(5)), 7), np.uint64(9))
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return u, s0, s1, s2, s3


@jit()
def _next_u64(st):
    """xoshiro256** step on the state ``st`` (uint64[4]) in memory: :func:`_xoshiro`, the state stored back."""
    result, st[0], st[1], st[2], st[3] = _xoshiro(st[0], st[1], st[2], st[3])
    return result


@jit()
def _uniform(st):
    """Uniform double in [0, 1) with 53 random bits."""
    return np.float64(_next_u64(st) >> np.uint64(11)) * _U53


# ---------------------------------------------------------------------------------------------
# Normal: 256-layer ziggurat


def _ziggurat_tables():
    """Marsaglia & Tsang's ``zigset`` for 256 layers and 52-bit abscissae (numpy's constants)."""
    r, v, m1 = 3.6541528853610088, 0.00492867323399, 2.0**52
    ki = np.zeros(256, dtype=np.uint64)
    wi = np.zeros(256)
    fi = np.zeros(256)
    dn = tn = r
    q = v / math.exp(-0.5 * dn * dn)
    ki[0] = int(dn / q * m1)
    wi[0], wi[255] = q / m1, dn / m1
    fi[0], fi[255] = 1.0, math.exp(-0.5 * dn * dn)
    for i in range(254, 0, -1):
        dn = math.sqrt(-2.0 * math.log(v / dn + math.exp(-0.5 * dn * dn)))
        ki[i + 1] = int(dn / tn * m1)
        tn = dn
        fi[i] = math.exp(-0.5 * dn * dn)
        wi[i] = dn / m1
    return ki, wi, fi, r


_ZKI, _ZWI, _ZFI, _ZR = _ziggurat_tables()
_ZINV_R = 1.0 / _ZR
_ZWS = np.concatenate([_ZWI, -_ZWI])  # signed widths: index = layer + 256 * sign bit


@jit()
def _normal_rest(st, u):
    """Finish a ziggurat draw whose first word ``u`` missed the fast path (1% of draws)."""
    while True:
        j = np.int64(u & np.uint64(0x1FF))
        idx = j & 0xFF
        rabs = (u >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF)
        x = np.float64(rabs) * _ZWS[j]
        if rabs < _ZKI[idx]:
            return x
        if idx == 0:  # the tail beyond r (Marsaglia 1964)
            while True:
                xx = -_ZINV_R * np.log1p(-_uniform(st))
                yy = -np.log1p(-_uniform(st))
                if yy + yy > xx * xx:
                    return -(_ZR + xx) if j >= 256 else _ZR + xx
        elif (_ZFI[idx - 1] - _ZFI[idx]) * _uniform(st) + _ZFI[idx] < np.exp(-0.5 * x * x):
            return x
        u = _next_u64(st)


@jit()
def _normal(st):
    """Standard normal by the ziggurat (one xoshiro word per draw 99% of the time).

    Bits 0-7 of the word pick the layer, bit 8 the sign (folded into the
    512-entry signed width table, so the fast path has no data-dependent
    branch but the acceptance test) and bits 9-60 the abscissa.
    """
    u = _next_u64(st)
    j = np.int64(u & np.uint64(0x1FF))
    rabs = (u >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF)
    if rabs < _ZKI[j & 0xFF]:
        return np.float64(rabs) * _ZWS[j]
    return _normal_rest(st, u)


@jit()
def _fill_normal(st, buf, cnt):
    """``buf[:cnt]`` = the next ``cnt`` draws of :func:`_normal`, with the state kept in registers."""
    s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
    for i in range(cnt):
        # the state in locals, not _next_u64: storing it back to memory every draw cost more than the
        # draw (benchmarks/results.md); tests check both give the same bits
        u, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
        j = np.int64(u & np.uint64(0x1FF))
        rabs = (u >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF)
        if rabs < _ZKI[j & 0xFF]:
            buf[i] = np.float64(rabs) * _ZWS[j]
        else:
            st[0], st[1], st[2], st[3] = s0, s1, s2, s3
            buf[i] = _normal_rest(st, u)
            s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
    st[0], st[1], st[2], st[3] = s0, s1, s2, s3


@jit()
def _gamma(shape, st):
    """Gamma(shape, 1) for shape >= 1 (Marsaglia & Tsang 2000)."""
    dd = shape - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * dd)
    while True:
        x = _normal(st)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = _uniform(st)
        x2 = x * x
        if u < 1.0 - 0.0331 * x2 * x2:
            return dd * v
        if np.log(u) < 0.5 * x2 + dd * (1.0 - v + np.log(v)):
            return dd * v


@jit()
def _draw(kind, param, sample, st):
    """One score: kind 0 normal, 1 cosine (param = (d-1)/2), 2 empirical."""
    if kind == 0:
        return _normal(st)
    if kind == 1:
        if param == 0.5:  # d = 2: cosine of a uniform angle
            return np.cos(_TWO_PI * _uniform(st))
        if param == 1.0:  # d = 3: uniform on (-1, 1)
            return 2.0 * _uniform(st) - 1.0
        x = _gamma(param, st)
        y = _gamma(param, st)
        return (x - y) / (x + y)
    m = sample.shape[0]
    i = np.int64(_uniform(st) * m)
    if i >= m:
        i = m - 1
    return sample[i]


@jit()
def _fill_cosine(param, st, buf, cnt):
    """Cosine scores ``(x - y) / (x + y)``, ``x, y ~ Gamma(param)``: :func:`_draw`'s bits, state in registers.

    The same words in the same order as :func:`_gamma` (ziggurat normal, then a uniform, per
    attempt); only the state stays in locals instead of going through memory at every word,
    which made cosine draws ~15x the cost of normal ones.  The rare ziggurat miss goes through
    :func:`_normal_rest` on the stored state.
    """
    dd = param - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * dd)
    s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
    for i in range(cnt):
        x = 0.0
        y = 0.0
        for k in range(2):
            while True:
                u, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
                j = np.int64(u & np.uint64(0x1FF))
                rabs = (u >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF)
                if rabs < _ZKI[j & 0xFF]:
                    z = np.float64(rabs) * _ZWS[j]
                else:
                    st[0], st[1], st[2], st[3] = s0, s1, s2, s3
                    z = _normal_rest(st, u)
                    s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
                v = 1.0 + c * z
                if v <= 0.0:
                    continue
                v = v * v * v
                w, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
                uu = np.float64(w >> np.uint64(11)) * _U53
                z2 = z * z
                if uu < 1.0 - 0.0331 * z2 * z2 or np.log(uu) < 0.5 * z2 + dd * (1.0 - v + np.log(v)):
                    break
            if k == 0:
                x = dd * v
            else:
                y = dd * v
        buf[i] = (x - y) / (x + y)
    st[0], st[1], st[2], st[3] = s0, s1, s2, s3


@jit()
def _fill(kind, param, sample, st, buf, cnt):
    """``buf[:cnt]`` = the next ``cnt`` scores, exactly as ``cnt`` calls of :func:`_draw` give them."""
    if kind == 0:
        _fill_normal(st, buf, cnt)
    elif kind == 1 and param > 1.0:  # d >= 4 (d = 2, 3 have their own forms in _draw)
        _fill_cosine(param, st, buf, cnt)
    else:
        for i in range(cnt):
            buf[i] = _draw(kind, param, sample, st)

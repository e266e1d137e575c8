"""Numba kernels: block-seeded random streams and the streaming softmax trial.

Private module.  The public wrappers live in :mod:`softmax_scale.montecarlo`.

Random numbers
--------------
Each block of trials owns a xoshiro256** generator whose 256-bit state comes
from ``SeedSequence(seed).generate_state`` (words ``4b..4b+3`` for block
``b``), so the draws of a block depend only on ``(seed, block index)`` and the
results are bit-identical for any number of threads.  Normal draws use
Marsaglia's polar method; cosine scores are ``(X - Y) / (X + Y)`` with ``X, Y``
independent ``Gamma((d-1)/2)`` (Marsaglia-Tsang), i.e. ``2 Beta - 1``, with the
exact shortcuts ``cos(2 pi U)`` for ``d = 2`` and ``2U - 1`` for ``d = 3``.

The trial
---------
One trial streams its ``n`` scores once.  For every scale ``a`` of the grid it
keeps, relative to the running maximum ``m`` and *excluding* the maximal score,
``r = sum e^{a(s-m)}``, ``r2 = sum e^{2a(s-m)}`` and ``t = sum (s-m) e^{a(s-m)}``
(rescaled when the maximum moves).  Then, with ``Z = e^{am}(1 + r)``:

* ``sum p^2 = (1 + r2) / (1 + r)^2``
* ``1 - sum p^2 = (2r + r^2 - r2) / (1 + r)^2``  (no cancellation: ``r2 <= r``)
* ``H = log1p(r) - a t / (1 + r)``                 (both terms >= 0)
* ``log Z = a m + log1p(r)``

so nothing overflows for any scale and the gradient objective keeps its
relative accuracy when the softmax is nearly one-hot.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import jit

_U53 = 1.0 / 9007199254740992.0  # 2**-53
_TWO_PI = 2.0 * np.pi


@jit()
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@jit()
def _next_u64(st):
    """xoshiro256** step on the state ``st`` (uint64[4])."""
    s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
    result = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    st[0], st[1], st[2], st[3] = s0, s1, s2, s3
    return result


@jit()
def _uniform(st):
    """Uniform double in [0, 1) with 53 random bits."""
    return np.float64(_next_u64(st) >> np.uint64(11)) * _U53


@jit()
def _normal(st, spare):
    """Standard normal by Marsaglia's polar method; ``spare`` = [has_spare, value]."""
    if spare[0] != 0.0:
        spare[0] = 0.0
        return spare[1]
    while True:
        u = 2.0 * _uniform(st) - 1.0
        v = 2.0 * _uniform(st) - 1.0
        q = u * u + v * v
        if 0.0 < q < 1.0:
            break
    f = np.sqrt(-2.0 * np.log(q) / q)
    spare[0] = 1.0
    spare[1] = v * f
    return u * f


@jit()
def _gamma(shape, st, spare):
    """Gamma(shape, 1) for shape >= 1 (Marsaglia & Tsang 2000)."""
    dd = shape - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * dd)
    while True:
        x = _normal(st, spare)
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
def _draw(kind, param, sample, st, spare):
    """One score: kind 0 normal, 1 cosine (param = (d-1)/2), 2 empirical."""
    if kind == 0:
        return _normal(st, spare)
    if kind == 1:
        if param == 0.5:  # d = 2: cosine of a uniform angle
            return np.cos(_TWO_PI * _uniform(st))
        if param == 1.0:  # d = 3: uniform on (-1, 1)
            return 2.0 * _uniform(st) - 1.0
        x = _gamma(param, st, spare)
        y = _gamma(param, st, spare)
        return (x - y) / (x + y)
    m = sample.shape[0]
    i = np.int64(_uniform(st) * m)
    if i >= m:
        i = m - 1
    return sample[i]


@jit()
def _trial(alphas, n, kind, param, sample, st, spare, r, r2, t, sp2, ent, grad, logz, row):
    """Stream ``n`` scores; write the statistics for every scale into ``[row, :]``."""
    na = alphas.shape[0]
    m = _draw(kind, param, sample, st, spare)
    for k in range(na):
        r[k] = 0.0
        r2[k] = 0.0
        t[k] = 0.0
    for _ in range(1, n):
        s = _draw(kind, param, sample, st, spare)
        if s > m:
            delta = m - s  # < 0: the old maximum joins the others
            for k in range(na):
                f = np.exp(alphas[k] * delta)
                t[k] = f * (t[k] + delta * (r[k] + 1.0))
                r[k] = (r[k] + 1.0) * f
                r2[k] = (r2[k] + 1.0) * f * f
            m = s
        else:
            x = s - m
            for k in range(na):
                e = np.exp(alphas[k] * x)
                r[k] += e
                r2[k] += e * e
                t[k] += x * e
    for k in range(na):
        a = alphas[k]
        s0 = 1.0 + r[k]
        inv2 = 1.0 / (s0 * s0)
        sp2[row, k] = (1.0 + r2[k]) * inv2
        grad[row, k] = a * ((2.0 * r[k] + r[k] * r[k] - r2[k]) * inv2)
        ent[row, k] = np.log1p(r[k]) - a * t[k] / s0
        logz[row, k] = a * m + np.log1p(r[k])


def _mc_blocks(alphas, n, trials, block, states, kind, param, sample, first_block, sp2, ent, grad, logz):
    """Run blocks ``first_block .. first_block + len(states) - 1`` (rows are global trial indices)."""
    na = alphas.shape[0]
    for bi in prange(states.shape[0]):
        b = first_block + bi
        st = states[bi].copy()
        spare = np.zeros(2)
        r = np.empty(na)
        r2 = np.empty(na)
        t = np.empty(na)
        lo = b * block
        hi = min(trials, lo + block)
        for row in range(lo, hi):
            _trial(alphas, n, kind, param, sample, st, spare, r, r2, t, sp2, ent, grad, logz, row)


mc_blocks_parallel = jit(parallel=True)(_mc_blocks)
mc_blocks_serial = jit()(_mc_blocks)


@jit()
def draw_scores(n, trials, block, states, kind, param, sample):
    """The exact scores the trial kernel sees, as a (trials, n) matrix (tests only)."""
    out = np.empty((trials, n))
    for b in range(states.shape[0]):
        st = states[b].copy()
        spare = np.zeros(2)
        lo = b * block
        hi = min(trials, lo + block)
        for row in range(lo, hi):
            for i in range(n):
                out[row, i] = _draw(kind, param, sample, st, spare)
    return out


@jit(parallel=True)
def sample_only(n, trials, block, states, kind, param, sample):
    """Draw the same scores as the trial kernel and only sum them (the sampling cost floor)."""
    out = np.zeros(trials)
    for b in prange(states.shape[0]):
        st = states[b].copy()
        spare = np.zeros(2)
        lo = b * block
        hi = min(trials, lo + block)
        for row in range(lo, hi):
            acc = 0.0
            for _ in range(n):
                acc += _draw(kind, param, sample, st, spare)
            out[row] = acc
    return out


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

"""The i.i.d. prediction of a head: the mean over its rows of ``E[H](alpha_r, n_r)``, interpolated in ``alpha``.

A head's rows have their own scales ``alpha_r`` spread over ``[min_r alpha_r, max_r alpha_r]`` and
their own numbers of keys ``n_r`` (a causal mask).  ``E[H]`` for every distinct ``n`` comes from one
:class:`~softmax_scale.exact.EntropyForNs` call per scale; in ``alpha`` it is evaluated at 5, 9, 17,
... (up to 65) nested Chebyshev-Lobatto nodes of the rows' interval and interpolated (barycentric
formula) until the interpolants on successive node sets agree within ``1e-5`` nats at every row;
that difference, a bound on the coarser interpolant's error, is the reported error.
"""

from __future__ import annotations

import numpy as np

__all__ = ["row_average"]

_NODE_LEVELS = (5, 9, 17, 33, 65)  # nested Chebyshev-Lobatto node counts in alpha
_INTERP_TOL = 1e-5  # nats: successive interpolants agree within this at every row


def _lobatto(k):
    """Chebyshev-Lobatto nodes on [-1, 1] (descending) and their barycentric weights."""
    if k == 1:
        return np.zeros(1), np.ones(1)
    x = np.cos(np.pi * np.arange(k) / (k - 1))
    w = (-1.0) ** np.arange(k)
    w[0] *= 0.5
    w[-1] *= 0.5
    return x, w


def _barycentric(xn, wn, values, x, cols):
    """Interpolant through ``(xn, values[:, c])`` at ``x[r]`` with ``c = cols[r]``."""
    d = x[:, None] - xn[None, :]
    hit = d == 0.0
    d[hit] = 1.0
    c = wn[None, :] / d
    vals = values[:, cols].T  # (rows, nodes)
    out = np.sum(c * vals, axis=1) / np.sum(c, axis=1)
    r, k = np.nonzero(hit)
    out[r] = vals[r, k]
    return out


def row_average(evaluator, alpha, cols):
    """Mean over rows of ``E[H](alpha_r, n_{cols_r})`` and a bound on its interpolation error.

    ``evaluator(alpha)`` returns ``E[H]`` for every distinct ``n`` (an
    :class:`~softmax_scale.exact.EntropyForNs`); ``alpha`` and ``cols`` give each row's scale and
    the index of its ``n``.
    """
    lo, hi = float(alpha.min()), float(alpha.max())
    if hi - lo <= 1e-13 * max(hi, 1.0):
        v = evaluator(0.5 * (lo + hi))
        return float(np.mean(v[cols])), 0.0
    mid, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
    t = np.clip((alpha - mid) / half, -1.0, 1.0)
    cache: dict = {}
    prev = None
    err = np.inf
    for k in _NODE_LEVELS:
        xn, wn = _lobatto(k)
        for j, x in enumerate(xn):
            key = round(j * (_NODE_LEVELS[-1] - 1) / (k - 1))  # position on the finest level: nested nodes
            if key not in cache:
                cache[key] = evaluator(max(0.0, mid + half * x))
        values = np.array([cache[round(j * (_NODE_LEVELS[-1] - 1) / (k - 1))] for j in range(k)])
        cur = _barycentric(xn, wn, values, t, cols)
        if prev is not None:
            err = float(np.max(np.abs(cur - prev)))
            if err <= _INTERP_TOL:
                break
        prev = cur
    return float(np.mean(cur)), err

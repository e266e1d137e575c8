"""The outer integral over ``u = log t``: from the inner expectations to the statistics.

With ``phi = 1 + a`` from :mod:`~softmax_scale.exact.inner` and trapezoid weights ``wq``
(``γ`` Euler's constant)::

    E[sum p^2]      = n      ∫ p2 phi^(n-1) du
    1 - E[sum p^2]  = n(n-1) ∫ p1^2 phi^(n-2) du
    E[H]            = -n     ∫ kk phi^(n-1) du
    E[sum p s]      = n      ∫ sm phi^(n-1) du
    E[log Z]        = -γ + ∫ (1{u<0} - phi^n) du

(the entropy from ``log Z / Z = -∫ (log t + γ) exp(-tZ) dt``, so no difference of two large
numbers; ``1 - sum p^2 = sum_{i≠j} p_i p_j`` directly, so ``E[G]`` keeps its relative accuracy at
large scales).  Three forms: every statistic for one ``n`` (:func:`stats_one`), the entropy for
many ``n`` at once as one matrix product (:func:`entropy_many`), and every statistic for one key of
fixed score ``s0`` among ``n - 1`` i.i.d. keys (:func:`signal_one`: one more factor
``exp(-t e^(alpha s0))``).
"""

from __future__ import annotations

import numpy as np

from .inner import EULER, EntropyInner, Inner

__all__ = ["entropy_many", "signal_one", "stats_one"]


def stats_one(alpha, n, inner: Inner, wq) -> np.ndarray:
    """``[E[sum p^2], E[H], E[G], E[log Z], E[sum p s], E[sum p] - 1, 1 - E[sum p^2]]`` for one ``n``."""
    u = inner.u
    log_phi = inner.log_phi()
    w1 = np.exp((n - 1.0) * log_phi)
    w2 = np.exp((n - 2.0) * log_phi)
    wn = np.exp(n * log_phi)
    p1, p2, kk, sm = inner.p1, inner.p2, inner.kk, inner.sm
    sum_p2 = n * np.sum(p2 * w1 * wq)
    comp = n * (n - 1.0) * np.sum(p1 * p1 * w2 * wq)
    norm = n * np.sum(p1 * w1 * wq)
    ent = -n * np.sum(kk * w1 * wq)
    sps = n * np.sum(sm * w1 * wq)
    log_z = -EULER - u[0] - (np.sum(wn * wq) - 0.5 * (wn[0] * wq[0] + wn[-1] * wq[-1]))
    if sum_p2 > 0.5:
        sum_p2 = 1.0 - comp
    else:
        comp = 1.0 - sum_p2
    return np.array([sum_p2, ent, alpha * comp, log_z, sps, norm - 1.0, comp])


def entropy_many(ns, inner: EntropyInner, wq) -> np.ndarray:
    """``E[H]`` for every ``n`` of the float array ``ns``, one matrix product over the nodes."""
    w1 = np.exp((ns[:, None] - 1.0) * inner.log_phi()[None, :])
    return -ns * (w1 @ (inner.kk * wq))


def signal_one(alpha, N, s0, inner: Inner, du) -> np.ndarray:
    """``[E[p_0], E[sum p^2], E[H], E[G], E[log Z]]`` for one key of score ``s0`` among ``N`` i.i.d. keys (step ``du``)."""
    u = inner.u
    log_phi = inner.log_phi()
    z0 = u + alpha * s0  # log y0
    y0 = np.exp(np.minimum(z0, 700.0))
    e0 = np.exp(-y0)
    g0 = y0 * e0
    wN = np.exp(N * log_phi) * e0
    wN1 = np.exp((N - 1.0) * log_phi) * e0
    wN2 = np.exp(max(N - 2.0, 0.0) * log_phi) * e0 if N >= 2 else np.zeros_like(u)
    p1, p2, kk = inner.p1, inner.p2, inner.kk
    share = np.sum(g0 * np.exp(N * log_phi)) * du
    sum_p2 = (np.sum(g0 * y0 * np.exp(N * log_phi)) + N * np.sum(p2 * wN1)) * du
    comp = (N * (N - 1.0) * np.sum(p1 * p1 * wN2) + 2.0 * N * np.sum(g0 * p1 * np.exp((N - 1.0) * log_phi))) * du
    ent = -(np.sum(g0 * (z0 + EULER) * np.exp(N * log_phi)) + N * np.sum(kk * wN1)) * du
    log_z = -EULER - u[0] - (np.sum(wN) - 0.5 * (wN[0] + wN[-1])) * du
    if sum_p2 > 0.5:
        sum_p2 = 1.0 - comp
    else:
        comp = 1.0 - sum_p2
    return np.array([share, sum_p2, ent, alpha * comp, log_z])

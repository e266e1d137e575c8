"""The i.i.d. prediction of a real decoder's heads past its training length.

From each head's effective scale ``sigma_L`` (mean over the queries of the bucket ``[L/2, L)``
under RoPE ``none`` and scale ``standard``) and its pooled standardised logits of the queries just
below ``L`` (compressed to a :class:`~softmax_scale.WeightedSample`, tails exact, as
:func:`~softmax_scale.head_stats` does), the exact evaluator's ``E[H]`` at each bucket's mean
number of keys ``n_b`` for the scale ``sigma_L * factor(n_b)`` of each scheme, under normal scores
and under the head's own; and the factor on the scale that :func:`~softmax_scale.invariant_scale`
says would hold ``E[H]`` at its value at ``n_ref`` (the bucket ``[L/2, L)``) for ``n_b > L``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.optimize import brentq

from ..distributions import WeightedSample
from ..exact import EntropyForNs, exact_stats
from ..models.buckets import bucket_keys
from ..models.llama import scale_factors

__all__ = ["EMPIRICAL_SAMPLE", "PROBE_QUERIES", "predict", "probe_samples"]

EMPIRICAL_SAMPLE = 1024  # weighted points per head's compressed pool (see head_stats)
PROBE_QUERIES = 32  # queries just below L whose logits form that sample
_GRID_LO, _GRID_HI, _GRID_POINTS = 0.25, 4.0, 25  # alpha / sigma_L grid of the empirical prediction


def probe_samples(prefix, config, size=EMPIRICAL_SAMPLE):
    """Each head's pooled standardised logits from the probed queries of a :class:`~.llama.Prefix`, compressed.

    ``prefix.probe_queries[layer]`` is ``[H, P, d]`` (queries at ``prefix.probe``, positions just
    below ``L``); its cache holds the keys of positions ``0 .. L-1``. Every row is standardised
    over its keys, the rows are pooled, and the pool is compressed as
    :func:`softmax_scale.head_stats` does it (:meth:`~softmax_scale.WeightedSample.from_pool`:
    tails exact, bulk in equal-count bins; deterministic). Returns ``[layers][heads]`` of samples.
    """
    cfg, L, pos = config, prefix.train_length, prefix.probe
    rep = cfg.n_heads // cfg.n_kv_heads
    out = []
    for layer, q in enumerate(prefix.probe_queries):
        k = prefix.cache.keys[layer]
        per_head = []
        for h in range(cfg.n_heads):
            s = q[h].astype(np.float64) @ k[h // rep, :L].T.astype(np.float64)  # [P, L]
            rows = [(s[j, :p + 1] - s[j, :p + 1].mean()) / s[j, :p + 1].std() for j, p in enumerate(pos)]
            pool = np.concatenate(rows)
            per_head.append(WeightedSample.from_pool(pool, size))
        out.append(per_head)
    return out


def predict(st, dists, edges, L, schemes, head_dim):
    """The i.i.d. predictions (see the module docstring): ``{scheme: [layers, heads, buckets]}`` twice, and the invariant factor.

    ``st`` are the :class:`~.llama.PositionStats` of positions ``0 .. L-1`` under a scale of 1,
    ``dists`` the heads' samples (:func:`probe_samples`). Returns ``(pred_normal, pred_empirical,
    invariant_factor)``.
    """
    nl, nh = st.entropy.shape[:2]
    nb = len(edges) - 1
    q = np.arange(L // 2, L) - 1
    q = q[q >= 1]
    sigma_l = st.sigma[..., q].mean(-1)  # [layers, heads]
    n_ref = float(round(np.mean(q + 1)))
    n_b = bucket_keys(edges)
    facs = {s: scale_factors(s, n_b, head_dim, L) for s in schemes}
    pn = {s: np.full((nl, nh, nb), np.nan) for s in schemes}
    pe = {s: np.full((nl, nh, nb), np.nan) for s in schemes}
    inv = np.full((nl, nh, nb), np.nan)
    for b in range(nb):
        for s in schemes:
            a = (sigma_l * facs[s][b]).ravel()
            pn[s][..., b] = exact_stats(a, int(n_b[b]), "normal", error_estimate=False).entropy.reshape(nl, nh)
    far = [b for b in range(nb) if n_b[b] > L]
    # E[H](alpha, n) of one head on a log grid of alpha / sigma_L, one evaluation for all n;
    # the predictions and the invariant scale come from a cubic spline in log alpha (E[H] is
    # smooth and decreasing in alpha; the grid error is checked in the tests against direct calls)
    ratios = np.exp(np.linspace(np.log(_GRID_LO), np.log(_GRID_HI), _GRID_POINTS))
    for layer in range(nl):
        for h in range(nh):
            ev = EntropyForNs(dists[layer][h], np.append(n_b, n_ref))
            sl = sigma_l[layer, h]
            table = np.array([ev(sl * r) for r in ratios])  # [grid, buckets + 1]
            spline = CubicSpline(np.log(ratios), table, axis=0)
            for s in schemes:
                pe[s][layer, h] = spline(np.log(facs[s]))[np.arange(nb), np.arange(nb)]
            target = float(spline(0.0)[-1])  # E[H] at the reference length with the head's own scale
            for b in far:
                g = table[:, b] - target
                k = np.nonzero((g[:-1] > 0) & (g[1:] <= 0))[0]
                if k.size:
                    lo, hi = np.log(ratios[k[0]]), np.log(ratios[k[0] + 1])
                    inv[layer, h, b] = math.exp(brentq(_level, lo, hi, args=(spline, b, target), xtol=1e-10))
    return pn, pe, inv


def _level(x, spline, b, target):
    return float(spline(x)[b]) - target

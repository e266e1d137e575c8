"""The i.i.d. prediction of a real decoder's heads past its training length.

From each head's effective scale ``sigma_L`` (mean over the queries of the bucket ``[L/2, L)``
under RoPE ``none`` and scale ``standard``) and its pooled standardised logits of the queries just
below ``L`` (compressed to a :class:`~softmax_scale.WeightedSample`, tails exact, as
:func:`~softmax_scale.head_stats` does), the exact evaluator's ``E[H]`` at each bucket's mean
number of keys ``n_b`` for the scale ``sigma_L * factor(n_b)`` of each scheme, under normal scores
and under the head's own (one :class:`~softmax_scale.exact.EntropyForNs` evaluation per distinct
scale, every ``n_b`` at once); and the factor on the scale that holds the head's ``E[H]`` at its value at
``n_ref`` (the bucket ``[L/2, L)``) for ``n_b > L``: the rule ``toolkit_iid`` of
:func:`softmax_scale.heads.rule_factors`.
"""

from __future__ import annotations

import numpy as np

from ..distributions import WeightedSample
from ..exact import EntropyForNs, exact_stats
from ..heads import rule_factors
from ..models.buckets import bucket_keys, bucket_queries
from ..models.llama import scale_factors

__all__ = ["EMPIRICAL_SAMPLE", "PROBE_QUERIES", "predict", "probe_samples"]

EMPIRICAL_SAMPLE = 1024  # weighted points per head's compressed pool (see head_stats)
PROBE_QUERIES = 32  # queries just below L whose logits form that sample


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
    sigma_l = st.sigma[..., bucket_queries(L // 2, L)].mean(-1)  # [layers, heads]: the queries of the targets L/2 .. L-1
    n_ref = float(bucket_keys([L // 2, L])[0])
    n_b = bucket_keys(edges)
    facs = {s: scale_factors(s, n_b, head_dim, L) for s in schemes}
    pn = {s: np.full((nl, nh, nb), np.nan) for s in schemes}
    pe = {s: np.full((nl, nh, nb), np.nan) for s in schemes}
    inv = np.full((nl, nh, nb), np.nan)
    for b in range(nb):
        for s in schemes:
            a = (sigma_l * facs[s][b]).ravel()
            pn[s][..., b] = exact_stats(a, int(n_b[b]), "normal", error_estimate=False).entropy.reshape(nl, nh)
    far = n_b > L
    for layer in range(nl):
        for h in range(nh):
            dist, sl = dists[layer][h], float(sigma_l[layer, h])
            ev = EntropyForNs(dist, n_b)
            values: dict = {}  # scale -> E[H] at every n_b: one exact evaluation per distinct scale of the head
            for s in schemes:
                for b in range(nb):
                    a = sl * float(facs[s][b])
                    if a not in values:
                        values[a] = ev(a)
                    pe[s][layer, h, b] = values[a][b]
            if far.any() and sl > 0:
                inv[layer, h, far] = rule_factors("toolkit_iid", sl, dist, n_ref, n_b[far])
    return pn, pe, inv

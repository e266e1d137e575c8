"""The toolkit's own per-head scale for a causal model: each head measured inside ``L``, a factor past it.

A trained ``standard`` model's heads are measured just below its training length ``L``
(:func:`probe_heads`: ``sigma`` and pooled standardised scores, as :func:`softmax_scale.head_stats`
reads them), and the rules of :func:`softmax_scale.heads.rule_factors` turn that into a factor
per head at each ``n > L`` (:func:`head_factors`): hold the head's i.i.d. ``E[H]``
(``toolkit_iid``), or cancel the entropy drift the head shows inside ``L`` (``toolkit_measured``).
:func:`position_factors` gives the factor per query position, which
:func:`softmax_scale.train.evaluate` applies at test time.  The causal experiment
(:mod:`softmax_scale.experiments.causal`) runs them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._util.validation import check_int
from ..heads import TOOLKIT_RULES, exact_entropy, factors_at, rule_factors
from ..models.buckets import bucket_queries
from ..schemes import STANDARD
from .config import TrainConfig

__all__ = ["HeadFactors", "factor_grid", "head_factors", "position_factors", "probe_heads", "query_rows"]


@dataclass(frozen=True)
class HeadFactors:
    """Each head of a causal model measured just below ``L``, and the toolkit's factors past it.

    Attributes
    ----------
    train_length : int
    sigma : ndarray [layers, heads]
        Mean ``sigma`` of the queries at positions ``L/2 .. L-1`` (:func:`softmax_scale.head_stats`).
    alpha : ndarray [layers, heads]
        The head's scale on unit-variance scores there, ``sigma sqrt(n/(n-1))`` at their mean ``n``.
    entropy : ndarray [layers, heads]
        Their mean measured entropy (nats).
    predicted : ndarray [layers, heads]
        The exact evaluator's ``E[H]`` at ``n = L`` and ``alpha`` on the head's pooled standardised
        scores: the entropy ``toolkit_iid`` holds.
    slope : ndarray [layers, heads]
        ``dH/d ln n`` of the head's measured entropy, fitted over the buckets of queries
        ``[L/8, L/4), [L/4, L/2), [L/2, L)``.
    ns : ndarray
        Numbers of keys past ``L`` at which the factors are solved.
    factors : dict of str -> ndarray [layers, heads, len(ns)]
        ``toolkit_iid`` and ``toolkit_measured`` (see :func:`head_factors`).
    pools : list
        Per head (layer-major) its pooled standardised scores (:func:`softmax_scale.heads.head_pools`).
    """

    train_length: int
    sigma: np.ndarray
    alpha: np.ndarray
    entropy: np.ndarray
    predicted: np.ndarray
    slope: np.ndarray
    ns: np.ndarray
    factors: dict
    pools: list


def factor_grid(L, longest):
    """``n = L 2^(k/2)``, ``k = 1, 2, ...`` up to ``longest``: where the per-head factors are solved."""
    k = math.floor(2 * math.log2(longest / L) + 1e-9)
    return np.array([round(L * 2 ** (j / 2)) for j in range(1, k + 1)], dtype=np.float64)


def query_rows(s, lo, hi, windows):
    """Scores ``[layers, windows, heads, T, T]`` -> the rows of queries ``lo .. hi-1`` of every window, with their mask.

    Returns ``(logits [layers, heads, windows * (hi - lo), hi], mask [1, 1, windows * (hi - lo), hi])``;
    ``lo >= 1`` (query 0 sees one key).
    """
    part = s[:, :, :, lo:hi, :hi].transpose(0, 2, 1, 3, 4)
    logits = part.reshape(part.shape[0], part.shape[1], windows * (hi - lo), hi)
    rows = np.arange(lo, hi)[:, None] >= np.arange(hi)[None, :]
    return logits, np.tile(rows, (windows, 1))[None, None]


def probe_heads(params, config: TrainConfig, windows: int, sample_size: int = 1024) -> dict:
    """Each head of a causal model just below ``L``: what the i.i.d. predictions start from.

    Scores the model (RoPE ``none``, scale as trained) on ``windows`` held-out windows of ``L``
    bytes and reads the queries at positions ``L/2 .. L-1``.  Returns ``{"scores": [layers, windows,
    heads, L, L], "stats": HeadStats, "alpha": [layers, heads], "pools": [...]}``: the head's scale on
    unit-variance scores, ``sigma sqrt(n/(n-1))`` at the queries' mean ``n``, and its pooled
    standardised scores (:func:`softmax_scale.heads.head_pools`), layer-major.
    """
    from ..heads import head_pools, head_stats
    from .evaluation import attention_scores

    L = config.train_length
    s = attention_scores(params, config, L, windows=windows, rope="none")
    q = bucket_queries(L // 2, L, counts="queries")
    logits, mask = query_rows(s, int(q[0]), int(q[-1]) + 1, windows)
    st = head_stats(logits, mask=mask, predict=False)
    n_ref = float(np.mean(q + 1))
    return {"scores": s, "stats": st, "alpha": st.sigma * math.sqrt(n_ref / (n_ref - 1.0)),
            "pools": head_pools(logits, mask=mask, sample_size=sample_size)}


def head_factors(params, config: TrainConfig, *, windows: int = 16, longest: int | None = None,
                 sample_size: int = 1024) -> HeadFactors:
    """The toolkit's own per-head scale for a causal model: each head measured inside ``L``, a factor past it.

    Each head is measured on ``windows`` held-out windows of ``L`` bytes (RoPE and scale as
    trained) with :func:`softmax_scale.head_stats`: its ``sigma`` and entropy over the queries at
    positions ``L/2 .. L-1``, its pooled standardised scores there
    (:func:`softmax_scale.heads.head_pools`), and its entropy per bucket of queries inside ``L``.
    At each ``n`` of a grid past ``L`` (``L sqrt(2)^k`` up to ``longest``, default ``16L``) the
    rules of :func:`softmax_scale.heads.rule_factors` give the factor ``f`` on the head's scores,
    with the reference ``n_ref = L``, the head's ``alpha`` and its own pooled scores:

    - ``toolkit_iid``: ``E[H](f alpha, n) = E[H](alpha, L)``;
    - ``toolkit_measured``: ``E[H](f alpha, n) = E[H](alpha, n) - b ln(n / L)``, ``b`` the slope of
      the head's measured entropy against ``ln n`` over the buckets ``[L/8, L/4), [L/4, L/2),
      [L/2, L)``.

    The factor is 1 at ``n <= L``; :func:`position_factors` interpolates it between grid points.
    Where the exact evaluator cannot answer for a head (a softmax frozen far past its critical
    scale) its factors are NaN in the result and 1 in :func:`position_factors`: that head is left
    as trained.
    """
    from ..heads import head_stats

    if config.scheme != STANDARD or not config.causal:
        raise ValueError(f"`config`: the per-head scale is measured on causal `standard` models, got "
                         f"{config.objective} {config.scheme}")
    L = config.train_length
    longest = 16 * L if longest is None else check_int(longest, "longest", minimum=L + 1)
    windows = check_int(windows, "windows", minimum=1)
    probe = probe_heads(params, config, windows, sample_size)
    s, st, alpha, pools = probe["scores"], probe["stats"], probe["alpha"], probe["pools"]  # s: [layers, windows, heads, L, L]
    ents, logn = [], []
    for lo, hi in ((L // 8, L // 4), (L // 4, L // 2), (L // 2, L)):
        q = bucket_queries(lo, hi, counts="queries")
        if not q.size:
            continue
        lg, mk = query_rows(s, int(q[0]), int(q[-1]) + 1, windows)
        ents.append(head_stats(lg, mask=mk, predict=False).entropy)
        logn.append(math.log(np.mean(q + 1)))
    ents = np.array(ents)  # [buckets, layers, heads]
    x = np.array(logn)
    slope = np.tensordot(x - x.mean(), ents - ents.mean(axis=0), axes=(0, 0)) / np.sum((x - x.mean()) ** 2)
    ns = factor_grid(L, longest)
    nl, nh = st.sigma.shape
    pred = np.full((nl, nh), np.nan)
    fac = {r: np.ones((nl, nh, ns.size)) for r in TOOLKIT_RULES}
    for h, (layer, head) in enumerate(np.ndindex(nl, nh)):
        dist, a = pools[h], float(alpha[layer, head])
        if dist is None or not a > 0:
            continue
        pred[layer, head] = exact_entropy(a, L, dist)
        fac["toolkit_iid"][layer, head] = rule_factors("toolkit_iid", a, dist, L, ns)
        fac["toolkit_measured"][layer, head] = rule_factors("toolkit_measured", a, dist, L, ns,
                                                            slope=float(slope[layer, head]))
    return HeadFactors(L, st.sigma, alpha, st.entropy, pred, slope, ns, fac, pools)


def position_factors(hf: HeadFactors, rule: str, length: int) -> np.ndarray:
    """``[layers, heads, length]`` float32: the factor of ``rule`` for the query at each position (``i + 1`` keys).

    :func:`softmax_scale.heads.factors_at`: 1 for ``n <= L``; past ``L``, ``ln f`` linear in
    ``ln n`` between the grid points (from ``f = 1`` at ``n = L``), held at the last grid value
    beyond it; a head without an answer left as trained.
    """
    if rule not in hf.factors:
        raise ValueError(f"`rule` must be one of {tuple(hf.factors)}, got {rule!r}")
    length = check_int(length, "length", minimum=1)
    n = np.arange(1, length + 1, dtype=np.float64)
    return factors_at(hf.train_length, hf.ns, hf.factors[rule], n).astype(np.float32)

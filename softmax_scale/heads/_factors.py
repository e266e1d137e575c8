"""Each head's factor past its training length from what a user measured inside it: :func:`head_factors`.

The user measures each head with :func:`softmax_scale.head_stats` at two or more lengths inside
the training length ``L`` (on any framework's logits or probabilities).  From those measurements
a head has a scale ``alpha`` on unit-variance scores (``sigma sqrt(n/(n-1))`` at its longest
measurement) and a slope ``b`` of its entropy against ``ln n`` (least squares over the
measurements); :func:`softmax_scale.heads.rule_factors` turns them into the factor on the head's
scores at each target ``n`` under each of :data:`~softmax_scale.heads.TOOLKIT_RULES`, referenced
at ``n_ref = L``.  A factor is never below 1 inside ``L`` (a target ``n <= L`` gets 1: the head as
trained), and :func:`factors_at` gives it at every position: 1 up to ``L``, ``ln f`` linear in
``ln n`` between the targets past it, the last target's factor beyond them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from .._util.validation import check_choice, check_int, check_n_array
from ..distributions import WeightedSample
from ._result import HeadStats
from ._rules import TOOLKIT_RULES, rule_factors

__all__ = ["HeadFactorTable", "check_head_stats", "factors_at", "head_factor_errors", "head_factors"]


@dataclass(frozen=True)
class HeadFactorTable:
    """Each head's factor on its scores at the target lengths, under each of the toolkit's per-head rules.

    Arrays are shaped like the heads' leading axes (:attr:`HeadStats.shape`), the factors with a
    last axis over :attr:`ns` (none when ``n`` was a number).

    Attributes
    ----------
    train_length : int
        ``L``: the reference number of keys of the rules (every factor is 1 there).
    ns : ndarray
        The target numbers of keys.
    lengths : ndarray
        The mean number of keys of each measurement, ``[measurements, *shape]``.
    alpha : ndarray
        The head's scale on unit-variance scores at its longest measurement.
    slope : ndarray
        ``dH/d ln n`` of the head's measured entropy, fitted over the measurements.
    score_model : {"normal", "pooled"}
        The score distribution the rules solve on: standard normal, or the head's pooled
        standardised scores (``pools`` given).
    factors : Mapping
        ``{rule: ndarray}`` for each of :data:`~softmax_scale.heads.TOOLKIT_RULES`: 1 at every target
        ``n <= L``; past ``L`` NaN where the rule has no answer (a target out of reach, a head frozen
        far past its critical scale, a head without spread).
    """

    train_length: int
    ns: np.ndarray
    lengths: np.ndarray
    alpha: np.ndarray
    slope: np.ndarray
    score_model: str
    factors: Mapping

    def at(self, positions, rule="toolkit_iid") -> np.ndarray:
        """Each head's factor at each query position (its number of keys): :func:`factors_at`.

        Parameters
        ----------
        positions : array_like of int
            Numbers of keys (1-indexed positions of a causal model's queries), ``>= 1``.
        rule : str
            One of :data:`~softmax_scale.heads.TOOLKIT_RULES`.

        Returns
        -------
        ndarray
            Shaped like the heads, with a last axis over ``positions``.
        """
        check_choice(rule, "rule", TOOLKIT_RULES)
        pos, _ = check_n_array(positions, "positions", minimum=1)
        f = np.asarray(self.factors[rule], dtype=np.float64).reshape(self.alpha.shape + (-1,))
        return factors_at(self.train_length, self.ns, f, pos)


def factors_at(train_length, ns, factors, positions) -> np.ndarray:
    """Per-head factors solved at ``ns`` spread over positions: what each query's scores are multiplied by.

    1 up to ``train_length``; past it ``ln f`` linear in ``ln n`` between ``(L, 1)`` and the
    targets beyond ``L``, held at the last target's factor past them; a head with no answer at
    some target (NaN) is left as trained (1).  The one rule for applying per-head factors, in a
    user's model (:meth:`HeadFactorTable.at`) and in the training harness.

    Parameters
    ----------
    train_length : int
        ``L``.
    ns : array_like
        The targets (numbers of keys), increasing.
    factors : ndarray
        ``[..., len(ns)]``: each head's factor at each target.
    positions : ndarray
        Numbers of keys (1-indexed positions).

    Returns
    -------
    ndarray
        ``[..., len(positions)]``, float64.
    """
    ns = np.asarray(ns, dtype=np.float64)
    n = np.asarray(positions, dtype=np.float64)
    far = ns > train_length
    x = np.log(np.concatenate([[float(train_length)], ns[far]]))
    f = np.asarray(factors, dtype=np.float64)[..., far]
    out = np.ones(f.shape[:-1] + (n.size,))
    past = n > train_length
    for idx in np.ndindex(*f.shape[:-1]):
        if not np.all(np.isfinite(f[idx])) or not past.any():
            continue
        y = np.log(np.concatenate([[1.0], f[idx]]))
        out[idx + (past,)] = np.exp(np.interp(np.log(n[past]), x, y))
    return out


def check_head_stats(stats, train_length: int, name: str = "stats") -> tuple:
    """``stats`` as :func:`head_factors` reads them, or an error naming ``name`` and the rule.

    A sequence of two or more :class:`HeadStats` of the same heads (one shape), each head measured
    inside ``train_length`` (an integer ``>= 2``, checked by the caller) at two or more different
    mean lengths.  Returns them as a tuple.
    """
    if isinstance(stats, (HeadStats, str)) or not isinstance(stats, Sequence) or len(stats) < 2:
        raise ValueError(f"`{name}` must be a sequence of two or more HeadStats (head_stats at two or more lengths "
                         f"inside the training length), got {type(stats).__name__}"
                         + (f" of length {len(stats)}" if isinstance(stats, Sequence) else ""))
    for s in stats:
        if not isinstance(s, HeadStats):
            raise TypeError(f"`{name}` must hold HeadStats (results of head_stats), got {type(s).__name__}")
    shapes = {s.shape for s in stats}
    if len(shapes) != 1:
        raise ValueError(f"`{name}` must measure the same heads (one shape), got shapes {sorted(shapes)}")
    shape = stats[0].shape
    lengths = np.stack([np.asarray(s.n, dtype=np.float64).reshape(shape) for s in stats])
    beyond = lengths > train_length
    if beyond.any():
        raise ValueError(f"`{name}` must be measured inside the training length {train_length}: a head was measured "
                         f"at n = {float(lengths[beyond].max()):g}")
    x = np.log(lengths)
    if np.any(np.sum((x - x.mean(axis=0)) ** 2, axis=0) <= 0):
        raise ValueError(f"`{name}` must be measured at two or more different lengths for every head, got the same "
                         "mean n in every measurement")
    return tuple(stats)


def _check_pools(pools, heads: int) -> list:
    if pools is None:
        return [None] * heads
    if not isinstance(pools, Sequence) or len(pools) != heads:
        raise ValueError(f"`pools` must be a list of {heads} pooled samples, one per head (head_pools of the longest "
                         f"measurement), got {type(pools).__name__} of length {len(pools) if isinstance(pools, Sequence) else '-'}")
    for p in pools:
        if p is not None and not isinstance(p, WeightedSample):
            raise TypeError(f"`pools` must hold WeightedSample (or None for a head without spread), got {type(p).__name__}")
    return list(pools)


def head_factors(stats, train_length, n, *, pools=None) -> HeadFactorTable:
    """Each head's factor at ``n`` keys under each of the toolkit's per-head rules, from ``head_stats`` inside ``L``.

    Parameters
    ----------
    stats : sequence of HeadStats
        :func:`softmax_scale.head_stats` of the same heads at two or more lengths inside the
        training length (each head's mean ``n`` at most ``train_length``, not all equal).
    train_length : int
        ``L``, the reference of the rules (``n_ref``).
    n : int or array_like of int
        Target numbers of keys, ``>= 2``.
    pools : list of WeightedSample, optional
        Each head's pooled standardised scores at the longest measurement
        (:func:`softmax_scale.heads.head_pools`, layer-major); by default standard normal scores.

    Returns
    -------
    HeadFactorTable
        ``factors[rule]`` multiplies the head's scores (its ``q.k / sqrt(d)``) at ``n`` keys.

    Examples
    --------
    >>> import numpy as np
    >>> import softmax_scale as ss
    >>> rng = np.random.default_rng(0)
    >>> stats = [ss.head_stats(2.0 * rng.standard_normal((2, 32, n)), predict=False)
    ...          for n in (128, 256)]
    >>> table = ss.head_factors(stats, train_length=256, n=[256, 2048])
    >>> table.factors["toolkit_iid"].shape  # 2 heads, 2 lengths
    (2, 2)
    >>> table.factors["toolkit_iid"][:, 0].round(6)  # 1 at n = L
    array([1., 1.])
    """
    L = check_int(train_length, "train_length", minimum=2)
    stats = check_head_stats(stats, L)
    ns, scalar = check_n_array(n, "n")
    shape = stats[0].shape
    lengths = np.stack([np.asarray(s.n, dtype=np.float64).reshape(shape) for s in stats])
    x = np.log(lengths)
    spread = np.sum((x - x.mean(axis=0)) ** 2, axis=0)
    entropy = np.stack([np.asarray(s.entropy, dtype=np.float64).reshape(shape) for s in stats])
    slope = np.sum((x - x.mean(axis=0)) * (entropy - entropy.mean(axis=0)), axis=0) / spread
    longest = np.argmax(lengths, axis=0)
    n_ref = np.take_along_axis(lengths, longest[None], axis=0)[0]
    sigma = np.take_along_axis(np.stack([np.asarray(s.sigma, dtype=np.float64).reshape(shape) for s in stats]),
                               longest[None], axis=0)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = sigma * np.sqrt(n_ref / (n_ref - 1.0))
    heads = int(np.prod(shape, dtype=np.int64))
    pool_list = _check_pools(pools, heads)
    factors = {r: np.full(shape + (ns.size,), np.nan) for r in TOOLKIT_RULES}
    for h, idx in enumerate(np.ndindex(*shape)):
        a = float(alpha[idx])
        if not (math.isfinite(a) and a > 0):
            continue
        dist = "normal" if pools is None else pool_list[h]
        if dist is None:
            continue
        for rule in TOOLKIT_RULES:  # toolkit_measured cancels the drift the head shows: it takes the slope
            kw = {"slope": float(slope[idx])} if rule == "toolkit_measured" else {}
            factors[rule][idx] = rule_factors(rule, a, dist, L, ns, **kw)
    for f in factors.values():  # never below 1 inside L: the head as trained
        f[..., ns <= L] = 1.0
    if scalar:
        factors = {r: f[..., 0] for r, f in factors.items()}
    return HeadFactorTable(train_length=L, ns=ns, lengths=lengths, alpha=alpha, slope=slope,
                           score_model="normal" if pools is None else "pooled", factors=MappingProxyType(factors))


def head_factor_errors(logits, train_length, n, *, causal=False, resamples=100, rng=0) -> dict:
    """The standard error of each head's factor (:func:`head_factors`) by a bootstrap over its queries.

    Each resample draws the query rows of every measurement with replacement (the same rows for
    every head of it), measures the heads again with :func:`softmax_scale.head_stats` and solves
    the rules again; the error is the standard deviation of the factor over the resamples.

    Parameters
    ----------
    logits : sequence of array_like
        The heads' pre-softmax scores at two or more lengths inside ``L``, each
        ``(..., n_queries, n_keys)`` with the same leading axes (what :func:`head_stats` measures).
    train_length : int
        ``L``.
    n : int or array_like of int
        Target numbers of keys, ``>= 2``.
    causal : bool
        Each query sees the keys up to its own position (as in :func:`head_stats`).
    resamples : int
        Bootstrap resamples, ``>= 2``.
    rng : int
        Seed of the resampling.

    Returns
    -------
    dict
        ``{rule: ndarray}`` shaped like :attr:`HeadFactorTable.factors`: 0 at targets ``n <= L``
        (the factor is 1 there); NaN where a rule had no answer in some resample.
    """
    from ._stats import head_stats

    if isinstance(logits, np.ndarray) or not isinstance(logits, Sequence) or len(logits) < 2:
        raise ValueError("`logits` must be a sequence of two or more score arrays (one per length inside the "
                         f"training length), got {type(logits).__name__}")
    arrays = [np.asarray(x) for x in logits]
    if any(a.ndim < 2 for a in arrays):
        raise ValueError("`logits` must hold arrays of shape (..., n_queries, n_keys)")
    resamples = check_int(resamples, "resamples", minimum=2, maximum=100_000)
    gen = np.random.default_rng(check_int(rng, "rng", minimum=0))
    draws = []
    for _ in range(resamples):
        stats = []
        for a in arrays:
            q, k = a.shape[-2:]
            rows = gen.integers(0, q, q)
            # a causal query keeps its own keys: the causal pattern's rows go with it, as a mask
            mask = (np.arange(k)[None, :] <= np.arange(q)[:, None] + (k - q))[rows] if causal else None
            stats.append(head_stats(np.take(a, rows, axis=-2), mask=mask, predict=False))
        draws.append(head_factors(stats, train_length, n).factors)
    return {r: np.std(np.stack([d[r] for d in draws]), axis=0, ddof=1) for r in TOOLKIT_RULES}

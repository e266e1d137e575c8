"""The rule that turns the measured comparisons into a recommendation: :data:`CLAUSES`, applied by :func:`recommend`.

Each clause is a function whose ``text`` is what the output prints for it; :data:`RULE` is those
texts joined, so the rule printed is the rule applied.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..heads import SHARE_RULE, TOOLKIT_RULES, head_factors
from ..schemes import QK_SCHEMES, SCHEMES, STANDARD, pinned

__all__ = ["CLAUSES", "LEVEL", "RULE", "Recommendation", "below_one_inside", "critical_t", "judge", "recommend",
           "simplicity"]

#: The one-sided level of the paired t test that separates a scale from ``standard`` in one situation.
LEVEL = 0.05
#: The metrics of the evidence and their direction: ``+1`` higher is better, ``-1`` lower is better.
DIRECTION = {"loss": -1.0, "accuracy": 1.0}
#: The per-head rules: a factor per head, from the user's own heads (``head_stats``).
PER_HEAD = (*TOOLKIT_RULES, SHARE_RULE)


@functools.lru_cache(maxsize=64)
def critical_t(replicates: int) -> float:
    """The one-sided critical value of the paired t at :data:`LEVEL` with ``replicates - 1`` degrees of freedom."""
    return float(stats.t.ppf(1.0 - LEVEL, replicates - 1)) if replicates >= 2 else math.inf


def judge(metric: str, difference: float, spread: float, replicates: int) -> tuple:
    """``(t, critical, verdict)`` of one paired difference from ``standard`` (the first clause of :data:`RULE`).

    ``t`` is the gain (the difference signed so that positive is better) over its standard error
    ``spread / sqrt(replicates)``; NaN with one replicate or a non-finite difference.
    """
    crit = critical_t(replicates)
    if replicates < 2 or not (math.isfinite(difference) and math.isfinite(spread)):
        return math.nan, crit, "not separated"
    gain = DIRECTION[metric] * difference
    se = spread / math.sqrt(replicates)
    t = gain / se if se > 0 else math.copysign(math.inf, gain) if gain else 0.0
    return t, crit, "better" if t > crit else "worse" if t < -crit else "not separated"


def simplicity(scheme: str) -> tuple:
    """Sort key of a scale's base scheme, simplest first: the registry's order, then the per-head rules, then others."""
    keys = list(SCHEMES)
    if scheme in keys:
        return (0, keys.index(scheme), scheme)
    return (1, PER_HEAD.index(scheme), scheme) if scheme in PER_HEAD else (2, 0, scheme)


def below_one_inside(scheme: str, L: int, d: int) -> bool | None:
    """Whether ``scheme`` pinned at ``L`` multiplies the logits by less than 1 at some ``n`` in ``[2, L]``.

    None where the label is no scheme of the registry nor a per-head rule (its factor is unknown);
    the per-head rules are 1 up to ``L`` (:func:`softmax_scale.head_factors`).
    """
    if scheme in PER_HEAD:
        return False
    if scheme not in SCHEMES:
        return None
    ns = np.unique(np.concatenate([np.geomspace(2, L, 65).round(), [2.0, float(L)]]))
    return bool(np.min(pinned(scheme, L).factor(ns, d)) < 1.0 - 1e-12)


def _clause(text: str):
    def mark(f):
        f.text = text
        return f
    return mark


@_clause(f"In each situation (one experiment, model, size and multiple of L, the measured multiple nearest n/L) "
         f"a scale is better or worse than `standard` where its paired t on the task's metric (loss for "
         f"language modelling, accuracy for retrieval; the mean paired difference over seeds or documents "
         f"over its standard error) passes the one-sided critical value at level {LEVEL} (k - 1 degrees of "
         f"freedom for k of them: {critical_t(2):.2f} with 2, {critical_t(3):.2f} with 3); otherwise not separated.")
def _separated(c) -> str:
    return c.verdict


@_clause("The labels of one scale are one scale: pinned lengths dropped, a scale trained in is one label "
         "whatever each experiment calls it (`log_L n trained in` is `entropy_invariant` pinned at L), and a "
         "comparison two experiments share (the same runs) is counted once.")
def _one_label(c) -> str:
    return c.scale


@_clause("A scale's score is the situations it is better in less those it is worse in, each situation "
         "weighed once (no difference is averaged across situations, so nats per byte never meet nats per "
         "token); a candidate is better in one situation at least and worse in none.")
def _score(verdicts: list) -> tuple:
    better, worse = verdicts.count("better"), verdicts.count("worse")
    return better - worse, better >= 1 and worse == 0


@_clause("Applied at test time to a model trained without it, a scale below 1 anywhere inside L is never "
         "recommended; nor is one whose factor the toolkit cannot compute from what the user passed (a "
         "per-head rule needs the user's head_stats; the share rule a known source key).")
def _admissible(scheme: str, at_test: bool, L: int, d: int, has_heads: bool) -> str:
    if scheme == SHARE_RULE:
        return "a per-head rule on a known source key: ss.share_factors"
    if scheme in PER_HEAD and not has_heads:
        return "a per-head rule: pass head_stats"
    if at_test:
        below = below_one_inside(scheme, L, d)
        if below is None:
            return "its factor is not known to the toolkit"
        if below:
            return "below 1 inside L"
    return ""


@_clause("The candidate with the highest score is recommended; a tie (the same score, and no shared "
         "situation where one's gain exceeds the other's by more than the critical value times their combined "
         "standard error) goes to the simpler published scale (the registry's order, then the per-head rules).")
def _pick(candidates: list, by_scale: dict) -> str:
    top = max(score for score, _ in candidates)
    best = sorted((s for score, s in candidates if score == top), key=lambda s: simplicity(_base(s)))
    free = [s for s in best if not any(_beats(by_scale[o], by_scale[s]) for o in best if o != s)]
    return (free or best)[0]  # the simplest that no other of the same score beats beyond the uncertainty


@_clause("At n = L nothing changes: the pinned scales are 1/sqrt(d) there (any that is not is named), and "
         "`standard` is the answer.")
def _at_l(n: int, L: int, d: int) -> str:
    if n != L:
        return ""
    off = [f"{k} x{float(pinned(k, L).factor(L, d)):.4g}" for k in QK_SCHEMES
           if SCHEMES[k].pin_rule and float(pinned(k, L).factor(L, d)) != 1.0]
    return ("n = L: the pinned scales are 1/sqrt(d) there" + (f" (all but {', '.join(off)})" if off else "")
            + "; nothing changes at L")


#: The rule's clauses in the order they are printed.
CLAUSES = (_separated, _one_label, _score, _admissible, _pick, _at_l)
#: The rule as printed (the clauses' texts).
RULE = " ".join(c.text for c in CLAUSES)


def _base(label: str) -> str:
    """The scheme key of a canonical label (``"qwen_logn at test"``: ``qwen_logn``)."""
    return label.removesuffix(" at test")


def _gain_se(c) -> tuple:
    m = c.metric
    diff, spread = (c.loss, c.loss_spread) if m == "loss" else (c.accuracy, c.accuracy_spread)
    return DIRECTION[m] * diff, spread / math.sqrt(len(c.seeds))


def _beats(mine: list, theirs: list) -> bool:
    """Whether ``mine`` gains more than ``theirs`` beyond the combined uncertainty in some shared situation."""
    other = {c.situation: c for c in theirs}
    for c in mine:
        o = other.get(c.situation)
        if o is None or o.metric != c.metric:
            continue
        (g1, s1), (g2, s2) = _gain_se(c), _gain_se(o)
        if math.isfinite(s1) and math.isfinite(s2) and g1 - g2 > c.critical * math.hypot(s1, s2):
            return True
    return False


@dataclass(frozen=True)
class Recommendation:
    """What :data:`RULE` recommends under one RoPE variant, for one way of applying the scale.

    Attributes
    ----------
    rope : str
    at_test : bool
        For a model trained with ``standard`` and run at ``n`` (True), or for training a new model (False).
    scale : str
        The recommended scale's label (``"standard"``, ``"qwen_logn at test"``, ``"ssmax"``, ...).
    scheme : str
        Its scheme key (or per-head rule).
    factor : float
        Its multiplier on the logits (over ``1/sqrt(d)``) at ``n``: for a per-head rule the median over
        the user's heads; NaN where the label names no scheme the toolkit can compute.
    formula : str
        What gives the factor at every position (pinned at ``L``).
    head_factors : tuple of float
        A per-head rule's factor for each of the user's heads at ``n`` (layer-major); empty otherwise.
    effect, effect_se : float
        The expected effect: the mean paired difference from ``standard`` and its standard error, in
        the situation that decides nearest ``n / L`` (NaN for ``standard``).
    unit : str
        The effect's unit (``"nats per token"``, ``"in accuracy"``, ...).
    task, models : str
        The task and the models that situation measured.
    reaches : float
        The largest multiple of ``L`` of the comparisons the recommendation rests on (those it is
        better in; for ``standard``, every comparison read).
    score : int
        Situations better less situations worse.
    reason : str
        The comparisons it rests on, generated from them.
    """

    rope: str
    at_test: bool
    scale: str
    scheme: str
    factor: float
    formula: str
    head_factors: tuple
    effect: float
    effect_se: float
    unit: str
    task: str
    models: str
    reaches: float
    score: int
    reason: str


def unit(c) -> str:
    """The unit of a comparison's metric: nats per position for loss, a fraction for accuracy."""
    if c.metric == "accuracy":
        return "in accuracy"
    return f"nats per {c.length_unit.removesuffix('s')}" if c.length_unit else "nats"


def _factor(scheme: str, d: int, L: int, n: int, heads) -> tuple:
    """``(factor at n, formula, per-head factors)`` of a scale pinned at ``L``."""
    if scheme in TOOLKIT_RULES and heads is not None:
        f = np.asarray(head_factors(heads, L, n).factors[scheme], dtype=np.float64).ravel()
        med = float(np.nanmedian(f)) if np.isfinite(f).any() else math.nan
        return med, (f"{scheme} per head (ss.head_factors at n, the median over your heads; 1 up to L = {L}, "
                     "interpolated in log n between targets)"), tuple(float(x) for x in f)
    if scheme not in SCHEMES:
        return math.nan, scheme, ()
    info = SCHEMES[scheme]
    pinning = f", pinned at L = {L}" if info.pin_rule else ""
    return float(pinned(scheme, L).factor(n, d)), f"{info.formula}{pinning}", ()


def _models(c) -> str:
    size = f"{c.size:,} {c.size_unit}" if c.size else c.size_unit
    return f"{c.model} ({size})"


def _where(c) -> str:
    gain, se = _gain_se(c)
    diff = -gain if c.metric == "loss" else gain
    return (f"{c.experiment} ({_models(c)}) at {c.multiple:.3g}L: {c.metric} {diff:+.4f} ± {se:.4f} (t = {c.t:.2f}, "
            f"needs {c.critical:.2f})")


def _standard(rope, at_test, reason, cs) -> Recommendation:
    reach = max((c.multiple for c in cs), default=math.nan)
    task = ", ".join(sorted({c.task for c in cs}))
    models = "; ".join(sorted({_models(c) for c in cs}))
    return Recommendation(rope, at_test, STANDARD, STANDARD, 1.0, SCHEMES[STANDARD].formula, (), math.nan, math.nan,
                          "", task, models, reach, 0, reason)


def recommend(comparisons: list, rope: str, at_test: bool, *, d: int, L: int, n: int, target: float,
              heads=None) -> Recommendation:
    """:data:`RULE` over the comparisons of one RoPE variant and one way of applying the scale."""
    cs = [c for c in comparisons if c.rope == rope and c.at_test == at_test]
    if at_l := _at_l(n, L, d):
        return _standard(rope, at_test, at_l, cs)
    if not cs:
        return _standard(rope, at_test, "no scale measured this way", cs)
    by_scale: dict = {}
    for c in cs:
        by_scale.setdefault(_one_label(c), []).append(c)
    candidates, refused, worse, unclear = [], {}, [], []
    for s, v in sorted(by_scale.items()):
        score, ok = _score([_separated(c) for c in v])
        why = _admissible(_base(s), at_test, L, d, heads is not None)
        if ok and why:
            refused[s] = why
        elif ok:
            candidates.append((score, s))
        elif any(c.verdict == "worse" for c in v):
            worse.append(s)
        else:
            unclear.append(s)
    if not candidates:
        parts = [f"not separated from it: {', '.join(unclear)}"] if unclear else []
        parts += [f"worse in some situation: {', '.join(worse)}"] if worse else []
        parts += [f"better but not recommended: {', '.join(f'{s} ({w})' for s, w in refused.items())}"] if refused else []
        return _standard(rope, at_test, "no admissible scale is better in a situation and worse in none; "
                         + "; ".join(parts), cs)
    best = _pick(candidates, by_scale)
    decisive = [c for c in by_scale[best] if c.verdict == "better"]
    near = min(decisive, key=lambda c: (abs(math.log(c.multiple / target)), -c.size))
    gain, se = _gain_se(near)
    factor, formula, per_head = _factor(_base(best), d, L, n, heads)
    score = dict((s, sc) for sc, s in candidates)[best]
    reason = "better than standard in " + "; ".join(_where(c) for c in decisive)
    top = [s for sc, s in candidates if sc == score and s != best]
    lower = sorted(s for sc, s in candidates if sc < score)
    beaten = [s for s in top if _beats(by_scale[best], by_scale[s])]
    tied = [s for s in top if s not in beaten]
    if tied:
        reason += f"; tied within the uncertainty with {', '.join(tied)}: the simpler published scale is taken"
    if beaten:
        reason += f"; of the same score, it gains more than {', '.join(beaten)} beyond the uncertainty"
    if lower:
        reason += f"; also better somewhere, with a lower score: {', '.join(lower)}"
    if refused:
        reason += f"; better but not recommended: {', '.join(f'{s} ({w})' for s, w in refused.items())}"
    return Recommendation(rope, at_test, best, _base(best), factor, formula, per_head,
                          -gain if near.metric == "loss" else gain, se, unit(near), near.task, _models(near),
                          max(c.multiple for c in decisive), score, reason)

"""The rule that turns the measured comparisons into a recommendation: :data:`CLAUSES`, applied by :func:`recommend`.

Each clause is a function whose ``text`` is what the output prints for it; :data:`RULE` is those
texts joined, so the rule printed is the rule applied.  The baseline is what the model runs with
now (:class:`Baseline`: its authors' recipe, or ``1/sqrt(d)`` for a model trained without a
temperature); a change is recommended only where the evidence reaches the user's situation and
passes the corrected two-sided test, and every conflict or gap keeps the baseline; among several
that pass, the best of the top tier is taken.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..heads import SHARE_RULE, TOOLKIT_RULES, head_factors
from ..schemes import SCHEMES, STANDARD, pinned

__all__ = ["CLAUSES", "LEVEL", "RULE", "Baseline", "Recommendation", "base_scheme", "below_one_inside", "holm", "judge",
           "paired_test", "position_factors", "power", "recommend", "verdict"]

#: The family-wise level: two-sided tests, Holm's correction over every comparison one question reads.
LEVEL = 0.05
#: The metrics of the evidence and their direction: ``+1`` higher is better, ``-1`` lower is better.
DIRECTION = {"loss": -1.0, "accuracy": 1.0}
#: The per-head rules: a factor per head, from the user's own heads (``head_stats``).
PER_HEAD = (*TOOLKIT_RULES, SHARE_RULE)


def paired_test(direction: float, effect: float, sd: float, k: int, values=None, binary: bool = False) -> tuple:
    """``(test, statistic, p)``: the two-sided test of one pooled paired difference.

    Parameters
    ----------
    direction : float
        ``+1`` where higher is better, ``-1`` where lower is.
    effect, sd : float
        The mean paired difference and its sample standard deviation over the ``k`` replicates.
    k : int
        Replicates.
    values : sequence of float, optional
        The paired differences themselves (needed by the sign test).
    binary : bool
        Each replicate's outcome is 0 or 1: the exact sign test (McNemar's exact test on the
        discordant pairs, :func:`scipy.stats.binomtest` at 1/2) instead of a t on 0/1 values.

    Returns
    -------
    tuple
        ``test`` (``"paired t"`` or ``"exact sign test"``), the statistic (the t; for the sign test
        the replicates better less those worse) and the two-sided p value (NaN where no test is possible).
    """
    if binary and values is not None:
        gains = direction * np.asarray(values, dtype=np.float64)
        up, down = int(np.sum(gains > 0)), int(np.sum(gains < 0))
        p = float(stats.binomtest(up, up + down, 0.5).pvalue) if up + down else 1.0
        return "exact sign test", float(up - down), p
    if k < 2 or not (math.isfinite(effect) and math.isfinite(sd)):
        return "paired t", math.nan, math.nan
    gain = direction * effect
    if sd == 0:
        return "paired t", (math.copysign(math.inf, gain) if gain else 0.0), (0.0 if gain else 1.0)
    t = gain / (sd / math.sqrt(k))
    return "paired t", float(t), float(2.0 * stats.t.sf(abs(t), k - 1))


def judge(metric: str, difference: float, spread: float, replicates: int) -> tuple:
    """``(t, p, verdict)`` of one paired difference from ``standard`` tested alone (no correction), by :func:`paired_test`."""
    _, t, p = paired_test(DIRECTION[metric], difference, spread, replicates)
    return t, p, verdict(DIRECTION[metric] * difference if math.isfinite(difference) else math.nan, p)


def holm(ps) -> list:
    """Holm's step-down adjusted p values (NaN stays NaN; the adjustment counts the finite ones)."""
    ps = [float(p) for p in ps]
    finite = sorted((p, i) for i, p in enumerate(ps) if math.isfinite(p))
    m = len(finite)
    out = [math.nan] * len(ps)
    running = 0.0
    for rank, (p, i) in enumerate(finite):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def verdict(gain: float, p_adjusted: float) -> str:
    """``"better"``/``"worse"`` where the adjusted two-sided p is below :data:`LEVEL`, by the gain's sign."""
    if not (math.isfinite(p_adjusted) and math.isfinite(gain)) or p_adjusted >= LEVEL or gain == 0:
        return "not separated"
    return "better" if gain > 0 else "worse"


def base_scheme(label: str) -> str:
    """The scheme key of a canonical label (``"qwen_logn at test"``, ``"ssmax (s learned per head)"``: the scheme)."""
    return re.match(r"\w*", label).group(0)


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


@dataclass(frozen=True)
class Baseline:
    """What the model runs with now, the answer unless the evidence says otherwise.

    Attributes
    ----------
    factor : float
        The whole multiplier on ``q.k`` at ``n`` over ``1/sqrt(d)``.
    label : str
        What it is (``"the authors' recipe: YaRN's temperature ..."``, ``"1/sqrt(d)"``).
    base : float
        The multiplier without any temperature (``1``; Gemma's ``query_pre_attn_scalar`` makes it another).
    reached_by_evidence : str
        ``""`` where the evidence (scales against ``standard`` in models trained without a
        temperature, RoPE changed at test) speaks to this model; else why it does not.
    assumed : bool
        True where no config was given and a model trained without a temperature is assumed.
    """

    factor: float = 1.0
    label: str = "1/sqrt(d)"
    base: float = 1.0
    reached_by_evidence: str = ""
    assumed: bool = True


def _clause(text: str):
    def mark(f):
        f.text = text
        return f
    return mark


@_clause("The baseline is what the model runs with now: its authors' recipe read from its config (the whole "
         "multiplier on q.k at n, as the reference code applies it), or 1/sqrt(d) for a model assumed trained "
         "without a temperature. Inside the length the recipe covers (n <= L) the answer is the baseline.")
def _inside(n: int, L: int) -> str:
    return f"n = {n:,} is inside the length the recipe covers (L = {L:,}): keep it" if n <= L else ""


@_clause("The evidence measures scales against 1/sqrt(d) in models trained without a temperature, with the "
         "RoPE variant applied at test; it does not reach a model trained with a temperature or with RoPE "
         "scaling, whose recipe is then kept.")
def _reaches_model(baseline: Baseline, at_test: bool) -> str:
    return baseline.reached_by_evidence if at_test else ""


@_clause(f"In each situation (one experiment on one model under one RoPE) the paired differences from "
         f"`standard` (n/L counts keys over the training length) are pooled replicate by replicate over "
         f"the measured multiples past L up to the first that reaches n/L, and tested two-sided: a paired t "
         f"on loss or accuracy, the exact sign test on keys retrieved (0 or 1 per prompt). Holm's correction "
         f"runs over every scale, situation and way of applying that the question reads under one RoPE variant "
         f"(the same family however the question is asked), at family-wise level {LEVEL}: "
         f"better or worse where the adjusted p is below it, else not separated, with the smallest effect the "
         f"replicates could have separated in that family.")
def _separated(c) -> str:
    return c.verdict


@_clause("The labels of one scale are one scale only where they are the same function of n/L: a pin at L "
         "is dropped, another pin is kept as a multiple of L (`entropy_invariant@8L`), a scale trained with a "
         "parameter learned per head is not the fixed scale (`ssmax (s learned per head)`), and a comparison "
         "two experiments share (the same runs) is counted once.")
def _one_label(c) -> str:
    return c.scale


@_clause("A situation whose measured multiples do not bracket n/L (one at or past it, one at or before it) "
         "gives no effect at n: no change rests on it, and where none does the answer is the baseline, with "
         "the multiples each model was measured at and the i.i.d. theory's prediction at n labelled as theory.")
def _reach(cs: list) -> list:
    return [c for c in cs if c.reaches]


@_clause("A candidate is better in one situation at least that reaches n/L, and worse, by the same corrected "
         "test, in no situation on the same task and RoPE, whatever the model and multiple: where two models "
         "are separated in opposite directions no change is recommended and both are shown; a difference "
         "that is not separated vetoes nothing.")
def _candidate(v: list) -> tuple:
    better = [c for c in v if c.reaches and c.verdict == "better"]
    against = [c for c in v if c.verdict == "worse"]
    return better, against


@_clause("Applied at test time to a model trained without it, a scale below 1 anywhere inside L is never "
         "recommended; nor is one whose factor the toolkit cannot compute from what the user passed (a "
         "per-head rule needs the user's head_stats; the share rule a known source key).")
def _admissible(scheme: str, at_test: bool, L: int, d: int, has_heads: bool) -> str:
    if scheme == "constant":
        return ""  # 1 inside L by construction; its factor past L is the label's
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


@_clause(f"Candidates form a top tier: those that no other candidate beats beyond the uncertainty (the same "
         f"two-sided test at {LEVEL} on the two scales' paired difference in a shared situation that reaches n/L). "
         f"The answer is the tier's member with the best estimate in the situation that decides, the others named "
         f"as equivalent; a scale that does not beat the baseline never changes the answer.")
def _tier(candidates: list, by_scale: dict) -> list:
    top = [s for s in candidates if not any(_beats(by_scale[o], by_scale[s]) for o in candidates if o != s)]
    return top or list(candidates)  # a cycle of wins (across situations) leaves every candidate in the tier


@_clause("Your own measurement (softmax-scale measure, --evidence) comes first: where it reaches n/L it alone "
         "decides, under the same tests with Holm's correction over its own comparisons, against the file's recipe, "
         "whatever its recipe; the toolkit's other results are shown beside it as context.")
def _own_first(cs: list) -> list:
    own = [c for c in cs if c.kind.startswith("your own model")]
    return own if any(c.reaches for c in own) else cs


#: The rule's clauses in the order they are printed.
CLAUSES = (_inside, _own_first, _reaches_model, _separated, _one_label, _reach, _candidate, _admissible, _tier)
#: The rule as printed (the clauses' texts).
RULE = " ".join(c.text for c in CLAUSES)


def power(cs: list) -> str:
    """What the evidence could have separated, per source: the smallest effect in each situation's family."""
    by: dict = {}
    for c in cs:
        if math.isfinite(c.detectable) or math.isinf(c.detectable):
            key = (c.experiment, _models(c), len(c.seeds), c.replicates, unit(c), c.family)
            by[key] = min(by.get(key, math.inf), c.detectable)
    if not by:
        return ""
    parts = []
    for (experiment, models, k, replicates, u, m), x in sorted(by.items()):
        size = "no outcome could be separated" if math.isinf(x) else \
            "any difference (its replicates agree exactly)" if x == 0 else f"{x:.3g} {u}"
        parts.append(f"{models}, {experiment}, {k} {replicates}: {size}")
    return (f"; not separated, and the smallest effect each source could have separated at family-wise level "
            f"{LEVEL} (Holm's first step over its family's tests): " + "; ".join(parts))


def _priority(c) -> tuple:
    """The order in which situations decide: a real model first, then the largest multiple, then the smallest p."""
    return (c.kind != "real pretrained model" and not c.kind.startswith("your own model"), -c.multiple, c.p_adjusted)


def _nearest(decisive: list):
    """The comparison that decides among a scale's: :func:`_priority`'s first."""
    return min(decisive, key=_priority)


def _beats(mine: list, theirs: list) -> bool:
    """Whether ``mine`` gains more than ``theirs`` beyond the uncertainty in a shared situation that reaches n/L."""
    other = {c.situation: c for c in theirs}
    for c in mine:
        o = other.get(c.situation)
        if o is None or not c.reaches or o.metric != c.metric or not (c.values and o.values):
            continue
        a, b = dict(zip(c.seeds, c.values)), dict(zip(o.seeds, o.values))
        common = sorted(set(a) & set(b))
        d = np.array([a[s] - b[s] for s in common])
        if d.size < 2 and not c.binary:
            continue
        _, _, p = paired_test(DIRECTION[c.metric], float(d.mean()), float(d.std(ddof=1)) if d.size > 1 else math.nan,
                              d.size, d, c.binary and o.binary)
        if math.isfinite(p) and p < LEVEL and DIRECTION[c.metric] * d.mean() > 0:
            return True
    return False


@dataclass(frozen=True)
class Recommendation:
    """What :data:`RULE` recommends under one RoPE variant, for one way of applying the scale.

    Attributes
    ----------
    rope : str
    at_test : bool
        For the model as it is, run at ``n`` (True), or for training a new model (False).
    scale : str
        The recommended scale's label (``"standard"``: keep the baseline; ``"qwen_logn at test"``, ...).
    scheme : str
        Its scheme key (or per-head rule); ``"recipe"`` where the authors' recipe is kept.
    factor : float
        The whole multiplier on ``q.k`` to run with at ``n``, over ``1/sqrt(d)``: the baseline's where
        it is kept; for a per-head rule the median over the user's heads; NaN where no fixed number exists
        (a parameter learned per head).
    baseline : float
        The whole multiplier the model runs with now (the authors' recipe, or 1).
    change : str
        ``"keep x1.2965"`` or ``"x1 -> x1.25"``.
    formula : str
        What gives the factor at every position.
    head_factors : tuple of float
        A per-head rule's factor for each of the user's heads at ``n`` (layer-major); empty otherwise.
    effect, effect_se : float
        The pooled paired difference from ``standard`` and its standard error in the situation that
        decides (NaN where nothing measured reaches ``n``).
    unit : str
        The effect's unit (``"nats per token"``, ``"in accuracy"``, ...).
    task, models : str
        The task and the models that situation measured (for a kept baseline: every model read, each
        with the multiples of L it was measured at).
    reaches : float
        The largest multiple of ``L`` measured among the comparisons read (NaN: none).
    reason : str
        Why, generated from the comparisons.
    side_by_side : tuple of str
        Where models disagree in sign: each model's pooled result, one line each.
    reach_by_model : tuple
        For a kept baseline: ``(model, largest multiple of L measured)`` for each model read, each its own.
    equivalent : tuple of str
        The other members of the top tier: each better than the baseline, none beaten by the answer
        beyond the uncertainty (the answer has the best estimate among them).
    """

    rope: str
    at_test: bool
    scale: str
    scheme: str
    factor: float
    baseline: float
    change: str
    formula: str
    head_factors: tuple
    effect: float
    effect_se: float
    unit: str
    task: str
    models: str
    reaches: float
    reason: str
    side_by_side: tuple = ()
    equivalent: tuple = ()
    reach_by_model: tuple = ()


def unit(c) -> str:
    """The unit of a comparison's metric: nats per position for loss, a fraction for accuracy."""
    if c.metric == "accuracy":
        return "in keys retrieved" if c.binary else "in accuracy"
    return f"nats per {c.length_unit.removesuffix('s')}" if c.length_unit else "nats"


def constant_factor(label: str) -> float | None:
    """The multiplier of a constant cell's label (``"constant x1.1 at test"``: 1.1); None for any other label."""
    m = re.match(r"constant x([0-9.eE+-]+)", label)
    return float(m.group(1)) if m else None


def _factor(scheme: str, label: str, d: int, L: int, n: int, heads) -> tuple:
    """``(factor at n, formula, per-head factors)`` of a scale pinned at ``L`` (times nothing: over ``1/sqrt(d)``)."""
    if (f := constant_factor(label)) is not None:
        return f, f"x{f:g} on the queries that see more than L = {L} keys, 1 inside L (a constant cell of softmax-scale measure)", ()
    if scheme in TOOLKIT_RULES and heads is not None:
        f = np.asarray(head_factors(heads, L, n).factors[scheme], dtype=np.float64).ravel()
        med = float(np.nanmedian(f)) if np.isfinite(f).any() else math.nan
        return med, (f"{scheme} per head (ss.head_factors at n, the median over your heads; 1 up to L = {L}, "
                     "interpolated in log n between targets)"), tuple(float(x) for x in f)
    if scheme not in SCHEMES:
        return math.nan, scheme, ()
    info = SCHEMES[scheme]
    if "learned per head" in label:
        return math.nan, (f"{info.formula} with {info.learned} learned per head (initialised by {info.pin_rule}); "
                          "its factor at n is what training makes of it"), ()
    pin, at = _pin(label, L)
    pinning = f", pinned at {pin.removesuffix('L')} x L = {at:g}" if pin else (f", pinned at L = {L}" if info.pin_rule
                                                                                else "")
    return float(pinned(scheme, int(round(at))).factor(n, d)), f"{info.formula}{pinning}", ()


def _pin(label: str, L: int) -> tuple:
    """``(pin, length)`` of a label's pin (``"entropy_invariant@8L"``: ``("8L", 8 L)``; none: ``("", L)``)."""
    pin = label.partition("@")[2].partition(" ")[0]
    return pin, (L * float(pin.removesuffix("L")) if pin else L)


def position_factors(label: str, d: int, L: int, positions) -> np.ndarray | None:
    """A recommended scale's factor over ``1/sqrt(d)`` at each position (keys seen), to set in an engine.

    A constant cell of ``measure`` is its constant at every position (the measurement kept 1 inside L;
    an engine's setting applies it there too); None for a per-head rule or a parameter learned per head.
    """
    positions = np.asarray(positions, dtype=np.float64)
    if (f := constant_factor(label)) is not None:
        return np.full(positions.shape, f)
    scheme = base_scheme(label)
    if scheme in PER_HEAD or scheme not in SCHEMES or "learned per head" in label:
        return None
    _, at = _pin(label, L)
    return np.asarray(pinned(scheme, int(round(at))).factor(positions, d), dtype=np.float64)


def _models(c) -> str:
    size = f"{c.size:,} {c.size_unit}" if c.size else c.size_unit
    return f"{c.model} ({size})"


def _num(x: float) -> str:
    return f"{x:+.4f}"


def where(c) -> str:
    """One comparison in a sentence: model, multiples, pooled effect ± standard error, the test and its adjusted p."""
    span = f"{c.multiples[0]:.3g}L" if len(c.multiples) == 1 else f"{c.multiples[0]:.3g}L-{c.multiples[-1]:.3g}L"
    se = f" ± {c.effect_se:.4f} (standard error)" if math.isfinite(c.effect_se) else ""
    p = "no test" if not math.isfinite(c.p) else f"{c.test}, p = {c.p:.3g}, Holm {c.p_adjusted:.3g}"
    return f"{c.experiment} ({_models(c)}; {c.closeness}) at {span}, {len(c.seeds)} {c.replicates}: {c.metric} " \
           f"{_num(c.effect)}{se} ({p})"


def _measured_at(cs: list) -> str:
    """Each model of ``cs`` with the multiples of L it was measured at (its own reach, never another model's)."""
    at: dict = {}
    for c in cs:
        at.setdefault(_models(c), set()).update(m for m, *_ in c.per_multiple)
        at[_models(c)].add(c.measured_to)
    return "; ".join(f"{m} at {', '.join(f'{x:.3g}L' for x in sorted(xs))}" for m, xs in sorted(at.items()))


def _keep(rope, at_test, baseline: Baseline, reason, cs, side=()) -> Recommendation:
    reach = max((c.measured_to for c in cs), default=math.nan)
    task = ", ".join(sorted({c.task for c in cs}))
    models = _measured_at(cs)
    by_model: dict = {}
    for c in cs:
        by_model[c.model] = max(by_model.get(c.model, 0.0), c.measured_to)
    return Recommendation(rope, at_test, STANDARD, "recipe" if not baseline.assumed else STANDARD, baseline.factor,
                          baseline.factor, f"keep x{baseline.factor:.5g}", baseline.label, (),
                          math.nan, math.nan, "", task, models, reach, reason, tuple(side),
                          reach_by_model=tuple(sorted(by_model.items())))


def recommend(comparisons: list, rope: str, at_test: bool, *, d: int, L: int, n: int, heads=None,
              baseline: Baseline | None = None) -> Recommendation:
    """:data:`RULE` over the comparisons of one RoPE variant and one way of applying the scale.

    ``baseline`` is what the model runs with now (default: ``1/sqrt(d)``, a model assumed trained
    without a temperature); training a new model starts from ``1/sqrt(d)`` whatever the config says.
    """
    base = baseline if (baseline is not None and at_test) else Baseline(
        1.0 if baseline is None else baseline.base, "1/sqrt(d)" if baseline is None or baseline.base == 1 else
        f"the model's base scale x{baseline.base:.5g} without a temperature", 1.0 if baseline is None else baseline.base)
    cs = [c for c in comparisons if c.rope == rope and c.at_test == at_test]
    if why := _inside(n, L):
        return _keep(rope, at_test, base, why, cs)
    decide = _own_first(cs)
    own = decide is not cs
    if not own and (why := _reaches_model(base, at_test)):
        return _keep(rope, at_test, base, why, cs)
    cs = decide
    if not cs:
        return _keep(rope, at_test, base, "no scale measured this way", cs)
    if not _reach(cs):
        largest = max(c.measured_to for c in cs)
        why = f"not measured past {largest:.3g}L" if largest < n / L else "not measured at or before n/L, only beyond it"
        return _keep(rope, at_test, base, f"{why}: no situation's multiples bracket n/L = {n / L:.3g}", cs)
    by_scale: dict = {}
    for c in cs:
        by_scale.setdefault(_one_label(c), []).append(c)
    candidates, refused, conflicts, side = [], {}, [], []
    for s, v in sorted(by_scale.items()):
        better, against = _candidate(v)
        ahead = [c for c in v if c.reaches and c.verdict == "better"]
        if ahead and {c.model for c in against} - {c.model for c in ahead}:  # two models separated in opposite ways
            side += [f"{s}: {where(c)}" for c in sorted(v, key=lambda c: (c.kind, c.experiment))]
        if not better:
            continue
        if against:
            conflicts.append(s)
            continue
        why = _admissible(base_scheme(s), at_test, L, d, heads is not None)
        if why:
            refused[s] = why
        else:
            candidates.append(s)
    parts = []
    if conflicts:
        parts.append(f"better somewhere but the other way elsewhere (shown side by side): {', '.join(conflicts)}")
    if refused:
        parts.append(f"better but not recommended: {', '.join(f'{s} ({w})' for s, w in refused.items())}")
    if not candidates:
        return _keep(rope, at_test, base, "no admissible scale is better, after Holm's correction, in a situation "
                     "that reaches n/L without being worse elsewhere" + "".join(f"; {p}" for p in parts)
                     + power(_reach(cs)), cs, side)
    tier = _tier(candidates, by_scale)
    nearest = {s: _nearest([c for c in by_scale[s] if c.reaches and c.verdict == "better"]) for s in tier}
    best = min(tier, key=lambda s: (_priority(nearest[s])[:2], -nearest[s].gain, s))  # the p only orders situations
    decisive = [c for c in by_scale[best] if c.reaches and c.verdict == "better"]
    near = nearest[best]
    equivalent = tuple(s for s in sorted(tier) if s != best)
    beaten = {s: sorted(o for o in candidates if o != s and _beats(by_scale[o], by_scale[s])) for s in candidates
              if s not in tier}
    if equivalent:
        parts.insert(0, f"equivalent within the uncertainty (the top tier): {', '.join(equivalent)}")
    if beaten:
        parts.append("better than the baseline but beaten within the candidates: "
                     + ", ".join(f"{s} (by {', '.join(b)})" for s, b in sorted(beaten.items())))
    factor, formula, per_head = _factor(base_scheme(best), best, d, L, n, heads)
    whole = factor * base.base  # the scale in place of the baseline's temperature, on the model's base scale
    reason = "better than standard in " + "; ".join(where(c) for c in decisive)
    reason += "".join(f"; {p}" for p in parts)
    others = [c for c in by_scale[best] if c not in decisive]
    if others:
        reason += "; elsewhere not against it: " + "; ".join(where(c) for c in others)
    change = f"x{base.factor:.5g} -> x{whole:.5g}" if math.isfinite(whole) else f"x{base.factor:.5g} -> {best}"
    return Recommendation(rope, at_test, best, base_scheme(best), whole, base.factor, change, formula, per_head,
                          near.effect, near.effect_se, unit(near), near.task, _models(near),
                          near.measured_to, reason, tuple(side), equivalent)

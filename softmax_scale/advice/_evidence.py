"""The measured evidence: the experiments' :class:`~softmax_scale.experiments.Evidence`, as comparisons and a scope.

Every experiment of :data:`softmax_scale.experiments.EXPERIMENTS` that has a result file in the
results folder and says what its rows mean; of its rows, those of a scale against a reference in
the same model under the RoPE asked, for the task asked.  One situation is one experiment on one
model under one RoPE variant; its measured multiples of ``L`` past ``L`` (``n/L``: keys over the
training length) up to the first that reaches ``n / L`` are pooled replicate by replicate
(:func:`pool`), and the pooled paired difference is tested two-sided (:func:`~._rule.paired_test`).
One scale is one label (:func:`scale_label`), and a comparison two experiments share is one comparison.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import stats

from ..experiments import EXPERIMENTS, LM_TASKS, Experiment, applied_at_test
from ..heads import SHARE_RULE, TOOLKIT_RULES
from ..schemes import SCHEMES, STANDARD
from ..schemes.rope import ROPES
from ._own import OWN_EXPERIMENT, OWN_KIND
from ._rule import DIRECTION, LEVEL, base_scheme, holm, paired_test, verdict

__all__ = ["KINDS", "TASKS", "Comparison", "base_scheme", "comparisons", "detectable", "own_scope", "pool",
           "read_evidence", "scale_label", "scope", "task_matches"]

#: ``--task``: what the model is asked to do, and the rows of the evidence that speak to it.
TASKS = {"lm": "language modelling", "retrieval": "retrieving one key"}
#: The reference every recommendation is against: the same model with ``1/sqrt(d)`` under the same RoPE variant.
REFERENCE = STANDARD
#: What kind of model a replicate kind means: seeds are models trained here; documents and prompts one pretrained model.
KINDS = {"seeds": "small model trained here", "documents": "real pretrained model", "prompts": "real pretrained model"}


@dataclass(frozen=True)
class Comparison:
    """A measured scale against a reference in one situation, pooled over multiples, with its verdict.

    Attributes
    ----------
    experiment : str
        The experiment (two names, ``"copy, size"``, where both measured the same runs).
    model : str
    size : int
    size_unit : str
    head_dim, train_length : int
        The model's head dimension and training length ``L`` (0: not stated).
    length_unit : str
        What a position is (``"bytes"``, ``"tokens"``, ...).
    replicates : str
        What the seeds count: ``"seeds"``, ``"documents"`` or ``"prompts"``.
    kind : str
        ``"real pretrained model"`` (run on documents or prompts) or ``"small model trained here"``.
    rope, task : str
    scale : str
        The scale, one label per scale (:func:`scale_label`): ``"qwen_logn at test"`` applied at test
        time only to a model trained with ``standard``, ``"ssmax (s learned per head)"`` trained in.
    labels : tuple of str
        The experiments' own labels of it.
    reference : str
        ``"standard"`` (the same model with ``1/sqrt(d)``, the same RoPE variant) or another
        reference of the experiment (a sliding window of ``L``, ...).
    at_test : bool
    metric : str
        The metric the rule reads: loss for language modelling, accuracy for retrieval (the other
        where only it is measured).
    multiples : tuple of float
        The measured multiples ``n/L`` pooled: past ``L``, up to the first that reaches the target.
    measured_to : float
        The largest multiple this situation measured.
    reaches : bool
        Whether the measured multiples bracket the target ``n / L`` (one at or past it, one at or before it).
    per_multiple : tuple
        ``(multiple, mean difference, standard error, replicates)`` at each pooled multiple.
    effect, effect_se : float
        The pooled paired difference (the scale's minus the reference's: the mean over replicates of
        each replicate's mean over :attr:`multiples`) and its standard error.
    values : tuple of float
        Each replicate's pooled difference, in the order of :attr:`seeds`.
    seeds : tuple of int
    binary : bool
        Whether the outcome is 0 or 1 per replicate (keys retrieved): tested by the exact sign test.
    test : str
        ``"paired t"`` or ``"exact sign test"``.
    statistic : float
        The paired t, or for the sign test the replicates better less those worse.
    p : float
        The two-sided p value (NaN: no test possible).
    p_adjusted : float
        Holm's adjustment of :attr:`p` over the comparisons the question reads under its RoPE (:func:`comparisons`).
    verdict : {"better", "worse", "not separated"}
    family : int
        How many tests that adjustment runs over.
    detectable : float
        The smallest effect (in the metric's unit) these replicates could have separated in that family
        (:func:`detectable`).
    """

    experiment: str
    model: str
    size: int
    size_unit: str
    head_dim: int
    train_length: int
    length_unit: str
    replicates: str
    kind: str
    rope: str
    task: str
    scale: str
    labels: tuple
    reference: str
    at_test: bool
    metric: str
    multiples: tuple
    measured_to: float
    reaches: bool
    per_multiple: tuple
    effect: float
    effect_se: float
    values: tuple
    seeds: tuple
    binary: bool
    test: str
    statistic: float
    p: float
    p_adjusted: float
    verdict: str
    family: int = 0
    detectable: float = math.nan

    @property
    def situation(self) -> tuple:
        """What the rule weighs once: the experiment, the model and size, the RoPE."""
        return (self.experiment, self.model, self.size, self.rope)

    @property
    def gain(self) -> float:
        """:attr:`effect` signed so that positive is better."""
        return DIRECTION[self.metric] * self.effect

    @property
    def multiple(self) -> float:
        """The largest multiple pooled."""
        return max(self.multiples)

    @property
    def closeness(self) -> str:
        """How close the situation is to a user's: the kind of model, how its RoPE was set, its head dimension, its reach."""
        rope = "its trained RoPE frequencies" if self.rope == "none" else f"RoPE {self.rope} applied at test"
        dim = f", head dimension {self.head_dim}" if self.head_dim else ""
        return f"{self.kind}, {rope}{dim}, measured to {self.measured_to:.3g}L"


def _has_evidence(exp: Experiment) -> bool:
    return type(exp).evidence is not Experiment.evidence


#: The last folders read, keyed by what was read (each file's name, size and modification time).
_READ: dict = {}


def read_evidence(results: Path) -> tuple[dict, list, list]:
    """``({name: (file name, [Evidence])}, [names without a result file], [names whose file has no comparison yet])``.

    A folder whose result files have not changed since it was last read is not read again.
    """
    paths = {name: EXPERIMENTS[name].result_path(EXPERIMENTS[name].config(), results)
             for name in EXPERIMENTS if _has_evidence(EXPERIMENTS[name])}
    stamp = tuple((name, id(EXPERIMENTS[name]), str(p.resolve()),
                   (p.stat().st_size, p.stat().st_mtime_ns) if p.exists() else None) for name, p in paths.items())
    if stamp not in _READ:
        if len(_READ) > 8:
            _READ.clear()
        _READ[stamp] = _read(paths)
    found, missing, empty = _READ[stamp]
    return dict(found), list(missing), list(empty)


def _read(paths: dict) -> tuple[dict, list, list]:
    found, missing, empty = {}, [], []
    for name, path in paths.items():
        exp = EXPERIMENTS[name]
        if not path.exists():
            missing.append(name)
            continue
        try:
            ev = exp.evidence(exp.read(path))
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"`results`: {path} is not a result file of the experiment {name!r} ({exc})") from None
        if ev:
            found[name] = (path.name, ev)
        else:
            empty.append(name)
    return found, missing, empty


def task_matches(task: str, asked: str) -> bool:
    """Whether an :attr:`Evidence.task` speaks to ``asked`` (a key of :data:`TASKS`)."""
    return (task in LM_TASKS) == (asked == "lm")


@functools.lru_cache(maxsize=1)
def _aliases() -> dict:
    """The experiments' names of scales trained in, back to their scheme keys (``log_L n trained in``: entropy_invariant)."""
    from ..experiments.first import first_scale_name

    return {first_scale_name(k, "trained"): k for k in SCHEMES if first_scale_name(k, "trained") != k}


def scale_label(label: str, train_length: int = 0) -> str:
    """One label per scale, whatever an experiment calls it, as a function of ``n/L``; a label naming no scheme is kept.

    ``"standard + qwen_logn@128 at test"`` in a model with ``L = 128`` is ``"qwen_logn at test"``;
    pinned elsewhere than at ``L`` the pin stays, as a multiple of ``L`` (``"entropy_invariant@512"``
    with ``L = 64`` is ``"entropy_invariant@8L"``: another function of ``n/L``); ``"log_L n trained in"``
    is ``"entropy_invariant"``; a scheme trained with a parameter learned per head (``ssmax``) is
    ``"ssmax (s learned per head)"``, not the fixed scale.
    """
    at_test = applied_at_test(label)
    base = label.removesuffix(" at test") if at_test else label
    base = re.sub(r"^standard \+ ", "", base)
    pin = re.search(r"@(\d+)", base)
    base = re.sub(r"@\d+", "", base)
    base = _aliases().get(base, base)
    word = re.match(r"\w*", base).group(0)
    if word in SCHEMES or word in (*TOOLKIT_RULES, SHARE_RULE):
        base = word
        if pin is not None and train_length and int(pin.group(1)) != train_length:
            base = f"{word}@{int(pin.group(1)) / train_length:g}L"
        if not at_test and word in SCHEMES and SCHEMES[word].learned:
            base = f"{word} ({SCHEMES[word].learned} learned per head)"
    return f"{base} at test" if at_test else base


def _primary(task: str, have) -> str:
    want = "loss" if task in LM_TASKS else "accuracy"
    return want if want in have else next(m for m in DIRECTION if m in have)


def pool(rows: list) -> tuple:
    """``(values, seeds)``: each replicate's mean paired difference over the rows (one per multiple), by seed.

    Rows without their per-replicate :attr:`~softmax_scale.experiments.Evidence.values` cannot be
    pooled: then the last row's values are rebuilt only where it has one replicate or none is needed,
    and ``(None, seeds)`` is returned otherwise.
    """
    if not all(e.values for e in rows):
        return None, rows[-1].seeds
    by: dict = {}
    for e in rows:
        for s, v in zip(e.seeds, e.values):
            by.setdefault(s, []).append(v)
    seeds = tuple(sorted(by))
    return tuple(float(np.mean(by[s])) for s in seeds), seeds


def _same(a: "Comparison", b: "Comparison") -> bool:
    keys = ("model", "size", "rope", "task", "multiples", "scale", "reference", "seeds", "metric")
    if any(getattr(a, k) != getattr(b, k) for k in keys):
        return False
    return abs(a.effect - b.effect) <= 1e-9 or (math.isnan(a.effect) and math.isnan(b.effect))


def _merge(out: list) -> list:
    """Comparisons two experiments share (the same model, runs and numbers) as one, named by both."""
    merged: list = []
    for c in out:
        twin = next((i for i, m in enumerate(merged) if _same(m, c)), None)
        if twin is None:
            merged.append(c)
            continue
        m = merged[twin]
        names = ", ".join(sorted({*m.experiment.split(", "), *c.experiment.split(", ")}))
        merged[twin] = replace(m, experiment=names, labels=tuple(sorted({*m.labels, *c.labels})))
    return merged


def _comparison(rows: list, target: float) -> "Comparison":
    """One situation's rows of one scale and metric (one per multiple), pooled up to the multiple that reaches ``target``."""
    rows = sorted(rows, key=lambda e: e.multiple)
    measured_to = rows[-1].multiple
    # the measured multiples bracket n/L: one at or past it, and one at or before it (a result measured only far
    # beyond n/L does not answer a question at n/L)
    reaches = measured_to >= target * (1 - 1e-9) and rows[0].multiple <= target * (1 + 1e-9)
    upto = next(e.multiple for e in rows if e.multiple >= target * (1 - 1e-9)) if reaches else measured_to
    used = [e for e in rows if e.multiple <= upto]
    values, seeds = pool(used)
    first = used[-1]
    per = tuple((e.multiple, e.difference, e.spread / math.sqrt(len(e.seeds)) if len(e.seeds) > 1 else math.nan,
                 len(e.seeds)) for e in used)
    binary = all(e.binary for e in used)
    if values is None:  # no per-replicate values: the last multiple alone, from its mean and spread
        used, per = [first], per[-1:]
        effect, sd, k = first.difference, first.spread, len(first.seeds)
    else:
        v = np.asarray(values)
        k = v.size
        effect, sd = float(v.mean()), float(v.std(ddof=1)) if k > 1 else math.nan
    se = sd / math.sqrt(k) if k > 1 and math.isfinite(sd) else math.nan
    test, stat, p = paired_test(DIRECTION[first.metric], effect, sd, k, values, binary)
    return Comparison(
        first.experiment, first.model, first.size, first.size_unit, first.head_dim, first.train_length,
        first.length_unit, first.replicates,
        OWN_KIND if first.experiment == OWN_EXPERIMENT else KINDS.get(first.replicates, "small model trained here"),
        first.rope,
        first.task, scale_label(first.scale, first.train_length), tuple(sorted({e.scale for e in rows})),
        first.reference, applied_at_test(first.scale), first.metric, tuple(e.multiple for e in used), measured_to,
        reaches, per, effect, se, tuple(values) if values is not None else (), seeds, binary, test, stat, p,
        math.nan, "not separated")


def comparisons(found: dict, task: str, rope: str | None, target: float, baselines: bool = False) -> list:
    """The comparisons that speak to the situation (see the module docstring), with Holm's verdicts.

    Each scale against ``standard``; with ``baselines``, ``standard`` against the other references.
    Holm's adjustment runs over the comparisons of one RoPE variant: each scale, situation and way of
    applying the scale that the question reads under it, so that a question's family is the same
    whether it names its RoPE or asks for every variant at once.
    """
    def wanted(e):
        return (e.scale == REFERENCE and e.reference != REFERENCE) if baselines else e.reference == REFERENCE

    rows = [e for _, ev in found.values() for e in ev
            if wanted(e) and e.metric in DIRECTION and task_matches(e.task, task) and (rope is None or e.rope == rope)
            and e.multiple > 1.0]
    primary: dict = {}
    for e in rows:
        primary.setdefault((e.experiment, e.model, e.size, e.rope), set()).add(e.metric)
    groups: dict = {}
    for e in rows:
        sit = (e.experiment, e.model, e.size, e.rope)
        if e.metric != _primary(e.task, primary[sit]):
            continue
        groups.setdefault((*sit, scale_label(e.scale, e.train_length), e.reference), []).append(e)
    out = _merge([_comparison(es, target) for es in groups.values()])
    judged = []
    for rope_ in sorted({c.rope for c in out}):  # one family per RoPE, whichever RoPEs the question read
        family = [c for c in out if c.rope == rope_]
        m = sum(math.isfinite(c.p) for c in family)
        for c, q in zip(family, holm([c.p for c in family])):
            judged.append(replace(c, p_adjusted=q, verdict=verdict(c.gain, q), family=m,
                                  detectable=detectable(c, m)))
    return sorted(judged, key=lambda c: (c.rope, c.at_test, c.experiment, c.size, c.scale, c.reference))


def detectable(c, m: int) -> float:
    """The smallest effect ``c``'s replicates could show as separated in a family of ``m`` (Holm's first step).

    For a paired t on ``k`` replicates: ``t_{1 - LEVEL/(2m)}(k - 1)`` times the standard error; for the
    exact sign test on ``k`` prompts: the fewest prompts that, all one way, give a two-sided p below
    ``LEVEL/m``, as a fraction of ``k`` (``inf`` where ``k`` is too few for any outcome to pass).  NaN
    where no test is possible.
    """
    k = len(c.seeds)
    if m < 1 or k < 1:
        return math.nan
    if c.binary:
        need = math.ceil(math.log2(2 * m / LEVEL))  # 2 * 0.5**need < LEVEL / m
        return need / k if need <= k else math.inf
    if k < 2 or not math.isfinite(c.effect_se):
        return math.nan
    return float(stats.t.isf(LEVEL / (2 * m), k - 1) * c.effect_se)


def _and(items: list) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def times(m: float) -> str:
    """A multiple of ``L`` as printed: ``8L``, ``3.33L``."""
    return f"{m:.3g}L"


def _model_line(key, es) -> str:
    model, size, unit, head_dim, L, length_unit = key

    def count(reps, kind):
        return f"{reps} {kind if reps != 1 else kind.removesuffix('s')}"

    parts = [KINDS.get(es[0].replicates, KINDS["seeds"]), f"{size:,} {unit}" if size else unit]
    if head_dim:
        parts.append(f"head dimension {head_dim}")
    if L:
        parts.append(f"L = {L:,} {length_unit}".rstrip())
    by_exp: dict = {}
    for e in es:
        by_exp.setdefault(e.experiment, []).append(e)
    reps = {x: {m: max(len(e.seeds) for e in g if e.multiple == m) for m in sorted({e.multiple for e in g})}
            for x, g in by_exp.items()}  # per experiment, the replicates at each multiple of L
    # one count for the model where its experiments replicate over one thing, as often at every multiple
    one_kind = len({e.replicates for e in es}) == 1 and all(len(set(r.values())) == 1 for r in reps.values())
    if one_kind:
        parts.append(count(max(len(e.seeds) for e in es), es[0].replicates))

    def reach(x):
        kind, at = by_exp[x][0].replicates, reps[x]
        if len(set(at.values())) > 1:  # the cells were grown unevenly: each multiple says its own count
            return "n/L " + ", ".join(f"{times(m)} ({count(r, kind)})" for m, r in at.items())
        return f"{'' if one_kind else count(max(at.values()), kind) + ', '}n/L {', '.join(times(m) for m in at)}"

    where = "; ".join(f"{x}: {reach(x)}" for x in sorted(by_exp))
    return f"{model}: {', '.join(parts)} ({where})."


def own_scope(own, name: str, task: str, compared: bool) -> list:
    """What the user's own measurement (:func:`~._own.own_evidence`) leaves out on ``task``, one line each.

    ``compared``: whether it gives a comparison on ``task``; where it gives none, a line says the
    answer rests on the other results.
    """
    lines = [f"Your measurement ({name}): {text}" for kind, text in own.unused if not kind or task_matches(kind, task)]
    if not compared:
        lines.append(f"Your measurement ({name}) gives no comparison on {TASKS[task]} past L = {own.train_length:,}: "
                     "the answer rests on the other results.")
    return lines


def own_coverage(own, name: str, n: int) -> str:
    """The answer's first line from the user's own measurement alone (no config), where ``n`` is past its ``L``.

    How far past, and how far the measurement reaches: read below where it reaches ``n/L``, else the
    command that measures the model there under the measurement's RoPE (:data:`~._config.HOUR_OPTIONS`);
    empty inside ``L``.
    """
    from ._config import HOUR_OPTIONS

    L = own.train_length
    if n <= L:
        return ""
    reach = max((e.multiple for e in own.rows), default=0.0)
    said = f"n = {n:,} is past L = {L:,}, the length your measurement ({name}) names ({times(n / L)})"
    if reach and n / L <= reach * (1 + 1e-9):
        return f"{said}; it reaches {times(reach)} and is read below."
    model = own.header.get("model") or "MODEL.gguf"
    rope = own.header.get("rope") or "none"
    under = "" if rope == "none" else f" --rope {rope}"
    return (f"{said}; it reaches {times(reach) if reach else 'no multiple past L'}: past that, measure your model at n "
            f"under the same RoPE with `softmax-scale measure {model} --n {n}{under} {HOUR_OPTIONS}`.")


def scope(found: dict, missing: list, empty: list, comps: list, *, d: int, task: str, rope: str | None,
          target: float, results_label: str) -> list:
    """What the evidence rests on, in the user's terms, and what it has not tested (one line each)."""
    rows = [e for _, ev in found.values() for e in ev
            if e.reference == REFERENCE and task_matches(e.task, task) and (rope is None or e.rope == rope)]
    lines = []
    models: dict = {}
    for e in rows:
        models.setdefault((e.model, e.size, e.size_unit, e.head_dim, e.train_length, e.length_unit), []).append(e)
    for key in sorted(models, key=lambda k: (k[0], k[1])):
        lines.append(_model_line(key, models[key]))
    lines.append(f"n/L = {target:g} (keys over the training length) chooses how far each situation's multiples are "
                 f"pooled (past L, up to the first that reaches it); d and L set the factor of each pinned scale and "
                 f"the theory's columns, not the evidence. ± is a standard error everywhere.")
    if comps:
        largest = max(c.measured_to for c in comps)
        if target > largest * (1 + 1e-9):
            lines.append(f"Not measured past {times(largest)}: n/L = {target:g} is past every measured multiple here; "
                         "no effect at n is given, only the theory's prediction.")
        else:
            reach: dict = {}
            for c in comps:
                reach[c.model] = max(reach.get(c.model, 0.0), c.measured_to)
            short = [f"{m} (to {times(x)})" for m, x in sorted(reach.items()) if target > x * (1 + 1e-9)]
            if short:
                lines.append(f"Not measured past n/L = {target:g} in {_and(short)}: those results are shown as "
                             "context and no change rests on them.")
    dims = sorted({e.head_dim for e in rows if e.head_dim})
    if dims and not dims[0] / 2 <= d <= dims[-1] * 2:
        lines.append(f"Warning: d = {d} is far from the measured models' head dimensions "
                     f"({_and([str(x) for x in dims])}).")
    lines.append(f"Read from {results_label}: " + ", ".join(f"`{name}` ({file})" for name, (file, _) in found.items())
                 + "." if found else f"No result file with comparisons in {results_label}.")
    if missing:
        lines.append(f"No result file in {results_label} for: {', '.join(f'`{m}`' for m in missing)}.")
    if empty:
        lines.append(f"A result file without a comparison yet: {', '.join(f'`{m}`' for m in empty)}.")
    measured = {e.task for _, ev in found.values() for e in ev if e.reference == REFERENCE}
    for kind, text in TASKS.items():
        if not any(task_matches(t, kind) for t in measured):
            lines.append(f"Not measured: no result file has a comparison with standard on {text}"
                         + ("; the recommendation is the default." if kind == task else "."))
    ropes = {e.rope for _, ev in found.values() for e in ev if e.reference == REFERENCE and task_matches(e.task, task)}
    if rope is not None and rope not in ropes:
        lines.append(f"Not measured: RoPE `{rope}` on {TASKS[task]} (measured: {', '.join(sorted(ropes)) or 'none'}).")
    elif ropes and set(ROPES) - ropes:
        lines.append(f"RoPE variants not measured on {TASKS[task]}: {', '.join(r for r in ROPES if r not in ropes)}.")
    return lines

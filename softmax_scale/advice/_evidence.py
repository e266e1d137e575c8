"""The measured evidence: the experiments' :class:`~softmax_scale.experiments.Evidence`, as comparisons and a scope.

Every experiment of :data:`softmax_scale.experiments.EXPERIMENTS` that has a result file in the
results folder and says what its rows mean; of its rows, those of a scale against a reference in
the same model under the RoPE asked, for the task asked, at the measured multiple of ``L``
nearest ``n / L`` (per experiment and model).  One scale is one label (:func:`scale_label`), and
a comparison two experiments share is one comparison.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ..experiments import EXPERIMENTS, LM_TASKS, Experiment, applied_at_test
from ..heads import SHARE_RULE, TOOLKIT_RULES
from ..schemes import SCHEMES, STANDARD
from ..schemes.rope import ROPES
from ._rule import DIRECTION, judge

__all__ = ["TASKS", "Comparison", "comparisons", "read_evidence", "scale_label", "scope", "task_matches"]

#: ``--task``: what the model is asked to do, and the rows of the evidence that speak to it.
TASKS = {"lm": "language modelling", "retrieval": "retrieving one key"}
#: The reference every recommendation is against: the same model with ``1/sqrt(d)`` under the same RoPE variant.
REFERENCE = STANDARD


@dataclass(frozen=True)
class Comparison:
    """A measured scale against a reference in one situation, with the verdict of :data:`~._rule.RULE`.

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
    rope, task : str
    multiple : float
        The test length as a multiple of ``L``.
    scale : str
        The scale, one label per scale (:func:`scale_label`): ``"qwen_logn at test"`` applied at test
        time only to a model trained with ``standard``, ``"ssmax"`` trained in.
    labels : tuple of str
        The experiments' own labels of it.
    reference : str
        ``"standard"`` (the same model with ``1/sqrt(d)``, the same RoPE variant) or another
        reference of the experiment (a sliding window of ``L``, ...).
    at_test : bool
    loss, loss_spread, accuracy, accuracy_spread : float
        Mean paired difference from the reference and its sample standard deviation (NaN where not measured).
    seeds : tuple of int
    metric : str
        The metric the rule reads: loss for language modelling, accuracy for retrieval (the other
        where only it is measured).
    t, critical : float
        Its paired t (the gain over its standard error) and the critical value it must pass.
    verdict : {"better", "worse", "not separated"}
    """

    experiment: str
    model: str
    size: int
    size_unit: str
    head_dim: int
    train_length: int
    length_unit: str
    replicates: str
    rope: str
    task: str
    multiple: float
    scale: str
    labels: tuple
    reference: str
    at_test: bool
    loss: float
    loss_spread: float
    accuracy: float
    accuracy_spread: float
    seeds: tuple
    metric: str
    t: float
    critical: float
    verdict: str

    @property
    def situation(self) -> tuple:
        """What the rule weighs once: the experiment, the model and size, the RoPE and the multiple."""
        return (self.experiment, self.model, self.size, self.rope, self.multiple)


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


def scale_label(label: str) -> str:
    """One label per scale, whatever an experiment calls it; a label naming no scheme is kept.

    ``"standard + qwen_logn@128 at test"`` is ``"qwen_logn at test"``, ``"log_L n trained in"`` is
    ``"entropy_invariant"``, ``"ssmax (s ln n)"`` is ``"ssmax"``.
    """
    at_test = applied_at_test(label)
    base = label.removesuffix(" at test") if at_test else label
    base = re.sub(r"^standard \+ ", "", re.sub(r"@\d+", "", base))
    base = _aliases().get(base, base)
    word = re.match(r"\w*", base).group(0)
    if word in SCHEMES or word in (*TOOLKIT_RULES, SHARE_RULE):
        base = word
    return f"{base} at test" if at_test else base


def _primary(task: str, have) -> str:
    want = "loss" if task in LM_TASKS else "accuracy"
    return want if want in have else next(m for m in DIRECTION if m in have)


def _nearest(multiples, target: float) -> float:
    """The measured multiple nearest ``target`` in ``ln`` (the larger of two equally near)."""
    return min(sorted(set(multiples), reverse=True), key=lambda m: abs(math.log(m / target)))


def _same(a: "Comparison", b: "Comparison") -> bool:
    keys = ("model", "size", "rope", "task", "multiple", "scale", "reference", "seeds")
    if any(getattr(a, k) != getattr(b, k) for k in keys):
        return False
    shared = [m for m in DIRECTION if math.isfinite(getattr(a, m)) and math.isfinite(getattr(b, m))]
    return bool(shared) and all(abs(getattr(a, m) - getattr(b, m)) <= 1e-9 for m in shared)


def _merge(out: list) -> list:
    """Comparisons two experiments share (the same model, runs and numbers) as one, named by both."""
    merged: list = []
    for c in out:
        twin = next((i for i, m in enumerate(merged) if _same(m, c)), None)
        if twin is None:
            merged.append(c)
            continue
        m = merged[twin]
        richer, other = (m, c) if sum(math.isfinite(getattr(m, k)) for k in DIRECTION) >= \
            sum(math.isfinite(getattr(c, k)) for k in DIRECTION) else (c, m)
        names = ", ".join(sorted({*m.experiment.split(", "), *c.experiment.split(", ")}))
        merged[twin] = replace(richer, experiment=names, labels=tuple(sorted({*richer.labels, *other.labels})))
    return merged


def comparisons(found: dict, task: str, rope: str | None, target: float, baselines: bool = False) -> list:
    """The comparisons that speak to the situation (see the module docstring).

    Each scale against ``standard``; with ``baselines``, ``standard`` against the other references.
    """
    def wanted(e):
        return (e.scale == REFERENCE and e.reference != REFERENCE) if baselines else e.reference == REFERENCE

    rows = [e for _, ev in found.values() for e in ev
            if wanted(e) and e.metric in DIRECTION and task_matches(e.task, task) and (rope is None or e.rope == rope)]
    near: dict = {}
    for e in rows:
        near.setdefault((e.experiment, e.model, e.size, e.rope), []).append(e.multiple)
    near = {k: _nearest(v, target) for k, v in near.items()}
    groups: dict = {}
    for e in rows:
        if e.multiple == near[(e.experiment, e.model, e.size, e.rope)]:
            groups.setdefault((e.experiment, e.model, e.size, e.rope, e.multiple, scale_label(e.scale), e.reference),
                              []).append(e)
    out = []
    nan = float("nan")
    for (experiment, model, size, rope_, multiple, scale, reference), es in groups.items():
        by = {e.metric: e for e in es}
        first = es[0]
        seeds = tuple(sorted(set().union(*(e.seeds for e in es))))
        metric = _primary(first.task, by)
        t, crit, verdict = judge(metric, by[metric].difference, by[metric].spread, len(by[metric].seeds))
        out.append(Comparison(
            experiment, model, size, first.size_unit, first.head_dim, first.train_length, first.length_unit,
            first.replicates, rope_, first.task, multiple, scale, tuple(sorted({e.scale for e in es})), reference,
            applied_at_test(first.scale),
            by["loss"].difference if "loss" in by else nan, by["loss"].spread if "loss" in by else nan,
            by["accuracy"].difference if "accuracy" in by else nan, by["accuracy"].spread if "accuracy" in by else nan,
            seeds, metric, t, crit, verdict))
    return sorted(_merge(out), key=lambda c: (c.rope, c.at_test, c.experiment, c.size, c.scale, c.reference))


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

    parts = [f"{size:,} {unit}" if size else unit]
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
    lines.append(f"Only n/L = {target:g} chooses which comparisons are read (the nearest measured multiple of each "
                 f"model); d and L set the factor of each pinned scale and the theory's columns, not the evidence.")
    if comps:
        largest = max(c.multiple for c in comps)
        if target > largest * 1.5:
            lines.append(f"Warning: n/L = {target:g} is past every measured multiple here (the largest "
                         f"{times(largest)}): the evidence does not reach it.")
        else:
            reach: dict = {}
            for c in comps:
                reach[c.model] = max(reach.get(c.model, 0.0), c.multiple)
            short = [f"{m} (to {times(x)})" for m, x in sorted(reach.items()) if target > x * 1.5]
            if short:
                lines.append(f"Warning: n/L = {target:g} is past what was measured in {_and(short)}: "
                             "the comparisons there are read at the largest multiple measured.")
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

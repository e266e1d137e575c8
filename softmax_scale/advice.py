"""Which scale for a model of head dimension ``d`` trained at ``L`` and run at ``n``: :func:`advise`.

Three parts, each from the toolkit's own sources, none written by hand:

- **the published scales** at ``(d, L, n)``: every ``q.k`` scheme of the registry
  (:mod:`softmax_scale.schemes`) pinned at ``L`` by the one pinning rule, its factor over
  ``1/sqrt(d)`` and the scale itself, and what the i.i.d. theory says about it (the entropy drift
  from ``L`` to ``n`` and the share of one matching key, :func:`softmax_scale.extrapolation_table`);
- **the measured evidence**: every experiment of :data:`softmax_scale.experiments.EXPERIMENTS` that
  has a result file in the results folder and says what its rows mean
  (:meth:`~softmax_scale.experiments.Experiment.evidence`); of its comparisons, those of a scale
  against ``standard`` in the same model under the same RoPE variant, for the task asked, at the
  measured multiple of ``L`` nearest ``n / L``;
- **a recommendation** that follows from that evidence by :data:`RULE`.

``softmax-scale advise`` prints it; ``python -m softmax_scale.advice --docs`` writes it into the
guide (``docs/choosing_a_scale.md``), whose copy a test compares with what it prints now.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ._util.validation import check_choice, check_int
from .entropy import extrapolation_table
from .experiments import EXPERIMENTS, LM_TASKS, RESULTS, Experiment, applied_at_test
from .heads import TOOLKIT_RULES
from .schemes import QK_SCHEMES, SCHEMES, STANDARD, pinned
from .schemes.rope import ROPES

__all__ = ["DOCS_CALL", "RULE", "TASKS", "Advice", "Comparison", "Recommendation", "SchemeAtLength", "advise", "docs_block",
           "write_docs"]

#: ``--task``: what the model is asked to do, and the rows of the evidence that speak to it.
TASKS = {"lm": "language modelling", "retrieval": "retrieving one key"}

#: The metrics of the evidence and their direction: ``+1`` higher is better, ``-1`` lower is better.
_DIRECTION = {"loss": -1.0, "accuracy": 1.0}

#: The rule the recommendation follows, as printed.
RULE = ("A scale is one label across experiments, each pinned at its own training length. On a metric a scale "
        "beats `standard` where its mean paired difference over the seeds is on the better side of zero by more "
        "than the sample standard deviation of those differences (two seeds or more). A comparison is better where "
        "every metric it reports beats `standard`, worse where `standard` beats it on some metric, and otherwise not "
        "separated. A scale is recommended where every comparison of it in the situation is better (of several, "
        "the one with the largest mean improvement in loss); otherwise `standard`, 1/sqrt(d).")

#: The reference every recommendation is against: the same model with ``1/sqrt(d)`` under the same RoPE variant.
_REFERENCE = STANDARD


@dataclass(frozen=True)
class SchemeAtLength:
    """One published ``q.k`` scheme at ``(d, L, n)``, pinned at ``L``, with the i.i.d. theory's view of it.

    Attributes
    ----------
    scheme : str
    factor : float
        Its multiplier over ``1/sqrt(d)`` at ``n`` keys.
    scale : float
        The multiplier on ``q.k`` itself at ``n``.
    pin_rule : str
        What pinning at ``L`` sets (``""``: the scheme has no training length).
    drift_isotropic, drift_signal : float
        ``E[H](n) - E[H](L)`` in nats, for i.i.d. scores and with one matching key.
    share_at_l, share : float
        The matching key's attention share ``E[p_0]`` at ``L`` and at ``n``.
    source : str
    """

    scheme: str
    factor: float
    scale: float
    pin_rule: str
    drift_isotropic: float
    drift_signal: float
    share_at_l: float
    share: float
    source: str


@dataclass(frozen=True)
class Comparison:
    """A measured scale against a reference in one situation, with the verdict of :data:`RULE`.

    Attributes
    ----------
    experiment, model : str
    size : int
    size_unit : str
    rope, task : str
    multiple : float
        The test length as a multiple of the experiment's ``L``.
    scale : str
        The scale as the experiment labels it (:func:`~softmax_scale.experiments.at_test_label`
        for one applied at test time only).
    reference : str
        What it is measured against: ``"standard"`` (the same model with ``1/sqrt(d)``, the same
        RoPE variant) or another reference of the experiment (a sliding window of ``L``, ...).
    at_test : bool
        Applied at test time (True) or trained in (False).
    loss, loss_spread, accuracy, accuracy_spread : float
        Mean paired difference from the reference and its sample standard deviation (NaN where not measured).
    seeds : tuple of int
    verdict : {"better", "worse", "not separated"}
    """

    experiment: str
    model: str
    size: int
    size_unit: str
    rope: str
    task: str
    multiple: float
    scale: str
    reference: str
    at_test: bool
    loss: float
    loss_spread: float
    accuracy: float
    accuracy_spread: float
    seeds: tuple
    verdict: str


@dataclass(frozen=True)
class Recommendation:
    """What :data:`RULE` recommends under one RoPE variant, for one way of applying the scale.

    Attributes
    ----------
    rope : str
    at_test : bool
        For a model trained with ``standard`` and run at ``n`` (True), or for training a new model (False).
    scale : str
        The recommended scale's label, or ``"standard"``.
    reason : str
        The comparisons it rests on, generated from them.
    """

    rope: str
    at_test: bool
    scale: str
    reason: str


@dataclass(frozen=True)
class Advice:
    """What :func:`advise` returns: the scales at ``(d, L, n)``, the measured evidence, the recommendation, the scope.

    Attributes
    ----------
    d, train_length, n : int
    rope : str or None
        The RoPE variant asked about (None: every variant measured).
    task : str
        A key of :data:`TASKS`.
    results : str
        The folder the result files were read from (``"the committed figures/"`` for the committed ones).
    score_model : str
        The i.i.d. theory's score model; ``match`` the matching key's cosine.
    match : float
    schemes : tuple of SchemeAtLength
    comparisons : tuple of Comparison
        Each measured scale against ``standard``: what the recommendation follows.
    baselines : tuple of Comparison
        ``standard`` itself against the experiments' other references (a sliding window of ``L``,
        the trained RoPE frequencies): how far the best of the scales still is from them.
    recommendations : tuple of Recommendation
    scope : tuple of str
        What the evidence rests on and what it has not tested.
    rule : str
        :data:`RULE`.
    """

    d: int
    train_length: int
    n: int
    rope: str | None
    task: str
    results: str
    score_model: str
    match: float
    schemes: tuple
    comparisons: tuple
    baselines: tuple
    recommendations: tuple
    scope: tuple
    rule: str = RULE

    @property
    def multiple(self) -> float:
        """``n / L``."""
        return self.n / self.train_length

    def to_dict(self) -> dict:
        """Plain values (for ``--json``)."""
        out = asdict(self)
        out["multiple"] = self.multiple
        return out

    def markdown(self) -> str:
        """The advice as Markdown: the recommendation, the scales, the evidence, the scope."""
        return _markdown(self)

    def __str__(self):
        return self.markdown()


# ---------------------------------------------------------------------------------------------
# the evidence


def _has_evidence(exp: Experiment) -> bool:
    return type(exp).evidence is not Experiment.evidence


def _read_evidence(results: Path) -> tuple[dict, list, list]:
    """``({name: (file name, [Evidence])}, [names without a result file], [names whose file has no comparison yet])``.

    Over the experiments that say what their rows mean (:meth:`~softmax_scale.experiments.Experiment.evidence`).
    """
    found, missing, empty = {}, [], []
    for name in EXPERIMENTS:
        exp = EXPERIMENTS[name]
        if not _has_evidence(exp):
            continue
        path = exp.result_path(exp.config(), results)
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


def _task_matches(task: str, asked: str) -> bool:
    return (task in LM_TASKS) == (asked == "lm")


def _metric_verdict(metric, difference, spread, seeds) -> int:
    """+1 better than ``standard`` by more than the spread, -1 worse, 0 neither (:data:`RULE`)."""
    if len(seeds) < 2 or not (math.isfinite(difference) and math.isfinite(spread)):
        return 0
    gain = _DIRECTION[metric] * difference
    return 1 if gain > spread else -1 if -gain > spread else 0


def _verdict(metrics: list) -> str:
    votes = [_metric_verdict(*m) for m in metrics]
    if votes and all(v == 1 for v in votes):
        return "better"
    if -1 in votes:
        return "worse"
    return "not separated"


def _nearest(multiples, target: float) -> float:
    """The measured multiple nearest ``target`` in ``ln`` (the larger of two equally near)."""
    return min(sorted(set(multiples), reverse=True), key=lambda m: abs(math.log(m / target)))


def _comparisons(found: dict, task: str, rope: str | None, target: float, baselines: bool = False) -> list:
    """The comparisons that speak to the situation (see the module docstring).

    Each scale against ``standard``; with ``baselines``, ``standard`` against the other references.
    """
    def wanted(e):
        return (e.scale == _REFERENCE and e.reference != _REFERENCE) if baselines else e.reference == _REFERENCE

    rows = [e for _, ev in found.values() for e in ev
            if wanted(e) and e.metric in _DIRECTION and _task_matches(e.task, task) and (rope is None or e.rope == rope)]
    near = {}
    for e in rows:
        near.setdefault((e.experiment, e.rope), []).append(e.multiple)
    near = {k: _nearest(v, target) for k, v in near.items()}
    groups: dict = {}
    for e in rows:
        if e.multiple == near[(e.experiment, e.rope)]:
            groups.setdefault((e.experiment, e.model, e.size, e.size_unit, e.rope, e.task, e.multiple, e.scale,
                               e.reference), []).append(e)
    out = []
    for key, es in groups.items():
        by = {e.metric: e for e in es}
        seeds = tuple(sorted(set().union(*(e.seeds for e in es))))
        metrics = [(m, by[m].difference, by[m].spread, by[m].seeds) for m in _DIRECTION if m in by]
        nan = float("nan")
        out.append(Comparison(*key, at_test=applied_at_test(key[7]),
                              loss=by["loss"].difference if "loss" in by else nan,
                              loss_spread=by["loss"].spread if "loss" in by else nan,
                              accuracy=by["accuracy"].difference if "accuracy" in by else nan,
                              accuracy_spread=by["accuracy"].spread if "accuracy" in by else nan,
                              seeds=seeds, verdict=_verdict(metrics)))
    return sorted(out, key=lambda c: (c.rope, c.at_test, c.experiment, c.scale, c.reference))


def _fmt(x, spread=None) -> str:
    if not math.isfinite(x):
        return "-"
    nb = "\u00a0"  # a number and its spread stay on one line
    return f"{x:+.4f}" + ("" if spread is None else f"{nb}±{nb}{spread:.4f}" if math.isfinite(spread) else " (one seed)")


def _drift(x: float) -> str:
    """A drift in nats to 3 decimals, signed; one that rounds to zero is ``0.000``."""
    text = f"{x:+.3f}"
    return "0.000" if float(text) == 0 else text


def _and(items: list) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _times(m: float) -> str:
    return f"{m:.3g}L"


def _where(c: Comparison) -> str:
    return f"{c.experiment} at {_times(c.multiple)}: loss {_fmt(c.loss, c.loss_spread)}"


def _scale_key(label: str) -> str:
    """A scale across experiments: its label without the pinned length (``qwen_logn@128`` and ``qwen_logn@64`` are one)."""
    return re.sub(r"@\d+", "", label)


def _recommend(comparisons: list, rope: str, at_test: bool) -> Recommendation:
    """:data:`RULE` over the comparisons of one RoPE variant and one way of applying the scale."""
    cs = [c for c in comparisons if c.rope == rope and c.at_test == at_test]
    by_scale: dict = {}
    for c in cs:
        by_scale.setdefault(_scale_key(c.scale), []).append(c)
    winners = {s: v for s, v in by_scale.items() if all(c.verdict == "better" for c in v)}
    if not cs:
        return Recommendation(rope, at_test, _REFERENCE, "no scale measured this way")
    if winners:
        def gain(s):
            losses = [c.loss for c in winners[s] if math.isfinite(c.loss)]
            return -float(np.mean(losses)) if losses else -math.inf
        best = max(sorted(winners), key=gain)
        reason = "better than standard in " + "; ".join(_where(c) for c in winners[best])
        others = sorted(set(winners) - {best})
        if others:
            reason += f" (also better: {', '.join(others)})"
        return Recommendation(rope, at_test, best, reason)
    worse = sorted(s for s, v in by_scale.items() if any(c.verdict == "worse" for c in v))
    unclear = sorted(set(by_scale) - set(worse))
    parts = []
    if unclear:
        parts.append(f"not separated from it: {', '.join(unclear)}")
    if worse:
        parts.append(f"worse in some comparison: {', '.join(worse)}")
    return Recommendation(rope, at_test, _REFERENCE, "no scale beat standard in every comparison; " + "; ".join(parts))


def _scope(found: dict, missing: list, empty: list, comparisons: list, task: str, rope: str | None, target: float,
           results_label: str) -> list:
    lines = []
    for name, (file, ev) in found.items():
        sizes = {}
        for e in ev:
            sizes.setdefault((e.model, e.size_unit), set()).add(e.size)
        models = [f"{m} ({_and([f'{size:,}' for size in sorted(v)])} {unit})" for (m, unit), v in sorted(sizes.items())]
        tasks = sorted({e.task for e in ev})
        ropes = sorted({e.rope for e in ev})
        mult = ", ".join(_times(m) for m in sorted({e.multiple for e in ev}))
        seeds = max(len(e.seeds) for e in ev)
        lines.append(f"`{name}` ({file} in {results_label}): {'; '.join(models)}; {', '.join(tasks)}; "
                     f"RoPE {', '.join(ropes)}; n/L {mult}; up to {seeds} seeds.")
    if missing:
        lines.append(f"No result file in {results_label} for: {', '.join(f'`{m}`' for m in missing)}.")
    if empty:
        lines.append(f"A result file without a comparison yet: {', '.join(f'`{m}`' for m in empty)}.")
    measured_tasks = {e.task for _, ev in found.values() for e in ev if e.reference == _REFERENCE}
    for kind, text in TASKS.items():
        if not any(_task_matches(t, kind) for t in measured_tasks):
            lines.append(f"Not measured: no result file has a comparison with standard on {text}"
                         + ("; the recommendation is the default." if kind == task else "."))
    ropes = {e.rope for _, ev in found.values() for e in ev if e.reference == _REFERENCE and _task_matches(e.task, task)}
    if rope is not None and rope not in ropes:
        lines.append(f"Not measured: RoPE `{rope}` on {TASKS[task]} (measured: {', '.join(sorted(ropes)) or 'none'}).")
    elif ropes and set(ROPES) - ropes:
        lines.append(f"RoPE variants not measured on {TASKS[task]}: {', '.join(r for r in ROPES if r not in ropes)}.")
    if comparisons:
        near = sorted({(c.experiment, c.rope, c.multiple) for c in comparisons})
        per = sorted({(x, m) for x, _, m in near})
        lines.append(f"Asked n/L = {target:g}; the nearest measured: "
                     + ", ".join(f"{x} {_times(m)}" for x, m in per) + ".")
        largest = max(c.multiple for c in comparisons)
        if target > largest * 1.5:
            lines.append(f"n/L = {target:g} is past every measured multiple (the largest {_times(largest)}): "
                         "the evidence does not reach it.")
    return lines


# ---------------------------------------------------------------------------------------------
# the published scales


def _schemes(d: int, L: int, n: int, score_model: str, match: float) -> list:
    keys = tuple(QK_SCHEMES)
    table = extrapolation_table(L, keys, d=d, score_model=score_model, match=match, factors=(1.0, n / L))
    out = []
    for i, key in enumerate(keys):
        p = pinned(key, L)
        info = SCHEMES[key]
        out.append(SchemeAtLength(key, float(p.factor(n, d)), float(p.scale(n, d)), info.pin_rule,
                                  float(table.drift_isotropic[i, -1]), float(table.drift_signal[i, -1]),
                                  float(table.share_signal[i, 0]), float(table.share_signal[i, -1]), info.source))
    return out


# ---------------------------------------------------------------------------------------------
# advise


def advise(d, train_length, n, *, rope=None, task="lm", results=None, score_model="cosine", match=1.0) -> Advice:
    """Which scale in front of ``q.k`` for a model of head dimension ``d`` trained at ``L`` and run at ``n`` keys.

    Parameters
    ----------
    d : int
        Head dimension, ``>= 2``.
    train_length : int
        ``L``, the training length, ``>= 2``.
    n : int
        The length it is run at, ``>= L``.
    rope : str, optional
        The RoPE variant past ``L`` (one of :data:`softmax_scale.schemes.rope.ROPES`); None: every
        variant the evidence measured, each with its own recommendation.
    task : {"lm", "retrieval"}
        Language modelling, or retrieving one key (:data:`TASKS`).
    results : str or PathLike, optional
        The folder of the experiments' result files (default: the committed ``figures/``).
    score_model : {"cosine", "normal"}
        The i.i.d. theory's score model, as in :func:`softmax_scale.extrapolation_table`.
    match : float
        The matching key's cosine with the query in the theory's signal-plus-noise columns.

    Returns
    -------
    Advice
        ``print(advice)`` shows it as Markdown; :meth:`Advice.to_dict` as plain values.

    Examples
    --------
    >>> import softmax_scale as ss
    >>> a = ss.advise(d=128, train_length=4096, n=32768, rope="yarn")
    >>> [s.scheme for s in a.schemes][:3]
    ['standard', 'chiang_cholak', 'entropy_invariant']
    """
    d = check_int(d, "d", minimum=2)
    L = check_int(train_length, "train_length", minimum=2)
    n = check_int(n, "n", minimum=2)
    if n < L:
        raise ValueError(f"`n` must be at least the training length {L} (advise is about running past it), got {n}")
    if rope is not None:
        check_choice(rope, "rope", ROPES)
    check_choice(task, "task", TASKS)
    folder = RESULTS if results is None else Path(results)
    if not folder.is_dir():
        raise ValueError(f"`results` must be a folder of result files, got {str(folder)!r}")
    label = "the committed figures/" if folder.resolve() == RESULTS.resolve() else str(folder)
    schemes = _schemes(d, L, n, score_model, match)
    found, missing, empty = _read_evidence(folder)
    target = n / L
    comparisons = _comparisons(found, task, rope, target)
    baselines = _comparisons(found, task, rope, target, baselines=True)
    ropes = [rope] if rope is not None else sorted({c.rope for c in comparisons})
    recs = [_recommend(comparisons, r, at) for r in ropes for at in (True, False)]
    scope = _scope(found, missing, empty, comparisons, task, rope, target, label)
    return Advice(d=d, train_length=L, n=n, rope=rope, task=task, results=label, score_model=score_model,
                  match=float(match), schemes=tuple(schemes), comparisons=tuple(comparisons),
                  baselines=tuple(baselines), recommendations=tuple(recs), scope=tuple(scope))


# ---------------------------------------------------------------------------------------------
# the Markdown


def _how(rec: Recommendation, advice: Advice) -> str:
    """Where the recommended scale is found at the user's ``(d, L, n)``."""
    if rec.scale == _REFERENCE:
        return "`standard`, 1/sqrt(d)"
    name = re.match(r"\w*", rec.scale.split(" + ")[-1]).group(0)  # "standard + qwen_logn@128 at test": qwen_logn
    if name in TOOLKIT_RULES:
        return f"`{rec.scale}` (a factor per head: `ss.head_factors`)"
    row = next((s for s in advice.schemes if s.scheme == name), None)
    if row is not None:
        return f"`{rec.scale}` (pinned at L = {advice.train_length}: x{row.factor:.4g} at n = {advice.n})"
    return f"`{rec.scale}`"


def _markdown(a: Advice) -> str:
    rope = f"RoPE `{a.rope}`" if a.rope is not None else "every RoPE variant measured"
    lines = [f"**d = {a.d}, L = {a.train_length}, n = {a.n} ({_times(a.multiple)}), {TASKS[a.task]}, {rope}.**", "",
             "### Recommendation", ""]
    for r in a.recommendations:
        who = "a model trained with 1/sqrt(d), run at n" if r.at_test else "training a new model"
        lines.append(f"- RoPE `{r.rope}`, {who}: {_how(r, a)}. {r.reason[0].upper()}{r.reason[1:]}.")
    if not a.recommendations:
        lines.append("- `standard`, 1/sqrt(d): no measured comparison speaks to this situation (see the scope).")
    lines += ["", f"The rule: {a.rule}", "",
              f"### The published scales at n = {a.n}, pinned at L = {a.train_length}", "",
              f"The factor multiplies 1/sqrt(d); the scale multiplies q·k. The i.i.d. theory "
              f"(`ss.extrapolation_table`: {a.score_model} scores, d = {a.d}, one matching key of cosine {a.match:g} "
              f"in the signal columns): the entropy drift from L to n in nats, and that key's share of the attention.",
              "",
              "| scheme | factor | scale | pinned by | drift, i.i.d. | drift, one key | share at L | at n | source |",
              "|---|---|---|---|---|---|---|---|---|"]
    for s in a.schemes:
        lines.append(f"| `{s.scheme}` | {s.factor:.4f} | {s.scale:.5f} | {s.pin_rule or '-'} | "
                     f"{_drift(s.drift_isotropic)} | {_drift(s.drift_signal)} | {s.share_at_l:.3f} | {s.share:.3f} | "
                     f"{s.source} |")
    lines += ["", "### Measured: each scale against `standard` in the same model, under the same RoPE", ""]
    if not a.comparisons:
        lines.append("No measured comparison speaks to this situation.")
    else:
        lines.append("Differences are the scale's minus standard's, paired by seed: mean ± sample standard deviation "
                     "(loss in nats, lower is better; accuracy a fraction, higher is better); a scale "
                     "labelled \"at test\" is applied at test time only to a model trained with `standard`. The "
                     "models are named in the scope below.")
    for rope in sorted({c.rope for c in a.comparisons}):
        lines += ["", f"#### RoPE `{rope}`", "", "| experiment | n/L | scale | loss | accuracy | seeds | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for c in (c for c in a.comparisons if c.rope == rope):
            lines.append(f"| {c.experiment} | {_times(c.multiple)} | "
                         f"{c.scale} | {_fmt(c.loss, c.loss_spread)} | {_fmt(c.accuracy, c.accuracy_spread)} | "
                         f"{len(c.seeds)} | {c.verdict} |")
        base = [c for c in a.baselines if c.rope == rope]
        if base:
            lines.append("")
        for c in base:
            acc = f", accuracy {_fmt(c.accuracy, c.accuracy_spread)}" if math.isfinite(c.accuracy) else ""
            lines.append(f"- `standard` against \u201c{c.reference}\u201d ({c.experiment} at {_times(c.multiple)}): loss "
                         f"{_fmt(c.loss, c.loss_spread)}{acc}, {len(c.seeds)} seeds.")
    lines += ["", "### Scope", ""] + [f"- {s}" for s in a.scope]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the guide's copy

#: The situation the guide shows (the question of the README: d = 128, trained at 4096, run at 32768).
DOCS_CALL = {"d": 128, "train_length": 4096, "n": 32768}
_DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "choosing_a_scale.md"
_START, _END = "<!-- advise:start -->\n", "\n<!-- advise:end -->"


def docs_block() -> str:
    """The guide's block between its ``advise`` markers: the command and what it prints now."""
    cmd = "softmax-scale advise " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in DOCS_CALL.items())
    return f"```bash\n{cmd}\n```\n\n{advise(**DOCS_CALL).markdown()}"


def _page_block(text: str) -> str:
    """The block between the ``advise`` markers of the guide's text."""
    return text[text.index(_START) + len(_START):text.index(_END)]


def write_docs(page=_DOCS_PAGE) -> Path:
    """Write :func:`docs_block` between the markers of the guide; the page written."""
    page = Path(page)
    text = page.read_text(encoding="utf-8")
    old = _page_block(text)
    page.write_text(text.replace(_START + old + _END, _START + docs_block() + _END), encoding="utf-8")
    return page


if __name__ == "__main__":  # python -m softmax_scale.advice --docs
    import sys

    if sys.argv[1:] != ["--docs"]:
        print("usage: python -m softmax_scale.advice --docs  (writes the guide's evidence block)", file=sys.stderr)
        sys.exit(2)
    print(write_docs())

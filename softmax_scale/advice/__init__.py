"""Which scale for a model of head dimension ``d`` trained at ``L`` and run at ``n``: :func:`advise`.

Three parts, each from the toolkit's own sources, none written by hand:

- **the published scales** at ``(d, L, n)``: every ``q.k`` scheme of the registry
  (:mod:`softmax_scale.schemes`) pinned at ``L`` by the one pinning rule, its factor over
  ``1/sqrt(d)`` and the scale itself, and what the i.i.d. theory says about it (the entropy drift
  from ``L`` to ``n`` and the share of one matching key, :func:`softmax_scale.extrapolation_table`);
- **the measured evidence** (:mod:`._evidence`): the experiments' comparisons of a scale against
  ``standard`` in the same model under the same RoPE variant, for the task asked, pooled over the
  measured multiples of ``L`` up to ``n / L``, and the scope they cover in the user's terms;
- **a recommendation** that follows from that evidence by :data:`RULE` (:mod:`._rule`), starting
  from the baseline (the model's own recipe read from its config, or ``1/sqrt(d)``): the whole
  multiplier on ``q.k`` to run with at ``n``, the change from what the authors and each engine apply,
  the formula, the expected effect and its standard error, or why the baseline is kept.

``softmax-scale advise`` prints it (:mod:`._render`); ``python -m softmax_scale.advice --docs``
writes it into the guide (``docs/choosing_a_scale.md``), whose copy a test compares with what it
prints now.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .._util.validation import check_choice, check_int
from ..entropy import check_match, extrapolation_table
from ..experiments import RESULTS
from ..heads import check_head_stats
from ..schemes import QK_SCHEMES, SCHEMES, SCORE_MODELS, STANDARD, pinned
from ..schemes.rope import ROPE_CHANGES, ROPES
from ._alpha import AttentionAlpha, TrainedAlpha, attention_alpha, trained_alpha
from ._config import config_lines, coverage_line, engine_summary, recipe_baseline, recipe_evidence, rope_scaling_dict, under_rope
from ._evidence import TASKS, Comparison, comparisons, own_coverage, own_scope, read_evidence, scope
from ._own import is_measurement, own_evidence, own_result
from ._render import DOCS_CALL, docs_block, headline, markdown, short_answers, text, write_docs
from ._rule import LEVEL, RULE, Baseline, Recommendation, position_factors, recommend

__all__ = ["DOCS_CALL", "LEVEL", "MEASURED", "RULE", "TASKS", "Advice", "AttentionAlpha", "Baseline", "Comparison",
           "Recommendation", "SchemeAtLength", "TrainedAlpha", "advise", "attention_alpha", "committed_measurements",
           "docs_block", "measured_rope", "own_result", "rope_setting", "short_answers", "trained_alpha", "write_docs"]


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
class Advice:
    """What :func:`advise` returns: the recommendation, the scope, the scales at ``(d, L, n)``, the evidence.

    Attributes
    ----------
    d, train_length, n : int
    rope : str or None
        The RoPE variant asked about (None: every variant measured).
    task : str
        A key of :data:`TASKS`.
    results : str
        The folder the result files were read from (a path).
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
        What the evidence rests on, in the user's terms, and what it has not tested.
    baseline : Baseline
        What the model runs with now: its authors' recipe (with ``config``) or ``1/sqrt(d)``.
    engines : str
        With ``config``: what each inference engine applies at ``n`` against the first recommendation.
    recipe_evidence : tuple of str
        With ``config``: the measured comparisons of the recipe's own rules (YaRN's temperature,
        Llama 4's, Qwen's log n) applied at test to models trained without them; context, never a verdict
        on the recipe.
    rule : str
        :data:`RULE`.
    minimiser : tuple
        With your own measurement (``evidence``): ``(length, x, low, high, documents, at_edge)``, the
        constant multiplier its loss curve is lowest at (:func:`softmax_scale.experiments.measure.summarise`)
        at the first measured length at or past ``n``, with its 95% bootstrap interval; empty otherwise.
    evidence_note : str
        Why your own measurement does not decide this question (measured under another RoPE); empty where it
        decides or was not given.
    coverage : str
        With ``config``, said first: ``n`` past the length the config covers (the recipe's own rule
        extended to ``n``, theory, and the command that measures it), or inside the pretrained length
        where the config's static extension costs (the native recipe and the measured cost); else empty.
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
    baseline: Baseline = Baseline()
    engines: str = ""
    recipe_evidence: tuple = ()
    rule: str = RULE
    minimiser: tuple = ()
    evidence_note: str = ""
    coverage: str = ""

    @property
    def multiple(self) -> float:
        """``n / L``."""
        return self.n / self.train_length

    @property
    def headline(self) -> str:
        """The first line printed: the factor, its formula, the expected effect and how far the evidence reaches."""
        return headline(self).replace("\u00a0", " ")

    def to_dict(self) -> dict:
        """Plain values (for ``--json``)."""
        out = asdict(self)
        out["multiple"] = self.multiple
        out["headline"] = self.headline
        return out

    def markdown(self) -> str:
        """The advice as Markdown (the guide's copy): headline, scope, recommendation, scales, evidence."""
        return markdown(self)

    def text(self, full: bool = False) -> str:
        """The advice as plain text wrapped at 100 columns, tables aligned (what the command prints).

        Inside the length the model covers (``n <= L``) it is short, the evidence tables left out, unless ``full``.
        """
        return text(self, full)

    def __str__(self):
        return self.text()


@functools.lru_cache(maxsize=32)
def _schemes(d: int, L: int, n: int, score_model: str, match: float) -> tuple:
    keys = tuple(QK_SCHEMES)
    table = extrapolation_table(L, keys, d=d, score_model=score_model, match=match, factors=(1.0, n / L))
    out = []
    for i, key in enumerate(keys):
        p = pinned(key, L)
        info = SCHEMES[key]
        out.append(SchemeAtLength(key, float(p.factor(n, d)), float(p.scale(n, d)), info.pin_rule,
                                  float(table.drift_isotropic[i, -1]), float(table.drift_signal[i, -1]),
                                  float(table.share_signal[i, 0]), float(table.share_signal[i, -1]), info.source))
    return tuple(out)


def _own_minimiser(path, n) -> tuple:
    """:attr:`Advice.minimiser` of a ``measure`` result file at the first length at or past ``n``."""
    from ..experiments.measure import MeasureExperiment, summarise

    curves = [c for c in summarise(MeasureExperiment(progress=False).read(path)) if c.length >= n]
    if not curves:
        return ()
    c = min(curves, key=lambda c: c.length)
    return (c.length, float(c.minimiser), float(c.interval[0]), float(c.interval[1]), c.documents, bool(c.at_edge))


def measured_rope(header) -> str | None:
    """The RoPE variant a ``measure`` result file was measured under, from its header (None: not one of ``ROPES``).

    ``rope: yarn`` names it; ``rope: file (...)`` is the file's own scaling, read from the ``recipe``
    line's first word (``default`` is the trained frequencies, ``none``).
    """
    from ..engines import ROPE_VARIANTS

    named = str(header.get("rope", "")).split(" ")[0]
    if named in ROPES:
        return named
    word = str(header.get("recipe", "")).split(" ")[0]
    return ROPE_VARIANTS.get(word, word if word in ROPES else None)


def rope_setting(rope: str, L: int, n: int) -> str:
    """How to run a model under the RoPE variant ``rope`` at ``n`` (a Hugging Face ``rope_scaling``), as a clause."""
    hf = rope_scaling_dict(rope, L, n)
    if hf is not None:
        return f" (with rope_scaling {json.dumps(hf)}, the frequencies only)"
    if rope == "none":
        return " (the trained frequencies: no rope_scaling)"
    return f" (the toolkit's `{rope}` frequencies: {ROPE_CHANGES.get(rope, rope)})"


def _with_rope(r: Recommendation, L: int, n: int) -> Recommendation:
    """A change measured under a RoPE variant says the setting it needs."""
    if r.scale == STANDARD or not r.at_test or r.rope not in ROPES or r.rope == "none":
        return r
    return replace(r, formula=f"{r.formula}, under RoPE {r.rope}{rope_setting(r.rope, L, n)}")


#: The experiment name of a ``measure`` result file in the results folder, read as evidence for its own situation.
MEASURED = "measure"


def committed_measurements(folder, skip=None) -> dict:
    """The ``measure`` result files in ``folder`` as evidence: ``{name: (file name, [Evidence])}``.

    Each is a real pretrained model measured under one RoPE at its multiples of its ``L``: evidence for
    that situation like any other experiment's rows (``experiment`` :data:`MEASURED`), not the user's own
    measurement.  ``skip``: a file read as your own measurement (``evidence``), not counted twice.
    """
    out = {}
    skip = None if skip is None else Path(skip).resolve()
    for path in sorted(Path(folder).glob("*.csv")):
        if path.resolve() == skip or not is_measurement(path):
            continue
        own = own_evidence(path)
        rope = measured_rope(own.header)
        if rope is None or not own.rows:
            continue
        rows = [replace(e, experiment=MEASURED, rope=rope, size_unit="a GGUF measured here") for e in own.rows]
        out[f"{MEASURED}: {path.stem}"] = (path.name, rows)
    return out


def advise(d=None, train_length=None, n=None, *, config=None, rope=None, task="lm", results=None, head_stats=None,
           score_model="cosine", match=1.0, engine_versions=None, evidence=None) -> Advice:
    """Which scale in front of ``q.k`` for a model of head dimension ``d`` trained at ``L`` and run at ``n`` keys.

    Parameters
    ----------
    d : int
        Head dimension, ``>= 2`` (read from ``config`` when it is given and ``d`` is not).
    train_length : int
        ``L``, the length the model was trained to, ``>= 2``; with ``config``, the length its recipe
        covers (:attr:`softmax_scale.engines.ModelScaling.covered_length`) unless given, not the length
        it was pretrained to (:attr:`~softmax_scale.engines.ModelScaling.train_length`, the training
        length of ``softmax-scale engines`` and ``measure``), which the scope names beside it.
    n : int
        The length it is run at, ``>= 2``; without ``config``, ``>= L``.
    config : str, PathLike or Mapping, optional
        A model's HF ``config.json`` or GGUF file (:func:`softmax_scale.engines.read_config`): its head
        dimension, covered length and RoPE variant fill ``d``, ``train_length`` and ``rope`` where those
        are not given; the baseline is the whole multiplier its authors' code puts on ``q.k`` at ``n``,
        and the answer says what each inference engine applies (:func:`softmax_scale.engines.engine_scales`).
        Without it the baseline is ``1/sqrt(d)``: a model trained without a temperature is assumed.
    rope : str, optional
        The RoPE variant past ``L`` (:data:`softmax_scale.schemes.rope.ROPE_CHANGES`: what each changes in the rotation
        frequencies; none touches the scale); None: every variant the evidence measured, each with
        its own recommendation.
    task : {"lm", "retrieval"}
        Language modelling, or retrieving one key (:data:`TASKS`).
    results : str or PathLike, optional
        The folder of the experiments' result files (default: the committed ``figures/``).
    head_stats : sequence of HeadStats, optional
        :func:`softmax_scale.head_stats` of the model's heads at two or more lengths inside ``L``:
        lets a per-head rule be recommended, with its factor for each head
        (:func:`softmax_scale.head_factors`).
    score_model : {"cosine", "normal"}
        The i.i.d. theory's score model, as in :func:`softmax_scale.extrapolation_table`.
    match : float
        The matching key's cosine with the query in the theory's signal-plus-noise columns.
    evidence : str or PathLike, optional
        A result file of :func:`softmax_scale.measure` on your own model, or the ``.gguf`` file it
        measured (its result is found by the file's SHA-256, :func:`~softmax_scale.advice.own_result`):
        read first, the closest evidence there is (each cell against the file's recipe, paired by
        document and prompt); its header fills ``d`` and ``train_length`` where not given, and the
        toolkit's other results are shown beside it as context.  A row out of range or a cell given
        twice is refused naming its line and column; what in the file contributes no comparison is
        said in :attr:`Advice.scope`.
    engine_versions : Mapping, optional
        With ``config``: engine name -> the version you run, to read its rules at
        (:func:`softmax_scale.engines.engine_scales`); the others at their newest known.

    Returns
    -------
    Advice
        ``print(advice)`` shows it; :attr:`Advice.headline` is its first line;
        :meth:`Advice.to_dict` gives plain values.

    Examples
    --------
    >>> import softmax_scale as ss
    >>> a = ss.advise(d=128, train_length=4096, n=32768, rope="yarn")
    >>> [s.scheme for s in a.schemes][:3]
    ['standard', 'chiang_cholak', 'entropy_invariant']
    >>> r = a.recommendations[0]
    >>> r.change, r.at_test
    ('keep x1', True)
    """
    model = None
    if config is not None:
        from ..engines import read_config

        model = read_config(config)
        d = model.head_dim if d is None else d
        if train_length is None:
            if model.covered_length is None:
                raise ValueError(f"`config` {model.source} gives no training length: pass `train_length`")
            train_length = model.covered_length
        rope = model.rope_variant if rope is None else rope
    if evidence is not None and Path(evidence).suffix.lower() == ".gguf":
        evidence = own_result(evidence, name="evidence")
    own = None if evidence is None else own_evidence(evidence)
    minimiser = _own_minimiser(evidence, n) if own is not None and own.rows and n is not None else ()
    if own is not None:
        d = own.head_dim if d is None else d
        train_length = own.train_length if train_length is None else train_length
        if rope is None:
            rope = measured_rope(own.header)
    for name, value in (("d", d), ("train_length", train_length), ("n", n)):
        if value is None:
            raise TypeError(f"advise() needs `{name}` (or a `config` or an `evidence` file whose header gives it)")
    d = check_int(d, "d", minimum=2)
    L = check_int(train_length, "train_length", minimum=2)
    n = check_int(n, "n", minimum=2)
    if n < L and model is None:
        raise ValueError(f"`n` must be at least the training length {L} (advise is about running past it), got {n}")
    if rope is not None:
        check_choice(rope, "rope", ROPES)
    check_choice(task, "task", TASKS)
    check_choice(score_model, "score_model", SCORE_MODELS)
    match = check_match(match, optional=False)
    if head_stats is not None:
        head_stats = check_head_stats(head_stats, L, "head_stats")
    folder = RESULTS if results is None else Path(results)
    if not folder.is_dir():
        raise ValueError(f"`results` must be a folder of result files, got {str(folder)!r}")
    label = "the committed figures/" if folder.resolve() == RESULTS.resolve() else str(folder)
    schemes = _schemes(d, L, max(n, L), score_model, float(match))
    found, missing, empty = read_evidence(folder)
    found.update(committed_measurements(folder, skip=evidence))
    target = n / L
    table = None
    if model is not None:
        from ..engines import engine_scales

        table = engine_scales(model, [n], versions=engine_versions)  # read once: baseline, scope and engines
    baseline = recipe_baseline(model, n, table) if model is not None else Baseline()
    if model is not None and rope is None:  # frequencies no experiment measured (llama3, longrope, ...)
        rope = model.rope.rope_type
        comps, baselines = [], []
    else:
        comps = comparisons(found, task, rope, target)
        baselines = comparisons(found, task, rope, target, baselines=True)
    mine, other_rope = [], ()
    if own is not None and own.rows:
        measured = measured_rope(own.header) or "your model's"
        mine = [replace(c, rope=measured) for c in comparisons({"measure": (Path(evidence).name, list(own.rows))},
                                                                  task, None, target)]
        if mine and rope is not None and rope != measured:  # other frequencies: past L they can turn an effect around
            other_rope = (f"Your measurement ({Path(evidence).name}) was made under RoPE {measured}"
                          f"{rope_setting(measured, L, n)}; the question is under RoPE {rope}, so no change rests on it "
                          f"here: past L the frequencies decide the sign of a factor's effect (ask with `--rope "
                          f"{measured}` for a model run under them, or measure under RoPE {rope}).",)
            mine = []
    if mine:
        comps = mine + [c for c in comps if rope is not None]
        rope = measured
    ropes = [rope] if rope is not None else sorted({c.rope for c in comps})
    recs = [recommend(comps, r, at, d=d, L=L, n=n, heads=head_stats, baseline=baseline)
            for r in ropes for at in (True, False)]
    recs = [_with_rope(r, L, n) for r in recs]
    lines = scope(found, missing, empty, comps, d=d, task=task, rope=rope, target=target,
                  results_label=label)
    engines, about_recipe, coverage = "", (), ""
    if own is not None:
        lines = [*other_rope, *own_scope(own, Path(evidence).name, task, bool(mine or other_rope)), *lines]
        coverage = own_coverage(own, Path(evidence).name, n)
    if model is not None:
        coverage = coverage_line(model, L, n, table, Path(evidence).name if own is not None else "")
        lines = config_lines(model, L, n, table) + tuple(lines)
        first = recs[0]
        positions = np.unique(np.concatenate([np.geomspace(1, n, 33).round(), [float(L), float(n)]]))
        at = position_factors(first.scale, d, L, positions) if first.scale != STANDARD else None
        engines = engine_summary(model, table, first.factor, change=first.scale != STANDARD,
                                 settings_model=under_rope(model, first.rope, L, n),
                                 wanted=None if at is None else (positions, at * (first.factor / at[-1])))
        about_recipe = recipe_evidence(model, [c for c in comps if c.at_test])
    return Advice(d=d, train_length=L, n=n, rope=rope, task=task, results=str(folder.resolve()),
                  score_model=score_model, match=float(match), schemes=tuple(schemes), comparisons=tuple(comps),
                  baselines=tuple(baselines), recommendations=tuple(recs), scope=tuple(lines), baseline=baseline,
                  engines=engines, recipe_evidence=about_recipe, minimiser=minimiser,
                  evidence_note=other_rope[0] if other_rope else "", coverage=coverage)

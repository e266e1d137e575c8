"""What a model's own config asks for, as the first lines of advise's scope (``advise(config=...)``).

The config is read by :func:`softmax_scale.engines.read_config`, and what each inference engine makes of
it by :func:`softmax_scale.engines.engine_scales`; this module only words them.
"""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import numpy as np

__all__ = ["HOUR_OPTIONS", "MEASURE_ANSWER", "config_lines", "coverage_line", "engine_summary", "extension_at_inference",
           "measure_estimate", "n_native", "native_factor", "recipe_baseline", "recipe_extension", "rope_scaling_dict",
           "under_rope"]

#: The measured wall time of ``softmax-scale measure``'s answer within the hour (benchmarks/results_measure.md, the
#: row "measure's answer on SmolLM2-135M, 2L = 16384 tokens, YaRN: wall time"): SmolLM2-135M (30 layers, hidden
#: size 576), L = 8192, n = 16,384, with :data:`HOUR_OPTIONS` and ``--budget 60``.
MEASURE_ANSWER = {"minutes": 37.2, "n": 16384, "train_length": 8192, "n_layers": 30, "hidden_size": 576,
                  "model": "SmolLM2-135M"}
#: The options of that answer which :func:`coverage_line` proposes past the covered length (an adaptive sweep of
#: the constants and the published shapes, documents until the minimiser is known to ±0.02, two six-key haystacks).
HOUR_OPTIONS = "--adaptive 5 --shapes --prompts 2 --keys 6"
#: ``rope_type`` -> how the recipe's own rule reads its extension ``s`` (the label of :func:`recipe_extension`).
_EXTENSION = {"yarn": "YaRN", "longrope": "LongRoPE", "linear": "linear (PI)", "dynamic": "dynamic NTK",
              "llama3": "llama3", "deepseek_yarn": "DeepSeek's YaRN"}


def _factor(scale, head_dim: int) -> str:
    """The last entry of an engine's multiplier on ``q.k``, over ``1/sqrt(head_dim)``, as ``x1.2965`` (``unknown``: not read)."""
    if scale is None:
        return "not transcribed"
    x = _over(scale, head_dim)
    return f"x{x:.4g}" if math.isfinite(x) else "unknown at this version"


def config_lines(model, L: int, n: int, table) -> tuple:
    """Scope lines for a :class:`~softmax_scale.engines.ModelScaling`: what it sets, and each engine's factor at ``n``.

    Parameters
    ----------
    model : ModelScaling
        :func:`softmax_scale.engines.read_config` of the user's config.
    L, n : int
        The training length advise uses and the length asked about.
    table : EngineTable
        :func:`softmax_scale.engines.engine_scales` of ``model`` at ``[n]`` (at the engine versions asked).

    Returns
    -------
    tuple of str
    """
    rope = model.rope
    scaling = "no RoPE scaling" if rope.rope_type == "default" else \
        f"RoPE scaling `{rope.rope_type}`" + (f" with factor {rope.factor:g}" if rope.factor is not None else "")
    variant = model.rope_variant
    read = f"read as `--rope {variant}` (its frequencies only)" if variant is not None else \
        "frequencies advise's evidence does not cover"
    covered = f"the length the recipe covers, from `{model.covered_length_key}`" if L == model.covered_length else \
        f"given; the recipe covers {model.covered_length or 0:,}, from `{model.covered_length_key}`"
    pretrained = "" if model.train_length is None else \
        (f"; pretrained to {model.train_length:,}, from `{model.train_length_key}`, the training length of "
         "`softmax-scale engines` and `measure`" + (", the extension added at inference"
                                                    if extension_at_inference(model) else ""))
    lines = [f"Your config ({model.source}, {model.model_type or 'no model_type'}): head dimension {model.head_dim} "
             f"for q.k, L = {L:,} ({covered}{pretrained}), {scaling}, {read}."]
    for t in model.temperatures:
        where = "every layer" if t.layers is None else f"{len(t.layers)} layers"
        lines.append(f"It asks for a temperature rule on the query: `{t.scheme}` on {where} (set by "
                     + ", ".join(f"`{k}`" for k in t.keys) + ").")
    ref = table.engines["reference"]
    parts = []
    for name, e in table.engines.items():
        where = "" if e.layers is None else f" on {len(e.layers)} layers"
        differs = "" if name == "reference" or not table.disagreements(name) else \
            " (differs from the authors': " + "; ".join(e.notes) + ")" if e.notes else " (differs from the authors')"
        parts.append(f"{name} {_factor(e.scale, model.head_dim)}{where}{differs}")
    lines.append(f"At n = {n} the engines multiply q.k by (over 1/sqrt({model.head_dim})): " + ", ".join(parts)
                 + f". The authors' code runs at {_factor(ref.scale, model.head_dim)}"
                 + (": the baseline is the native recipe (the first line)." if extension_at_inference(model)
                    and n <= model.train_length else ": the baseline of the answer."))
    for note in table.notes:
        lines.append(f"Config: {note}.")
    return tuple(lines)


def _over(scale, head_dim: int) -> float:
    return math.nan if scale is None else float(scale[-1]) * math.sqrt(head_dim)


def _scaling(model) -> str:
    r = model.rope
    return f"RoPE scaling `{r.rope_type}`" + (f" with factor {r.factor:g}" if r.factor is not None else "")


def recipe_baseline(model, n: int, table):
    """The :class:`~._rule.Baseline` of a config: the authors' whole multiplier on ``q.k`` at ``n`` (the reference engine).

    ``table`` is :func:`softmax_scale.engines.engine_scales` of ``model`` at ``[n]``.

    The evidence reaches the model only where its recipe is ``1/sqrt(d)`` (or its base scale) at every
    position with no RoPE scaling: the measured models were trained so, and had their RoPE variants
    and scales applied at test.  An extension added at inference (:func:`extension_at_inference`) is
    the authors' recipe past the pretrained length only: inside it the baseline is the native recipe
    (:func:`native_factor`), the model as pretrained.
    """
    from ._rule import Baseline

    d = model.head_dim
    ref = table.engines["reference"]
    factor = _over(ref.scale, d)
    base = float(model.base_scale) * math.sqrt(d)
    at_inference = extension_at_inference(model)
    if at_inference and n <= model.train_length:
        native = native_factor(model, n)
        label = (f"the native recipe, x{native:.5g} at n = {n:,} (the model as pretrained to {model.train_length:,}, "
                 f"without the config's {_scaling(model)}, which applies x{factor:.5g} here)")
        return Baseline(native, label, base, "", assumed=False)
    parts = []
    if model.rope.rope_type != "default":
        parts.append(_scaling(model))
    if model.dynamic_ntk:
        parts.append("dynamic NTK (`use_dynamic_ntk`)")
    parts += [f"`{t.scheme}` on the query" + ("" if t.layers is None else f" on {len(t.layers)} layers")
              for t in model.temperatures]
    if math.isfinite(factor) and abs(factor - base) > 1e-12 * base and not parts:
        parts.append(f"x{factor / base:.5g} on q.k")
    where = "" if ref.layers is None else f" on {len(ref.layers)} of its layers (x{_over(ref.other_scale, d):.5g} on " \
                                          f"the others)"
    if ref.scale is None:
        label = "the authors' recipe, whose multiplier the toolkit has not transcribed"
    else:
        label = (f"the authors' recipe, x{factor:.5g} at n = {n:,}{where}"
                 + (f" ({', '.join(parts)})" if parts else " (no temperature, no RoPE scaling)"))
    why = ""
    if at_inference:
        why = (f"the config adds {', '.join(parts)} at inference to a model pretrained to {model.train_length:,} "
               f"without it, with x{factor:.5g} on q.k at every position; the evidence measured scales against x1, "
               "not against this static temperature: it does not reach it, and the recipe is kept")
    elif parts or ref.scale is None:
        why = (f"the model was trained with {', '.join(parts) if parts else 'a recipe the toolkit has not transcribed'}; "
               "no measured model was (each applied its RoPE variant and scale at test to a model trained without "
               "them): the evidence does not reach it, and the recipe is kept")
    return Baseline(factor if math.isfinite(factor) else math.nan, label, base, why, assumed=False)


def _and(items) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def rope_scaling_dict(rope: str, L: int, n: int) -> dict | None:
    """The Hugging Face ``rope_scaling`` that runs the toolkit's RoPE variant ``rope`` at ``n`` (None: no such key)."""
    from ..engines import ROPE_VARIANTS

    rope_type = next((k for k, v in ROPE_VARIANTS.items() if v == rope and k != "default"), None)
    if rope_type is None:
        return None
    out = {"rope_type": rope_type, "factor": n / L}
    return {**out, "original_max_position_embeddings": L} if rope_type == "yarn" else out


def under_rope(model, rope: str, L: int, n: int):
    """``model`` with the ``rope_scaling`` of :func:`rope_scaling_dict` where its own RoPE is another variant."""
    from ..engines import RopeScaling

    hf = rope_scaling_dict(rope, L, n)
    if hf is None or model.rope_variant == rope:
        return model
    new = RopeScaling(rope_type=hf["rope_type"], factor=float(hf["factor"]),
                      original_max_position_embeddings=hf.get("original_max_position_embeddings"),
                      values=MappingProxyType(dict(hf)))
    return dataclasses.replace(model, rope=new)


def engine_summary(model, table, factor: float, change: bool = False, settings_model=None, wanted=None) -> str:
    """What each engine of ``table`` (at one ``n``) applies against ``factor`` (the whole multiplier to run with).

    With ``change`` (the answer moves away from the recipe) each engine at the version asked says how to
    set the new multiplier on ``q.k`` (:func:`softmax_scale.engines.engine_setting` on ``settings_model``,
    the config run under the RoPE the answer needs, :func:`under_rope`) or that it cannot be set there.
    ``wanted``: ``(positions, factors over 1/sqrt(d))`` at every position; None: a factor per head, which
    no engine setting gives.  An engine that differs from the recipe says how to make it apply the recipe's
    (:meth:`~softmax_scale.engines.EngineTable.setting`).
    """
    from ..engines import NEWEST, engine_setting

    d = model.head_dim
    native = not change and n_native(model, table)  # the config's extension where the native recipe holds
    same, differ, unknown, settings = [], [], [], []
    for name, e in table.engines.items():
        if name == "reference":
            continue
        f = _over(e.scale, d)
        if change and wanted is not None:
            positions, factors = wanted
            s = engine_setting(name, settings_model or model, np.asarray(factors) / math.sqrt(d),
                               version=None if e.version == NEWEST else e.version, n=positions)
            settings.append(f"{name} {e.version}: {s.text}")
        if not math.isfinite(f):
            unknown.append(name)
        elif math.isfinite(factor) and abs(f - factor) <= 1e-4 * abs(factor):
            same.append(name)
        else:
            why = f" ({'; '.join(e.notes)})" if e.notes else ""
            where = "" if e.layers is None else f" on {len(e.layers)} layers"
            fix = None if change or native else table.setting(name)
            how = "" if change or native else f"; to apply the recipe's: {fix.text}" if fix is not None else \
                "; cannot be set to the answer's factor through this engine's config"
            differ.append(f"{name} x{f:.5g}{where}{why}{how}")
    out = []
    if change and wanted is None:
        out.append(f"x{factor:.5g} is a factor per head: it cannot be set in any engine's config, only in the "
                   "attention code")
    elif change:
        factors = np.asarray(wanted[1])
        how = "a constant at every position, inside L too" if np.allclose(factors, factors[-1], rtol=1e-12) else \
            "its factor at each position"
        out.append(f"to run x{factor:.5g} on q.k at n ({how}), per engine at the version asked: " + "; ".join(settings))
    elif same:
        out.append(f"{_and(same)} appl{'ies' if len(same) == 1 else 'y'} it")
    if differ and not change:
        out.append(f"{'differs' if len(differ) == 1 else 'differ'}: " + "; ".join(differ))
        if native:
            out.append("to apply the native recipe in each, run without `rope_scaling` (no engine setting keeps "
                       "the extension and drops its factor alone: its frequencies change too)")
    if unknown:
        out.append(f"not transcribed or not read at this version: {_and(unknown)}")
    return "; ".join(out)


def recipe_rules(model) -> tuple:
    """The scale labels (as advise's comparisons spell them) of the rules in a config's recipe: YaRN's temperature, ..."""
    out = []
    if model.rope.rope_type == "yarn":
        out.append("yarn at test")
    if model.rope.rope_type == "longrope":
        out.append("longrope at test")
    out += [f"{t.scheme} at test" for t in model.temperatures]
    return tuple(dict.fromkeys(out))


def recipe_evidence(model, comps) -> tuple:
    """What the measured comparisons say about the recipe's own rules, one line each, labelled as context.

    The measured models had the rule applied at test, not trained with it: their results are shown
    beside the recipe and never overrule it.
    """
    from ._rule import where

    rules = recipe_rules(model)
    return tuple(f"{c.scale}: {where(c)}" for c in comps if c.scale in rules)


def n_native(model, table) -> bool:
    """Whether ``table``'s length is inside ``model``'s pretrained length, under an extension added at inference.

    There (:func:`extension_at_inference`) its native recipe, without ``rope_scaling``, holds.
    """
    n = int(table.n[-1])
    return extension_at_inference(model) and model.train_length is not None and n <= model.train_length


def extension_at_inference(model) -> bool:
    """Whether the config's RoPE extension is added at inference to a model pretrained without it.

    So where the family's card says so (Qwen2.5 and Qwen3, ``model_type`` ``qwen2*``/``qwen3*``: YaRN
    goes into the config for long inputs only), or where ``max_position_embeddings`` stops short of the
    covered length (the extension is not part of the model's own length: Qwen3-8B's 40,960 against
    4 x 32,768).  Elsewhere (DeepSeek-V3, gpt-oss, Phi-3: the extended length is the model's own) the
    extension is taken as trained in.
    """
    pre, covered = model.train_length, model.covered_length
    if model.rope.rope_type == "default" or pre is None or covered is None or covered <= pre:
        return False
    if model.model_type.startswith(("qwen2", "qwen3")):
        return True
    return model.max_position_embeddings is not None and model.max_position_embeddings < covered


def _reference(model, n: int) -> float:
    from ..engines import engine_scales

    return _over(engine_scales(model, [n]).engines["reference"].scale, model.head_dim)


def native_factor(model, n: int) -> float:
    """The authors' multiplier on ``q.k`` at ``n`` over ``1/sqrt(head_dim)`` without the config's RoPE scaling.

    The model as pretrained: the reference engine's rule on the config with its ``rope_scaling`` removed
    (a temperature rule of its own, Qwen's log n or Llama 4's, stays).
    """
    from ..engines import RopeScaling

    return _reference(dataclasses.replace(model, rope=RopeScaling()), n)


def recipe_extension(model, n: int):
    """The recipe's own rule extended to ``n``: its RoPE scaling with ``s = n / original`` at ``n`` (theory).

    The reference engine's rule on the config with ``factor`` set to ``n / original_max_position_embeddings``
    and ``max_position_embeddings`` to ``n`` (YaRN's ``s``, LongRoPE's, Qwen's ``factor = n / 32768``); a
    temperature rule of the config's own (Llama 4's, Mistral's ``llama_4_scaling_beta``) is read at ``n``.

    Returns
    -------
    tuple or None
        ``(factor over 1/sqrt(head_dim), s, original length)``; None where the config has no RoPE
        scaling that reads a factor.
    """
    r = model.rope
    original = r.original_max_position_embeddings
    if original is None and r.factor and model.covered_length:  # Gemma 3's linear 8: the covered length over it
        original = int(round(model.covered_length / r.factor))
    if r.rope_type not in _EXTENSION or original is None:
        return None
    s = n / original
    rope = dataclasses.replace(r, factor=s, values=MappingProxyType({**r.values, "factor": s}))
    return _reference(dataclasses.replace(model, rope=rope, max_position_embeddings=n), n), s, original


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.0f} s"


def measure_estimate(model, n: int) -> tuple:
    """The command :func:`coverage_line` proposes, ``softmax-scale measure MODEL.gguf --n n`` with :data:`HOUR_OPTIONS`, and its estimate.

    :data:`MEASURE_ANSWER`'s wall time, scaled by the attention's work past the pretrained length
    (``n^2 - L^2``) and by ``layers x hidden size``; ``--budget`` is that estimate with a quarter
    more, in whole hours (none past two days: the run would not be the user's next step).  Returns
    ``(the options past --n, the sentence of the estimate)``.
    """
    from ..models.gguf_file import ARCHITECTURES

    c = MEASURE_ANSWER
    L = model.train_length
    reads = "" if model.model_type in ARCHITECTURES else \
        f"; measure reads {', '.join(ARCHITECTURES)} decoders, not {model.model_type or 'this model'} yet"
    if L is None or n <= L or model.n_layers is None or model.hidden_size is None:
        return HOUR_OPTIONS, "no time estimate: the config gives no pretrained length, layer count or hidden size" + reads
    work = (n ** 2 - L ** 2) / (c["n"] ** 2 - c["train_length"] ** 2) \
        * model.n_layers * model.hidden_size / (c["n_layers"] * c["hidden_size"])
    minutes = c["minutes"] * work
    budget = 60 * math.ceil(1.25 * minutes / 60)
    options = HOUR_OPTIONS + (f" --budget {budget}" if budget <= 48 * 60 else "")
    return options, (f"estimated {_duration(minutes * 60)} on this machine: {c['model']}'s answer at "
                     f"{c['n']:,} tokens, {c['minutes']:g} min (benchmarks/results_measure.md), scaled by n^2 - L^2 "
                     "and by layers x hidden size" + reads)


def coverage_line(model, L: int, n: int, table, measured: str = "") -> str:
    """The answer's first line with a config, where ``n`` calls for one (empty elsewhere).

    Past the covered length ``L``: that ``n`` is past it, the recipe's own rule extended to ``n``
    (:func:`recipe_extension`), labelled theory, and the command that measures it on the user's model
    within its estimated time (:func:`measure_estimate`).  Inside the pretrained length of an extension
    added at inference whose temperature changes ``q.k``: the native recipe, the config's factor and
    the measured cost of the difference (``figures/engine_cost.csv``, a constant factor on every layer
    inside the measured model's training length).  ``measured``: the user's own result file, read in
    place of the command.
    """
    pre, d = model.train_length, model.head_dim
    if n > L:
        ext = recipe_extension(model, n)
        reach = f"n = {n:,} is past the {L:,} tokens your config covers ({n / L:.3g}x; pretrained to {pre:,})"
        if ext is None:
            rules = [f"`{t.scheme}`" for t in model.temperatures] + ["dynamic NTK"] * model.dynamic_ntk
            x = _factor(table.engines["reference"].scale, d)
            theory = (f"its recipe has no RoPE scaling factor to extend; its own rules ({', '.join(rules)}) give {x} "
                      "at n (theory, not measured)") if rules else \
                f"its recipe has no RoPE scaling to extend (the trained frequencies past it, {x})"
        else:
            x, s, original = ext
            temps = "".join(f" and `{t.scheme}` on the query at n" for t in model.temperatures)
            theory = (f"the recipe's own rule extended to n ({_EXTENSION[model.rope.rope_type]} with s = n/{original:,}"
                      f" = {s:.4g}{temps}) gives x{x:.5g} (theory, not measured)")
        if measured:
            return f"{reach}; {theory}; your measurement ({measured}) is read below."
        gguf = model.source if model.format == "gguf" else "MODEL.gguf"
        options, estimate = measure_estimate(model, n)
        return f"{reach}; {theory}; measure it on your model: `softmax-scale measure {gguf} --n {n} {options}` ({estimate})."
    if not extension_at_inference(model) or n > pre:
        return ""
    config_x, native = _over(table.engines["reference"].scale, d), native_factor(model, n)
    if not math.isfinite(config_x) or abs(config_x - native) <= 1e-9 * native:
        return ""
    from ..experiments.engine_cost import MEASURED_TRAIN_LENGTH, measured_cost

    m = measured_cost(config_x / native, "all", min(n, MEASURED_TRAIN_LENGTH))
    cost = "not measured by engine_cost" if m is None else \
        (f"which costs {m['delta_loss']:+.4f} ± {m['delta_se']:.4f} nats/token (± standard error over positions) "
         f"on {m['model']} at n = {m['length']:,}, inside its training length {MEASURED_TRAIN_LENGTH:,} "
         "(figures/engine_cost.csv, measured)")
    return (f"n = {n:,} is inside the {pre:,} tokens the model was pretrained to: its native recipe is x{native:.5g} "
            f"(no rope_scaling); your config's static {_scaling(model)} (added at inference for up to {L:,}) applies "
            f"x{config_x:.5g} at every position, {cost}: run it without `rope_scaling` for inputs within {pre:,} "
            "tokens.")

"""What a model's own config asks for, as the first lines of advise's scope (``advise(config=...)``).

The config is read by :func:`softmax_scale.engines.read_config`, and what each inference engine makes of
it by :func:`softmax_scale.engines.engine_scales`; this module only words them.
"""

from __future__ import annotations

import math

__all__ = ["config_lines", "engine_summary", "recipe_baseline"]


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
    lines = [f"Your config ({model.source}, {model.model_type or 'no model_type'}): head dimension {model.head_dim} "
             f"for q.k, L = {L:,} (the length the recipe covers, from `{model.covered_length_key}`; pretrained at "
             f"{model.train_length} from `{model.train_length_key}`), {scaling}, {read}."]
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
                 + f". The authors' code runs at {_factor(ref.scale, model.head_dim)}: the baseline of the answer.")
    for note in table.notes:
        lines.append(f"Config: {note}.")
    return tuple(lines)


def _over(scale, head_dim: int) -> float:
    return math.nan if scale is None else float(scale[-1]) * math.sqrt(head_dim)


def recipe_baseline(model, n: int, table):
    """The :class:`~._rule.Baseline` of a config: the authors' whole multiplier on ``q.k`` at ``n`` (the reference engine).

    ``table`` is :func:`softmax_scale.engines.engine_scales` of ``model`` at ``[n]``.

    The evidence reaches the model only where its recipe is ``1/sqrt(d)`` (or its base scale) at every
    position with no RoPE scaling trained in: the measured models were trained so, and had their RoPE
    variants and scales applied at test.
    """
    from ._rule import Baseline

    d = model.head_dim
    ref = table.engines["reference"]
    factor = _over(ref.scale, d)
    base = float(model.base_scale) * math.sqrt(d)
    parts = []
    if model.rope.rope_type != "default":
        parts.append(f"RoPE scaling `{model.rope.rope_type}`"
                     + (f" with factor {model.rope.factor:g}" if model.rope.factor is not None else ""))
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
    if parts or ref.scale is None:
        why = (f"the model was trained with {', '.join(parts) if parts else 'a recipe the toolkit has not transcribed'}; "
               "no measured model was (each applied its RoPE variant and scale at test to a model trained without "
               "them): the evidence does not reach it, and the recipe is kept")
    return Baseline(factor if math.isfinite(factor) else math.nan, label, base, why, assumed=False)


def _and(items) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def engine_summary(model, table, factor: float, change: bool = False) -> str:
    """What each engine of ``table`` (at one ``n``) applies against ``factor`` (the whole multiplier to run with).

    With ``change`` (the answer moves away from the recipe) it says how to set the new factor: no
    engine in the table reads a config key that puts a per-position factor on ``q.k`` of a model whose
    recipe has none, so it goes in the attention code, each query row times the factor at its position.
    """
    d = model.head_dim
    same, differ, unknown = [], [], []
    for name, e in table.engines.items():
        if name == "reference":
            continue
        f = _over(e.scale, d)
        if not math.isfinite(f):
            unknown.append(name)
        elif math.isfinite(factor) and abs(f - factor) <= 1e-4 * abs(factor):
            same.append(name)
        else:
            why = f" ({'; '.join(e.notes)})" if e.notes else ""
            where = "" if e.layers is None else f" on {len(e.layers)} layers"
            differ.append(f"{name} x{f:.5g}{where}{why}")
    out = []
    if change:
        out.append(f"none applies x{factor:.5g} now, and none reads a config key that sets a per-position factor on "
                   "q.k for a model whose recipe has none: set it in the attention code, each query row times the "
                   "factor at its position (in transformers the attention's `scaling`, in llama.cpp `kq_scale`, "
                   "per position)")
    elif same:
        out.append(f"{_and(same)} appl{'ies' if len(same) == 1 else 'y'} it")
    if differ and not change:
        out.append(f"{'differs' if len(differ) == 1 else 'differ'}: " + "; ".join(differ))
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

"""What a model's own config asks for, as the first lines of advise's scope (``advise(config=...)``).

The config is read by :func:`softmax_scale.engines.read_config`, and what each inference engine makes of
it by :func:`softmax_scale.engines.engine_scales`; this module only words them.
"""

from __future__ import annotations

import math

__all__ = ["config_lines"]


def _factor(scale, head_dim: int) -> str:
    """The last entry of an engine's multiplier on ``q.k``, over ``1/sqrt(head_dim)``, as ``x1.2965``."""
    return "not transcribed" if scale is None else f"x{float(scale[-1]) * math.sqrt(head_dim):.4g}"


def config_lines(model, L: int, n: int) -> tuple:
    """Scope lines for a :class:`~softmax_scale.engines.ModelScaling`: what it sets, and each engine's factor at ``n``.

    Parameters
    ----------
    model : ModelScaling
        :func:`softmax_scale.engines.read_config` of the user's config.
    L, n : int
        The training length advise uses and the length asked about.

    Returns
    -------
    tuple of str
    """
    from ..engines import engine_scales

    rope = model.rope
    scaling = "no RoPE scaling" if rope.rope_type == "default" else \
        f"RoPE scaling `{rope.rope_type}`" + (f" with factor {rope.factor:g}" if rope.factor is not None else "")
    variant = model.rope_variant
    read = f"read as `--rope {variant}` (its frequencies only)" if variant is not None else \
        "frequencies advise's evidence does not cover"
    lines = [f"Your config ({model.source}, {model.model_type or 'no model_type'}): head dimension {model.head_dim} "
             f"for q.k, L = {L} (from `{model.train_length_key}`), {scaling}, {read}."]
    for t in model.temperatures:
        where = "every layer" if t.layers is None else f"{len(t.layers)} layers"
        lines.append(f"It asks for a temperature rule on the query: `{t.scheme}` on {where} (set by "
                     + ", ".join(f"`{k}`" for k in t.keys) + ").")
    table = engine_scales(model, [n])
    ref = table.engines["reference"]
    parts = []
    for name, e in table.engines.items():
        where = "" if e.layers is None else f" on {len(e.layers)} layers"
        differs = "" if name == "reference" or not table.disagreements(name) else \
            " (differs from the authors': " + "; ".join(e.notes) + ")" if e.notes else " (differs from the authors')"
        parts.append(f"{name} {_factor(e.scale, model.head_dim)}{where}{differs}")
    lines.append(f"At n = {n} the engines multiply q.k by (over 1/sqrt({model.head_dim})): " + ", ".join(parts)
                 + f". advise's factor is over 1/sqrt(d) under the RoPE frequencies alone; the authors' code runs at "
                 f"{_factor(ref.scale, model.head_dim)} now.")
    for note in table.notes:
        lines.append(f"Config: {note}.")
    return tuple(lines)

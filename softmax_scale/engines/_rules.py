"""What every engine module shares: a rule with its source, the result of one engine, and the formulas.

The formulas are the scheme registry's (:mod:`softmax_scale.schemes`): an engine's rule says which
formula it applies to which config keys and calls it here, never restating it.  Factors on
cos/sin (YaRN's ``mscale``, ``attention_factor``) multiply both ``q`` and ``k``: they count
squared on the logits, and every helper below returns the factor on ``q.k`` itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..schemes import pinned

__all__ = ["EngineScale", "Rule", "compose", "every_fourth", "longrope_sq", "mscale_sq", "position_factor"]


@dataclass(frozen=True)
class Rule:
    """One rule of one engine, with where it was read.

    Attributes
    ----------
    name : str
        The rule's name in its engine's table.
    text : str
        What it does, in one line, with the keys it reads.
    repo, path, commit : str
        Where it was transcribed from (``commit`` is the 40-digit hash of the version read).
    positions : str
        Its position convention (0-based ``p``, 1-based ``n = p + 1``); ``""`` if constant in ``n``.
    scheme : str
        The registry scheme whose formula it calls; ``""`` when it only sets a constant.
    squared : bool
        Whether it is a factor on cos/sin, hence squared on the logits.
    """

    name: str
    text: str
    repo: str
    path: str
    commit: str
    positions: str = ""
    scheme: str = ""
    squared: bool = False


@dataclass(frozen=True)
class EngineScale:
    """The multiplier one engine puts on ``q.k`` for one config.

    Attributes
    ----------
    engine : str
    n : ndarray
        Numbers of keys (1-based positions).
    scale : ndarray or None
        The multiplier on ``q.k`` at each ``n`` on the layers in :attr:`layers` (all layers when
        ``layers`` is None); ``None`` where the engine's rule for this config is not transcribed.
    other_scale : ndarray or None
        On the remaining layers, when a rule applies to some layers only.
    layers : tuple of int or None
    nope_scale : ndarray or None
        MLA: on the dimensions RoPE does not rotate, when it differs from :attr:`scale`.
    notes : tuple of str
        How it departs from the reference, and why a value is missing.
    rules : tuple of str
        The rules of the engine's table that applied.
    """

    engine: str
    n: np.ndarray
    scale: np.ndarray | None
    other_scale: np.ndarray | None = None
    layers: tuple | None = None
    nope_scale: np.ndarray | None = None
    notes: tuple = ()
    rules: tuple = field(default_factory=tuple)


def mscale_sq(s: float, m: float) -> float:
    """``(0.1 m ln s + 1)^2`` for ``s > 1``, else 1: YaRN's ``get_mscale(s, m)`` squared on ``q.k`` (registry ``deepseek_yarn``)."""
    if s is None or s <= 1.0:
        return 1.0
    return float(pinned("deepseek_yarn", factor=s, mscale_all_dim=m).factor(1, 1))


def longrope_sq(s: float, L: int) -> float:
    """``1 + ln s / ln L`` for ``s > 1``, else 1: LongRoPE's default attention factor squared (registry ``longrope``)."""
    if s is None or s <= 1.0:
        return 1.0
    return float(pinned("longrope", L, factor=s).factor(1, 1))


def position_factor(rule, n: np.ndarray) -> np.ndarray:
    """The factor a temperature rule (:class:`~.config.TemperatureRule`) puts on ``q.k`` at ``n`` keys (registry formula)."""
    return np.asarray(pinned(rule.scheme, **dict(rule.params)).factor(n, 1), dtype=np.float64)


def every_fourth(ms, temps, notes):
    """Llama 4's temperature on every 4th layer (``(i + 1) % 4 == 0``), whatever ``no_rope_layers`` says.

    For the engines that fix the NoPE layers instead of reading them; a note when the config's differ.
    """
    out = []
    for t in temps:
        if t.scheme == "llama4" and t.layers is not None:
            n_layers = ms.n_layers or (max(t.layers) + 1)
            fixed = tuple(i for i in range(n_layers) if (i + 1) % 4 == 0)
            if fixed != t.layers:
                notes.append("ignores `no_rope_layers` (NoPE on every 4th layer)")
            t = dataclasses.replace(t, layers=fixed)
        out.append(t)
    return out


def compose(engine, ms, n, *, base, rope_sq, softmax_sq=1.0, temps=(), notes=(), rules=()) -> EngineScale:
    """One engine's :class:`EngineScale` from its parts.

    Parameters
    ----------
    engine : str
    ms : ModelScaling
    n : ndarray
    base : float
        The scale on ``q.k`` before any rule.
    rope_sq : float or None
        The factor on the rotated dimensions' logits (cos/sin factor squared); ``None``: not transcribed.
    softmax_sq : float
        A factor on the whole softmax scale (DeepSeek's ``mscale_all_dim`` term).
    temps : sequence of TemperatureRule
        The temperature rules the engine applies.
    notes, rules : sequence of str
    """
    if rope_sq is None:
        return EngineScale(engine, n, None, notes=tuple(notes), rules=tuple(rules))
    whole = np.full(n.shape, base * softmax_sq)
    layered = None
    for t in temps:
        f = position_factor(t, n)
        if t.layers is None:
            whole = whole * f
        else:
            layered = (t.layers, f if layered is None else layered[1] * f)
    scale = whole * rope_sq
    nope = whole if ms.is_mla and rope_sq != 1.0 else None
    if layered is None:
        return EngineScale(engine, n, scale, nope_scale=nope, notes=tuple(notes), rules=tuple(rules))
    layers, f = layered
    return EngineScale(engine, n, scale * f, other_scale=scale, layers=tuple(layers),
                       nope_scale=None if nope is None else nope * f, notes=tuple(notes), rules=tuple(rules))

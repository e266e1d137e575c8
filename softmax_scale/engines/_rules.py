"""What every engine module shares: a rule with its source, the result of one engine, and the formulas.

The formulas are the scheme registry's (:mod:`softmax_scale.schemes`): an engine's rule says which
formula it applies to which config keys and calls it here, never restating it.  Factors on
cos/sin (YaRN's ``mscale``, ``attention_factor``) multiply both ``q`` and ``k``: they count
squared on the logits, and every helper below returns the factor on ``q.k`` itself.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..schemes import pinned
from ._types import ROPE_TYPES

__all__ = ["BUILD_TAGGED", "NEWEST", "EngineScale", "Rule", "compose", "every_fourth", "lengths_s", "longrope_sq", "mscale_sq",
           "parse_version", "pick", "position_factor", "refuse_rope_type", "refuses", "unknown"]

#: The label of an engine's newest known rules (no version asked).
NEWEST = "newest"
#: Specifier operators that bound a range from above: a row with one is not the newest.
_UPPER = frozenset({"<", "<=", "==", "===", "~="})


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
    versions : str
        The engine's releases it holds for, as a PEP 440 specifier set (``">=0.29.1"``,
        ``">=1.0.0,<1.3.0"``); ``""``: its range was not read (the rule as read at ``commit``).
    source : str
        What started the range (a PR or commit), ``""`` where the range is not recorded.
    family : str
        The rule it is one version of (rows of one family hold for disjoint ranges); default ``name``.
    """

    name: str
    text: str
    repo: str
    path: str
    commit: str
    positions: str = ""
    scheme: str = ""
    squared: bool = False
    versions: str = ""
    source: str = ""
    family: str = ""

    def __post_init__(self):
        try:
            SpecifierSet(self.versions)
        except InvalidSpecifier:
            raise ValueError(f"`versions` of rule {self.name!r} must be a PEP 440 specifier set, "
                             f"got {self.versions!r}") from None

    @property
    def specifier(self) -> SpecifierSet:
        """:attr:`versions` as a :class:`packaging.specifiers.SpecifierSet`."""
        return SpecifierSet(self.versions)

    @property
    def newest(self) -> bool:
        """Whether the range is open above (or not recorded): the row for the newest known version."""
        return not any(s.operator in _UPPER for s in self.specifier)

    def holds_at(self, version: Version | None) -> bool:
        """Whether the rule holds at ``version`` (``None``: the newest known; a row without a range holds only there)."""
        if version is None:
            return self.newest
        return bool(self.versions) and self.specifier.contains(version, prereleases=True)


#: Engines versioned by build number, as their release tags spell it (llama.cpp's ``b6000`` is build 6000).
BUILD_TAGGED = frozenset({"llama.cpp"})
_BUILD = re.compile(r"b?(\d+)")


def parse_version(version, name: str = "version", engine: str | None = None) -> Version | None:
    """``version`` as a :class:`packaging.version.Version` (``None`` stays ``None``); ValueError naming ``name``.

    For an engine of :data:`BUILD_TAGGED` a build tag (``b6000``) or number (``6000``) is the
    version of that number; any other spelling is refused.
    """
    if version is None or isinstance(version, Version):
        return version
    if engine in BUILD_TAGGED:
        m = _BUILD.fullmatch(str(version))
        if m is None:
            raise ValueError(f"`{name}` of {engine} must be a build such as b6000, got {version!r}")
        return Version(m.group(1))
    try:
        return Version(str(version))
    except InvalidVersion:
        raise ValueError(f"`{name}` must be a PEP 440 version such as 0.11.0, got {version!r}") from None


def pick(rules: dict, family: str, version: Version | None):
    """The row of ``family`` in an engine's ``rules`` that holds at ``version``; ``None`` if no row does.

    Parameters
    ----------
    rules : dict
        The engine's ``RULES``.
    family : str
        The rule asked for; every row with that :attr:`Rule.family` (or name) is a candidate.
    version : packaging.version.Version or None
        ``None``: the newest known row.
    """
    rows = [r for r in rules.values() if (r.family or r.name) == family]
    held = [r for r in rows if r.holds_at(version)]
    return held[0] if held else None


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
    version : str
        The engine version the row is for: a release (``"0.11.0"``) or :data:`NEWEST`.
    """

    engine: str
    n: np.ndarray
    scale: np.ndarray | None
    other_scale: np.ndarray | None = None
    layers: tuple | None = None
    nope_scale: np.ndarray | None = None
    notes: tuple = ()
    rules: tuple = field(default_factory=tuple)
    version: str = NEWEST


def unknown(engine, n, version, family, notes=()) -> EngineScale:
    """The row of an engine whose rule ``family`` was not read at ``version``: no value, and why."""
    at = f"in {engine}'s newest known rules" if str(version) == NEWEST else f"at {engine}=={version}"
    why = f"unknown {at}: its `{family}` rule was not read at that version"
    return EngineScale(engine, n, None, notes=(why, *notes), version=str(version))


def refuses(ms, engine_types) -> bool:
    """Whether an engine that builds only ``engine_types`` refuses the config's ``rope_type``.

    Only a type the reader does not know either (:data:`~._types.ROPE_TYPES`) is counted: the
    engines' handling of the others is each engine's own rules.
    """
    return ms.rope.rope_type not in engine_types and ms.rope.rope_type not in ROPE_TYPES


def refuse_rope_type(engine, ms, n, version, rule) -> EngineScale:
    """The row of an engine that refuses the config's ``rope_type`` (``rule``: the :class:`Rule` quoting its refusal)."""
    return EngineScale(engine, n, None, notes=(f"refuses the config: rope_type {ms.rope.rope_type!r} is not one it "
                                               f"builds ({rule.text})",), rules=(rule.name,), version=str(version))


def mscale_sq(s: float, m: float) -> float:
    """``(0.1 m ln s + 1)^2`` for ``s > 1``, else 1: YaRN's ``get_mscale(s, m)`` squared on ``q.k`` (registry ``deepseek_yarn``)."""
    if s is None or s <= 1.0:
        return 1.0
    return float(pinned("deepseek_yarn", factor=s, mscale_all_dim=m).factor(1, 1))


def lengths_s(ms, notes) -> float:
    """YaRN's ``s`` from the lengths: ``max_position_embeddings / original_max_position_embeddings``, else ``factor``.

    The rule of exllamav3's and of transformers' ``yarn_s_from_lengths`` rows; a note is appended
    to ``notes`` where it differs from ``factor``.
    """
    r = ms.rope
    orig, max_pos = r.original_max_position_embeddings, ms.max_position_embeddings
    s = max_pos / orig if orig and max_pos else r.factor
    if orig and max_pos and r.factor is not None and s != r.factor:
        notes.append(f"takes s = max_position_embeddings / original_max_position_embeddings = {s:g}, not `factor`")
    return s


def longrope_sq(s: float, L: int) -> float:
    """``1 + ln s / ln L`` for ``s > 1``, else 1: LongRoPE's default attention factor squared (registry ``longrope``)."""
    if s is None or s <= 1.0:
        return 1.0
    return float(pinned("longrope", L, factor=s).factor(1, 1))


def position_factor(rule, n: np.ndarray) -> np.ndarray:
    """The factor a temperature rule (:class:`~.config.TemperatureRule`) puts on ``q.k`` at ``n`` keys (registry formula).

    A rule with ``shift = 1`` reads the 0-based position ``p = n - 1`` where the registry formula
    reads ``n``; at ``p = 0`` the position forms it is used with (``llama4``) are 1.
    """
    m = np.asarray(n, dtype=np.float64) - rule.shift
    out = np.ones(m.shape)
    live = m >= 1
    if live.any():
        out[live] = pinned(rule.scheme, **dict(rule.params)).factor(m[live], 1)
    return out


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


def compose(engine, ms, n, *, base, rope_sq, softmax_sq=1.0, temps=(), notes=(), rules=(), version=NEWEST,
            reads_layer_types=True, unread_temps=()) -> EngineScale:
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
        It applies on :attr:`~.config.ModelScaling.rope_layers` (every layer when that is ``None``).
    softmax_sq : float
        A factor on the whole softmax scale (DeepSeek's ``mscale_all_dim`` term).
    temps : sequence of TemperatureRule
        The temperature rules the engine applies.
    notes, rules : sequence of str
    version : str
        The version the row is for.
    reads_layer_types : bool
        Whether the engine's handling of RoPE given per layer type was read; if not, a config
        that gives it gets no value.
    unread_temps : sequence of TemperatureRule
        Temperature rules the config sets whose handling by the engine (at this version) was not
        read: the value is NaN (unknown) wherever such a rule's factor is not 1.
    """
    notes, rules, version = tuple(notes), tuple(rules), str(version)
    rope_layers = ms.rope_layers if rope_sq not in (None, 1.0) else None
    if rope_sq is not None and rope_layers is not None and not reads_layer_types:
        rope_sq, notes = None, (*notes, "its handling of RoPE per layer type (`layer_types`) was not read")
    if rope_sq is None:
        return EngineScale(engine, n, None, notes=notes, rules=rules, version=version)
    whole = np.full(n.shape, base * softmax_sq)
    for t in unread_temps:
        whole = np.where(position_factor(t, n) == 1.0, whole, np.nan)
        notes = (*notes, f"unknown where `{t.key}` changes the scale: its handling was not read at this version")
    layered = None
    for t in temps:
        f = position_factor(t, n)
        if t.layers is None:
            whole = whole * f
        else:
            layered = (t.layers, f if layered is None else layered[1] * f)
    scale = whole * rope_sq
    nope = whole if ms.is_mla and rope_sq != 1.0 else None
    if layered is None and rope_layers is None:
        return EngineScale(engine, n, scale, nope_scale=nope, notes=notes, rules=rules, version=version)
    if layered is None:  # the RoPE factor on some layers only
        return EngineScale(engine, n, scale, other_scale=whole, layers=tuple(rope_layers), nope_scale=nope,
                           notes=notes, rules=rules, version=version)
    layers, f = layered
    if rope_layers is not None and tuple(rope_layers) != tuple(layers):
        return EngineScale(engine, n, None, notes=(*notes, "a per-layer RoPE factor and a per-layer temperature on "
                                                   "different layers are not modelled here"), rules=rules,
                           version=version)
    other = whole if rope_layers is not None else scale
    return EngineScale(engine, n, scale * f, other_scale=other, layers=tuple(layers),
                       nope_scale=None if nope is None else nope * f, notes=notes, rules=rules, version=version)

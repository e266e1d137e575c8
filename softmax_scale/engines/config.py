"""A model's scaling read from its config: a Hugging Face ``config.json`` (path or dict) or a GGUF file's metadata.

:func:`read_config` returns a :class:`ModelScaling`: the head dimension of ``q.k``, the base
scale, the training length, the RoPE scaling keys and every per-position temperature rule with
the layers it applies to.  Keys are kept as each format spells them: HF keys as transformers
spells them (``rope_scaling.factor``), GGUF keys as llama.cpp does (``llama.rope.scaling.factor``).
A scaling key the reader does not know is listed in :attr:`ModelScaling.unknown_keys`, never
dropped; a malformed config raises one ValueError naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["ModelScaling", "RopeScaling", "TemperatureRule", "read_config"]

#: RoPE-scaling keys the reader knows (``rope_scaling`` / ``rope_parameters``), numeric ones first.
ROPE_NUMBER_KEYS = ("factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "attn_factor",
                    "extrapolation_factor", "low_freq_factor", "high_freq_factor", "short_mscale", "long_mscale")
ROPE_OTHER_KEYS = ("rope_type", "type", "original_max_position_embeddings", "truncate", "rope_theta",
                   "partial_rotary_factor", "short_factor", "long_factor", "apply_yarn_scaling", "mrope_section",
                   "mrope_interleaved", "llama_4_scaling_beta")
#: Top-level keys the reader reads or knows to leave the multiplier on q.k alone.
KNOWN_KEYS = frozenset({
    "head_dim", "hidden_size", "num_attention_heads", "num_hidden_layers", "qk_nope_head_dim", "qk_rope_head_dim",
    "query_pre_attn_scalar", "attention_multiplier", "softmax_scale", "max_position_embeddings",
    "original_max_position_embeddings", "seq_length", "rope_scaling", "rope_parameters", "use_logn_attn",
    "attn_temperature_tuning", "floor_scale", "attn_scale", "no_rope_layers", "no_rope_layer_interval",
    "model_type", "text_config", "rope_theta", "partial_rotary_factor", "rope_interleave", "use_dynamic_ntk",
    "rope_local_base_freq", "embedding_multiplier", "residual_multiplier", "logits_scaling", "scale_embedding",
    "attn_logit_softcapping", "final_logit_softcapping", "rotary_emb_base", "rotary_pct", "routed_scaling_factor",
    "llama_4_scaling", "layer_types",
})
#: The ``rope_type`` values the engines' rules here know (``mrope``: Qwen2-VL's sections, the default frequencies).
#: Any other is an unknown key, listed first in :attr:`ModelScaling.unknown_keys`.
ROPE_TYPES = frozenset({"default", "linear", "dynamic", "yarn", "longrope", "llama3", "deepseek_yarn", "telechat3-yarn",
                        "mrope"})
#: Keys that hold a length in tokens: an integer >= 2 (a length of 1 has no positions to scale).
LENGTH_KEYS = frozenset({"original_max_position_embeddings", "seq_length", "max_position_embeddings"})
#: HF ``rope_type`` -> the toolkit's RoPE variant of the same frequencies (:data:`~softmax_scale.schemes.rope.ROPES`).
ROPE_VARIANTS = {"default": "none", "linear": "pi", "dynamic": "dynamic_ntk", "yarn": "yarn"}
#: Substrings that mark a top-level key as bearing on the scale (an unknown one is listed).
_SCALE_WORDS = ("scal", "rope", "rotary", "logn", "temperature", "mscale", "softmax", "attn_factor",
                "attention_factor", "multiplier")


@dataclass(frozen=True)
class RopeScaling:
    """The RoPE scaling keys of a config, as set (``None``: absent).

    Attributes
    ----------
    rope_type : str
        ``"default"`` when the config has no scaling, else ``rope_type`` (or the older ``type``).
    factor, original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim, \
attention_factor, attn_factor, truncate
        The keys of the same names.
    values : Mapping
        Every key of the RoPE dict as given (read-only).
    """

    rope_type: str = "default"
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    attn_factor: float | None = None
    truncate: bool | None = None
    values: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class TemperatureRule:
    """A per-position rule on the query, with the layers it applies to.

    Attributes
    ----------
    scheme : str
        The registry scheme whose formula it is (``"qwen_logn"``, ``"llama4"``).
    params : Mapping
        The scheme's parameters read from the config (e.g. ``train_length``, ``floor_scale``).
    layers : tuple of int or None
        0-based layer indices it applies to; ``None``: every layer.
    keys : tuple of str
        The config keys that set it.
    shift : int
        0: the formula reads the number of keys ``n``; 1: it reads the 0-based position
        ``p = n - 1`` in its place (Mistral's ``floor(p / original_max_position_embeddings)``).
    """

    scheme: str
    params: Mapping
    layers: tuple | None
    keys: tuple
    shift: int = 0

    @property
    def key(self) -> str:
        """The config key that switches it on (``use_logn_attn``, ``attn_temperature_tuning``, ``...llama_4_scaling_beta``)."""
        return self.keys[0]

    @property
    def name(self) -> str:
        """Which rule it is: ``"qwen_logn"``, ``"llama4_temperature"`` or ``"llama_4_scaling_beta"``."""
        if self.scheme == "qwen_logn":
            return "qwen_logn"
        return "llama4_temperature" if self.key == "attn_temperature_tuning" else "llama_4_scaling_beta"


@dataclass(frozen=True)
class ModelScaling:
    """What a config says about the scale in front of the softmax.

    Attributes
    ----------
    source : str
        The file read, or ``"<dict>"``.
    format : {"hf", "gguf"}
        The config's format.
    model_type : str
        ``model_type`` (HF) or ``general.architecture`` (GGUF).
    head_dim : int
        Dimension of ``q.k`` (MLA: ``qk_nope_head_dim + qk_rope_head_dim``).
    rope_dim : int
        Dimensions of ``q.k`` that RoPE rotates (MLA: ``qk_rope_head_dim``; else ``head_dim``).
    n_layers : int or None
        ``num_hidden_layers`` / ``block_count``.
    base_scale : float
        The scale on ``q.k`` without any RoPE or temperature rule.
    base_key : str
        What sets it: ``"head_dim"`` (``1/sqrt(head_dim)``), ``"query_pre_attn_scalar"``,
        ``"attention_multiplier"`` or ``"softmax_scale"``.
    train_length : int or None
        The training length ``L``; ``train_length_key`` names the key it was read from.
    train_length_key : str
    max_position_embeddings : int or None
    hidden_size, num_attention_heads : int or None
    rope : RopeScaling
    temperatures : tuple of TemperatureRule
    set_keys : tuple of str
        Every scaling key the config sets, spelled as in the file (``rope_scaling.factor``).
    unknown_keys : tuple of str
        The scaling keys among them the reader does not know.
    dynamic_ntk : bool
        Qwen (v1)'s ``use_dynamic_ntk``.
    rope_layers : tuple of int or None
        0-based layers the RoPE scaling keys apply to, when ``rope_parameters`` is given per layer
        type and ``layer_types`` names them (the ``full_attention`` layers); ``None``: every layer.
    partial_rotary_factor : float or None
        ``partial_rotary_factor`` as set (``rope_dim`` is ``head_dim`` times it).
    """

    source: str
    format: str
    model_type: str
    head_dim: int
    rope_dim: int
    n_layers: int | None
    base_scale: float
    base_key: str
    train_length: int | None
    train_length_key: str
    max_position_embeddings: int | None
    hidden_size: int | None
    num_attention_heads: int | None
    rope: RopeScaling
    temperatures: tuple = ()
    set_keys: tuple = ()
    unknown_keys: tuple = ()
    dynamic_ntk: bool = False
    rope_layers: tuple | None = None
    partial_rotary_factor: float | None = None

    @property
    def rope_variant(self) -> str | None:
        """The toolkit's RoPE variant (``advise``'s ``rope``) of these frequencies; ``None`` if it has none.

        ``rope_type`` ``default``/``linear``/``dynamic``/``yarn`` are ``none``/``pi``/``dynamic_ntk``/
        ``yarn``; Qwen (v1)'s ``use_dynamic_ntk`` is ``dynamic_ntk``; ``llama3``, ``longrope`` and the
        rest have no counterpart.
        """
        if self.rope.rope_type == "default" and self.dynamic_ntk:
            return "dynamic_ntk"
        return ROPE_VARIANTS.get(self.rope.rope_type)

    @property
    def covered_length(self) -> int | None:
        """The length the model's recipe covers: where its authors say it runs as trained.

        One rule for every family: with YaRN, ``factor x original_max_position_embeddings`` (Qwen3:
        4 x 32768 = 131072, whatever ``max_position_embeddings`` says); with any other RoPE scaling
        (``llama3``, ``longrope``, ``linear``, ``dynamic``) the extended ``max_position_embeddings``
        (Llama 3.1: 131072; Gemma 3: 131072); without RoPE scaling ``max_position_embeddings``.  Where
        the key the rule reads is absent, the other one, then :attr:`train_length`.
        :attr:`covered_length_key` names what was read.
        """
        return self._covered()[0]

    @property
    def covered_length_key(self) -> str:
        """What :attr:`covered_length` was read from (``"factor x original_max_position_embeddings"``, ...)."""
        return self._covered()[1]

    def _covered(self) -> tuple:
        r = self.rope
        product = None
        if r.factor is not None and r.original_max_position_embeddings is not None:
            product = (int(round(r.factor * r.original_max_position_embeddings)),
                       "factor x original_max_position_embeddings")
        extended = (self.max_position_embeddings, "max_position_embeddings") if self.max_position_embeddings else None
        order = (product, extended) if r.rope_type == "yarn" else (extended, product)
        for found in order:
            if found is not None:
                return found
        return self.train_length, self.train_length_key

    @property
    def is_mla(self) -> bool:
        """Whether RoPE rotates only part of ``q.k`` (MLA's rope dimensions, or a ``partial_rotary_factor`` below 1)."""
        return self.rope_dim != self.head_dim

    @property
    def has_mla_head(self) -> bool:
        """Whether ``q.k`` is MLA's (``qk_nope_head_dim`` + ``qk_rope_head_dim``), not a partly rotated head."""
        prf = self.partial_rotary_factor
        return self.is_mla and (prf is None or self.rope_dim != int(self.head_dim * prf))


def _fail(source, key, rule):
    return ValueError(f"`config`: {source}: `{key}` {rule}")


def _number(cfg, key, source, prefix="", *, positive=True, integer=False, default=None):
    if key not in cfg or cfg[key] is None:
        return default
    v = cfg[key]
    name = prefix + key
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise _fail(source, name, f"must be a finite number, got {v!r}")
    if integer and v != int(v):
        raise _fail(source, name, f"must be an integer, got {v!r}")
    if key in LENGTH_KEYS and v < 2:
        raise _fail(source, name, f"must be an integer >= 2 (a length in tokens), got {v!r}")
    if positive and v <= 0:
        raise _fail(source, name, f"must be > 0, got {v!r}")
    if v < 0:
        raise _fail(source, name, f"must be >= 0, got {v!r}")
    return int(v) if integer else float(v)


def _rope(cfg, source):
    """The RoPE dict (``rope_parameters`` first, then ``rope_scaling``) and its key prefix."""
    for key in ("rope_parameters", "rope_scaling"):
        r = cfg.get(key)
        if r is None:
            continue
        if not isinstance(r, Mapping):
            raise _fail(source, key, f"must be an object, got {r!r}")
        if r and all(isinstance(v, Mapping) for v in r.values()):  # per layer type: the full-attention layers
            if "full_attention" not in r:
                raise _fail(source, key, f"is per layer type but has no `full_attention` entry: {sorted(r)}")
            return r["full_attention"], f"{key}.full_attention."
        return r, f"{key}."
    return {}, "rope_scaling."


def _rope_layers(cfg, n_layers, prefix, source):
    """The layers the RoPE scaling applies to: the ``full_attention`` ones of ``layer_types`` when the RoPE dict is per type."""
    if not prefix.endswith(".full_attention."):
        return None
    types = cfg.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise _fail(source, "layer_types", f"must be a list of strings, got {types!r}")
    if n_layers is not None and len(types) != n_layers:
        raise _fail(source, "layer_types", f"must have `num_hidden_layers` ({n_layers}) entries, got {len(types)}")
    per_type = cfg[prefix.split(".")[0]]
    scaled = [t for t, v in per_type.items() if v.get("rope_type", v.get("type", "default")) != "default"]
    if scaled != ["full_attention"]:
        return None
    return tuple(i for i, t in enumerate(types) if t == "full_attention")


def _read_rope(r, prefix, source):
    kind = r.get("rope_type", r.get("type", "default"))
    if not isinstance(kind, str):
        raise _fail(source, prefix + "rope_type", f"must be a string, got {kind!r}")
    nums = {k: _number(r, k, source, prefix, positive=k in ("factor", "beta_fast", "beta_slow"))
            for k in ROPE_NUMBER_KEYS}
    orig = _number(r, "original_max_position_embeddings", source, prefix, integer=True)
    truncate = r.get("truncate")
    if truncate is not None and not isinstance(truncate, bool):
        raise _fail(source, prefix + "truncate", f"must be true or false, got {truncate!r}")
    if kind in ("yarn", "linear", "dynamic", "llama3") and nums["factor"] is None:
        raise _fail(source, prefix + "factor", f"is required by rope_type {kind!r}")
    return RopeScaling(kind, nums["factor"], orig, nums["beta_fast"], nums["beta_slow"], nums["mscale"],
                       nums["mscale_all_dim"], nums["attention_factor"], nums["attn_factor"], truncate,
                       MappingProxyType(dict(r)))


def _check_longrope(rope, max_pos, prefix, source):
    """LongRoPE's attention factor reads the original length and the extension ``s``: the keys they come from must be set.

    Without ``attention_factor``: the length is ``original_max_position_embeddings`` (in the RoPE dict or
    at the top level), else ``max_position_embeddings``; ``s`` is ``factor``, else
    ``max_position_embeddings / original_max_position_embeddings``.
    """
    if rope.rope_type != "longrope" or rope.attention_factor is not None:
        return
    orig = prefix + "original_max_position_embeddings"
    if rope.original_max_position_embeddings is None and max_pos is None:
        raise _fail(source, "max_position_embeddings", f"(or `{orig}`) is required by rope_type 'longrope': its "
                    "attention factor reads the original length")
    if rope.factor is None and max_pos is None:
        raise _fail(source, "max_position_embeddings", f"(or `{prefix}factor`) is required by rope_type 'longrope': "
                    "its attention factor reads s = max_position_embeddings / original_max_position_embeddings")


def _nope_layers(cfg, n_layers, source):
    """Llama 4's NoPE layers: ``no_rope_layers[i] == 0``; empty or absent: every ``no_rope_layer_interval``-th."""
    flags = cfg.get("no_rope_layers") or None
    if flags is None:
        interval = _number(cfg, "no_rope_layer_interval", source, integer=True, default=4)
        if n_layers is None:
            raise _fail(source, "num_hidden_layers", "is required to place Llama 4's NoPE layers")
        flags = [int((i + 1) % interval != 0) for i in range(n_layers)]
    if not isinstance(flags, list) or any(f not in (0, 1) for f in flags):
        raise _fail(source, "no_rope_layers", f"must be a list of 0 and 1, got {flags!r}")
    return tuple(i for i, f in enumerate(flags) if f == 0)


def _llama4_beta(cfg, r, prefix, source):
    """Mistral's ``llama_4_scaling_beta`` (in the RoPE dict, or vLLM's top-level ``llama_4_scaling``), or None."""
    beta = _number(r, "llama_4_scaling_beta", source, prefix, positive=False)
    if beta is not None:
        L = _number(r, "original_max_position_embeddings", source, prefix, integer=True)
        keys = (prefix + "llama_4_scaling_beta", prefix + "original_max_position_embeddings")
    else:
        top = cfg.get("llama_4_scaling")
        if top is None:
            return None
        if not isinstance(top, Mapping):
            raise _fail(source, "llama_4_scaling", f"must be an object, got {top!r}")
        beta = _number(top, "beta", source, "llama_4_scaling.", positive=False)
        L = _number(top, "original_max_position_embeddings", source, "llama_4_scaling.", integer=True)
        keys = ("llama_4_scaling.beta", "llama_4_scaling.original_max_position_embeddings")
    if not beta:
        return None
    if L is None:
        raise _fail(source, keys[1], "is required by `llama_4_scaling_beta` (the length in floor(p / L))")
    return TemperatureRule("llama4", MappingProxyType({"floor_scale": L, "attn_scale": beta}), None, keys, shift=1)


def _temperatures(cfg, n_layers, source, r=None, prefix="rope_scaling."):
    rules = []
    if cfg.get("use_logn_attn"):
        L = _number(cfg, "seq_length", source, integer=True)
        if L is None:
            raise _fail(source, "seq_length", "is required by `use_logn_attn` (Qwen's log_L n uses it as L)")
        rules.append(TemperatureRule("qwen_logn", MappingProxyType({"train_length": L}), None,
                                     ("use_logn_attn", "seq_length")))
    if cfg.get("attn_temperature_tuning"):
        params = {"floor_scale": _number(cfg, "floor_scale", source, integer=True, default=8192),
                  "attn_scale": _number(cfg, "attn_scale", source, positive=False, default=0.1)}
        rules.append(TemperatureRule("llama4", MappingProxyType(params), _nope_layers(cfg, n_layers, source),
                                     ("attn_temperature_tuning", "floor_scale", "attn_scale", "no_rope_layers")))
    beta = _llama4_beta(cfg, r or {}, prefix, source)
    if beta is not None:
        rules.append(beta)
    return tuple(rules)


def _head_dim(cfg, source):
    nope = _number(cfg, "qk_nope_head_dim", source, integer=True)
    rope = _number(cfg, "qk_rope_head_dim", source, integer=True)
    if nope is not None and rope is not None:
        return nope + rope, rope
    d = _number(cfg, "head_dim", source, integer=True)
    if d is None:
        hidden = _number(cfg, "hidden_size", source, integer=True)
        heads = _number(cfg, "num_attention_heads", source, integer=True)
        if hidden is None or heads is None:
            raise _fail(source, "head_dim", "is missing, and so is `hidden_size` or `num_attention_heads`: the config "
                        "has no head dimension")
        if hidden % heads:
            raise _fail(source, "hidden_size", f"must be a multiple of `num_attention_heads` ({heads}), got {hidden}")
        d = hidden // heads
    return d, d


def _set_keys(cfg, rope, prefix):
    top = [k for k in cfg if any(w in k.lower() for w in _SCALE_WORDS) and k not in ("rope_scaling", "rope_parameters")]
    keys = sorted(top) + [prefix + k for k in sorted(rope)]
    known = KNOWN_KEYS | {prefix + k for k in ROPE_NUMBER_KEYS + ROPE_OTHER_KEYS}
    return tuple(keys), tuple(k for k in keys if k not in known)


def _from_hf(cfg, source) -> ModelScaling:
    top = cfg
    if isinstance(cfg.get("text_config"), Mapping):  # multimodal: the language model's keys
        cfg = {**{k: v for k, v in top.items() if k != "text_config"}, **cfg["text_config"]}
    d, rope_dim = _head_dim(cfg, source)
    n_layers = _number(cfg, "num_hidden_layers", source, integer=True)
    base_key, base = "head_dim", 1.0 / math.sqrt(d)
    for key in ("query_pre_attn_scalar", "attention_multiplier", "softmax_scale"):
        v = _number(cfg, key, source)
        if v is not None:
            base_key, base = key, (v ** -0.5 if key == "query_pre_attn_scalar" else v)
            break
    r, prefix = _rope(cfg, source)
    rope = _read_rope(r, prefix, source)
    prf = _number(r, "partial_rotary_factor", source, prefix) or _number(cfg, "partial_rotary_factor", source)
    if prf is not None and prf > 1:
        raise _fail(source, "partial_rotary_factor", f"must be <= 1, got {prf!r}")
    if prf is not None and rope_dim == d:
        rope_dim = int(d * prf)
    top_orig = _number(cfg, "original_max_position_embeddings", source, integer=True)
    rope_orig = rope.original_max_position_embeddings
    if rope_orig is None and top_orig is not None and rope.rope_type != "default":
        rope = dataclasses.replace(rope, original_max_position_embeddings=top_orig)  # as transformers standardizes
    max_pos = _number(cfg, "max_position_embeddings", source, integer=True)
    _check_longrope(rope, max_pos, prefix, source)
    L, L_key = None, ""
    for key, value in ((prefix + "original_max_position_embeddings", rope_orig),
                       ("original_max_position_embeddings", top_orig),
                       ("seq_length", _number(cfg, "seq_length", source, integer=True)),
                       ("max_position_embeddings", max_pos)):
        if value is not None:
            L, L_key = value, key
            break
    set_keys, unknown = _set_keys(cfg, r, prefix)
    if rope.rope_type not in ROPE_TYPES:  # an unknown RoPE type is an unknown key, said first
        type_key = prefix + ("rope_type" if "rope_type" in r else "type")
        unknown = (type_key, *(k for k in unknown if k != type_key))
    model_type = str(top.get("model_type", cfg.get("model_type", "")))
    return ModelScaling(source, "hf", model_type, d, rope_dim, n_layers, base, base_key, L, L_key, max_pos,
                        _number(cfg, "hidden_size", source, integer=True),
                        _number(cfg, "num_attention_heads", source, integer=True), rope,
                        _temperatures(cfg, n_layers, source, r, prefix), set_keys, unknown,
                        bool(cfg.get("use_dynamic_ntk")), _rope_layers(cfg, n_layers, prefix, source), prf)


#: GGUF keys (after ``{arch}.``) the reader reads or knows.
_GGUF_KNOWN = frozenset({"rope.scaling.type", "rope.scaling.factor", "rope.scaling.original_context_length",
                         "rope.scaling.attn_factor", "rope.scaling.yarn_log_multiplier", "rope.freq_base",
                         "rope.dimension_count", "attention.key_length", "attention.value_length",
                         "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
                         "attention.key_length_mla", "attention.value_length_mla"})


def _from_gguf(path, source) -> ModelScaling:
    import gguf

    from ..models.gguf_file import GGUF_MAGIC

    with open(path, "rb") as f:
        if f.read(len(GGUF_MAGIC)) != GGUF_MAGIC:
            raise ValueError(f"`config`: {source} is not a GGUF file")
    try:
        fields = {k: f.contents() for k, f in gguf.GGUFReader(os.fspath(path)).fields.items()
                  if not k.startswith("tokenizer.")}
    except (ValueError, IndexError, KeyError, OverflowError, UnicodeDecodeError) as exc:
        raise ValueError(f"`config`: {source} is a truncated or corrupt GGUF file ({exc})") from None
    arch = fields.get("general.architecture")
    if not isinstance(arch, str):
        raise _fail(source, "general.architecture", "is missing")
    p = arch + "."
    hf = {"model_type": arch}
    top_keys = (("attention.key_length", "head_dim"), ("embedding_length", "hidden_size"),
                ("attention.head_count", "num_attention_heads"), ("block_count", "num_hidden_layers"),
                ("context_length", "max_position_embeddings"))
    rope_keys = (("rope.scaling.type", "rope_type"), ("rope.scaling.factor", "factor"),
                 ("rope.scaling.original_context_length", "original_max_position_embeddings"),
                 ("rope.scaling.attn_factor", "attn_factor"), ("rope.scaling.yarn_log_multiplier", "mscale_all_dim"))
    for gkey, hkey in top_keys:
        if p + gkey in fields:
            hf[hkey] = fields[p + gkey]
    mla_key = next((p + k for k in ("attention.key_length_mla", "attention.key_length") if p + k in fields), None)
    if arch.startswith("deepseek") and mla_key and p + "rope.dimension_count" in fields:  # MLA: nope + rope dims
        hf["qk_rope_head_dim"] = fields[p + "rope.dimension_count"]
        hf["qk_nope_head_dim"] = fields[mla_key] - fields[p + "rope.dimension_count"]
    rope = {}
    for gkey, hkey in rope_keys:
        if p + gkey in fields:
            rope[hkey] = fields[p + gkey]
    if "mscale_all_dim" in rope:
        rope["mscale"] = 1.0  # llama.cpp keeps no mscale and takes it to be 1
    if rope.get("rope_type") in (None, "none"):
        rope = {}
    gguf_name = {**{h: p + g for g, h in top_keys}, **{"rope_scaling." + h: p + g for g, h in rope_keys}}
    try:
        ms = _from_hf({**hf, "rope_scaling": rope or None}, source)
    except ValueError as exc:  # name the key as the file spells it
        msg = str(exc)
        for h, g in gguf_name.items():
            msg = msg.replace(f"`{h}`", f"`{g}`")
        raise ValueError(msg) from None
    keys = sorted(k for k in fields if k.startswith(p) and any(w in k for w in ("rope", "attention", "scal")))
    unknown = tuple(k for k in keys if k[len(p):] not in _GGUF_KNOWN)
    if "rope_scaling.rope_type" in ms.unknown_keys:  # an unknown scaling type, said first
        unknown = (p + "rope.scaling.type", *(k for k in unknown if k != p + "rope.scaling.type"))
    L_key = {"rope_scaling.original_max_position_embeddings": p + "rope.scaling.original_context_length",
             "max_position_embeddings": p + "context_length"}.get(ms.train_length_key, ms.train_length_key)
    return dataclasses.replace(ms, format="gguf", train_length_key=L_key, set_keys=tuple(keys), unknown_keys=unknown)


def read_config(config) -> ModelScaling:
    """Read a model's scaling from a Hugging Face config (path or dict) or a GGUF file.

    Parameters
    ----------
    config : str, os.PathLike or Mapping
        A ``config.json`` path, a ``.gguf`` path (or any file starting with the GGUF magic), or
        the parsed config itself.  A multimodal config's ``text_config`` is read; both
        ``rope_scaling`` and ``rope_parameters`` are read.

    Returns
    -------
    ModelScaling

    Raises
    ------
    ValueError
        Naming the file and the key: a missing or unreadable file, invalid JSON, no head
        dimension, a negative or non-numeric scaling value.

    Examples
    --------
    >>> from softmax_scale.engines import read_config
    >>> ms = read_config({"hidden_size": 4096, "num_attention_heads": 32,
    ...                   "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
    ...                                    "original_max_position_embeddings": 32768}})
    >>> ms.head_dim, ms.train_length, ms.rope.factor
    (128, 32768, 4.0)
    """
    if isinstance(config, Mapping):
        return _from_hf(config, "<dict>")
    if isinstance(config, bytes) or not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"`config` must be a path or a dict, got {type(config).__name__}")
    source = os.fspath(config)
    if not os.path.isfile(source):
        raise ValueError(f"`config`: {source} " + ("is a directory, not a config file" if os.path.isdir(source)
                                                   else "does not exist"))
    from ..models.gguf_file import GGUF_MAGIC

    with open(source, "rb") as f:
        head = f.read(len(GGUF_MAGIC))
    if head == GGUF_MAGIC or source.endswith(".gguf"):
        return _from_gguf(source, source)
    try:
        with open(source, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"`config`: {source} is not valid JSON ({exc})") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"`config`: {source} must hold a JSON object, got {type(data).__name__}")
    return _from_hf(data, source)

"""A model's scaling read from its config: a Hugging Face ``config.json`` (path or dict) or a GGUF file's metadata.

:func:`read_config` returns a :class:`ModelScaling`: the head dimension of ``q.k``, the base
scale, the training length, the RoPE scaling keys and every per-position temperature rule with
the layers it applies to.  Keys are kept as each format spells them: HF keys as transformers
spells them (``rope_scaling.factor``), GGUF keys as llama.cpp does (``llama.rope.scaling.factor``).
A wrapped model (Mistral 3, Gemma 3, Llama 4, vision-language models) is read from its
``text_config``, as the engines read it; ``architectures`` is kept for the engines that dispatch on
it.  A scaling key the reader does not know is listed in :attr:`ModelScaling.unknown_keys`, never
dropped; a malformed config raises one ValueError naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
from collections.abc import Mapping
from types import MappingProxyType

from ._types import (
    KNOWN_KEYS,
    LAYER_TYPES,
    LENGTH_KEYS,
    ROPE_NUMBER_KEYS,
    ROPE_OTHER_KEYS,
    ROPE_TYPES,
    ModelScaling,
    RopeScaling,
    TemperatureRule,
)
from .gguf_config import GGUF_MAGIC, read_gguf

__all__ = ["ModelScaling", "RopeScaling", "TemperatureRule", "read_config"]

#: Substrings that mark a top-level key as bearing on the scale (an unknown one is listed).
_SCALE_WORDS = ("scal", "rope", "rotary", "logn", "temperature", "mscale", "softmax", "attn_factor",
                "attention_factor", "multiplier")


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


def _architectures(cfg, source) -> tuple:
    archs = cfg.get("architectures")
    if archs is None:
        return ()
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise _fail(source, "architectures", f"must be a list of class names, got {archs!r}")
    return tuple(archs)


def _unknown_layer_types(cfg, source) -> tuple:
    """``layer_types`` entries no engine rule here knows (:data:`~._types.LAYER_TYPES`), each once, as keys to list."""
    types = cfg.get("layer_types")
    if types is None:
        return ()
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise _fail(source, "layer_types", f"must be a list of strings, got {types!r}")
    return tuple(f"layer_types entry {t!r}" for t in dict.fromkeys(types) if t not in LAYER_TYPES)


def _from_hf(cfg, source) -> ModelScaling:
    top, wrapper = cfg, ""
    text = cfg.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise _fail(source, "text_config", f"must be an object (the language model's config, read in place of the "
                    f"top level's), got {type(text).__name__} {text!r}")
    if text is not None:  # a wrapped model: the language model's keys, as the engines read them
        cfg = {**{k: v for k, v in top.items() if k != "text_config"}, **text}
        wrapper = str(top.get("model_type", ""))
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
    unknown += _unknown_layer_types(cfg, source)
    model_type = str(cfg.get("model_type", ""))
    return ModelScaling(source, "hf", model_type, d, rope_dim, n_layers, base, base_key, L, L_key, max_pos,
                        _number(cfg, "hidden_size", source, integer=True),
                        _number(cfg, "num_attention_heads", source, integer=True), rope,
                        _temperatures(cfg, n_layers, source, r, prefix), set_keys, unknown,
                        bool(cfg.get("use_dynamic_ntk")), _rope_layers(cfg, n_layers, prefix, source), prf,
                        _architectures(top, source), prefix[:-1] if r else "", wrapper)


def read_config(config) -> ModelScaling:
    """Read a model's scaling from a Hugging Face config (path or dict) or a GGUF file.

    Parameters
    ----------
    config : str, os.PathLike or Mapping
        A ``config.json`` path, a ``.gguf`` path (or any file starting with the GGUF magic), or
        the parsed config itself.  A wrapped config's ``text_config`` is read (its ``model_type``
        is the model's; the top-level one is :attr:`ModelScaling.wrapper`); both ``rope_scaling``
        and ``rope_parameters`` are read.

    Returns
    -------
    ModelScaling

    Raises
    ------
    ValueError
        Naming the file and the key: a missing or unreadable file, invalid JSON, a ``text_config``
        that is not an object, no head dimension, a negative or non-numeric scaling value.

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
    with open(source, "rb") as f:
        head = f.read(len(GGUF_MAGIC))
    if head == GGUF_MAGIC or source.endswith(".gguf"):
        return read_gguf(source, source, _from_hf)
    try:
        with open(source, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"`config`: {source} is not valid JSON ({exc})") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"`config`: {source} must hold a JSON object, got {type(data).__name__}")
    return _from_hf(data, source)

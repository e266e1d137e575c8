"""A GGUF file's metadata read as the config it was converted from: :func:`read_gguf`.

GGUF keys are kept as llama.cpp spells them (``llama.rope.scaling.factor``); the scaling keys are
mapped onto the Hugging Face keys they were converted from, read by the HF reader, and every error
names the key as the file spells it.
"""

from __future__ import annotations

import dataclasses
import os

__all__ = ["GGUF_MAGIC", "read_gguf"]

#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"

#: GGUF keys (after ``{arch}.``) the reader reads or knows.
_GGUF_KNOWN = frozenset({"rope.scaling.type", "rope.scaling.factor", "rope.scaling.original_context_length",
                         "rope.scaling.attn_factor", "rope.scaling.yarn_log_multiplier", "rope.freq_base",
                         "rope.dimension_count", "attention.key_length", "attention.value_length",
                         "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
                         "attention.key_length_mla", "attention.value_length_mla"})


def read_gguf(path, source, from_hf):
    """Read a GGUF file's scaling keys into a :class:`~._types.ModelScaling` through ``from_hf(config, source)``.

    ``from_hf`` is the HF reader; ValueError naming the file (not a GGUF file, truncated or corrupt)
    or the GGUF key.
    """
    import gguf

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
        raise ValueError(f"`config`: {source}: `general.architecture` is missing")
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
        ms = from_hf({**hf, "rope_scaling": rope or None}, source)
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

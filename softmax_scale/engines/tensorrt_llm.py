"""TensorRT-LLM (PyTorch backend): the multiplier on ``q.k`` as ``RopeParams`` and the model files build it.

``RopeParams.from_config`` reads ``factor``, ``mscale`` (default 1) and ``mscale_all_dim`` (default
0); ``create_sinusoidal_positions_yarn`` multiplies cos/sin by ``get_mscale(factor, mscale) /
get_mscale(factor, mscale_all_dim)``: ``attention_factor`` is not read.  LongRoPE's cos/sin are
multiplied by ``sqrt(1 + ln s / ln L)``, ``s = max_position_embeddings / L``.  Llama 4's attention
multiplies the query on its NoPE layers (``no_rope_layers[i] == 0``) by
``log(floor((p + 1) / floor_scale) + 1) attn_scale + 1``.  Qwen (v1)'s ``use_logn_attn`` is read as the
TensorRT backend reads it (``logn_scaling``, :data:`RULES` ``"qwen_logn"``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._rules import NEWEST, Rule, compose, longrope_sq, mscale_sq

__all__ = ["NAME", "RULES", "scale"]

NAME = "tensorrt-llm"
_REPO = "NVIDIA/TensorRT-LLM"
_PARAMS = (_REPO, "tensorrt_llm/_torch/attention_backend/interface.py", "000a01de66f0eab4ab05640711f0253f50f5209c")
_FUNC = (_REPO, "tensorrt_llm/functional.py", "0071496dc625910229bf433821453636ef3770eb")

RULES = {
    "rope_params": Rule("rope_params", "RopeParams.from_config: scale = `factor`, mscale = `mscale` (default 1), "
                        "mscale_all_dim = `mscale_all_dim` (default 0), original_max_positions = "
                        "`original_max_position_embeddings` (default 1024); rotary dim = head_dim x "
                        "`partial_rotary_factor` (or `qk_rope_head_dim`)", *_PARAMS),
    "yarn": Rule("yarn", "cos/sin x get_mscale(scale, mscale) / get_mscale(scale, mscale_all_dim) "
                 "(create_sinusoidal_positions_yarn); `attention_factor` and `attn_factor` are not read", *_FUNC,
                 scheme="deepseek_yarn", squared=True),
    "longrope": Rule("longrope", "cos/sin x sqrt(1 + ln s / ln L), s = max_position_embeddings / L "
                     "(create_sinusoidal_positions_long_rope); `attention_factor` not read", *_FUNC,
                     scheme="longrope", squared=True),
    "llama4_temperature": Rule("llama4_temperature", "Llama4Attention: query x (log(floor((p + 1) / `floor_scale`) + "
                               "1) x `attn_scale` + 1) on layers with no_rope_layers[i] == 0, when "
                               "`attn_temperature_tuning` (added by TensorRT-LLM PR #3491; absent at "
                               "012cf9099ed6935c6b42a7b4c91356cbfa81b442, its release not read)", _REPO,
                               "tensorrt_llm/_torch/models/modeling_llama.py",
                               "3a5901cd0d77bed18baaf402d1d12fab468d44a9",
                               positions="p = position_ids (0-based): floor((p + 1)/floor_scale) = floor(n/floor_scale)",
                               scheme="llama4"),
    "qwen_logn": Rule("qwen_logn", "TensorRT backend (trtllm-build engines): Attention registers "
                      "`generate_logn_scaling(self.max_seqlen_for_logn_scaling, self.max_position_embeddings)` as "
                      "gpt_attention's `logn_scaling` input (\"applied to q\"): `logn_list = [math.log(i, "
                      "seq_length) if i > seq_length else 1 for i in range(1, max_position_embeddings + 1)]`; the "
                      "Qwen model passes `use_logn_scaling=config.use_logn_attn` and "
                      "`max_seqlen_for_logn_scaling=config.seq_length` and the generation kernel reads `logn_scale = "
                      "params.logn_scaling_ptr[tlength];` (both found by the index's string search without a "
                      "commit); past `max_position_embeddings` the table has no entry (not modelled: unknown). The "
                      "PyTorch backend's handling of `use_logn_attn` was not read", *_FUNC,
                      positions="tlength = the 0-based position p: logn_list[p] = log_L(p + 1) = log_L(n)",
                      scheme="qwen_logn"),
}


def scale(ms, n, version=None):
    """The multiplier TensorRT-LLM puts on ``q.k`` at ``n`` keys (its rules carry no ranges: ``version`` is only the label)."""
    label = NEWEST if version is None else str(version)
    r, notes, rules, rope_sq = ms.rope, [], ["rope_params"], 1.0
    if ms.has_mla_head or ms.base_key != "head_dim":
        return compose(NAME, ms, n, base=ms.base_scale, rope_sq=None, version=label,
                       notes=["its MLA and base-scale handling were not read"])
    if r.rope_type == "yarn":
        m = 1.0 if r.mscale is None else r.mscale
        mad = 0.0 if r.mscale_all_dim is None else r.mscale_all_dim
        rope_sq = mscale_sq(r.factor, m) / mscale_sq(r.factor, mad)
        notes += [f"drops `{k}`" for k in ("attention_factor", "attn_factor") if getattr(r, k) is not None]
        rules.append("yarn")
    elif r.rope_type == "longrope":
        L = r.original_max_position_embeddings or 1024
        rope_sq = longrope_sq(ms.max_position_embeddings / L, L)
        if r.attention_factor is not None:
            notes.append("drops `attention_factor`")
        rules.append("longrope")
    temps = [t for t in ms.temperatures if t.name in ("llama4_temperature", "qwen_logn")]
    rules += [t.name for t in temps]
    unread = [t for t in ms.temperatures if t not in temps]
    if any(t.name == "qwen_logn" for t in temps):
        notes.append("`use_logn_attn` as the TensorRT backend applies it (the PyTorch backend's was not read)")
    e = compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, temps=temps, notes=notes, rules=rules,
                version=label, reads_layer_types=False, unread_temps=unread)
    cap = ms.max_position_embeddings
    if e.scale is not None and cap and "qwen_logn" in rules and np.any(e.n > cap):
        e = dataclasses.replace(e, scale=np.where(e.n > cap, np.nan, e.scale), notes=(
            *e.notes, f"unknown past max_position_embeddings = {cap}: the logn table has no entry there"))
    return e

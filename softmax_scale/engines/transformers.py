"""Hugging Face transformers: the multiplier on ``q.k`` as its RoPE utilities and model files compute it.

``modeling_rope_utils.py`` returns ``(inv_freq, attention_factor)`` per RoPE type
(``ROPE_INIT_FUNCTIONS``); ``attention_factor`` multiplies cos and sin, so it counts squared on
the logits.  DeepSeek's attention multiplies its softmax scale by ``get_mscale(s, mscale_all_dim)^2``;
Llama 4 multiplies the query on its NoPE layers.
"""

from __future__ import annotations

from ._rules import Rule, compose, longrope_sq, mscale_sq

__all__ = ["NAME", "RULES", "scale"]

NAME = "transformers"
_ROPE = ("zucchini-nlp/transformers (a fork of huggingface/transformers)", "src/transformers/modeling_rope_utils.py",
         "26892c16b782513fdf938920653228ef63a19d7d")
_DSV3 = ("huggingface/transformers", "src/transformers/models/deepseek_v3/modeling_deepseek_v3.py",
         "f5a9ec512fa9fe69e51ea0c6388c68d50de567b3")
_LLAMA4 = ("huggingface/transformers", "src/transformers/models/llama4/modeling_llama4.py",
           "63210d0e3b74c2119b7998ff65bc6a2729283626")

RULES = {
    "base": Rule("base", "scaling = head_dim^-1/2 (Llama 4), qk_head_dim^-1/2 = (qk_nope_head_dim + qk_rope_head_dim)"
                 "^-1/2 (DeepSeek-V3, read at the commit of its file); Gemma's query_pre_attn_scalar^-1/2 was not read "
                 "here", *_LLAMA4),
    "yarn": Rule("yarn", "cos/sin x `attention_factor`; if unset, get_mscale(s, `mscale`)/get_mscale(s, "
                 "`mscale_all_dim`) when both are set, else get_mscale(s) = 0.1 ln s + 1; s = `factor` "
                 "(max_position_embeddings / original_max_position_embeddings when `factor` is unset)",
                 *_ROPE, scheme="deepseek_yarn", squared=True),
    "longrope": Rule("longrope", "cos/sin x `attention_factor`; if unset sqrt(1 + ln s / ln L), s = `factor` or "
                     "max_position_embeddings / L, L = `original_max_position_embeddings`",
                     *_ROPE, scheme="longrope", squared=True),
    "deepseek_softmax": Rule("deepseek_softmax", "softmax scale qk_head_dim^-1/2 x get_mscale(`factor`, "
                             "`mscale_all_dim`)^2 when `mscale_all_dim` is set (whole q.k, nope and rope dims)",
                             *_DSV3, scheme="deepseek_yarn"),
    "llama4_temperature": Rule("llama4_temperature", "query x log(floor((p + 1) / `floor_scale`) + 1) x `attn_scale` "
                               "+ 1 on layers with no_rope_layers[i] == 0, when `attn_temperature_tuning`",
                               *_LLAMA4, positions="p = cache_position (0-based): floor((p + 1)/floor_scale) = "
                               "floor(n/floor_scale)", scheme="llama4"),
    "qwen_logn": Rule("qwen_logn", "no native Qwen (v1) class (huggingface/transformers has no src/transformers/"
                      "models/qwen/): `use_logn_attn` is applied only by the model's remote code "
                      "(trust_remote_code=True), the file read here, as the reference",
                      "zhangningboo/Qwen-7B (a mirror of the Hub's Qwen/Qwen-7B remote code)", "modeling_qwen.py",
                      "1ff20863b9e9c48b1550d42837331cb55ddfb4e0", positions="as the reference", scheme="qwen_logn"),
}

#: Model types whose attention applies DeepSeek's softmax-scale term.
DEEPSEEK_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek2"})


def yarn_sq(ms) -> float:
    """The YaRN attention factor squared (:data:`RULES` ``"yarn"``)."""
    r = ms.rope
    s = r.factor if r.factor is not None else ms.max_position_embeddings / r.original_max_position_embeddings
    if r.attention_factor is not None:
        return r.attention_factor ** 2
    if r.mscale and r.mscale_all_dim:
        return mscale_sq(s, r.mscale) / mscale_sq(s, r.mscale_all_dim)
    return mscale_sq(s, 1.0)


def longrope_factor_sq(ms) -> float:
    """The LongRoPE attention factor squared (:data:`RULES` ``"longrope"``)."""
    r = ms.rope
    L = r.original_max_position_embeddings or ms.max_position_embeddings
    if r.attention_factor is not None:
        return r.attention_factor ** 2
    s = r.factor if r.factor is not None else ms.max_position_embeddings / L
    return longrope_sq(s, L)


def deepseek_softmax_sq(ms) -> float:
    """DeepSeek's softmax-scale factor (:data:`RULES` ``"deepseek_softmax"``)."""
    r = ms.rope
    if ms.model_type not in DEEPSEEK_TYPES or r.rope_type == "default" or not r.mscale_all_dim:
        return 1.0
    return mscale_sq(r.factor, r.mscale_all_dim)


def rope_rules(ms, reads_logn: bool):
    """The parts shared by transformers and the reference: ``(rope_sq, softmax_sq, temps, rules)``."""
    kind, rules = ms.rope.rope_type, []
    rope_sq = 1.0
    if kind == "yarn":
        rope_sq, rules = yarn_sq(ms), ["yarn"]
    elif kind == "longrope":
        rope_sq, rules = longrope_factor_sq(ms), ["longrope"]
    softmax_sq = deepseek_softmax_sq(ms)
    if softmax_sq != 1.0:
        rules.append("deepseek_softmax")
    temps = [t for t in ms.temperatures if t.scheme == "llama4" or (reads_logn and t.scheme == "qwen_logn")]
    rules += [{"llama4": "llama4_temperature", "qwen_logn": "qwen_logn"}[t.scheme] for t in temps]
    return rope_sq, softmax_sq, temps, rules


def scale(ms, n):
    """The multiplier transformers puts on ``q.k`` at ``n`` keys (an :class:`~._rules.EngineScale`)."""
    rope_sq, softmax_sq, temps, rules = rope_rules(ms, reads_logn=True)
    notes = ["`use_logn_attn` only through the model's remote code"] if any(t.scheme == "qwen_logn" for t in temps) else []
    if ms.rope.attn_factor is not None and ms.format == "hf" and ms.rope.rope_type in ("yarn", "longrope"):
        notes.append("ignores `attn_factor` (reads `attention_factor`)")
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=temps,
                   notes=notes, rules=["base", *rules])

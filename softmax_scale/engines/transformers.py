"""Hugging Face transformers: the multiplier on ``q.k`` as its RoPE utilities and model files compute it.

``modeling_rope_utils.py`` returns ``(inv_freq, attention_factor)`` per RoPE type
(``ROPE_INIT_FUNCTIONS``); ``attention_factor`` multiplies cos and sin, so it counts squared on
the logits.  DeepSeek's attention multiplies its softmax scale by ``get_mscale(s, mscale_all_dim)^2``;
Llama 4 multiplies the query on its NoPE layers; Ministral 3 multiplies it by
``1 + beta ln(1 + floor(p / original_max_position_embeddings))`` on every layer.  YaRN's ``s`` changed
between releases (``RULES`` rows of family ``yarn``): the lengths' ratio before 4.56.0, ``factor`` from it
(transformers 5 included).
"""

from __future__ import annotations

from ._rules import NEWEST, Rule, compose, lengths_s, longrope_sq, mscale_sq, pick, unknown

__all__ = ["NAME", "RULES", "scale"]

NAME = "transformers"
_ROPE = ("zucchini-nlp/transformers (a fork of huggingface/transformers)", "src/transformers/modeling_rope_utils.py",
         "26892c16b782513fdf938920653228ef63a19d7d")
_DSV3 = ("huggingface/transformers", "src/transformers/models/deepseek_v3/modeling_deepseek_v3.py",
         "f5a9ec512fa9fe69e51ea0c6388c68d50de567b3")
_LLAMA4 = ("huggingface/transformers", "src/transformers/models/llama4/modeling_llama4.py",
           "63210d0e3b74c2119b7998ff65bc6a2729283626")
_MINISTRAL3 = ("huggingface/transformers", "src/transformers/models/ministral3/modeling_ministral3.py",
               "430bd51d2602a07aeea549a5f3a5491aafa4a43a")

RULES = {
    "base": Rule("base", "scaling = head_dim^-1/2 (Llama 4), qk_head_dim^-1/2 = (qk_nope_head_dim + qk_rope_head_dim)"
                 "^-1/2 (DeepSeek-V3, read at the commit of its file); Gemma's query_pre_attn_scalar^-1/2 was not read "
                 "here", *_LLAMA4),
    "yarn": Rule("yarn", "cos/sin x `attention_factor`; if unset, get_mscale(s, `mscale`)/get_mscale(s, "
                 "`mscale_all_dim`) when both are set, else get_mscale(s) = 0.1 ln s + 1; s = `factor` "
                 "(max_position_embeddings / original_max_position_embeddings when `factor` is unset)",
                 *_ROPE, scheme="deepseek_yarn", squared=True, versions=">=4.56.0",
                 source="PR #40320, first in 4.56.0: the same lines in the PyPI wheels 4.56.0, 4.57.0, 5.0.0 and "
                 "5.25.0 (`factor = rope_parameters_dict[\"factor\"]` from 5.0.0, `config.rope_scaling[\"factor\"]` "
                 "before), while 4.55.0's takes s from the lengths"),
    "yarn_s_from_lengths": Rule("yarn_s_from_lengths", "cos/sin x `attention_factor`; if unset get_mscale(s) = 0.1 ln s + "
                                "1 with s = max_position_embeddings / `original_max_position_embeddings` whenever the "
                                "latter is set (`factor` read only without it); its handling of `mscale` and "
                                "`mscale_all_dim` was not read (the text quoted in transformers issue #38224 at this "
                                "commit; the release that took PR #40320 was not read)", "huggingface/transformers",
                                "src/transformers/modeling_rope_utils.py", "f022bf93220d2c19df68647b4ddcfc5b0e91d011",
                                scheme="deepseek_yarn", squared=True, versions=">=4.51.0,<4.53",
                                source="held at 4.51.0 (Qwen3's) and on main in May 2025", family="yarn"),
    "yarn_s_from_lengths_ratio": Rule("yarn_s_from_lengths_ratio", "cos/sin x `attention_factor`; if unset "
                                      "get_mscale(s, `mscale`) / get_mscale(s, `mscale_all_dim`) when both are set, "
                                      "else get_mscale(s); `if \"original_max_position_embeddings\" in "
                                      "config.rope_scaling: ... factor = config.max_position_embeddings / "
                                      "original_max_position_embeddings` (read in the PyPI wheels 4.53.0 and 4.55.0, "
                                      "_compute_yarn_parameters; commit not recorded)", "huggingface/transformers",
                                      "src/transformers/modeling_rope_utils.py", "", scheme="deepseek_yarn",
                                      squared=True, versions=">=4.53.0,<4.56.0",
                                      source="the 4.53.0 and 4.55.0 wheels; ended by PR #40320 (4.56.0)",
                                      family="yarn"),
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
    "llama_4_scaling_beta": Rule("llama_4_scaling_beta", "Ministral3Attention: query x (1 + `llama_4_scaling_beta` "
                                 "ln(1 + floor(p / `original_max_position_embeddings`))) on every layer, both read "
                                 "from rope_parameters (model_type ministral3)", *_MINISTRAL3,
                                 positions="p = cache_position (0-based): floor(p / L) = floor((n - 1) / L)",
                                 scheme="llama4"),
    "qwen_logn": Rule("qwen_logn", "no native Qwen (v1) class (huggingface/transformers has no src/transformers/"
                      "models/qwen/): `use_logn_attn` is applied only by the model's remote code "
                      "(trust_remote_code=True), the file read here, as the reference",
                      "zhangningboo/Qwen-7B (a mirror of the Hub's Qwen/Qwen-7B remote code)", "modeling_qwen.py",
                      "1ff20863b9e9c48b1550d42837331cb55ddfb4e0", positions="as the reference", scheme="qwen_logn"),
}

#: Model types whose attention applies DeepSeek's softmax-scale term.
DEEPSEEK_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek2"})


#: Model types whose transformers model file applies ``llama_4_scaling_beta`` (:data:`RULES`).
BETA_TYPES = frozenset({"ministral3"})


def yarn_sq(ms, rule="yarn", notes=None) -> float | None:
    """The YaRN attention factor squared under the :data:`RULES` row ``rule``; ``None`` where that row was not read for these keys.

    ``notes`` (a list) gets the departures of the row from the reference.
    """
    r = ms.rope
    if rule in ("yarn_s_from_lengths", "yarn_s_from_lengths_ratio"):
        if r.attention_factor is not None:
            return r.attention_factor ** 2
        ratio = rule == "yarn_s_from_lengths_ratio"
        if not ratio and (r.mscale is not None or r.mscale_all_dim is not None):
            return None
        s = lengths_s(ms, [] if notes is None else notes)
        if ratio and r.mscale and r.mscale_all_dim:
            return mscale_sq(s, r.mscale) / mscale_sq(s, r.mscale_all_dim)
        return mscale_sq(s, 1.0)
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


def rope_rules(ms, reads_logn: bool, yarn_rule: str = "yarn", notes=None):
    """The parts shared by transformers and the reference: ``(rope_sq, softmax_sq, temps, rules)``; departures to ``notes``."""
    kind, rules = ms.rope.rope_type, []
    rope_sq = 1.0
    if kind == "yarn":
        rope_sq, rules = yarn_sq(ms, yarn_rule, notes), [yarn_rule]
    elif kind == "longrope":
        rope_sq, rules = longrope_factor_sq(ms), ["longrope"]
    softmax_sq = deepseek_softmax_sq(ms)
    if softmax_sq != 1.0:
        rules.append("deepseek_softmax")
    temps = [t for t in ms.temperatures if t.name == "llama4_temperature" or (reads_logn and t.name == "qwen_logn")]
    rules += [t.name for t in temps]
    return rope_sq, softmax_sq, temps, rules


def beta_rules(ms):
    """Mistral's ``llama_4_scaling_beta``: ``(temps, unread, rules)``, applied for :data:`BETA_TYPES`, unread otherwise."""
    beta = [t for t in ms.temperatures if t.name == "llama_4_scaling_beta"]
    if not beta:
        return [], [], []
    if ms.model_type in BETA_TYPES:
        return beta, [], ["llama_4_scaling_beta"]
    return [], beta, []


def scale(ms, n, version=None):
    """The multiplier transformers puts on ``q.k`` at ``n`` keys (an :class:`~._rules.EngineScale`).

    ``version``: a :class:`packaging.version.Version`, or ``None`` for the newest known rules.
    """
    label = NEWEST if version is None else str(version)
    yarn = pick(RULES, "yarn", version) if ms.rope.rope_type == "yarn" else None
    if ms.rope.rope_type == "yarn" and yarn is None:
        return unknown(NAME, n, label, "yarn")
    departures = []
    rope_sq, softmax_sq, temps, rules = rope_rules(ms, reads_logn=True, yarn_rule=yarn.name if yarn else "yarn",
                                                   notes=departures)
    if rope_sq is None:
        return unknown(NAME, n, label, "yarn", ("its reading of `mscale`/`mscale_all_dim` at that version",))
    beta, unread, beta_names = beta_rules(ms)
    notes = ["`use_logn_attn` only through the model's remote code"] if any(t.scheme == "qwen_logn" for t in temps) else []
    if ms.rope.attn_factor is not None and ms.format == "hf" and ms.rope.rope_type in ("yarn", "longrope"):
        notes.append("ignores `attn_factor` (reads `attention_factor`)")
    notes += departures
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=[*temps, *beta],
                   notes=notes, rules=["base", *rules, *beta_names], version=label, unread_temps=unread)

"""The model authors' reference: the rule each family's own modeling code applies.

Qwen (v1) ships ``modeling_qwen.py`` as remote code (``use_logn_attn``: the query times
``max(1, log_L i)``, ``i`` the 1-based position, ``L = seq_length``); DeepSeek-V3, Llama 4 and the
YaRN/LongRoPE families publish through transformers, whose model files are their reference;
Gemma's ``query_pre_attn_scalar`` replaces the head dimension in ``1/sqrt(.)``.  Mistral's configs
say what their authors apply: ``llama_4_scaling_beta`` (Ministral 3, Mistral Large 3, Devstral 2) on
every layer, and ``apply_yarn_scaling: false`` (Mistral's ``apply_scale: false``) for YaRN's
frequencies without its magnitude factor.
"""

from __future__ import annotations

import dataclasses

from . import transformers as _tf
from ._rules import NEWEST, Rule, compose

__all__ = ["NAME", "RULES", "scale"]

NAME = "reference"

RULES = {
    "qwen_logn": Rule("qwen_logn", "query x max(1, log_L i), i = 1..32767 the 1-based position, L = `seq_length`, "
                      "when `use_logn_attn`, the number of keys exceeds L and not training",
                      "zhangningboo/Qwen-7B (a mirror of the Hub's Qwen/Qwen-7B remote code)", "modeling_qwen.py",
                      "1ff20863b9e9c48b1550d42837331cb55ddfb4e0",
                      positions="query row p (0-based) x logn_list[p] = log_L(p + 1) if p + 1 > L else 1: i = n = p + 1",
                      scheme="qwen_logn"),
    **{k: dataclasses.replace(v, versions="", source="") for k, v in _tf.RULES.items()
       if k not in ("qwen_logn", "yarn_s_from_lengths", "yarn_s_from_lengths_ratio", "llama_4_scaling_beta")},
    "llama_4_scaling_beta": dataclasses.replace(
        _tf.RULES["llama_4_scaling_beta"], text="query x (1 + `llama_4_scaling_beta` ln(1 + floor(p / "
        "`original_max_position_embeddings`))) on every layer, whatever the model type (Mistral's `llama_4_scaling` "
        "in params.json; the file read is transformers' Ministral3Attention)"),
    "no_yarn_scale": Rule("no_yarn_scale", "`apply_yarn_scaling` false (Mistral's `apply_scale: false`): YaRN's "
                          "frequencies without a factor on cos/sin, as Mistral-Large-3's params.json asks (quoted in "
                          "vLLM PR #57563; the authors' code was not read)", "", "", ""),
}


def scale(ms, n, version=None):
    """The multiplier the model authors' code puts on ``q.k`` at ``n`` keys (``version`` is not read: one reference)."""
    rope_sq, softmax_sq, temps, rules = _tf.rope_rules(ms, reads_logn=True)
    if ms.rope.rope_type == "yarn" and ms.rope.values.get("apply_yarn_scaling") is False:
        rope_sq, rules = 1.0, ["no_yarn_scale", *rules[1:]]
    beta = [t for t in ms.temperatures if t.name == "llama_4_scaling_beta"]
    rules += ["llama_4_scaling_beta"] * bool(beta)
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=[*temps, *beta],
                   rules=["base", *rules], version=NEWEST)

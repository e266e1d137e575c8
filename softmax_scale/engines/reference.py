"""The model authors' reference: the rule each family's own modeling code applies.

Qwen (v1) ships ``modeling_qwen.py`` as remote code (``use_logn_attn``: the query times
``max(1, log_L i)``, ``i`` the 1-based position, ``L = seq_length``); DeepSeek-V3, Llama 4 and the
YaRN/LongRoPE families publish through transformers, whose model files are their reference;
Gemma's ``query_pre_attn_scalar`` replaces the head dimension in ``1/sqrt(.)``.
"""

from __future__ import annotations

from . import transformers as _tf
from ._rules import Rule, compose

__all__ = ["NAME", "RULES", "scale"]

NAME = "reference"

RULES = {
    "qwen_logn": Rule("qwen_logn", "query x max(1, log_L i), i = 1..32767 the 1-based position, L = `seq_length`, "
                      "when `use_logn_attn`, the number of keys exceeds L and not training",
                      "zhangningboo/Qwen-7B (a mirror of the Hub's Qwen/Qwen-7B remote code)", "modeling_qwen.py",
                      "1ff20863b9e9c48b1550d42837331cb55ddfb4e0",
                      positions="query row p (0-based) x logn_list[p] = log_L(p + 1) if p + 1 > L else 1: i = n = p + 1",
                      scheme="qwen_logn"),
    **{k: v for k, v in _tf.RULES.items() if k != "qwen_logn"},
}


def scale(ms, n):
    """The multiplier the model authors' code puts on ``q.k`` at ``n`` keys."""
    rope_sq, softmax_sq, temps, rules = _tf.rope_rules(ms, reads_logn=True)
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=temps,
                   rules=["base", *rules])

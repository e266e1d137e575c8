"""mlx-lm: the multiplier on ``q.k`` as ``rope_utils.initialize_rope`` and the model files build it.

``YarnRoPE`` (``yarn``, ``deepseek_yarn``, ``telechat3-yarn``) multiplies the rotated part of the
query and the key by ``get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)`` (defaults 1 and 0),
``s = factor``: ``attention_factor`` is not read (mlx-lm PR #1507, not merged).  ``SuScaledRoPE``
(LongRoPE) multiplies them by ``long_mscale`` or ``sqrt(1 + ln s / ln L)``, ``s =
max_position_embeddings / L``, and always uses ``long_factor``.  Ministral 3 multiplies the query by
``1 + beta ln(1 + floor(p / L))``; Llama 4 puts its temperature on every 4th layer.
"""

from __future__ import annotations

from ._rules import NEWEST, Rule, compose, every_fourth, longrope_sq, mscale_sq

__all__ = ["NAME", "RULES", "scale"]

NAME = "mlx-lm"
_REPO = "ml-explore/mlx-lm"
_ROPE = (_REPO, "mlx_lm/models/rope_utils.py", "13425df69fdf066ed84d8f1bbdc8182a7576740d")

RULES = {
    "base": Rule("base", "scale = head_dim^-1/2 (Ministral 3, Llama 4); Gemma 3 query_pre_attn_scalar^-1/2", _REPO,
                 "mlx_lm/models/gemma3_text.py", "b343a0556fe72e5f37aa988150a8938f92382eb5"),
    "yarn": Rule("yarn", "q and k (their first `dims` dimensions) x get_mscale(`factor`, `mscale`) / get_mscale("
                 "`factor`, `mscale_all_dim`), defaults 1 and 0; `attention_factor` and `attn_factor` are not read",
                 *_ROPE, scheme="deepseek_yarn", squared=True),
    "longrope": Rule("longrope", "q and k x `long_mscale`, else sqrt(1 + ln s / ln L), s = max_position_embeddings / "
                     "L, L = `original_max_position_embeddings`; `long_factor` at every length (`short_factor` and "
                     "`short_mscale` unused); `attention_factor` not read", *_ROPE, scheme="longrope", squared=True),
    "deepseek_softmax": Rule("deepseek_softmax", "DeepSeek-V3: scale = q_head_dim^-1/2 x (0.1 `mscale_all_dim` "
                             "ln(`factor`) + 1)^2 when `mscale_all_dim` is set", _REPO,
                             "mlx_lm/models/deepseek_v3.py", "f18526f8d66f74728072e96d55acb6c451e92e88",
                             scheme="deepseek_yarn"),
    "llama_4_scaling_beta": Rule("llama_4_scaling_beta", "Ministral 3: query x (1 + `llama_4_scaling_beta` ln(1 + "
                                 "floor((offset + i) / `original_max_position_embeddings`))), both read from "
                                 "rope_parameters, every layer", _REPO, "mlx_lm/models/ministral3.py",
                                 "edbf61dd8b0bfdc499909bb5d8d4962ffb41cf35",
                                 positions="offset + i 0-based: floor(p / L) = floor((n - 1) / L)", scheme="llama4"),
    "llama4_temperature": Rule("llama4_temperature", "Llama 4: query x (log(floor((offset + i + 1) / `floor_scale`) + "
                               "1) x `attn_scale` + 1) on layers with (i + 1) % 4 == 0, `no_rope_layers` not read",
                               _REPO, "mlx_lm/models/llama4.py", "edbf61dd8b0bfdc499909bb5d8d4962ffb41cf35",
                               positions="offset + i + 1 = n", scheme="llama4"),
}

#: Model types whose mlx-lm model file applies DeepSeek's softmax-scale term.
DEEPSEEK_TYPES = frozenset({"deepseek_v3"})
_YARN_TYPES = ("yarn", "deepseek_yarn", "telechat3-yarn")


def scale(ms, n, version=None):
    """The multiplier mlx-lm puts on ``q.k`` at ``n`` keys (its rules carry no ranges: ``version`` is only the label)."""
    label = NEWEST if version is None else str(version)
    r, notes, rules, rope_sq, softmax_sq = ms.rope, [], ["base"], 1.0, 1.0
    if any(t.name == "qwen_logn" for t in ms.temperatures) or (ms.has_mla_head and ms.model_type not in DEEPSEEK_TYPES):
        return compose(NAME, ms, n, base=ms.base_scale, rope_sq=None, version=label,
                       notes=["its model file for this config was not read"])
    if r.rope_type in _YARN_TYPES:
        m = 1.0 if r.mscale is None else r.mscale
        mad = 0.0 if r.mscale_all_dim is None else r.mscale_all_dim
        rope_sq = mscale_sq(r.factor, m) / mscale_sq(r.factor, mad)
        notes += [f"drops `{k}`" for k in ("attention_factor", "attn_factor") if getattr(r, k) is not None]
        rules.append("yarn")
        if ms.model_type in DEEPSEEK_TYPES and r.mscale_all_dim:
            softmax_sq = mscale_sq(r.factor, r.mscale_all_dim)
            rules.append("deepseek_softmax")
    elif r.rope_type == "longrope":
        L = r.original_max_position_embeddings or ms.max_position_embeddings
        long_mscale = r.values.get("long_mscale")
        rope_sq = long_mscale ** 2 if long_mscale else longrope_sq(ms.max_position_embeddings / L, L)
        if r.attention_factor is not None:
            notes.append("drops `attention_factor`")
        rules.append("longrope")
    temps = [t for t in ms.temperatures if t.name in ("llama_4_scaling_beta", "llama4_temperature")]
    rules += sorted({t.name for t in temps})
    temps = every_fourth(ms, temps, notes)
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=temps, notes=notes,
                   rules=rules, version=label, reads_layer_types=False)

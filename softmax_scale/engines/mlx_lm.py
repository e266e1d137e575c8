"""mlx-lm: the multiplier on ``q.k`` as ``rope_utils.initialize_rope`` and the model files build it.

``YarnRoPE`` (``yarn``, ``deepseek_yarn``, ``telechat3-yarn``) multiplies the rotated part of the
query and the key by ``get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)`` (defaults 1 and 0),
``s = factor``: ``attention_factor`` is not read (mlx-lm PR #1507, not merged).  ``SuScaledRoPE``
(LongRoPE) multiplies them by ``long_mscale`` or ``sqrt(1 + ln s / ln L)``, ``s =
max_position_embeddings / L``, and always uses ``long_factor`` (``long_mscale`` is passed by
``phimoe.py`` only).  The model file is chosen by ``model_type`` through ``MODEL_REMAPPING`` (Kimi K2
is DeepSeek-V3's); Ministral 3 (only it) multiplies the query by ``1 + beta ln(1 + floor(p / L))``;
Llama 4 puts its temperature on every 4th layer.  Laguna reads its RoPE only per layer type
(``rope_parameters[layer_type]``); an unknown ``rope_type`` is refused.
"""

from __future__ import annotations

import dataclasses

from ._rules import NEWEST, Rule, compose, every_fourth, longrope_sq, mscale_sq, refuse_rope_type, refuses

__all__ = ["NAME", "RULES", "scale"]

NAME = "mlx-lm"
_REPO = "ml-explore/mlx-lm"
_ROPE = (_REPO, "mlx_lm/models/rope_utils.py", "13425df69fdf066ed84d8f1bbdc8182a7576740d")
#: The snapshot read for the remapping, Laguna, the refusal and ``long_mscale``.
_AT = "d78bf58e217c904ec282ed8da9b947491f78c022"

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
    "model_remapping": Rule("model_remapping", "load_model: `model_type = MODEL_REMAPPING.get(model_type, "
                            "model_type)`, MODEL_REMAPPING = {\"mistral\": \"llama\", ..., \"kimi_k2\": "
                            "\"deepseek_v3\", ...}: Kimi K2 runs deepseek_v3.py (the kimi_k2 entry since fd9b1909)",
                            _REPO, "mlx_lm/utils.py", _AT),
    "laguna_nested": Rule("laguna_nested", "Laguna: `rope_params = (args.rope_parameters or {}).get(layer_type) or {}`, "
                          "rope_type \"default\" when it names none: only the per-layer-type form is read, a flat "
                          "`rope_scaling` (or a flat `rope_parameters`) gives default RoPE on every layer", _REPO,
                          "mlx_lm/models/laguna.py", _AT),
    "long_mscale_phimoe": Rule("long_mscale_phimoe", "`long_mscale=args.rope_scaling[\"long_mscale\"]` is passed to "
                               "SuScaledRoPE only by phimoe.py; initialize_rope passes no `long_mscale`", _REPO,
                               "mlx_lm/models/phimoe.py", _AT),
    "rope_type": Rule("rope_type", "initialize_rope: `raise ValueError(f\"Unsupported RoPE type {rope_type}\")` for a "
                      "type other than default, linear, dynamic, llama3, yarn, deepseek_yarn, telechat3-yarn, "
                      "longrope, proportional, mrope", *_ROPE[:2], _AT),
}

#: ``MODEL_REMAPPING`` of ``mlx_lm/utils.py`` (:data:`RULES` ``"model_remapping"``): the model file a type runs.
MODEL_REMAPPING = {"mistral": "llama", "llava": "mistral3", "phi-msft": "phixtral", "falcon_mamba": "mamba",
                   "joyai_llm_flash": "deepseek_v3", "kimi_k2": "deepseek_v3", "qwen2_5_vl": "qwen2_vl",
                   "minimax_m2": "minimax", "iquestcoder": "llama", "gemma4_unified": "gemma4"}
#: The ``rope_type`` values ``initialize_rope`` builds.
ROPE_TYPES = frozenset({"default", "linear", "dynamic", "llama3", "yarn", "deepseek_yarn", "telechat3-yarn", "longrope",
                        "proportional", "mrope"})

#: Model types whose mlx-lm model file applies DeepSeek's softmax-scale term.
DEEPSEEK_TYPES = frozenset({"deepseek_v3"})
_YARN_TYPES = ("yarn", "deepseek_yarn", "telechat3-yarn")


def scale(ms, n, version=None):
    """The multiplier mlx-lm puts on ``q.k`` at ``n`` keys (its rules carry no ranges: ``version`` is only the label)."""
    label = NEWEST if version is None else str(version)
    model = MODEL_REMAPPING.get(ms.model_type, ms.model_type)
    r, notes, rules, rope_sq, softmax_sq = ms.rope, [], ["base"], 1.0, 1.0
    if model != ms.model_type:
        rules.append("model_remapping")
    if any(t.name == "qwen_logn" for t in ms.temperatures) or (ms.has_mla_head and model not in DEEPSEEK_TYPES):
        return compose(NAME, ms, n, base=ms.base_scale, rope_sq=None, version=label,
                       notes=["its model file for this config was not read"])
    laguna = model == "laguna"
    if laguna and not ms.rope_per_layer_type:  # a flat RoPE dict: default RoPE, no factor
        notes.append("reads Laguna's RoPE only per layer type (`rope_parameters[layer_type]`): default RoPE here")
        rules.append("laguna_nested")
        r = dataclasses.replace(r, rope_type="default")
    if refuses(ms, ROPE_TYPES):
        return refuse_rope_type(NAME, ms, n, label, RULES["rope_type"])
    if r.rope_type in _YARN_TYPES:
        m = 1.0 if r.mscale is None else r.mscale
        mad = 0.0 if r.mscale_all_dim is None else r.mscale_all_dim
        rope_sq = mscale_sq(r.factor, m) / mscale_sq(r.factor, mad)
        notes += [f"drops `{k}`" for k in ("attention_factor", "attn_factor") if getattr(r, k) is not None]
        rules.append("yarn")
        if model in DEEPSEEK_TYPES and r.mscale_all_dim:
            softmax_sq = mscale_sq(r.factor, r.mscale_all_dim)
            rules.append("deepseek_softmax")
    elif r.rope_type == "longrope":
        L = r.original_max_position_embeddings or ms.max_position_embeddings
        long_mscale = r.values.get("long_mscale") if model == "phimoe" else None
        rope_sq = long_mscale ** 2 if long_mscale else longrope_sq(ms.max_position_embeddings / L, L)
        if r.attention_factor is not None:
            notes.append("drops `attention_factor`")
        if "long_mscale" in r.values:
            notes.append("reads `long_mscale`" if model == "phimoe" else "ignores `long_mscale` (read by phimoe.py only)")
            rules.append("long_mscale_phimoe")
        rules.append("longrope")
    temps = [t for t in ms.temperatures if t.name == "llama4_temperature" or
             (t.name == "llama_4_scaling_beta" and model == "ministral3" and t.key.startswith("rope_parameters."))]
    if any(t.name == "llama_4_scaling_beta" and t not in temps for t in ms.temperatures):
        notes.append("ignores `llama_4_scaling_beta` (read by ministral3.py only, from `rope_parameters`)")
    rules += sorted({t.name for t in temps})
    temps = every_fourth(ms, temps, notes)
    if laguna and ms.rope_per_layer_type:
        rules.append("laguna_nested")
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=temps, notes=notes,
                   rules=rules, version=label, reads_layer_types=laguna)

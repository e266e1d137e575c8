"""SGLang: the multiplier on ``q.k`` as its rotary-embedding factory builds it.

Its ``get_rope`` forwards, for ``yarn``, ``extrapolation_factor``, ``attn_factor``,
``beta_fast``, ``beta_slow`` (and ``truncate``): ``attention_factor``, ``mscale`` and
``mscale_all_dim`` never arrive, and the cos/sin cache is multiplied by
``yarn_get_mscale_simple(factor) * attn_factor``, up to PR #31232 (first in 0.5.16), which takes the
``mscale``/``mscale_all_dim`` ratio when both are set (``RULES`` rows of family ``yarn``).  DeepSeek's
models use ``deepseek_yarn`` as in vLLM, and keep the base softmax scale under ``apply_yarn_scaling:
false`` (PR #26203).  Ministral 3's ``llama_4_scaling_beta`` scales the query from 0.5.6.post1.  An
unknown ``rope_type`` is refused.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from ._rules import Rule, pick, position_factor, refuse_rope_type, refuses
from .vllm import DEEPSEEK_TYPES, generic

__all__ = ["NAME", "RULES", "scale"]

NAME = "sglang"
_REPO = "sgl-project/sglang"
_ROPE = "python/sglang/srt/layers/rotary_embedding/"

RULES = {
    "base": Rule("base", "scaling = head_dim^-1/2 (Llama 4); Gemma's query_pre_attn_scalar and DeepSeek's MLA "
                 "scaling were not read here", _REPO, "python/sglang/srt/models/llama4.py",
                 "871da34db32b429e59d81b726a48776edaa9baf9"),
    "yarn": Rule("yarn", "cos/sin x yarn_get_mscale_simple(`factor`) x `attn_factor` (default 1); the factory "
                 "forwards extrapolation_factor, attn_factor, beta_fast, beta_slow, truncate only (`self.mscale = "
                 "float(yarn_get_mscale_simple(self.scaling_factor) * attn_factor)`, the same in the PyPI wheels "
                 "0.5.13 to 0.5.15.post1); how far back before 0.5.13 it holds was not read",
                 _REPO, _ROPE + "yarn.py", "8448045c5b58df38de9142f3d5b84de62353e535", scheme="deepseek_yarn",
                 squared=True, versions=">=0.5.13,<0.5.16", source="ended by PR #31232, first in 0.5.16"),
    "yarn_mscale_ratio": Rule("yarn_mscale_ratio", "`if mscale is not None and mscale_all_dim is not None:` "
                              "`self.mscale = float(yarn_get_mscale(self.scaling_factor, mscale) / "
                              "yarn_get_mscale(self.scaling_factor, mscale_all_dim))`, else yarn_get_mscale_simple("
                              "`factor`); then `self.mscale *= attn_factor`; the factory forwards `mscale` and "
                              "`mscale_all_dim` (not `attention_factor`).  Read in the PyPI wheels 0.5.16 and 0.5.23 "
                              "(commit not recorded)", _REPO, _ROPE + "yarn.py", "", scheme="deepseek_yarn",
                              squared=True, versions=">=0.5.16",
                              source="PR #31232 (\"Match Hugging Face's YaRN\"), first in 0.5.16 (absent from "
                              "0.5.15.post1)", family="yarn"),
    "get_rope_keys": Rule("get_rope_keys", "the keys get_rope forwards per rope_type", _REPO, _ROPE + "factory.py",
                          "eb047c169815914d16add570c2bf2c5f41a9702d"),
    "deepseek_yarn": Rule("deepseek_yarn", "deepseek_yarn reads `mscale` and `mscale_all_dim` (as vLLM)", _REPO,
                          _ROPE + "factory.py", "eb047c169815914d16add570c2bf2c5f41a9702d", scheme="deepseek_yarn",
                          squared=True),
    "deepseek_softmax": Rule("deepseek_softmax", "softmax scale qk_head_dim^-1/2 x yarn_get_mscale(`factor`, "
                             "`mscale_all_dim`)^2 when rope_scaling is set (`mscale_all_dim` unset: 0, a factor 1)",
                             _REPO, "python/sglang/srt/models/deepseek_v2.py",
                             "00114aef19bbb7431b9cfc5a77dce64b9c53ed95", scheme="deepseek_yarn"),
    "deepseek_llama_4_scaling": Rule("deepseek_llama_4_scaling", "DeepseekV2Model: `self.llama_4_scaling_config = "
                                     "getattr(config, \"llama_4_scaling\", None)`, `scaling = 1 + scaling_beta * "
                                     "torch.log(1 + torch.floor(positions / original_max_position_embeddings))`, "
                                     "`q *= llama_4_scaling` (forward_mla.py): a top-level `llama_4_scaling` on every "
                                     "layer.  Read in the PyPI wheels 0.5.13 and 0.5.23 (commit not recorded)", _REPO,
                                     "python/sglang/srt/models/deepseek_common/utils.py", "",
                                     positions="positions 0-based: floor(p / L) = floor((n - 1) / L)", scheme="llama4",
                                     versions=">=0.5.13"),
    "deepseek_apply_yarn_scaling": Rule("deepseek_apply_yarn_scaling", "`if rope_scaling and rope_scaling.get("
                                        "\"apply_yarn_scaling\", True): self.scaling = compute_mla_mscale_scaling("
                                        "rope_scaling, self.scaling)`: with `apply_yarn_scaling` false the softmax "
                                        "keeps the base scale (the rope dimensions still get deepseek_yarn's factor). "
                                        "Read in the PyPI wheels 0.5.13 and 0.5.23 (commit not recorded); PR #26203, "
                                        "merged 2026-05-24: whether releases before 0.5.13 had it was not read", _REPO,
                                        "python/sglang/srt/models/deepseek_v2.py", "", scheme="deepseek_yarn",
                                        versions=">=0.5.13", source="PR #26203"),
    "llama4_temperature": Rule("llama4_temperature", "query x log(floor((p + 1) / `floor_scale`) + 1) x `attn_scale` "
                               "+ 1 on layers with (layer_id + 1) % 4 == 0: `no_rope_layers` is not read", _REPO,
                               "python/sglang/srt/models/llama4.py", "871da34db32b429e59d81b726a48776edaa9baf9",
                               positions="p = positions (0-based): floor((p + 1)/floor_scale) = floor(n/floor_scale)",
                               scheme="llama4"),
    "longrope": Rule("longrope", "Phi3LongRoPEScaledRotaryEmbedding: cos/sin x `short_mscale` / `long_mscale` when "
                     "given, else sqrt(1 + ln s / ln L), s = max_position_embeddings / L, L = "
                     "`original_max_position_embeddings`, the same factor on the short and the long cache; the long "
                     "factors are chosen per batch when a position exceeds L; `attention_factor` is not read", _REPO,
                     _ROPE + "rope_variant.py", "6170d9756796c155352a595848308d3380e023a1", scheme="longrope",
                     squared=True),
    "qwen_logn": Rule("qwen_logn", "`use_logn_attn` is not read: QWenAttention passes scaling = head_dim^-1/2 to "
                      "RadixAttention and never scales the query by position",
                      _REPO, "python/sglang/srt/models/qwen.py", "01925ca8c3ab348298b25a81a552dd08c448980a"),
    "ministral3_llama_4_scaling": Rule("ministral3_llama_4_scaling", "Ministral3Attention: `self.llama_4_scaling_beta "
                                       "= config.rope_parameters.get(\"llama_4_scaling_beta\")`, after the rotary "
                                       "embedding `scaling = 1 + beta * torch.log(1 + torch.floor(positions_ids / "
                                       "max_position_embeddings))` multiplies q on every layer, with "
                                       "`max_position_embeddings=getattr(config, \"original_max_position_embeddings\", "
                                       "16384)`: the top-level key, not the RoPE dict's (16384 where the config has "
                                       "none at the top).  The same in the PyPI wheels 0.5.6.post1 to 0.5.23 (absent "
                                       "from 0.5.6); Mistral3ForConditionalGeneration builds its language model from "
                                       "`text_config`'s class (read in 0.5.23)", _REPO,
                                       "python/sglang/srt/models/ministral3.py",
                                       "0d9cd8212785c01af00d40c41ae25b49fd01533a",
                                       positions="positions 0-based: floor(p / L) = floor((n - 1) / L)", scheme="llama4",
                                       versions=">=0.5.6.post1", source="models/ministral3.py, first in 0.5.6.post1"),
    "rope_type": Rule("rope_type", "get_rope: `raise ValueError(f\"Unknown RoPE scaling type {scaling_type}\")` for a "
                      "type it does not build", _REPO, _ROPE + "factory.py", "eb047c169815914d16add570c2bf2c5f41a9702d"),
}

#: The length Ministral3Attention divides the position by when the config has no top-level
#: ``original_max_position_embeddings`` (:data:`RULES` ``"ministral3_llama_4_scaling"``).
_MINISTRAL3_L = 16384

#: The ``rope_type`` values ``get_rope`` builds (:data:`RULES` ``"rope_type"``).
ROPE_TYPES = frozenset({"llama3", "default", "linear", "dynamic", "yarn", "deepseek_yarn", "longrope"})


def scale(ms, n, version=None):
    """The multiplier SGLang puts on ``q.k`` at ``n`` keys (``version``: a :class:`packaging.version.Version` or None)."""
    if refuses(ms, ROPE_TYPES):
        return refuse_rope_type(NAME, ms, n, "newest" if version is None else version, RULES["rope_type"])
    beta = [t for t in ms.temperatures if t.name == "llama_4_scaling_beta" and t.key.startswith("rope_")]
    if not (beta and ms.model_type == "ministral3" and pick(RULES, "ministral3_llama_4_scaling", version)):
        return generic(NAME, ms, n, deepseek_types=DEEPSEEK_TYPES, yarn_keys={"attn_factor"}, yarn_rule="yarn",
                       apply_flag=False, fixed_nope=True, version=version, rules_table=RULES)
    e = generic(NAME, dataclasses.replace(ms, temperatures=tuple(t for t in ms.temperatures if t not in beta)), n,
                deepseek_types=DEEPSEEK_TYPES, yarn_keys={"attn_factor"}, yarn_rule="yarn", apply_flag=False,
                fixed_nope=True, version=version, rules_table=RULES)
    if e.scale is None:
        return e
    t = beta[0]
    notes = list(e.notes)
    if t.params["floor_scale"] != _MINISTRAL3_L:
        notes.append(f"takes L = {_MINISTRAL3_L} in Llama 4's scaling (a top-level `original_max_position_embeddings`, "
                     f"or its default), not `{t.keys[1]}` = {t.params['floor_scale']}")
        t = dataclasses.replace(t, params=MappingProxyType({**t.params, "floor_scale": _MINISTRAL3_L}))
    f = position_factor(t, e.n)
    other, nope = (None if a is None else a * f for a in (e.other_scale, e.nope_scale))
    return dataclasses.replace(e, scale=e.scale * f, other_scale=other, nope_scale=nope,
                               notes=tuple(notes), rules=(*e.rules, "ministral3_llama_4_scaling"))

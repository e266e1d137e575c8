"""SGLang: the multiplier on ``q.k`` as its rotary-embedding factory builds it.

Its ``get_rope`` forwards, for ``yarn``, ``extrapolation_factor``, ``attn_factor``,
``beta_fast``, ``beta_slow`` (and ``truncate``): ``attention_factor``, ``mscale`` and
``mscale_all_dim`` never arrive, and the cos/sin cache is multiplied by
``yarn_get_mscale_simple(factor) * attn_factor``, up to PR #31232, which takes the
``mscale``/``mscale_all_dim`` ratio when both are set (``RULES`` rows of family ``yarn``).  DeepSeek's
models use ``deepseek_yarn`` as in vLLM.  An unknown ``rope_type`` is refused.
"""

from __future__ import annotations

from ._rules import Rule, refuse_rope_type, refuses
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
                 "forwards extrapolation_factor, attn_factor, beta_fast, beta_slow, truncate only (the same "
                 "`self.mscale = float(_yarn_get_mscale(self.scaling_factor) * attn_factor)` in _yarn.py at "
                 "01e3ddd0e8eaecfaaa279a622d0aa4ec0d5d2f37); how far back before v0.5.13 it holds was not read",
                 _REPO, _ROPE + "yarn.py", "8448045c5b58df38de9142f3d5b84de62353e535", scheme="deepseek_yarn",
                 squared=True, versions="<=0.5.13",
                 source="ended by PR #31232, opened 2026-07-14, after v0.5.13 (out by 2026-06-17)"),
    "yarn_mscale_ratio": Rule("yarn_mscale_ratio", "PR #31232 (\"Fix Ministral3 accuracy issue by aligning YaRN RoPE "
                              "scaling with Transformers implementation\"), as its description states it: `mscale` and "
                              "`mscale_all_dim` reach YaRNScalingRotaryEmbedding, which recomputes its factor as "
                              "get_mscale(`factor`, `mscale`) / get_mscale(`factor`, `mscale_all_dim`) when both are "
                              "given, else yarn_get_mscale_simple(`factor`) x `attn_factor` as before; "
                              "`attention_factor` is still not forwarded.  The merged code, its merge commit and the "
                              "release that took it were not read: the newest row only, no range",
                              _REPO, _ROPE + "yarn.py", "", scheme="deepseek_yarn", squared=True,
                              source="PR #31232 (merged; release not read)", family="yarn"),
    "get_rope_keys": Rule("get_rope_keys", "the keys get_rope forwards per rope_type", _REPO, _ROPE + "factory.py",
                          "eb047c169815914d16add570c2bf2c5f41a9702d"),
    "deepseek_yarn": Rule("deepseek_yarn", "deepseek_yarn reads `mscale` and `mscale_all_dim` (as vLLM)", _REPO,
                          _ROPE + "factory.py", "eb047c169815914d16add570c2bf2c5f41a9702d", scheme="deepseek_yarn",
                          squared=True),
    "deepseek_softmax": Rule("deepseek_softmax", "softmax scale qk_head_dim^-1/2 x yarn_get_mscale(`factor`, "
                             "`mscale_all_dim`)^2 when rope_scaling is set (`mscale_all_dim` unset: 0, a factor 1)",
                             _REPO, "python/sglang/srt/models/deepseek_v2.py",
                             "00114aef19bbb7431b9cfc5a77dce64b9c53ed95", scheme="deepseek_yarn"),
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
    "rope_type": Rule("rope_type", "get_rope: `raise ValueError(f\"Unknown RoPE scaling type {scaling_type}\")` for a "
                      "type it does not build", _REPO, _ROPE + "factory.py", "eb047c169815914d16add570c2bf2c5f41a9702d"),
}

#: The ``rope_type`` values ``get_rope`` builds (:data:`RULES` ``"rope_type"``).
ROPE_TYPES = frozenset({"llama3", "default", "linear", "dynamic", "yarn", "deepseek_yarn", "longrope"})


def scale(ms, n, version=None):
    """The multiplier SGLang puts on ``q.k`` at ``n`` keys (``version``: a :class:`packaging.version.Version` or None)."""
    if refuses(ms, ROPE_TYPES):
        return refuse_rope_type(NAME, ms, n, "newest" if version is None else version, RULES["rope_type"])
    return generic(NAME, ms, n, deepseek_types=DEEPSEEK_TYPES, yarn_keys={"attn_factor"}, yarn_rule="yarn",
                   apply_flag=False, fixed_nope=True, version=version, rules_table=RULES)

"""vLLM: the multiplier on ``q.k`` as ``get_rope`` and the model files build it.

``get_rope`` passes only the keys it lists to the RoPE class: for ``yarn``
``extrapolation_factor``, ``attn_factor``, ``beta_fast``, ``beta_slow``, ``apply_yarn_scaling``,
``truncate``, so ``attention_factor``, ``mscale`` and ``mscale_all_dim`` never arrive; the cos/sin
cache is multiplied by ``yarn_get_mscale(factor) * attn_factor`` (squared on the logits).
DeepSeek's models switch the type to ``deepseek_yarn``, which reads ``mscale`` (default 1) and
``mscale_all_dim`` (default 0), and multiply the softmax scale by ``yarn_get_mscale(factor,
mscale_all_dim)^2``.  PR #56446 (first in 0.29.1rc0; 0.30.0 the first final release) aligned the YaRN
rule with transformers (``RULES`` rows of family ``yarn``): from it ``attention_factor``, ``mscale``
and ``mscale_all_dim`` are forwarded and ``attn_factor`` and ``apply_yarn_scaling`` are not, and the
DeepSeek rope drops ``attn_factor``.  PR #57563 (first in 0.31.0) switches DeepSeek-type models to
``deepseek_llama_scaling`` (no softmax term) on ``attention_factor: 1.0`` instead of
``apply_yarn_scaling: false``.  A top-level ``llama_4_scaling`` scales the query of DeepSeek-type models;
Mistral's ``llama_4_scaling_beta`` in ``rope_parameters`` is not applied before PR #56446.
"""

from __future__ import annotations

import dataclasses

from ._rules import NEWEST, Rule, compose, every_fourth, longrope_sq, mscale_sq, pick, unknown

__all__ = ["NAME", "RULES", "scale"]

NAME = "vllm"
_REPO = "vllm-project/vllm"
_ROPE = "vllm/model_executor/layers/rotary_embedding/"

RULES = {
    "base": Rule("base", "scaling = head_dim^-1/2 (Llama 4, Qwen); DeepSeek's MLA scaling over qk_nope_head_dim + "
                 "qk_rope_head_dim; Gemma's query_pre_attn_scalar was not read here", _REPO,
                 "vllm/model_executor/models/llama4.py", "0303cbd848954bcc83204522e8ceab4503f3f4b9"),
    "yarn": Rule("yarn", "cos/sin x yarn_get_mscale(`factor`) x `attn_factor` (default 1), or `attn_factor` alone "
                 "when `apply_yarn_scaling` is false; `attention_factor`, `mscale`, `mscale_all_dim` are not passed",
                 _REPO, _ROPE + "yarn_scaling_rope.py", "ffdc985737c94233f2c88629c4450022e5bf4925",
                 scheme="deepseek_yarn", squared=True, versions="<0.29.1rc0",
                 source="ended by PR #56446 (commit c191787a6861868069bc4f6ed6f842af541de23a)"),
    "yarn_mscale": Rule("yarn_mscale", "cos/sin x `attention_factor` when set, else get_mscale(s, `mscale`) / "
                        "get_mscale(s, `mscale_all_dim`) when both are non-zero, else get_mscale(s) = 0.1 ln s + 1, "
                        "s = `factor` (transformers' _compute_yarn_parameters); `attn_factor` and "
                        "`apply_yarn_scaling` are no longer forwarded (read in a snapshot after the PR, whose YaRN "
                        "class has its shape)", _REPO, _ROPE + "yarn_scaling_rope.py",
                        "0cd5784803d83f81fac0794b82cb592d4317d4bf", scheme="deepseek_yarn", squared=True,
                        versions=">=0.29.1rc0", source="PR #56446 (commit c191787a6861868069bc4f6ed6f842af541de23a), "
                        "merged 2026-09-11, after the v0.29.0 tag", family="yarn"),
    "get_rope_keys": Rule("get_rope_keys", "the keys get_rope forwards per rope_type (yarn: extrapolation_factor, "
                          "attn_factor, beta_fast, beta_slow, apply_yarn_scaling, truncate)", _REPO,
                          _ROPE + "__init__.py", "926c71f6f25f8fe0a71ba4b168205e64bef24a36", versions="<0.29.1rc0",
                          source="ended by PR #56446"),
    "get_rope_keys_aligned": Rule("get_rope_keys_aligned", "the keys get_rope forwards per rope_type (yarn: "
                                  "beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor, truncate)", _REPO,
                                  _ROPE + "__init__.py", "0cd5784803d83f81fac0794b82cb592d4317d4bf",
                                  versions=">=0.29.1rc0", source="PR #56446", family="get_rope_keys"),
    "deepseek_yarn": Rule("deepseek_yarn", "cos/sin x yarn_get_mscale(s, `mscale`=1) / yarn_get_mscale(s, "
                          "`mscale_all_dim`=0) x `attn_factor`", _REPO, _ROPE + "deepseek_scaling_rope.py",
                          "7bc8d408139110c389bea6028e9fdfadb1eb7641", scheme="deepseek_yarn", squared=True),
    "deepseek_softmax": Rule("deepseek_softmax", "rope_type -> deepseek_yarn (deepseek_llama_scaling when "
                             "`apply_yarn_scaling` is false); with deepseek_yarn the softmax scale x "
                             "yarn_get_mscale(`factor`, `mscale_all_dim`)^2", _REPO,
                             "vllm/model_executor/models/deepseek_v2.py", "b863fe5bf4e19680572603b4e166faefc5725551",
                             scheme="deepseek_yarn", versions="<0.31.0",
                             source="the same switch in the PyPI wheel 0.30.0; ended by PR #57563 (first in 0.31.0)"),
    "deepseek_rope_aligned": Rule("deepseek_rope_aligned", "deepseek_yarn and deepseek_llama_scaling build the same "
                                  "DeepseekScalingRotaryEmbedding from `beta_fast`, `beta_slow`, `mscale`, "
                                  "`mscale_all_dim` only: `self.mscale = float(yarn_get_mscale(self.scaling_factor, "
                                  "float(mscale)) / yarn_get_mscale(self.scaling_factor, float(mscale_all_dim)))` "
                                  "(defaults 1 and 0), no `attn_factor`; the softmax scale x yarn_get_mscale(`factor`, "
                                  "`mscale_all_dim`)^2 only with deepseek_yarn.  Read in the PyPI wheels 0.30.0 and "
                                  "0.31.0 (commit not recorded)", _REPO, _ROPE + "deepseek_scaling_rope.py", "",
                                  scheme="deepseek_yarn", squared=True, versions=">=0.30.0",
                                  source="after PR #56446 (0.30.0 is its first final release)"),
    "deepseek_attention_factor": Rule("deepseek_attention_factor", "`config.rope_parameters[\"rope_type\"] = "
                                      "(\"deepseek_llama_scaling\" if config.rope_parameters.get(\"attention_factor\") "
                                      "== 1.0 else \"deepseek_yarn\")`; with deepseek_yarn the softmax scale x "
                                      "yarn_get_mscale(`factor`, `mscale_all_dim`)^2.  Read in the rendering of "
                                      "deepseek_v2.py on docs.vllm.ai (lastmod 2026-09-23), not at a commit; PR "
                                      "#57563 (2bdae2a5a83f, merged 2026-09-18) made it; the same lines in the PyPI "
                                      "wheel 0.31.0, not in 0.30.0 (commit not recorded)", "", "", "",
                                      scheme="deepseek_yarn", versions=">=0.31.0", source="PR #57563, first in 0.31.0",
                                      family="deepseek_softmax"),
    "deepseek_llama_4_scaling": Rule("deepseek_llama_4_scaling", "DeepseekV2Model reads a top-level `llama_4_scaling` "
                                     "(`getattr(self.config, \"llama_4_scaling\", None)`: `beta`, "
                                     "`original_max_position_embeddings`) and multiplies q, every dimension, by "
                                     "`1 + scaling_beta * torch.log(1 + torch.floor(positions / "
                                     "original_max_position_embeddings))` on every layer", _REPO,
                                     "vllm/model_executor/models/deepseek_v2.py",
                                     "b863fe5bf4e19680572603b4e166faefc5725551",
                                     positions="positions 0-based: floor(p / L) = floor((n - 1) / L)", scheme="llama4"),
    "llama4_temperature": Rule("llama4_temperature", "query x log(floor((p + 1) / `floor_scale`) + 1) x `attn_scale` "
                               "+ 1 on layers with no_rope_layers[i] == 0", _REPO,
                               "vllm/model_executor/models/llama4.py", "0303cbd848954bcc83204522e8ceab4503f3f4b9",
                               positions="p = positions (0-based): floor((p + 1)/floor_scale) = floor(n/floor_scale)",
                               scheme="llama4"),
    "longrope": Rule("longrope", "Phi3LongRoPEScaledRotaryEmbedding: cos/sin x `short_mscale` / `long_mscale` when given, "
                     "else sqrt(1 + ln s / ln L), s = max_position_embeddings / L, L = "
                     "`original_max_position_embeddings`, the same factor on the short and the long cache; the long "
                     "factors are chosen once from max_model_len > L (the allocated context, not the sequence); "
                     "`attention_factor` is not read", _REPO, _ROPE + "phi3_long_rope_scaled_rope.py",
                     "63c2b7abcd705edb754604f83ac72a4269c05a52", scheme="longrope", squared=True),
    "llama_4_scaling_beta": Rule("llama_4_scaling_beta", "MistralAttention reads Llama 4 scaling only from a top-level "
                                 "`llama_4_scaling` mapping: `rope_parameters.llama_4_scaling_beta` is not applied "
                                 "(vLLM issue #48621 at v0.25.0; the model file was not read, nor the top-level "
                                 "mapping's formula; after PR #56446 not read)", "", "", "", versions="<0.29.1rc0"),
    "layer_types": Rule("layer_types", "YaRN on the full-attention layers of `layer_types` only, on the rotated part "
                        "(`partial_rotary_factor`) only: as prime-rl PR #2802 measured Laguna-XS.2 in vLLM (1.4159 on "
                        "cos/sin; the per-layer RoPE code itself was not read)", "", "", ""),
    "deepseek_no_yarn_scale": Rule("deepseek_no_yarn_scale", "DeepSeek-type YaRN without the magnitude factor "
                                   "(Mistral-Large-3's `apply_scale: false`): before 0.30.0 served through the "
                                   "Mistral adapter and a deepseek_llama_scaling whose code was not read, so no "
                                   "value; from 0.30.0 the row `deepseek_rope_aligned` (PR #56446) and, from 0.31.0, "
                                   "PR #57563's switch on `attention_factor: 1.0`", "", "", ""),
    "qwen_logn": Rule("qwen_logn", "QWenAttention: scaling = head_dim^-1/2, `use_logn_attn` is not read (vLLM #36880)",
                      _REPO, "vllm/model_executor/models/qwen.py", "9c2cc275fb22e65ac499d1dbefb484a0df851933"),
}

#: Model types whose vLLM model file switches YaRN to ``deepseek_yarn``.
DEEPSEEK_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek2"})


def dropped(r, read) -> list:
    """The notes for RoPE keys a config sets that an engine's YaRN path does not read."""
    notes = []
    if r.attention_factor is not None and "attention_factor" not in read:
        notes.append("drops `attention_factor`")
    ignored = [k for k in ("mscale", "mscale_all_dim") if getattr(r, k) is not None and k not in read]
    if ignored:
        notes.append("ignores " + " and ".join(f"`{k}`" for k in ignored))
    return notes


def deepseek_parts(r):
    """``(rope_sq, softmax_sq)`` of the ``deepseek_yarn`` path shared by vLLM and SGLang."""
    m = 1.0 if r.mscale is None else r.mscale
    mad = 0.0 if r.mscale_all_dim is None else r.mscale_all_dim
    af = 1.0 if r.attn_factor is None else r.attn_factor
    return mscale_sq(r.factor, m) / mscale_sq(r.factor, mad) * af ** 2, mscale_sq(r.factor, mad)


def generic(name, ms, n, *, deepseek_types, yarn_keys, yarn_rule, apply_flag, fixed_nope=False, version=None,
            rules_table=None, reads_layer_types=False):
    """The vLLM-style engines' multiplier (vLLM and SGLang share the shape of ``get_rope``).

    ``rules_table`` (the engine's ``RULES``) and ``version`` pick the YaRN row of family ``yarn``
    that holds at that version (vLLM); ``None``: the one row ``yarn_rule``.
    """
    r, notes, rules = ms.rope, [], []
    label = NEWEST if version is None else str(version)
    rope_sq, softmax_sq = 1.0, 1.0
    unread = [t for t in ms.temperatures if t.name == "llama_4_scaling_beta"]
    if rules_table is not None and "llama_4_scaling_beta" in rules_table and unread:
        beta_rule = pick(rules_table, "llama_4_scaling_beta", version)
        if beta_rule is not None and all(t.key.startswith("rope_") for t in unread):
            notes.append("ignores `llama_4_scaling_beta` in the RoPE parameters (reads a top-level `llama_4_scaling`)")
            rules.append(beta_rule.name)
            unread = []
    temps = []
    top = [t for t in ms.temperatures if t.name == "llama_4_scaling_beta" and t.key.startswith("llama_4_scaling.")]
    if top and ms.model_type in deepseek_types and rules_table is not None and \
            pick(rules_table, "deepseek_llama_4_scaling", version) is not None:  # the mapping DeepseekV2Model reads
        temps, rules = top, [*rules, "deepseek_llama_4_scaling"]
        unread = [t for t in unread if t not in top]
    if r.rope_type == "yarn" and ms.model_type in deepseek_types and rules_table is not None and \
            "deepseek_attention_factor" in rules_table:
        switch = _deepseek_switch(r, version)
        if switch is None:
            return unknown(name, n, label, "deepseek_softmax", ("between PR #56446 and PR #57563 the switch to "
                                                                "deepseek_llama_scaling was not read",))
        aligned = pick(rules_table, "deepseek_rope_aligned", version) is not None
        if switch[0] and not aligned:
            row = rules_table["deepseek_no_yarn_scale"]
            return unknown(name, n, label, "deepseek_no_yarn_scale", (row.text,))
        rules.append(switch[1])
        if aligned:  # one rope class for both paths, without attn_factor; the softmax term only with deepseek_yarn
            r_ = dataclasses.replace(r, attn_factor=None)
            rope_sq, softmax_sq = deepseek_parts(r_)
            softmax_sq = 1.0 if switch[0] else softmax_sq
            rules.append("deepseek_rope_aligned")
            notes += dropped(r, {"mscale", "mscale_all_dim"})
            notes += ["drops `attn_factor`"] * (r.attn_factor is not None)
    elif r.rope_type == "yarn" and ms.model_type in deepseek_types and apply_flag and \
            r.values.get("apply_yarn_scaling") is False:
        row = rules_table["deepseek_no_yarn_scale"]
        return unknown(name, n, label, "deepseek_no_yarn_scale", (row.text,))
    if "deepseek_rope_aligned" in rules:
        pass
    elif r.rope_type == "yarn" and ms.model_type in deepseek_types and rules_table is not None and \
            "deepseek_apply_yarn_scaling" in rules_table and r.values.get("apply_yarn_scaling") is False:
        if pick(rules_table, "deepseek_apply_yarn_scaling", version) is None:
            return unknown(name, n, label, "deepseek_apply_yarn_scaling")
        rope_sq, _ = deepseek_parts(r)
        rules += ["deepseek_yarn", "deepseek_apply_yarn_scaling"]
        notes += dropped(r, {"mscale", "mscale_all_dim"})
    elif r.rope_type == "yarn" and ms.model_type in deepseek_types:
        rope_sq, softmax_sq = deepseek_parts(r)
        rules += ["deepseek_yarn"] + ["deepseek_softmax"] * (not any(x.startswith("deepseek_") for x in rules))
        notes += dropped(r, {"mscale", "mscale_all_dim"})
    elif r.rope_type == "yarn":
        row = pick(rules_table, "yarn", version) if rules_table is not None else None
        if rules_table is not None and row is None:
            return unknown(name, n, label, "yarn")
        row_name = yarn_rule if row is None else row.name
        af = 1.0 if r.attn_factor is None else r.attn_factor
        on = r.values.get("apply_yarn_scaling", True) if apply_flag else True
        if row_name == "yarn_mscale_ratio":  # SGLang from PR #31232: the ratio whenever both keys are given
            if r.mscale is not None and r.mscale_all_dim is not None:
                rope_sq = mscale_sq(r.factor, r.mscale) / mscale_sq(r.factor, r.mscale_all_dim) * af ** 2
            else:
                rope_sq = mscale_sq(r.factor, 1.0) * af ** 2
                notes += dropped(r, {"attn_factor"})
            if r.attention_factor is not None:
                notes.append("drops `attention_factor`")
        elif row_name == "yarn_mscale":
            if r.attention_factor is not None:
                rope_sq = float(r.attention_factor) ** 2
            elif r.mscale and r.mscale_all_dim:
                rope_sq = mscale_sq(r.factor, r.mscale) / mscale_sq(r.factor, r.mscale_all_dim)
            else:
                rope_sq = mscale_sq(r.factor, 1.0)
            notes += [f"drops `{k}`" for k in ("attn_factor", "apply_yarn_scaling") if k in r.values]
        else:
            rope_sq = (mscale_sq(r.factor, 1.0) if on else 1.0) * af ** 2
            notes += dropped(r, yarn_keys)
        rules.append(row_name)
        if reads_layer_types and ms.rope_layers is not None:
            rules.append("layer_types")
    elif r.rope_type == "longrope":
        L, max_pos = r.original_max_position_embeddings, ms.max_position_embeddings
        if L is None or max_pos is None or any(k in r.values for k in ("short_mscale", "long_mscale")):
            return compose(name, ms, n, base=ms.base_scale, rope_sq=None, version=label,
                           notes=["its LongRoPE rule for these keys (no lengths, or `short_mscale`/`long_mscale`, "
                                  "whose forwarding was not read) is not transcribed here"])
        rope_sq = longrope_sq(max_pos / L, L)
        if r.attention_factor is not None:
            notes.append("drops `attention_factor`")
        rules.append("longrope")
    llama4 = [t for t in ms.temperatures if t.name == "llama4_temperature"]
    rules += ["llama4_temperature"] * bool(llama4)
    if fixed_nope:
        llama4 = every_fourth(ms, llama4, notes)
    temps = [*temps, *llama4]
    if any(t.scheme == "qwen_logn" for t in ms.temperatures):
        notes.append("ignores `use_logn_attn`")
        rules.append("qwen_logn")
    return compose(name, ms, n, base=ms.base_scale, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=temps,
                   notes=notes, rules=["base", *rules], version=label, unread_temps=unread,
                   reads_layer_types=reads_layer_types)


def _deepseek_switch(r, version):
    """``(llama_scaling, row)``: whether a DeepSeek-type model takes ``deepseek_llama_scaling`` at ``version``.

    Decided by the row that holds there; ``None`` where no row holds and the rows on either side disagree.
    """
    old, new = r.values.get("apply_yarn_scaling", True) is False, r.values.get("attention_factor") == 1.0
    row = pick(RULES, "deepseek_softmax", version)
    if row is not None:
        return (old if row.name == "deepseek_softmax" else new), row.name
    return (False, "deepseek_softmax") if not old and not new else None


def scale(ms, n, version=None):
    """The multiplier vLLM puts on ``q.k`` at ``n`` keys (``version``: a :class:`packaging.version.Version` or None)."""
    return generic(NAME, ms, n, deepseek_types=DEEPSEEK_TYPES, yarn_keys={"attn_factor"}, yarn_rule="yarn",
                   apply_flag=True, version=version, rules_table=RULES, reads_layer_types=True)

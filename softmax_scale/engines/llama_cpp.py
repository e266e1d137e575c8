"""llama.cpp: the multiplier on ``q.k`` as ``llama_context`` and the model graphs compute it.

GGUF keys are spelled as llama.cpp does (``{arch}.rope.scaling.factor``).  With YaRN
(``ext_factor != 0``) ggml's rope multiplies cos/sin by ``attn_factor * (1 + 0.1 ln s)``;
``llama_context`` sets ``yarn_attn_factor`` to ``get_mscale(s, mscale)/get_mscale(s, mscale_all_dim)``
when ``rope.scaling.yarn_log_multiplier`` (= ``mscale_all_dim``) is set, else ``get_mscale(s)``,
divides it by ``1 + 0.1 ln s`` to cancel ggml's factor, and multiplies by
``rope.scaling.attn_factor``.  So a GGUF's ``rope.scaling.yarn_attn_factor`` (where the converter
puts a HF ``attention_factor``) is overwritten for YaRN.  DeepSeek2's graph puts
``(attn_factor_org * get_mscale(s, yarn_log_multiplier))^2`` into ``kq_scale``.  That is PR #17945,
first in build b7371; below it the context passes ``rope.scaling.attn_factor`` alone, so ggml's own
factor stays on the rotated dimensions (DeepSeek2's ``kq_scale`` adds ``get_mscale(s, mscale_all_dim)^2``
on all of them, and the mistral3 graph cancels ggml's factor itself).
"""

from __future__ import annotations

import math

from packaging.version import Version

from ._rules import NEWEST, Rule, compose, every_fourth, longrope_sq, mscale_sq, unknown

__all__ = ["NAME", "RULES", "scale"]

NAME = "llama.cpp"
_REPO = "ggml-org/llama.cpp"
#: The first build with PR #17945 ("models : fix the attn_factor for mistral3 graphs + improve consistency",
#: opened 2025-12-11): b7371, tagged 2025-12-12, whose release notes list the PR's squashed commits ("models : fix the
#: attn_factor for mistral3 graphs", "cont : make deepseek2 consistent", ...); b7370 lists none of them.
PR17945_BUILD = 7371
_PR17945 = "PR #17945, first in b7371 (its commits are in b7371's release notes, 2025-12-12)"

RULES = {
    "yarn_attn_factor": Rule("yarn_attn_factor", "cos/sin x get_mscale(s, mscale)/get_mscale(s, "
                             "`rope.scaling.yarn_log_multiplier`) when that key is set (mscale = 1, or = it for "
                             "DEEPSEEK2 when != 1), else get_mscale(s); x `rope.scaling.attn_factor`; "
                             "`rope.scaling.yarn_attn_factor` is overwritten", _REPO, "src/llama-context.cpp",
                             "001d906a6d86e2490e394361e7cc6f478b100088", scheme="deepseek_yarn", squared=True,
                             versions=">=7371", source=_PR17945),
    "yarn_attn_factor_pre17945": Rule("yarn_attn_factor_pre17945", "the context passes `rope.scaling.attn_factor` "
                                      "(1 for an HF conversion) to the graph as attn_factor with no YaRN term "
                                      "(`cparams.yarn_attn_factor *= hparams.rope_attn_factor;`, found by the "
                                      "index's string search without a commit); ggml multiplies cos/sin by it and "
                                      "by its own 1 + 0.1 ln s: `mscale`, `mscale_all_dim` and `attention_factor` "
                                      "are not read by the context", _REPO, "src/llama-context.cpp", "",
                                      scheme="deepseek_yarn", squared=True, versions="<7371", source=_PR17945,
                                      family="yarn_attn_factor"),
    "mistral3_attn_factor_pre17945": Rule("mistral3_attn_factor_pre17945", "llm_build_mistral3: `const float "
                                          "attn_factor = 1.0f / (1.0f + 0.1f * logf(1.0f / freq_scale));` passed to "
                                          "ggml_rope_ext, cancelling ggml's own factor: cos/sin x 1 whatever the "
                                          "config's `mscale`, `mscale_all_dim` and `rope.scaling.attn_factor`",
                                          _REPO, "src/models/mistral3.cpp",
                                          "1df2e90860ff2627980e46f59d470bfb6e5b98d8", scheme="deepseek_yarn",
                                          squared=True, versions="<7371", source=_PR17945),
    "yarn_adjust": Rule("yarn_adjust", "attn_factor / (1 + 0.1 ln(1/freq_scale)) when ext_factor != 0, cancelling "
                        "ggml's own YaRN factor", _REPO, "src/llama-hparams.cpp",
                        "01b77b5793989e0a1508a2fe3757d4e743a7bbd1", squared=True, versions=">=7371",
                        source=_PR17945),
    "deepseek2_kq_scale": Rule("deepseek2_kq_scale", "`const float attn_factor_org = attn_factor * (1.0f + 0.1f * "
                               "logf(1.0f / freq_scale));` `const float mscale   = attn_factor_org * (1.0f + 0.1f * "
                               "hparams.rope_yarn_log_mul * logf(1.0f / freq_scale));` `const float kq_scale = 1.0f * "
                               "mscale * mscale / sqrtf(float(n_embd_head_k));`: kq_scale = (the context's factor "
                               "before the adjustment x get_mscale(s, yarn_log_multiplier))^2 / sqrt(n_embd_head_k)",
                               _REPO, "src/models/deepseek2.cpp", "07bede6a8f329362c72d46a0bc9756b6a12c22eb",
                               scheme="deepseek_yarn", versions=">=7371", source=_PR17945),
    "deepseek2_kq_scale_pre17945": Rule("deepseek2_kq_scale_pre17945", "`const float mscale   = attn_factor * (1.0f "
                                        "+ hparams.rope_yarn_log_mul * logf(1.0f / freq_scale));` `const float "
                                        "kq_scale = 1.0f * mscale * mscale / sqrtf(float(n_embd_head_k));` with the "
                                        "same attn_factor passed to ggml_rope_ext (nothing cancels ggml's 1 + 0.1 ln "
                                        "s) and yarn_log_multiplier = 0.1 x `mscale_all_dim` as the converter writes "
                                        "it: every dimension x get_mscale(s, `mscale_all_dim`)^2, the rotated ones x "
                                        "get_mscale(s)^2 more; `mscale` is not read (DeepSeek's mscale 1 / "
                                        "mscale_all_dim 0: x1 on the nope, x get_mscale(s)^2 on the rope dimensions)",
                                        _REPO, "src/models/deepseek2.cpp", "59b9e36f872df37454c1a01a5dd4ea69ede65832",
                                        scheme="deepseek_yarn", versions="<7371", source=_PR17945,
                                        family="deepseek2_kq_scale"),
    "deepseek2_temperature": Rule("deepseek2_temperature", "`if (hparams.f_attn_temp_scale != 0.0f) { "
                                  "inp_attn_scale = build_inp_attn_scale(); }` then `Qcur = ggml_mul(ctx0, Qcur, "
                                  "inp_attn_scale);` on every layer: Llama 4's temperature in the DEEPSEEK2 graph, "
                                  "for Mistral Large 3 converted from Mistral's format (`llama_4_scaling` of "
                                  "params.json as attention.temperature_scale); whether the conversion of an HF "
                                  "DeepSeek config writes `llama_4_scaling_beta` was not read, so such a config stays "
                                  "unknown where the beta changes the scale", _REPO, "src/models/deepseek2.cpp",
                                  "59b9e36f872df37454c1a01a5dd4ea69ede65832", scheme="llama4",
                                  source="PR #17744 (\"model: add llama 4 scaling for mistral-large (deepseek "
                                  "arch)\", opened 2025-12-03), in the graph at 59b9e36f, a commit before b7371; "
                                  "its first build was not established"),
    "mistral_format_yarn": Rule("mistral_format_yarn", "Mistral-format conversion (params.json, not an HF config): "
                                "`mscale_all_dim = 1.0 if not yarn_params[\"apply_scale\"] else 0.0` written as "
                                "rope.scaling.yarn_log_multiplier before PR #22612, which makes `apply_scale` true "
                                "apply YaRN's magnitude (text found by the index's string search, commit not "
                                "recorded); the HF configs read here do not take this path", _REPO,
                                "convert_hf_to_gguf.py", "",
                                source="PR #22612 (\"Mistral format yarn apply_scale support\", opened 2026-05-02, "
                                "commit 048a490 per a third-party note that builds b9026 with it); its first build "
                                "was not established"),
    "convert_yarn": Rule("convert_yarn", "convert_hf_to_gguf writes `factor`, `original_max_position_embeddings`, "
                         "and `attention_factor` (or `attn_factor`) as rope.scaling.yarn_attn_factor; Ministral 3 "
                         "writes `mscale_all_dim` as rope.scaling.yarn_log_multiplier, DeepSeek-V2/V3 writes 0.1 x "
                         "`mscale_all_dim` there and the DEEPSEEK2 loader divides it back by 0.1, so the context "
                         "still gets `mscale_all_dim` (the division found by the index's string search without a "
                         "version; the llama-model.cpp read for gemma_scale predates both and reads the key as is)",
                         _REPO,
                         "convert_hf_to_gguf.py", "0024aa7417efd50a7c2a79e049dfbbbceb0beaaf"),
    "convert_longrope": Rule("convert_longrope", "Phi-3 conversion writes rope.scaling.attn_factor = sqrt(1 + ln s / "
                             "ln L), s = max_position_embeddings / L, L = `original_max_position_embeddings` "
                             "(`factor` and `attention_factor` are not read)", _REPO, "convert_hf_to_gguf.py",
                             "0024aa7417efd50a7c2a79e049dfbbbceb0beaaf", scheme="longrope", squared=True),
    "gemma_scale": Rule("gemma_scale", "f_attention_scale = 1/sqrt(n_embd/n_head) for the 27B size (Gemma 2: 46 "
                        "layers, Gemma 3: 62), else 1/sqrt(n_embd_head_k); `query_pre_attn_scalar` is not read",
                        _REPO, "src/llama-model.cpp", "00342301d01add50835550e8a916f12097d94517"),
    "llama4_temperature": Rule("llama4_temperature", "query x log(floor((pos + 1) / n_attn_temp_floor_scale) + 1) x "
                               "f_attn_temp_scale + 1 (llm_graph_input_attn_temp)", _REPO, "src/llama-graph.cpp",
                               "434f71a5b4d1ff9c9c9b59e08326f0fe3d15193a",
                               positions="pos 0-based: floor((pos + 1)/floor_scale) = floor(n/floor_scale)",
                               scheme="llama4"),
    "llama4_nope_layers": Rule("llama4_nope_layers", "the temperature on layers with (il + 1) % n_no_rope_layer_step "
                               "== 0, the step 4 (llama-hparams.h's default): `no_rope_layers` is not read; a GGUF "
                               "whose attention.sliding_window is 0 sets the step to n_layer instead (not modelled "
                               "here)", _REPO,
                               "src/llama-model.cpp", "00342301d01add50835550e8a916f12097d94517"),
    "qwen_logn": Rule("qwen_logn", "`use_logn_attn` has no GGUF key: load_hparams reads only the RMS-norm epsilon for "
                      "LLM_ARCH_QWEN (its graph file was not read)", _REPO,
                      "src/llama-model.cpp", "00342301d01add50835550e8a916f12097d94517"),
}

#: HF model types whose conversion writes ``mscale_all_dim`` as ``rope.scaling.yarn_log_multiplier``.
LOG_MUL_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek2", "ministral3"})
_DEEPSEEK2 = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek2"})


def _base(ms, notes, rules):
    if ms.model_type.startswith("gemma") and ms.hidden_size and ms.num_attention_heads:
        rules.append("gemma_scale")
        big = ms.n_layers == (46 if ms.model_type == "gemma2" else 62)
        base = 1.0 / math.sqrt(ms.hidden_size / ms.num_attention_heads if big else ms.head_dim)
        if ms.base_key == "query_pre_attn_scalar" and not math.isclose(base, ms.base_scale):
            notes.append("ignores `query_pre_attn_scalar` (the scale follows the model size)")
        return base
    return ms.base_scale


def _yarn_pre17945(ms, raf, notes, rules):
    """``(rope_sq, softmax_sq)`` of a YaRN config at a build before PR #17945; ``None``: not read for it."""
    r = ms.rope
    if ms.model_type == "ministral3":
        rules += ["convert_yarn", "mistral3_attn_factor_pre17945"]
        ignored = [k for k in ("mscale", "mscale_all_dim", "attention_factor") if getattr(r, k) is not None]
        if ignored:
            notes.append("ignores " + " and ".join(f"`{k}`" for k in ignored))
        return 1.0, 1.0
    if r.attention_factor is not None or (ms.format == "hf" and r.attn_factor is not None) or ms.format == "gguf":
        return None  # whether the context read rope.scaling.yarn_attn_factor (or a GGUF's keys) then was not read
    rules += ["convert_yarn", "yarn_attn_factor_pre17945"]
    rope_sq = mscale_sq(r.factor, 1.0) * raf ** 2
    if ms.model_type in _DEEPSEEK2:
        rules.append("deepseek2_kq_scale_pre17945")
        if r.mscale is not None and r.mscale != 1.0:
            notes.append("ignores `mscale`")
        return rope_sq, mscale_sq(r.factor, r.mscale_all_dim or 0.0) * raf ** 2
    ignored = [k for k in ("mscale", "mscale_all_dim") if getattr(r, k) is not None]
    if ignored:
        notes.append("ignores " + " and ".join(f"`{k}`" for k in ignored))
    return rope_sq, 1.0


def scale(ms, n, version=None):
    """The multiplier llama.cpp puts on ``q.k`` at ``n`` keys (a HF config as ``convert_hf_to_gguf`` converts it).

    ``version`` is a build (:class:`packaging.version.Version` of its number; ``b6000`` is build 6000)
    or None for the newest rules.  YaRN follows PR #17945's rules from build :data:`PR17945_BUILD`
    and the rules before it below that build.  ``llama_4_scaling_beta`` was not read: the value is
    unknown where it changes the scale.
    """
    label = NEWEST if version is None else f"b{version}"
    pre = version is not None and version < Version(str(PR17945_BUILD))
    r, notes, rules = ms.rope, [], []
    base = _base(ms, notes, rules)
    raf = (r.attn_factor or 1.0) if ms.format == "gguf" else 1.0  # rope.scaling.attn_factor
    rope_sq, softmax_sq = 1.0, 1.0
    if r.rope_type == "yarn" and pre:
        got = _yarn_pre17945(ms, raf, notes, rules)
        if got is None:
            return unknown(NAME, n, label, "yarn_attn_factor", ("before PR #17945 (b7371) the context's reading of "
                                                                "an attention factor was not read",))
        rope_sq, softmax_sq = got
    elif r.rope_type == "yarn":
        rules += ["convert_yarn", "yarn_attn_factor", "yarn_adjust"]
        log_mul = r.mscale_all_dim if ms.model_type in LOG_MUL_TYPES else None
        if log_mul:
            m = log_mul if ms.model_type in _DEEPSEEK2 and log_mul != 1.0 else 1.0
            rope_sq = mscale_sq(r.factor, m) / mscale_sq(r.factor, log_mul) * raf ** 2
            if r.mscale is not None and r.mscale != m:
                notes.append("ignores `mscale` (takes it to be 1)")
        else:
            rope_sq = mscale_sq(r.factor, 1.0) * raf ** 2
            ignored = [k for k in ("mscale", "mscale_all_dim") if getattr(r, k) is not None]
            if ignored:
                notes.append("ignores " + " and ".join(f"`{k}`" for k in ignored))
        if r.attention_factor is not None or (ms.format == "hf" and r.attn_factor is not None):
            notes.append("drops `attention_factor` (rope.scaling.yarn_attn_factor is overwritten for YaRN)")
        if ms.model_type in _DEEPSEEK2:
            rules.append("deepseek2_kq_scale")
            softmax_sq = rope_sq * mscale_sq(r.factor, log_mul or 0.0)
    elif r.rope_type == "longrope":
        L = r.original_max_position_embeddings or ms.max_position_embeddings
        s = ms.max_position_embeddings / L if ms.max_position_embeddings else r.factor
        rope_sq, rules = longrope_sq(s, L), ["convert_longrope"]
    temps = every_fourth(ms, [t for t in ms.temperatures if t.name == "llama4_temperature"], notes)
    rules += ["llama4_temperature", "llama4_nope_layers"] * bool(temps)
    if any(t.scheme == "qwen_logn" for t in ms.temperatures):
        notes.append("ignores `use_logn_attn`")
        rules.append("qwen_logn")
    return compose(NAME, ms, n, base=base, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=temps, notes=notes,
                   rules=rules, version=label, reads_layer_types=False,
                   unread_temps=[t for t in ms.temperatures if t.name == "llama_4_scaling_beta"])

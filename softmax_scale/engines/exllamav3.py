"""exllamav3: the multiplier on ``q.k`` as its ``RoPE`` class builds the cos/sin tables and its model files set ``sm_scale``.

``util/rope.py`` follows transformers' ``modeling_rope_utils`` with departures that changed between
releases (``RULES`` rows of family ``yarn``): YaRN's ``s`` is ``max_position_embeddings /
original_max_position_embeddings`` whenever the latter is set (``factor`` is read only without it);
before v1.0.0 ``mscale``/``mscale_all_dim`` are not read; from 78b319e (v1.0.0) their ratio is taken
whenever both are set, so ``mscale == mscale_all_dim`` collapses the factor to 1; from 65e724c (v1.3.0)
the ratio is taken only by the architectures that opt in (DeepSeek-V3), and ``llama_4_scaling_beta``
sets the static factor to 1.  LongRoPE's factor is ``sqrt(1 + ln s / ln L)`` whatever
``attention_factor`` says.  ``llama_4_scaling_beta``, read from the RoPE dict only, scales the query in
the RoPE kernel.  The model class is chosen by ``architectures[0]`` (Kimi K2's is
``DeepseekV3ForCausalLM``); Laguna reads its RoPE per layer type and refuses a flat one; an unknown
``rope_type`` is refused.
"""

from __future__ import annotations

from ._rules import NEWEST, EngineScale, Rule, compose, lengths_s, longrope_sq, mscale_sq, pick, refuse_rope_type, refuses, unknown

__all__ = ["NAME", "RULES", "scale"]

NAME = "exllamav3"
_REPO = "turboderp-org/exllamav3"
_ROPE = "exllamav3/util/rope.py"
_SRC = (_REPO, _ROPE, "da3ea0013c1b8e35c7cf1d9d87856b4e0d1c41b5")
#: v1.4.1, the snapshot read for the dispatch, Laguna and the refusal.
_AT = "4f8ad0121f483ba66a5336244a4c3b6d7210385e"

RULES = {
    "yarn": Rule("yarn", "cos/sin x `attention_factor`, default 0.1 ln s + 1; s = max_position_embeddings / "
                 "`original_max_position_embeddings` when that is set, else `factor`; `mscale`, `mscale_all_dim` "
                 "not read", *_SRC, scheme="deepseek_yarn", squared=True, versions="<1.0.0",
                 source="ended by 78b319e9bc997dcdcaebf732666d121ad716ffaa (v1.0.0)"),
    "yarn_mscale_ratio": Rule("yarn_mscale_ratio", "cos/sin x `attention_factor`; if unset get_mscale(s, `mscale`) / "
                              "get_mscale(s, `mscale_all_dim`) whenever both are set (1 when they are equal), else "
                              "get_mscale(s); s as before", _REPO, _ROPE, "78b319e9bc997dcdcaebf732666d121ad716ffaa",
                              scheme="deepseek_yarn", squared=True, versions=">=1.0.0,<1.3.0",
                              source="78b319e (v1.0.0); ended by 65e724c (v1.3.0), exllamav3 issue #259",
                              family="yarn"),
    "yarn_opt_in": Rule("yarn_opt_in", "cos/sin x `attention_factor`; if unset the `mscale`/`mscale_all_dim` ratio only "
                        "for architectures that set yarn_mscale_ratio (DeepSeek-V3), else 1 when "
                        "`llama_4_scaling_beta` is set, else get_mscale(s); s as before", _REPO, _ROPE,
                        "65e724c45eb6bad12803af157379665285a71439", scheme="deepseek_yarn", squared=True,
                        versions=">=1.3.0", source="65e724c (v1.3.0), fixes exllamav3 issue #259", family="yarn"),
    "longrope": Rule("longrope", "cos/sin x sqrt(1 + ln(a/b) / ln b), a = max_position_embeddings, b = "
                     "`original_max_position_embeddings`; `attention_factor` not read", *_SRC, scheme="longrope",
                     squared=True),
    "deepseek_softmax": Rule("deepseek_softmax", "DeepseekV3ForCausalLM: sm_scale = qk_head_dim^-1/2 x get_mscale("
                             "`factor`, `mscale_all_dim`)^2 when `mscale_all_dim` is set (the architecture arrived "
                             "in 2683f74, v1.3.0)", _REPO, "exllamav3/architecture/deepseek_v3.py",
                             "d4201707352f4de3da5295594ae79dd29761382a", scheme="deepseek_yarn", versions=">=1.3.0"),
    "gemma_scale": Rule("gemma_scale", "Gemma 2 and 3: sm_scale = `query_pre_attn_scalar`^-1/2 (defaults 224 and 256)",
                        _REPO, "exllamav3/architecture/gemma3.py", "a86b8f3ee9eb11e0442d2aa7bb150efdde56bb45"),
    "llama_4_scaling_beta": Rule("llama_4_scaling_beta", "the RoPE kernel multiplies the query (all of its dimensions, "
                                 "queries only) by 1 + `llama_4_scaling_beta` ln(1 + floor(pos / "
                                 "`original_max_position_embeddings`)); first in 8e4f4fa (v0.0.17), its semantics "
                                 "fixed for Ministral 3 in a6dd5d8: earlier versions were not read", _REPO,
                                 "exllamav3/exllamav3_ext/rope.cu", "a6dd5d883e5702f2777ce9f5f9ae83fc8058b45e",
                                 positions="pos 0-based: floor(pos / L) = floor((n - 1) / L)", scheme="llama4",
                                 versions=">=1.4.1", source="a6dd5d8 (v1.4.1)"),
    "architectures": Rule("architectures", "Config.from_directory: `arch = archs[0]`, `assert arch in architectures, "
                          "f\"Unknown architecture {arch} in {config_filename}\"`, then that architecture's config class: "
                          "the class is chosen by `architectures[0]`, not by `model_type` (Kimi K2: "
                          "DeepseekV3ForCausalLM)", _REPO, "exllamav3/model/config.py", _AT),
    "laguna": Rule("laguna", "LagunaForCausalLM: `rope_parameters = self.read_cfg(dict, \"rope_parameters\", "
                   "no_default)`, each layer's RoPE from `rope_parameters[layer_type]` (sliding layers: default "
                   "RoPE): a flat `rope_scaling`, or a `rope_parameters` not given per layer type, is refused "
                   "(arrived in ba89216, first in v1.2.0)", _REPO, "exllamav3/architecture/laguna.py", _AT,
                   versions=">=1.2.0"),
    "rope_type": Rule("rope_type", "RoPE.__init__: `case _: raise ValueError(f\"Unknown rope_type: {t}\")` for a type "
                      "other than default, mrope, proportional, llama3, linear, yarn, longrope, su", _REPO, _ROPE, _AT),
}

#: ``architectures[0]`` -> the model type whose rules here it runs (the classes of ``exllamav3/architecture/``).
ARCHITECTURES = {"DeepseekV3ForCausalLM": "deepseek_v3", "Gemma2ForCausalLM": "gemma2",
                 "Gemma3ForCausalLM": "gemma3_text", "Gemma3ForConditionalGeneration": "gemma3",
                 "LagunaForCausalLM": "laguna"}
#: The ``rope_type`` values its RoPE class builds.
ROPE_TYPES = frozenset({"default", "mrope", "proportional", "llama3", "linear", "yarn", "longrope", "su"})

#: Model types whose exllamav3 architecture opts into the ``mscale``/``mscale_all_dim`` ratio and MLA.
DEEPSEEK_TYPES = frozenset({"deepseek_v3"})
#: Model types whose architecture sets ``sm_scale`` from ``query_pre_attn_scalar``.
GEMMA_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text"})


def _yarn_sq(ms, row, notes, model):
    r = ms.rope
    s = lengths_s(ms, notes)
    if r.attention_factor is not None:
        return r.attention_factor ** 2
    both = bool(r.mscale and r.mscale_all_dim)
    ratio = row == "yarn_mscale_ratio" or (row == "yarn_opt_in" and model in DEEPSEEK_TYPES)
    if both and ratio:
        return mscale_sq(s, r.mscale) / mscale_sq(s, r.mscale_all_dim)
    ignored = [k for k in ("mscale", "mscale_all_dim") if getattr(r, k) is not None]
    if ignored:
        notes.append("ignores " + " and ".join(f"`{k}`" for k in ignored))
    if row == "yarn_opt_in" and any(t.name == "llama_4_scaling_beta" for t in ms.temperatures):
        notes.append("sets the YaRN factor to 1 under `llama_4_scaling_beta`")
        return 1.0
    return mscale_sq(s, 1.0)


def _model(ms, rules) -> str:
    """The model type whose architecture runs the config: by ``architectures[0]`` when given, else ``model_type``."""
    if not ms.architectures:
        return ms.model_type
    rules.append("architectures")
    return ARCHITECTURES.get(ms.architectures[0], ms.architectures[0])


def scale(ms, n, version=None):
    """The multiplier exllamav3 puts on ``q.k`` at ``n`` keys (``version``: a :class:`packaging.version.Version` or None)."""
    label = NEWEST if version is None else str(version)
    r, notes, rules, rope_sq, softmax_sq, base = ms.rope, [], [], 1.0, 1.0, ms.base_scale
    model = _model(ms, rules)
    if refuses(ms, ROPE_TYPES):
        return refuse_rope_type(NAME, ms, n, label, RULES["rope_type"])
    laguna = model == "laguna"
    if laguna:
        row = pick(RULES, "laguna", version)
        if row is None:
            return unknown(NAME, n, label, "laguna")
        if not ms.rope_per_layer_type:
            return EngineScale(NAME, n, None, notes=(f"refuses the config: {row.text}",), rules=("laguna",),
                               version=label)
        rules.append("laguna")
    deepseek = ms.has_mla_head and model in DEEPSEEK_TYPES
    if (ms.has_mla_head and not deepseek) or any(t.name != "llama_4_scaling_beta" for t in ms.temperatures) or \
            (ms.base_key != "head_dim" and model not in GEMMA_TYPES):
        return compose(NAME, ms, n, base=base, rope_sq=None, version=label,
                       notes=["its model file for this config was not read (an MLA head other than DeepSeek-V3's, a "
                              "base-scale key or a temperature rule)"])
    if model in GEMMA_TYPES:
        rules.append("gemma_scale")
    if deepseek:
        row = pick(RULES, "deepseek_softmax", version)
        if row is None:
            return unknown(NAME, n, label, "deepseek_softmax")
        if r.rope_type != "default" and r.mscale_all_dim:
            softmax_sq, rules = mscale_sq(r.factor, r.mscale_all_dim), [*rules, "deepseek_softmax"]
    if r.rope_type == "yarn":
        row = pick(RULES, "yarn", version)
        if row is None:
            return unknown(NAME, n, label, "yarn")
        rope_sq = _yarn_sq(ms, row.name, notes, model)
        rules.append(row.name)
    elif r.rope_type == "longrope":
        L = r.original_max_position_embeddings or ms.max_position_embeddings
        rope_sq = longrope_sq(ms.max_position_embeddings / L, L)
        if r.attention_factor is not None:
            notes.append("drops `attention_factor`")
        rules.append("longrope")
    beta = [t for t in ms.temperatures if t.name == "llama_4_scaling_beta"]
    in_rope = [t for t in beta if t.key.startswith("rope_")]  # read from the RoPE dict only
    if len(in_rope) < len(beta):
        notes.append("ignores a top-level `llama_4_scaling` (reads `llama_4_scaling_beta` from the RoPE dict only)")
    applied = in_rope if in_rope and pick(RULES, "llama_4_scaling_beta", version) is not None else []
    rules += ["llama_4_scaling_beta"] * bool(applied)
    return compose(NAME, ms, n, base=base, rope_sq=rope_sq, softmax_sq=softmax_sq, temps=applied, notes=notes,
                   rules=rules, version=label, reads_layer_types=laguna,
                   unread_temps=[t for t in in_rope if t not in applied])

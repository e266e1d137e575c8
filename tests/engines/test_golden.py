"""Golden numbers of issue 31: each expected value computed here from the formula (math.log), not from the package."""

import math

import numpy as np
import pytest

from softmax_scale.engines import ENGINES, engine_scales

from .configs import DEEPSEEK_V3, GEMMA3, LLAMA4, QWEN_V1, YARN, YARN_AF1

N = [1, 2048, 4096, 8191, 8192, 32768, 131072]
ALL = list(ENGINES)
#: exllamav3's and TensorRT-LLM's model files for these were not read: no value for MLA (other than
#: exllamav3's DeepSeek-V3), base-scale keys or temperature rules.
READ_MODEL_FILES = [e for e in ALL if e not in ("exllamav3", "tensorrt-llm", "onnxruntime-genai")]


def rel(table, engine):
    """The engine's multiplier relative to 1/sqrt(head_dim)."""
    e = table.engines[engine]
    return e.scale * math.sqrt(table.model.head_dim)


@pytest.mark.parametrize("engine", ALL)
def test_yarn_without_attention_factor_is_the_mscale_squared_everywhere(engine):
    t = engine_scales({**YARN, "rope_scaling": {**YARN["rope_scaling"], "beta_fast": 32.0}}, N)
    np.testing.assert_allclose(rel(t, engine), (1 + 0.1 * math.log(4)) ** 2, rtol=1e-12)
    assert math.isclose((1 + 0.1 * math.log(4)) ** 2, 1.2965, abs_tol=5e-5)


@pytest.mark.parametrize("engine, expected", [("transformers", 1.0), ("reference", 1.0),
                                              ("vllm", (1 + 0.1 * math.log(4)) ** 2),
                                              ("sglang", (1 + 0.1 * math.log(4)) ** 2),
                                              ("llama.cpp", (1 + 0.1 * math.log(4)) ** 2),
                                              ("mlx-lm", (1 + 0.1 * math.log(4)) ** 2),
                                              ("tensorrt-llm", (1 + 0.1 * math.log(4)) ** 2)])
def test_attention_factor_one_is_honoured_by_transformers_and_dropped_by_vllm(engine, expected):
    t = engine_scales(YARN_AF1, N, versions={"vllm": "0.29.0"})
    np.testing.assert_allclose(rel(t, engine), expected, rtol=1e-12)
    if expected != 1.0:
        assert "drops `attention_factor`" in " ".join(t.engines[engine].notes)
        assert t.disagreements(engine)


@pytest.mark.parametrize("engine", READ_MODEL_FILES)
def test_deepseek_v3_is_the_mscale_squared_on_one_over_sqrt_192(engine):
    t = engine_scales(DEEPSEEK_V3, N)
    assert t.model.head_dim == 128 + 64 and t.model.rope_dim == 64
    np.testing.assert_allclose(t.engines[engine].scale, (1 + 0.1 * math.log(40)) ** 2 / math.sqrt(192), rtol=1e-12)
    assert math.isclose((1 + 0.1 * math.log(40)) ** 2, 1.8739, abs_tol=5e-5)
    assert t.engines[engine].nope_scale is None  # mscale == mscale_all_dim: rope and nope dims alike


def test_qwen_logn_in_the_reference_and_tensorrt_llm_only():
    n = np.array([1, 2048, 2049, 4096, 32767])
    t = engine_scales(QWEN_V1, n)
    expected = np.where(n > 2048, np.log(n) / math.log(2048), 1.0)
    np.testing.assert_allclose(rel(t, "reference"), expected, rtol=1e-12)
    assert math.isclose(math.log(4096, 2048), 1.0909, abs_tol=5e-5)
    np.testing.assert_allclose(rel(t, "tensorrt-llm"), expected, rtol=1e-12)  # its TensorRT backend's logn_scaling
    assert "qwen_logn" in t.engines["tensorrt-llm"].rules
    for engine in ("vllm", "sglang", "llama.cpp"):
        np.testing.assert_allclose(rel(t, engine), 1.0, rtol=1e-12)
        assert "ignores `use_logn_attn`" in t.engines[engine].notes


def test_llama4_temperature_on_the_nope_layers_only():
    n = np.array([1, 8191, 8192, 16384, 32768])
    t = engine_scales(LLAMA4, n)
    expected = 1 + 0.1 * np.log1p(np.floor(n / 8192))  # q x (1 + 0.1 ln(1 + floor((p + 1)/8192))), p = n - 1
    nope = tuple(i for i in range(48) if (i + 1) % 4 == 0)
    for engine in READ_MODEL_FILES:
        e = t.engines[engine]
        assert e.layers == nope
        np.testing.assert_allclose(e.scale * math.sqrt(128), expected, rtol=1e-12)
        np.testing.assert_allclose(e.other_scale * math.sqrt(128), 1.0, rtol=1e-12)
    assert math.isclose(expected[-1], 1 + 0.1 * math.log(5)) and math.isclose(expected[-1], 1.1609, abs_tol=5e-5)
    assert expected[1] == 1.0  # 8,191 keys: still 1
    assert t.engines["exllamav3"].scale is None and "not read" in t.engines["exllamav3"].notes[0]


def test_llama4_explicit_no_rope_layers_are_read_by_some_engines_only():
    cfg = {**LLAMA4, "text_config": {**LLAMA4["text_config"], "no_rope_layers": [1, 0] * 24}}
    t = engine_scales(cfg, [32768])
    for engine in ("transformers", "vllm", "reference"):
        assert t.engines[engine].layers == tuple(range(1, 48, 2))
    for engine in ("sglang", "llama.cpp"):  # NoPE fixed on every 4th layer
        assert t.engines[engine].layers == tuple(range(3, 48, 4))
        assert "ignores `no_rope_layers` (NoPE on every 4th layer)" in t.engines[engine].notes
        assert t.disagreements(engine)


@pytest.mark.parametrize("engine", READ_MODEL_FILES)
def test_gemma3_query_pre_attn_scalar_gives_one_sixteenth(engine):
    t = engine_scales(GEMMA3, [1, 4096])
    np.testing.assert_allclose(t.engines[engine].scale, 1 / 16, rtol=1e-12)


def test_gemma_query_pre_attn_scalar_replaces_the_head_dimension():
    cfg = {**GEMMA3, "query_pre_attn_scalar": 168}
    t = engine_scales(cfg, [1])
    np.testing.assert_allclose(t.engines["reference"].scale, 168 ** -0.5, rtol=1e-12)
    np.testing.assert_allclose(t.engines["transformers"].scale, 168 ** -0.5, rtol=1e-12)
    np.testing.assert_allclose(t.engines["llama.cpp"].scale, 256 ** -0.5, rtol=1e-12)  # by model size, 34 layers
    assert "ignores `query_pre_attn_scalar`" in t.engines["llama.cpp"].notes[0]


def test_ministral_mscale_is_ignored_by_vllm_before_56446_and_sglang_before_31232():
    cfg = {**YARN, "model_type": "ministral3", "rope_parameters": {
        "rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16384, "mscale": 1.0,
        "mscale_all_dim": 1.0, "rope_theta": 1e9}}
    del cfg["rope_scaling"]
    t = engine_scales(cfg, [1], versions={"vllm": "0.29.0", "sglang": "0.5.13"})
    for engine in ("transformers", "reference", "llama.cpp", "mlx-lm", "tensorrt-llm"):
        np.testing.assert_allclose(rel(t, engine), 1.0, rtol=1e-12)
    for engine in ("vllm", "sglang"):
        np.testing.assert_allclose(rel(t, engine), (1 + 0.1 * math.log(16)) ** 2, rtol=1e-12)
        assert "ignores `mscale` and `mscale_all_dim`" in t.engines[engine].notes


def test_vllm_attention_factor_64_asks_one_gets_two():
    """vLLM #46280: factor 64, attention_factor 1.0 -> 0.1 ln 64 + 1 = 1.4159 on cos/sin, 2.005 on q.k (before #56446)."""
    cfg = {**YARN, "max_position_embeddings": 64 * 32768,
           "rope_scaling": {**YARN["rope_scaling"], "factor": 64.0, "attention_factor": 1.0}}
    t = engine_scales(cfg, [1], versions={"vllm": "0.29.0"})
    assert math.isclose(1 + 0.1 * math.log(64), 1.4159, abs_tol=5e-5)
    np.testing.assert_allclose(rel(t, "vllm"), (1 + 0.1 * math.log(64)) ** 2, rtol=1e-12)
    assert math.isclose(float(rel(t, "vllm")[0]), 2.005, abs_tol=5e-4)


def test_vllms_spelling_attn_factor_is_read_by_vllm_and_not_by_transformers():
    cfg = {**YARN, "rope_scaling": {**YARN["rope_scaling"], "attn_factor": 0.5}}
    t = engine_scales(cfg, [1], versions={"vllm": "0.29.0"})
    np.testing.assert_allclose(rel(t, "vllm"), (0.5 * (1 + 0.1 * math.log(4))) ** 2, rtol=1e-12)
    np.testing.assert_allclose(rel(t, "transformers"), (1 + 0.1 * math.log(4)) ** 2, rtol=1e-12)
    assert "ignores `attn_factor` (reads `attention_factor`)" in t.engines["transformers"].notes


def test_exllamav3_takes_s_from_the_lengths_not_from_factor():
    """exllamav3: s = max_position_embeddings / original_max_position_embeddings whenever the latter is set."""
    cfg = {**YARN, "max_position_embeddings": 8 * 32768}
    t = engine_scales(cfg, [1])
    np.testing.assert_allclose(rel(t, "exllamav3"), (1 + 0.1 * math.log(8)) ** 2, rtol=1e-12)
    np.testing.assert_allclose(rel(t, "transformers"), (1 + 0.1 * math.log(4)) ** 2, rtol=1e-12)
    assert "not `factor`" in t.engines["exllamav3"].notes[0]


# Real config shapes: the golden values from the formulas here, the configs as their public files spell them.

def test_ministral3_wrapped_config_is_read_from_its_text_config():
    """Ministral-3-14B: mistral3 at the top, ministral3 in text_config; YaRN 16 with mscale = mscale_all_dim = 1 (a
    factor 1 on cos/sin) and beta 0.1 at 16,384: x(1 + 0.1 ln 2) = 1.0693 at 32,768 keys (p = 32,767)."""
    from .configs import MINISTRAL3_WRAPPED

    t = engine_scales(MINISTRAL3_WRAPPED, [1, 16384, 32768])
    assert t.model.model_type == "ministral3" and t.model.wrapper == "mistral3"
    assert t.model.architectures == ("Mistral3ForConditionalGeneration",)
    want = np.array([1.0, 1.0, 1 + 0.1 * math.log(2)])
    assert round(want[-1], 4) == 1.0693
    # SGLang after PR #31232 takes the mscale ratio (1.0) and its Ministral3Attention the beta (0.5.6.post1 on)
    for engine in ("transformers", "reference", "mlx-lm", "exllamav3", "sglang"):
        np.testing.assert_allclose(rel(t, engine), want, rtol=1e-12)
    # llama.cpp: the converter's ministral3 path writes mscale_all_dim as yarn_log_multiplier: the ratio, 1.0
    np.testing.assert_allclose(rel(t, "llama.cpp")[:2], 1.0, rtol=1e-12)
    before = engine_scales(MINISTRAL3_WRAPPED, [1, 16384], versions={"sglang": "0.5.13"})
    np.testing.assert_allclose(rel(before, "sglang"), (1 + 0.1 * math.log(16)) ** 2, rtol=1e-12)
    assert round((1 + 0.1 * math.log(16)) ** 2, 4) == 1.6314


def test_ministral3_top_level_model_type_would_miss_every_ministral3_rule():
    """The same keys read with the wrapper's model_type (what the reader did): transformers has no beta rule for it."""
    from .configs import MINISTRAL3_WRAPPED

    flat = {**MINISTRAL3_WRAPPED["text_config"], "model_type": "mistral3"}
    assert engine_scales(flat, [32768]).engines["transformers"].scale is not None
    assert np.isnan(engine_scales(flat, [32768]).engines["transformers"].scale).all()


def test_text_config_that_is_not_an_object_is_refused_naming_it():
    from .configs import MINISTRAL3_WRAPPED

    with pytest.raises(ValueError, match=r"`text_config` must be an object"):
        engine_scales({**MINISTRAL3_WRAPPED, "text_config": "ministral3"}, [1])


def test_kimi_k2_runs_deepseek_v3_in_mlx_lm_by_its_remap_and_in_exllamav3_by_its_class():
    """Kimi K2: YaRN 32, mscale = mscale_all_dim = 1: (0.1 ln 32 + 1)^2 = 1.8133 on the whole q.k, 1/sqrt(192)."""
    from .configs import KIMI_K2

    t = engine_scales(KIMI_K2, [1, 100000])
    want = (1 + 0.1 * math.log(32)) ** 2
    assert round(want, 4) == 1.8133
    for engine in ("mlx-lm", "exllamav3", "transformers", "vllm", "reference"):
        np.testing.assert_allclose(t.engines[engine].scale * math.sqrt(192), want, rtol=1e-12)
    assert "model_remapping" in t.engines["mlx-lm"].rules
    assert "architectures" in t.engines["exllamav3"].rules
    # without the class name exllamav3 dispatches nothing for kimi_k2, and without the remap mlx-lm has no file
    bare = {k: v for k, v in KIMI_K2.items() if k != "architectures"}
    assert engine_scales(bare, [1]).engines["exllamav3"].scale is None


def test_onnxruntime_genai_phi3_128k_is_make_mscale_su():
    """Phi-3-mini-128k: s = 131072 / 4096 = 32, sqrt(1 + ln 32 / ln 4096) on cos/sin: 1 + 5/12 = 1.4167 on q.k."""
    from .configs import PHI3_MINI_128K

    t = engine_scales(PHI3_MINI_128K, [1, 100000])
    want = 1 + math.log(32) / math.log(4096)
    assert round(want, 4) == 1.4167
    np.testing.assert_allclose(t.engines["onnxruntime-genai"].scale * math.sqrt(96), want, rtol=1e-12)
    no_type = {**PHI3_MINI_128K, "rope_scaling": {**{k: v for k, v in PHI3_MINI_128K["rope_scaling"].items()
                                                     if k != "type"}, "rope_type": "longrope"}}
    e = engine_scales(no_type, [1]).engines["onnxruntime-genai"]
    assert e.scale is None and "`rope_params[\"type\"]`" in e.notes[0]


def test_llama_yarn_attention_factor_one_in_vllm_0_29_0_and_newest():
    """vLLM up to 0.29.0 drops attention_factor: (0.1 ln 4 + 1)^2 = 1.2965; after PR #56446 it honours it: 1.0."""
    old = engine_scales(YARN_AF1, [1, 32768], versions={"vllm": "0.29.0"})
    new = engine_scales(YARN_AF1, [1, 32768])
    np.testing.assert_allclose(rel(old, "vllm"), (1 + 0.1 * math.log(4)) ** 2, rtol=1e-12)
    np.testing.assert_allclose(rel(new, "vllm"), 1.0, rtol=1e-12)
    assert round((1 + 0.1 * math.log(4)) ** 2, 4) == 1.2965


@pytest.mark.parametrize("engine, rejects", [("transformers", False), ("sglang", True), ("exllamav3", True),
                                             ("mlx-lm", True)])
def test_an_unknown_rope_type_is_refused_by_the_engines_that_refuse_it(engine, rejects):
    cfg = {**YARN, "rope_scaling": {**YARN["rope_scaling"], "rope_type": "foo"}}
    t = engine_scales(cfg, [1])
    assert t.model.unknown_keys[0] == "rope_scaling.rope_type"
    e = t.engines[engine]
    assert (e.scale is None and e.notes[0].startswith("refuses the config: rope_type 'foo'")) == rejects


def test_an_unknown_layer_types_entry_is_flagged():
    from .configs import LAGUNA

    cfg = {**LAGUNA, "layer_types": ["mystery_attention", *LAGUNA["layer_types"][1:]]}
    t = engine_scales(cfg, [1])
    assert "layer_types entry 'mystery_attention'" in t.model.unknown_keys
    assert any("mystery_attention" in note for note in t.notes)
    assert not engine_scales(LAGUNA, [1]).model.unknown_keys


def test_laguna_per_layer_type_read_by_mlx_lm_and_exllamav3_flat_refused_or_default():
    """mlx-lm reads Laguna's RoPE only nested: YaRN 64 there, whose factor it takes from mscale (attention_factor
    dropped): (0.1 ln 64 + 1)^2 = 2.0047 on the rotated half of the full layers; flat: default RoPE, x1.
    exllamav3 reads the nested form (attention_factor 1: x1) and refuses the flat one."""
    from .configs import LAGUNA, LAGUNA_FLAT

    nested = engine_scales(LAGUNA, [1, 100000])
    full = tuple(i for i in range(40) if (i + 1) % 4 == 0)
    e = nested.engines["mlx-lm"]
    assert e.layers == full
    np.testing.assert_allclose(e.scale * math.sqrt(128), (1 + 0.1 * math.log(64)) ** 2, rtol=1e-12)
    np.testing.assert_allclose(e.nope_scale * math.sqrt(128), 1.0, rtol=1e-12)
    np.testing.assert_allclose(nested.engines["exllamav3"].scale * math.sqrt(128), 1.0, rtol=1e-12)
    flat = engine_scales(LAGUNA_FLAT, [1, 100000])
    np.testing.assert_allclose(flat.engines["mlx-lm"].scale * math.sqrt(128), 1.0, rtol=1e-12)
    assert flat.engines["exllamav3"].scale is None
    assert flat.engines["exllamav3"].notes[0].startswith("refuses the config")


def test_mlx_lm_applies_the_beta_only_in_ministral3_and_long_mscale_only_in_phimoe():
    from .configs import MINISTRAL3, PHI3_MINI_128K

    other = engine_scales({**MINISTRAL3, "model_type": "mistral"}, [65537]).engines["mlx-lm"]
    np.testing.assert_allclose(other.scale * math.sqrt(128), 1.0, rtol=1e-12)  # ratio 1, no beta in llama.py
    assert any("ministral3.py only" in note for note in other.notes)
    cfg = {**PHI3_MINI_128K, "rope_scaling": {**PHI3_MINI_128K["rope_scaling"], "long_mscale": 1.5}}
    np.testing.assert_allclose(engine_scales(cfg, [1]).engines["mlx-lm"].scale * math.sqrt(96),
                               1 + math.log(32) / math.log(4096), rtol=1e-12)
    moe = engine_scales({**cfg, "model_type": "phimoe", "architectures": ["PhiMoEForCausalLM"]}, [1])
    np.testing.assert_allclose(moe.engines["mlx-lm"].scale * math.sqrt(96), 1.5 ** 2, rtol=1e-12)


def test_gemma3_27b_wrapped_is_one_over_sqrt_168_where_read():
    """Gemma 3 27B: query_pre_attn_scalar 168 (transformers, mlx-lm, exllamav3 by its class) and llama.cpp's 62-layer
    rule 1/sqrt(n_embd/n_head) = 1/sqrt(5376/32) agree; linear RoPE puts no factor on q.k."""
    from .configs import GEMMA3_27B

    t = engine_scales(GEMMA3_27B, [1, 100000])
    assert t.model.model_type == "gemma3_text" and t.model.head_dim == 128
    for engine in ("transformers", "reference", "llama.cpp", "exllamav3", "mlx-lm", "ollama"):
        np.testing.assert_allclose(t.engines[engine].scale, 168 ** -0.5, rtol=1e-12)
    assert "gemma_scale" in t.engines["exllamav3"].rules and "gemma_scale" in t.engines["llama.cpp"].rules

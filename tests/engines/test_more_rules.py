"""LongRoPE in vLLM and SGLang, exllamav3's MLA and Gemma, mlx-lm and TensorRT-LLM, GLM's MLA head: goldens from the formulas."""

import math

import numpy as np
import pytest

from softmax_scale.engines import engine_scales, read_config

from .configs import DEEPSEEK_V3, GEMMA3, LLAMA4, YARN

PHI3 = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 48, "short_factor": [1.0] * 48}}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_longrope_is_one_plus_ln_s_over_ln_l_on_q_k(engine):
    """Phi-3-mini-128k: s = 131072 / 4096 = 32, L = 4096: 1 + ln 32 / ln 4096 = 1 + 5/12 on q.k, at every length."""
    t = engine_scales(PHI3, [1, 4096, 4097, 131072])
    np.testing.assert_allclose(t.engines[engine].scale * math.sqrt(96), 1 + 5 / 12, rtol=1e-12)
    cfg = {**PHI3, "rope_scaling": {**PHI3["rope_scaling"], "attention_factor": 1.0}}
    assert "drops `attention_factor`" in engine_scales(cfg, [1]).engines[engine].notes


def test_exllamav3_deepseek_v3_is_the_mscale_squared_from_1_3():
    t = engine_scales(DEEPSEEK_V3, [1, 65536])
    np.testing.assert_allclose(t.engines["exllamav3"].scale, (1 + 0.1 * math.log(40)) ** 2 / math.sqrt(192), rtol=1e-12)
    assert t.engines["exllamav3"].nope_scale is None
    old = engine_scales(DEEPSEEK_V3, [1], versions={"exllamav3": "1.2.1"}).engines["exllamav3"]
    assert old.scale is None
    assert "deepseek_softmax" in old.notes[0]


def test_exllamav3_gemma_reads_query_pre_attn_scalar():
    t = engine_scales({**GEMMA3, "query_pre_attn_scalar": 168}, [1])
    np.testing.assert_allclose(t.engines["exllamav3"].scale, 168 ** -0.5, rtol=1e-12)


def test_mlx_lm_puts_llama4_on_every_fourth_layer_and_tensorrt_llm_reads_no_rope_layers():
    cfg = {**LLAMA4, "text_config": {**LLAMA4["text_config"], "no_rope_layers": [1, 0] * 24}}
    t = engine_scales(cfg, [32768])
    want = (1 + 0.1 * math.log(5)) / math.sqrt(128)
    assert t.engines["mlx-lm"].layers == tuple(range(3, 48, 4))
    assert t.engines["tensorrt-llm"].layers == tuple(range(1, 48, 2))
    for engine in ("mlx-lm", "tensorrt-llm"):
        np.testing.assert_allclose(t.engines[engine].scale, want, rtol=1e-12)


def test_mlx_lm_and_tensorrt_llm_take_the_mscale_ratio_and_drop_attention_factor():
    cfg = {**YARN, "rope_scaling": {**YARN["rope_scaling"], "mscale": 0.5, "mscale_all_dim": 1.0,
                                    "attention_factor": 1.0}}
    t = engine_scales(cfg, [1])
    want = ((1 + 0.05 * math.log(4)) / (1 + 0.1 * math.log(4))) ** 2
    for engine in ("mlx-lm", "tensorrt-llm"):
        np.testing.assert_allclose(t.engines[engine].scale * math.sqrt(128), want, rtol=1e-12)
        assert "drops `attention_factor`" in t.engines[engine].notes
    np.testing.assert_allclose(t.engines["transformers"].scale * math.sqrt(128), 1.0, rtol=1e-12)


def test_glm_mla_head_is_nope_plus_rope_not_the_absorbed_576():
    """GLM-4.7-Flash's shape: q.k over qk_nope_head_dim + qk_rope_head_dim = 192 + 64, not kv_lora_rank + 64."""
    cfg = {"model_type": "glm4_moe_lite", "hidden_size": 2048, "num_attention_heads": 20, "num_hidden_layers": 47,
           "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "kv_lora_rank": 512, "v_head_dim": 256}
    ms = read_config(cfg)
    assert (ms.head_dim, ms.rope_dim, ms.has_mla_head) == (256, 64, True)
    t = engine_scales(cfg, [1])
    np.testing.assert_allclose(t.engines["reference"].scale, 1 / math.sqrt(256), rtol=1e-12)
    assert not np.isclose(t.engines["reference"].scale[0], 1 / math.sqrt(576))


def test_partial_rotary_factor_is_the_rotated_part_not_an_mla_head():
    ms = read_config({**YARN, "partial_rotary_factor": 0.25})
    assert (ms.head_dim, ms.rope_dim, ms.is_mla, ms.has_mla_head) == (128, 32, True, False)
    with pytest.raises(ValueError, match="`partial_rotary_factor` must be <= 1"):
        read_config({**YARN, "partial_rotary_factor": 2.0})


def test_bad_layer_types_and_a_beta_without_its_length_name_the_key():
    from .configs import LAGUNA, MINISTRAL3

    with pytest.raises(ValueError, match="`layer_types` must have `num_hidden_layers` \\(40\\) entries"):
        read_config({**LAGUNA, "layer_types": ["full_attention"] * 3})
    rope = {k: v for k, v in MINISTRAL3["rope_parameters"].items() if k != "original_max_position_embeddings"}
    with pytest.raises(ValueError, match="`rope_parameters.original_max_position_embeddings` is required"):
        read_config({**MINISTRAL3, "rope_parameters": rope})


def test_the_top_level_llama_4_scaling_mapping_is_read_too():
    from .configs import MINISTRAL3

    rope = {k: v for k, v in MINISTRAL3["rope_parameters"].items() if k != "llama_4_scaling_beta"}
    ms = read_config({**MINISTRAL3, "rope_parameters": rope,
                      "llama_4_scaling": {"beta": 0.1, "original_max_position_embeddings": 16384}})
    (t,) = ms.temperatures
    assert (t.name, dict(t.params), t.shift, ms.unknown_keys) == (
        "llama_4_scaling_beta", {"floor_scale": 16384, "attn_scale": 0.1}, 1, ())


def test_tensorrt_llm_logn_table_ends_at_max_position_embeddings():
    """generate_logn_scaling has one entry per position up to max_position_embeddings: log_L n past L, none after."""
    from .configs import QWEN_V1

    n = np.array([1, 2048, 2049, 8192, 8193])
    e = engine_scales({**QWEN_V1, "max_position_embeddings": 8192}, n).engines["tensorrt-llm"]
    got = e.scale * math.sqrt(128)
    np.testing.assert_allclose(got[:4], [1.0, 1.0, math.log(2049) / math.log(2048), 13 / 11], rtol=1e-12)
    assert np.isnan(got[4]) and any("max_position_embeddings = 8192" in x for x in e.notes)

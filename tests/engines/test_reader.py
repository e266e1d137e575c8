"""read_config: both spellings of the RoPE dict, nested text configs, MLA, GGUF metadata, unknown keys, bad configs."""

import json
import math

import numpy as np
import pytest

from softmax_scale.engines import engine_scales, read_config

from .configs import DEEPSEEK_V3, LLAMA4, QWEN_V1, YARN


def test_rope_scaling_and_rope_parameters_read_alike():
    new = {k: v for k, v in YARN.items() if k != "rope_scaling"} | {"rope_parameters": {**YARN["rope_scaling"],
                                                                                         "rope_theta": 1e6}}
    a, b = read_config(YARN), read_config(new)
    assert a.rope.factor == b.rope.factor == 4.0 and a.train_length == b.train_length == 32768
    assert b.train_length_key == "rope_parameters.original_max_position_embeddings"
    assert b.unknown_keys == ()


def test_per_layer_type_rope_parameters_read_the_full_attention_layers():
    cfg = {**YARN, "rope_scaling": None, "rope_parameters": {"full_attention": YARN["rope_scaling"],
                                                             "sliding_attention": {"rope_type": "default"}}}
    assert read_config(cfg).rope.rope_type == "yarn"


def test_a_multimodal_config_is_read_through_its_text_config():
    ms = read_config(LLAMA4)
    assert ms.head_dim == 128 and ms.n_layers == 48 and ms.temperatures[0].scheme == "llama4"
    assert ms.temperatures[0].params["floor_scale"] == 8192


def test_mla_head_dimension_is_nope_plus_rope():
    ms = read_config(DEEPSEEK_V3)
    assert (ms.head_dim, ms.rope_dim, ms.is_mla) == (192, 64, True)
    assert math.isclose(ms.base_scale, 192 ** -0.5)


def test_qwen_v1_training_length_is_seq_length():
    ms = read_config(QWEN_V1)
    assert (ms.train_length, ms.train_length_key) == (2048, "seq_length")
    assert ms.temperatures[0].params["train_length"] == 2048 and ms.temperatures[0].layers is None


def test_a_key_no_engine_reads_is_listed_and_said(tmp_path):
    cfg = {**YARN, "rope_scaling": {**YARN["rope_scaling"], "temperature_boost": 2.0}, "logn_scaling_base": 3}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    ms = read_config(path)
    assert ms.unknown_keys == ("logn_scaling_base", "rope_scaling.temperature_boost")
    t = engine_scales(path, [1])
    assert t.notes == ("no engine rule here reads `logn_scaling_base`", "no engine rule here reads `rope_scaling.temperature_boost`")
    assert "no engine rule here reads `rope_scaling.temperature_boost`" in t.to_text()


def write_gguf(path, arch, extra):
    """A small GGUF file written here: the sizes, then ``extra`` (a function of the writer) for the scaling keys."""
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(2)
    w.add_embedding_length(256)
    w.add_head_count(2)
    w.add_context_length(131072)
    extra(w, gguf)
    w.add_tensor("x", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_metadata_is_read_with_llama_cpp_spellings(tmp_path):
    """YaRN keys as convert_hf_to_gguf writes them, and one key nothing reads."""
    def extra(w, gguf):
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(32768)
        w.add_rope_scaling_attn_factors(1.2)
        w.add_float32("llama.rope.scaling.mystery", 3.0)

    path = write_gguf(tmp_path / "m.gguf", "llama", extra)
    ms = read_config(path)
    assert (ms.format, ms.head_dim, ms.train_length) == ("gguf", 128, 32768)
    assert ms.train_length_key == "llama.rope.scaling.original_context_length"
    assert ms.unknown_keys == ("llama.rope.scaling.mystery",)
    # llama.cpp: cos/sin x rope.scaling.attn_factor x (0.1 ln s + 1), squared on q.k
    got = engine_scales(path, [1]).engines["llama.cpp"].scale[0] * math.sqrt(128)
    assert math.isclose(got, (1.2 * (1 + 0.1 * math.log(4))) ** 2, rel_tol=1e-6)


def test_a_deepseek2_gguf_is_read_as_mla_with_its_log_multiplier(tmp_path):
    def extra(w, gguf):
        w.add_key_length(192)
        w.add_rope_dimension_count(64)
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(40.0)
        w.add_rope_scaling_orig_ctx_len(4096)
        w.add_rope_scaling_yarn_log_mul(1.0)

    path = write_gguf(tmp_path / "ds.gguf", "deepseek2", extra)
    ms = read_config(path)
    assert (ms.head_dim, ms.rope_dim, ms.rope.mscale_all_dim, ms.unknown_keys) == (192, 64, 1.0, ())
    for name, e in engine_scales(path, [1]).engines.items():
        if name in ("exllamav3", "mlx-lm", "tensorrt-llm", "onnxruntime-genai"):  # their model files for GGUF's deepseek2 were not read
            assert e.scale is None
            continue
        assert math.isclose(e.scale[0], (1 + 0.1 * math.log(40)) ** 2 / math.sqrt(192), rel_tol=1e-6)


@pytest.mark.parametrize("cfg, key", [
    ({"vocab_size": 10}, "`head_dim`"),
    ({"head_dim": 0}, "`head_dim` must be > 0"),
    ({"hidden_size": 100, "num_attention_heads": 3}, "`hidden_size` must be a multiple"),
    ({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": -2.0}}, "`rope_scaling.factor` must be > 0"),
    ({"head_dim": 64, "rope_scaling": {"rope_type": "yarn"}}, "`rope_scaling.factor` is required"),
    ({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": "4"}}, "`rope_scaling.factor` must be a finite"),
    ({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": 4, "mscale": -1}},
     "`rope_scaling.mscale` must be >= 0"),
    ({"head_dim": 64, "rope_scaling": [4]}, "`rope_scaling` must be an object"),
    ({"head_dim": 64, "use_logn_attn": True}, "`seq_length` is required"),
    ({"head_dim": 64, "attn_temperature_tuning": True}, "`num_hidden_layers` is required"),
])
def test_a_malformed_config_is_one_error_naming_the_key(cfg, key):
    with pytest.raises(ValueError, match="^`config`: <dict>: ") as info:
        read_config(cfg)
    assert key in str(info.value) and "\n" not in str(info.value)


def test_a_path_must_be_a_file_of_json_or_gguf(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        read_config(tmp_path / "none.json")
    with pytest.raises(ValueError, match="is a directory"):
        read_config(tmp_path)
    (tmp_path / "a.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        read_config(tmp_path / "a.json")
    (tmp_path / "b.gguf").write_bytes(b"GGUF" + bytes(8))
    with pytest.raises(ValueError, match="truncated or corrupt GGUF"):
        read_config(tmp_path / "b.gguf")
    with pytest.raises(TypeError, match="`config` must be a path or a dict"):
        read_config(3)


@pytest.mark.parametrize("cfg, variant", [(YARN, "yarn"), (QWEN_V1, "dynamic_ntk"), (DEEPSEEK_V3, "yarn"),
                                          (LLAMA4, "none"), ({"head_dim": 64}, "none"),
                                          ({"head_dim": 64, "rope_scaling": {"type": "linear", "factor": 2}}, "pi"),
                                          ({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8}}, None)])
def test_the_rope_variant_is_the_toolkits_name_for_advise(cfg, variant):
    assert read_config(cfg).rope_variant == variant


def test_every_rope_variant_named_is_one_the_toolkit_has():
    from softmax_scale.engines._types import ROPE_VARIANTS
    from softmax_scale.schemes.rope import ROPES

    assert set(ROPE_VARIANTS.values()) <= set(ROPES)

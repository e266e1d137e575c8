"""How to set the factor in each engine: the setting, applied to the config, gives the wanted multiplier.

Each setting is checked through the public path a user's edit takes: its JSON (or key) is put into the
config, the config read again, and the engine's row compared with the reference's; the values are
checked against the formulas written out here (YaRN's ``0.1 ln s + 1``).
"""

import json
import math

import numpy as np
import pytest

from softmax_scale.engines import engine_scales, engine_setting, read_config

from .configs import DEEPSEEK_V3, GEMMA3, MINISTRAL3, QWEN3_STATIC_YARN, QWEN_V1, YARN_AF1

N = [1, 4096, 100000]


def override(cfg, text, option):
    """``cfg`` with the JSON of ``option '...'`` in ``text`` merged in (the RoPE dict replaced as given)."""
    start = text.index(option + " '") + len(option) + 2
    arg = json.loads(text[start:text.index("'", start)])
    out = dict(cfg)
    for key, value in arg.items():
        if key in ("rope_parameters", "rope_scaling"):
            out.pop("rope_parameters", None)
            out.pop("rope_scaling", None)
        out[key] = value
    return out


def agrees(cfg, engine, version=None):
    t = engine_scales(cfg, N, versions={engine: version} if version else None)
    return not t.disagreements(engine)


@pytest.mark.parametrize("version, key, value", [
    ("0.29.0", "attn_factor", 1 / (1 + 0.1 * math.log(4))),  # before PR #56446: times yarn_get_mscale(s)
    ("0.10.2", "attn_factor", 1 / (1 + 0.1 * math.log(4))),
])
def test_vllm_before_56446_takes_attn_factor_over_the_mscale(version, key, value):
    assert not agrees(YARN_AF1, "vllm", version)
    t = engine_scales(YARN_AF1, N, versions={"vllm": version})
    s = engine_setting("vllm", t.model, t.engines["reference"], version=version)
    assert s.how == "cos/sin" and s.exact
    top = "rope_scaling" if version == "0.10.2" else "rope_parameters"
    assert s.text.startswith(f"--hf-overrides '{{\"{top}\": ")
    fixed = override(YARN_AF1, s.text, "--hf-overrides")
    assert fixed[top][key] == pytest.approx(value, rel=1e-6)
    assert agrees({**fixed, "rope_scaling": fixed.pop(top)}, "vllm", version)


def test_vllm_newest_takes_attention_factor_for_a_wanted_constant():
    want = 1.1 ** 2 / math.sqrt(128)
    s = engine_setting("vllm", YARN_AF1, want, n=N)
    fixed = override(YARN_AF1, s.text, "--hf-overrides")
    assert fixed["rope_parameters"]["attention_factor"] == pytest.approx(1.1, rel=1e-6) and s.exact
    row = engine_scales(fixed, N).engines["vllm"]
    np.testing.assert_allclose(row.scale, want, rtol=1e-6)


def test_sglang_takes_attn_factor_and_is_told_to_restate_rope_theta():
    s = engine_setting("sglang", YARN_AF1, engine_scales(YARN_AF1, N).engines["reference"])
    assert s.exact and "restate `rope_theta`" in s.text
    fixed = override(YARN_AF1, s.text, "--json-model-override-args")
    assert fixed["rope_scaling"]["attn_factor"] == pytest.approx(1 / (1 + 0.1 * math.log(4)), rel=1e-6)
    assert agrees(fixed, "sglang")


def test_exllamav3_takes_the_attention_factor_the_lengths_lost():
    """exllamav3 takes s = 40960 / 32768 on Qwen3: `attention_factor` = 0.1 ln 4 + 1 gives the reference back."""
    s = engine_setting("exllamav3", QWEN3_STATIC_YARN, engine_scales(QWEN3_STATIC_YARN, N).engines["reference"])
    assert s.exact and s.text == f"in config.json's RoPE dict set `attention_factor`: {1 + 0.1 * math.log(4):.6g}"
    cfg = {**QWEN3_STATIC_YARN, "rope_scaling": {**QWEN3_STATIC_YARN["rope_scaling"],
                                                  "attention_factor": 1 + 0.1 * math.log(4)}}
    assert agrees(cfg, "exllamav3") and not agrees(QWEN3_STATIC_YARN, "exllamav3")


def test_mlx_lm_takes_an_mscale():
    """mlx-lm reads no `attention_factor`: `mscale` 0 makes get_mscale(s, mscale) 1."""
    s = engine_setting("mlx-lm", YARN_AF1, engine_scales(YARN_AF1, N).engines["reference"])
    assert s.exact and s.text == "in config.json's RoPE dict set `mscale`: 0"
    cfg = {**YARN_AF1, "rope_scaling": {**YARN_AF1["rope_scaling"], "mscale": 0.0}}
    assert agrees(cfg, "mlx-lm") and not agrees(YARN_AF1, "mlx-lm")


@pytest.mark.parametrize("cfg, wanted, value", [
    ({"model_type": "llama", "head_dim": 64, "max_position_embeddings": 2048}, 1.21 / 8, 1.1),
    (YARN_AF1, 1 / math.sqrt(128), 1 / (1 + 0.1 * math.log(4))),  # under YaRN: cancels the mscale it keeps
    (GEMMA3, 1 / 16, None),  # llama.cpp takes 1/sqrt(head_dim) = 1/16 on Gemma 3 4B: nothing to set
])
def test_llama_cpp_takes_the_gguf_attn_factor_at_the_square_root(cfg, wanted, value):
    s = engine_setting("llama.cpp", cfg, wanted, n=N)
    if value is None:
        assert s.how == "nothing"
        return
    arch = read_config(cfg).model_type  # llama and qwen3: the GGUF architectures of the same names
    assert s.how == "cos/sin" and s.exact
    assert s.text.startswith(f"--override-kv {arch}.rope.scaling.attn_factor=float:{value:.6g};")
    assert "llama-context.cpp@001d906a" in s.source and "hparams.rope_attn_factor" in s.source


def test_ollama_from_0_30_takes_llamas_key_written_into_the_file_and_before_it_nothing():
    cfg = {"model_type": "llama", "head_dim": 64, "max_position_embeddings": 2048}
    s = engine_setting("ollama", cfg, 1.21 / 8, n=N)  # llama-server: llama.cpp's key at the square root
    assert s.how == "cos/sin" and s.exact and s.text.startswith("write llama.rope.scaling.attn_factor = 1.1 ")
    assert "ollama create" in s.text and "--override-kv" not in s.text.split("(")[0]
    old = engine_setting("ollama", cfg, 1.21 / 8, n=N, version="0.29.0")
    assert old.how == "none" and not old.exact and old.text.startswith("cannot")  # its own engine: not read


@pytest.mark.parametrize("engine, cfg, version, why", [
    ("vllm", QWEN_V1, None, "changes with the position"),  # use_logn_attn: per position, no key
    ("sglang", {"head_dim": 128, "max_position_embeddings": 4096}, None,
     "reads no factor on cos/sin for RoPE type 'default'"),
    ("llama.cpp", QWEN_V1, None, "changes with the position"),
    ("llama.cpp", DEEPSEEK_V3, None, "DEEPSEEK2"),
])
def test_what_cannot_be_set_says_why(engine, cfg, version, why):
    t = engine_scales(cfg, N)
    wanted = t.engines["reference"]
    if not t.disagreements(engine):  # where it agrees: ask for another multiplier on every dimension
        wanted = 1.5 * wanted.scale
    s = engine_setting(engine, t.model, wanted, version=version, n=N)
    assert s.how == "none" and not s.exact and s.text.startswith("cannot be set: ") and why in s.text


def test_a_wanted_factor_on_the_nope_dimensions_cannot_be_set_on_cos_sin():
    t = engine_scales(DEEPSEEK_V3, N)
    s = engine_setting("vllm", t.model, 2.0 * t.engines["reference"].scale, n=N)
    assert s.how == "none" and "dimensions RoPE does not rotate" in s.text


def test_vllm_sets_ministral_3s_llama_4_scaling_per_position():
    t = engine_scales(MINISTRAL3, N, versions={"vllm": "0.29.0"})
    s = engine_setting("vllm", t.model, t.engines["reference"], version="0.29.0")
    assert s.how == "per position" and not s.exact
    arg = override({}, s.text, "--hf-overrides")
    assert arg["llama_4_scaling"] == {"beta": 0.1, "original_max_position_embeddings": 16384}
    # the rest is YaRN 16's factor the reference does not apply: attn_factor = 1 / (0.1 ln 16 + 1)
    assert arg["rope_parameters"]["attn_factor"] == pytest.approx(1 / (1 + 0.1 * math.log(16)), rel=1e-6)


def test_an_agreeing_engine_has_nothing_to_set():
    t = engine_scales(YARN_AF1, N)
    assert engine_setting("transformers", t.model, t.engines["reference"]).how == "nothing"


@pytest.mark.parametrize("kw, name", [
    (dict(engine="reference"), "`engine`"), (dict(engine="nosuch"), "`engine`"),
    (dict(wanted=-1.0), "`wanted`"), (dict(wanted=float("nan")), "`wanted`"),
    (dict(version="latest"), "`version`"),
])
def test_bad_input_names_the_parameter(kw, name):
    args = dict(engine="vllm", wanted=0.1, version=None, **{})
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        engine_setting(args["engine"], YARN_AF1, args["wanted"], version=args["version"])


def test_onnxruntime_genai_is_told_to_add_beta_fast():
    """Its builder builds YaRN only with `beta_fast`: adding transformers' defaults gives the reference's factor."""
    s = engine_setting("onnxruntime-genai", QWEN3_STATIC_YARN, engine_scales(QWEN3_STATIC_YARN, N).engines["reference"])
    assert s.exact and s.text.startswith("in config.json's RoPE dict set `beta_fast`: 32, `beta_slow`: 1")
    cfg = {**QWEN3_STATIC_YARN, "rope_scaling": {**QWEN3_STATIC_YARN["rope_scaling"], "beta_fast": 32, "beta_slow": 1}}
    assert agrees(cfg, "onnxruntime-genai") and not agrees(QWEN3_STATIC_YARN, "onnxruntime-genai")

"""Every engine rule that has a formula in the scheme registry gives the registry's number; every rule names its source."""

import math
import re

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale.engines import ENGINES, engine_rules, engine_scales

from .configs import DEEPSEEK_V3, LLAMA4, QWEN_V1, YARN

N = np.array([1, 100, 4096, 8192, 20000, 32768, 100000])


@pytest.mark.parametrize("factor", [1.5, 4.0, 64.0])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_yarn_rules_give_the_registry_yarn(engine, factor):
    cfg = {**YARN, "max_position_embeddings": int(32768 * factor),
           "rope_scaling": {**YARN["rope_scaling"], "factor": factor, "beta_fast": 32.0}}
    got = engine_scales(cfg, N).engines[engine].scale
    np.testing.assert_allclose(got, ss.attention_scale(N, 128, "yarn", factor=factor, train_length=32768), rtol=1e-12)


@pytest.mark.parametrize("engine", ["transformers", "reference", "vllm", "sglang", "llama.cpp"])
def test_deepseek_rules_give_the_registry_deepseek_yarn(engine):
    """DeepSeek-V2's keys (mscale = mscale_all_dim = 0.707): the softmax term of deepseek_yarn on 1/sqrt(192)."""
    cfg = {**DEEPSEEK_V3, "rope_scaling": {**DEEPSEEK_V3["rope_scaling"], "mscale": 0.707, "mscale_all_dim": 0.707}}
    got = engine_scales(cfg, N).engines[engine].scale
    want = ss.attention_scale(N, 192, "deepseek_yarn", factor=40.0, mscale_all_dim=0.707, d_qk=192)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_transformers_longrope_gives_the_registry_longrope():
    """Phi-3-mini-128k's shape: no `factor`, s = 131072 / 4096 = 32."""
    cfg = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
           "original_max_position_embeddings": 4096,
           "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 48, "short_factor": [1.0] * 48}}
    t = engine_scales(cfg, N)
    want = ss.attention_scale(N, 96, "longrope", factor=32.0, train_length=4096)
    for engine in ("transformers", "reference", "llama.cpp", "exllamav3", "vllm", "sglang", "mlx-lm", "tensorrt-llm"):
        np.testing.assert_allclose(t.engines[engine].scale, want, rtol=1e-12)
    short = {**cfg, "rope_scaling": {**cfg["rope_scaling"], "short_mscale": 1.1, "long_mscale": 1.2}}
    assert "not transcribed" in engine_scales(short, N).engines["vllm"].notes[0]


def test_llama4_rules_give_the_registry_llama4():
    t = engine_scales(LLAMA4, N)
    want = ss.attention_scale(N, 128, "llama4", floor_scale=8192, attn_scale=0.1)
    for name, e in t.engines.items():
        if name not in ("exllamav3", "onnxruntime-genai"):  # their Llama 4 code was not read
            np.testing.assert_allclose(e.scale, want, rtol=1e-12)


def test_qwen_rule_gives_the_registry_qwen_logn():
    t = engine_scales(QWEN_V1, N)
    np.testing.assert_allclose(t.engines["reference"].scale, ss.attention_scale(N, 128, "qwen_logn", train_length=2048),
                               rtol=1e-12)


@pytest.mark.parametrize("engine, rule", engine_rules(), ids=[f"{e}-{r.name}" for e, r in engine_rules()])
def test_every_rule_names_its_source_and_a_registered_formula(engine, rule):
    assert rule.scheme == "" or rule.scheme in ss.SCHEMES
    assert rule.text
    if rule.commit:
        assert re.fullmatch(r"[0-9a-f]{40}", rule.commit) and rule.repo and rule.path
    else:  # a rule whose file was not read at a commit says so
        assert re.search(r"not recorded|not read|no transformers file", rule.text), rule.text


def test_the_rule_tables_list_each_engine():
    assert list(ENGINES) == ["transformers", "vllm", "llama.cpp", "sglang", "exllamav3", "mlx-lm", "tensorrt-llm",
                             "onnxruntime-genai", "ollama", "reference"]
    assert all(mod.RULES for mod in ENGINES.values())
    assert sum(bool(r.commit) for _, r in engine_rules()) >= 10


def test_the_scale_on_cos_sin_counts_squared():
    """attention_factor 1.2 on cos/sin is 1.44 on q.k (transformers reads it)."""
    cfg = {**YARN, "rope_scaling": {**YARN["rope_scaling"], "attention_factor": 1.2}}
    t = engine_scales(cfg, [1])
    assert math.isclose(float(t.engines["transformers"].scale[0]) * math.sqrt(128), 1.44, rel_tol=1e-12)

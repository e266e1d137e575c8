"""advise on real models' configs at 1x, 2x and 4x the length their recipe covers: the answer a reviewer expects.

Each config is spelled as its model card's ``config.json`` (the keys that bear on the scale);
each expected multiplier is computed here from its published formula, never copied from advise,
with the reason a reviewer gives for it.
"""

import math

import pytest

import softmax_scale as ss
from softmax_scale import cli

QWEN3_8B = {"model_type": "qwen3", "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
            "num_hidden_layers": 36, "max_position_embeddings": 40960,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
LLAMA31_8B = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 131072,
              "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
DEEPSEEK_V3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 163840,
               "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32,
                                "beta_slow": 1, "original_max_position_embeddings": 4096}}
GPT_OSS = {"model_type": "gpt_oss", "head_dim": 64, "hidden_size": 2880, "num_attention_heads": 64,
           "num_hidden_layers": 36, "max_position_embeddings": 131072,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                            "original_max_position_embeddings": 4096}}
GEMMA3_27B = {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376, "num_attention_heads": 32,
              "num_hidden_layers": 62, "query_pre_attn_scalar": 168, "max_position_embeddings": 131072,
              "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}
PHI3_128K = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 32,
             "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
             "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}}
LLAMA4_SCOUT = {"model_type": "llama4", "text_config": {
    "model_type": "llama4_text", "head_dim": 128, "hidden_size": 5120, "num_attention_heads": 40, "num_hidden_layers": 48,
    "max_position_embeddings": 10485760, "attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1,
    "no_rope_layers": [], "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                                           "original_max_position_embeddings": 8192, "rope_type": "llama3"}}}
SMOLLM2 = {"model_type": "llama", "hidden_size": 576, "num_attention_heads": 9, "num_hidden_layers": 30,
           "max_position_embeddings": 8192}


def _yarn(s, m=1.0):
    """YaRN's magnitude on cos/sin, (0.1 m ln s + 1), squared on q.k (Peng et al., 2023)."""
    return (0.1 * m * math.log(s) + 1.0) ** 2


def _llama4(n, floor=8192, beta=0.1):
    """Llama 4's temperature at n keys: log(floor(n / floor_scale) + 1) x attn_scale + 1 (its modeling code)."""
    return math.log(math.floor(n / floor) + 1) * beta + 1.0


TRAINED_WITH = "no measured model was"  # the reason a recipe trained in is kept past its length
#: Qwen3 is pretrained to 32,768 and YaRN is added to its config at inference (its card): not "trained with" it
AT_INFERENCE = {"Qwen3-8B": "at inference to a model pretrained to 32,768 without it"}

# (name, config, covered length, expected multiplier at n as a function of n, why at 1x, why past it)
GOLDEN = [
    ("Qwen3-8B", QWEN3_8B, 4 * 32768, lambda n: _yarn(4), "static YaRN at every position, as the authors ship it",
     "trained with YaRN 4: nothing measured reaches it"),
    ("Llama-3.1-8B", LLAMA31_8B, 131072, lambda n: 1.0, "llama3 frequencies, no temperature: trained to 131072",
     "llama3 frequencies trained in: nothing measured reaches it"),
    ("DeepSeek-V3", DEEPSEEK_V3, 40 * 4096, lambda n: _yarn(40), "mscale_all_dim 1: the softmax scale x mscale^2",
     "trained with YaRN 40 and its mscale"),
    ("gpt-oss", GPT_OSS, 32 * 4096, lambda n: _yarn(32), "static YaRN 32", "trained with YaRN 32"),
    ("Gemma 3", GEMMA3_27B, 131072, lambda n: math.sqrt(128 / 168), "query_pre_attn_scalar 168 replaces d = 128",
     "linear RoPE 8 trained in"),
    ("Phi-3", PHI3_128K, 131072, lambda n: 1 + math.log(131072 / 4096) / math.log(4096),
     "LongRoPE's attention factor sqrt(1 + ln s / ln L) on cos/sin, s = 32", "LongRoPE trained in"),
    ("Llama 4", LLAMA4_SCOUT, 10485760, _llama4, "its temperature on the NoPE layers at n",
     "temperature tuning trained in: kept, on its 12 NoPE layers"),
    ("SmolLM2", SMOLLM2, 8192, lambda n: 1.0, "no scaling, no temperature: 1/sqrt(d)",
     "past 8192 the committed evidence (SmolLM2 itself, the byte decoders) supports no change"),
]


@pytest.mark.parametrize("task", ["lm", "retrieval"])
@pytest.mark.parametrize("times", [1, 2, 4])
@pytest.mark.parametrize(("name", "config", "covered", "expect", "why_at", "why_past"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_a_real_config_gets_its_authors_multiplier(name, config, covered, expect, why_at, why_past, times, task):
    n = times * covered
    a = ss.advise(config=config, n=n, task=task)
    rec = a.recommendations[0]
    assert a.train_length == covered
    assert rec.at_test and rec.factor == pytest.approx(expect(n), rel=1e-9), (name, why_at)
    assert rec.change == f"keep x{expect(n):.5g}"
    if times == 1:
        assert "inside the length the recipe covers" in rec.reason
    elif name != "SmolLM2":
        assert AT_INFERENCE.get(name, TRAINED_WITH) in rec.reason, why_past
    else:
        assert "no admissible scale is better" in rec.reason, why_past


@pytest.mark.parametrize(("config", "n", "factor"), [(QWEN3_8B, 100_000, _yarn(4)), (DEEPSEEK_V3, 4096, _yarn(40)),
                                                    (DEEPSEEK_V3, 163840, _yarn(40)), (GPT_OSS, 131072, _yarn(32)),
                                                    (LLAMA31_8B, 131072, 1.0)])
def test_the_command_gives_the_authors_multiplier_as_the_first_recommendation(tmp_path, capsys, config, n, factor):
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    assert cli.main(["advise", "--config", str(path), "--n", str(n), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recommendations"][0]["factor"] == pytest.approx(factor, rel=1e-9)
    assert out["train_length"] == ss.engines.read_config(config).covered_length


def test_llama31_reads_its_extended_length_as_gemma_does():
    # one rule: the extended max_position_embeddings, not original_max_position_embeddings
    assert ss.advise(config=LLAMA31_8B, n=131072).multiple == 1.0
    assert ss.advise(config=GEMMA3_27B, n=131072).multiple == 1.0


def test_the_engines_that_differ_from_the_recipe_are_named():
    a = ss.advise(config=QWEN3_8B, n=100_000)
    # exllamav3 takes s from max_position_embeddings / original_max_position_embeddings = 1.25
    assert f"exllamav3 x{_yarn(1.25):.5g}" in a.engines and "transformers" in a.engines
    assert "Engines:" in a.headline


def test_without_a_config_the_output_says_what_it_assumed():
    assert "Assumed: a model trained without a temperature" in ss.advise(d=128, train_length=4096, n=8192).headline

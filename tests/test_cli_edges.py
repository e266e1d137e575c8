"""Rough edges of the command line: --version, JSON integers and nulls, seeded Monte Carlo, options the API refuses."""

import json
import math

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale._util.output import jsonable as _jsonable
from softmax_scale._util.output import plural as _plural
from softmax_scale.cli import main
from softmax_scale.experiments.alpha_table import TABLE_ROWS
from softmax_scale.objectives.typical import MC_TRIALS


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv):
    """The one line of stderr of a command that must exit 2."""
    code, out, err = run(capsys, *argv)
    assert code == 2, (code, out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    return err


def round_trip(x):
    return json.loads(json.dumps(_jsonable(x), allow_nan=False))


# ---------------------------------------------------------------------------------------------
# --version


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"softmax-scale {ss.__version__}\n"


# ---------------------------------------------------------------------------------------------
# JSON: integers as integers, non-finite floats as null


def test_counts_stored_as_floats_come_back_as_integers():
    back = round_trip({"n": np.array([512.0, 1024.0]), "trials": 4000.0, "seed": np.int64(3)})
    assert back == {"n": [512, 1024], "trials": 4000, "seed": 3}
    assert all(type(v) is int for v in back["n"])
    assert type(back["trials"]) is int


def test_other_floats_stay_floats():
    back = round_trip({"alpha": 2.0, "value": np.float64(1.5), "n": 2.5})
    assert type(back["alpha"]) is float
    assert back["value"] == 1.5
    assert back["n"] == 2.5


def test_non_finite_floats_become_null():
    back = round_trip({"alpha": np.array([1.0, np.inf]), "value": -math.inf, "se": float("nan")})
    assert back == {"alpha": [1.0, None], "value": None, "se": None}


def test_numpy_booleans_and_nesting():
    back = round_trip({"bounded": np.array([True, False]), "ok": np.bool_(True), "rows": [{"layer": np.float64(2.0)}]})
    assert back == {"bounded": [True, False], "ok": True, "rows": [{"layer": 2}]}
    assert type(back["rows"][0]["layer"]) is int


def test_alpha_json_has_integer_n(capsys):
    code, out, _ = run(capsys, "alpha", "512", "4096", "--json")
    obj = json.loads(out)
    assert obj["n"] == [512, 4096]
    assert all(type(v) is int for v in obj["n"])


def test_unbounded_alpha_is_null_beside_bounded_false(capsys):
    code, out, _ = run(capsys, "alpha", "512", "--objective", "expected", "--json")
    obj = json.loads(out)
    assert obj["alpha"] is None
    assert obj["bounded"] is False


def test_json_help_says_how_inf_is_written(capsys):
    with pytest.raises(SystemExit):
        main(["alpha", "--help"])
    assert "null" in " ".join(capsys.readouterr().out.split())


# ---------------------------------------------------------------------------------------------
# alpha with a Monte Carlo objective: seeded, --trials, the standard error shown


def test_typical_alpha_is_seeded_by_default(capsys):
    first = run(capsys, "alpha", "64", "--objective", "typical", "--trials", "200", "--json")[1]
    second = run(capsys, "alpha", "64", "--objective", "typical", "--trials", "200", "--json")[1]
    assert first == second
    assert json.loads(first)["seed"] == 0


def test_typical_alpha_json_matches_the_library_with_its_se(capsys):
    code, out, _ = run(capsys, "alpha", "64", "--objective", "geometric", "--trials", "300", "--seed", "5", "--json")
    obj = json.loads(out)
    ref = ss.optimize_alpha(64, objective="geometric", trials=300, rng=5)
    assert obj["alpha"] == ref.alpha
    assert obj["alpha_se"] == ref.alpha_se
    assert ref.alpha_se > 0
    assert obj["trials"] == 300


def test_typical_alpha_text_shows_trials_seed_and_se(capsys):
    code, out, _ = run(capsys, "alpha", "64", "--objective", "typical", "--trials", "200", "--seed", "2")
    ref = ss.optimize_alpha(64, objective="typical", trials=200, rng=2)
    assert "200 trials per n, seed 2" in out
    assert f"{ref.alpha_se:.2g}" in out.splitlines()[2].split()


def test_typical_alpha_uses_the_library_default_trials(capsys):
    code, out, _ = run(capsys, "alpha", "16", "--objective", "typical", "--json")
    assert json.loads(out)["trials"] == MC_TRIALS


def test_deterministic_alpha_refuses_monte_carlo_options(capsys):
    assert "trials" in refused(capsys, "alpha", "512", "--trials", "100")
    assert "rng" in refused(capsys, "alpha", "512", "--objective", "expected", "--seed", "1")


# ---------------------------------------------------------------------------------------------
# stats: --trials and --seed only with --method mc


@pytest.mark.parametrize("option", [["--trials", "100"], ["--seed", "1"]])
def test_exact_stats_refuse_monte_carlo_options(capsys, option):
    assert "`trials` and `rng` are Monte Carlo options" in refused(capsys, "stats", "2", "512", *option)


def test_mc_stats_default_seed_is_zero(capsys):
    code, out, _ = run(capsys, "stats", "2", "128", "--method", "mc", "--trials", "200", "--json")
    ref = ss.softmax_stats(2.0, 128, method="mc", trials=200, rng=0)
    assert json.loads(out)["entropy"] == ref.entropy


# ---------------------------------------------------------------------------------------------
# table --quick: several rows


def test_quick_table_prints_every_row_of_the_full_table(capsys):
    code, out, _ = run(capsys, "table", "--quick", "--json")
    assert json.loads(out)["n"] == list(TABLE_ROWS)
    code, out, _ = run(capsys, "table", "--quick")
    rows = [line.split("|")[1].strip() for line in out.split("\n\n")[0].splitlines()[2:]]
    assert rows == [str(n) for n in TABLE_ROWS]


# ---------------------------------------------------------------------------------------------
# scale: --train-length without a scheme that has one; --param train_length and bad values


def test_train_length_without_a_pinnable_scheme_is_refused(capsys):
    err = refused(capsys, "scale", "32768", "128", "--train-length", "4096")
    assert "`--train-length`" in err
    assert "--scheme standard has none" in err


@pytest.mark.parametrize("value", ["abc", "4096"])
def test_param_train_length_points_to_the_option(capsys, value):
    err = refused(capsys, "scale", "4096", "128", "--scheme", "qwen_logn", "--param", f"train_length={value}")
    assert f"`--param train_length={value}`" in err
    assert "--train-length L" in err


def test_param_that_is_not_a_number_names_it(capsys):
    err = refused(capsys, "scale", "4096", "128", "--scheme", "yarn", "--param", "factor=abc")
    assert "`factor` must be a number or none, got 'abc'" in err


def test_entropy_param_train_length_points_to_the_option(capsys):
    err = refused(capsys, "entropy", "--schemes", "qwen_logn", "--param", "qwen_logn.train_length=4096")
    assert "--train-length L" in err


# ---------------------------------------------------------------------------------------------
# plurals


@pytest.mark.parametrize("count, text", [(1, "1 window"), (0, "0 windows"), (8, "8 windows")])
def test_plural(count, text):
    assert _plural(count, "window") == text


def test_fit_counts_its_values_of_n(capsys):
    code, out, _ = run(capsys, "fit", "--ns", "16", "32", "64")
    assert "over 3 values of n" in out


def test_the_extrapolation_table_prints_under_a_caption_with_its_units():
    from softmax_scale.experiments import EXPERIMENTS, RESULTS

    exp = EXPERIMENTS["real_extrapolation"]
    text = exp.summaries(exp.read(RESULTS / "real_extrapolation.csv"))[0]
    caption = text.splitlines()[0]
    assert "nats per token" in caption
    assert "sliding window" in caption
    assert text.splitlines()[2].startswith("| rope | scale |")

"""The command line: numbers match the library, --json parses, bad input exits 2 with one line."""

import json
import subprocess
import sys

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_alpha_json_matches_the_library(capsys):
    code, out, err = run(capsys, "alpha", "512", "--json")
    assert code == 0
    assert not err
    obj = json.loads(out)
    assert obj["alpha"] == ss.optimal_alpha(512)
    assert obj["objective"] == "mean_field"
    assert obj["bounded"] is True
    assert obj["value"] == pytest.approx(ss.gradient_objective(obj["alpha"], 512), rel=1e-12)


def test_alpha_several_n_cosine(capsys):
    code, out, _ = run(capsys, "alpha", "64", "4096", "--dist", "cosine", "--d", "128", "--json")
    obj = json.loads(out)
    np.testing.assert_allclose(obj["alpha"], ss.optimal_alpha([64, 4096], "cosine", d=128), rtol=1e-15)
    code, out, _ = run(capsys, "alpha", "64", "4096", "--dist", "cosine", "--d", "128")
    assert code == 0
    assert "4096" in out


@pytest.mark.parametrize(
    "argv, name",
    [
        (["alpha", "1"], "`n`"),
        (["alpha", "2.5"], "`n`"),
        (["alpha", "nan"], "`n`"),
        (["alpha", "64", "--dist", "cosine"], "`d`"),
        (["alpha", "64", "--objective", "best"], "`objective`"),
        (["stats", "-1", "10", "--method", "mc"], "`alpha`"),
        (["stats", "1", "10", "--method", "mc", "--trials", "1"], "`trials`"),
        (["fit", "--ns", "16"], "`ns`"),
        (["figures", "--only", "no_such_figure", "--out", "/tmp/softmax-scale-cli-test"], "`only`"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, argv, name):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert name in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["alpha"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["alpha", "ten"])
    assert exc.value.code == 2


def test_stats_mc_json_matches_library(capsys):
    code, out, _ = run(capsys, "stats", "2", "256", "--method", "mc", "--trials", "500", "--seed", "3", "--json")
    obj = json.loads(out)
    ref = ss.softmax_stats(2.0, 256, method="mc", trials=500, rng=3)
    assert obj["entropy"] == ref.entropy
    assert obj["grad_se"] == ref.grad_se


def test_fit_json_has_every_form(capsys):
    code, out, _ = run(capsys, "fit", "--json")
    obj = json.loads(out)
    assert set(obj) == {"sqrt_log", "log", "power", "affine_log"}
    assert round(obj["sqrt_log"]["params"]["c"], 2) == 0.84


def test_table_quick(capsys):
    code, out, _ = run(capsys, "table", "--quick")
    assert code == 0
    assert "alpha* normal" in out
    assert "c * sqrt(log n)" in out


def test_help_at_every_level(capsys):
    """``python -m softmax_scale`` as a process (the entry point), every subcommand's help through ``main``."""
    top = subprocess.run([sys.executable, "-m", "softmax_scale", "--help"], capture_output=True, text=True)
    assert top.returncode == 0
    for cmd in ("alpha", "fit", "stats", "scale", "entropy", "figures", "table", "heads", "extrapolate", "train", "run"):
        assert cmd in top.stdout
        with pytest.raises(SystemExit) as done:
            main([cmd, "--help"])
        assert done.value.code == 0
        assert "usage" in capsys.readouterr().out
    bad = subprocess.run([sys.executable, "-m", "softmax_scale", "alpha", "1"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "`n`" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_scale_matches_library_and_lists_schemes(capsys):
    code, out, _ = run(capsys, "scale", "4096", "128", "--scheme", "entropy_invariant", "--json")
    assert code == 0
    assert json.loads(out)["multiplier"] == pytest.approx(np.log(4096) / np.log(512) / np.sqrt(128), rel=1e-14)
    code, out, _ = run(capsys, "scale", "--list", "--json")
    assert set(json.loads(out)) == {i.key for i in ss.list_schemes()}
    code, out, err = run(capsys, "scale", "4096", "128", "--scheme", "nope")
    assert code == 2
    assert "`scheme`" in err
    code, out, err = run(capsys, "scale", "4096", "128", "--param", "oops")
    assert code == 2
    assert "`--param`" in err


def test_entropy_matches_library(capsys):
    code, out, _ = run(capsys, "entropy", "--schemes", "standard", "--ns", "512", "4096", "--json")
    obj = json.loads(out)
    ref = ss.entropy_curve([512, 4096], scheme="standard", d=128)
    np.testing.assert_allclose(obj["standard"]["entropy"], ref.entropy, rtol=1e-15)
    code, out, err = run(capsys, "entropy", "--ns", "1")
    assert code == 2
    assert "n" in err


def test_broken_pipe_is_quiet():
    cmd = f"{sys.executable} -m softmax_scale fit --json | head -n 1"
    res = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    assert res.stdout.strip() == "{"
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "argv, name",
    [
        (["stats", "1", "1e16"], "`n`"),
        (["stats", "1e10", "10"], "`alpha`"),
        (["entropy", "--d", "0"], "`d`"),
        (["entropy", "--schemes", "nope"], "`schemes`"),
        (["entropy", "--match", "2", "--score-model", "cosine"], "`match`"),
        (["scale", "0", "64"], "`n`"),
        (["scale", "100", "64", "--scheme", "yarn", "--param", "factor=-1"], "`factor`"),
        (["table", "--d", "1"], "`d`"),
        (["fit", "--dist", "cosine"], "`d`"),
    ],
)
def test_more_bad_input_exits_2(capsys, argv, name):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert name in err
    assert len(err.strip().splitlines()) == 1


def test_extrapolate_an_encoder_says_it_is_not_a_decoder(capsys, tmp_path):
    """From the registry's kinds, before any weights or text are read (once it complained about 128,073 tokens)."""
    code, out, err = run(capsys, "extrapolate", "--model", "minilm", "--out", str(tmp_path), "--no-progress")
    assert code == 2
    assert "`model`: 'minilm' is not a decoder but an encoder" in err
    assert "smollm2" in err
    assert len(err.strip().splitlines()) == 1
    assert "tokens" not in err


def test_unwritable_output_is_one_line_not_a_traceback(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, out, err = run(capsys, "figures", "--out", str(blocker / "sub"), "--only", "alpha_star_vs_n", "--no-progress")
    assert code == 2
    assert "`out`" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    # the same folder rule for extrapolate, refused before any model is loaded
    for target in (blocker / "sub", blocker / "sub" / "x.csv"):
        code, out, err = run(capsys, "extrapolate", "--quick", "--out", str(target), "--no-progress")
        assert code == 2
        assert "`out`" in err
        assert len(err.strip().splitlines()) == 1


def test_alpha_names_each_objective_by_what_it_computes(capsys):
    with pytest.raises(SystemExit):
        main(["alpha", "--help"])
    help_text = " ".join(capsys.readouterr()[0].split())
    assert "typical: the median of G over draws" in help_text
    assert "geometric: the geometric mean exp E[log G] over draws" in help_text
    code, out, _ = run(capsys, "alpha", "64", "--objective", "geometric", "--trials", "200")
    assert code == 0
    assert out.startswith("alpha* (geometric: the geometric mean exp E[log G] over draws;")


def test_alpha_columns_line_up_at_the_largest_n(capsys):
    """The n column is as wide as the longest n: header and rows end each column at the same place."""
    assert main(["alpha", "1e15", "512", "--dist", "cosine", "--d", "2"]) == 0
    head, *rows = capsys.readouterr().out.splitlines()[1:4]
    ends = {line.index(line.split()[0]) + len(line.split()[0]) for line in (head, *rows)}
    assert len(ends) == 1

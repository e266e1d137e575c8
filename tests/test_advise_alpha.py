"""``attention_alpha`` and ``softmax-scale alpha N --d D``: alpha* on q.k, the causal value and the training caveat.

References: the mean-field maximiser for normal scores is the root of
``d/da [a (1 - exp(a^2)/n)] = 1 - (1 + 2a^2) exp(a^2)/n``; averaged over positions ``2..L`` (``G = 0``
where ``exp(a^2) >= i``: ``sum p^2`` capped at 1) the derivative is the mean of those terms over the
positions still alive.  Both roots by ``brentq``.  The caveat's numbers are recomputed from the committed
result files with the ``csv`` module.
"""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq

import softmax_scale as ss
from softmax_scale.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _mean_field_root(n_eff):
    return brentq(lambda a: 1.0 - (1.0 + 2.0 * a * a) * math.exp(a * a) / n_eff, 1e-9, math.sqrt(math.log(n_eff)),
                  xtol=1e-14, rtol=1e-14)


@pytest.fixture(scope="module")
def answer():
    return ss.attention_alpha(2048, 64)


def test_scale_on_qk_is_the_mean_field_root_over_sqrt_d(answer):
    a = _mean_field_root(2048)
    assert answer.alpha == pytest.approx(a, rel=1e-9)
    assert answer.scale == pytest.approx(a / 8.0, rel=1e-9)


def test_causal_value_is_the_root_of_the_averaged_derivative(answer):
    i = np.arange(2, 2049, dtype=float)

    def slope(a):  # positions with i <= exp(a^2) have sum p^2 capped at 1 and G = 0
        live = i > math.exp(a * a)
        return np.sum(1.0 - (1.0 + 2.0 * a * a) * math.exp(a * a) / i[live]) / i.size

    a = brentq(slope, 0.5, 0.999 * math.sqrt(math.log(2048)), xtol=1e-14, rtol=1e-14)
    assert answer.causal_alpha == pytest.approx(a, rel=1e-6)
    assert answer.causal_scale == pytest.approx(a / 8.0, rel=1e-6)


def _rows(name):
    with open(ROOT / "figures" / name) as f:
        lines = [line for line in f if not line.startswith("#")]
    return [r for r in csv.DictReader(lines) if r["status"] == "ok"]


def test_caveat_numbers_are_those_of_the_committed_result_files(answer):
    t = answer.training
    rows = [r for r in _rows("train_alpha.csv") if r["kind"] == "test" and r["x"] == "64"]
    loss = {}
    for r in rows:
        loss.setdefault(r["scheme"], {})[r["seed"]] = float(r["loss"])
    constants = {k: v for k, v in loss.items() if k.startswith("alpha=")}
    best = min(constants, key=lambda k: sum(constants[k].values()) / len(constants[k]))
    gaps = [loss["alpha_star"][s] - constants[best][s] for s in constants[best]]
    assert t.best_alpha == float(best.split("=")[1])
    assert t.loss_gap == pytest.approx(sum(gaps) / len(gaps), rel=1e-9)
    assert t.loss_gap > 0
    assert t.loss_seeds == len(gaps)

    acc = {}
    for r in _rows("train_mlm.csv"):
        if r["kind"] == "test" and r["x"] == "64" and r["scale"] == "trained":
            acc.setdefault(r["scheme"], []).append(100 * float(r["accuracy"]))
    mean = {k: sum(v) / len(v) for k, v in acc.items()}
    assert t.accuracy == pytest.approx(mean["alpha_star"], rel=1e-9)
    assert t.standard_accuracy == pytest.approx(mean["standard"], rel=1e-9)
    assert t.accuracy_rank == 1 + sum(v > mean["alpha_star"] for v in mean.values())
    assert t.trained_scales == len(mean)


def test_without_the_result_files_the_caveat_still_points_to_the_page(tmp_path):
    r = ss.attention_alpha(512, 128, results=tmp_path)
    assert r.training is None
    assert "docs/findings/training.md" in r.text()


def test_cli_prints_scale_ratio_causal_and_caveat_together(capsys, answer):
    assert main(["alpha", "2048", "--d", "64"]) == 0
    out, err = capsys.readouterr()
    assert not err
    assert f"{answer.scale:.6g}" in out
    assert f"{answer.alpha:.6g}" in out
    assert "1/sqrt(d) = 0.125" in out
    assert f"{answer.causal_alpha:.6g}" in out
    assert "caveat" in out
    assert "docs/findings/training.md" in out
    assert f"alpha = {answer.training.best_alpha:g}" in out
    assert main(["alpha", "2048", "--d", "64", "--json"]) == 0
    obj = json.loads(capsys.readouterr()[0])
    assert obj["scale"] == answer.scale
    assert obj["standard"] == 0.125
    assert obj["training"]["best_alpha"] == answer.training.best_alpha


def test_cli_without_d_says_what_alpha_multiplies(capsys):
    assert main(["alpha", "2048"]) == 0
    assert "alpha* multiplies q.k/sqrt(d)" in capsys.readouterr()[0]


@pytest.mark.parametrize("argv, name", [
    (["alpha", "2048", "--d", "64", "--objective", "typical"], "`--d`"),
    (["alpha", "2048", "--d", "0"], "`d`"),
    (["alpha", "1", "--d", "64"], "`n`"),
])
def test_cli_bad_input_exits_2_with_one_line(capsys, argv, name):
    assert main(argv) == 2
    err = capsys.readouterr()[1]
    assert name in err
    assert len(err.strip().splitlines()) == 1

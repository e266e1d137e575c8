"""Every ``±`` a summary prints is a standard error: the replicates' sample std over the square root of their number.

Checked against the committed result files, read here with the csv module (not through the
experiments' own readers), so that the printed cell and the number computed from the rows come
from two separate roads.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

from softmax_scale.experiments import EXPERIMENTS
from softmax_scale.experiments import _training as tr

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "figures"
PM = re.compile(r"(-?\d+\.\d+) ± (\d+\.\d+)")


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _se(values):
    v = np.asarray(values, dtype=float)
    return float(np.std(v, ddof=1) / math.sqrt(v.size))


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_pm_is_the_standard_error_and_says_nothing_for_one_replicate():
    assert tr.pm(1.0, 0.3, 9) == "1.00 ± 0.10"
    assert tr.pm(0.5, 0.2, 4, scale=100, digits=1, sign=True) == "+50.0 ± 10.0"
    assert tr.pm(1.0, np.nan, 1) == "1.00"
    assert tr.pm(1.0, 0.3, 1) == "1.00"  # one replicate: no spread to speak of, even if one is given
    assert tr.pm(np.nan, 0.3, 3) == ""
    assert tr.pm_of([1.0, 2.0, 4.0], digits=4) == f"{7 / 3:.4f} ± {_se([1, 2, 4]):.4f}"
    assert tr.pm_of([]) == ""


@pytest.mark.skipif(not (FIGURES / "train_mlm.csv").exists(), reason="no committed masked-LM result")
def test_mlm_summary_plus_minus_is_std_over_sqrt_seeds():
    rows = [r for r in _rows(FIGURES / "train_mlm.csv")
            if r["status"] == "ok" and r["kind"] == "test" and r["scheme"] == "ssmax" and r["scale"] == "trained"]
    lengths = sorted({int(r["x"]) for r in rows})
    text = EXPERIMENTS["mlm"].summaries(EXPERIMENTS["mlm"].read(FIGURES / "train_mlm.csv"))[0]
    assert "mean ± standard error over seeds" in text.splitlines()[0]
    line = next(x for x in text.splitlines() if x.startswith("| ssmax ("))
    cells = _cells(line)[1:]
    assert len(cells) == len(lengths)
    for n, cell in zip(lengths, cells):
        acc = [100 * float(r["accuracy"]) for r in rows if int(r["x"]) == n]
        assert len(acc) >= 2
        mean, err = PM.fullmatch(cell).groups()
        assert float(mean) == pytest.approx(np.mean(acc), abs=0.006)
        assert float(err) == pytest.approx(_se(acc), abs=0.006)
        assert abs(float(err) - np.std(acc, ddof=1)) > 0.01  # not the standard deviation


@pytest.mark.skipif(not (FIGURES / "real_copy.csv").exists(), reason="no committed real_copy result")
def test_real_one_key_loss_plus_minus_is_the_standard_error_over_the_documents():
    rows = [r for r in _rows(FIGURES / "real_copy.csv") if r["kind"] == "score"]
    text = EXPERIMENTS["real_copy"].summaries(EXPERIMENTS["real_copy"].read(FIGURES / "real_copy.csv"))[0]
    assert "standard error over the documents" in text
    checked = 0
    for line in text.splitlines():
        c = _cells(line)
        if len(c) != 7 or c[0] not in ("copy", "control"):
            continue
        loss = [float(r["loss"]) for r in rows
                if (r["task"], r["length"], r["rope"], r["scale"]) == tuple(c[:4])]
        assert len(loss) == int(c[4])
        mean, err = PM.fullmatch(c[6]).groups()
        assert float(mean) == pytest.approx(np.mean(loss), abs=6e-4)
        assert float(err) == pytest.approx(_se(loss), abs=6e-4)
        checked += 1
    assert checked >= 5

"""The FIRST experiment: the probe against a naive share, the quick form from the command line, a rerun that trains
nothing, the summaries and evidence against the rows, and bad input."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest
from helpers import naive_first

pytest.importorskip("jax")

from softmax_scale.cli import main
from softmax_scale.experiments import EXPERIMENTS, run_experiment
from softmax_scale.experiments.first import QUICK_FIRST, FirstConfig, FirstTask, expected_first_rows, first_accuracy, first_shares
from softmax_scale.train.first import FirstModel, first_factors, init_first
from softmax_scale.train.tasks import first_batch


def _tiny():
    m = FirstModel(5, "standard", d_model=8, d_ff=12)
    p = init_first(m, 2)
    gen = np.random.default_rng(4)
    for layer in p["layers"]:
        for k in ("wq", "wk"):  # sharper attention than at initialisation
            layer[k] = (layer[k] * 3 + 0.5 * gen.standard_normal(layer[k].shape)).astype(np.float32)
    return m, p


def test_the_probe_is_the_naive_share_of_the_first_bit():
    m, p = _tiny()
    batch = first_batch(11, 30, np.random.default_rng(3))
    f = first_factors(m, 11).astype(np.float64)
    z_want, probs, scores = naive_first(p, batch.inputs, f, m.heads, m.eps)  # [layers, B, H, T]
    z, ks = first_shares(p, m, batch.inputs)
    np.testing.assert_allclose(z, z_want, rtol=1e-4, atol=1e-4)
    share = probs[:, :, :, 1].mean(axis=1)  # [layers, H]: the first bit, from $, averaged over sequences
    np.testing.assert_allclose(ks.share, share, rtol=1e-4)
    others = np.delete(scores, 1, axis=-1)  # every key but the first bit
    sd = others.std(axis=-1)
    gap = ((scores[..., 1] - others.mean(axis=-1)) / sd).mean(axis=1)
    np.testing.assert_allclose(ks.gap, gap, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ks.alpha, sd.mean(axis=1), rtol=1e-3)
    assert ks.queries.tolist() == [[30], [30]]
    assert ks.share.max() > 2 / 12  # the check can tell the first bit from a uniform share


def test_accuracy_reads_the_logit_sign():
    acc, loss = first_accuracy(np.array([2.0, -1.0, 0.5, -3.0]), np.array([1, 0, 0, 1]))
    assert acc == 0.5
    assert loss == pytest.approx(np.mean(np.logaddexp(0, -np.array([2.0, 1.0, -0.5, -3.0]))))


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("first")
    assert main(["run", "first", "--quick", "--workers", "1", "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.mark.slow
def test_the_quick_form_runs_from_the_command_line(quick):
    csv_path, png = quick / "one_key_first_quick.csv", quick / "one_key_first_quick.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    exp = EXPERIMENTS["first"]
    table = exp.read(csv_path)
    tasks = exp.tasks(QUICK_FIRST)
    assert len(tasks) == 2 * 4  # seeds x trained scales
    assert len(table) == sum(expected_first_rows(t) for t in tasks)
    r = table.rows
    test = r["kind"] == "test"
    assert sorted(set(r["length"][test].tolist())) == [8, 32]
    assert set(r["scale"][test & (r["scheme"] == "standard")]) == {"trained", "qwen_logn", "toolkit_share"}
    assert set(r["scale"][test & (r["scheme"] == "ssmax")]) == {"trained"}
    assert np.all(r["count"][test] == QUICK_FIRST.count)
    share = r["kind"] == "share"
    assert np.all((r["share"][share] > 0) & (r["share"][share] < 1))
    assert np.all(np.isfinite(r["share_predicted"][share]))
    factor = r["kind"] == "factor"
    np.testing.assert_allclose(r["value"][factor & (r["length"] == 8)], 1.0, atol=1e-9)  # the rule holds at L


@pytest.mark.slow
def test_a_rerun_trains_nothing(quick, monkeypatch):
    import softmax_scale.train.first as tf

    def refuse(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(tf, "train_first", refuse)
    path = quick / "one_key_first_quick.csv"
    before = path.read_bytes()
    run_experiment("first", quick=True, out=quick, workers=0, progress=False)
    assert path.read_bytes() == before


@pytest.mark.slow
def test_the_rerun_check_can_fail(quick, monkeypatch, tmp_path):
    """Negative control: with one task's rows missing the rerun must train, and the refusal shows it."""
    import softmax_scale.train.first as tf

    monkeypatch.setattr(tf, "train_first", lambda *a, **k: (_ for _ in ()).throw(AssertionError("trained again")))
    lines = (quick / "one_key_first_quick.csv").read_text().splitlines(keepends=True)
    (tmp_path / "one_key_first_quick.csv").write_text("".join(lines[:-3]))
    with pytest.raises(AssertionError, match="trained again"):
        run_experiment("first", quick=True, out=tmp_path, workers=0, progress=False)


def _csv_rows(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


@pytest.mark.slow
def test_evidence_is_the_paired_difference_of_the_rows(quick):
    exp = EXPERIMENTS["first"]
    path = quick / "one_key_first_quick.csv"
    acc = {(r["scheme"], r["scale"], int(r["length"]), int(r["seed"])): float(r["accuracy"])
           for r in _csv_rows(path) if r["kind"] == "test"}
    ev = exp.evidence(exp.read(path))
    assert len(ev) == 5  # three trained scales and two test-time ones against standard, at n = 32
    e = next(x for x in ev if x.scale == "their log n (ln(n+1))")
    d = [acc["chiang_cholak", "trained", 32, s] - acc["standard", "trained", 32, s] for s in (0, 1)]
    assert e.difference == pytest.approx(np.mean(d), abs=1e-12)
    assert e.spread == pytest.approx(np.std(d, ddof=1), abs=1e-12)
    assert e.seeds == (0, 1)
    assert e.multiple == 4.0


@pytest.mark.slow
def test_the_summary_prints_the_rows(quick):
    exp = EXPERIMENTS["first"]
    path = quick / "one_key_first_quick.csv"
    acc = [float(r["accuracy"]) for r in _csv_rows(path)
           if r["kind"] == "test" and r["scheme"] == "ssmax" and r["length"] == "32"]
    text = exp.summaries(exp.read(path))[0]
    line = next(x for x in text.splitlines() if "| ssmax (s ln n) (2) |" in x)
    assert f"{np.mean(acc):.3f} ± {np.std(acc, ddof=1) / np.sqrt(len(acc)):.3f}" in line  # the standard error


def test_bad_config_is_one_clear_error():
    with pytest.raises(ValueError, match="`test_lengths` must hold every training length"):
        FirstConfig(train_lengths=(10, 30), test_lengths=(10, 100))
    with pytest.raises(ValueError, match="`scales`"):
        dataclasses.replace(QUICK_FIRST, scales=("yarn",))
    with pytest.raises(ValueError, match="`train_lengths` must be increasing"):
        FirstConfig(train_lengths=(30, 10), test_lengths=(10, 30))


def test_a_test_length_below_the_training_length_is_one_clear_error():
    m = FirstModel(30)
    with pytest.raises(ValueError, match="`lengths` must be >= the training length 30"):
        FirstTask(m, 0, (30, 10), 100)
    with pytest.raises(ValueError, match="`lengths` must start with the training length 30"):
        FirstTask(m, 0, (100,), 100)


def test_bad_seeds_on_the_command_line_exit_2_with_one_line(tmp_path, capsys):
    assert main(["run", "first", "--quick", "--seeds", "0", "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "`seeds`" in err
    assert len(err.strip().splitlines()) == 1

"""What the committed result files say (``Experiment.evidence``), checked against the rows read with the csv module."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from softmax_scale.experiments import EXPERIMENTS, Evidence, applied_at_test, at_test_label

FIGURES = Path(__file__).resolve().parents[2] / "figures"


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _mean_sd(values):
    m = sum(values) / len(values)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else math.nan
    return m, sd


def _evidence(name):
    exp = EXPERIMENTS[name]
    path = exp.result_path(exp.config(), FIGURES)
    if not path.exists():
        pytest.skip(f"{path} is not committed")
    return path, exp.evidence(exp.read(path))


def test_mlm_evidence_pairs_each_scale_with_standard_by_seed():
    path, ev = _evidence("mlm")
    assert all(isinstance(e, Evidence) for e in ev)
    value = {}
    for r in _rows(path):
        if r["kind"] == "test" and r["status"] == "ok":
            value[r["scheme"], r["scale"], int(r["x"]), int(r["seed"])] = (float(r["loss"]), float(r["accuracy"]))
    e = next(x for x in ev if x.scale == "entropy_invariant@512" and x.multiple == 4.0 and x.metric == "accuracy")
    d = [value["entropy_invariant@512", "trained", 256, s][1] - value["standard", "trained", 256, s][1] for s in (0, 1, 2)]
    m, sd = _mean_sd(d)
    assert e.seeds == (0, 1, 2)
    assert e.difference == pytest.approx(m, abs=1e-12)
    assert e.spread == pytest.approx(sd, abs=1e-12)
    assert (e.reference, e.rope, e.task, e.size_unit) == ("standard", "none", "masked bytes", "parameters")
    assert e.size > 0
    logn = [x for x in ev if x.scale == "standard + qwen_logn@64 at test"]
    assert sorted({x.multiple for x in logn}) == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert len(ev) == 4 * 5 * 2  # three trained scales and the test-time one, five lengths, two metrics


def test_alpha_evidence_pairs_each_constant_with_alpha_star_at_l():
    path, ev = _evidence("alpha")
    value = {(r["scheme"], int(r["seed"])): float(r["loss"]) for r in _rows(path)
             if r["kind"] == "test" and r["status"] == "ok"}
    e = next(x for x in ev if x.scale == "alpha=0.5" and x.metric == "loss")
    d = [value["alpha=0.5", s] - value["alpha_star", s] for s in e.seeds]
    m, sd = _mean_sd(d)
    assert e.difference == pytest.approx(m, abs=1e-12)
    assert e.spread == pytest.approx(sd, abs=1e-12)
    assert e.multiple == 1.0
    assert e.reference == "alpha_star"
    assert {x.scale for x in ev} == {f"alpha={a:.4g}" for a in (0.125, 0.25, 0.5, 1, 2, 4, 8)}


def test_causal_evidence_is_the_count_weighted_whole_sequence_difference():
    path, ev = _evidence("causal")
    loss = defaultdict(lambda: [0.0, 0])
    for r in _rows(path):
        if r["kind"] in ("test", "window") and r["status"] == "ok" and r["length"] == "2048":
            k = (r["kind"], r["scheme"], r["rope"], r["scale"], int(r["seed"]))
            loss[k][0] += float(r["loss"]) * int(r["count"])
            loss[k][1] += int(r["count"])
    e = next(x for x in ev if x.scale == "standard + qwen_logn@128 at test" and x.rope == "ntk" and x.multiple == 16.0
             and x.metric == "loss" and x.reference == "standard")
    d = [loss["test", "standard", "ntk", "qwen_logn@128", s][0] / loss["test", "standard", "ntk", "qwen_logn@128", s][1]
         - loss["test", "standard", "ntk", "trained", s][0] / loss["test", "standard", "ntk", "trained", s][1]
         for s in (0, 1, 2)]
    m, sd = _mean_sd(d)
    assert e.seeds == (0, 1, 2)
    assert e.difference == pytest.approx(m, rel=1e-9)
    assert e.spread == pytest.approx(sd, rel=1e-9)
    w = next(x for x in ev if x.scale == "entropy_invariant@128" and x.rope == "rerope" and x.multiple == 8.0
             and x.metric == "loss" and x.reference == "sliding window of L")
    assert np.isfinite(w.difference)
    assert w.task == "next byte"
    assert {x.multiple for x in ev} == {8.0, 16.0}


def test_extrapolation_evidence_is_the_per_document_difference_past_l():
    path, ev = _evidence("real_extrapolation")
    rows = [r for r in _rows(path) if r["layer"] == "-1"]
    with open(path, encoding="utf-8") as f:
        L = int(next(line for line in f if line.startswith("# train_length:")).split(":")[1])
    bucket = max(int(r["lo"]) for r in rows)

    def loss(kind, rope, scheme):
        return {r["doc"]: float(r["loss"]) for r in rows if (r["kind"], r["rope"], r["scheme"]) == (kind, rope, scheme)
                and int(r["lo"]) == bucket}

    a, w = loss("model", "yarn", "qwen_logn"), loss("window", "none", "standard")
    d = [a[doc] - w[doc] for doc in sorted(a)]
    m, sd = _mean_sd(d)
    e = next(x for x in ev if (x.rope, x.scale, x.reference) == ("yarn", "standard + qwen_logn at test", "sliding window of L")
             and x.multiple == max(y.multiple for y in ev))
    assert e.difference == pytest.approx(m, rel=1e-9)
    assert e.spread == pytest.approx(sd, rel=1e-9)
    assert len(e.seeds) == len(d)
    assert e.size == 135_000_000
    assert e.task == "next token"
    hi = max(int(r["hi"]) for r in rows)
    assert e.multiple == (bucket + hi) / (2 * L)
    assert all(x.multiple > 1.0 for x in ev)


def test_extrapolation_evidence_compares_each_scale_with_standard_under_the_same_rope():
    path, ev = _evidence("real_extrapolation")
    rows = [r for r in _rows(path) if r["layer"] == "-1" and r["kind"] == "model"]
    bucket = max(int(r["lo"]) for r in rows)

    def loss(rope, scheme):
        return {r["doc"]: float(r["loss"]) for r in rows if (r["rope"], r["scheme"]) == (rope, scheme)
                and int(r["lo"]) == bucket}

    a, s = loss("ntk", "qwen_logn"), loss("ntk", "standard")
    m, sd = _mean_sd([a[doc] - s[doc] for doc in sorted(a)])
    last = max(x.multiple for x in ev)
    e = next(x for x in ev if (x.rope, x.scale, x.reference, x.multiple) == ("ntk", "standard + qwen_logn at test",
                                                                         "standard", last))
    assert e.difference == pytest.approx(m, rel=1e-9)
    assert e.spread == pytest.approx(sd, rel=1e-9)


def test_extrapolation_evidence_has_no_comparison_of_standard_with_itself():
    _, ev = _evidence("real_extrapolation")
    assert [x for x in ev if x.scale == "standard" and x.reference == "standard"] == []
    assert [x for x in ev if x.rope == "none" and x.reference == "standard, RoPE none"] == []


def test_every_scale_but_standard_is_applied_at_test_to_the_pretrained_model():
    _, ev = _evidence("real_extrapolation")
    assert {x.scale for x in ev if not applied_at_test(x.scale)} == {"standard"}


def test_the_at_test_label_is_read_back():
    assert applied_at_test(at_test_label("standard", "qwen_logn@64"))


def test_a_trained_scale_is_not_read_as_applied_at_test():
    assert not applied_at_test("entropy_invariant@512")


def test_the_tables_without_comparisons_give_none():
    for name in ("alpha_table", "real_heads"):
        assert EXPERIMENTS[name].evidence(None) == []

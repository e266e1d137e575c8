"""Sweeps of training runs: the quick mlm experiment end to end from the command line, resumed, through Dask,
read without JAX."""

import concurrent.futures as cf
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from softmax_scale._util.store import ResultStore  # noqa: E402
from softmax_scale.cli import main  # noqa: E402
from softmax_scale.experiments import EXPERIMENTS, run_experiment  # noqa: E402
from softmax_scale.experiments._training import COLUMNS, Task, run_summary  # noqa: E402
from softmax_scale.experiments.mlm import mlm_summary  # noqa: E402
from softmax_scale.experiments.sweep import dask_executor, run_sweep  # noqa: E402
from softmax_scale.train import QUICK, TrainConfig  # noqa: E402

MLM = EXPERIMENTS["mlm"]

ROOT = Path(__file__).resolve().parents[2]


def cli(*argv, timeout=1800):  # a guard against a hang, not a speed test (a loaded machine takes minutes)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-W", "error", "-m", "softmax_scale", *argv], env=env, capture_output=True,
                         text=True, timeout=timeout, check=False, cwd=ROOT)
    return res, time.perf_counter() - t0


@pytest.fixture(scope="module")
def quick_mlm(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    res, seconds = cli("train", "--experiment", "mlm", "--quick", "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr[-3000:]
    return out, seconds, res


def comparable(table):
    """Every row as a tuple of its cells but the wall time, sorted."""
    cols = [c for c in COLUMNS if c != "seconds"]
    rows = zip(*(np.asarray(table.rows[c]).astype(str) for c in cols))
    return sorted(rows)


@pytest.mark.slow
def test_quick_mlm_end_to_end(quick_mlm):
    # no wall-time assertion: timings are benchmarks (benchmarks/bench_train.py), not unit tests
    out, seconds, res = quick_mlm
    csv, png = out / "train_mlm_quick.csv", out / "train_mlm_quick.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    t = MLM.read(csv)
    for key in ("command", "config", "corpus", "jax", "date", "baseline"):
        assert t.header[key], key
    assert "pydoc_topics" in t.header["corpus"]
    assert "train " in t.header["corpus"]
    s = mlm_summary(t)
    assert s["diverged"] == []
    assert set(k for k in s if k != "diverged") == {("standard", "trained"), ("standard", "qwen_logn@16"),
                                                    ("entropy_invariant@512", "trained"), ("ssmax", "trained"),
                                                    ("alpha_star", "trained")}
    for key, v in s.items():
        if key != "diverged":
            assert v["seeds"] == 2
            assert np.all(np.isfinite(v["accuracy"]))
            assert np.all(v["loss"] > 0)
    assert "| standard (2) |" in res.stdout
    assert "Attention-E" in res.stdout


@pytest.mark.slow
def test_a_rerun_skips_every_finished_run(quick_mlm):
    out, _, _ = quick_mlm
    csv = out / "train_mlm_quick.csv"
    before = csv.read_bytes()
    t0 = time.perf_counter()
    run_experiment("mlm", quick=True, out=out, progress=False)
    assert time.perf_counter() - t0 < 10  # nothing trained
    assert csv.read_bytes() == before
    assert not list((out / ".train-checkpoints").iterdir())  # finished runs leave no checkpoint


@pytest.mark.slow
def test_the_dask_sweep_gives_the_local_rows(quick_mlm, tmp_path):
    distributed = pytest.importorskip("distributed")
    out, _, _ = quick_mlm
    local = MLM.read(out / "train_mlm_quick.csv")
    first = dataclasses.replace(MLM.config(quick=True), seeds=1)  # seed 0's tasks: a task's rows depend on it alone
    local = SimpleNamespace(rows={c: v[local.rows["seed"] == 0] for c, v in local.rows.items()})
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        remote = run_experiment("mlm", config=first, out=tmp_path, scheduler=cluster.scheduler_address, progress=False)
    assert len(remote) == local.rows["seed"].size > 0
    assert comparable(remote) == comparable(local)
    # in the same order too (canonical: the tasks' order, whichever worker finished first)
    keep = [c for c in COLUMNS if c != "seconds"]
    assert all(np.array_equal(remote.rows[c], local.rows[c]) for c in keep if c not in ("loss", "accuracy", "sigma"))
    for c in ("loss", "accuracy", "sigma"):
        np.testing.assert_array_equal(remote.rows[c], local.rows[c])


def test_a_diverged_run_is_recorded_and_skipped(tmp_path):
    bad = QUICK.replace(lr=500.0, clip=1e9, warmup=0, steps=10)
    task = Task("exploding", 0, bad, (16,), curve_every=5)
    header = {"experiment": "test", "config": "x"}

    def store():
        return ResultStore(tmp_path / "s.csv", header, MLM.columns, key=MLM.key, match=("experiment",))

    with cf.ThreadPoolExecutor(1) as ex:  # any executor
        assert run_sweep(MLM, [task], store(), executor=ex, progress=False) == 1
        t = MLM.read(tmp_path / "s.csv")
        assert list(t.rows["status"]) == ["diverged"]
        assert list(t.rows["kind"]) == ["diverged"]
        assert "diverged at step" in t.rows["note"][0]
        assert np.isnan(t.rows["loss"][0])
        assert run_sweep(MLM, [task], store(), executor=ex, progress=False) == 0  # skipped
    assert len(MLM.read(tmp_path / "s.csv")) == 1


def test_an_unreachable_scheduler_is_one_clear_error():
    with pytest.raises(ValueError, match="`scheduler`"):
        with dask_executor("tcp://127.0.0.1:9", timeout="2s"):
            pass


@pytest.mark.parametrize("argv, name", [
    (["--experiment", "nope"], "`experiment`"),
    (["--experiment", "mlm", "--seeds", "0"], "`seeds`"),
    (["--experiment", "mlm", "--workers", "0"], "`workers`"),
])
def test_bad_cli_input_exits_2_with_one_line(capsys, argv, name, tmp_path):
    code = main(["train", *argv, "--quick", "--out", str(tmp_path), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 2
    assert name in err
    assert len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.csv"))  # nothing half-written


def test_evaluate_bad_input_names_the_parameter():
    from softmax_scale.train.evaluation import evaluate
    from softmax_scale.train.model import init_params

    params = init_params(QUICK, 0)
    for lengths in ([0], [16, -3], [QUICK.max_length + 1]):
        with pytest.raises(ValueError, match="`lengths`"):
            evaluate(params, QUICK, lengths)
    with pytest.raises(ValueError, match="`scheme`"):
        evaluate(params, QUICK, [16], scheme="no_such_scale")
    with pytest.raises(ValueError, match="`rope`"):
        evaluate(params, QUICK, [16], rope="no_such_rope")
    with pytest.raises(ValueError, match="`scheme`"):
        evaluate(init_params(QUICK.replace(scheme="ssmax"), 0), QUICK.replace(scheme="ssmax"), [16], scheme="qwen_logn")


def test_evaluation_is_the_same_for_every_model_and_per_position():
    from softmax_scale.train.evaluation import evaluate
    from softmax_scale.train.model import init_params

    a = evaluate(init_params(QUICK, 0), QUICK, [16, 32], tokens=512)
    b = evaluate(init_params(QUICK, 1), QUICK, [16, 32], tokens=512)
    for n in (16, 32):
        np.testing.assert_array_equal(a[n].counts, b[n].counts)  # the same masked positions
        assert a[n].count == a[n].counts.sum()
        assert a[n].nll.shape == (n,)
        assert a[n].loss == pytest.approx(a[n].nll.sum() / a[n].count)
        assert a[n].accuracy == pytest.approx(a[n].correct.sum() / a[n].count)
    same = evaluate(init_params(QUICK, 0), QUICK, [16], tokens=512, rope="ntk")  # at the training length: unchanged
    assert same[16].loss == a[16].loss
    assert same.scale == "trained, rope ntk"
    longer = evaluate(init_params(QUICK, 0), QUICK, [32], tokens=512, rope="ntk")
    assert longer[32].loss != a[32].loss


def test_the_experiments_are_what_the_issue_asks():
    mlm = MLM.tasks(MLM.config())
    assert {t.label for t in mlm} == {"standard", "entropy_invariant@512", "ssmax", "alpha_star"}
    assert {t.seed for t in mlm} == {0, 1, 2}
    assert all(t.lengths == (64, 128, 256, 512, 1024) for t in mlm)
    assert all(t.config.train_length == 64 and t.config.objective == "mlm" for t in mlm)
    assert [t.overrides for t in mlm if t.label == "standard"][0] == (("qwen_logn", 64),)
    alpha = EXPERIMENTS["alpha"].tasks(EXPERIMENTS["alpha"].config())
    grid = sorted(t.config.alpha for t in alpha if t.config.scheme == "alpha")
    import softmax_scale as ss

    assert grid[0] < ss.optimal_alpha(64)
    assert grid[-1] > ss.optimal_alpha(64, objective="geometric")
    assert {t.seed for t in alpha} == {0, 1}
    assert any(t.label == "alpha_star" for t in alpha)
    assert all(isinstance(t.config, TrainConfig) and t.sigma for t in alpha)


NO_JAX = """
import sys, json
sys.modules["jax"] = None  # as if JAX were not installed
import softmax_scale.train as st
from softmax_scale.experiments import EXPERIMENTS
from softmax_scale.experiments.mlm import mlm_markdown
from softmax_scale.plotting.train import train_mlm_figure
t = EXPERIMENTS["mlm"].read(sys.argv[1])
train_mlm_figure(t)
text = mlm_markdown(t)
evidence = EXPERIMENTS["mlm"].evidence(t)
try:
    st.train_model
    err = ""
except ImportError as e:
    err = str(e)
print(json.dumps({"rows": len(t), "err": err, "jax": "jax" in sys.modules and sys.modules["jax"] is not None,
                  "evidence": len(evidence)}))
"""


@pytest.mark.slow
def test_reading_results_needs_no_jax(quick_mlm):
    import json

    out, _, _ = quick_mlm
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    res = subprocess.run([sys.executable, "-W", "error", "-c", NO_JAX, str(out / "train_mlm_quick.csv")], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["rows"] > 0
    assert not got["jax"]
    assert got["evidence"] > 0
    assert "train" in got["err"]
    assert "pip install" in got["err"]


def test_run_summary_is_the_tail_mean_and_the_curve_means():
    """The one rule both experiments record a run by, against a loop written out by hand."""
    from types import SimpleNamespace

    steps, k = 60, 20
    rng = np.random.default_rng(3)
    hist = {"loss": rng.random(steps), "accuracy": rng.random(steps)}
    cfg = SimpleNamespace(steps=steps, tokens_per_step=lambda: 7)
    res = SimpleNamespace(history=hist, steps=steps, seconds=1.5)
    out = run_summary(res, cfg, k)
    kind, step, loss, acc, count, sec = out[0]
    assert (kind, step, count, sec) == ("run", steps, steps * 7, 1.5)
    assert loss == pytest.approx(sum(hist["loss"][57:]) / 3)
    assert acc == pytest.approx(sum(hist["accuracy"][57:]) / 3)
    assert [r[:2] for r in out[1:]] == [("curve", 20), ("curve", 40), ("curve", 60)]
    for (_, end, loss, acc, count, sec) in out[1:]:
        assert count == k
        assert np.isnan(sec)
        assert loss == pytest.approx(sum(hist["loss"][end - k:end]) / k)
        assert acc == pytest.approx(sum(hist["accuracy"][end - k:end]) / k)
    one = run_summary(SimpleNamespace(history=hist, steps=steps, seconds=0.0), SimpleNamespace(steps=10, tokens_per_step=lambda: 1), 5)
    assert one[0][2] == hist["loss"][-1]  # fewer than 20 steps: the last step alone


@pytest.mark.slow
def test_mlm_evidence_is_the_paired_difference_of_the_rows(quick_mlm):
    """Each entry against the rows written out by hand: per seed the scale's value minus standard's, then the mean."""
    out, _, _ = quick_mlm
    t = MLM.read(out / "train_mlm_quick.csv")
    ev = MLM.evidence(t)
    r = t.rows
    assert {(e.scale, e.multiple) for e in ev} == {(s, n / 16) for s in ("entropy_invariant@512", "ssmax", "alpha_star",
                                                                         "standard + qwen_logn@16 at test")
                                                   for n in (16, 32, 64)}
    for e in ev:
        label, _, scale = e.scale.partition(" + ")
        scale = scale.removesuffix(" at test") or "trained"
        n = int(e.multiple * 16)
        def value(lab, sc, seed, n=n, metric=e.metric):
            m = (r["scheme"] == lab) & (r["scale"] == sc) & (r["x"] == n) & (r["seed"] == seed) & (r["kind"] == "test")
            (v,) = r[metric][m]
            return v

        d = [value(label, scale, seed) - value("standard", "trained", seed) for seed in (0, 1)]
        assert e.seeds == (0, 1)
        assert e.difference == pytest.approx(np.mean(d), abs=1e-12)
        assert e.spread == pytest.approx(np.std(d, ddof=1), abs=1e-12)
        assert e.reference == "standard"
        assert e.size == QUICK.n_params
        assert e.size_unit == "parameters"

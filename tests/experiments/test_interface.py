"""The Experiment interface: a toy experiment registered in the test runs from the command line, resumes and draws
its figure; a sweep writes its rows in task order whatever order the tasks finish in."""

from __future__ import annotations

import ast
import concurrent.futures as cf
import dataclasses
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from softmax_scale.cli import main
from softmax_scale.experiments import EXPERIMENTS, Evidence, Experiment, run_experiment

ROOT = Path(__file__).resolve().parents[2] / "softmax_scale"


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    quick: bool = False
    seeds: int = 3
    size: int = 5


@dataclasses.dataclass(frozen=True)
class ToyTask:
    seed: int
    size: int
    delay: float = 0.0


class Toy(Experiment):
    """Per seed, ``size`` normal draws and their running mean: numpy only."""

    name = "toy"
    description = "a toy"
    file_stem = "toy"
    columns = ("seed", "i", "value", "mean")
    ints = ("seed", "i")
    key = task_columns = ("seed",)
    match = ("size",)
    in_process = True

    def __init__(self, delays=None):
        self.calls = []
        self.delays = delays or {}
        self.lock = threading.Lock()

    def config(self, quick=False):
        return ToyConfig(quick=quick, seeds=2 if quick else 3)

    def tasks(self, config, *, out=None, progress=False):
        return [ToyTask(s, config.size, self.delays.get(s, 0.0)) for s in range(config.seeds)]

    def task_cells(self, task):
        return (task.seed,)

    def expected_rows(self, task):
        return task.size

    def run_task(self, task):
        with self.lock:
            self.calls.append(task.seed)
        time.sleep(task.delay)
        x = np.random.default_rng(task.seed).standard_normal(task.size)
        return [(task.seed, i, float(v), float(np.mean(x[: i + 1]))) for i, v in enumerate(x)]

    def header(self, config, tasks, command):
        return {"experiment": self.name, "size": str(config.size)}

    def summaries(self, table):
        return [f"| rows |\n|---:|\n| {len(table)} |"]

    def figures(self, drawings):
        def drawing(table):
            from matplotlib.figure import Figure

            fig = Figure()
            fig.add_subplot().plot(table.rows["i"], table.rows["mean"], ".")
            return fig

        return [("toy", drawing)]

    def evidence(self, table):
        return []


@pytest.fixture
def toy():
    exp = Toy()
    EXPERIMENTS["toy"] = exp
    try:
        yield exp
    finally:
        del EXPERIMENTS["toy"]
    assert "toy" not in EXPERIMENTS


def test_a_registered_toy_runs_from_the_command_line_resumes_and_draws(toy, tmp_path, capsys):
    assert main(["run", "toy", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    csv, png = tmp_path / "toy.csv", tmp_path / "toy.png"
    assert f"wrote {csv}" in out
    assert f"wrote {png}" in out
    assert "| 15 |" in out  # its summary: 3 seeds x 5 rows
    assert sorted(toy.calls) == [0, 1, 2]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = toy.read(csv)
    assert table.rows["seed"].tolist() == [0] * 5 + [1] * 5 + [2] * 5
    before = csv.read_bytes()
    assert main(["run", "toy", "--out", str(tmp_path), "--no-progress", "--no-figure"]) == 0
    assert sorted(toy.calls) == [0, 1, 2]  # the second run computed nothing
    assert csv.read_bytes() == before


def test_the_toy_rows_are_its_draws(toy, tmp_path):
    t = run_experiment("toy", out=tmp_path, progress=False)
    x = np.random.default_rng(1).standard_normal(5)
    got = t.rows["value"][t.rows["seed"] == 1]
    np.testing.assert_allclose(got, x, rtol=1e-8)  # written with 9 significant digits
    np.testing.assert_allclose(t.rows["mean"][t.rows["seed"] == 1], np.cumsum(x) / np.arange(1, 6), rtol=1e-8)


def test_a_resume_computes_only_the_missing_task(toy, tmp_path):
    run_experiment("toy", out=tmp_path, progress=False)
    csv = tmp_path / "toy.csv"
    full = csv.read_bytes()
    lines = csv.read_text().splitlines(keepends=True)
    csv.write_text("".join(lines[:-2]))  # seed 2 lost its last two rows
    toy.calls.clear()
    run_experiment("toy", out=tmp_path, progress=False)
    assert toy.calls == [2]
    assert csv.read_bytes() == full


def test_seeds_and_quick_reach_the_config(toy, tmp_path):
    t = run_experiment("toy", quick=True, seeds=4, out=tmp_path, progress=False)
    assert (tmp_path / "toy_quick.csv").exists()
    assert sorted(set(t.rows["seed"].tolist())) == [0, 1, 2, 3]


@pytest.mark.parametrize("argv, name", [(["run", "nope"], "`experiment`"), (["run", "toy", "--seeds", "0"], "`seeds`"),
                                        (["run", "toy", "--workers", "0"], "`workers`")])
def test_bad_run_input_exits_2_with_one_line(toy, tmp_path, capsys, argv, name):
    assert main([*argv, "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert name in err
    assert len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.csv"))


def test_rows_are_written_in_task_order_whatever_order_the_tasks_finish(tmp_path):
    """Two runs whose tasks finish in different orders (later seeds first, then a shuffle) write the same bytes."""
    files = []
    for k, delays in enumerate(({0: 0.3, 1: 0.15, 2: 0.0}, {0: 0.15, 1: 0.0, 2: 0.3})):
        exp = Toy(delays)
        exp.in_process = False
        with cf.ThreadPoolExecutor(3) as ex:
            run_experiment(exp, out=tmp_path / str(k), executor=ex, progress=False)
        assert exp.calls  # ran
        files.append((tmp_path / str(k) / "toy.csv").read_bytes())
    assert files[0] == files[1]
    rows = [line.split(",")[0] for line in files[0].decode().splitlines() if not line.startswith("#")][1:]
    assert rows == ["0"] * 5 + ["1"] * 5 + ["2"] * 5


def test_the_order_check_can_fail(tmp_path):
    """Negative control: appended as finished, without the final reorder, the rows are out of task order."""
    from softmax_scale._util.store import ResultStore

    exp = Toy({0: 0.3, 1: 0.0, 2: 0.15})
    store = ResultStore(tmp_path / "t.csv", {"experiment": "toy", "size": "5"}, exp.columns, key=exp.key)
    with cf.ThreadPoolExecutor(3) as ex:
        futures = [ex.submit(exp.run_task, t) for t in exp.tasks(exp.config())]
        for f in cf.as_completed(futures):
            store.append(f.result())
    seeds = [line.split(",")[0] for line in (tmp_path / "t.csv").read_text().splitlines() if not line.startswith("#")][1:]
    assert seeds != sorted(seeds)
    assert store.reorder(lambda cells: int(cells[0]))
    seeds = [line.split(",")[0] for line in (tmp_path / "t.csv").read_text().splitlines() if not line.startswith("#")][1:]
    assert seeds == sorted(seeds)


def test_the_registry_holds_every_study():
    assert list(EXPERIMENTS) == ["alpha_table", "real_heads", "real_extrapolation", "mlm", "alpha", "causal", "copy",
                                 "passkey", "size", "first", "real_passkey", "real_copy", "engine_cost"]
    for name in ("alpha_table", "mlm", "alpha", "causal", "copy", "passkey", "size", "first", "real_passkey",
                 "real_copy"):
        exp = EXPERIMENTS[name]
        assert isinstance(exp, Experiment)
        assert exp.name == name
        assert exp.config(quick=True).quick
        assert not exp.config().quick


def test_only_experiment_objects_can_be_registered():
    with pytest.raises(TypeError, match="`experiment`"):
        EXPERIMENTS["x"] = object()
    with pytest.raises(ValueError, match="`name`"):
        EXPERIMENTS["x"] = Toy()
    assert "x" not in EXPERIMENTS


def test_evidence_is_a_frozen_record():
    e = Evidence("mlm", "m", 10, "parameters", "none", "masked bytes", 2.0, "a", "b", "loss", -0.1, 0.05, (0, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.difference = 0.0


def _branches_on_a_name(src: str, names) -> list:
    """Lines that compare something with an experiment's name (``experiment == "causal"``, ``x in ("mlm", ...)``)."""
    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            parts += [e for p in parts if isinstance(p, (ast.Tuple, ast.List, ast.Set)) for e in p.elts]
            if any(isinstance(p, ast.Constant) and p.value in names for p in parts):
                out.append(node.lineno)
    return out


def test_no_front_end_branches_on_an_experiments_name():
    """The command line, the figure runner and the figures (the training harness's ``objective == "causal"`` is
    an objective, not an experiment, and is not checked)."""
    names = set(EXPERIMENTS)
    files = [ROOT / "cli.py", ROOT / "_cli_theory.py", ROOT / "figures.py", *sorted((ROOT / "plotting").glob("*.py"))]
    bad = [f"{p.relative_to(ROOT)}:{line}" for p in files for line in _branches_on_a_name(p.read_text(), names)]
    assert bad == []
    # the check finds a planted branch
    assert _branches_on_a_name('if experiment == "causal":\n    pass\nif e in ("mlm", "x"):\n    pass\n', names) == [1, 3]

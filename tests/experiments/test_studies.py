"""The alpha* table and the real heads as experiments: the same numbers as the functions the figures and the
``table`` and ``heads`` commands call, written, read back and resumed."""

from __future__ import annotations

import numpy as np
import pytest

from softmax_scale.cli import main
from softmax_scale.experiments import EXPERIMENTS, run_experiment
from softmax_scale.experiments.alpha_table import NOTE_GRID, TABLE_ROWS, alpha_table


def test_the_alpha_table_experiment_is_the_table(tmp_path, capsys):
    exp = EXPERIMENTS["alpha_table"]
    t = run_experiment("alpha_table", quick=True, out=tmp_path, progress=False)
    direct = alpha_table(NOTE_GRID[::10])
    for label, values in direct.columns.items():
        got = t.rows["alpha"][t.rows["scores"] == label]
        np.testing.assert_array_equal(got, values)  # the table's alpha* is as the file writes it: exact
    np.testing.assert_array_equal(t.rows["n"][t.rows["scores"] == "normal"], NOTE_GRID[::10])
    assert exp.summaries(t) == [direct.to_markdown()]
    assert main(["table", "--quick"]) == 0  # the printed rows only, each one computed
    assert capsys.readouterr().out == alpha_table(np.array(TABLE_ROWS)).to_markdown() + "\n"
    before = (tmp_path / "alpha_star_quick.csv").read_bytes()
    assert main(["run", "alpha_table", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "alpha_star_quick.csv").read_bytes() == before
    png = tmp_path / "alpha_star_quick_vs_n.png"
    assert f"wrote {png}" in out
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_committed_alpha_table_is_what_this_cpu_writes():
    """``make figures`` leaves figures/alpha_table.csv as committed: alpha* to the digits the optimiser guarantees."""
    from pathlib import Path

    committed = (Path(__file__).resolve().parents[2] / "figures" / "alpha_table.csv").read_text(encoding="utf-8")
    t = alpha_table(NOTE_GRID)
    assert t.to_csv() == committed
    cells = [c for line in committed.splitlines()[1:] for c in line.split(",")[1:]]
    assert max(len(c.replace(".", "").lstrip("0")) for c in cells) <= 10
    from scipy import special

    exact = np.sqrt(special.lambertw(NOTE_GRID * np.sqrt(np.e) / 2).real - 0.5)  # normal scores' closed form
    np.testing.assert_allclose(t.columns["normal"], exact, rtol=5e-10)  # every digit written is right


def test_the_alpha_figure_from_the_table_is_the_figure_that_computes_it(tmp_path):
    from softmax_scale.plotting.alpha import alpha_star_vs_n

    t = run_experiment("alpha_table", quick=True, out=tmp_path, progress=False)
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    alpha_star_vs_n(ns=NOTE_GRID[::10]).savefig(a, dpi=50)
    alpha_star_vs_n(table=t).savefig(b, dpi=50)
    assert a.read_bytes() == b.read_bytes()


@pytest.fixture(scope="module")
def minilm():
    from softmax_scale import models

    try:
        return models.load("minilm")
    except (ImportError, FileNotFoundError) as exc:
        pytest.skip(f"MiniLM not installed: {exc}")


@pytest.fixture(scope="module")
def quick_heads(minilm, tmp_path_factory):
    """The quick real_heads experiment run once: its folder and its table read back."""
    out = tmp_path_factory.mktemp("heads")
    return out, run_experiment("real_heads", quick=True, out=out, progress=False)


@pytest.mark.slow
def test_the_real_heads_experiment_reads_back_the_table(quick_heads):
    from softmax_scale.experiments.real_heads import real_head_table

    exp = EXPERIMENTS["real_heads"]
    cfg = exp.config(quick=True)
    tmp_path, t = quick_heads
    direct = real_head_table("minilm", ns=cfg.ns, chunks=cfg.chunks, rng=cfg.rng, layers=cfg.layers)
    for k in ("sigma", "entropy", "predicted_entropy", "alpha_star", "entropy_rescaled", "slope", "slope_iid", "sep"):
        np.testing.assert_array_equal(getattr(t, k), getattr(direct, k), err_msg=k)  # written with every digit
    np.testing.assert_array_equal(t.ns, direct.ns)
    np.testing.assert_array_equal(t.layer_index, direct.layer_index)
    np.testing.assert_allclose(t.scale_factor, direct.scale_factor, rtol=1e-15)
    assert (t.model, t.chunks, t.head_dim) == (direct.model, direct.chunks, direct.head_dim)
    assert exp.summaries(t)[0].count("\n| 32 |") == 1
    csv = tmp_path / "real_heads_quick.csv"
    before = csv.read_bytes()
    run_experiment("real_heads", quick=True, out=tmp_path, progress=False)  # done: nothing recomputed
    assert csv.read_bytes() == before


def test_the_main_job_draws_the_real_heads_from_their_file_as_run_does(quick_heads, monkeypatch):
    from softmax_scale import figures
    from softmax_scale.experiments import real_heads
    from softmax_scale.plotting import save_figures

    tmp_path, t = quick_heads
    csv = tmp_path / "real_heads_quick.csv"
    save_figures("real_heads", t, csv)  # what `softmax-scale run real_heads --quick` draws
    before = csv.read_bytes()

    def recomputed(*args, **kwargs):
        raise AssertionError("the table was computed again")

    monkeypatch.setattr(real_heads, "real_head_table", recomputed)
    done = figures.make_figures(tmp_path, quick=True, only=["real_heads_sigma", "real_heads_entropy"], progress=False)
    assert [d[0] for d in done] == ["real_heads_sigma", "real_heads_entropy"]
    assert csv.read_bytes() == before
    for name in ("sigma", "entropy"):
        assert (tmp_path / f"real_heads_{name}.png").read_bytes() == (tmp_path / f"real_heads_quick_{name}.png").read_bytes()

"""``measure``'s adaptive sweep: the search on synthetic loss curves (closed-form minima), and on a tiny GGUF.

- :func:`next_factor` brackets, then refines: on smooth one-minimum curves (a parabola, a skewed
  cubic, a curve whose minimum is far outside the first cells) the lowest cell and its neighbours
  bracket the known minimiser, and the parabola through them lands near it; cells stay ``spacing``
  apart and positive.
- On a tiny GGUF: the first document reads the cells the search chose on its own losses, the
  others 1 and the lowest with its neighbours; every row equals a fixed-grid run of the same
  constants; a rerun reads nothing; the header says which sweep made the cells.
"""

import numpy as np
import pytest

from softmax_scale.experiments import _measure_run
from softmax_scale.experiments import measure as ms
from softmax_scale.experiments._measure_stats import adaptive_cells, follow_factors, next_factor
from tests.models.tiny_gguf import refuse_reads, write

CURVES = [(0.7, lambda x: 1.5 + 3 * (x - 0.7) ** 2),
          (0.93, lambda x: 1.48 + 3 * (x - 0.93) ** 2 + 0.5 * (x - 0.93) ** 3),
          (1.09, lambda x: 1.4831 + 2.0 * (x - 1.09) ** 2 - 0.8 * (x - 1.09) ** 3),
          (2.2, lambda x: 2.0 + 0.4 * (x - 2.2) ** 2)]


@pytest.mark.parametrize("m, f", CURVES)
def test_the_search_brackets_the_minimiser_and_refines_near_it(m, f):
    xs, ys = adaptive_cells(f, (1.0, 1.2965), 7, spacing=0.05)
    assert xs.size == 7 and np.all(xs > 0) and np.all(np.diff(xs) >= 0.05 - 1e-12)
    j = int(np.argmin(ys))
    assert 0 < j < xs.size - 1 and xs[j - 1] < m < xs[j + 1]
    a = np.polyfit(xs[j - 1:j + 2], ys[j - 1:j + 2], 2)
    assert abs(-a[1] / (2 * a[0]) - m) < 0.02
    assert np.sum(np.abs(xs - m) < 0.4) >= 3  # the cells near the minimum


def test_a_fixed_grid_of_the_same_cells_brackets_the_minimiser_less_tightly():
    """The search against the default grid on the curve whose minimum (1.09) the committed SmolLM2 grid found."""
    m, f = CURVES[2]
    xs, ys = adaptive_cells(f, (1.0, 1.2965), 6)
    j = int(np.argmin(ys))
    grid = np.asarray(ms.DEFAULT_FACTORS)
    k = int(np.argmin([f(x) for x in grid]))
    assert xs[j + 1] - xs[j - 1] < grid[k + 1] - grid[k - 1]


def test_next_factor_steps_past_the_lowest_end_and_never_to_zero():
    assert next_factor([1.0, 1.3], [2.0, 1.0]) == pytest.approx(1.3 + 1.618 * 0.3)
    assert next_factor([1.0, 1.3], [1.0, 2.0]) == pytest.approx(1.0 - 1.618 * 0.3)
    assert next_factor([1.0, 1.7], [1.0, 2.0]) == pytest.approx(1.0 / 2)  # 1 - 1.618 * 0.7 < 0: halve
    assert next_factor([0.4, 1.0], [1.0, 2.0]) == pytest.approx(0.2)
    assert next_factor([1.0], [1.0], spacing=0.05) == pytest.approx(1.1)
    # bracketed, with the vertex on a cell: the golden point of the wider side
    x = next_factor([1.0, 1.1, 1.5], [0.01, 0.0, 0.16], spacing=0.05)
    assert x == pytest.approx(1.1 + (3 - 5 ** 0.5) / 2 * 0.4)
    assert next_factor([1.0, 1.1, 1.5], [1.0, 0.0, 1.0]) == pytest.approx(1.25)  # the parabola's vertex
    # every point of the bracket taken: the nearest free one beside the lowest, the lower neighbour's side first
    assert next_factor([1.0, 1.05, 1.1], [0.1, 0.0, 0.2], spacing=0.05) == pytest.approx(0.95)
    with pytest.raises(ValueError, match="`spacing` must be positive"):
        next_factor([1.0], [1.0], spacing=0)


def test_follow_factors_are_1_and_the_lowest_with_its_neighbours():
    assert follow_factors([1.3, 1.0, 1.1, 1.2, 1.6], [3, 2, 1, 0.5, 4]) == (1.0, 1.1, 1.2, 1.3)
    assert follow_factors([1.0, 1.3, 1.6], [0, 1, 2]) == (1.0, 1.3, 1.6)  # at the end: the three there


# ---------------------------------------------------------------------------------------------
# On a tiny GGUF


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("adaptive")
    path = d / "tiny.gguf"
    write(path, "qwen2", rope_scaling={"type": "yarn", "factor": 4.0}, gain=0.5)
    return path


def _rows(path):
    return ms.MeasureExperiment().read(path).rows


def test_the_adaptive_sweep_on_a_tiny_gguf(tiny, tmp_path, monkeypatch):
    kw = dict(shapes=(), docs=3, prompts=1, progress=False, figure_file=False)
    r = ms.measure(tiny, 128, adaptive=5, out=tmp_path / "a.csv", **kw)
    assert r.header["cells"].startswith("adaptive, 5 constants")
    rows = _rows(r.path)
    const = rows["scheme"] == "constant"
    docs = list(dict.fromkeys(rows["item"][rows["task"] == "loss"]))
    first = const & (rows["item"] == docs[0])
    xs, ys = rows["factor"][first], rows["loss"][first]
    assert xs.size == 5 and 1.0 in xs and np.all(np.diff(xs) > 0)
    # the search on the first document's own losses chooses the cells it read
    recipe = rows["factor_mean"][(rows["scheme"] == "recipe") & (rows["item"] == docs[0])][0]
    loss = dict(zip(xs.tolist(), ys.tolist()))
    again, _ = adaptive_cells(lambda x: loss[min(loss, key=lambda k: abs(k - x))], (1.0, recipe), 5)
    np.testing.assert_allclose(again, xs, rtol=1e-8)
    follow = follow_factors(xs, ys)
    for item in docs[1:] + ["d0.1-k0"]:
        assert tuple(rows["factor"][const & (rows["item"] == item)]) == follow
    # every row equals a fixed-grid run of the same constants (the continued prefix alike)
    grid = ms.measure(tiny, 128, factors=xs, out=tmp_path / "g.csv", **kw)
    g = _rows(grid.path)
    for item, x, v in zip(rows["item"][const], rows["factor"][const], rows["loss"][const]):
        (w,) = g["loss"][(g["item"] == item) & (g["scheme"] == "constant") & np.isclose(g["factor"], x)]
        assert v == pytest.approx(w, rel=1e-6)
    # resumed: nothing is read again, the file is unchanged
    before = r.path.read_bytes()
    refuse_reads(monkeypatch)
    monkeypatch.setattr(_measure_run, "_RUNS", dict(_measure_run._RUNS))
    ms.measure(tiny, 128, adaptive=5, out=tmp_path / "a.csv", **kw)
    assert r.path.read_bytes() == before


def test_adaptive_refuses_factors_and_quick(tiny, tmp_path):
    with pytest.raises(ValueError, match="`adaptive` chooses the constants"):
        ms.measure(tiny, 128, adaptive=5, factors=(1.0, 1.1), out=tmp_path, progress=False)
    with pytest.raises(ValueError, match="`adaptive` must be"):
        ms.measure(tiny, 128, adaptive=2, out=tmp_path, progress=False)
    with pytest.raises(ValueError, match="`spacing` must be between"):
        ms.measure(tiny, 128, adaptive=5, spacing=0, out=tmp_path, progress=False)


# ---------------------------------------------------------------------------------------------
# The time said before it is spent


def test_the_estimate_weighs_each_unit_by_its_reads_and_length_squared():
    from softmax_scale.experiments._measure_sweep import estimate_seconds

    plan = [(100, 3), (100, 3), (200, 3), (100, 7)]
    # (3 + 1) * 100**2 per unit like the first; the 200-token unit 4 times; 7 reads: twice
    assert estimate_seconds(2.0, plan) == pytest.approx(2.0 * (1 + 4 + 2))
    assert estimate_seconds(2.0, plan[:1]) == 0.0


def _clock(monkeypatch, seconds):
    """``measure``'s clock: every reading ``seconds`` after the last (the first unit takes exactly that)."""
    import itertools
    import types

    monkeypatch.setattr(ms, "time", types.SimpleNamespace(perf_counter=itertools.count(0.0, seconds).__next__))


def test_the_estimate_is_said_before_the_second_unit_runs(tiny, tmp_path, monkeypatch, capsys):
    run = ms.MeasureExperiment.run_task
    said = []

    def unit(self, t):
        said.append(capsys.readouterr().err)
        return run(self, t)

    monkeypatch.setattr(ms.MeasureExperiment, "run_task", unit)
    ms.measure(tiny, 128, factors=(1.0, 1.2), shapes=(), docs=3, prompts=0, out=tmp_path, figure_file=False)
    assert len(said) == 3 and "whole run" not in said[0]
    assert said[1].count("the whole run about") == 1 and "(3 units" in said[1]


def test_a_budget_sizes_the_documents_from_the_first_unit(tiny, tmp_path, monkeypatch, capsys):
    """Equal units (one length, same cells), the first timed at 0.3 s: 4 do not fit 1.08 s, 3 do."""
    _clock(monkeypatch, 0.3)
    kw = dict(factors=(1.0, 1.2), shapes=(), recipe=False, prompts=0, figure_file=False, progress=False)
    r = ms.measure(tiny, 128, docs=4, budget=0.3 * 3.6 / 60, out=tmp_path / "a.csv", **kw)
    assert r.header["documents"].startswith("3 per length")
    assert "3 documents and 0 prompts per length" in capsys.readouterr().err
    with pytest.raises(ValueError, match="`budget` of .* min is too short"):
        ms.measure(tiny, 128, docs=4, budget=0.3 * 1.5 / 60, out=tmp_path / "b.csv", **kw)
    assert not (tmp_path / "b.csv").exists()


def test_each_read_s_time_is_in_the_row_of_the_cell_that_read_it(tiny, tmp_path, monkeypatch):
    # a clock that moves only while the model reads: a read's row says 10 s per read, a reused read 0
    import time as _time

    from softmax_scale.models import readout

    clock = [0.0]
    real = readout.read_out

    def counted(*a, **kw):
        clock[0] += 10.0
        return real(*a, **kw)

    monkeypatch.setattr(readout, "read_out", counted)
    monkeypatch.setattr(_time, "perf_counter", lambda: clock[0])
    r = ms.measure(tiny, 128, adaptive=4, shapes=(), docs=2, width=0, prompts=0, out=tmp_path / "a.csv",
                   progress=False, figure_file=False)
    rows = _rows(r.path)
    first = rows["item"] == rows["item"][0]
    const = first & (rows["scheme"] == "constant")
    assert const.sum() == 4
    assert np.all(rows["seconds"][const] >= 10.0)  # every constant read once, 1 included

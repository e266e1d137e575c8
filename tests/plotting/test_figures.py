"""The main job: every figure renders in quick mode, files are written atomically."""

from pathlib import Path

import pytest

from softmax_scale import figures
from softmax_scale.plotting import FigureUnavailable, all_figures
from softmax_scale.plotting._style import SettledFigure

FIGS = all_figures()

#: Figures redrawn from a committed result file (``committed_table``), one per experiment that writes one.
FROM_RESULTS = ["train_mlm", "one_key_copy", "one_key_first", "real_passkey", "real_copy"]


def test_figure_names_are_unique():
    names = [f[0] for f in FIGS]
    assert len(names) == len(set(names))
    assert "alpha_star_vs_n" in names


@pytest.mark.parametrize("name, func, full, quick", FIGS, ids=[f[0] for f in FIGS])
def test_each_figure_renders_labelled(name, func, full, quick):
    fig = func(**quick)
    assert isinstance(fig, SettledFigure), f"{name} must be drawn on plotting._style's SettledFigure (new_figure)"
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]
    assert axes, f"{name} has no data"
    for ax in axes:
        assert ax.get_xlabel() or ax.get_ylabel() or not ax.axison, f"{name}: unlabelled axes"


@pytest.mark.parametrize("name", FROM_RESULTS)
def test_a_figure_whose_result_file_is_missing_says_which_command_writes_it(name, tmp_path):
    func = dict((f[0], f[1]) for f in FIGS)[name]
    with pytest.raises(FigureUnavailable, match="absent.csv not found: it is written by `softmax-scale run"):
        func(csv=tmp_path / "absent.csv")


def test_make_figures_writes_pngs_and_table(tmp_path):
    done = figures.make_figures(tmp_path, quick=True, only=["alpha_star_vs_n"], progress=False)
    assert [d[0] for d in done] == ["alpha_star_vs_n"]
    png = tmp_path / "alpha_star_vs_n.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = figures.write_table(tmp_path, quick=True)
    md = (tmp_path / "alpha_table.md").read_text()
    assert "alpha* normal" in md
    csv_lines = (tmp_path / "alpha_table.csv").read_text().splitlines()
    assert len(csv_lines) == table.ns.size + 1
    assert not list(tmp_path.glob(".tmp-*"))


def test_interrupted_write_leaves_no_half_written_file(tmp_path):
    target = tmp_path / "figure.png"

    def write(p):
        Path(p).write_bytes(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        figures.atomic_write(target, write)
    assert not target.exists()
    assert not list(tmp_path.iterdir())


def test_main_job_computes_the_objective_tables_once(monkeypatch, tmp_path):
    """The alpha* table and the figure of alpha* per objective share one computation, with the job's progress setting."""
    from softmax_scale import plotting
    from softmax_scale.objectives import typical

    calls = []
    real = typical.objective_table

    def counted(*args, **kwargs):
        calls.append((kwargs.get("d"), kwargs.get("progress")))
        return real(*args, **kwargs)

    monkeypatch.setattr(typical, "objective_table", counted)
    monkeypatch.setattr(figures, "all_figures", lambda: [f for f in plotting.all_figures() if f[0] == "alpha_star_by_objective"])
    done, table, _ = figures.main_job(tmp_path, quick=True, progress=False)
    assert calls == [(None, False), (128, False)]  # normal and cosine(d=128), once each, no bar as asked
    assert [d[0] for d in done] == ["alpha_star_by_objective"]
    assert (tmp_path / "alpha_table.md").read_text().count("alpha* under the other objectives") == 2
    assert set(table.objectives) == {"normal", "cosine(d=128)"}


def test_real_extrapolation_figure_shows_the_small_differences_and_reads():
    """From the committed CSV: a zoomed panel past L, markers as in real_heads_entropy, one grouped legend of size >= 8."""
    import numpy as np

    from softmax_scale.experiments.real_extrapolation import read_extrapolation_csv
    from softmax_scale.plotting.real_extrapolation import DEFAULT_CSV, extrapolation_figure

    res = read_extrapolation_csv(DEFAULT_CSV)
    fig = extrapolation_figure(res)
    ax_a, ax_b, ax_c, ax_d, ax_e, ax_f = fig.axes
    lo, hi = ax_b.get_ylim()
    assert hi - lo < 0.1
    assert ax_b.get_yticks()[1] - ax_b.get_yticks()[0] == pytest.approx(0.01)
    assert any("off this scale: RoPE none" in t.get_text() for t in ax_b.texts)  # computed, not typed
    # panel (c): dots are the normal prediction, crosses the empirical one (as in real_heads_entropy)
    last = len(res.buckets) - 1
    dots, crosses = ax_c.collections[:2]
    np.testing.assert_array_equal(dots.get_offsets()[:, 0], res.prediction("pred_normal", "standard")[0][..., last].ravel())
    np.testing.assert_array_equal(crosses.get_offsets()[:, 0],
                                  res.prediction("pred_empirical", "standard")[0][..., last].ravel())
    # the legend: outside the data (no legend on a data panel), grouped in three, every text >= 8 pt
    assert all(ax.get_legend() is None for ax in (ax_a, ax_b, ax_c, ax_d, ax_e))
    legends = [a for a in ax_f.get_children() if type(a).__name__ == "Legend"]
    assert len(legends) == 3
    texts = [t for leg in legends for t in [*leg.get_texts(), leg.get_title()]]
    assert len(texts) >= 12
    assert min(t.get_fontsize() for t in texts) >= 8
    assert any("qwen_logn  x1.062" in t.get_text() for t in texts)


def _pinned_at_an_edge(ax, line, margin=0.03) -> bool:
    """Whether every finite point of ``line`` lies within ``margin`` of the bottom or the top of ``ax``."""
    import numpy as np

    x, y = (np.asarray(v, dtype=float) for v in line.get_data())
    ok = np.isfinite(y)
    if not ok.any():
        return False
    frac = (ax.transScale + ax.transLimits).transform(np.column_stack([x[ok], y[ok]]))[:, 1]
    return bool(np.all(frac < margin) or np.all(frac > 1 - margin))


def test_entropy_vs_n_draws_no_panel_twice_and_no_curve_flat_on_an_edge():
    """No two panels draw the same curves, and no panel leaves its curves lying along an edge (cut ones are named)."""
    import numpy as np

    from softmax_scale.plotting.entropy import plot_entropy_vs_n

    fig = plot_entropy_vs_n(ns=[64, 512, 4096, 32768, 10**6])
    panels = [ax for ax in fig.axes if ax.has_data()]
    curves = [[ln.get_ydata() for ln in ax.get_lines() if len(ln.get_xdata()) > 2] for ax in panels]
    for i in range(len(panels)):
        for j in range(i + 1, len(panels)):
            diffs = [np.abs(np.asarray(a, float) - np.asarray(b, float)) for a, b in zip(curves[i], curves[j])]
            gap = max(d[np.isfinite(d)].max(initial=0.0) for d in diffs)
            assert gap > 0.1, f"panels {i} and {j} draw the same curves (within {gap:.3f})"
    for k, ax in enumerate(panels):
        flat = [ln.get_label() for ln in ax.get_lines() if len(ln.get_xdata()) > 2 and _pinned_at_an_edge(ax, ln)]
        assert len(flat) <= 1, f"panel {k}: {flat} lie along an edge"


def test_train_mlm_names_scales_as_the_registry_and_colours_the_test_time_scale_apart():
    from softmax_scale.plotting.train import train_mlm_figure

    ax = train_mlm_figure().axes[0]
    handles, labels = ax.get_legend_handles_labels()
    assert not [t for t in labels if "alpha_star" in t]
    assert [t for t in labels if t.startswith("gradient_optimal")]
    colours = {t: h.lines[0].get_color() if hasattr(h, "lines") else h.get_color() for h, t in zip(handles, labels)}
    at_test = [t for t in colours if "at test only" in t]
    assert at_test
    for t in at_test:
        assert colours[t] not in [c for u, c in colours.items() if u != t], f"{t!r} shares its colour"


@pytest.mark.parametrize("name", ["real_passkey", "real_copy"])
def test_every_panel_of_the_real_one_key_figures_says_what_its_colours_are(name):
    fig = dict((f[0], f[1]) for f in FIGS)[name]()
    scales = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    for ax in fig.axes[1:]:
        if ax.collections:  # the scatter panels: their colours are scales
            legend = ax.get_legend()
            assert legend is not None, ax.get_title()
            shown = {t.get_text() for t in legend.get_texts()}
            assert {s.split(" + ")[-1] for s in scales} - {"standard"} <= shown


def test_alpha_star_is_drawn_over_its_fits():
    """The computed alpha* sits above every fitted law (a line under the best fit is hidden by it)."""
    from softmax_scale.experiments.alpha_table import NOTE_GRID
    from softmax_scale.plotting.alpha import alpha_star_vs_n

    fig = alpha_star_vs_n(ns=NOTE_GRID[::10])
    for ax in fig.axes:
        lines = ax.get_lines()
        star = [k for k, ln in enumerate(lines) if ln.get_label().startswith("alpha*")]
        if not star:
            continue
        order = sorted(range(len(lines)), key=lambda k: (lines[k].get_zorder(), k))
        assert order[-1] == star[0]
        assert lines[star[0]].get_marker() not in ("None", "", None, " ")


@pytest.mark.slow
def test_the_first_figure_is_drawn_from_its_committed_csv_without_jax():
    """FIRST's trained scales are read from ``train/scales.py`` (numpy only): redrawing the figure never imports JAX."""
    import os
    import subprocess
    import sys

    code = ("import sys; sys.modules['jax'] = None\n"
            "from softmax_scale.plotting.one_key_first import one_key_first_figure\n"
            "one_key_first_figure()\n")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), MPLBACKEND="Agg")
    res = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=root, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]

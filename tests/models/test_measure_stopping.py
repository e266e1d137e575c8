"""measure's stopping rule: documents one at a time until the minimiser's interval is narrow enough.

The coverage simulation draws documents whose loss curves have a known population minimiser
(asymmetric parabolas with the curvature and vertex spread of SmolLM2's committed measurement,
figures/measure_smollm2.csv), runs the command's own rule and interval
(:func:`~softmax_scale.experiments._measure_stats.documents_wanted`,
:func:`~softmax_scale.experiments._measure_stats.minimiser_interval`) and counts how often the
final interval holds the population's minimiser.
"""

import math
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm, t

from softmax_scale.cli import main
from softmax_scale.experiments import measure as ms
from softmax_scale.experiments._measure_stats import _minimiser, documents_wanted, known, minimiser_interval
from tests.models.tiny_gguf import refuse_reads

ROOT = Path(__file__).resolve().parents[2]
GRID = np.array(ms.DEFAULT_FACTORS)
SEED = [ms.KEY_SEED, 16384]
ASYMMETRY = 1.0  # y = c + a u^2 (1 + g u), u = f - v: the loss rises faster above the vertex


def smollm2_scale():
    """Per-document parabola fits to the committed SmolLM2 file: ``(mean curvature, its sd, vertex mean, vertex sd)``."""
    table = ms.MeasureExperiment(progress=False).read(ROOT / "figures" / "measure_smollm2.csv")
    r = table.rows
    sel = (r["task"] == "loss") & (r["scheme"] == ms.CONSTANT)
    a, v = [], []
    for doc in dict.fromkeys(r["item"][sel]):
        s = sel & (r["item"] == doc)
        c2, c1, _ = np.polyfit(r["factor"][s], r["loss"][s], 2)
        a.append(c2)
        v.append(-c1 / (2 * c2))
    return float(np.mean(a)), float(np.std(a, ddof=1)), float(np.mean(v)), float(np.std(v, ddof=1))


def draw(rng, k, scale, spread=1.0, *, df=None, asymmetry=ASYMMETRY, noise=0.002):
    """``k`` documents' losses on :data:`GRID`; the vertex spread ``spread`` times SmolLM2's.

    ``df``: Student-t vertices of that many degrees of freedom (scaled to the same standard deviation)
    in place of normal ones; ``asymmetry`` and ``noise`` (per grid point, nats) as in :data:`ASYMMETRY`.
    """
    a_mean, a_sd, v_mean, v_sd = scale
    a = np.abs(rng.normal(a_mean, a_sd, k))
    z = rng.normal(0, 1, k) if df is None else rng.standard_t(df, k) / math.sqrt(df / (df - 2))
    v = v_mean + spread * v_sd * z
    u = GRID[None] - v[:, None]
    return rng.normal(1.7, 0.2, (k, 1)) + a[:, None] * u ** 2 * (1 + asymmetry * u) + rng.normal(0, noise, (k, GRID.size))


def population_minimiser(scale, spread=1.0) -> float:
    """The parabola vertex through the population mean curve's lowest grid point and its neighbours (analytic means)."""
    a_mean, _, v_mean, v_sd = scale
    s2, w = (spread * v_sd) ** 2, GRID - v_mean
    curve = a_mean * (w ** 2 + s2 + ASYMMETRY * (w ** 3 + 3 * w * s2))  # E[a u^2 (1 + g u)], a and v independent
    j = int(np.argmin(curve))
    c2, c1, _ = np.polyfit(GRID[j - 1:j + 2], curve[j - 1:j + 2], 2)
    return -c1 / (2 * c2)


def stop(D, width, cap):
    """The rule as the command runs it: ask :func:`documents_wanted` until it says the count read."""
    k = 0
    while True:
        want = documents_wanted(GRID, D[:k], width, SEED, cap)
        assert k <= want <= (min(ms.MIN_DOCUMENTS, cap) if k == 0 else k + 1)
        if want == k:
            return k
        k = want


def coverage(replicates, spread, width=0.02, cap=30, seed=1):
    scale = smollm2_scale()
    truth = population_minimiser(scale, spread)
    rng = np.random.default_rng(seed)
    hits, counts = 0, []
    for _ in range(replicates):
        D = draw(rng, cap, scale, spread)
        k = stop(D, width, cap)
        lo, hi = minimiser_interval(GRID, D[:k], SEED)
        hits += lo <= truth <= hi
        counts.append(k)
    return hits / replicates, np.array(counts)


def check_coverage(replicates, spread, cap=30):
    cover, counts = coverage(replicates, spread, cap=cap)
    se = math.sqrt(0.95 * 0.05 / replicates)
    assert cover >= 0.95 - 3 * se, (cover, counts.mean())  # a one-sided 3-standard-error tolerance
    assert cover <= 0.995, cover  # not so wide as to hold it always
    assert counts.min() >= ms.MIN_DOCUMENTS and counts.max() <= cap
    return cover, counts


def test_the_population_minimiser_is_the_mean_of_many_documents():
    """The simulation's truth: the procedure's estimate on a very large sample tends to it."""
    scale = smollm2_scale()
    for spread in (1.0, 3.0):
        D = draw(np.random.default_rng(5), 200_000, scale, spread)
        x, edge = _minimiser(GRID, D.mean(axis=0))
        assert not edge and x == pytest.approx(population_minimiser(scale, spread), abs=2e-3)


def test_the_rule_covers_the_minimiser_at_smollm2s_spread():
    """400 replicates at SmolLM2's vertex spread: coverage within 3 binomial standard errors below 95%."""
    cover, counts = check_coverage(400, 1.0)
    assert counts.mean() < 12  # SmolLM2's spread settles ±0.02 in a handful of documents


@pytest.mark.slow
def test_the_rule_covers_the_minimiser_at_twice_the_spread():
    """1000 replicates at twice SmolLM2's vertex spread, where the rule reads more documents and stops at varied counts."""
    cover, counts = check_coverage(1000, 2.0)
    assert counts.mean() > 8 and np.mean(counts == 30) < 0.5


@pytest.mark.slow
@pytest.mark.parametrize(("df", "asymmetry", "noise", "spread"), [(4, 1.0, 0.002, 1.0), (5, -0.5, 0.005, 1.5)])
def test_the_rule_in_curve_families_it_was_not_tuned_on(df, asymmetry, noise, spread):
    """The widening factor 1.2 was chosen on the family above; on heavy-tailed vertices, a loss rising faster below the
    vertex, more noise and 1.5 times the spread, 1000 replicates hold the population minimiser (the procedure's estimate
    on 400,000 documents) in 90.2% of runs (docs/own_model.md), short of 95%: this bounds how far short."""
    scale = smollm2_scale()
    kw = dict(df=df, asymmetry=asymmetry)
    truth, edge = _minimiser(GRID, draw(np.random.default_rng(99), 400_000, scale, spread, noise=0.0, **kw).mean(axis=0))
    assert not edge
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(1000):
        D = draw(rng, 30, scale, spread, noise=noise, **kw)
        lo, hi = minimiser_interval(GRID, D[:stop(D, 0.02, 30)], SEED)
        hits += lo <= truth <= hi
    assert 0.85 <= hits / 1000 <= 0.995, hits / 1000


def table(vertices, curvature=1.5):
    """Documents ``D[document, factor]`` with parabolas of the given vertices on :data:`GRID`."""
    v = np.asarray(vertices, dtype=np.float64)[:, None]
    return 1.7 + curvature * (GRID[None] - v) ** 2


def test_the_rule_stops_at_the_first_count_whose_interval_is_narrow_enough():
    rng = np.random.default_rng(3)
    D = table(np.concatenate([1.1 + rng.normal(0, 0.06, 6), 1.1 + rng.normal(0, 0.01, 30)]))
    for width in (0.01, 0.02, 0.04):
        k = stop(D, width, 36)
        halves = [np.diff(minimiser_interval(GRID, D[:m], SEED))[0] / 2 for m in range(1, 37)]
        assert k >= ms.MIN_DOCUMENTS
        assert halves[k - 1] <= width or k == 36
        assert all(h > width for h in halves[ms.MIN_DOCUMENTS - 1:k - 1])
    # never below the minimum, even where the first documents agree exactly; never above the cap
    same = table(np.full(10, 1.1))
    assert stop(same, 0.02, 10) == ms.MIN_DOCUMENTS
    assert stop(same, 0.02, 2) == 2
    assert stop(table(np.linspace(0.95, 1.25, 10)), 1e-6, 7) == 7
    # the lowest mean loss at the grid's end: the minimiser may lie past it, never known
    assert not known(GRID, table(np.full(6, 1.6)), 0.5, SEED)


def test_the_interval_is_the_widened_percentile_bootstrap():
    """An independent percentile bootstrap (numpy's polyfit per resample) widened by 1.2 t(D-1)/z sqrt(D/(D-1))."""
    rng = np.random.default_rng(4)
    D = table(1.1 + rng.normal(0, 0.03, 5), 1.5) + rng.normal(0, 1e-3, (5, GRID.size))
    picks = np.random.default_rng(SEED).integers(0, 5, size=(ms.BOOTSTRAP, 5))

    def vertex(mean):
        j = int(np.argmin(mean))
        c2, c1, _ = np.polyfit(GRID[j - 1:j + 2], mean[j - 1:j + 2], 2)
        return float(np.clip(-c1 / (2 * c2), GRID[j - 1], GRID[j + 1]))

    x = vertex(D.mean(axis=0))
    lo, hi = np.percentile([vertex(D[p].mean(axis=0)) for p in picks], [2.5, 97.5])
    f = 1.2 * t.ppf(0.975, 4) / norm.ppf(0.975) * math.sqrt(5 / 4)
    np.testing.assert_allclose(minimiser_interval(GRID, D, SEED), (x - f * (x - lo), x + f * (hi - x)), rtol=1e-10)
    assert np.all(np.isnan(minimiser_interval(GRID, D[:1], SEED)))


# ---------------------------------------------------------------------------------------------
# The rule in the command


def synthetic(sharp: bool, sleep: float = 0.0, calls=None):
    """A ``run_task`` whose documents have parabolas of vertices near 1.1 (``sharp``) or spread wide and flat.

    The units' tasks are appended to ``calls`` in the order they are read.
    """

    def run_task(self, task):
        time.sleep(sleep)
        if calls is not None:
            calls.append(task.task)
        c = task.config
        w = int(task.item.split("#")[-1]) if task.task == "loss" else 0
        v = 1.1 + (0.002 if sharp else 0.3) * math.sin(3.0 * w + 1)
        a = 1.5 if sharp else 1e-3
        return [(task.task, task.length, task.item, ms.CONSTANT, float(f), c.rope, float("nan"),
                 2.0 + a * (f - v) ** 2, 1.0 if task.task == "passkey" else float("nan"), float(f), 10, 0.0)
                for f in c.factors]

    return run_task


def loss_items(path):
    rows = ms.MeasureExperiment(progress=False).read(path).rows
    return list(dict.fromkeys(rows["item"][rows["task"] == "loss"])), [t for t, _ in dict.fromkeys(zip(rows["task"], rows["item"]))]


KW = dict(factors=(1.0, 1.05, 1.1, 1.2, 1.3), shapes=(), recipe=False, docs=10, prompts=2, progress=False,
          figure_file=False)


def test_the_command_reads_fewer_documents_where_the_curve_is_sharp(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(ms.MeasureExperiment, "run_task", synthetic(True))
    r = ms.measure(tiny[0], 128, text=tiny[1], width=0.02, out=tmp_path / "sharp.csv", **KW)
    items, tasks = loss_items(r.path)
    assert len(items) == ms.MIN_DOCUMENTS and r.curves[0].documents == ms.MIN_DOCUMENTS
    assert tasks[-2:] == ["passkey", "passkey"] and tasks.count("passkey") == 2  # the prompts after the documents
    lo, hi = r.curves[0].interval
    assert hi - lo <= 0.04 and "stopping" in r.header and r.header["documents"].startswith("at most 10 per length")
    # the windows in order: the first documents of the same run without the rule
    monkeypatch.setattr(ms.MeasureExperiment, "run_task", synthetic(True))
    every = ms.measure(tiny[0], 128, text=tiny[1], out=tmp_path / "every.csv", **KW)
    assert loss_items(every.path)[0][:ms.MIN_DOCUMENTS] == items and len(loss_items(every.path)[0]) == 10
    assert "stopping" not in every.header
    # resumed under another rule: refused, naming width; under the same: nothing read again
    with pytest.raises(ValueError, match="`width`"):
        ms.measure(tiny[0], 128, text=tiny[1], out=r.path, **KW)
    with pytest.raises(ValueError, match="`width`"):
        ms.measure(tiny[0], 128, text=tiny[1], width=0.01, out=every.path, **KW)
    before = r.path.read_bytes()
    refuse_reads(monkeypatch)
    ms.measure(tiny[0], 128, text=tiny[1], width=0.02, out=r.path, **KW)
    assert r.path.read_bytes() == before


def test_the_command_reads_every_document_where_the_curve_is_flat(tiny, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(ms.MeasureExperiment, "run_task", synthetic(False, calls=calls))
    r = ms.measure(tiny[0], 128, text=tiny[1], width=0.02, out=tmp_path / "flat.csv", **KW)
    items, tasks = loss_items(r.path)
    assert len(items) == 10 and tasks.count("passkey") == 2
    assert calls == ["loss"] * 10 + ["passkey"] * 2  # the prompts once the rule has stopped
    lo, hi = r.curves[0].interval
    assert hi - lo > 0.04


def test_the_tiny_gguf_reads_every_document_where_the_lowest_loss_is_at_the_grids_end(tiny, tmp_path):
    """The tiny model's loss falls all along 1..2: the minimiser may lie past the grid, so the rule never stops early."""
    r = ms.measure(tiny[0], 128, text=tiny[1], width=0.5, out=tmp_path / "edge.csv",
                   **{**KW, "factors": (1.0, 1.5, 2.0), "docs": 5, "prompts": 0})
    assert r.curves[0].at_edge and r.curves[0].documents == 5


def test_a_budget_stops_the_documents(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ms.MeasureExperiment, "run_task", synthetic(False, sleep=0.1))
    r = ms.measure(tiny[0], 128, text=tiny[1], width=0.02, budget=0.6 / 60, out=tmp_path / "b.csv",
                   **{**KW, "prompts": 0})
    n = len(loss_items(r.path)[0])
    assert ms.MIN_DOCUMENTS <= n < 10
    assert "the budget stops the documents" in capsys.readouterr().err


@pytest.mark.parametrize("width", [-0.01, 1.0, float("nan"), "wide"])
def test_a_bad_width_is_refused_naming_it(tiny, tmp_path, width):
    with pytest.raises((ValueError, TypeError), match="`width`"):
        ms.measure(tiny[0], 128, text=tiny[1], width=width, out=tmp_path, **KW)


def test_the_cli_refuses_a_bad_width_in_one_line(tiny, tmp_path, capsys):
    assert main(["measure", str(tiny[0]), "--n", "128", "--text", str(tiny[1]), "--width", "-1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "`width`" in err and len(err.splitlines()) == 1


def test_quick_and_width_are_refused_together(tiny, tmp_path):
    with pytest.raises(ValueError, match="`width` and `quick`"):
        ms.measure(tiny[0], 128, text=tiny[1], width=0.02, quick=True, out=tmp_path, progress=False)


def test_the_committed_smollm2_file_resumes_with_its_own_command_unchanged():
    """Its header carries no stopping line, and the defaults add none: a fixed grid reads every document."""
    header = ms.MeasureExperiment(progress=False).read(ROOT / "figures" / "measure_smollm2.csv").header
    assert "stopping" not in header
    assert ms._width(None, 0, False) == 0.0 and ms._width(None, 7, False) == 0.02

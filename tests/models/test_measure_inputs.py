"""``measure``'s bad inputs: one line naming the option (and the file), exit 2, before the model is read where it can be.

The refusals that need no model run with the GGUF loader made to fail, so a check that moved after
the loading would show as that failure.  The factors' bound is checked against the largest
``|q.k| / sqrt(d)`` of real passes (every architecture), and a factor above it is refused where,
unchecked, float32 overflows.
"""

import json
import os

import numpy as np
import pytest

from softmax_scale._util.store import Table
from softmax_scale.cli import main
from softmax_scale.experiments import _measure_run
from softmax_scale.experiments import measure as ms
from softmax_scale.models.llama import LlamaDecoder

from .tiny_gguf import ARCHS, STORY, write


@pytest.fixture
def unread(monkeypatch):
    """The GGUF loader fails: a refusal must come before it."""
    def refuse(path, *a, **k):
        raise AssertionError(f"the model was read ({path})")

    monkeypatch.setattr(_measure_run, "_RUNS", {})
    monkeypatch.setattr(LlamaDecoder, "from_gguf", refuse)


def refused(argv, capsys, *names):
    """``measure ARGV`` exits 2 with one line holding every one of ``names``."""
    rc = main(["measure", *map(str, argv)])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.count("\n") == 0 and err.startswith("softmax-scale measure: error: "), err
    for name in names:
        assert name in err, err
    return err


def cli(tiny, tmp_path, *argv):
    """``measure`` on the tiny file and its text, with ``argv`` after the common options."""
    return ["measure", *map(str, (tiny[0], "--text", tiny[1], "--no-progress", "--no-figure", "--out", tmp_path, *argv))]


def test_a_missing_model_exits_2_naming_model(tmp_path, capsys, unread):
    refused([tmp_path / "absent.gguf", "--n", "64", "--out", tmp_path], capsys, "`model`", "absent.gguf", "does not exist")


def test_a_folder_as_model_exits_2_naming_model(tmp_path, capsys, unread):
    refused([tmp_path, "--n", "64", "--out", tmp_path], capsys, "`model`", "is a directory")


def test_a_missing_text_exits_2_naming_text(tiny, tmp_path, capsys, unread):
    refused([tiny[0], "--n", "64", "--text", tmp_path / "absent.txt", "--out", tmp_path], capsys, "`text`", "absent.txt", "does not exist")


def test_a_binary_text_names_the_option_the_file_its_line_and_column(tiny, tmp_path, capsys, unread):
    binary = tmp_path / "data.bin"
    binary.write_bytes("first line\nsecond é\x00".encode() + b"\x82 rest")
    refused([tiny[0], "--n", "64", "--text", binary, "--out", tmp_path], capsys, "`text`", str(binary), "line 2 column 10",
            "not UTF-8", "0x82")


def test_two_texts_of_one_name_are_refused(tiny, tmp_path, capsys, unread):
    """Documents are named by the file's name: two files named alike would share their rows' names."""
    other = tmp_path / "elsewhere" / tiny[1].name
    other.parent.mkdir()
    other.write_text(STORY.upper(), encoding="utf-8")
    refused([tiny[0], "--n", "64", "--text", tiny[1], other, "--out", tmp_path], capsys, "`text`", tiny[1].name, "twice")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, where no file can be made")
def test_an_out_where_no_file_can_be_written_is_refused_before_the_model(tiny, capsys, unread):
    refused([tiny[0], "--n", "64", "--out", "/proc/m.csv"], capsys, "`out`", "'/proc'")


def test_an_out_whose_figure_would_be_a_folder_is_refused_before_the_model(tiny, tmp_path, capsys, unread):
    (tmp_path / "m.png").mkdir()
    refused([tiny[0], "--n", "64", "--out", tmp_path / "m.csv"], capsys, "`out`", "m.png", "is a folder")


@pytest.mark.parametrize("argv, name", [(["--factors", "1e308"], "`factors` must be at most 3.4"),
                                        (["--factors", "1.1", "1.1"], "`factors` must not repeat"),
                                        (["--shapes", "yarn", "yarn"], "`shapes` must not repeat"),
                                        (["--workers", "-1"], "`workers`"),
                                        (["--train-length", "63"], "`n` must be at least L + 2 = 65")])
def test_bad_options_are_refused_before_the_model(tiny, tmp_path, argv, name, capsys, unread):
    refused([tiny[0], "--n", "64", "--out", tmp_path / "out", *argv], capsys, name)
    assert not (tmp_path / "out").exists()


def test_the_quick_form_leaves_a_length_past_its_l(tiny, tmp_path, capsys):
    """``--n 16 --quick``: the pretend L leaves a scored position (n >= L + 2)."""
    assert main(cli(tiny, tmp_path, "--n", "16", "--quick", "--prompts", "0", "--json")) == 0
    (curve,) = json.loads(capsys.readouterr().out)["lengths"]
    assert curve["train_length"] <= 14


def test_too_short_for_a_pass_key_names_n_and_quick_takes_prompts_0(tiny, tmp_path, capsys):
    refused(cli(tiny, tmp_path, "--n", "17", "--quick")[1:], capsys, "`n` must be at least",
            "pass-key prompt", "got 17")
    assert main(cli(tiny, tmp_path, "--n", "17", "--quick", "--prompts", "0")) == 0
    t = ms.MeasureExperiment().read(tmp_path / "measure_quick.csv")
    assert "passkey" not in set(t.rows["task"])


def test_the_quick_form_inside_the_model_l_is_a_smoke_test_that_names_no_minimiser(tiny, tmp_path, capsys):
    """``--n 24`` on a model of L = 32: a pretend L, and the summary and the file say so, with no minimiser."""
    assert main(cli(tiny, tmp_path, "--n", "24", "--quick", "--prompts", "0")) == 0
    text = capsys.readouterr().out
    assert ms.SMOKE in text and "the model's is 32" in text
    assert "minimising" not in text and "interval" not in text and "recipe applies" not in text
    t = ms.MeasureExperiment().read(tmp_path / "measure_quick.csv")
    assert ms.SMOKE in t.header["experiment"]
    (curve,) = ms.summarise(t)
    assert ms.SMOKE in curve.to_text() and "minimising" not in curve.to_text()
    assert curve.to_json()["minimiser"] is None


def test_the_quick_form_past_the_model_l_keeps_it_and_reads_one_document(tiny, tmp_path, capsys):
    assert main(cli(tiny, tmp_path, "--n", "40", "--quick", "--prompts", "0", "--json")) == 0
    (curve,) = json.loads(capsys.readouterr().out)["lengths"]
    assert curve["train_length"] == 32 and curve["documents"] == 1
    assert "smoke_test" not in curve and curve["minimiser"] is not None
    header = ms.MeasureExperiment().read(tmp_path / "measure_quick.csv").header
    assert ms.SMOKE not in header["experiment"]


def test_the_quick_form_keeps_what_is_asked(tiny, tmp_path, capsys):
    argv = cli(tiny, tmp_path, "--n", "40", "--quick", "--docs", "1", "--prompts", "0", "--factors", "1.5",
               "--shapes", "qwen_logn", "--no-recipe", "--json")
    assert main(argv) == 0
    (curve,) = json.loads(capsys.readouterr().out)["lengths"]
    assert curve["documents"] == 1
    assert set(curve["cells"]) == {"constant 1", "constant 1.5", "qwen_logn"}


@pytest.mark.parametrize("arch", ARCHS)
def test_the_score_bound_holds_on_real_passes(arch, tmp_path):
    """Every ``|q.k| / sqrt(d)`` of a pass (the queries carry 1/sqrt(d)) lies within :func:`score_bound`."""
    path = tmp_path / f"{arch}.gguf"
    write(path, arch, gain=3.0)
    model = LlamaDecoder.from_gguf(path)
    c = model.config
    largest = 0.0
    for seed in range(3):
        ids = np.random.default_rng(seed).integers(0, c.vocab_size, size=48)
        for out in model._forward(ids, stats=False).layers:
            k = np.repeat(out.k, c.n_heads // c.n_kv_heads, axis=0)
            largest = max(largest, float(np.abs(out.q.astype(np.float64) @ k.transpose(0, 2, 1)).max()))
    assert 0 < largest <= ms.score_bound(model)


def test_the_score_bound_is_reached_where_queries_and_keys_are_one_bias(tmp_path):
    """Projections zeroed, each query's bias its key's: ``q.k = |b|^2`` at equal positions, the bound itself."""
    path = tmp_path / "qwen2.gguf"
    write(path, "qwen2")
    model = LlamaDecoder.from_gguf(path)
    c, w = model.config, model.weights
    rng = np.random.default_rng(1)
    for layer in range(c.n_layers):
        p = f"blk.{layer}."
        for name in ("attn_q.weight", "attn_k.weight"):
            w[p + name] = np.zeros_like(w[p + name])
        bk = rng.standard_normal((c.n_kv_heads, c.head_dim)).astype(np.float32)
        w[p + "attn_k.bias"] = bk.ravel()
        w[p + "attn_q.bias"] = np.repeat(bk, c.n_heads // c.n_kv_heads, axis=0).ravel()
    largest = 0.0
    for out in model._forward(np.arange(16), stats=False).layers:
        k = np.repeat(out.k, c.n_heads // c.n_kv_heads, axis=0)
        largest = max(largest, float(np.abs(out.q.astype(np.float64) @ k.transpose(0, 2, 1)).max()))
    assert largest == pytest.approx(ms.score_bound(model), rel=1e-5)


def test_a_factor_past_the_bound_is_refused_and_nothing_written(tiny, tmp_path, capsys):
    """1e38 is within float32's range but times q.k overflows it on this model (unchecked: a NaN row)."""
    refused(cli(tiny, tmp_path, "--n", "64", "--prompts", "0", "--factors", "1e38")[1:], capsys, "`factors` must be "
            "at most", "for this model", "got 1e+38")
    assert not (tmp_path / "measure.csv").exists()


def nan_read_out(monkeypatch, when):
    """The read-out gives NaN losses on the passes whose ``factors`` satisfy ``when`` (None: the trained scale)."""
    import softmax_scale.models.readout as readout

    real = readout.read_out

    def read_out(*a, factors=None, **k):
        r = real(*a, factors=factors, **k)
        if when(factors):
            r.nll[:] = np.nan
        return r

    monkeypatch.setattr(readout, "read_out", read_out)


def test_a_non_finite_loss_is_refused_and_its_unit_not_written(tiny, tmp_path, monkeypatch):
    nan_read_out(monkeypatch, lambda factors: factors is not None and np.max(factors) > 1.1)
    with pytest.raises(ValueError, match=r"`factors`: 1.2 times q.k overflows float32 \(a non-finite loss on story"):
        ms.measure(tiny[0], 64, text=tiny[1], docs=1, prompts=0, factors=(1.2,), shapes=(), recipe=False,
                   out=tmp_path, figure_file=False, progress=False)
    t = ms.MeasureExperiment().read(tmp_path / "measure.csv")
    assert len(t) == 0


def loss_rows(cells):
    """Result rows of ``(document, factor, loss)`` cells at n = 100."""
    rows = {k: [] for k in ms.COLUMNS}
    for doc, f, loss in cells:
        for k, v in zip(ms.COLUMNS, ("loss", 100, doc, ms.CONSTANT, f, "none", np.nan, loss, np.nan, f, 50, 0.0)):
            rows[k].append(v)
    return {k: np.asarray(v, dtype=object if k in ms.TEXT else None) for k, v in rows.items()}


def test_a_file_with_a_non_finite_loss_is_not_summarised():
    rows = loss_rows([("a#0", 1.0, 2.0), ("a#0", 1.2, 1.9), ("b#0", 1.0, 2.1), ("b#0", 1.2, float("nan"))])
    table = Table({"train_length": "50"}, rows, "m.csv")
    with pytest.raises(ValueError, match=r"`path`: m.csv has a non-finite loss \(loss, n = 100, b#0, constant 1.2\)"):
        ms.summarise(table)


def test_one_document_says_it_has_no_interval():
    rows = loss_rows([("a#0", f, (f - 1.1) ** 2) for f in (1.0, 1.1, 1.2)])
    text = ms.summarise(Table({"train_length": "50"}, rows, "m.csv"))[0].to_text()
    assert "no interval (it needs two documents)" in text and "nan" not in text


def test_a_non_finite_loss_under_the_constant_1_names_the_model(tiny, tmp_path, monkeypatch):
    nan_read_out(monkeypatch, lambda factors: True)
    with pytest.raises(ValueError, match=r"`model`: the cell constant 1 gives a non-finite loss on story.txt#0"):
        ms.measure(tiny[0], 64, text=tiny[1], docs=1, prompts=0, factors=(1.2,), shapes=(), recipe=False,
                   out=tmp_path, figure_file=False, progress=False)

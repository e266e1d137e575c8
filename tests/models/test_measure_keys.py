"""``measure --keys K``: the multi-key variant, several pass keys in one haystack (tiny random GGUF).

- The builder: each key's line at its depth, its digits after its own word, which occurs nowhere
  else in the haystack and ends its question; the haystack and its longest question ``n`` tokens;
  the keys re-derived from their seeds here.
- A question continued from the haystack's keys and values against the decoder's whole pass over
  haystack and question (no cache), and a row of the file against the same whole pass under the
  cell's multipliers written out here.
- The rows: one per (haystack, key, cell) at the keys' depths; a haystack one unit of the plan; the
  summary counts every key; a rerun reads nothing; the single-key header line unchanged.
"""

import numpy as np
import pytest

from softmax_scale.cli import main
from softmax_scale.experiments import _measure_run
from softmax_scale.experiments import _measure_sweep as sweep
from softmax_scale.experiments import measure as ms
from softmax_scale.experiments.real_passkey import (
    HAYSTACK_LINE,
    HAYSTACK_QUESTION,
    HAYSTACK_WORDS,
    haystack_depths,
    passkey_haystack,
)
from softmax_scale.models.llama import LlamaDecoder
from softmax_scale.models.readout import read_out
from softmax_scale.models.recipe import file_recipe
from tests.models.tiny_gguf import refuse_reads

N, K, L = 320, 3, 32


@pytest.fixture(scope="module")
def model(tiny):
    return LlamaDecoder.from_gguf(tiny[0])


@pytest.fixture(scope="module")
def result(tiny, tmp_path_factory):
    path, text = tiny
    return ms.measure(path, N, text=text, docs=1, prompts=2, keys=K, factors=(1.0, 1.2), progress=False,
                      out=tmp_path_factory.mktemp("keys"), figure_file=False)


def whole(model, ids, f, inv):
    """Greedy next tokens and losses of the decoder's whole pass over ``ids`` (no cache, no read-out)."""
    p = model._forward(ids, factors=f, inv_freq=inv, stats=False)
    lg = (p.x @ model.weights["output.weight"].T).astype(np.float64)
    lse = np.log(np.exp(lg - lg.max(axis=1, keepdims=True)).sum(axis=1)) + lg.max(axis=1)
    return np.argmax(lg, axis=1), lse[:-1] - lg[np.arange(ids.size - 1), ids[1:]]


def test_each_key_sits_at_its_depth_after_its_own_word_and_its_question_ends_in_it(model):
    keys = ("31415", "27182", "16180")
    h = passkey_haystack(model, N, keys)
    assert h.ids.size + max(q.size for q in h.questions) == N
    text = model.detokenize(h.ids)
    at = [text.index(HAYSTACK_LINE.format(word=HAYSTACK_WORDS[j], key=k)) for j, k in enumerate(keys)]
    assert at == sorted(at)
    filler = len(text) - sum(len(HAYSTACK_LINE.format(word=HAYSTACK_WORDS[j], key=k)) for j, k in enumerate(keys))
    for a, d, j in zip(at, haystack_depths(K), range(K)):  # the filler before the line, a fraction of the filler
        before = a - sum(len(HAYSTACK_LINE.format(word=HAYSTACK_WORDS[i], key=keys[i])) for i in range(j))
        assert before / filler == pytest.approx(d, abs=0.05)
    for j, k in enumerate(keys):
        seq = h.question(j)
        assert model.detokenize(h.questions[j]) == HAYSTACK_QUESTION.format(word=HAYSTACK_WORDS[j]) + k
        w = HAYSTACK_WORDS[j]  # the key's own word: in the haystack only right before its digits
        assert text.count(w) == 2 and text.count(w + k) == 2
        assert model.detokenize(seq.ids[seq.scored + 1]) == k
        assert model.detokenize(seq.ids[seq.source]) == k and seq.source.max() < h.ids.size
    assert haystack_depths(6) == pytest.approx([0.1, 0.26, 0.42, 0.58, 0.74, 0.9])


@pytest.mark.parametrize("keys, length, match", [(("12345", "12345"), N, "distinct"), (("12345",), N, "two or more"),
                                                 (("12345", "67890"), 40, "`length` must be at least"),
                                                 (tuple(f"{k:05d}" for k in range(len(HAYSTACK_WORDS) + 1)), N,
                                                  "at most")])
def test_bad_haystacks_are_refused(model, keys, length, match):
    with pytest.raises(ValueError, match=match):
        passkey_haystack(model, length, keys)


def test_the_keys_come_from_their_seeds_and_are_distinct():
    keys = _measure_run.haystack_keys(1, 6)
    assert keys[2] == "".join(map(str, np.random.default_rng([ms.KEY_SEED, 1, 2]).integers(0, 10, size=5)))
    assert len(set(keys)) == 6 and all(len(k) == 5 and k.isdigit() for k in keys)
    assert _measure_run.haystack_keys(1, 6) == keys and _measure_run.haystack_keys(0, 6) != keys


def test_a_question_continued_from_the_haystack_cache_is_the_whole_pass(model):
    h = passkey_haystack(model, N, ("31415", "27182", "16180"))
    inv = file_recipe(model).frequencies(model.config, N)
    f = np.where(np.arange(N) >= L, 1.3, 1.0)
    prefix = read_out(model, h.ids, [], stop=L, inv_freq=inv)
    cache = read_out(model, h.ids, [], start=L, stop=h.ids.size, cache=prefix.cache, factors=f[:h.ids.size],
                     inv_freq=inv).cache
    for j in range(K):
        seq = h.question(j)
        r = read_out(model, seq.ids, seq.scored, start=h.ids.size, cache=cache, factors=f[:seq.ids.size], inv_freq=inv)
        argmax, nll = whole(model, seq.ids, f[:seq.ids.size], inv)
        np.testing.assert_array_equal(r.argmax, argmax[seq.scored])
        np.testing.assert_allclose(r.nll, nll[seq.scored], atol=1e-4)


def test_a_key_row_is_the_whole_pass_over_haystack_and_question(result, model):
    t = ms.MeasureExperiment().read(result.path)
    inv = file_recipe(model).frequencies(model.config, N)
    h = passkey_haystack(model, N, _measure_run.haystack_keys(1, K))
    recipe = file_recipe(model).factors(model, N)  # on every position: the haystack read whole
    for scheme, factor, f in [(ms.CONSTANT, 1.2, np.where(np.arange(N) >= L, 1.2, 1.0)), (ms.RECIPE, None, recipe)]:
        for j in range(K):
            seq = h.question(j)
            argmax, nll = whole(model, seq.ids, f[..., :seq.ids.size], inv)
            row = (t.rows["item"] == "h1-keys3") & (t.rows["scheme"] == scheme) & (t.rows["depth"] == seq.depth)
            if factor is not None:
                row &= t.rows["factor"] == factor
            assert row.sum() == 1
            assert t.rows["loss"][row][0] == pytest.approx(np.mean(nll[seq.scored]), abs=1e-4)
            assert t.rows["retrieved"][row][0] == float(np.all(argmax[seq.scored] == seq.ids[seq.scored + 1]))
            assert t.rows["count"][row][0] == 5


def test_a_row_per_haystack_key_and_cell_and_every_key_counted(result):
    t = ms.MeasureExperiment().read(result.path)
    cells = 2 + len(ms.SHAPES) + 1
    p = t.rows["task"] == "passkey"
    assert p.sum() == 2 * K * cells
    assert sorted(set(t.rows["item"][p])) == ["h0-keys3", "h1-keys3"]
    for item in ("h0-keys3", "h1-keys3"):
        assert sorted(t.rows["depth"][p & (t.rows["item"] == item)]) == sorted(list(haystack_depths(K)) * cells)
    assert "the multi-key variant" in t.header["prompts"] and "3 keys" in t.header["prompts"]
    assert f"after word j of {', '.join(HAYSTACK_WORDS[:K])}," in t.header["prompts"]
    assert all(f"/{2 * K}" in line for line in result.curves[0].to_text().splitlines() if line.startswith("| constant"))
    cfg = ms.MeasureConfig(result.path, (N,), docs=1, prompts=2, keys=K)
    task = ms.MeasureTask("passkey", N, "h0-keys3", cfg)
    assert ms.MeasureExperiment().expected_rows(task) == K * ms.MeasureExperiment().expected_rows(
        ms.MeasureTask("loss", N, "x", cfg))


def test_a_rerun_reads_nothing_and_another_k_is_refused(result, tiny, monkeypatch):
    before = result.path.read_bytes()
    with monkeypatch.context() as m:
        refuse_reads(m)
        ms.measure(tiny[0], N, text=tiny[1], docs=1, prompts=2, keys=K, factors=(1.0, 1.2), progress=False,
                   out=result.path, figure_file=False)
    assert result.path.read_bytes() == before
    with pytest.raises(ValueError, match="prompts"):
        ms.measure(tiny[0], N, text=tiny[1], docs=1, prompts=2, keys=2, factors=(1.0, 1.2), progress=False,
                   out=result.path, figure_file=False)


def test_a_haystack_is_one_unit_of_the_plan(tiny):
    cfg = ms.MeasureConfig(str(tiny[0]), (N,), texts=(str(tiny[1]),), docs=1, prompts=2, keys=K)
    assert ms.unit_plan(cfg) == ms.unit_plan(ms.MeasureConfig(str(tiny[0]), (N,), texts=(str(tiny[1]),), docs=1,
                                                              prompts=2))


def test_the_single_key_header_line_is_the_committed_file_s():
    from pathlib import Path

    committed = next(line for line in (Path(__file__).parents[2] / "figures" / "measure_smollm2.csv").read_text()
                     .splitlines() if line.startswith("# prompts: "))
    assert committed == "# prompts: " + sweep._prompts_line(ms.MeasureConfig("m", (16384,)))


def test_keys_below_1_are_refused_before_the_model_is_read(tiny, tmp_path, capsys, monkeypatch):
    def refuse(path, *a, **k):
        raise AssertionError(f"the model was read ({path})")

    monkeypatch.setattr(_measure_run, "_RUNS", {})
    monkeypatch.setattr(LlamaDecoder, "from_gguf", refuse)
    assert main(["measure", str(tiny[0]), "--n", "64", "--out", str(tmp_path), "--keys", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "`keys` must be an integer >= 1" in err and "\n" not in err


def test_a_length_too_short_for_the_haystack_names_n(tiny, tmp_path, capsys):
    assert main(["measure", str(tiny[0]), "--n", "64", "--out", str(tmp_path), "--keys", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "`n` must be at least" in err and "\n" not in err


def test_the_jax_backend_continues_the_questions_alike(result, tiny, tmp_path):
    """The haystack and its questions read by the JAX pass: losses to float32 rounding, the same keys retrieved."""
    pytest.importorskip("jax")
    other = ms.MeasureExperiment().read(ms.measure(tiny[0], N, text=tiny[1], docs=1, prompts=2, keys=K,
                                                   factors=(1.0, 1.2), progress=False, out=tmp_path, backend="jax",
                                                   figure_file=False).path)
    mine = ms.MeasureExperiment().read(result.path)
    for col in ("task", "item", "scheme", "depth"):
        assert list(map(str, other.rows[col])) == list(map(str, mine.rows[col]))
    np.testing.assert_allclose(other.rows["loss"], mine.rows["loss"], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(other.rows["retrieved"], mine.rows["retrieved"])

"""SentencePiece GGUF vocabularies: the tokenizer against a naive second implementation, invariants, and llama.cpp.

The naive tokenizer rescans every adjacent pair after each merge and takes the highest-scoring
piece, the leftmost among equal scores: the rule llama.cpp's priority queue implements, written
without one.  The slow test asks llama.cpp (``llama-cpp-python``) to tokenize the same texts from
the same file.
"""

import numpy as np
import pytest

from softmax_scale.models.gguf_file import load_gguf
from softmax_scale.models.llama import LlamaDecoder
from softmax_scale.models.spm import SpmTokenizer

from .tiny_gguf import SPM_PIECES, rewrite, spm_vocab, write

TEXTS = ["the key", "The pass key is 12345. Remember it.", "in an inn, the anteater ate", "  two  spaces\nand a line",
         "café, naïve, 日本 and 🙂", "<s>after a control token</s> and on", "anan ananan", "", " ", "x"]


def naive(tokens, scores, types, text, prefix=True):
    """Greedy pair merging by a full rescan each step (no queue), then byte pieces; specials split first."""
    index = {t: i for i, t in enumerate(tokens)}
    special = sorted((t for t, k in zip(tokens, types) if k in (2, 3, 4)), key=len, reverse=True)
    out, after_special, rest = [], True, text
    while rest:
        hits = [(rest.find(s), -len(s), s) for s in special if s in rest]
        at, _, s = min(hits) if hits else (len(rest), 0, None)
        raw, rest = rest[:at], rest[at + len(s):] if s else ""
        if raw:
            symbols = list(((" " if prefix and after_special else "") + raw).replace(" ", "\u2581"))
            while True:
                best = None
                for j in range(len(symbols) - 1):
                    i = index.get(symbols[j] + symbols[j + 1])
                    if i is not None and (best is None or scores[i] > best[0]):
                        best = (scores[i], j)
                if best is None:
                    break
                j = best[1]
                symbols[j:j + 2] = [symbols[j] + symbols[j + 1]]
            for sym in symbols:
                if sym in index:
                    out.append(index[sym])
                else:
                    out.extend(index[f"<0x{b:02X}>"] for b in sym.encode("utf-8"))
            after_special = False
        if s:
            out.append(index[s])
            after_special = True
    return out


@pytest.fixture(scope="module")
def tok():
    return SpmTokenizer(*spm_vocab())


@pytest.mark.parametrize("text", TEXTS)
def test_the_tokenizer_is_the_naive_greedy_merge(tok, text):
    assert tok.encode(text).ids == naive(*spm_vocab(), text)


def test_random_vocabularies_and_texts_agree_with_the_naive_merge():
    rng = np.random.default_rng(7)
    alphabet = list("ab \u00e9c")
    for trial in range(40):
        tokens, scores, types = spm_vocab()
        pieces = {"".join(rng.choice(alphabet, size=rng.integers(2, 5))).replace(" ", "\u2581") for _ in range(30)}
        pieces -= set(tokens)
        tokens = tokens + sorted(pieces)
        scores = scores + list(rng.integers(-8, 0, size=len(pieces)).astype(float))  # many ties
        types = types + [1] * len(pieces)
        t = SpmTokenizer(tokens, scores, types)
        for _ in range(10):
            text = "".join(rng.choice(alphabet + ["<s>"], size=rng.integers(0, 30)))
            assert t.encode(text).ids == naive(tokens, scores, types, text), (trial, text)


def test_equal_scores_merge_the_leftmost_pair_first(tok):
    # "▁a" and "an" score alike: on "▁an" the left pair merges first, then "▁a" + "n" -> "▁an".
    assert SPM_PIECES["\u2581a"] == SPM_PIECES["an"]
    assert [tok.tokens[i] for i in tok.encode("an").ids] == ["\u2581an"]


@pytest.mark.parametrize("text", [t for t in TEXTS if "<s>" not in t])
def test_decode_inverts_encode(tok, text):
    assert tok.decode(tok.encode(text).ids) == text


def test_characters_without_a_piece_go_through_their_utf8_bytes(tok):
    ids = tok.encode("\U0001f642").ids  # the prefix space, then four bytes
    assert [tok.tokens[i] for i in ids] == ["\u2581", "<0xF0>", "<0x9F>", "<0x99>", "<0x82>"]


def test_a_special_token_is_itself_and_the_text_after_it_gets_the_prefix_space(tok):
    pieces = [tok.tokens[i] for i in tok.encode("<s>the").ids]
    assert pieces == ["<s>", "\u2581the"]
    assert tok.decode(tok.encode("<s>the").ids, skip_special_tokens=True) == "the"
    assert tok.decode(tok.encode("<s>the").ids) == "<s> the"


def test_without_the_space_prefix():
    t = SpmTokenizer(*spm_vocab(), add_space_prefix=False)
    assert [t.tokens[i] for i in t.encode("the key").ids] == ["t", "he", "\u2581key"]
    assert t.encode("the key").ids == naive(*spm_vocab(), "the key", prefix=False)


@pytest.mark.parametrize("kwargs, match", [
    (dict(tokens=[], scores=[], token_type=[]), "`tokens` must not be empty"),
    (dict(tokens=["a"], scores=[], token_type=[1]), "one entry per token"),
])
def test_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SpmTokenizer(**kwargs)


def test_refuses_bos_and_non_text(tok):
    with pytest.raises(ValueError, match="add_special_tokens"):
        tok.encode("a", add_special_tokens=True)
    with pytest.raises(TypeError, match="`text` must be a str"):
        tok.encode(b"a")


def test_a_sentencepiece_gguf_loads_with_its_tokenizer(tmp_path):
    path = tmp_path / "spm.gguf"
    write(path, "llama", vocab="spm")
    cfg, _, tok = load_gguf(path)
    assert isinstance(tok, SpmTokenizer)
    assert cfg.vocab_size == len(spm_vocab()[0])
    model = LlamaDecoder.from_gguf(path)
    ids = model.tokenize("the key")
    assert ids.tolist() == naive(*spm_vocab(), "the key")
    assert model.detokenize(ids) == "the key"


def test_another_tokenizer_model_is_one_line_naming_it(tmp_path):
    path = tmp_path / "spm.gguf"
    write(path, "llama", vocab="spm")
    rewrite(path, tmp_path / "t5.gguf", "llama",
            lambda name: name if name.startswith(("llama.", "tokenizer.")) and name != "tokenizer.ggml.model" else None,
            lambda w: w.add_tokenizer_model("t5"))
    with pytest.raises(ValueError, match=r"tokenizer of model 't5'; only byte-level BPE \('gpt2'\) and "
                                         r"SentencePiece \('llama'\) are read") as e:
        load_gguf(tmp_path / "t5.gguf")
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_llama_cpp_tokenizes_the_file_as_the_decoder_does(tmp_path):
    import llama_cpp

    path = tmp_path / "spm.gguf"
    write(path, "llama", vocab="spm")
    model = LlamaDecoder.from_gguf(path)
    m = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        for text in TEXTS + ["an " * 7, "key keyed keys\t tab", "é" * 3 + "e\u0301"]:
            want = m.tokenize(text.encode("utf-8"), add_bos=False, special=True)
            assert model.tokenize(text).tolist() == want, text
        # negative control: the same texts without the space prefix differ from llama.cpp's
        plain = SpmTokenizer(*spm_vocab(), add_space_prefix=False)
        assert plain.encode("the key").ids != m.tokenize(b"the key", add_bos=False, special=True)
    finally:
        m.close()


def test_measure_runs_on_a_sentencepiece_file_and_reads_the_key_in_place(tmp_path):
    from softmax_scale.experiments import measure as ms
    from softmax_scale.experiments.real_passkey import passkey_sequence

    path = tmp_path / "spm.gguf"
    write(path, "llama", vocab="spm", rope_scaling={"type": "yarn", "factor": 4.0}, gain=0.5)
    model = LlamaDecoder.from_gguf(path)
    seq = passkey_sequence(model, 128, 0.5, "40719")
    assert model.detokenize(seq.ids[seq.scored + 1]) == "40719"  # the five targets are the key's digits
    assert model.detokenize(seq.ids[seq.source]) == "40719"  # and so are the tokens of its line
    text = tmp_path / "story.txt"
    text.write_text("the key in an inn; " * 200, encoding="utf-8")
    result = ms.measure(path, 128, text=text, docs=2, prompts=1, factors=(1.0, 1.2), progress=False,
                        out=tmp_path / "out", figure_file=False)
    rows = ms.MeasureExperiment().read(result.path).rows
    assert np.isfinite(rows["loss"][rows["task"] == "loss"]).all()
    assert set(rows["task"]) == {"loss", "passkey"}


@pytest.mark.parametrize("add_bos, want", [(None, True), (False, False), (True, True)])
def test_a_bos_first_as_the_file_says_and_llama_cpp_defaults(tmp_path, add_bos, want):
    path = tmp_path / "spm.gguf"
    write(path, "llama", vocab="spm", add_bos=add_bos)
    assert load_gguf(path)[0].add_bos is want  # absent: llama.cpp's default for SentencePiece, a BOS


def test_with_a_bos_the_passkey_prompt_and_the_documents_start_with_it(tmp_path):
    from softmax_scale.experiments import measure as ms
    from softmax_scale.experiments.real_passkey import passkey_min_tokens, passkey_sequence

    paths = {}
    for bos in (False, True):
        paths[bos] = tmp_path / f"bos{bos}.gguf"
        write(paths[bos], "llama", vocab="spm", add_bos=bos, rope_scaling={"type": "yarn", "factor": 4.0})
    plain, first = LlamaDecoder.from_gguf(paths[False]), LlamaDecoder.from_gguf(paths[True])
    assert passkey_min_tokens(first) == passkey_min_tokens(plain) + 1
    a, b = passkey_sequence(plain, 128, 0.5, "40719"), passkey_sequence(first, 128, 0.5, "40719")
    assert b.ids.size == a.ids.size == 128
    assert b.ids[0] == first.config.bos_id == 1 and a.ids[0] != 1
    assert first.detokenize(b.ids[b.source]) == "40719"
    np.testing.assert_array_equal(b.scored, a.scored)
    text = tmp_path / "story.txt"
    text.write_text("the key in an inn; " * 200, encoding="utf-8")
    result = ms.measure(paths[True], 128, text=text, docs=2, prompts=1, factors=(1.0,), shapes=(), progress=False,
                        out=tmp_path / "out", figure_file=False)
    assert "a BOS first in every sequence" in ms.MeasureExperiment().read(result.path).header["scoring"]
    run = ms._run_of(next(iter(ms._RUNS)))
    docs = run.documents(128)
    assert all(ids[0] == 1 and ids.size == 128 for _, ids in docs)
    np.testing.assert_array_equal(docs[0][1][1:], first.tokenize(text.read_text())[:127])

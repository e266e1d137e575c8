"""Reading a LLaMA-architecture GGUF file: its sizes, its weights (dequantised) and its tokenizer.

Every size comes from the file's metadata (``llama.block_count``, ``llama.embedding_length``,
...), never typed.  Weights are dequantised once to float32 (``gguf.quants.dequantize`` for
``Q4_1`` and ``Q8_0``).

GGUF's RoPE layout. ``convert_hf_to_gguf.py`` permutes the rows of each query and key head so
that llama.cpp can rotate *adjacent* pairs ``(2i, 2i+1)``; the Hugging Face checkpoint rotates
the halves ``(i, i + d/2)``. :func:`_unpermute` restores the Hugging Face row order on load, and
:func:`~softmax_scale.models.llama.apply_rope` rotates halves. A mistake here leaves the model
fluent for a few tokens and then wrong; the greedy-completion and perplexity tests catch it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = ["LlamaConfig", "load_gguf"]


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes read from the GGUF metadata."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab_size: int
    rope_base: float
    rms_eps: float
    context_length: int
    bos_id: int
    eos_id: int
    name: str = ""


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        if default is not None:
            return default
        raise ValueError(f"`path`: GGUF file lacks the metadata key {key!r}")
    return f.contents()


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's query/key row permutation: [n_head*d, in] adjacent pairs -> halves."""
    out, inp = w.shape
    d = out // n_head
    return w.reshape(n_head, d // 2, 2, inp).swapaxes(1, 2).reshape(out, inp)


def load_gguf(path):
    """Read a LLaMA-architecture GGUF file.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.gguf`` file.

    Returns
    -------
    config : LlamaConfig
    weights : dict of str -> ndarray
        float32 arrays in ``[out, in]`` layout (as ``y = x @ W.T``), query and key rows in the
        Hugging Face (halves) RoPE order.
    tokenizer : tokenizers.Tokenizer
        Byte-level BPE built from the file's vocabulary and merges.
    """
    import gguf

    reader = gguf.GGUFReader(os.fspath(path))
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"`path` must be a LLaMA-architecture GGUF file, got architecture {arch!r}")
    n_heads = int(_field(reader, "llama.attention.head_count"))
    d_model = int(_field(reader, "llama.embedding_length"))
    n_kv = int(_field(reader, "llama.attention.head_count_kv", n_heads))
    head_dim = int(_field(reader, "llama.rope.dimension_count", d_model // n_heads))
    tokens = _field(reader, "tokenizer.ggml.tokens")
    cfg = LlamaConfig(
        n_layers=int(_field(reader, "llama.block_count")),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        d_ff=int(_field(reader, "llama.feed_forward_length")),
        vocab_size=len(tokens),
        rope_base=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        context_length=int(_field(reader, "llama.context_length")),
        bos_id=int(_field(reader, "tokenizer.ggml.bos_token_id", -1)),
        eos_id=int(_field(reader, "tokenizer.ggml.eos_token_id", -1)),
        name=str(_field(reader, "general.name", "")),
    )
    weights = {}
    for t in reader.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        a = np.ascontiguousarray(a, dtype=np.float32)
        if t.name.endswith("attn_q.weight"):
            a = _unpermute(a, n_heads)
        elif t.name.endswith("attn_k.weight"):
            a = _unpermute(a, n_kv)
        weights[t.name] = a
    if "output.weight" not in weights:  # tied embeddings
        weights["output.weight"] = weights["token_embd.weight"]
    tok = _tokenizer(tokens, _field(reader, "tokenizer.ggml.merges", []),  # none: every token is a byte or special
                     _field(reader, "tokenizer.ggml.token_type", [1] * len(tokens)),
                     str(_field(reader, "tokenizer.ggml.pre", "default")))
    return cfg, weights, tok


def _tokenizer(tokens, merges, token_type, pre):
    """Byte-level BPE from GGUF's ``tokenizer.ggml.*`` fields (GPT-2 style, as llama.cpp builds it).

    The pre-tokeniser follows the file's ``tokenizer.ggml.pre``: ``smollm`` splits every digit
    on its own before GPT-2's byte-level regex (llama.cpp's ``LLAMA_VOCAB_PRE_TYPE_SMOLLM``, and
    the ``Digits(individual_digits=True)`` step of SmolLM2's ``tokenizer.json``).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False))
    steps = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if pre in ("smollm", "starcoder", "refact"):
        steps.insert(0, pre_tokenizers.Digits(individual_digits=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()
    special = [tokens[i] for i, k in enumerate(token_type) if int(k) == 3]  # CONTROL tokens
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return tok

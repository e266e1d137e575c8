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

from ._files import bad_file

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


#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"
#: What the reader raises on a file whose header or tensor table runs past its end or holds garbage.
_READ_ERRORS = (ValueError, IndexError, KeyError, OverflowError, UnicodeDecodeError)


def _field(reader, key, path, default=None):
    f = reader.fields.get(key)
    if f is None:
        if default is not None:
            return default
        raise bad_file(path, f"lacks the GGUF metadata key {key!r}")
    return f.contents()


def _reader(path):
    """A ``gguf.GGUFReader`` of ``path``, or a ValueError naming ``path``, the file and what is wrong with it."""
    import gguf

    with open(path, "rb") as f:
        head = f.read(len(GGUF_MAGIC))
    if not head:
        raise bad_file(path, "is empty, not a GGUF file")
    if head != GGUF_MAGIC:
        raise bad_file(path, f"is not a GGUF file: it starts with {head!r}, not {GGUF_MAGIC!r}")
    try:
        return gguf.GGUFReader(os.fspath(path))
    except _READ_ERRORS as exc:
        raise bad_file(path, f"is a truncated or corrupt GGUF file ({exc})") from None


def _expected_shapes(cfg: LlamaConfig) -> dict:
    """Tensor name -> ``[out, in]`` shape that the metadata implies, for every tensor the decoder reads.

    Every one is required but ``output.weight``: a file without it ties the output to ``token_embd.weight``.
    """
    D, F, q, kv = cfg.d_model, cfg.d_ff, cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    shapes = {"token_embd.weight": (cfg.vocab_size, D), "output_norm.weight": (D,), "output.weight": (cfg.vocab_size, D)}
    for b in range(cfg.n_layers):
        p = f"blk.{b}."
        shapes.update({p + "attn_norm.weight": (D,), p + "ffn_norm.weight": (D,), p + "attn_q.weight": (q, D),
                       p + "attn_k.weight": (kv, D), p + "attn_v.weight": (kv, D), p + "attn_output.weight": (D, q),
                       p + "ffn_gate.weight": (F, D), p + "ffn_up.weight": (F, D), p + "ffn_down.weight": (D, F)})
    return shapes


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

    Raises
    ------
    ValueError
        Naming ``path`` and the file, if it is empty, not GGUF, truncated or corrupt, not a
        LLaMA architecture, lacks a metadata key or a tensor, or a tensor has a shape the metadata
        does not imply or a type that cannot be dequantised.

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

    path = os.fspath(path)
    reader = _reader(path)
    arch = _field(reader, "general.architecture", path)
    if arch != "llama":
        raise ValueError(f"`path` must be a LLaMA-architecture GGUF file, got architecture {arch!r} in {path}")
    n_heads = int(_field(reader, "llama.attention.head_count", path))
    d_model = int(_field(reader, "llama.embedding_length", path))
    n_kv = int(_field(reader, "llama.attention.head_count_kv", path, n_heads))
    head_dim = int(_field(reader, "llama.rope.dimension_count", path, d_model // n_heads))
    tokens = _field(reader, "tokenizer.ggml.tokens", path)
    cfg = LlamaConfig(
        n_layers=int(_field(reader, "llama.block_count", path)),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        d_ff=int(_field(reader, "llama.feed_forward_length", path)),
        vocab_size=len(tokens),
        rope_base=float(_field(reader, "llama.rope.freq_base", path, 10000.0)),
        rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", path)),
        context_length=int(_field(reader, "llama.context_length", path)),
        bos_id=int(_field(reader, "tokenizer.ggml.bos_token_id", path, -1)),
        eos_id=int(_field(reader, "tokenizer.ggml.eos_token_id", path, -1)),
        name=str(_field(reader, "general.name", path, "")),
    )
    shapes = _expected_shapes(cfg)
    weights = {}
    for t in reader.tensors:
        try:
            a = gguf.quants.dequantize(t.data, t.tensor_type)
        except NotImplementedError:
            raise bad_file(path, f"holds the tensor `{t.name}` of type {t.tensor_type.name}, which cannot be dequantised") from None
        if t.name in shapes and a.shape != shapes[t.name]:
            raise bad_file(path, f"is inconsistent: tensor `{t.name}` has shape {a.shape}, the metadata implies {shapes[t.name]}")
        a = np.ascontiguousarray(a, dtype=np.float32)
        if t.name.endswith("attn_q.weight"):
            a = _unpermute(a, n_heads)
        elif t.name.endswith("attn_k.weight"):
            a = _unpermute(a, n_kv)
        weights[t.name] = a
    missing = [name for name in shapes if name not in weights and name != "output.weight"]
    if missing:
        raise bad_file(path, f"lacks the tensor{'s' if len(missing) > 1 else ''} {', '.join(missing[:3])}"
                             + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    if "output.weight" not in weights:  # tied embeddings
        weights["output.weight"] = weights["token_embd.weight"]
    tok = _tokenizer(tokens, _field(reader, "tokenizer.ggml.merges", path, []),  # none: every token is a byte or special
                     _field(reader, "tokenizer.ggml.token_type", path, [1] * len(tokens)),
                     str(_field(reader, "tokenizer.ggml.pre", path, "default")))
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

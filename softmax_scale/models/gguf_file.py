"""Reading a LLaMA-family GGUF file: its sizes, its weights (dequantised) and its tokenizer.

Every size comes from the file's metadata (``{arch}.block_count``, ``{arch}.embedding_length``,
...), never typed.  The architectures read (:data:`ARCHITECTURES`) are one decoder with small
additions: ``llama`` (Llama 2/3, Mistral, SmolLM2; Llama 3's RoPE as the file's ``rope_freqs.weight``
divisors), ``smollm3`` (``llama`` with every fourth layer without RoPE, as llama.cpp runs it),
``qwen2`` (biases on q, k, v) and ``qwen3`` (an RMSNorm on each head's q and k).  Weights are
dequantised once to float32 by ``gguf.quants.dequantize``, for every type it implements
(:data:`TENSOR_TYPES`).  The tokenizer is byte-level BPE (``tokenizer.ggml.model = "gpt2"``:
Llama 3, Qwen, SmolLM) or SentencePiece (``"llama"``: Llama 2, Mistral 7B;
:class:`~softmax_scale.models.spm.SpmTokenizer`).

GGUF's RoPE layout. ``convert_hf_to_gguf.py`` permutes the rows of each query and key head so
that llama.cpp can rotate *adjacent* pairs ``(2i, 2i+1)``; the Hugging Face checkpoint rotates
the halves ``(i, i + d/2)``. :func:`_unpermute` restores the Hugging Face row order on load (of the
architectures llama.cpp rotates in pairs: :attr:`Architecture.permuted`), and
:func:`~softmax_scale.models.layer.apply_rope` rotates halves. A mistake here leaves the model
fluent for a few tokens and then wrong; the greedy-completion and perplexity tests catch it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import numpy as np

from ..engines.gguf_config import GGUF_MAGIC
from ._files import bad_file
from .spm import SpmTokenizer

__all__ = ["ARCHITECTURES", "TENSOR_TYPES", "Architecture", "LlamaConfig", "load_gguf"]


@dataclass(frozen=True)
class Architecture:
    """What one GGUF ``general.architecture`` adds to the LLaMA decoder.

    Attributes
    ----------
    permuted : bool
        The converter permuted the q and k rows for llama.cpp's adjacent-pair RoPE (undone on load).
    nope_step : int
        Every ``nope_step``-th layer (``(layer + 1) % nope_step == 0``) runs without RoPE; 0: none.
    tensors : tuple of str
        Per-layer tensors the architecture requires beyond the LLaMA ones (``attn_q.bias``, ...).
    """

    permuted: bool = True
    nope_step: int = 0
    tensors: tuple = ()


#: The architectures :func:`load_gguf` reads, by ``general.architecture``.
ARCHITECTURES = {
    "llama": Architecture(),
    "smollm3": Architecture(nope_step=4),
    "qwen2": Architecture(permuted=False, tensors=("attn_q.bias", "attn_k.bias", "attn_v.bias")),
    "qwen3": Architecture(permuted=False, tensors=("attn_q_norm.weight", "attn_k_norm.weight")),
}

#: The GGUF tensor types read: those ``gguf.quants.dequantize`` implements in numpy.
TENSOR_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes read from the GGUF metadata.

    ``nope_layers`` are the layers without RoPE; ``freq_divisors`` (``head_dim / 2`` floats, or
    empty) divide each trained RoPE frequency (Llama 3's ``rope_freqs.weight``).
    """

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
    arch: str = "llama"
    nope_layers: tuple = ()
    freq_divisors: tuple = ()
    add_bos: bool = False


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

    Every one is required but ``output.weight`` (a file without it ties the output to
    ``token_embd.weight``), ``rope_freqs.weight`` and the biases an architecture does not require.
    """
    D, F, q, kv = cfg.d_model, cfg.d_ff, cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    shapes = {"token_embd.weight": (cfg.vocab_size, D), "output_norm.weight": (D,), "output.weight": (cfg.vocab_size, D),
              "rope_freqs.weight": (cfg.head_dim // 2,)}
    for b in range(cfg.n_layers):
        p = f"blk.{b}."
        shapes.update({p + "attn_norm.weight": (D,), p + "ffn_norm.weight": (D,), p + "attn_q.weight": (q, D),
                       p + "attn_k.weight": (kv, D), p + "attn_v.weight": (kv, D), p + "attn_output.weight": (D, q),
                       p + "ffn_gate.weight": (F, D), p + "ffn_up.weight": (F, D), p + "ffn_down.weight": (D, F),
                       p + "attn_q.bias": (q,), p + "attn_k.bias": (kv,), p + "attn_v.bias": (kv,),
                       p + "attn_q_norm.weight": (cfg.head_dim,), p + "attn_k_norm.weight": (cfg.head_dim,)})
    return shapes


#: Tensors a file may hold or not (whatever the architecture requires).
_OPTIONAL = ("output.weight", "rope_freqs.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_q_norm.weight",
             "attn_k_norm.weight")


def _base_name(name: str) -> str:
    """A tensor's name without its ``blk.{i}.`` prefix."""
    return name.split(".", 2)[2] if name.startswith("blk.") else name


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's query/key row permutation: [n_head*d, in] (or a bias [n_head*d]) adjacent pairs -> halves."""
    if w.ndim == 1:
        return _unpermute(w[:, None], n_head)[:, 0]
    out, inp = w.shape
    d = out // n_head
    return w.reshape(n_head, d // 2, 2, inp).swapaxes(1, 2).reshape(out, inp)


def load_gguf(path):
    """Read a GGUF file of one of :data:`ARCHITECTURES`.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.gguf`` file.

    Raises
    ------
    ValueError
        Naming ``path`` and the file, if it is empty, not GGUF, truncated or corrupt, of an
        architecture not in :data:`ARCHITECTURES` (naming it), lacks a metadata key or a tensor,
        or a tensor has a shape the metadata does not imply or a type not in :data:`TENSOR_TYPES`
        (naming the tensor and its type).

    Returns
    -------
    config : LlamaConfig
    weights : dict of str -> ndarray
        float32 arrays in ``[out, in]`` layout (as ``y = x @ W.T``), query and key rows (and
        biases) in the Hugging Face (halves) RoPE order.
    tokenizer : tokenizers.Tokenizer
        Byte-level BPE built from the file's vocabulary and merges.
    """
    import gguf

    path = os.fspath(path)
    reader = _reader(path)
    arch = _field(reader, "general.architecture", path)
    if arch not in ARCHITECTURES:
        raise ValueError(f"`path` must be a GGUF file of a supported architecture ({', '.join(ARCHITECTURES)}), "
                         f"got architecture {arch!r} in {path}")
    spec = ARCHITECTURES[arch]
    p = arch + "."
    n_heads = int(_field(reader, p + "attention.head_count", path))
    d_model = int(_field(reader, p + "embedding_length", path))
    n_kv = int(_field(reader, p + "attention.head_count_kv", path, n_heads))
    head_dim = int(_field(reader, p + "attention.key_length", path,
                          _field(reader, p + "rope.dimension_count", path, d_model // n_heads)))
    tokens = _field(reader, "tokenizer.ggml.tokens", path)
    n_layers = int(_field(reader, p + "block_count", path))
    cfg = LlamaConfig(
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        d_ff=int(_field(reader, p + "feed_forward_length", path)),
        vocab_size=len(tokens),
        rope_base=float(_field(reader, p + "rope.freq_base", path, 10000.0)),
        rms_eps=float(_field(reader, p + "attention.layer_norm_rms_epsilon", path)),
        context_length=int(_field(reader, p + "context_length", path)),
        bos_id=int(_field(reader, "tokenizer.ggml.bos_token_id", path, -1)),
        eos_id=int(_field(reader, "tokenizer.ggml.eos_token_id", path, -1)),
        name=str(_field(reader, "general.name", path, "")),
        arch=arch,
        nope_layers=tuple(i for i in range(n_layers) if spec.nope_step and (i + 1) % spec.nope_step == 0),
    )
    shapes = _expected_shapes(cfg)
    weights = {}
    for t in reader.tensors:
        if t.tensor_type.name not in TENSOR_TYPES:
            raise bad_file(path, f"holds the tensor `{t.name}` of type {t.tensor_type.name}, which cannot be "
                                 f"dequantised (types read: {', '.join(TENSOR_TYPES)})")
        try:
            a = gguf.quants.dequantize(t.data, t.tensor_type)
        except NotImplementedError:
            raise bad_file(path, f"holds the tensor `{t.name}` of type {t.tensor_type.name}, which cannot be dequantised") from None
        if t.name in shapes and a.shape != shapes[t.name]:
            raise bad_file(path, f"is inconsistent: tensor `{t.name}` has shape {a.shape}, the metadata implies {shapes[t.name]}")
        a = np.ascontiguousarray(a, dtype=np.float32)
        if spec.permuted and t.name.endswith(("attn_q.weight", "attn_q.bias")):
            a = _unpermute(a, n_heads)
        elif spec.permuted and t.name.endswith(("attn_k.weight", "attn_k.bias")):
            a = _unpermute(a, n_kv)
        weights[t.name] = a
    required = [f"blk.{b}.{t}" for b in range(n_layers) for t in spec.tensors]
    missing = [name for name in shapes if name not in weights
               and (_base_name(name) not in _OPTIONAL or name in required)]
    if missing:
        raise bad_file(path, f"lacks the tensor{'s' if len(missing) > 1 else ''} {', '.join(missing[:3])}"
                             + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    if "output.weight" not in weights:  # tied embeddings
        weights["output.weight"] = weights["token_embd.weight"]
    if "rope_freqs.weight" in weights:
        divisors = weights.pop("rope_freqs.weight").astype(np.float64)
        if not np.all(np.isfinite(divisors) & (divisors > 0)):
            raise bad_file(path, "holds a `rope_freqs.weight` that is not positive and finite")
        cfg = dataclasses.replace(cfg, freq_divisors=tuple(float(x) for x in divisors))
    model = str(_field(reader, "tokenizer.ggml.model", path, "gpt2"))
    types = _field(reader, "tokenizer.ggml.token_type", path, [1] * len(tokens))
    if model == "llama":
        tok = SpmTokenizer(tokens, _field(reader, "tokenizer.ggml.scores", path), types,
                           bool(_field(reader, "tokenizer.ggml.add_space_prefix", path, True)))
    elif model == "gpt2":
        tok = _tokenizer(tokens, _field(reader, "tokenizer.ggml.merges", path, []),  # none: every token is a byte or special
                         types, str(_field(reader, "tokenizer.ggml.pre", path, "default")))
    else:
        raise bad_file(path, f"holds a tokenizer of model {model!r}; only byte-level BPE ('gpt2') and "
                             "SentencePiece ('llama') are read")
    # llama.cpp's default: a BOS first for SentencePiece, none for BPE, unless the file says otherwise
    add_bos = bool(_field(reader, "tokenizer.ggml.add_bos_token", path, model == "llama"))
    return dataclasses.replace(cfg, add_bos=add_bos and cfg.bos_id >= 0), weights, tok


#: Pre-tokeniser regexes of the ``tokenizer.ggml.pre`` values that replace GPT-2's (llama.cpp's
#: ``llama-vocab.cpp``: ``LLAMA_VOCAB_PRE_TYPE_LLAMA3`` and ``..._QWEN2``): Llama 3 groups up to three
#: digits, Qwen 2 splits every digit.
_PRE_REGEX = {
    "llama-bpe": r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


def _tokenizer(tokens, merges, token_type, pre):
    """Byte-level BPE from GGUF's ``tokenizer.ggml.*`` fields (GPT-2 style, as llama.cpp builds it).

    The pre-tokeniser follows the file's ``tokenizer.ggml.pre``: ``smollm`` splits every digit
    on its own before GPT-2's byte-level regex (llama.cpp's ``LLAMA_VOCAB_PRE_TYPE_SMOLLM``, and
    the ``Digits(individual_digits=True)`` step of SmolLM2's ``tokenizer.json``); ``llama-bpe`` and
    ``qwen2`` split by their own regex (:data:`_PRE_REGEX`); any other value by GPT-2's.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False))
    if pre in _PRE_REGEX:
        steps = [pre_tokenizers.Split(Regex(_PRE_REGEX[pre]), behavior="isolated"),
                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    else:
        steps = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if pre in ("smollm", "starcoder", "refact"):
        steps.insert(0, pre_tokenizers.Digits(individual_digits=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()
    special = [tokens[i] for i, k in enumerate(token_type) if int(k) == 3]  # CONTROL tokens
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return tok

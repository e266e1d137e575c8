"""A trained causal model written as a LLaMA-architecture GGUF file, for the numpy decoder to read.

Two implementations of one model cross-check each other: the JAX forward of
:mod:`softmax_scale.train.model` and the numpy LLaMA decoder of :mod:`softmax_scale.models.llama`
(``ss.models.load("smollm2", path=...)`` reads any LLaMA GGUF).  The harness's model is a LLaMA
when its feed-forward is SwiGLU (``TrainConfig(ffn="swiglu")``): pre-RMSNorm, RoPE on queries and
keys, no biases, the output tied to the embedding.  What the export maps:

- ``token_embd.weight`` is the embedding times ``sqrt(d_model)`` (the harness scales the embedding
  on input; LLaMA does not), ``output.weight`` the embedding itself (tied, unscaled);
- ``attn_q/k/v/output``, ``ffn_gate/up/down`` are the transposed ``wq, wk, wv, wo``, ``w1, w3,
  w2`` (GGUF stores ``[out, in]``; the harness computes ``x @ W``);
- the query and key rows are permuted as llama.cpp's ``convert_hf_to_gguf.py`` permutes a
  Hugging Face checkpoint (``LlamaModel.permute``: each head's rows ``(i, i + d/2)`` -> adjacent
  ``(2i, 2i + 1)``), because the harness rotates halves as Hugging Face does;
  :mod:`softmax_scale.models.gguf_file` undoes it on load;
- RMSNorm's epsilon (1e-6 inside the square root, as both implementations add it), the RoPE base,
  the training length as ``context_length``;
- the vocabulary: the 256 bytes as GPT-2's byte-level characters (token id = byte value) and
  ``[MASK]``; no merges (the key is left out: the writer drops an empty array, and the reader takes
  its absence as no merges).

A model trained with SSMax (a learned ``s`` per head) or with ReLU has no LLaMA equivalent and is
refused; the trained scale of any other scheme is not in the file: pass the same factors to the
decoder (``softmax_scale.models.llama.scale_factors``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from .._util.files import atomic_write
from .config import TrainConfig
from .data import VOCAB
from .scales import learned_parameter

__all__ = ["RMS_EPS", "byte_tokens", "export_gguf", "permute_rows"]

#: The harness's RMSNorm epsilon (:mod:`softmax_scale.train.model`), written into the file.
RMS_EPS = 1e-6


def byte_tokens() -> list[str]:
    """GPT-2's byte-to-character table (``bytes_to_unicode``) as 256 token strings, then ``[MASK]``.

    Printable Latin-1 bytes stand for themselves; the other 68 are mapped to ``chr(256 + k)`` in
    byte order, so that a byte-level BPE with no merges reads each byte as its own id.
    """
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)] + ["[MASK]"]


def permute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute``: each head's rows from halves ``(i, i + d/2)`` to adjacent pairs ``(2i, 2i + 1)``."""
    out, inp = w.shape
    return w.reshape(heads, 2, out // heads // 2, inp).swapaxes(1, 2).reshape(out, inp)


def export_gguf(params: dict, config: TrainConfig, path, *, name: str = "softmax_scale byte decoder") -> Path:
    """Write a trained causal SwiGLU model as a LLaMA-architecture GGUF file (float32 tensors).

    Parameters
    ----------
    params : dict
        The model's parameters (:func:`~softmax_scale.train.train_model`'s ``params``).
    config : TrainConfig
        Its configuration: causal, ``ffn="swiglu"``, not ``ssmax``.
    path : str or PathLike
        The ``.gguf`` file to write (replaced atomically).
    name : str
        ``general.name``.

    Returns
    -------
    Path
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"`config` must be a TrainConfig, got {type(config).__name__}")
    if not config.causal or config.ffn != "swiglu":
        raise ValueError(f"`config`: only a causal model with ffn='swiglu' is a LLaMA, got objective={config.objective!r}, "
                         f"ffn={config.ffn!r}")
    learned = learned_parameter(config.scheme)
    if learned is not None:
        raise ValueError(f"`config`: a model trained with {config.scheme} has a learned {learned} per head, which LLaMA has not")
    layers = params.get("layers") if isinstance(params, dict) else None
    if not layers or len(layers) != config.layers or any("w3" not in lay for lay in layers):
        raise ValueError("`params` must be the parameters of a SwiGLU model of `config` (layers with w1, w2, w3)")
    D, H = config.d_model, config.heads
    emb = np.asarray(params["embed"], dtype=np.float32)
    if emb.shape != (VOCAB, D):
        raise ValueError(f"`params`: embedding of shape {emb.shape}, the config says {(VOCAB, D)}")
    tensors = {"token_embd.weight": emb * np.float32(math.sqrt(D)), "output.weight": emb,
               "output_norm.weight": np.asarray(params["norm"], np.float32)}
    for b, lay in enumerate(layers):
        p = f"blk.{b}."
        t = {k: np.asarray(v, np.float32) for k, v in lay.items()}
        tensors.update({
            p + "attn_norm.weight": t["norm1"], p + "ffn_norm.weight": t["norm2"],
            p + "attn_q.weight": permute_rows(t["wq"].T, H), p + "attn_k.weight": permute_rows(t["wk"].T, H),
            p + "attn_v.weight": t["wv"].T, p + "attn_output.weight": t["wo"].T,
            p + "ffn_gate.weight": t["w1"].T, p + "ffn_up.weight": t["w3"].T, p + "ffn_down.weight": t["w2"].T,
        })
    return atomic_write(path, lambda tmp: _write_gguf(tmp, tensors, config, name))


def _write_gguf(tmp, tensors, config, name):
    import gguf

    D, H = config.d_model, config.heads
    tokens = byte_tokens()
    w = gguf.GGUFWriter(os.fspath(tmp), "llama")
    w.add_name(name)
    w.add_block_count(config.layers)
    w.add_context_length(config.train_length)
    w.add_embedding_length(D)
    w.add_feed_forward_length(config.d_ff)
    w.add_head_count(H)
    w.add_head_count_kv(H)
    w.add_rope_dimension_count(config.d_head)
    w.add_rope_freq_base(float(config.rope_base))
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * 256 + [3])
    w.add_bos_token_id(VOCAB - 1)
    w.add_eos_token_id(VOCAB - 1)
    for key, a in tensors.items():
        w.add_tensor(key, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

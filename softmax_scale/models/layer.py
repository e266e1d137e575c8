"""One LLaMA layer in numpy: the pure functions of a forward pass, shapes written down.

:func:`block` runs one layer over the new positions (the steps are listed in :mod:`.llama`'s
docstring); :func:`layer_weights` names a GGUF file's tensors of one layer as :func:`block`'s
parameters.  Activations are float32; the attention statistics come back in float64.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._util.jit import jit
from .attention import MIN_SPLIT_ROWS, attention, blas_on_one_thread, chunks, matmul_rows, split_rows

__all__ = ["LAYER_EXTRAS", "LAYER_TENSORS", "LayerOut", "apply_rope", "block", "feed_forward", "layer_weights",
           "rms_norm", "rope_scaled", "rope_tables", "scratch", "silu"]


def rms_norm(x, w, eps, *, out=None):  # [..., d], [d] -> [..., d]
    """RMSNorm in float32 (no centring): ``x / sqrt(mean(x^2) + eps) * w``, the mean accumulated in float64.

    One numba pass per row (:func:`_rms_rows`), the rows split over the attention threads.
    ``out``: a C-contiguous float32 array of ``x``'s shape to write into (fresh where ``None``).
    """
    x2 = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, np.shape(x)[-1])
    w = np.ascontiguousarray(w, dtype=np.float32)
    out = np.empty_like(x2) if out is None else out.reshape(x2.shape)
    split_rows(lambda r0, r1: _rms_rows(x2, w, np.float32(eps), out, r0, r1), x2.shape[0])
    return out.reshape(np.shape(x))


@jit(reassociate=True)
def _sum_squares(row):
    """``sum row^2`` in float64 (reassociated: vectorised)."""
    s = 0.0
    for j in range(row.size):
        v = np.float64(row[j])
        s += v * v
    return s


@jit()
def _rms_rows(x, w, eps, out, r0, r1):
    """Rows ``r0 .. r1-1`` of :func:`rms_norm` (float32 ``x [m, D]``, ``w [D]``, ``eps``) into ``out``."""
    D = x.shape[1]
    for i in range(r0, r1):
        den = np.sqrt(np.float32(_sum_squares(x[i]) / D) + eps)
        for j in range(D):
            out[i, j] = x[i, j] / den * w[j]


def apply_rope(x, cos, sin):  # [h, n, d], [n, d/2], [n, d/2] -> [h, n, d]
    """Rotate the halves ``(x_i, x_{i+d/2})`` by the angles whose cosines and sines are given."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


@jit()
def _rope_rows(src, cos, sin, scale, out, r0, r1):
    """Positions ``r0 .. r1-1`` of :func:`apply_rope` times ``scale``, from ``src [m, heads, d]`` into ``out [heads, m, d]``.

    ``scale`` ``[1 or heads, m, 1 or d]`` (float32); the arithmetic of :func:`apply_rope` then ``* scale``, in float32.
    """
    heads, half = src.shape[1], cos.shape[1]
    per_head, per_dim = scale.shape[0] > 1, scale.shape[2] > 1
    for i in range(r0, r1):
        for h in range(heads):
            sc = scale[h if per_head else 0, i]
            for j in range(half):
                a, b, c, s = src[i, h, j], src[i, h, j + half], cos[i, j], sin[i, j]
                out[h, i, j] = (a * c - b * s) * sc[j if per_dim else 0]
                out[h, i, j + half] = (a * s + b * c) * sc[j + half if per_dim else 0]


def rope_scaled(x, cos, sin, scale):  # [m, h, d], [m, d/2] x 2, [1 or h, m, 1 or d] -> [h, m, d]
    """:func:`apply_rope` of ``x`` read as ``[m, heads, d]`` (a projection's rows), times ``scale``, as ``[heads, m, d]``.

    The same float32 operations in the same order (the bits of ``apply_rope(x.transpose(1, 0, 2), cos, sin) * scale``),
    one numba pass (:func:`_rope_rows`) over rows split among the attention threads.
    """
    m, heads, d = x.shape
    out = np.empty((heads, m, d), dtype=np.float32)
    scale = np.asarray(scale, dtype=np.float32)
    split_rows(lambda r0, r1: _rope_rows(x, cos, sin, scale, out, r0, r1), m)
    return out


def rope_tables(inv_freq, positions):  # [d/2], [n] -> [n, d/2] x 2
    """Cosines and sines (float32) of the RoPE angles ``position x inv_freq``, computed in float64."""
    ang = np.outer(positions.astype(np.float64), inv_freq)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def silu(x, *, out=None, scratch=None):
    """SiLU, ``x sigmoid(x) = x / (1 + exp(-x))``, in float32 (``exp(-x)`` overflowing to infinity gives ``-0``, no warning).

    ``out`` (may be ``x``) and ``scratch``: float32 arrays of ``x``'s shape to work in, fresh where ``None``.
    """
    t = np.negative(x, out=scratch)
    with np.errstate(over="ignore"):
        np.exp(t, out=t)
    np.add(np.float32(1.0), t, out=t)
    return np.divide(x, t, out=out)


def feed_forward(h, gate, up, down, work=None):  # [m, D], [F, D], [F, D], [D, F] -> [m, D]
    """The gated feed-forward network ``(silu(h gate^T) * (h up^T)) down^T`` in float32.

    Each attention thread takes a share of the rows and runs the whole network on up to
    :data:`_FFN_CHUNK` of them at a time (the three products through BLAS on one thread, the gate a
    few rows at a time in between), so a chunk's ``[chunk, F]`` intermediates are still in cache for
    the next step; shares and chunks as :func:`~.attention.matmul_rows` cuts them, so the bits are
    those of whole products.  ``work``: a dict that keeps each thread's
    intermediates and the ``[m, D]`` result between calls (one forward's layers), so each layer writes
    into memory already faulted in instead of fresh pages (:func:`scratch`); the result is then that
    buffer, overwritten by the next call.
    """
    m, F = h.shape[0], gate.shape[0]
    if work is None:
        work = {}
    out = scratch(work, "ffn_out", (m, down.shape[0]))
    chunk = min(m, _FFN_CHUNK)

    def rows(r0, r1):  # each share of split_rows its own intermediates, the same share in every layer
        g, u, t = scratch(work, f"ffn{r0}", (3, chunk, F))
        for a, b in chunks(r0, r1, chunk):
            k = b - a
            np.matmul(h[a:b], gate.T, out=g[:k])
            np.matmul(h[a:b], up.T, out=u[:k])
            for i in range(0, k, _FFN_ROWS):  # a few rows at a time, so that the five passes stay in cache
                j = min(k, i + _FFN_ROWS)
                silu(g[i:j], out=g[i:j], scratch=t[i:j])
                np.multiply(g[i:j], u[i:j], out=g[i:j])
            np.matmul(g[:k], down.T, out=out[a:b])

    with blas_on_one_thread():
        split_rows(rows, m, MIN_SPLIT_ROWS)
    return out


def scratch(work, key, shape):
    """The float32 array ``work[key]`` of ``shape``, made (uninitialised) where missing or of another shape.

    A forward's layers share one ``work`` dict: each writes its intermediates into the arrays the
    layer before it faulted in (a fresh array of megabytes costs a page fault per 4 kB on first touch).
    """
    a = work.get(key)
    if a is None or a.shape != shape:
        a = work[key] = np.empty(shape, dtype=np.float32)
    return a


#: Rows of the feed-forward's elementwise step at a time (``3 x 16 x F`` floats, in a core's cache).
_FFN_ROWS = 16
#: Rows of the feed-forward network a thread runs at a time: BLAS near its full rate on each product.
_FFN_CHUNK = 512


_ONE = np.ones((1, 1, 1), dtype=np.float32)


class LayerOut(NamedTuple):
    """What :func:`block` hands back besides ``x``: the layer's queries, keys and values, and its attention statistics."""

    q: np.ndarray  # [H, m, d] scaled and rotated
    k: np.ndarray  # [G, past + m, d] rotated, the past's first
    v: np.ndarray  # [G, past + m, d]
    stats: tuple  # (entropy, sigma, sink), each [H, m] float64; () when not gathered


#: A layer's tensors every architecture has, in :func:`block`'s parameter names (``blk.{i}.{name}.weight``).
LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
#: :func:`block`'s optional parameters -> the GGUF tensor of each (``blk.{i}.`` + it).
LAYER_EXTRAS = {"q_bias": "attn_q.bias", "k_bias": "attn_k.bias", "v_bias": "attn_v.bias",
                "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight"}


def layer_weights(weights: dict, layer: int) -> dict:
    """The GGUF tensors of one layer under :func:`block`'s parameter names (the extras the file holds among them)."""
    p = f"blk.{layer}."
    out = {k: weights[p + k + ".weight"] for k in LAYER_TENSORS}
    out.update({k: weights[p + t] for k, t in LAYER_EXTRAS.items() if p + t in weights})
    return out


def block(x, attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down, *,  # [m, D] -> [m, D]
          config, cos, sin, qscale, past=None, query_block=256, stats=True, rerope=None,
          kernel="numpy", work=None, q_bias=None, k_bias=None, v_bias=None, q_norm=None, k_norm=None, rope=True):
    """One LLaMA layer over ``m`` new positions, after ``past = (keys, values)`` of the earlier ones.

    ``q_bias, k_bias, v_bias`` (Qwen 2) are added to the projections; ``q_norm, k_norm``
    ``[d]`` (Qwen 3) are RMSNorm weights applied to each head's query and key before RoPE;
    ``rope=False`` (a NoPE layer) leaves q and k unrotated.

    ``cos, sin`` ``[m, d/2]`` are the RoPE tables of the new positions, ``qscale`` ``[1, m, 1]``
    the factor ``scale / sqrt(d)`` of each query (``[H, m, 1]``: one per head); attention runs in blocks of ``query_block`` rows
    with the implementation ``kernel`` (:data:`softmax_scale.models.attention.KERNELS`).
    ``rerope = (window, cos_w, sin_w)`` (``[1, d/2]`` tables of the angle at ``window``): Su's
    ReRoPE, keys beyond the window seen at relative position ``window`` (a whole pass, no ``past``).
    ``work``: scratch kept between the layers of one pass (:func:`scratch`); the input ``x`` is left as it was.
    Returns the new ``x`` and a :class:`LayerOut`.
    """
    c = config
    m = x.shape[0]
    H, G, d = c.n_heads, c.n_kv_heads, c.head_dim
    if work is None:
        work = {}
    h = rms_norm(x, attn_norm, c.rms_eps, out=scratch(work, "h", x.shape))  # [m, D]
    q, k, v = matmul_rows(h, attn_q.T), matmul_rows(h, attn_k.T), matmul_rows(h, attn_v.T)
    for a, bias in ((q, q_bias), (k, k_bias), (v, v_bias)):
        if bias is not None:
            a += bias
    q, k = q.reshape(m, H, d), k.reshape(m, G, d)  # [m, H, d], [m, G, d]
    v = v.reshape(m, G, d).transpose(1, 0, 2)  # [G, m, d]
    if q_norm is not None:
        q = rms_norm(q, q_norm, c.rms_eps)
    if k_norm is not None:
        k = rms_norm(k, k_norm, c.rms_eps)
    if not rope:
        cos, sin = np.ones_like(cos), np.zeros_like(sin)
    far = None
    if rerope is not None:
        cw, sw = (np.broadcast_to(t, cos.shape) for t in rerope[1:])
        far = (rope_scaled(q, cw, sw, qscale), np.ascontiguousarray(k.transpose(1, 0, 2)), rerope[0])
    q = rope_scaled(q, cos, sin, qscale)  # [H, m, d]
    k = rope_scaled(k, cos, sin, np.broadcast_to(_ONE, (1, m, 1)))  # [G, m, d]
    start = 0 if past is None else past[0].shape[1]
    if start:
        k = np.concatenate([past[0], k], axis=1)  # [G, n, d]
        v = np.concatenate([past[1], v], axis=1)
    else:
        v = np.ascontiguousarray(v)
    a, st = attention(q, k, v, start, query_block=query_block, stats=stats, far=far, kernel=kernel)
    x = x + matmul_rows(a, attn_output.T, out=scratch(work, "o", x.shape))
    h = rms_norm(x, ffn_norm, c.rms_eps, out=scratch(work, "h", x.shape))
    x += feed_forward(h, ffn_gate, ffn_up, ffn_down, work)
    return x, LayerOut(q, k, v, st if stats else ())

"""The read-out of :func:`~softmax_scale.models.readout.read_out` on a JAX device (``backend="jax"``).

The same pass as :class:`~softmax_scale.models.llama.LlamaDecoder`'s numpy one, written again over
``jax.numpy`` and compiled once per shape: the layers are one ``lax.scan`` over the weights stacked
per layer (moved to the device once per decoder, :func:`device_weights`), attention runs in blocks
of ``query_block`` queries (``lax.map``) in :data:`CAUSAL_CHUNKS` runs, each over the keys its
last query sees, so its largest temporary is ``heads x query_block x n`` floats, and the greedy
token and loss are taken in blocks of rows of the vocabulary product.
Activations are float32 and every matrix product runs at float32 precision
(``Precision.HIGHEST``: no TF32 on a GPU); the RoPE tables (angles in float64) and each query's
scale are computed on the host as the numpy pass computes them.  The two agree to float32
rounding, not bit for bit (``tests/models/test_readout_jax.py`` states the tolerance).

JAX is imported on first use, through :mod:`softmax_scale._util.jax_backend` (the ``train`` extra; on
an NVIDIA GPU the user installs ``jax[cuda]`` and runs with ``JAX_PLATFORMS=cuda``).
"""

from __future__ import annotations

import weakref
from functools import partial

import numpy as np

from .layer import LAYER_TENSORS, layer_weights, rope_tables
from .llama import KVCache, pass_inputs

__all__ = ["device_weights", "forward_jax"]

#: The per-layer tensors, in :func:`~softmax_scale.models.layer.block`'s names: every architecture's,
#: then the biases (zeros where the file has none) and Qwen 3's q/k norm (ones where absent, then not applied).
LAYER = LAYER_TENSORS + ("q_bias", "k_bias", "v_bias", "q_norm", "k_norm")
#: Rows of the vocabulary product per block.
HEAD_ROWS = 512
#: Runs of query blocks with a key length of their own (the keys the run's last query sees), so
#: that a causal pass skips most of the masked keys.
CAUSAL_CHUNKS = 16

_DEVICE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMPILED: dict = {}


def device_weights(model) -> dict:
    """``model``'s weights on the default JAX device: :data:`LAYER` stacked ``[layers, ...]``, and ``embed``, ``norm``, ``out``.

    Moved once per decoder (kept while it lives, and while its ``weights`` dict is the same object).
    """
    from .._util.jax_backend import jax

    held = _DEVICE.get(model)
    if held is not None and held[0] is model.weights:
        return held[1]
    w, c = model.weights, model.config
    per = [layer_weights(w, i) for i in range(c.n_layers)]
    q, kv, d = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim, c.head_dim
    absent = {"q_bias": np.zeros(q, np.float32), "k_bias": np.zeros(kv, np.float32), "v_bias": np.zeros(kv, np.float32),
              "q_norm": np.ones(d, np.float32), "k_norm": np.ones(d, np.float32)}
    dev = {k: jax.device_put(np.stack([p.get(k, absent.get(k)) for p in per])) for k in LAYER}
    dev["rope"] = jax.device_put(np.array([i not in c.nope_layers for i in range(c.n_layers)]))
    dev.update(embed=jax.device_put(w["token_embd.weight"]), norm=jax.device_put(w["output_norm.weight"]),
               out=jax.device_put(w["output.weight"]))
    _DEVICE[model] = (w, dev)
    return dev


def _functions():
    """The compiled pass and head (built once; ``jax.jit`` compiles each per shape)."""
    if _COMPILED:
        return _COMPILED["pass"], _COMPILED["head"]
    from .._util.jax_backend import jax, jnp

    lax = jax.lax
    hi = lax.Precision.HIGHEST

    def mm(a, b):  # [m, i] @ [o, i].T -> [m, o]
        return jnp.einsum("mi,oi->mo", a, b, precision=hi)

    def rms(x, w, eps):  # [m, D] -> [m, D]
        ms = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
        return (x / jnp.sqrt(ms + eps)) * w

    def rope(x, cos, sin):  # [h, m, d], [m, d/2] x 2 -> [h, m, d]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)

    def attention(q, k, v, start, block):  # [H, m, d], [G, n, d] x 2 -> [m, H*d]
        H, m, d = q.shape
        G, n, _ = k.shape
        rep = H // G
        nb = -(-m // block)
        qb = jnp.pad(q, ((0, 0), (0, nb * block - m), (0, 0))).reshape(G, rep, nb, block, d).transpose(2, 0, 1, 3, 4)

        def blocks(b0, b1):  # blocks b0 .. b1-1 over the keys the last of them sees: [b1-b0, G, rep, B, d]
            kn = min(n, start + b1 * block)
            kk, vv, keys = k[:, :kn], v[:, :kn], jnp.arange(kn)

            def one(args):  # one block of queries: [G, rep, B, d] -> [G, rep, B, d]
                qq, b = args
                s = jnp.einsum("grbd,gnd->grbn", qq, kk, precision=hi)
                at = start + b * block + jnp.arange(block)
                s = jnp.where(keys[None, :] <= at[:, None], s, -jnp.inf)
                e = jnp.exp(s - s.max(axis=-1, keepdims=True))
                return jnp.einsum("grbn,gnd->grbd", e, vv, precision=hi) / e.sum(axis=-1, keepdims=True)

            return lax.map(one, (qb[b0:b1], jnp.arange(b0, b1)))

        cuts = sorted({round(nb * i / CAUSAL_CHUNKS) for i in range(CAUSAL_CHUNKS + 1)})
        o = jnp.concatenate([blocks(a, b) for a, b in zip(cuts[:-1], cuts[1:])])  # [nb, G, rep, B, d]
        return o.transpose(0, 3, 1, 2, 4).reshape(nb * block, H * d)[:m]

    @partial(jax.jit, static_argnames=("heads", "eps", "block", "qk_norm"))
    def forward(w, tokens, cos, sin, qscale, past_k, past_v, keep, rows, *, heads, eps, block, qk_norm):
        """Positions ``start .. start+m-1`` (``start`` = ``past_k.shape[2]``) through every layer.

        ``tokens`` [m]; ``cos, sin`` [m, d/2]; ``qscale`` [layers, H, m]; ``past_k, past_v``
        [layers, G, start, d]; ``keep`` [P] and ``rows`` [S] offsets from ``start``; ``qk_norm``
        whether the file has Qwen 3's q/k norm.  Returns the
        final-normed states at ``rows`` [S, D], the queries at ``keep`` [layers, H, P, d] and the
        keys and values [layers, G, start+m, d].
        """
        m = tokens.shape[0]
        G, d = past_k.shape[1], past_k.shape[3]
        start = past_k.shape[2]

        def layer(x, args):
            p, pk, pv, qs, rotate = args
            h = rms(x, p["attn_norm"], eps)
            q = (mm(h, p["attn_q"]) + p["q_bias"]).reshape(m, heads, d).transpose(1, 0, 2)  # [H, m, d]
            k = (mm(h, p["attn_k"]) + p["k_bias"]).reshape(m, G, d).transpose(1, 0, 2)  # [G, m, d]
            v = (mm(h, p["attn_v"]) + p["v_bias"]).reshape(m, G, d).transpose(1, 0, 2)
            if qk_norm:
                q, k = rms(q, p["q_norm"], eps), rms(k, p["k_norm"], eps)
            q = jnp.where(rotate, rope(q, cos, sin), q) * qs[:, :, None]
            k = jnp.concatenate([pk, jnp.where(rotate, rope(k, cos, sin), k)], axis=1)  # [G, n, d]
            v = jnp.concatenate([pv, v], axis=1)
            x = x + mm(attention(q, k, v, start, block), p["attn_output"])
            h = rms(x, p["ffn_norm"], eps)
            g = mm(h, p["ffn_gate"])
            x = x + mm((g / (1.0 + jnp.exp(-g))) * mm(h, p["ffn_up"]), p["ffn_down"])
            return x, (q[:, keep], k, v)

        x = w["embed"][tokens]  # [m, D]
        x, (qk, ks, vs) = lax.scan(layer, x, ({k: w[k] for k in LAYER}, past_k, past_v, qscale, w["rope"]))
        return rms(x[rows], w["norm"], eps), qk, ks, vs

    @jax.jit
    def head(x, out, targets):
        """Greedy token and ``-log p(target)`` of each row of ``x`` [S, D], in blocks of :data:`HEAD_ROWS` rows."""
        S = x.shape[0]
        nb = -(-S // HEAD_ROWS)
        pad = nb * HEAD_ROWS - S
        xb = jnp.pad(x, ((0, pad), (0, 0))).reshape(nb, HEAD_ROWS, -1)
        tb = jnp.pad(targets, (0, pad)).reshape(nb, HEAD_ROWS)

        def one(args):
            xx, tt = args
            lg = mm(xx, out)  # [rows, V]
            top = lg.max(axis=1)
            picked = jnp.take_along_axis(lg, tt[:, None], axis=1)[:, 0]
            z = jnp.exp(lg - top[:, None]).sum(axis=1)
            return jnp.argmax(lg, axis=1), jnp.log(z) + (top - picked)

        am, nll = lax.map(one, (xb, tb))
        return am.reshape(-1)[:S], nll.reshape(-1)[:S]

    _COMPILED.update({"pass": forward, "head": head})
    return forward, head


def forward_jax(model, ids, pos, keep, *, start, stop, cache, factors, inv_freq, query_block):
    """The pass of :func:`~softmax_scale.models.readout.read_out` on the JAX device, its inputs already checked there.

    Returns ``(argmax, nll, queries, cache)`` as numpy arrays: int64 and float64 ``[len(pos)]``,
    per layer ``[H, len(keep), d]`` float32, and a :class:`~softmax_scale.models.llama.KVCache`
    of positions ``0 .. stop-1``.
    """
    from .._util.jax_backend import jax

    c = model.config
    n, m = stop, stop - start
    cache, inv_freq, qs = pass_inputs(c, len(ids), start, n, cache, factors, inv_freq)  # as the numpy pass has them
    qs = np.ascontiguousarray(np.broadcast_to(qs, (c.n_layers, c.n_heads, m)))
    cos, sin = rope_tables(inv_freq, np.arange(start, n))
    if start:
        past_k, past_v = np.stack(cache.keys), np.stack(cache.values)
    else:
        past_k = past_v = np.zeros((c.n_layers, c.n_kv_heads, 0, c.head_dim), dtype=np.float32)
    forward, head = _functions()
    w = device_weights(model)
    block = max(1, min(int(query_block), m))
    x, qk, ks, vs = forward(w, ids[start:n].astype(np.int32), cos, sin, qs, past_k, past_v,
                           (keep - start).astype(np.int32), (pos - start).astype(np.int32), heads=c.n_heads,
                           eps=np.float32(c.rms_eps), block=block, qk_norm="blk.0.attn_q_norm.weight" in model.weights)
    if pos.size:
        am, nll = head(x, w["out"], ids[pos + 1].astype(np.int32))
        argmax, nll = np.asarray(am).astype(np.int64), np.asarray(nll).astype(np.float64)
    else:
        argmax, nll = np.empty(0, dtype=np.int64), np.empty(0)
    qk, ks, vs = (np.asarray(jax.device_get(a)) for a in (qk, ks, vs))
    return argmax, nll, tuple(qk), KVCache(tuple(ks), tuple(vs))

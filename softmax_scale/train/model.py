"""A small RoPE transformer on bytes, as pure JAX functions over a dict of parameters.

Read top to bottom (after picoGPT; shapes on every signature): :func:`rms_norm`, :func:`rotate`,
:func:`matmul`, :func:`attention`, :func:`ffn`, :func:`block`, :func:`forward`.  Pre-RMSNorm blocks, RoPE on
queries and keys (pairs ``(i, i + d/2)``, the rotate-half layout), ReLU feed-forward, no biases,
the output layer tied to the embedding.

The softmax scale enters as ``factors``, one float per query, on ``q.k / sqrt(d_head)``: a
function of the number of keys the query sees, computed by :mod:`softmax_scale.train.scales`
from the scheme registry and passed in, like the RoPE tables (``cos``, ``sin``), so a new scale or
RoPE variant needs no change here.  A model trained with SSMax also has a learned ``s`` per head
(``params["layers"][i]["s"]``) that multiplies its factors.

Initialisation (:func:`init_params`, numpy, seeded): queries and keys have unit-variance entries
after the RMSNorm (weights ``N(0, 1/d_model)``), so ``q.k/sqrt(d_head)`` has unit variance at
initialisation and a factor ``alpha`` is the softmax scale on unit-variance scores.

Every matrix product goes through :func:`matmul` with the configuration's ``compute_dtype``:
``"float32"`` is plain float32; ``"bfloat16"`` rounds the two inputs (and, in the backward pass,
the incoming gradient) to bfloat16 and accumulates in float32, the standard mixed-precision
recipe.  Everything else (parameters, RoPE, softmax, norms, the loss) is float32 in both.
"""

from __future__ import annotations

import math

import numpy as np

from .._util.jax_backend import jax, jnp
from .._util.rng import seed_sequence
from .._util.validation import check_choice
from .config import TrainConfig
from .data import VOCAB

__all__ = ["attention", "block", "ffn", "forward", "init_params", "loss_and_accuracy", "matmul", "rms_norm",
           "rope_tables", "rotate"]

_EPS = 1e-6


def rms_norm(x, g):  # [..., D], [D] -> [..., D]
    """RMSNorm over the last axis with gain ``g``."""
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + _EPS) * g


def rotate(x, cos, sin):  # [B, H, T, dh], [T, dh/2], [T, dh/2] -> [B, H, T, dh]
    """RoPE: rotate each pair ``(x_i, x_{i + dh/2})`` at position ``t`` by the angle whose cosine and sine are given."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def _dot32(a, b):  # bfloat16 inputs, float32 accumulation and result
    return jnp.matmul(a, b, preferred_element_type=jnp.float32)


@jax.custom_vjp
def _matmul_bf16(a, b):
    return _dot32(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))


def _matmul_bf16_fwd(a, b):
    a16, b16 = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    return _dot32(a16, b16), (a16, b16)


def _matmul_bf16_bwd(res, g):
    a16, b16 = res
    g16 = g.astype(jnp.bfloat16)
    da = _dot32(g16, jnp.swapaxes(b16, -1, -2))
    if b16.ndim == 2:  # a weight: its gradient sums over every leading axis of a
        db = _dot32(a16.reshape(-1, a16.shape[-1]).T, g16.reshape(-1, g16.shape[-1]))
    else:
        db = _dot32(jnp.swapaxes(a16, -1, -2), g16)
    return da, db


_matmul_bf16.defvjp(_matmul_bf16_fwd, _matmul_bf16_bwd)


def matmul(a, b, compute_dtype="float32"):  # [..., m, k] @ [k, n] or [..., k, n] -> [..., m, n]
    """``a @ b`` of float32 arrays, the inputs in ``compute_dtype``, accumulated and returned in float32.

    ``"float32"``: ``a @ b``.  ``"bfloat16"``: both inputs rounded to bfloat16, the product
    accumulated in float32; its gradients are the same kind of product (the incoming gradient
    rounded to bfloat16), returned in float32.  ``b`` is a matrix or has the batch axes of ``a``.
    """
    check_choice(compute_dtype, "compute_dtype", TrainConfig.COMPUTE_DTYPES)
    if compute_dtype == "float32":
        return a @ b
    return _matmul_bf16(a, b)


def attention(x, wq, wk, wv, wo, *, cos, sin, factors, s=None, heads, causal, window=None, rerope=None,
              compute_dtype="float32"):  # [B, T, D] -> [B, T, D], [B, H, T, T]
    """Multi-head self-attention; returns the output and the pre-softmax scores (scale applied, before the mask).

    ``factors`` is ``[T]`` (one factor per query, every head) or ``[H, T]`` (per head and query).
    ``window``: each query sees only the ``window`` keys up to itself (the sliding-window
    baseline; causal only).  ``rerope``: ReRoPE's window ``w`` (Su, kexue.fm 9708): keys at
    ``|i - j| >= w`` are scored with ``q`` rotated at position ``w`` and ``k`` not rotated, the
    two score matrices joined by :func:`softmax_scale.schemes.rope.rerope_near`, so every pair within
    the window keeps the trained RoPE score bit for bit.  ``compute_dtype``: see :func:`matmul`
    (the scores are float32 either way).
    """
    b, t, d = x.shape
    dh = d // heads

    def split(w):  # [B, T, D] @ [D, D] -> [B, H, T, dh]
        return matmul(x, w, compute_dtype).reshape(b, t, heads, dh).transpose(0, 2, 1, 3)

    qh, kh, v = split(wq), split(wk), split(wv)
    q, k = rotate(qh, cos, sin), rotate(kh, cos, sin)
    scale = factors[..., None] * jnp.float32(1.0 / math.sqrt(dh))  # [T, 1] or [H, T, 1]: one factor per query
    if s is not None:
        scale = scale * s[:, None, None]  # [H, T, 1]
    scores = matmul(q, k.transpose(0, 1, 3, 2), compute_dtype) * scale  # [B, H, T, T]
    pos = np.arange(t)
    if rerope is not None and t > rerope:
        from ..schemes.rope import rerope_near

        far = matmul(rotate(qh, cos[rerope], sin[rerope]), kh.transpose(0, 1, 3, 2), compute_dtype) * scale  # at w
        scores = jnp.where(rerope_near(pos, pos, rerope), scores, far)
    if causal:
        allowed = np.tril(np.ones((t, t), dtype=bool)) if window is None else \
            (pos[:, None] >= pos[None, :]) & (pos[:, None] - pos[None, :] < window)
        masked = jnp.where(allowed, scores, -jnp.inf)
    else:
        masked = scores
    p = jax.nn.softmax(masked, axis=-1)
    out = matmul(p, v, compute_dtype).transpose(0, 2, 1, 3).reshape(b, t, d)
    return matmul(out, wo, compute_dtype), scores


def ffn(x, w1, w2, w3=None, compute_dtype="float32"):  # [B, T, D] -> [B, T, D]
    """ReLU feed-forward, or LLaMA's SwiGLU ``(silu(x w1) * x w3) w2`` when the layer has ``w3``.

    ReLU by default for speed: on XLA's CPU backend the backward pass of any transcendental
    activation (GELU, SiLU) costs as much as the layer's matrix products (measured: a block's step
    53 ms with GELU, 32 ms with ReLU, at the experiments' size); the scale question does not
    depend on the activation.  SwiGLU (``TrainConfig(ffn="swiglu")``) makes a model the numpy
    LLaMA decoder can run (:func:`softmax_scale.train.export.export_gguf`).  ``compute_dtype``:
    see :func:`matmul`.
    """
    def mm(a, w):
        return matmul(a, w, compute_dtype)

    if w3 is None:
        return mm(jax.nn.relu(mm(x, w1)), w2)
    return mm(jax.nn.silu(mm(x, w1)) * mm(x, w3), w2)


def block(x, layer, *, cos, sin, factors, heads, causal, window=None, rerope=None,
          compute_dtype="float32"):  # [B, T, D] -> [B, T, D], [B, H, T, T]
    """One pre-norm block: ``x + attention(norm(x))``, then ``x + ffn(norm(x))``."""
    a, scores = attention(rms_norm(x, layer["norm1"]), layer["wq"], layer["wk"], layer["wv"], layer["wo"], cos=cos,
                          sin=sin, factors=factors, s=layer.get("s"), heads=heads, causal=causal, window=window,
                          rerope=rerope, compute_dtype=compute_dtype)
    x = x + a
    return x + ffn(rms_norm(x, layer["norm2"]), layer["w1"], layer["w2"], layer.get("w3"), compute_dtype), scores


def forward(params, ids, *, cos, sin, factors, heads, causal, window=None, rerope=None, return_scores=False,
            compute_dtype="float32"):  # [B, T] -> [B, T, V]
    """Logits over the vocabulary at every position (and each layer's scores ``[L, B, H, T, T]`` if asked).

    ``factors``: ``[T]`` for every layer and head, or ``[layers, H, T]`` per head (a test-time
    per-head scale).  ``window`` and ``rerope`` (static ints or None): see :func:`attention`;
    ``compute_dtype``: see :func:`matmul`.
    """
    emb = params["embed"]
    x = emb[ids] * jnp.float32(math.sqrt(emb.shape[1]))
    all_scores = []
    for i, layer in enumerate(params["layers"]):
        f = factors if factors.ndim == 1 else factors[i]
        x, scores = block(x, layer, cos=cos, sin=sin, factors=f, heads=heads, causal=causal, window=window,
                          rerope=rerope, compute_dtype=compute_dtype)
        if return_scores:
            all_scores.append(scores)
    logits = matmul(rms_norm(x, params["norm"]), emb.T, compute_dtype)
    return (logits, jnp.stack(all_scores)) if return_scores else logits


def loss_and_accuracy(params, inputs, targets, weights, *, cos, sin, factors, heads, causal,
                      compute_dtype="float32"):  # -> (), ()
    """Mean cross-entropy (nats) and accuracy of the arg-max over the predicted positions (``weights``)."""
    logits = forward(params, inputs, cos=cos, sin=sin, factors=factors, heads=heads, causal=causal,
                     compute_dtype=compute_dtype)
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    total = jnp.sum(weights)
    correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
    return jnp.sum(nll * weights) / total, jnp.sum(correct * weights) / total


def rope_tables(config, length: int, rope: str | None = None, *,
                rope_length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``cos`` and ``sin`` of the RoPE angles ``t theta_i`` for positions ``0..length-1`` (float64 angles, float32 out).

    The frequencies come from :func:`softmax_scale.schemes.rope.rope_frequencies` with the config's
    variant (or ``rope``), pinned at its training length, for a sequence of ``rope_length``
    (default ``length``) bytes.
    """
    from ..schemes.rope import rope_frequencies

    theta = rope_frequencies(config.rope if rope is None else rope, config.d_head, config.rope_base,
                             config.train_length, length if rope_length is None else rope_length)
    angles = np.arange(length, dtype=np.float64)[:, None] * theta[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def init_params(config, rng=None) -> dict:
    """Initial parameters (numpy float32), seeded by ``rng`` (SciPy SPEC 7).

    Embedding ``N(0, 1/D)`` (scaled by ``sqrt(D)`` on input, so the residual stream starts at unit
    RMS; the output layer is its transpose); ``wq, wk, wv, w1`` (and SwiGLU's ``w3``): ``N(0, 1/fan_in)``; ``wo, w2``:
    ``N(0, 1/fan_in) / (2 layers)`` (GPT-2's residual scaling); RMSNorm gains 1; SSMax's ``s``
    at :func:`~softmax_scale.train.scales.ssmax_init`.
    """
    from .scales import learned_init, learned_parameter

    gen = np.random.default_rng(seed_sequence(rng))
    D, F, L = config.d_model, config.d_ff, config.layers

    def normal(shape, std):
        return (gen.standard_normal(shape) * std).astype(np.float32)

    layers = []
    for _ in range(L):
        layer = {
            "norm1": np.ones(D, np.float32), "wq": normal((D, D), D ** -0.5), "wk": normal((D, D), D ** -0.5),
            "wv": normal((D, D), D ** -0.5), "wo": normal((D, D), D ** -0.5 / math.sqrt(2 * L)),
            "norm2": np.ones(D, np.float32), "w1": normal((D, F), D ** -0.5), "w2": normal((F, D), F ** -0.5 / math.sqrt(2 * L)),
        }
        if learned_parameter(config.scheme) is not None:
            layer["s"] = np.full(config.heads, learned_init(config.scheme, config.pin), np.float32)
        if config.ffn == "swiglu":  # drawn last: a ReLU model's draws are unchanged
            layer["w3"] = normal((D, F), D ** -0.5)
        layers.append(layer)
    return {"embed": normal((VOCAB, D), D ** -0.5), "layers": layers, "norm": np.ones(D, np.float32)}

"""FIRST's transformer (Chiang & Cholak, arXiv 2202.12172; their code ``ndnlp/parity``, ``first.py``) and its training.

The construction of their code: the input is ``$`` then ``n`` bits
(:func:`softmax_scale.train.tasks.first_batch`); a token embedding plus a fixed mark, 1 on the
first coordinate of the first bit's position and no other position information; ``layers``
Post-LN encoder layers, ``x = LN(x + attention(x))`` then ``x = LN(x + ffn(x))`` (LayerNorm with
gain, shift and ``eps``), bidirectional; the answer is one logit read at the ``$`` position
through a linear layer, trained one sequence per step with Adam at ``3e-4`` on
``-log sigmoid(+-logit)``.  Initialisation as PyTorch's defaults for their layers, and the
layers equal at initialisation (``torch.nn.TransformerEncoder`` copies its one layer).

The attention and the feed-forward are :func:`softmax_scale.train.model.attention` and
:func:`~softmax_scale.train.model.ffn`, which have no input biases; the output bias of each is
added here as in theirs.  Of the input biases only the query's changes the softmax, and after the
first layer LayerNorm's shift gives every projection one.

The scale is one factor per query on ``q.k / sqrt(d_head)``, from
:func:`softmax_scale.train.scales.model_factors` (:data:`FIRST_SCALES`).  Their ``log n``
multiplies the query input by ``ln(len(src))``, the sequence length with ``$`` (``n + 1``): with
no query bias that is the factor ``ln(n + 1)`` on ``q.k``, the registry's ``chiang_cholak``.
The pinned scales are pinned at the keys a query sees in training, ``L + 1``
(:attr:`FirstModel.pin`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .._util.jax_backend import jax, jnp, optax
from .._util.rng import seed_sequence
from .._util.validation import check_choice, check_int, check_positive_float
from ..schemes import ENTROPY_INVARIANT
from .model import attention, ffn
from .scales import FIRST_SCALES, learned_init, learned_parameter, model_factors
from .tasks import FIRST_VOCAB, first_batch

__all__ = ["FIRST_SCALES", "FirstModel", "FirstResult", "first_factors", "first_forward", "first_logits",
           "init_first", "layer_norm", "train_first"]



@dataclass(frozen=True)
class FirstModel:
    """FIRST's model and its training (the defaults are their code's).

    Attributes
    ----------
    train_length : int
        Bits after ``$`` in training (``L``).
    scheme : str
        The trained scale, one of :data:`FIRST_SCALES`.
    layers, heads, d_model, d_ff : int
        Encoder layers, heads, width, feed-forward width (2, 1, 16, 64).
    steps : int
        Training steps, one sequence each (their 100 epochs of 100 steps).
    lr : float
        Adam's learning rate.
    eps : float
        LayerNorm's ``eps``.
    """

    train_length: int
    scheme: str = "standard"
    layers: int = 2
    heads: int = 1
    d_model: int = 16
    d_ff: int = 64
    steps: int = 10_000
    lr: float = 3e-4
    eps: float = 1e-5
    #: Read by :func:`~softmax_scale.train.scales.model_factors`: no constant ``alpha``.
    alpha: None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        check_int(self.train_length, "train_length", minimum=1)
        check_choice(self.scheme, "scheme", FIRST_SCALES)
        for name in ("layers", "heads", "d_model", "d_ff", "steps"):
            check_int(getattr(self, name), name, minimum=1)
        if self.d_model % self.heads or (self.d_model // self.heads) % 2:
            raise ValueError(f"`d_model` must be an even multiple of `heads` ({self.heads}), got {self.d_model}")
        check_positive_float(self.lr, "lr")
        check_positive_float(self.eps, "eps")

    @property
    def d_head(self) -> int:
        """Dimension of one head."""
        return self.d_model // self.heads

    @property
    def causal(self) -> bool:
        """FIRST's encoder is bidirectional."""
        return False

    @property
    def pin(self) -> int:
        """The keys a query sees in training, ``L + 1``: the pinned scales are 1 there."""
        return self.train_length + 1

    def label(self) -> str:
        """The trained scale's name in result files: ``standard``, ``chiang_cholak``, ``entropy_invariant@11``, ``ssmax``."""
        return f"{self.scheme}@{self.pin}" if self.scheme == ENTROPY_INVARIANT else self.scheme

    def describe(self) -> dict:
        """Every field, as plain values (the scale included)."""
        return {"train_length": self.train_length, "scheme": self.scheme, "layers": self.layers, "heads": self.heads,
                "d_model": self.d_model, "d_ff": self.d_ff, "steps": self.steps, "lr": self.lr, "eps": self.eps}

    @property
    def n_params(self) -> int:
        """Trained parameters."""
        D, F = self.d_model, self.d_ff
        per_layer = 4 * D * D + D + D * F + F * D + D + 4 * D + (self.heads if learned_parameter(self.scheme) else 0)
        return len(FIRST_VOCAB) * D + self.layers * per_layer + D + 1


def first_factors(model: FirstModel, n: int, *, scheme: str | None = None) -> np.ndarray:
    """The per-query factors (float32, ``[n + 1]``) of ``model`` on ``n`` bits: its trained scale, or ``scheme``.

    ``scheme`` is pinned at :attr:`FirstModel.pin`.  For ``ssmax`` the fixed part ``ln(n + 1)``
    (the model multiplies it by its learned ``s``).
    """
    n = check_int(n, "n", minimum=1)
    return model_factors(model, n + 1, scheme=scheme, pin_length=None if scheme is None else model.pin)


def layer_norm(x, g, b, eps):  # [..., D] -> [..., D]
    """LayerNorm over the last axis: ``(x - mean) / sqrt(var + eps) * g + b``."""
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def first_forward(params, inputs, factors, *, heads, eps, return_scores=False):  # [B, T] -> [B] (, [layers, B, H, T, T])
    """The logit of "the first bit is 1" for each sequence (and each layer's scores, scale applied).

    ``factors``: ``[T]`` for every layer and head, or ``[layers, H, T]`` per layer and head.
    """
    t = inputs.shape[1]
    half = params["layers"][0]["wq"].shape[0] // heads // 2
    cos, sin = jnp.ones((t, half), jnp.float32), jnp.zeros((t, half), jnp.float32)  # no rotation
    mark = jnp.zeros((t, params["embed"].shape[1]), jnp.float32).at[1, 0].set(1.0)
    x = params["embed"][inputs] + mark
    factors = jnp.asarray(factors, jnp.float32)
    all_scores = []
    for i, layer in enumerate(params["layers"]):
        f = factors if factors.ndim == 1 else factors[i]
        a, scores = attention(x, layer["wq"], layer["wk"], layer["wv"], layer["wo"], cos=cos, sin=sin, factors=f,
                              s=layer.get("s"), heads=heads, causal=False)
        x = layer_norm(x + a + layer["bo"], layer["g1"], layer["b1"], eps)
        x = layer_norm(x + ffn(x, layer["w1"], layer["w2"]) + layer["bf"], layer["g2"], layer["b2"], eps)
        all_scores.append(scores)
    logit = x[:, 0] @ params["w_out"] + params["b_out"]
    return (logit, jnp.stack(all_scores)) if return_scores else logit


def init_first(model: FirstModel, rng=None) -> dict:
    """Initial parameters (numpy float32) as PyTorch initialises their layers, seeded by ``rng``.

    Embedding ``N(0, 1)``; ``wq, wk, wv`` Xavier-uniform over the stacked ``[3D, D]`` projection;
    ``wo``, ``w1``, ``w2`` and the output layer ``U(+-1/sqrt(fan_in))``, the attention's output
    bias 0, the feed-forward's and the output layer's ``U(+-1/sqrt(fan_in))``; LayerNorm 1 and 0;
    every layer the same draw; SSMax's ``s`` at :func:`~softmax_scale.train.scales.ssmax_init`.
    """
    gen = np.random.default_rng(seed_sequence(rng))
    D, F = model.d_model, model.d_ff

    def uniform(shape, bound):
        return gen.uniform(-bound, bound, size=shape).astype(np.float32)

    embed = gen.standard_normal((len(FIRST_VOCAB), D)).astype(np.float32)
    xavier = math.sqrt(6.0 / (D + 3 * D))
    layer = {"wq": uniform((D, D), xavier), "wk": uniform((D, D), xavier), "wv": uniform((D, D), xavier),
             "wo": uniform((D, D), D ** -0.5), "bo": np.zeros(D, np.float32),
             "w1": uniform((D, F), D ** -0.5), "w2": uniform((F, D), F ** -0.5), "bf": uniform(D, F ** -0.5),
             "g1": np.ones(D, np.float32), "b1": np.zeros(D, np.float32),
             "g2": np.ones(D, np.float32), "b2": np.zeros(D, np.float32)}
    if learned_parameter(model.scheme) is not None:
        layer["s"] = np.full(model.heads, learned_init(model.scheme, model.pin), np.float32)
    return {"embed": embed, "layers": [{k: v.copy() for k, v in layer.items()} for _ in range(model.layers)],
            "w_out": uniform(D, D ** -0.5), "b_out": uniform((), D ** -0.5)}


@dataclass(frozen=True)
class FirstResult:
    """What :func:`train_first` returns.

    Attributes
    ----------
    model : FirstModel
    params : dict
        Final parameters (numpy float32).
    loss : ndarray
        Training loss per step (nats).
    correct : ndarray of bool
        Whether each step's sequence was answered right before its update.
    seconds : float
        Wall time of the training (compilation included).
    """

    model: FirstModel
    params: dict
    loss: np.ndarray
    correct: np.ndarray
    seconds: float


def _loss(params, inputs, labels, factors, heads, eps):
    z = first_forward(params, inputs, factors, heads=heads, eps=eps)
    signed = jnp.where(labels == 1, z, -z)
    return -jnp.mean(jax.nn.log_sigmoid(signed)), signed > 0


def train_first(model: FirstModel, rng=None, *, chunk: int = 500) -> FirstResult:
    """Train FIRST's model as their code does: ``steps`` sequences of ``L`` bits, one per Adam step.

    The seed fixes the initialisation and the data order through two independent children, so
    every scale trained with one seed starts from the same weights (``s`` aside) and sees the
    same sequences.  ``chunk`` steps run in one compiled scan.
    """
    chunk = check_int(chunk, "chunk", minimum=1)
    ss = seed_sequence(rng)
    init_ss, data_ss = (np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, i), pool_size=ss.pool_size)
                        for i in (0, 1))
    t0 = time.perf_counter()
    params = jax.tree_util.tree_map(jnp.asarray, init_first(model, init_ss))
    data = first_batch(model.train_length, model.steps, np.random.default_rng(data_ss))
    factors = jnp.asarray(first_factors(model, model.train_length))
    opt, run = _trainer(model.heads, model.eps, model.lr)
    losses, correct = [], []
    carry = (params, opt.init(params))
    for start in range(0, model.steps, chunk):
        stop = min(start + chunk, model.steps)
        carry, (loss, ok) = run(carry, (jnp.asarray(data.inputs[start:stop]), jnp.asarray(data.labels[start:stop])),
                                factors)
        losses.append(np.asarray(loss))
        correct.append(np.asarray(ok))
    out = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float32), carry[0])
    return FirstResult(model, out, np.concatenate(losses), np.concatenate(correct), time.perf_counter() - t0)


_TRAINERS: dict = {}


def _trainer(heads, eps, lr):
    """Adam and the compiled scan of its steps (one per model shape, reused across runs)."""
    key = (heads, eps, lr)
    if key not in _TRAINERS:
        opt = optax.adam(lr)

        def step(carry, xs, factors):
            p, s = carry
            inputs, label = xs
            (loss, ok), grads = jax.value_and_grad(_loss, has_aux=True)(p, inputs[None], label[None], factors, heads,
                                                                        eps)
            updates, s = opt.update(grads, s, p)
            return (optax.apply_updates(p, updates), s), (loss, ok[0])

        _TRAINERS[key] = (opt, jax.jit(lambda carry, xs, factors: jax.lax.scan(
            lambda c, x: step(c, x, factors), carry, xs)))
    return _TRAINERS[key]


def first_logits(params, model: FirstModel, inputs, factors=None, *, chunk: int = 32):
    """Logits ``[B]`` and the query ``$``'s scores in every layer ``[layers, B, H, T]`` on ``inputs`` ``[B, T]``.

    ``factors``: ``[T]`` or ``[layers, H, T]`` (default: the trained scale's).  The model has no
    position information past the mark on the first bit and attends both ways, so it is
    equivariant under any permutation of the bits after the first: a sequence's answer depends
    on its first bit and its count of ones only, and every later bit of one value has the same
    representation.  Each distinct (first bit, count) is run once, as ``$``, the first bit, the
    zeros, the ones (in chunks of ``chunk`` sequences), and the scores are put back in each
    sequence's order; the result is the forward on ``inputs`` up to the rounding of the sums.
    """
    inputs = np.asarray(inputs, dtype=np.int32)
    if inputs.ndim != 2 or inputs.shape[1] < 2:
        raise ValueError(f"`inputs` must be [count, n + 1] token ids with n >= 1, got shape {inputs.shape}")
    if np.any(inputs[:, 0] != FIRST_VOCAB.index("$")) or np.any((inputs[:, 1:] != 0) & (inputs[:, 1:] != 1)):
        raise ValueError("`inputs` must be FIRST sequences: `$` (2) then bits 0/1")
    n = inputs.shape[1] - 1
    f = first_factors(model, n) if factors is None else np.asarray(factors, np.float32)
    f = np.broadcast_to(f, (model.layers, model.heads, n + 1)) if f.ndim == 1 else f  # one compiled shape
    bits = inputs[:, 1:]
    ones = bits[:, 1:].sum(axis=1)
    pairs, back = np.unique(np.stack([bits[:, 0], ones], axis=1), axis=0, return_inverse=True)
    back = back.reshape(-1)
    canon = np.zeros((pairs.shape[0], n + 1), dtype=np.int32)
    canon[:, 0], canon[:, 1] = FIRST_VOCAB.index("$"), pairs[:, 0]
    canon[np.arange(n + 1)[None, :] >= n + 1 - pairs[:, 1:2]] = 1  # the ones last (none for count 0)
    canon[:, 1] = pairs[:, 0]
    fn = _compiled(model.heads, model.eps)
    size = min(chunk, canon.shape[0])
    padded = np.concatenate([canon, np.repeat(canon[:1], -canon.shape[0] % size, axis=0)])  # whole chunks: one shape
    zs, rows = [], []
    for start in range(0, padded.shape[0], size):
        z, s = fn(params, jnp.asarray(padded[start:start + size]), jnp.asarray(f))
        zs.append(np.asarray(z, np.float64))
        rows.append(np.asarray(s, np.float64))
    z, s = np.concatenate(zs)[back], np.concatenate(rows, axis=1)[:, back]  # [B], [layers, B, H, T]
    if n >= 2:  # key j >= 2 scores as the canonical key of its bit: the first zero (index 2) or the last one
        later = np.where(bits[None, :, None, 1:] == 1, s[..., -1:], s[..., 2:3])
        s = np.concatenate([s[..., :2], later], axis=-1)
    return z, s


_COMPILED: dict = {}


def _compiled(heads, eps):
    key = (heads, eps)
    if key not in _COMPILED:
        def fn(params, inputs, factors):
            z, scores = first_forward(params, inputs, factors, heads=heads, eps=eps, return_scores=True)
            return z, scores[:, :, :, 0, :]  # the query at $

        _COMPILED[key] = jax.jit(fn)
    return _COMPILED[key]

"""Loss and accuracy of a trained model at any test length, on held-out text, per position.

Every model is scored on the same held-out windows with the same predicted positions (masked LM:
the same masks): windows and masks depend only on the length and :data:`~softmax_scale.train.data.EVAL_SEED`.
The test-time scale can be overridden (``scheme``, ``pin_length``) to separate training with a
scale from applying it afterwards: the note's ``max(1, log_64 n)`` on a ``standard`` model is
``scheme="qwen_logn", pin_length=64``.

Per-position sums are kept (:class:`LengthEval`) so that callers can bucket positions (a causal
model's loss against position).  :func:`head_sigmas` measures each head's ``sigma`` as
:func:`softmax_scale.head_stats` does, on the scores the softmax sees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from .._util.jax_backend import jax, jnp
from .._util.progress import progress_bar
from .._util.validation import check_choice, check_int
from ..heads import head_stats
from ..models.buckets import bucket_edges
from ..schemes.rope import ROPES, rerope_window
from .config import TrainConfig
from .data import EVAL_SEED, eval_batch, heldout_bytes, most_frequent_byte
from .model import forward, rope_tables
from .scales import learned_parameter, model_factors

__all__ = ["EvalResult", "LengthEval", "attention_scores", "batch_scores", "bucket_sums", "check_lengths", "evaluate",
           "evaluate_batch", "head_sigmas", "position_buckets"]

#: Held-out bytes per test length by default (windows = tokens // length).
EVAL_TOKENS = 32768


@dataclass(frozen=True)
class LengthEval:
    """Results at one test length.

    Attributes
    ----------
    length : int
        Test length (bytes per window).
    windows : int
        Held-out windows scored.
    loss : float
        Mean cross-entropy (nats) over the predicted positions.
    accuracy : float
        Fraction of predicted positions whose arg-max is the target.
    count : int
        Predicted positions.
    baseline_accuracy : float
        Accuracy of predicting the training text's most frequent byte at every predicted position.
    nll, correct, counts : ndarray, shape (length,)
        Per position in the window: summed cross-entropy, number correct, number predicted.
    """

    length: int
    windows: int
    loss: float
    accuracy: float
    count: int
    baseline_accuracy: float
    nll: np.ndarray
    correct: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True)
class EvalResult:
    """:func:`evaluate`'s result: one :class:`LengthEval` per test length.

    Attributes
    ----------
    scale : str
        ``"trained"`` or the test-time override, e.g. ``"qwen_logn@64"`` (and ``", rope ntk"`` for a
        test-time RoPE variant).
    lengths : tuple of int
    by_length : dict of int -> LengthEval
    """

    scale: str
    lengths: tuple
    by_length: dict

    def __getitem__(self, length) -> LengthEval:
        return self.by_length[length]

    @property
    def loss(self) -> np.ndarray:
        """Loss per test length."""
        return np.array([self.by_length[n].loss for n in self.lengths])

    @property
    def accuracy(self) -> np.ndarray:
        """Accuracy per test length."""
        return np.array([self.by_length[n].accuracy for n in self.lengths])


def check_lengths(lengths, config: TrainConfig) -> tuple:
    """Test lengths as a tuple of ints: each ``>= 1`` (``>= 4`` for masked LM) and ``<= config.max_length``."""
    arr = np.atleast_1d(np.asarray(lengths))
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iuf":
        raise ValueError(f"`lengths` must be one or more integers >= 1, got {lengths!r}")
    minimum = 1
    if config.objective == "mlm":
        minimum = max(1, math.ceil(0.5 / config.mask_rate))  # round(rate * n) >= 1
    out = []
    for x in arr.tolist():
        out.append(check_int(x, "lengths", minimum=minimum, maximum=config.max_length))
    text = heldout_bytes().size
    if max(out) + 1 > text:
        raise ValueError(f"`lengths` must be below the held-out text's {text} bytes, got {max(out)}")
    return tuple(out)


def _cells(params, inputs, targets, weights, cos, sin, factors, *, heads, causal, window=None, rerope=None,
           compute_dtype="float32"):
    """Cross-entropy and correctness at every position, times the weights: ``[B, T]`` each."""
    logits = forward(params, inputs, cos=cos, sin=sin, factors=factors, heads=heads, causal=causal, window=window,
                     rerope=rerope, compute_dtype=compute_dtype)
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
    return nll * weights, correct * weights


_STATIC = ("heads", "causal", "window", "rerope", "compute_dtype")
#: Per position, summed over the batch (:func:`evaluate`), and per row and position (:func:`evaluate_batch`).
_score = jax.jit(lambda *a, **k: tuple(jnp.sum(x, axis=0) for x in _cells(*a, **k)), static_argnames=_STATIC)
_score_cells = jax.jit(_cells, static_argnames=_STATIC)


def _override(config, scheme, pin_length):
    if scheme is None:
        if pin_length is not None:
            raise ValueError("`pin_length` is only used with a test-time `scheme`")
        return "trained"
    learned = learned_parameter(config.scheme)
    if learned is not None:
        raise ValueError(f"`scheme`: a test-time scale replaces the trained one; a model trained with "
                         f"{config.scheme}'s learned {learned} has none to replace")
    pin = config.pin if pin_length is None else check_int(pin_length, "pin_length", minimum=2)
    model_factors(config, 2, scheme=scheme, pin_length=pin)  # names an unknown scheme
    return f"{scheme}@{pin}"


def evaluate(params, config: TrainConfig, lengths, *, scheme: str | None = None, pin_length: int | None = None,
             rope: str | None = None, factors=None, factors_label: str = "per-head", window: int | None = None,
             tokens: int = EVAL_TOKENS, batch_tokens: int = 16384, seed: int = EVAL_SEED,
             progress: bool = False) -> EvalResult:
    """Loss and accuracy on held-out text at each test length.

    Parameters
    ----------
    params : dict
        Parameters of a model of ``config`` (as :func:`~softmax_scale.train.train_model` returns them).
    config : TrainConfig
    lengths : int or sequence of int
        Test lengths (``>= 1``; ``>= 4`` for masked LM; at most ``config.max_length``).
    scheme : str, optional
        A test-time scale from the registry replacing the trained one (e.g. ``"qwen_logn"``).
    pin_length : int, optional
        The length ``scheme`` is pinned at (default: the config's pin length).
    rope : str, optional
        A RoPE variant of :data:`softmax_scale.schemes.rope.ROPES` at test time (default: the trained one),
        its frequencies pinned at the training length.  ``"rerope"`` uses the window
        :func:`softmax_scale.schemes.rope.rerope_window` (causal models).  ``"dynamic_ntk"`` on a causal
        model is read per bucket of positions (:func:`position_buckets`): the positions of the
        bucket ``[lo, hi)`` are scored by a forward pass over the first ``hi`` bytes with the
        base of a sequence of ``hi`` bytes (``s = max(1, hi / L)``), the length of the text so
        far when the bucket's last byte is predicted.  A causal model's positions below ``hi``
        do not depend on later bytes, so this is what a generation that recomputes its RoPE at
        each bucket's end would score; inside ``L`` it is the trained RoPE, bit for bit.
        (A masked LM sees the whole sequence: its ``dynamic_ntk`` is ``ntk`` at ``s = n / L``.)
    factors : ndarray, optional
        A test-time scale given as factors on ``q.k/sqrt(d_head)``, float32, ``[N]`` per position
        or ``[layers, heads, N]`` per head and position, ``N >= max(lengths)`` (causal models: the
        query at position ``i`` sees ``i + 1`` keys whatever the test length); replaces the
        trained scale.  Not with ``scheme``.
    factors_label : str
        The name of ``factors`` in the result's ``scale``.
    window : int, optional
        Each query sees only the ``window`` bytes up to itself (the sliding-window baseline;
        causal models), with the factors of a query that sees ``window`` keys past it.
    tokens : int
        Held-out bytes per test length: ``max(1, tokens // length)`` windows.
    batch_tokens : int
        Bytes per forward pass.
    seed : int
        Seed of the windows and masks (keep the default to compare models).
    progress : bool
        A progress bar over the test lengths.

    Returns
    -------
    EvalResult
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"`config` must be a TrainConfig, got {type(config).__name__}")
    lengths = check_lengths(lengths, config)
    label, factors, rerope, window = _test_options(config, scheme, pin_length, rope, factors, factors_label, window,
                                                  max(lengths))
    tokens = check_int(tokens, "tokens", minimum=1)
    batch_tokens = check_int(batch_tokens, "batch_tokens", minimum=1)
    top = most_frequent_byte()
    out = {}
    for n in progress_bar(lengths, desc=f"evaluate ({label})", unit="length", disable=not progress):
        count = max(1, tokens // n)
        b = eval_batch(config.objective, n, count, config.mask_rate, seed)
        nll, correct, counts = _position_sums(params, config, b, scheme, pin_length, rope, rerope, factors, window,
                                              batch_tokens)
        total = counts.sum()
        base = float(np.sum((b.targets == top) * b.weights, dtype=np.float64) / total)
        out[n] = LengthEval(n, count, float(nll.sum() / total), float(correct.sum() / total), int(total), base, nll,
                            correct, counts)
    return EvalResult(label, lengths, out)


def _test_factors(config, n, scheme, pin_length, factors, window):
    """The factors on ``q.k/sqrt(d_head)`` of a test at ``n`` positions (see :func:`evaluate`)."""
    if factors is not None:
        f_all = factors[..., :n]
    elif window is not None:
        f_all = model_factors(config, n, scheme=scheme, pin_length=pin_length)
        f_all[window:] = f_all[window - 1]  # past the window every query sees `window` keys
    else:
        f_all = model_factors(config, n, scheme=scheme, pin_length=pin_length)
    if config.causal and f_all.ndim == 1:  # one compiled shape for every scale of a causal model
        f_all = np.broadcast_to(f_all, (config.layers, config.heads, n))
    return f_all


def _position_sums(params, config, b, scheme, pin_length, rope, rerope, factors, window, batch_tokens, rows=False):
    """Summed cross-entropy, number correct and number predicted per position of the batch ``b``.

    ``rows``: the same per row and position, ``[count, length]`` each (a row's exact match needs them).
    """
    count, n = b.inputs.shape
    f_all = _test_factors(config, n, scheme, pin_length, factors, window)
    nll = np.zeros((count, n) if rows else n)
    correct = np.zeros_like(nll)
    score = _score_cells if rows else _score
    for lo, hi, width, r in _passes(config, n, rope):
        cos, sin = rope_tables(config, width, r, rope_length=hi if rope == "dynamic_ntk" else n)
        f = f_all[..., :width]
        per = max(1, batch_tokens // width)
        for i in range(0, count, per):
            sl = slice(i, i + per)
            a, c = score(params, b.inputs[sl, :width], b.targets[sl, :width], b.weights[sl, :width], cos, sin, f,
                         heads=config.heads, causal=config.causal, window=window, rerope=rerope,
                         compute_dtype=config.compute_dtype)
            if rows:
                nll[sl, lo:hi] += np.asarray(a, dtype=np.float64)[:, lo:hi]
                correct[sl, lo:hi] += np.asarray(c, dtype=np.float64)[:, lo:hi]
            else:
                nll[lo:hi] += np.asarray(a, dtype=np.float64)[lo:hi]
                correct[lo:hi] += np.asarray(c, dtype=np.float64)[lo:hi]
    if rows:
        return nll, correct, b.weights.astype(np.float64)
    return nll, correct, b.weights.sum(axis=0, dtype=np.float64)


def _test_options(config, scheme, pin_length, rope, factors, factors_label, window, longest):
    """The checked test-time options of :func:`evaluate` and :func:`evaluate_batch`: ``(label, factors, rerope, window)``."""
    label = _override(config, scheme, pin_length)
    if factors is not None:
        if scheme is not None:
            raise ValueError("`factors` and `scheme` are two test-time scales: give one")
        factors = _check_factors(factors, config, longest)
        label = str(factors_label)
    rerope = None
    if rope is not None:
        check_choice(rope, "rope", ROPES)
        if rope == "rerope":
            if not config.causal:
                raise ValueError("`rope`: 'rerope' is defined here for causal models (relative position min(i - j, w))")
            rerope = rerope_window(config.train_length)
        label += f", rope {rope}"
    if window is not None:
        if not config.causal:
            raise ValueError("`window`: a sliding window is for causal models")
        window = check_int(window, "window", minimum=1)
        label += f", window {window}"
    return label, factors, rerope, window


def evaluate_batch(params, config: TrainConfig, batch, *, scheme: str | None = None, pin_length: int | None = None,
                   rope: str | None = None, factors=None, window: int | None = None,
                   batch_tokens: int = 16384) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of a given batch: summed cross-entropy (nats), number correct and number predicted.

    ``batch`` is a :class:`~softmax_scale.train.data.Batch` (e.g. a copy or passkey test,
    :mod:`softmax_scale.train.tasks`) of at most ``config.max_length`` positions, scored where its
    weights are 1; the test-time options are those of :func:`evaluate`, and so is the computation.
    A row whose every predicted position is correct (``correct == count``) is an exact match under
    greedy decoding.  Returns three float64 arrays of shape ``[rows]``.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"`config` must be a TrainConfig, got {type(config).__name__}")
    n = check_lengths(batch.inputs.shape[1], config)[0]
    _, factors, rerope, window = _test_options(config, scheme, pin_length, rope, factors, "per-head", window, n)
    batch_tokens = check_int(batch_tokens, "batch_tokens", minimum=1)
    nll, correct, counts = _position_sums(params, config, batch, scheme, pin_length, rope, rerope, factors, window,
                                          batch_tokens, rows=True)
    return nll.sum(axis=1), correct.sum(axis=1), counts.sum(axis=1)


def batch_scores(params, config: TrainConfig, inputs, *, scheme: str | None = None, pin_length: int | None = None,
                 rope: str | None = None, factors=None) -> np.ndarray:
    """The scores the softmax sees (the test-time scale applied, before the mask) on given inputs, float32.

    ``inputs`` ``[windows, length]`` token ids; the options as in :func:`evaluate` (``"dynamic_ntk"``
    is the static ``ntk`` of the whole input).  Returns ``[layers, windows, heads, length, length]``.
    """
    inputs = np.asarray(inputs, dtype=np.int32)
    n = check_lengths(inputs.shape[1], config)[0]
    _, factors, rerope, _ = _test_options(config, scheme, pin_length, rope, factors, "per-head", None, n)
    f = _test_factors(config, n, scheme, pin_length, factors, None)
    cos, sin = rope_tables(config, n, rope)
    return np.asarray(_scores(params, inputs, cos, sin, f, heads=config.heads, causal=config.causal, rerope=rerope,
                              compute_dtype=config.compute_dtype))


def position_buckets(train_length: int, length: int) -> np.ndarray:
    """Edges of the buckets of positions of a causal evaluation at ``length``: :func:`softmax_scale.models.bucket_edges`.

    ``L x (0, 1/8, 1/4, 1/2, 1, 3/2, 2, 3, 4, 6, 8, 12, 16, ...)`` cut at ``length``.  The edges
    count *queries* (:data:`softmax_scale.models.buckets.BUCKET_COUNTS`): the bucket ``[lo, hi)``
    holds the queries at positions ``lo .. hi - 1`` (0-based), which see ``lo + 1 .. hi`` keys and
    predict the bytes after them (:func:`softmax_scale.models.buckets.bucket_queries` with
    ``counts="queries"``); ``[0, L)`` are exactly the positions of training.
    """
    return bucket_edges(check_int(train_length, "train_length", minimum=2), check_int(length, "length", minimum=1))


def _passes(config, n, rope):
    """The forward passes of one test length: ``(lo, hi, width, rope)``.

    Each pass runs over the first ``width >= hi`` bytes with the RoPE of a sequence of ``hi``
    bytes and keeps the positions ``lo .. hi-1``.  For ``dynamic_ntk`` on a causal model, one
    pass per bucket past ``L`` (and one with the trained RoPE inside ``L``); ``width`` is ``hi``
    rounded up to ``L`` times a power of two (at most ``n``): the positions below ``hi`` do not
    see the bytes after them, so the padding changes nothing but the number of compiled shapes
    (4 widths at ``16L`` instead of 9) at a cost close to that of the exact prefixes.
    """
    if rope != "dynamic_ntk" or not config.causal or n <= config.train_length:
        return [(0, n, n, rope)]
    L = config.train_length
    edges = position_buckets(L, n)
    inside = int(edges[edges <= L].max())
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi > inside:
            width = min(n, L * 2 ** math.ceil(math.log2(hi / L) - 1e-12))
            out.append((int(lo), int(hi), int(width), rope))
    return [(0, inside, out[0][2], "none")] + out  # inside L: the trained RoPE, in the first pass's width


def _check_factors(factors, config, longest):
    f = np.asarray(factors)
    if f.dtype.kind != "f" or f.ndim not in (1, 3) or (f.ndim == 3 and f.shape[:2] != (config.layers, config.heads)):
        raise ValueError(f"`factors` must be float factors shaped [N] or [layers={config.layers}, heads={config.heads}, N], "
                         f"got {f.dtype} {f.shape}")
    if f.shape[-1] < longest:
        raise ValueError(f"`factors` must cover the longest test length {longest}, got {f.shape[-1]} positions")
    if not np.all(np.isfinite(f)) or np.any(f <= 0):
        raise ValueError("`factors` must be finite and > 0")
    return f.astype(np.float32)


@partial(jax.jit, static_argnames=("heads", "causal", "rerope", "compute_dtype"))
def _scores(params, inputs, cos, sin, factors, *, heads, causal, rerope=None, compute_dtype="float32"):
    return forward(params, inputs, cos=cos, sin=sin, factors=factors, heads=heads, causal=causal, rerope=rerope,
                   return_scores=True, compute_dtype=compute_dtype)[1]


def attention_scores(params, config: TrainConfig, length: int, *, windows: int = 2, rope: str | None = None,
                     seed: int = EVAL_SEED) -> np.ndarray:
    """The scores the softmax sees (trained scale applied, before the mask) on held-out windows, float32.

    Computed as in training (the query-key product's inputs in ``config.compute_dtype``,
    accumulated in float32).

    ``rope`` as in :func:`evaluate` (``"dynamic_ntk"`` here is the static ``ntk`` of the whole
    window).  Returns ``[layers, windows, heads, length, length]``.
    """
    n = check_lengths(length, config)[0]
    b = eval_batch(config.objective, n, check_int(windows, "windows", minimum=1), config.mask_rate, seed)
    rerope = None
    if rope is not None:
        check_choice(rope, "rope", ROPES)
        rerope = rerope_window(config.train_length) if rope == "rerope" else None
    cos, sin = rope_tables(config, n, rope)
    return np.asarray(_scores(params, b.inputs, cos, sin, model_factors(config, n), heads=config.heads,
                              causal=config.causal, rerope=rerope, compute_dtype=config.compute_dtype))


def head_sigmas(params, config: TrainConfig, *, length: int | None = None, windows: int = 8,
                seed: int = EVAL_SEED) -> np.ndarray:
    """Each head's ``sigma`` on held-out text, as :func:`softmax_scale.head_stats` measures it.

    The scores are the ones the softmax sees (the scale applied), on ``windows`` held-out windows
    of ``length`` (default: the training length); every query row of every window is one row of
    the head (causal rows see their own prefix; the first, with one key, is skipped).

    Returns
    -------
    ndarray, shape (layers, heads)
        The mean over queries of the standard deviation of a query's scores over its keys.
    """
    n = config.train_length if length is None else check_lengths(length, config)[0]
    b = eval_batch(config.objective, n, check_int(windows, "windows", minimum=1), config.mask_rate, seed)
    cos, sin = rope_tables(config, n)
    s = np.asarray(_scores(params, b.inputs, cos, sin, model_factors(config, n), heads=config.heads,
                           causal=config.causal, compute_dtype=config.compute_dtype), dtype=np.float64)  # [L, B, H, T, T]
    s = s.transpose(0, 2, 1, 3, 4).reshape(config.layers, config.heads, -1, n)  # rows of all windows
    mask = None
    if config.causal:  # each window's rows see their own prefix; its first row (one key) is left out
        rows = np.tile(np.tril(np.ones((n, n), dtype=bool)), (b.inputs.shape[0], 1))
        keep = np.ones(rows.shape[0], dtype=bool)
        keep[::n] = False
        s, mask = s[:, :, keep], rows[keep][None, None]
    return head_stats(s, mask=mask, predict=False).sigma


def bucket_sums(result: LengthEval, edges) -> dict:
    """Per bucket of positions ``[lo, hi)`` (:func:`position_buckets`): loss, accuracy and count of a :class:`LengthEval`."""
    e = np.asarray(edges, dtype=np.int64)
    if e.ndim != 1 or e.size < 2 or np.any(np.diff(e) <= 0) or e[0] < 0 or e[-1] > result.length:
        raise ValueError(f"`edges` must be increasing positions within 0..{result.length}, got {e.tolist()}")
    loss, acc, cnt = [], [], []
    for lo, hi in zip(e[:-1], e[1:]):
        c = result.counts[lo:hi].sum()
        cnt.append(int(c))
        loss.append(result.nll[lo:hi].sum() / c if c else np.nan)
        acc.append(result.correct[lo:hi].sum() / c if c else np.nan)
    return {"lo": e[:-1], "hi": e[1:], "loss": np.array(loss), "accuracy": np.array(acc), "count": np.array(cnt)}

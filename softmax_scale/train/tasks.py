"""Tasks in which one key must be found among ``n``: copying, passkey retrieval and FIRST.

Each generator is seeded by a :class:`numpy.random.Generator` and returns a
:class:`~softmax_scale.train.data.Batch` (causal next-byte targets; ``weights`` 1 on the
positions that are scored) together with what a probe needs to find the source key.

- **Copy** (:func:`copy_batch`): a held-out segment ``X`` of ``m`` bytes repeated to fill the
  sequence (``X X`` when the length is ``2m``, a text shorter than the sequence repeated to fill it
  otherwise); the bytes from position ``m`` on are scored, each a copy of the byte ``m`` back.
  :func:`copy_control` is the same scored bytes after ``m`` bytes of other text: what the model
  gets without the copy.
- **Passkey** (:func:`passkey_batch`): filler sentences repeated to the length, the line
  ``The pass key is K. Remember it. K is the pass key.`` at a depth in ``[0, 1]``, and the
  question at the end; ``K`` is five random digits, the filler has no digit, and the five bytes
  of the answer are scored.
- **FIRST** (:func:`first_batch`, Chiang & Cholak, arXiv 2202.12172): ``$`` then ``n`` random
  bits; the answer is the first bit, read at the ``$`` position of a bidirectional model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.validation import check_float_array, check_int
from .data import Batch, text_batch, training_bytes

__all__ = ["FILLER", "FIRST_VOCAB", "MIX_DISTANCES", "PASSKEY_LINE", "QUESTION", "FirstBatch", "OneKeyBatch",
           "copy_batch", "copy_control", "first_batch", "passkey_batch", "passkey_min_length", "train_batch",
           "training_mix"]

#: The filler of the passkey prompt (repeated), as in the landmark-attention passkey test; it holds no digit.
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
#: The line that hides the key ``K`` (five digits).
PASSKEY_LINE = "The pass key is {key}. Remember it. {key} is the pass key. "
#: The question at the end; the five digits of the key follow it.
QUESTION = "What is the pass key? The pass key is "
_DIGITS = 5
#: FIRST's alphabet, as in Chiang & Cholak's code: the bits 0 and 1, then ``$``.
FIRST_VOCAB = ("0", "1", "$")


@dataclass(frozen=True)
class OneKeyBatch:
    """A batch of a one-key task and where each scored byte's source is.

    Attributes
    ----------
    batch : Batch
        Inputs, targets (the next byte) and weights (1 on the scored positions), ``[count, length]``.
    source : ndarray of int64 [count, length]
        For each scored position ``t`` (input index; its target is byte ``t + 1``), the input
        index of the key that holds the answer: ``t + 1 - m`` for a copy (the byte the target
        repeats), the position of the matching digit in the passkey line; ``-1`` where not scored.
    distance : ndarray of int64 [count]
        The copy distance ``m``, or the number of bytes from the key's line to the question.
    """

    batch: Batch
    source: np.ndarray
    distance: np.ndarray


def _text_windows(text: np.ndarray, length: int, count: int, gen: np.random.Generator) -> np.ndarray:
    if length > text.size:
        raise ValueError(f"`length` must be at most the text's {text.size} bytes, got {length}")
    starts = gen.integers(0, text.size - length + 1, size=count)
    return text[starts[:, None] + np.arange(length)]


def _check_copy(length, distance):
    length = check_int(length, "length", minimum=2)
    distance = check_int(distance, "distance", minimum=1)
    if distance >= length:
        raise ValueError(f"`distance` must be below `length` ({length}) so that a copy is scored, got {distance}")
    return length, distance


def copy_batch(text: np.ndarray, length: int, distance: int, count: int, gen: np.random.Generator) -> OneKeyBatch:
    """Segments of ``distance`` bytes of ``text`` repeated to fill ``length + 1`` bytes; the copies scored.

    Parameters
    ----------
    text : ndarray of uint8
        The text the segments are cut from (held-out bytes for a test).
    length : int
        Sequence length fed to the model (``>= 2``).
    distance : int
        The copy distance ``m`` (``1 <= m < length``): byte ``t`` equals byte ``t - m`` from ``m`` on.
    count : int
        Number of sequences.
    gen : numpy.random.Generator

    Returns
    -------
    OneKeyBatch
        Targets from position ``m`` on are scored (``m - 1`` as an input index).
    """
    length, m = _check_copy(length, distance)
    count = check_int(count, "count", minimum=1)
    seg = _text_windows(np.asarray(text, dtype=np.uint8), m, count, gen)
    full = seg[:, np.arange(length + 1) % m].astype(np.int32)
    return _scored_copy(full, length, m)


def copy_control(text: np.ndarray, length: int, distance: int, count: int, gen: np.random.Generator) -> OneKeyBatch:
    """The scored bytes of :func:`copy_batch` (same ``gen`` state gives the same bytes) after other text.

    The first ``m`` bytes are another held-out segment instead of the first copy, so the scored
    bytes are identical and the copy is absent: the baseline the copy is measured against.
    """
    length, m = _check_copy(length, distance)
    count = check_int(count, "count", minimum=1)
    text = np.asarray(text, dtype=np.uint8)
    seg = _text_windows(text, m, count, gen)
    full = seg[:, np.arange(length + 1) % m].astype(np.int32)
    full[:, :m] = _text_windows(text, m, count, gen)
    out = _scored_copy(full, length, m)
    return OneKeyBatch(out.batch, np.full_like(out.source, -1), out.distance)


def _scored_copy(full, length, m):
    count = full.shape[0]
    weights = np.zeros((count, length), dtype=np.float32)
    weights[:, m - 1:] = 1.0  # target index t + 1 >= m
    t = np.arange(length)
    source = np.where(t + 1 >= m, t + 1 - m, -1)
    return OneKeyBatch(Batch(full[:, :-1], full[:, 1:], weights), np.broadcast_to(source, (count, length)).copy(),
                       np.full(count, m, dtype=np.int64))


def passkey_batch(length: int, depth: float, count: int, gen: np.random.Generator) -> OneKeyBatch:
    """Passkey prompts of ``length + 1`` bytes with the key's line at ``depth``; the five digits scored.

    Parameters
    ----------
    length : int
        Sequence length fed to the model: filler, the key's line, filler, the question, the key.
    depth : float
        Where the line starts, as a fraction of the filler (0: right after the start, 1: just
        before the question).
    count : int
        Number of prompts (one random key each).
    gen : numpy.random.Generator

    Returns
    -------
    OneKeyBatch
        ``source`` points each scored digit at the same digit in the key's first occurrence.
    """
    length = check_int(length, "length", minimum=1)
    depth = float(check_float_array(depth, "depth").reshape(-1)[0]) if np.ndim(depth) == 0 else None
    if depth is None or not 0.0 <= depth <= 1.0:
        raise ValueError(f"`depth` must be in [0, 1] (a fraction of the filler), got {depth!r}")
    count = check_int(count, "count", minimum=1)
    room = length - passkey_min_length()
    if room < 0:
        raise ValueError(f"`length` must be at least {passkey_min_length()} bytes to hold the key's line and the "
                         f"question, got {length}")
    filler = np.frombuffer((FILLER * (room // len(FILLER) + 1)).encode(), dtype=np.uint8)[:room]
    at = int(round(depth * room))
    inputs = np.empty((count, length), dtype=np.int32)
    targets = np.empty((count, length), dtype=np.int32)
    weights = np.zeros((count, length), dtype=np.float32)
    source = np.full((count, length), -1, dtype=np.int64)
    keys = gen.integers(0, 10, size=(count, _DIGITS))
    first = PASSKEY_LINE.index("{key}")
    for i in range(count):
        key = "".join(str(x) for x in keys[i])
        line = np.frombuffer(PASSKEY_LINE.format(key=key).encode(), dtype=np.uint8)
        full = np.concatenate([filler[:at], line, filler[at:], np.frombuffer((QUESTION + key).encode(), np.uint8)])
        inputs[i], targets[i] = full[:-1], full[1:]
        weights[i, length - _DIGITS:] = 1.0
        source[i, length - _DIGITS:] = at + first + np.arange(_DIGITS)
    distance = np.full(count, length + 1 - _DIGITS - (at + first), dtype=np.int64)
    return OneKeyBatch(Batch(inputs, targets, weights), source, distance)


def passkey_min_length() -> int:
    """The shortest passkey prompt (no filler): the key's line, the question and the key, less the last byte."""
    return len(PASSKEY_LINE.format(key="0" * _DIGITS)) + len(QUESTION) + _DIGITS - 1


#: The copy distances of the training mix, as fractions of the training length: ``m`` uniform in ``[L/8, L/2]``.
MIX_DISTANCES = (0.125, 0.5)


def training_mix(batch: Batch, config, gen: np.random.Generator) -> Batch:
    """A causal training batch with its last rows made into copies and passkey prompts.

    ``round(config.copy_share * B)`` rows become :func:`copy_batch` sequences of the training
    text, each with its own distance ``m`` drawn uniformly from :data:`MIX_DISTANCES` x ``L``,
    then ``round(config.passkey_share * B)`` rows :func:`passkey_batch` prompts at a uniform
    depth; the natural rows before them are ``batch``'s, unchanged.  Every position of a mixed
    row is trained on (the first copy and the filler are text too).
    """
    if config.objective != "causal":
        raise ValueError(f"`config`: a training mix needs objective='causal', got {config.objective!r}")
    B, L = batch.inputs.shape
    n_copy, n_pass = round(config.copy_share * B), round(config.passkey_share * B)
    rows = []
    lo, hi = (max(1, int(round(f * L))) for f in MIX_DISTANCES)
    for m in gen.integers(lo, hi + 1, size=n_copy):
        rows.append(copy_batch(training_bytes(), L, int(m), 1, gen).batch)
    for depth in gen.random(n_pass):
        rows.append(passkey_batch(L, float(depth), 1, gen).batch)
    if not rows:
        return batch
    k = len(rows)
    inputs, targets, weights = batch.inputs.copy(), batch.targets.copy(), batch.weights.copy()
    inputs[B - k:] = np.concatenate([r.inputs for r in rows])
    targets[B - k:] = np.concatenate([r.targets for r in rows])
    weights[B - k:] = 1.0
    return Batch(inputs, targets, weights)


def train_batch(config, data_seed: np.random.SeedSequence, step: int) -> Batch:
    """The batch of training step ``step`` (0-based) of a run whose data seed is ``data_seed``.

    The training text's (:func:`~softmax_scale.train.data.text_batch`), made into copies and passkey
    prompts by :func:`training_mix` where the configuration asks for a mix.
    """
    batch, gen = text_batch(config, data_seed, step)
    return training_mix(batch, config, gen) if config.copy_share or config.passkey_share else batch


@dataclass(frozen=True)
class FirstBatch:
    """FIRST sequences: ``$`` then ``n`` bits, and the first bit as the label.

    Attributes
    ----------
    inputs : ndarray of int32 [count, n + 1]
        Token ids in :data:`FIRST_VOCAB` (``$`` = 2 at position 0).
    labels : ndarray of int32 [count]
        The first bit (the token at position 1).
    """

    inputs: np.ndarray
    labels: np.ndarray


def first_batch(n: int, count: int, gen: np.random.Generator) -> FirstBatch:
    """``count`` FIRST sequences of ``n >= 1`` random bits after ``$``."""
    n = check_int(n, "n", minimum=1)
    count = check_int(count, "count", minimum=1)
    bits = gen.integers(0, 2, size=(count, n), dtype=np.int32)
    inputs = np.concatenate([np.full((count, 1), FIRST_VOCAB.index("$"), dtype=np.int32), bits], axis=1)
    return FirstBatch(inputs, bits[:, 0].copy())

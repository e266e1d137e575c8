"""Randomness shared by the estimators: the ``rng`` argument (SciPy SPEC 7) and standard errors."""

from __future__ import annotations

import math
import numbers

import numpy as np


def check_rng(rng=None):
    """Return ``rng`` unchanged if it is a seed :func:`seed_sequence` takes, else raise naming ``rng``.

    ``None``, a non-negative int, a sequence of ints, a ``SeedSequence``, a ``Generator`` or a
    ``BitGenerator``; nothing is drawn from a generator.
    """
    if rng is None or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool)):
        if rng is not None and rng < 0:
            raise ValueError(f"`rng` must be a non-negative integer seed, got {rng}")
        return rng
    if isinstance(rng, (np.random.SeedSequence, np.random.BitGenerator, np.random.Generator)):
        return rng
    if isinstance(rng, (list, tuple)) and all(isinstance(x, numbers.Integral) for x in rng):
        return rng
    raise TypeError(
        f"`rng` must be None, a non-negative int, a SeedSequence or a numpy Generator, got {type(rng).__name__}"
    )


def seed_sequence(rng=None) -> np.random.SeedSequence:
    """Turn ``rng`` into a :class:`numpy.random.SeedSequence`.

    ``None`` takes fresh entropy; an int (or sequence of ints) or a
    ``SeedSequence`` is used as given; a ``Generator`` or ``BitGenerator``
    contributes 128 bits drawn from it (so it advances).  What is accepted: :func:`check_rng`.
    """
    rng = check_rng(rng)
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.BitGenerator):
        rng = np.random.Generator(rng)
    if isinstance(rng, np.random.Generator):
        return np.random.SeedSequence(rng.integers(0, 2**63, size=2, dtype=np.uint64).tolist())
    return np.random.SeedSequence(list(rng) if isinstance(rng, (list, tuple)) else rng)


def generator(rng=None) -> np.random.Generator:
    """Turn ``rng`` into a :class:`numpy.random.Generator`; a Generator is used (and advanced) as given."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(seed_sequence(rng))  # names `rng` in its errors


def mean_stderr(values: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean over independent trials along ``axis`` and its standard error."""
    values = np.asarray(values)
    return values.mean(axis=axis), values.std(axis=axis, ddof=1) / math.sqrt(values.shape[axis])

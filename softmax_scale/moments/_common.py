"""Helpers shared by the moments modules."""

from __future__ import annotations

import math

import numpy as np

from .._random import seed_sequence


def _rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(seed_sequence(rng))  # names `rng` in its errors


def _mean_stderr(values: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean over independent trials along ``axis`` and its standard error."""
    n = values.shape[axis]
    mean = values.mean(axis=axis)
    stderr = values.std(axis=axis, ddof=1) / math.sqrt(n)
    return mean, stderr


def _check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)

"""Weight sampling distributions and ``Var[q·k] = d`` (the note's topic 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from .._util.rng import generator, mean_stderr
from .._util.validation import check_bool, check_choice, check_int, check_positive_float

__all__ = [
    "DISTRIBUTIONS",
    "TRUNCATION_BOUND",
    "DotProductVariance",
    "dot_product_variance",
    "sample_weights",
    "truncated_normal_std",
    "truncation_correction",
]

#: Weight sampling distributions, each with unit variance (after correction).
DISTRIBUTIONS = ("normal", "uniform", "truncated_normal")
#: Truncated normal weights are cut at this many standard deviations.
TRUNCATION_BOUND = 2.0

_CHUNK = 1 << 20  # entries drawn at once by the dot-product estimator


def truncated_normal_std(bound: float = TRUNCATION_BOUND) -> float:
    """Return the standard deviation of N(0, 1) truncated to ``[-bound, bound]``.

    Parameters
    ----------
    bound : float
        Truncation point in standard deviations, > 0.

    Returns
    -------
    float
        ``sqrt(1 - 2 b phi(b) / (2 Phi(b) - 1))``; about 0.8796 for ``b = 2``.
    """
    b = check_positive_float(bound, "bound")
    mass = special.erf(b / math.sqrt(2.0))
    pdf = math.exp(-0.5 * b * b) / math.sqrt(2.0 * math.pi)
    return math.sqrt(1.0 - 2.0 * b * pdf / mass)


def truncation_correction(bound: float = TRUNCATION_BOUND) -> float:
    """Factor restoring unit standard deviation after truncation (about 1.137 for 2).

    Parameters
    ----------
    bound : float
        Truncation point in standard deviations, > 0.

    Returns
    -------
    float
        ``1 / truncated_normal_std(bound)``.
    """
    return 1.0 / truncated_normal_std(bound)


def _entry_variance(dist: str, correct_truncation: bool) -> float:
    """Variance of one entry drawn by :func:`sample_weights` with ``std=1``."""
    if dist == "truncated_normal" and not correct_truncation:
        return truncated_normal_std() ** 2
    return 1.0


def sample_weights(shape, dist: str = "normal", *, std: float = 1.0,
                   correct_truncation: bool = True, rng=None) -> np.ndarray:
    """Draw i.i.d. zero-mean weights of standard deviation ``std``.

    Parameters
    ----------
    shape : int or tuple of int
        Output shape.
    dist : {"normal", "uniform", "truncated_normal"}
        ``uniform`` is U(-sqrt(3) std, sqrt(3) std); ``truncated_normal`` is
        N(0, 1) cut at :data:`TRUNCATION_BOUND` standard deviations (drawn by
        inverting the CDF), times :func:`truncation_correction` and ``std``.
    std : float
        Intended standard deviation, > 0.
    correct_truncation : bool
        If False the truncated normal is not rescaled, so its standard
        deviation is ``truncated_normal_std() * std`` (about 0.88 std).
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    numpy.ndarray
        float64 array of the given shape.
    """
    check_choice(dist, "dist", DISTRIBUTIONS)
    std = check_positive_float(std, "std")
    correct_truncation = check_bool(correct_truncation, "correct_truncation")
    gen = generator(rng)
    if dist == "normal":
        return std * gen.standard_normal(shape)
    if dist == "uniform":
        half = math.sqrt(3.0) * std
        return gen.uniform(-half, half, size=shape)
    lo = special.ndtr(-TRUNCATION_BOUND)
    u = gen.random(shape)
    x = special.ndtri(lo + u * (1.0 - 2.0 * lo))
    factor = truncation_correction() if correct_truncation else 1.0
    return (factor * std) * x


@dataclass(frozen=True)
class DotProductVariance:
    """Monte Carlo estimate of ``Var[q·k]`` for i.i.d. weight-like entries.

    Attributes
    ----------
    d : int
        Dimension of ``q`` and ``k``.
    dist : str
        Entry distribution (see :data:`DISTRIBUTIONS`).
    scaled : bool
        Whether the score is ``q·k / sqrt(d)``.
    correct_truncation : bool
        Whether a truncated normal was rescaled to unit variance.
    trials : int
        Independent ``(q, k)`` pairs.
    estimate : float
        Mean of ``s^2`` over the trials (``E[s] = 0`` by symmetry, so this is
        the variance).
    stderr : float
        Standard error of ``estimate``.
    closed_form : float
        ``d v^2`` (``v^2`` after scaling) with ``v`` the entry variance actually sampled.
    target : float
        What the initialisation intends: ``d``, or 1 when scaled.
    entry_variance : float
        ``v``, the variance of one entry.
    """

    d: int
    dist: str
    scaled: bool
    correct_truncation: bool
    trials: int
    estimate: float
    stderr: float
    closed_form: float
    target: float
    entry_variance: float


def dot_product_variance(d: int, dist: str = "normal", *, trials: int = 20_000,
                         scaled: bool = False, correct_truncation: bool = True,
                         rng=None) -> DotProductVariance:
    """Estimate ``Var[q·k]`` for ``q, k`` with i.i.d. entries of :func:`sample_weights`.

    With unit-variance entries ``Var[q·k] = d``; after dividing by ``sqrt(d)``
    it is 1, which is why attention scales scores by ``1/sqrt(d)``.

    Parameters
    ----------
    d : int
        Dimension, >= 1.
    dist : {"normal", "uniform", "truncated_normal"}
        Entry distribution.
    trials : int
        Independent pairs, >= 2.
    scaled : bool
        Divide the score by ``sqrt(d)``.
    correct_truncation : bool
        Rescale the truncated normal to unit variance (False is the negative control).
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    DotProductVariance
        Estimate, standard error and closed form.
    """
    d = check_int(d, "d", minimum=1)
    check_choice(dist, "dist", DISTRIBUTIONS)
    trials = check_int(trials, "trials", minimum=2)
    scaled = check_bool(scaled, "scaled")
    correct_truncation = check_bool(correct_truncation, "correct_truncation")
    gen = generator(rng)
    s2 = np.empty(trials)
    rows = max(1, _CHUNK // d)
    for start in range(0, trials, rows):
        m = min(rows, trials - start)
        q = sample_weights((m, d), dist, correct_truncation=correct_truncation, rng=gen)
        k = sample_weights((m, d), dist, correct_truncation=correct_truncation, rng=gen)
        s = np.einsum("ij,ij->i", q, k)
        if scaled:
            s = s / math.sqrt(d)
        s2[start:start + m] = s * s
    est, se = mean_stderr(s2)
    v = _entry_variance(dist, correct_truncation)
    factor = 1.0 if scaled else float(d)
    return DotProductVariance(d=d, dist=dist, scaled=scaled, correct_truncation=correct_truncation,
                              trials=trials, estimate=float(est), stderr=float(se),
                              closed_form=factor * v * v, target=factor, entry_variance=v)



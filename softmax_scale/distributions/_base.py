"""The base class of the score distributions and the normal scores."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special

__all__ = ["KIND_COSINE", "KIND_EMPIRICAL", "KIND_NORMAL", "Normal", "ScoreDistribution"]

#: Codes the numba kernels use to pick a sampler.
KIND_NORMAL, KIND_COSINE, KIND_EMPIRICAL = 0, 1, 2

_EMPTY = np.zeros(1, dtype=np.float64)


class ScoreDistribution:
    """Base class of the score distributions (i.i.d. scores ``s_1..s_n``)."""

    name: str = ""

    def pdf(self, s):
        """Density at ``s``."""
        raise NotImplementedError

    def cdf(self, s):
        """Distribution function at ``s``."""
        raise NotImplementedError

    def log_mgf(self, a):
        """``log E[exp(a s)]``, vectorised over ``a``."""
        raise NotImplementedError

    def sample(self, size, rng=None) -> np.ndarray:
        """Draw ``size`` scores with a :class:`numpy.random.Generator`."""
        raise NotImplementedError

    def quadrature(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes and weights (summing to 1) for ``E[f(s)] ~ sum w_k f(s_k)``."""
        raise NotImplementedError

    @property
    def support(self) -> tuple[float, float]:
        """Interval holding all the mass."""
        raise NotImplementedError

    @property
    def kernel_spec(self) -> tuple[int, float, np.ndarray]:
        """``(kind, parameter, sample)`` for the numba samplers."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. ``cosine(d=128)``."""
        return self.name

    def mean_field_log_ratio(self, a):
        """``log(M(2a) / M(a)^2)``: ``n`` times the mean-field ``sum p_i^2``."""
        a = np.asarray(a, dtype=np.float64)
        return self.log_mgf(2.0 * a) - 2.0 * self.log_mgf(a)

    def standard_form(self) -> tuple[ScoreDistribution, float]:
        """``(std, scale)``: the scores are ``scale * s + shift`` with ``s ~ std``, ``scale > 0``.

        A softmax at scale ``alpha`` over these scores is the softmax at
        ``alpha * scale`` over ``std`` (the shift cancels), so a scale found for
        ``std`` is divided by ``scale``.  The smooth distributions are their own
        standard form; a sample is moved to ``[-1, 1]``.
        """
        return self, 1.0


@dataclass(frozen=True)
class Normal(ScoreDistribution):
    """Standard normal scores, ``q.k / sqrt(d)`` for i.i.d. unit-variance entries."""

    name: str = field(default="normal", init=False)

    def pdf(self, s):
        """Density of N(0, 1)."""
        s = np.asarray(s, dtype=np.float64)
        return np.exp(-0.5 * s * s) / np.sqrt(2.0 * np.pi)

    def cdf(self, s):
        """Distribution function of N(0, 1)."""
        return special.ndtr(np.asarray(s, dtype=np.float64))

    def log_mgf(self, a):
        """``a^2 / 2``."""
        a = np.asarray(a, dtype=np.float64)
        return 0.5 * a * a

    def sample(self, size, rng=None):
        """Standard normal draws."""
        return np.random.default_rng(rng).standard_normal(size)

    def quadrature(self, m):
        """Gauss-Hermite (probabilists') nodes with weights summing to 1."""
        x, w = special.roots_hermitenorm(m)
        return x, w / w.sum()

    @property
    def support(self):
        """The real line."""
        return (-np.inf, np.inf)

    @property
    def kernel_spec(self):
        """Sampler code for the kernels."""
        return KIND_NORMAL, 0.0, _EMPTY


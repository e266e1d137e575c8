"""Score distributions: normal, cosine(d), empirical, and weighted (a compressed sample).

Each distribution gives its density, its log moment-generating function
``log M(a) = log E[exp(a s)]`` vectorised over the scale ``a``, a sampler,
Gauss quadrature nodes for expectations over the density, and the small
integer/array description (:attr:`ScoreDistribution.kernel_spec`) that the
numba kernels in :mod:`softmax_scale._kernels` sample from.

Use :func:`get_distribution` to turn the ``dist``/``d`` arguments of the
public functions into one of these objects.
"""

from __future__ import annotations

import numpy as np

from .._util.validation import show
from ._base import Normal, ScoreDistribution
from ._cosine import Cosine, cosine_log_mgf
from ._samples import Empirical, WeightedSample, compress_pool

__all__ = [
    "DIST_NAMES",
    "Cosine",
    "Empirical",
    "Normal",
    "ScoreDistribution",
    "WeightedSample",
    "compress_pool",
    "cosine_log_mgf",
    "get_distribution",
    "is_sample",
]

DIST_NAMES = ("normal", "cosine", "empirical")


def is_sample(dist) -> bool:
    """Whether ``dist`` is a finite set of points (:class:`Empirical` or :class:`WeightedSample`)."""
    return isinstance(dist, (Empirical, WeightedSample))


_NORMAL = Normal()


def get_distribution(dist="normal", d=None) -> ScoreDistribution:
    """Turn the public ``dist``/``d`` arguments into a :class:`ScoreDistribution`.

    Parameters
    ----------
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        A name, a distribution object, or a 1-D array of measured scores
        (shorthand for ``Empirical(array)``).
    d : int, optional
        Dimension, required for ``"cosine"`` (``d >= 2``); an error with any other
        distribution, which has no dimension (a ``d`` that would be silently ignored is
        usually a forgotten ``dist="cosine"``).
    """
    if isinstance(dist, ScoreDistribution):
        if d is not None and not (isinstance(dist, Cosine) and d == dist.d):
            raise ValueError(f"`d` must be None with a distribution object ({dist.label} fixes its own), got d={show(d)}")
        return dist
    if d is not None and not (isinstance(dist, str) and dist == "cosine"):
        name = repr(dist) if isinstance(dist, str) else "an empirical sample"
        raise ValueError(f"`d` applies to dist='cosine' only; {name} has no dimension, got d={show(d)} "
                         "(drop d, or pass dist='cosine')")
    if isinstance(dist, str):
        if dist == "normal":
            return _NORMAL
        if dist == "cosine":
            if d is None:
                raise ValueError("`d` is required for dist='cosine': an integer >= 2 (e.g. the head dimension)")
            return Cosine(d)
        if dist == "empirical":
            raise ValueError(
                "`dist`='empirical' needs the sample: pass the 1-D array itself as `dist` "
                "(or softmax_scale.Empirical(array))"
            )
        raise ValueError(f"`dist` must be one of {list(DIST_NAMES)} or a 1-D array of scores, got {dist!r}")
    if isinstance(dist, (list, tuple, np.ndarray)):
        return Empirical(dist, name="dist")
    raise TypeError(f"`dist` must be a name, a ScoreDistribution or a 1-D array, got {type(dist).__name__}")

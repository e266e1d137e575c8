"""Where mean-field holds: its ``sum p^2`` against the exact ``E[sum p^2]`` over a grid of ``(alpha, n)``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.progress import progress_bar
from .._util.validation import check_alpha_array, check_n_array
from ..distributions import get_distribution
from ..exact import exact_stats
from .mean_field import mean_field_sum_p2

__all__ = ["MeanFieldError", "mean_field_error"]


@dataclass(frozen=True)
class MeanFieldError:
    """The mean-field ``sum p^2`` against the exact ``E[sum p^2]`` over a grid.

    Attributes
    ----------
    alphas : ndarray
        Scales, shape ``(A,)``.
    ns : ndarray
        Numbers of scores, shape ``(N,)``.
    dist : str
        Score distribution label.
    exact : ndarray
        ``E[sum p^2]``, shape ``(N, A)``.
    mean_field : ndarray
        ``min(1, M(2a) / (n M(a)^2))``, shape ``(N, A)``.
    rel_error : ndarray
        ``mean_field / exact - 1``, shape ``(N, A)``.
    """

    alphas: np.ndarray
    ns: np.ndarray
    dist: str
    exact: np.ndarray
    mean_field: np.ndarray
    rel_error: np.ndarray


def mean_field_error(alphas, ns, dist="normal", *, d=None, progress=None) -> MeanFieldError:
    """Relative error of the mean-field ``sum p^2`` against the exact one over a grid of ``(alpha, n)``.

    Parameters
    ----------
    alphas : array_like
        Scales ``>= 0`` (1-D).
    ns : array_like
        Numbers of scores ``>= 2`` (1-D).
    dist, d
        Score distribution (normal or cosine).
    progress : bool, optional
        Progress bar over ``ns`` (default: for more than 20 values).

    Returns
    -------
    MeanFieldError
    """
    a, _ = check_alpha_array(alphas, "alphas")
    nn, _ = check_n_array(ns, "ns")
    dist_obj = get_distribution(dist, d)
    ex = np.empty((nn.size, a.size))
    for i, nv in enumerate(progress_bar(nn, desc="exact", disable=not (progress or (progress is None and nn.size > 20)), leave=False)):
        ex[i] = exact_stats(a, int(nv), dist_obj, error_estimate=False).sum_p2
    mf = mean_field_sum_p2(a[None, :], nn[:, None], dist_obj)
    return MeanFieldError(a, nn, dist_obj.label, ex, mf, mf / ex - 1.0)

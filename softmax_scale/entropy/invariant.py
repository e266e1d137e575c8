"""The scale that holds the entropy still: solve ``E[H](alpha, n) = target`` for ``alpha`` at each ``n``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from .._util.progress import progress_bar
from .._util.validation import check_n_array, check_positive_float
from ..distributions import get_distribution
from ..laws import compare_alpha_laws
from ..stats import softmax_stats

__all__ = ["InvariantScale", "invariant_scale"]


@dataclass(frozen=True)
class InvariantScale:
    """The scale ``alpha(n)`` with ``E[H](alpha, n) = target`` and its fitted laws.

    Attributes
    ----------
    ns : ndarray
        Numbers of keys.
    alpha : ndarray
        Solutions.
    entropy : ndarray
        ``E[H]`` at the solutions (the exact evaluator), equal to the target to the root tolerance.
    target_entropy : float
        The target, nats.
    dist : str
        Score distribution.
    laws : dict
        ``{form: LawFit}`` from :func:`softmax_scale.compare_alpha_laws`, best RMSE first.
    critical : ndarray
        ``sqrt(2 log n)``, the freezing scale of normal scores.
    converged : ndarray
        Root-finder flags.
    """

    ns: np.ndarray
    alpha: np.ndarray
    entropy: np.ndarray
    target_entropy: float
    dist: str
    laws: dict
    critical: np.ndarray
    converged: np.ndarray


def _exact_entropy(alpha, n, dist):
    return float(softmax_stats(float(alpha), int(n), dist, method="exact", error_estimate=False).entropy)


def invariant_scale(ns, target_entropy, dist="normal", *, d=None, xtol=1e-12) -> InvariantScale:
    """Solve ``E[H](alpha, n) = target_entropy`` for ``alpha`` at each ``n`` (exact evaluator, brentq).

    ``E[H]`` falls from ``log n`` at ``alpha = 0`` towards 0, so a root exists
    for ``0 < target < log n``; the bracket ``[0, hi]`` is found by doubling.

    Parameters
    ----------
    ns : array_like
        Numbers of keys, ``>= 2``, with ``log n > target_entropy``.
    target_entropy : float
        Target entropy in nats, ``> 0``.
    dist : {"normal", "cosine"}, ScoreDistribution or array_like
        Score distribution.
    d : int, optional
        Dimension for ``"cosine"``.
    xtol : float
        Absolute tolerance on ``alpha``.

    Returns
    -------
    InvariantScale
        With the laws ``c sqrt(log n)``, ``c log n``, ``c (log n)^p`` and
        ``a + b log n`` fitted (needs at least two ``n``).
    """
    nn, _ = check_n_array(ns, "ns")
    target = check_positive_float(target_entropy, "target_entropy")
    xtol = check_positive_float(xtol, "xtol")
    if np.any(np.log(nn) <= target):
        raise ValueError(f"`target_entropy` must be < log n for every n (log of the smallest n is "
                         f"{np.log(nn.min()):.4g}), got {target!r}")
    dist_obj = get_distribution(dist, d)
    alpha = np.empty(nn.size)
    ent = np.empty(nn.size)
    conv = np.zeros(nn.size, dtype=bool)
    for i, n in enumerate(progress_bar(nn, desc="invariant scale", disable=nn.size < 20, leave=False)):
        def f(a, n=n):
            return _exact_entropy(a, n, dist_obj) - target

        hi = max(1e-3, math.sqrt(2.0 * max(math.log(n) - target, 1e-6)))
        while f(hi) > 0:
            hi *= 2.0
            if hi > 1e8:
                raise RuntimeError(f"no scale reaches entropy {target} at n = {n:.0f}")
        root, res = optimize.brentq(f, 0.0, hi, xtol=xtol, rtol=4 * np.finfo(float).eps, full_output=True)
        alpha[i] = root
        conv[i] = res.converged
        ent[i] = f(root) + target
    laws = compare_alpha_laws(nn, alpha) if nn.size >= 2 else {}
    return InvariantScale(ns=nn, alpha=alpha, entropy=ent, target_entropy=target, dist=dist_obj.label, laws=laws,
                          critical=np.sqrt(2.0 * np.log(nn)), converged=conv)

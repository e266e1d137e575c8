"""What a factor on ``q.k`` costs a head whose scores are i.i.d.: the change of its entropy and the KL between its rows.

An engine that multiplies ``q.k`` by ``r`` where the model's authors do not turns a head's
attention row ``p_a = softmax(a z)`` (``a`` the head's scale, ``z`` its standardised scores) into
``p_b``, ``b = r a``.  :func:`iid_cost` gives, for ``n`` i.i.d. scores, the expected change of the
row's entropy and the expected ``KL(p_a || p_b)`` exactly, from the toolkit's quadrature of
``E[H]`` and ``E[log Z]`` (:func:`softmax_scale.stats.softmax_stats`): with ``H = log Z - a sum p z``,

    ``E[KL(p_a || p_b)] = E[log Z_b] - (b / a) E[log Z_a] - (1 - b / a) E[H_a]``.

A head's ``a`` is its measured ``sigma`` (:func:`softmax_scale.heads.head_stats`): the standard
deviation of its logits over the keys.  The cost measured on a real decoder is the experiment
``engine_cost`` (:mod:`softmax_scale.experiments.engine_cost`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.validation import check_int

__all__ = ["IidCost", "iid_cost"]


@dataclass(frozen=True)
class IidCost:
    """The i.i.d. theory's cost of a factor ``ratio`` on ``q.k``, per head.

    Attributes
    ----------
    alpha : ndarray
        The heads' scales ``a``.
    n : int
        Number of keys.
    ratio : ndarray
        The factor ``r`` (broadcast with ``alpha``).
    delta_entropy : ndarray
        ``E[H](r a) - E[H](a)``, nats (negative: the factor sharpens the rows).
    kl : ndarray
        ``E[KL(p_a || p_{r a})]``, nats.
    """

    alpha: np.ndarray
    n: int
    ratio: np.ndarray
    delta_entropy: np.ndarray
    kl: np.ndarray


def _positive(x, name) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"`{name}` must hold finite numbers > 0, got {x!r}")
    return arr


def iid_cost(alpha, n, ratio, *, dist="normal") -> IidCost:
    """The expected entropy change and KL of a head's attention row when ``q.k`` is multiplied by ``ratio``.

    Parameters
    ----------
    alpha : float or array_like
        The heads' scales (``> 0``): the standard deviation of each head's logits.
    n : int
        Number of i.i.d. scores (keys), ``>= 2``.
    ratio : float or array_like
        The factor on ``q.k`` (``> 0``), broadcast with ``alpha``.
    dist : {"normal", "cosine"} or ScoreDistribution
        The standardised scores' distribution (:func:`softmax_scale.stats.softmax_stats`).

    Returns
    -------
    IidCost

    Examples
    --------
    >>> from softmax_scale.engines.cost import iid_cost
    >>> c = iid_cost(1.0, 4096, 1.0)
    >>> float(c.kl), float(c.delta_entropy)
    (0.0, 0.0)
    """
    from ..stats import softmax_stats

    a, r = np.broadcast_arrays(_positive(alpha, "alpha"), _positive(ratio, "ratio"))
    n = check_int(n, "n", minimum=2)
    b = a * r
    scales = np.unique(np.concatenate([a.ravel(), b.ravel()]))
    s = softmax_stats(scales, n, dist)
    H = dict(zip(scales.tolist(), np.atleast_1d(s.entropy).tolist()))
    logz = dict(zip(scales.tolist(), np.atleast_1d(s.log_z).tolist()))
    Ha, Hb = (np.vectorize(H.__getitem__)(x) for x in (a, b))
    Za, Zb = (np.vectorize(logz.__getitem__)(x) for x in (a, b))
    kl = np.where(r == 1.0, 0.0, Zb - r * Za - (1.0 - r) * Ha)
    return IidCost(a.copy(), n, r.copy(), np.where(r == 1.0, 0.0, Hb - Ha), kl)

"""What a factor on ``q.k`` costs a head whose scores are i.i.d.: the change of its entropy and the KL between its rows.

An engine that multiplies ``q.k`` by ``r`` where the model's authors do not turns a head's
attention row ``p_a = softmax(a z)`` (``a`` the head's scale, ``z`` its standardised scores) into
``p_b``, ``b = r a``.  :func:`iid_cost` gives, for ``n`` i.i.d. scores, the expected change of the
row's entropy and the expected ``KL(p_a || p_b)`` exactly, from the toolkit's quadrature of
``E[H]`` and ``E[log Z]`` (:func:`softmax_scale.stats.softmax_stats`): with ``H = log Z - a sum p z``,

    ``E[KL(p_a || p_b)] = E[log Z_b] - (b / a) E[log Z_a] - (1 - b / a) E[H_a]``.

A head's ``a`` is its measured ``sigma`` (:func:`softmax_scale.heads.head_stats`): the standard
deviation of its logits over the keys.  The cost measured on a real decoder is the experiment
``engine_cost`` (:mod:`softmax_scale.experiments.engine_cost`); :func:`measured_cost` looks a factor up in
its committed result file (``figures/engine_cost.csv``), read as a file: the engines sit below the
experiments and do not import them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._util.validation import check_int

__all__ = ["MATCH_RTOL", "MEASURED_SHAPES", "MEASURED_TRAIN_LENGTH", "IidCost", "committed_file", "iid_cost",
           "measured_cost"]

#: How close (relative) an engine's factor must be to a measured one for :func:`measured_cost` to report it.
MATCH_RTOL = 1e-3
#: The covered length of the committed measurement's model (SmolLM2-135M's ``context_length``, no RoPE
#: scaling): a length asked as a multiple of another model's covered length is looked up at the same
#: multiple of this one, inside it or past it as the length asked is.
MEASURED_TRAIN_LENGTH = 8192
#: Where a measured factor goes, as ``engine_cost`` names its shapes: every layer; every layer on half of
#: each head's dimensions; the layers ``(i + 1) % 4 == 0``; those layers on half of the dimensions.
MEASURED_SHAPES = ("all", "half", "every_fourth", "half_every_fourth")
_TEXT, _INTS = ("shape",), ("length", "tokens", "heads")


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


def committed_file() -> Path:
    """The committed result file of ``engine_cost``, ``figures/engine_cost.csv`` of the source checkout."""
    return Path(__file__).resolve().parents[2] / "figures" / "engine_cost.csv"


def measured_cost(ratio: float, shape: str, n: int | None = None, *, covered_length: int | None = None, csv=None):
    """The committed measurement of a factor ``ratio`` in ``shape`` from the same regime as ``n``; ``None`` if none.

    Parameters
    ----------
    ratio : float
        The factor on ``q.k``; a row matches within :data:`MATCH_RTOL`.
    shape : str
        One of :data:`MEASURED_SHAPES`.
    n : int, optional
        The length wanted: the measured length nearest it (in ``log n``).
    covered_length : int, optional
        The covered length ``C`` of the model ``n`` is asked for (its ``L``, as ``advise`` takes it):
        ``n`` is taken as the multiple ``n / C`` of :data:`MEASURED_TRAIN_LENGTH`, and only lengths
        on the same side of the measured model's own (inside it for ``n <= C``, past it for
        ``n > C``) are candidates; without one, ``n`` as it is, with the same rule.
    csv : str or PathLike, optional
        The result file (default :func:`committed_file`).

    Returns
    -------
    dict or None
        The row's columns (``length``, ``delta_loss``, ``delta_se``, ``kl``, ``kl_se``, ``iid_kl``, ...),
        ``model`` (the measured model's file) and ``target`` (the length looked for).
    """
    from .._util.store import read_table

    if shape not in MEASURED_SHAPES:
        raise ValueError(f"`shape` must be one of {', '.join(MEASURED_SHAPES)}, got {shape!r}")
    path = committed_file() if csv is None else csv
    if not os.path.exists(path):
        return None
    t = read_table(path, text=_TEXT, ints=_INTS)
    r = t.rows
    hit = (r["shape"] == shape) & np.isclose(r["ratio"], ratio, rtol=MATCH_RTOL, atol=0.0)
    idx = np.flatnonzero(hit)
    target = None
    if n is not None:
        target = n if covered_length is None else n / covered_length * MEASURED_TRAIN_LENGTH
        past = target > MEASURED_TRAIN_LENGTH
        idx = idx[(r["length"][idx] > MEASURED_TRAIN_LENGTH) == past]
        idx = idx[np.argsort(np.abs(np.log(r["length"][idx] / target)), kind="stable")]
    if idx.size == 0:
        return None
    i = int(idx[0])
    return {**{c: np.asarray(v[i]).item() for c, v in r.items()}, "model": t.header.get("model", "?"),
            "target": target}

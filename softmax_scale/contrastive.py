"""Contrastive temperature: the mean-field optimal scale on cosine scores beside the published ones.

``n`` is the number of candidates in one row of the softmax: one positive and ``n - 1``
negatives.  For a batch of ``B`` pairs under InfoNCE as CLIP uses it (each row against the ``B``
items of the other side) ``n = B``; under SimCLR's NT-Xent (``2B`` augmented views, each against
the other ``2B - 1``) ``n = 2B - 1``.  :func:`contrastive_temperature` takes the batch and says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ._util.validation import check_choice, check_int, check_n_array
from .distributions import Cosine
from .exact import exact_stats
from .objectives import mean_field_objective, mean_field_sum_p2
from .optimize import optimal_alpha
from .schemes import attention_scale, default_list

__all__ = ["CONTRASTIVE_LOSSES", "DIMENSIONS", "PUBLISHED_COSINE_SCALES", "ContrastiveTemperature", "TemperatureTable",
           "contrastive_temperature", "temperature_table"]

#: Embedding dimensions shown by default (:func:`temperature_table`'s rows, :func:`contrastive_temperature`'s comparison).
DIMENSIONS = (128, 256, 512, 768)
#: Contrastive loss -> (``n`` for a batch ``B`` as a formula, what a row of the softmax holds, ``n`` as a function of ``B``).
CONTRASTIVE_LOSSES = {
    "infonce": ("B", "InfoNCE as CLIP uses it: each row against the B items of the other side, 1 positive and "
                "B - 1 negatives", lambda b: b),
    "nt_xent": ("2B - 1", "SimCLR's NT-Xent: 2B views, each against the other 2B - 1, 1 positive and 2B - 2 "
                "negatives", lambda b: 2 * b - 1),
}


class _PublishedScales(Mapping):
    """``{scheme: scale}`` of the registry's ``contrastive`` list, read at every use."""

    _keys = default_list("contrastive")

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return attention_scale(2, 2, key)

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)

    def __repr__(self):
        return repr(dict(self))


#: The fixed published scales on a cosine (the registry's ``contrastive`` list), read-only.
PUBLISHED_COSINE_SCALES = _PublishedScales()


@dataclass(frozen=True)
class TemperatureTable:
    """``alpha*`` and ``tau* = 1/alpha*`` for cosine scores, and the published fixed scales.

    Attributes
    ----------
    ds : ndarray
        Embedding dimensions (rows).
    ns : ndarray
        Numbers of candidates (columns).
    alpha : ndarray
        Mean-field optimal scale, shape ``(len(ds), len(ns))``.
    tau : ndarray
        ``1 / alpha``.
    published : dict
        ``{scheme: scale}`` for CLIP, Swin-V2, AM-Softmax, SimCSE and SimCLR.
    published_loss : dict
        ``{scheme: array (len(ds), len(ns))}``: relative loss in the mean-field
        objective, ``1 - G_mf(scale) / G_mf(alpha*)``.
    """

    ds: np.ndarray
    ns: np.ndarray
    alpha: np.ndarray
    tau: np.ndarray
    published: dict
    published_loss: dict

    def __str__(self):
        head = f"{'d':>6}" + "".join(f"{f'n={int(n)}':>22}" for n in self.ns)
        lines = ["alpha* (tau*) for cosine scores", head]
        for i, d in enumerate(self.ds):
            lines.append(f"{int(d):>6}" + "".join(f"{a:>13.2f} ({t:.4f})" for a, t in zip(self.alpha[i], self.tau[i])))
        lines.append("published: " + ", ".join(f"{k} {v:.3g} (tau {1 / v:.3g})" for k, v in self.published.items()))
        return "\n".join(lines)


def temperature_table(ds=DIMENSIONS, ns=(256, 4096, 65536)) -> TemperatureTable:
    """The optimal contrastive temperature for each ``d`` and ``n``, beside the published scales.

    Parameters
    ----------
    ds : sequence of int
        Embedding dimensions, each ``>= 2``.
    ns : sequence of int
        Numbers of candidates (batch sizes / negatives + 1), each ``>= 2``.

    Returns
    -------
    TemperatureTable
    """
    dd = np.array([check_int(d, "ds", minimum=2) for d in np.atleast_1d(ds)])
    nn, _ = check_n_array(ns, "ns")
    alpha = np.array([np.atleast_1d(optimal_alpha(nn, dist="cosine", d=int(d))) for d in dd])
    published = dict(PUBLISHED_COSINE_SCALES)
    loss = {}
    for k, v in published.items():
        rows = []
        for i, d in enumerate(dd):
            dist = Cosine(int(d))
            rows.append(1.0 - mean_field_objective(v, nn, dist) / mean_field_objective(alpha[i], nn, dist))
        loss[k] = np.array(rows)
    return TemperatureTable(ds=dd, ns=nn, alpha=alpha, tau=1.0 / alpha, published=published,
                            published_loss=loss)


@dataclass(frozen=True)
class ContrastiveTemperature:
    """The mean-field temperature for one batch size, at several embedding dimensions.

    Attributes
    ----------
    batch : int
        The batch size ``B`` asked about.
    loss : str
        A key of :data:`CONTRASTIVE_LOSSES`: how ``B`` becomes ``n``.
    n : int
        Candidates per softmax row (``B`` or ``2B - 1``).
    d : int or None
        The embedding dimension asked about (``None``: not given; every row of ``ds`` is an answer).
    ds : ndarray
        Embedding dimensions, :data:`DIMENSIONS` and ``d``, sorted.
    alpha : ndarray
        Mean-field ``alpha*(n; d)`` on the cosine, per ``ds``.
    tau : ndarray
        ``1 / alpha``.
    sum_p2_mean_field, sum_p2_exact : ndarray
        ``sum p^2`` at ``alpha`` under the mean-field approximation and exactly
        (:func:`softmax_scale.exact_stats`), per ``ds``.
    grad_mean_field, grad_exact : ndarray
        The objective ``G`` at ``alpha``: mean-field and the exact ``E[G]``.
    published : dict
        ``{scheme: scale}`` of :data:`PUBLISHED_COSINE_SCALES`.
    """

    batch: int
    loss: str
    n: int
    d: int | None
    ds: np.ndarray
    alpha: np.ndarray
    tau: np.ndarray
    sum_p2_mean_field: np.ndarray
    sum_p2_exact: np.ndarray
    grad_mean_field: np.ndarray
    grad_exact: np.ndarray
    published: dict

    @property
    def mean_field_ratio(self) -> np.ndarray:
        """Mean-field ``sum p^2`` over the exact one, at the mean-field optimum, per ``ds``."""
        return self.sum_p2_mean_field / self.sum_p2_exact

    def at(self, d: int) -> int:
        """Index of dimension ``d`` in :attr:`ds`."""
        hits = np.flatnonzero(self.ds == d)
        if hits.size == 0:
            raise ValueError(f"`d` must be one of {self.ds.tolist()}, got {d!r}")
        return int(hits[0])

    def to_dict(self) -> dict:
        """Every field, and the ratio, as plain values and lists."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["n_rule"] = f"n = {CONTRASTIVE_LOSSES[self.loss][0]}: {CONTRASTIVE_LOSSES[self.loss][1]}"
        out["mean_field_ratio"] = self.mean_field_ratio
        return out

    def text(self) -> str:
        """The answer as printed by ``softmax-scale temperature``."""
        other = "nt_xent" if self.loss == "infonce" else "infonce"
        rule, row, _ = CONTRASTIVE_LOSSES[self.loss]
        lines = [f"contrastive temperature, batch B = {self.batch}, --loss {self.loss}: n = {rule} = {self.n} candidates "
                 f"per softmax row ({row})",
                 f"  (--loss {other}: n = {CONTRASTIVE_LOSSES[other][0]} = {CONTRASTIVE_LOSSES[other][2](self.batch)})",
                 "tau* = 1/alpha*, alpha* the mean-field gradient-optimal scale on the cosine of unrelated embeddings "
                 "(independent uniform directions in R^d); it depends on d"
                 + (f": the d asked, {self.d}, is marked *" if self.d is not None
                    else ": pass --d D, the embedding dimension"),
                 f"{'d':>8} {'alpha*':>10} {'tau*':>10} {'sum p^2 mean-field':>19} {'exact':>8} {'ratio':>7}"]
        for i, dv in enumerate(self.ds):
            mark = "*" if self.d is not None and dv == self.d else " "
            lines.append(f"{mark}{int(dv):>7d} {self.alpha[i]:>10.4g} {self.tau[i]:>10.4g} "
                         f"{self.sum_p2_mean_field[i]:>19.4g} {self.sum_p2_exact[i]:>8.4g} "
                         f"{self.mean_field_ratio[i]:>6.3g}x")
        r = self.mean_field_ratio if self.d is None else self.mean_field_ratio[[self.at(self.d)]]
        span = f"{r.min():.3g}x" if r.size == 1 else f"{r.min():.3g}x to {r.max():.3g}x"
        lines.append(f"At its own optimum the mean-field sum p^2 is {span} the exact E[sum p^2] (quadrature): "
                     "the approximation is off where it is maximised, and the exact E[G] has no finite maximiser "
                     "(notebook 04, docs/findings/alpha_laws.md).")
        lines.append("published tau: " + ", ".join(f"{k} {1 / v:.3g}" for k, v in self.published.items()))
        return "\n".join(lines)


def contrastive_temperature(batch, d=None, *, loss="infonce") -> ContrastiveTemperature:
    """The mean-field contrastive temperature ``tau* = 1/alpha*`` for a batch of ``B``, and how far it can be trusted.

    ``n``, the number of candidates of one softmax row, follows from ``batch`` and ``loss``
    (:data:`CONTRASTIVE_LOSSES`): ``n = B`` for InfoNCE as CLIP uses it, ``n = 2B - 1`` for
    SimCLR's NT-Xent.  The optimum depends on the embedding dimension ``d``: it is computed at
    ``d`` and at :data:`DIMENSIONS`.  At each, the mean-field ``sum p^2`` is set beside the exact
    one at the same scale, which says how far the approximation behind ``alpha*`` is off there.

    Parameters
    ----------
    batch : int
        Batch size ``B``, ``>= 2``.
    d : int, optional
        Embedding dimension, ``>= 2`` (the cosine of two independent uniform directions in ``R^d``).
    loss : {"infonce", "nt_xent"}
        How ``B`` becomes ``n``.

    Returns
    -------
    ContrastiveTemperature
    """
    check_choice(loss, "loss", tuple(CONTRASTIVE_LOSSES))
    b = check_int(batch, "batch", minimum=2, maximum=10**12)
    n = CONTRASTIVE_LOSSES[loss][2](b)
    given = None if d is None else check_int(d, "d", minimum=2, maximum=10**6)
    ds = np.array(sorted(set(DIMENSIONS) | ({given} if given is not None else set())))
    alpha = np.array([float(optimal_alpha(n, dist="cosine", d=int(dv))) for dv in ds])
    mf, ex, g_mf, g_ex = (np.empty(ds.size) for _ in range(4))
    for i, dv in enumerate(ds):
        dist = Cosine(int(dv))
        mf[i] = float(np.squeeze(mean_field_sum_p2(alpha[i:i + 1], np.array([float(n)]), dist)))
        g_mf[i] = float(np.squeeze(mean_field_objective(alpha[i], n, dist)))
        r = exact_stats(alpha[i], n, dist, error_estimate=False)
        ex[i], g_ex[i] = float(r.sum_p2), float(r.grad)
    return ContrastiveTemperature(batch=b, loss=loss, n=n, d=given, ds=ds, alpha=alpha, tau=1.0 / alpha,
                                  sum_p2_mean_field=mf, sum_p2_exact=ex, grad_mean_field=g_mf, grad_exact=g_ex,
                                  published=dict(PUBLISHED_COSINE_SCALES))

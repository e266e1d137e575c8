"""Contrastive temperature: the mean-field optimal scale on cosine scores beside the published ones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ._util.validation import check_int, check_n_array
from .distributions import Cosine
from .objectives import mean_field_objective
from .optimize import optimal_alpha
from .schemes import attention_scale, default_list

__all__ = ["PUBLISHED_COSINE_SCALES", "TemperatureTable", "temperature_table"]


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


def temperature_table(ds=(128, 256, 512, 768), ns=(256, 4096, 65536)) -> TemperatureTable:
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

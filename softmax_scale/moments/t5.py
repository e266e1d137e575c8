"""T5's query initialisation folds the ``1/sqrt(d)`` in."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._util.rng import generator, mean_stderr
from .._util.validation import check_choice, check_int

__all__ = [
    "T5_INITS",
    "T5ScoreVariance",
    "t5_score_variance",
]

#: Query/key initialisations for :func:`t5_score_variance`.
T5_INITS = ("t5", "standard")


@dataclass(frozen=True)
class T5ScoreVariance:
    """Monte Carlo ``Var[q·k]`` of unscaled attention scores at initialisation.

    Attributes
    ----------
    init : str
        ``t5`` or ``standard``.
    d_model, d_kv, trials, pairs : int
        Model width, head dimension, independent weight draws, token pairs per draw.
    query_std, key_std : float
        Standard deviations of the query and key weights.
    estimate, stderr : float
        ``E[s^2]`` (``E[s] = 0`` by symmetry) over weights and inputs, and its
        standard error over weight draws.
    closed_form : float
        ``d_kv (d_model query_std^2) (d_model key_std^2)``: 1 for T5, ``d_kv`` for standard.
    """

    init: str
    d_model: int
    d_kv: int
    trials: int
    pairs: int
    query_std: float
    key_std: float
    estimate: float
    stderr: float
    closed_form: float


def t5_score_variance(d_model: int, d_kv: int, *, init: str = "t5", trials: int = 2000,
                      pairs: int = 8, rng=None) -> T5ScoreVariance:
    """Variance of the unscaled score ``q·k`` under T5's or the standard initialisation.

    Inputs ``x, y`` (two tokens) have i.i.d. N(0, 1) entries, ``q = x W_q``,
    ``k = y W_k``.  T5 draws ``W_q`` with std ``(d_model d_kv)^(-1/2)`` and
    ``W_k`` with std ``d_model^(-1/2)``, so ``Var[q·k] = 1`` without dividing
    by ``sqrt(d_kv)``; the standard ``d_model^(-1/2)`` on both gives ``d_kv``.

    Parameters
    ----------
    d_model : int
        Input width, >= 1.
    d_kv : int
        Head dimension, >= 1.
    init : {"t5", "standard"}
        Query/key initialisation.
    trials : int
        Independent weight draws, >= 2.
    pairs : int
        Token pairs per weight draw, >= 1.
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    T5ScoreVariance
        Estimate, standard error and closed form.
    """
    d_model = check_int(d_model, "d_model", minimum=1)
    d_kv = check_int(d_kv, "d_kv", minimum=1)
    check_choice(init, "init", T5_INITS)
    trials = check_int(trials, "trials", minimum=2)
    pairs = check_int(pairs, "pairs", minimum=1)
    gen = generator(rng)
    key_std = 1.0 / math.sqrt(d_model)
    query_std = key_std / math.sqrt(d_kv) if init == "t5" else key_std
    per = np.empty(trials)
    for t in range(trials):
        wq = gen.standard_normal((d_model, d_kv)) * query_std
        wk = gen.standard_normal((d_model, d_kv)) * key_std
        x = gen.standard_normal((pairs, d_model))
        y = gen.standard_normal((pairs, d_model))
        s = np.einsum("ij,ij->i", x @ wq, y @ wk)
        per[t] = np.mean(s * s)
    est, se = mean_stderr(per)
    cf = d_kv * (d_model * query_std**2) * (d_model * key_std**2)
    return T5ScoreVariance(init=init, d_model=d_model, d_kv=d_kv, trials=trials, pairs=pairs,
                           query_std=query_std, key_std=key_std, estimate=float(est),
                           stderr=float(se), closed_form=float(cf))

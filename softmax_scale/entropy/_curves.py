"""Entropy against length: how the published scales hold attention entropy as ``n`` grows.

Two regimes (score models of :mod:`softmax_scale.schemes`, ``alpha`` from
:func:`~softmax_scale.schemes.scheme_alpha`):

* **isotropic**: ``n`` i.i.d. scores (normal, or cosine(d)); statistics from
  the exact evaluator ``softmax_stats(..., method="exact")``;
* **signal-plus-noise** (``match`` given): one key with a fixed score among
  ``n - 1`` i.i.d. random keys.  For cosine scores the fixed score is the
  cosine ``match`` of the query with its matching key; for normal scores it is
  the z-score ``match * sqrt(d)`` (the same key: ``q.k / sqrt(d) = c sqrt(d)``
  for a cosine ``c`` between vectors of norm ``sqrt(d)``); statistics from
  :func:`softmax_scale.signal_stats`, the signal's attention share ``E[p_0]``
  beside the entropy.

Public functions: :func:`entropy_curve`, :func:`entropy_curves`,
:func:`extrapolation_table`, :func:`phase_diagram`.  The scale that holds the entropy
still is :mod:`softmax_scale.entropy.invariant`; a decoder's constant scale, :mod:`softmax_scale.objectives.causal`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .._util.progress import progress_bar
from .._util.rng import seed_sequence
from .._util.validation import (
    ALPHA_MAX,
    check_choice,
    check_choices,
    check_float_array,
    check_int,
    check_mc_options,
    check_n_array,
    check_real,
    show,
)
from ..distributions import Cosine, Normal, get_distribution
from ..schemes import SCHEMES, SCORE_MODELS, STANDARD, SchemeKeys, default_list, pinned
from ..stats import softmax_stats
from .signal import METHODS, signal_stats

__all__ = [
    "DEFAULT_SCHEMES",
    "EntropyCurve",
    "ExtrapolationTable",
    "PhaseDiagram",
    "check_match",
    "entropy_curve",
    "entropy_curves",
    "extrapolation_table",
    "phase_diagram",
]

#: The schemes compared by default: the registry's ``entropy_curves`` list (it follows registrations).
DEFAULT_SCHEMES = default_list("entropy_curves")


# ---------------------------------------------------------------------------------------------
# entropy curves


@dataclass(frozen=True)
class EntropyCurve:
    """Entropy and gradient objective against the number of keys under one scheme.

    Attributes
    ----------
    ns : ndarray
        Numbers of keys.
    alpha : ndarray
        The softmax scale on unit scores at each ``n``.
    scheme : str
        Scheme key (or ``"custom"`` for given scales).
    score_model : str
        ``"normal"`` or ``"cosine"``.
    d : int
        Head dimension.
    match : float or None
        The signal key's cosine (None: isotropic).
    method : str
        ``"exact"`` or ``"mc"``.
    entropy, entropy_se : ndarray
        ``E[H]`` in nats and its standard error (0 for exact).
    entropy_ratio : ndarray
        ``E[H] / log n`` (1: uniform attention; 0: one-hot).
    renyi2 : ndarray
        ``-log E[sum p^2]``, the collision (Rényi-2) entropy of the mean collision probability.
    sum_p2, sum_p2_se : ndarray
        ``E[sum p^2]`` and its standard error.
    grad, grad_se : ndarray
        ``E[G]``, ``G = alpha (1 - sum p^2)``, and its standard error.
    signal_share, signal_share_se : ndarray
        ``E[p_0]`` of the signal key (NaN in the isotropic regime).
    """

    ns: np.ndarray
    alpha: np.ndarray
    scheme: str
    score_model: str
    d: int
    match: float | None
    method: str
    entropy: np.ndarray
    entropy_se: np.ndarray
    entropy_ratio: np.ndarray
    renyi2: np.ndarray
    sum_p2: np.ndarray
    sum_p2_se: np.ndarray
    grad: np.ndarray
    grad_se: np.ndarray
    signal_share: np.ndarray
    signal_share_se: np.ndarray

    @property
    def drift(self) -> np.ndarray:
        """``E[H](n) - E[H](ns[0])``."""
        return self.entropy - self.entropy[0]


def _score_dist(score_model, d):
    return Normal() if score_model == "normal" else Cosine(d)


def check_match(match, *, optional: bool = True):
    """The matching key's cosine with the query, a float in ``[-1, 1]`` (``None`` when ``optional``: isotropic scores).

    Anything else is a ValueError naming ``match`` and the rule.
    """
    if match is None and optional:
        return None
    rule = "a cosine in [-1, 1]" + (" (or None for isotropic scores)" if optional else "")
    try:
        match = check_real(match, "match", rule)
    except TypeError as err:
        raise ValueError(str(err)) from None
    if not -1.0 <= match <= 1.0:
        raise ValueError(f"`match` must be {rule}, got {show(match)}")
    return match


def _check_common(score_model, d, match, method):
    check_choice(score_model, "score_model", SCORE_MODELS)
    d = check_int(d, "d", minimum=2)
    check_choice(method, "method", METHODS)
    return d, check_match(match)


def _evaluate(ns, alphas, score_model, d, match, method, trials, rng, progress):
    """Statistics for ``alphas[i, k]`` at ``ns[i]``: dict of (len(ns), k) arrays."""
    names = ("entropy", "sum_p2", "grad", "share")
    out = {k: np.full(alphas.shape, np.nan) for k in names}
    se = {k: np.zeros(alphas.shape) for k in names}
    dist = _score_dist(score_model, d)
    ss = seed_sequence(rng) if method == "mc" else None
    seeds = ss.spawn(len(ns)) if ss is not None else [None] * len(ns)
    if progress is None:
        progress = method == "mc" or alphas.size > 2000
    for i in progress_bar(range(len(ns)), desc="entropy curve", disable=not progress, leave=False):
        n = int(ns[i])
        a = np.ascontiguousarray(alphas[i])
        if match is None:
            kw = {"method": method}
            if method == "mc":
                kw.update(trials=trials, rng=seeds[i])
            else:
                kw["error_estimate"] = False
            r = softmax_stats(a, n, dist, **kw)
            share, share_se = np.full(a.shape, np.nan), np.full(a.shape, np.nan)
        else:
            s0 = match if score_model == "cosine" else match * math.sqrt(d)
            r = signal_stats(a, n, s0, dist, method=method, trials=trials, rng=seeds[i])
            share, share_se = r.share, r.share_se
        for key, val, err in (("entropy", r.entropy, r.entropy_se), ("sum_p2", r.sum_p2, r.sum_p2_se),
                              ("grad", r.grad, r.grad_se), ("share", share, share_se)):
            out[key][i] = val
            se[key][i] = err
    return out, se


def _curve(ns, alpha, scheme, score_model, d, match, method, out, se, k):
    with np.errstate(divide="ignore"):
        ratio = out["entropy"][:, k] / np.log(ns)
    return EntropyCurve(ns=ns.copy(), alpha=alpha.copy(), scheme=scheme, score_model=score_model, d=d, match=match,
                        method=method, entropy=out["entropy"][:, k], entropy_se=se["entropy"][:, k],
                        entropy_ratio=ratio, renyi2=-np.log(out["sum_p2"][:, k]), sum_p2=out["sum_p2"][:, k],
                        sum_p2_se=se["sum_p2"][:, k], grad=out["grad"][:, k], grad_se=se["grad"][:, k],
                        signal_share=out["share"][:, k], signal_share_se=se["share"][:, k])


def _check_schemes(schemes) -> tuple:
    """Scheme keys of the registry; a view of it (:class:`~softmax_scale.schemes.SchemeKeys`) read now."""
    return check_choices(tuple(schemes) if isinstance(schemes, SchemeKeys) else schemes, "schemes", SCHEMES)


#: Monte Carlo trials per ``n`` of :func:`entropy_curve` with ``method="mc"`` unless given.
_MC_TRIALS = 2000


def _scheme_alphas(nn, scheme, d, score_model, pin_length, params) -> np.ndarray:
    """The scheme's ``alpha`` at each ``n``, or a ValueError naming what set it when one is not a usable scale."""
    with np.errstate(over="ignore", invalid="ignore"):  # a parameter too large overflows: refused below
        a = np.atleast_1d(pinned(scheme, pin_length, **params).alpha(nn, d, score_model))
    bad = ~np.isfinite(a) | (a < 0) | (a > ALPHA_MAX)
    if bad.any():
        what = (", ".join(f"`{k}` = {show(v)}" for k, v in params.items())
                or (f"`pin_length` = {show(pin_length)}" if pin_length is not None else "its published defaults"))
        raise ValueError(f"scheme {scheme!r} with {what} gives the scale alpha = {show(a[bad][0])} at n = "
                         f"{show(nn[bad][0])} (d = {d}, {score_model} scores): alpha must be finite, >= 0 and <= "
                         f"{show(ALPHA_MAX)}")
    return a


def entropy_curves(ns, schemes=DEFAULT_SCHEMES, *, d=128, score_model="normal", match=None, method="exact",
                   trials=None, rng=None, progress=None, pin_length=None, scheme_params=None) -> dict:
    """:func:`entropy_curve` for several schemes at once (one evaluator call per ``n``).

    Parameters
    ----------
    ns : array_like
        Numbers of keys, integers ``>= 2``.
    schemes : sequence of str
        Scheme keys (see :func:`softmax_scale.schemes.list_schemes`); by default
        :data:`DEFAULT_SCHEMES`.
    d, score_model, match, method, trials, rng, progress
        As in :func:`entropy_curve`.
    pin_length : int, optional
        Pin every scheme that has a training length at this ``L``
        (:func:`softmax_scale.schemes.pinned`); ``None`` keeps each scheme's published default.
    scheme_params : dict, optional
        ``{scheme: {param: value}}`` overriding published defaults (after the pinning).

    Returns
    -------
    dict
        ``{scheme: EntropyCurve}``.
    """
    nn, _ = check_n_array(ns, "ns")
    d, match = _check_common(score_model, d, match, method)
    trials, rng = check_mc_options(method, trials, rng, default_trials=_MC_TRIALS)
    scheme_params = scheme_params or {}
    schemes = _check_schemes(schemes)
    if pin_length is not None:
        pin_length = check_int(pin_length, "pin_length", minimum=2)
    alphas = np.column_stack([_scheme_alphas(nn, s, d, score_model, pin_length, scheme_params.get(s, {}))
                              for s in schemes])
    out, se = _evaluate(nn, alphas, score_model, d, match, method, trials, rng, progress)
    return {s: _curve(nn, alphas[:, k], s, score_model, d, match, method, out, se, k) for k, s in enumerate(schemes)}


def entropy_curve(ns, scheme=STANDARD, *, d=128, score_model="normal", match=None, method="exact",
                  trials=None, rng=None, progress=None, pin_length=None, **scheme_params) -> EntropyCurve:
    """``E[H]``, ``E[H]/log n``, Rényi-2 entropy and ``E[G]`` against ``n`` under a scheme.

    Parameters
    ----------
    ns : array_like
        Numbers of keys (in a causal model, the query's position), integers ``>= 2``.
    scheme : str
        Scheme key; its scale at each ``n`` becomes ``alpha`` through ``score_model``.
    d : int
        Head dimension.
    score_model : {"normal", "cosine"}
        Unit-variance entries (normal scores, ``alpha = m sqrt(d)``) or q, k of
        norm ``sqrt(d)`` (cosine(d) scores, ``alpha = m d``).
    match : float, optional
        Add one matching key whose cosine with the query is ``match``
        (signal-plus-noise); None for isotropic scores.
    method : {"exact", "mc"}
        Deterministic quadrature, or Monte Carlo with standard errors (a check).
    trials, rng
        Monte Carlo trials per ``n`` (default 2000) and seed; ``method="mc"`` only.
    progress : bool, optional
        Progress bar (by default for Monte Carlo).
    pin_length : int, optional
        Pin the scheme at this ``L`` (:func:`softmax_scale.schemes.pinned`); ``None`` keeps
        its published defaults.
    **scheme_params
        Other parameters of the scheme (e.g. ``min_n=16``), applied after the pinning.

    Returns
    -------
    EntropyCurve
    """
    check_choice(scheme, "scheme", SCHEMES)
    return entropy_curves(ns, (scheme,), d=d, score_model=score_model, match=match, method=method,
                          trials=trials, rng=rng, progress=progress, pin_length=pin_length,
                          scheme_params={scheme: scheme_params})[scheme]


# ---------------------------------------------------------------------------------------------
# extrapolation table


@dataclass(frozen=True)
class ExtrapolationTable:
    """Entropy drift and signal share at ``n = L, 2L, ..., 64L`` for a model trained at length ``L``.

    Arrays are indexed ``[scheme, factor]``.

    Attributes
    ----------
    train_length : int
        ``L``; schemes with a training length are pinned at it.
    factors : ndarray
        ``n / L``.
    schemes : tuple of str
        Row labels.
    score_model : str
        ``"normal"`` or ``"cosine"``.
    d : int
        Head dimension.
    match : float
        The signal key's cosine in the signal-plus-noise regime.
    drift_isotropic : ndarray
        ``E[H](n) - E[H](L)`` for i.i.d. scores, nats.
    drift_signal : ndarray
        The same with the matching key present.
    share_signal : ndarray
        ``E[p_0]``, the matching key's attention share.
    log_n_drift : ndarray
        ``log(n / L)``: the drift of uniform attention, for reference.
    """

    train_length: int
    factors: np.ndarray
    schemes: tuple
    score_model: str
    d: int
    match: float
    drift_isotropic: np.ndarray
    drift_signal: np.ndarray
    share_signal: np.ndarray
    log_n_drift: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __str__(self):
        head = f"{'scheme':<20}" + "".join(f"{f'{f:g}L':>9}" for f in self.factors)
        lines = [f"L = {self.train_length}, {self.score_model} scores, d = {self.d}, match cosine {self.match}", ""]
        for title, arr, fmt in (("entropy drift, isotropic (nats)", self.drift_isotropic, "{:+9.3f}"),
                                ("entropy drift, signal-plus-noise (nats)", self.drift_signal, "{:+9.3f}"),
                                ("signal share E[p_0]", self.share_signal, "{:9.3f}")):
            lines += [title, head]
            lines += [f"{s:<20}" + "".join(fmt.format(v) for v in row) for s, row in zip(self.schemes, arr)]
            lines.append("")
        return "\n".join(lines)


def extrapolation_table(train_length=512, schemes=DEFAULT_SCHEMES, *, d=128, score_model="cosine", match=1.0,
                        factors=(1, 2, 4, 8, 16, 32, 64)) -> ExtrapolationTable:
    """Drift ``E[H](n) - E[H](L)`` and the signal share for each scheme at ``n = L, 2L, ..., 64L``.

    Parameters
    ----------
    train_length : int
        ``L`` (512 by default; the note's experiment used 64).  Every scheme is
        pinned at ``L`` by :func:`softmax_scale.schemes.pinned` (each scheme's
        :attr:`~softmax_scale.schemes.Scheme.pin_rule`).
    schemes : sequence of str
        Scheme keys (by default :data:`DEFAULT_SCHEMES`).
    d : int
        Head dimension.
    score_model : {"cosine", "normal"}
        Score model.
    match : float
        The matching key's cosine in the signal-plus-noise regime.
    factors : sequence of float
        ``n / L`` (each ``>= 1``, ``L`` times it a whole number of keys), the first of which is the
        reference (normally 1).

    Returns
    -------
    ExtrapolationTable
    """
    L = check_int(train_length, "train_length", minimum=2)
    schemes = _check_schemes(schemes)
    fac = check_float_array(factors, "factors")
    ns = np.round(L * fac)
    if fac.ndim != 1 or fac.size == 0 or np.any(fac < 1) or np.any(np.abs(L * fac - ns) > 1e-9 * ns):
        raise ValueError(f"`factors` must be a non-empty sequence of numbers >= 1 that make L * factor a whole number "
                         f"of keys, got {factors!r}")
    match = check_match(match, optional=False)
    iso = entropy_curves(ns, schemes, d=d, score_model=score_model, pin_length=L)
    sig = entropy_curves(ns, schemes, d=d, score_model=score_model, match=match, pin_length=L)
    return ExtrapolationTable(
        train_length=L, factors=fac, schemes=tuple(schemes), score_model=score_model, d=int(d), match=float(match),
        drift_isotropic=np.array([iso[s].drift for s in schemes]),
        drift_signal=np.array([sig[s].drift for s in schemes]),
        share_signal=np.array([sig[s].signal_share for s in schemes]),
        log_n_drift=np.log(fac / fac[0]))


# ---------------------------------------------------------------------------------------------
# phase diagram


@dataclass(frozen=True)
class PhaseDiagram:
    """``E[H] / log n`` on a grid of ``n`` and ``alpha / sqrt(2 log n)`` (normal scores).

    Attributes
    ----------
    ns : ndarray
        Numbers of keys (columns).
    ratios : ndarray
        ``alpha / sqrt(2 log n)`` (rows); 1 is the freezing line.
    entropy_ratio : ndarray
        ``E[H] / log n``, shape ``(len(ratios), len(ns))``.
    dist : str
        Score distribution.
    """

    ns: np.ndarray
    ratios: np.ndarray
    entropy_ratio: np.ndarray
    dist: str


def phase_diagram(ns=None, ratios=None, dist="normal", *, d=None) -> PhaseDiagram:
    """``E[H]/log n`` over ``n`` and ``alpha/sqrt(2 log n)`` by the exact evaluator.

    Parameters
    ----------
    ns : array_like, optional
        Numbers of keys; default 25 values from 16 to 1e6.
    ratios : array_like, optional
        ``alpha / sqrt(2 log n)``; default 41 values from 0 to 2.
    dist, d
        Score distribution.

    Returns
    -------
    PhaseDiagram
    """
    nn, _ = check_n_array(np.unique(np.round(np.geomspace(16, 1e6, 25))) if ns is None else ns, "ns")
    r = np.linspace(0.0, 2.0, 41) if ratios is None else check_float_array(ratios, "ratios")
    if r.ndim != 1 or r.size == 0 or not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError(f"`ratios` must be a non-empty 1-D array of finite numbers >= 0, got {ratios!r}")
    dist_obj = get_distribution(dist, d)
    out = np.empty((r.size, nn.size))
    for j, n in enumerate(nn):
        ln = math.log(n)
        st = softmax_stats(r * math.sqrt(2.0 * ln), int(n), dist_obj, method="exact", error_estimate=False)
        out[:, j] = np.asarray(st.entropy) / ln
    return PhaseDiagram(ns=nn, ratios=r, entropy_ratio=out, dist=dist_obj.label)

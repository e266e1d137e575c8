"""The toolkit's per-head scale past a reference length: a factor on each head's scores, from what the head shows.

A head shows its scale ``alpha`` on unit-variance scores at the reference number of keys
``n_ref`` (``sigma sqrt(n/(n-1))``, as :func:`softmax_scale.head_stats` reads it) and its pooled
standardised scores (a :class:`~softmax_scale.WeightedSample`, :func:`~softmax_scale.heads.head_pools`).
At each ``n`` a rule asks for the factor ``f`` on the scores that gives the i.i.d. entropy
``E[H](f alpha, n)`` on that distribution a target:

- ``toolkit_iid``: hold ``E[H]`` at its i.i.d. value at ``n_ref``:
  ``E[H](f alpha, n) = E[H](alpha, n_ref)``;
- ``toolkit_measured``: cancel the drift the head *shows*, not the one the i.i.d. model predicts:
  its measured entropy rises by ``b ln(n / n_ref)`` (``b`` its slope against ``ln n``), and the
  i.i.d. model only says how the entropy at ``n`` answers the factor:
  ``E[H](f alpha, n) = E[H](alpha, n) - b ln(n / n_ref)``, the target clipped to
  ``[1e-3, ln n - 1e-3]``.  A head whose entropy rises as the i.i.d. model says gets the
  ``toolkit_iid`` factor, one whose entropy does not move gets 1, one whose entropy falls ``f < 1``.

For one key among ``n`` the rule ``toolkit_share`` (:func:`share_factors`) holds instead the
share of a key of fixed standardised gap ``s0`` (the head's source key, measured at ``n_ref``):
``E[p_0](f alpha, n) = E[p_0](alpha, n_ref)`` under :func:`softmax_scale.signal_stats` on the
head's pooled scores; the share rises with ``f`` for a key above the others, and the root in
``ln f`` is bracketed on the same points, then found by ``brentq``.

*How it is solved.*  ``E[H]`` is the exact evaluator's (:class:`~softmax_scale.exact.EntropyForNs`,
~1e-13 nats) and falls with ``f``.  The root in ``x = ln f`` is bracketed on the points
``x = 0, +-1/16, +-1/8, ... +-32`` (each evaluated once for every ``n``), then found by ``brentq``
on the exact ``E[H]`` at that ``n`` to ``1e-12`` in ``x``: no interpolation.  A factor is NaN
where no root exists (a target out of reach) or the evaluator cannot answer (a head frozen far past
its critical scale).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from .._util.validation import check_choice, check_int, check_n_array, check_positive_float
from ..distributions import get_distribution
from ..exact import EntropyForNs, TooMuchWork, exact_stats

__all__ = ["SHARE_RULE", "TOOLKIT_RULES", "exact_entropy", "rule_factors", "share_factors"]

#: The toolkit's two per-head entropy rules (:func:`rule_factors`).
TOOLKIT_RULES = ("toolkit_iid", "toolkit_measured")
#: The toolkit's per-head rule for one key among ``n`` (:func:`share_factors`).
SHARE_RULE = "toolkit_share"

_TARGET_MARGIN = 1e-3  # nats: toolkit_measured's target stays this far inside (0, ln n)
_FIRST_STEP = 1.0 / 16.0  # the bracket search tries ln f = +-1/16, +-1/8, +-1/4, ...
_LAST_STEP = 32.0  # ... up to +-32: f from e^-32 to e^32
_XTOL = 1e-12  # on ln f
#: The share rule searches ``ln f`` in ``[-4, 4]`` only: the exact evaluator's work grows like the
#: scale, and a head that needs ``f > e^4 = 55`` to hold a key's share is an argmax already.
_SHARE_LAST_STEP = 4.0
_SHARE_XTOL = 1e-9  # on ln f: the share's own accuracy is about 1e-10
_FTOL = 1e-13  # nats: E[H] this close to its target is a root (the evaluator's own accuracy)


def exact_entropy(alpha, n, dist) -> float:
    """The exact evaluator's ``E[H]`` at one ``alpha`` and ``n`` on ``dist``; NaN where it cannot answer.

    Bad arguments are errors (``ValueError`` naming the parameter); only the evaluator's own
    refusal (a head frozen far past its critical scale) becomes NaN.
    """
    alpha = check_positive_float(alpha, "alpha", allow_zero=True)
    n = check_int(n, "n", minimum=2)
    dist = get_distribution(dist)
    try:
        return float(exact_stats(alpha, n, dist, error_estimate=False).entropy)
    except (ValueError, RuntimeError):
        return np.nan


def rule_factors(rule, alpha, dist, n_ref, ns, *, slope=None) -> np.ndarray:
    """The factor on a head's scores at each ``n`` of ``ns`` under one of :data:`TOOLKIT_RULES`.

    Parameters
    ----------
    rule : {"toolkit_iid", "toolkit_measured"}
        See the module docstring.
    alpha : float
        The head's scale on unit-variance scores at ``n_ref``, ``> 0``.
    dist : WeightedSample, ScoreDistribution, "normal" or array_like
        Its score distribution: its pooled standardised scores.
    n_ref : int
        The reference number of keys, ``>= 2`` (the training length, or the mean ``n`` of the
        queries the head was measured on).
    ns : array_like of int
        Numbers of keys at which the factor is solved, ``>= 2``.
    slope : float
        ``toolkit_measured`` only (required there): ``dH/d ln n`` of the head's measured entropy.

    Returns
    -------
    ndarray, shape (len(ns),)
        ``f`` with ``E[H](f alpha, n)`` at the rule's target; NaN where there is none or the exact
        evaluator cannot answer.
    """
    check_choice(rule, "rule", TOOLKIT_RULES)
    alpha = check_positive_float(alpha, "alpha")
    dist = get_distribution(dist)
    n_ref = check_int(n_ref, "n_ref", minimum=2)
    nn, _ = check_n_array(ns, "ns")
    if rule == "toolkit_measured":
        if slope is None:
            raise ValueError("`slope` is required by rule='toolkit_measured': dH/d ln n of the head's measured entropy")
        if isinstance(slope, (bool, np.bool_)) or not isinstance(slope, (int, float, np.integer, np.floating)):
            raise TypeError(f"`slope` must be a finite number, got {slope!r} of type {type(slope).__name__}")
        if not math.isfinite(slope):
            raise ValueError(f"`slope` must be a finite number, got {slope!r}")
    elif slope is not None:
        raise ValueError(f"`slope` applies to rule='toolkit_measured' only, got slope={slope!r} with rule={rule!r}")
    at_one = _entropies(EntropyForNs(dist, np.append(nn, float(n_ref))), alpha)  # f = 1, every n and n_ref
    if rule == "toolkit_iid":
        target = np.full(nn.size, at_one[-1])
    else:
        drift = at_one[:-1] - float(slope) * np.log(nn / n_ref)
        target = np.clip(drift, _TARGET_MARGIN, np.log(nn) - _TARGET_MARGIN)
    return _solve(dist, alpha, nn, target, at_one[:-1])


def _entropies(ev, alpha):
    """``ev(alpha)``, NaN for every ``n`` where the evaluator cannot answer."""
    try:
        return np.asarray(ev(alpha), dtype=np.float64)
    except TooMuchWork:
        return np.full(ev.ns.size, np.nan)


def _solve(dist, alpha, ns, target, at_one):
    """``f`` with ``E[H](f alpha, n) = target`` at each ``n``: bracketed in ``ln f`` on shared points, then brentq."""
    out = np.full(ns.size, np.nan)
    g0 = at_one - target
    lo = np.where(g0 > 0, 0.0, np.nan)  # largest ln f seen with E[H] above the target
    hi = np.where(g0 <= 0, 0.0, np.nan)  # smallest ln f seen with E[H] at or below it
    glo, ghi = np.where(g0 > 0, g0, np.nan), np.where(g0 <= 0, g0, np.nan)
    todo = np.isfinite(g0)
    shared = EntropyForNs(dist, ns)
    for sign in (1.0, -1.0):  # up while some E[H] is above its target, down while some is below
        want = todo & (np.isnan(hi) if sign > 0 else np.isnan(lo))
        step = _FIRST_STEP
        while want.any() and step <= _LAST_STEP:
            x = sign * step
            step *= 2.0
            g = _entropies(shared, alpha * math.exp(x)) - target
            if not np.all(np.isfinite(g[want])):  # the evaluator's limit: no bracket that way
                break
            if sign > 0:
                below = want & (g <= 0)
                hi[below], ghi[below] = x, g[below]
                more = want & ~below
                lo[more], glo[more] = x, g[more]
            else:
                above = want & (g > 0)
                lo[above], glo[above] = x, g[above]
                more = want & ~above
                hi[more], ghi[more] = x, g[more]
            want = more
    for j in np.flatnonzero(todo & np.isfinite(lo) & np.isfinite(hi)):
        out[j] = math.exp(_root(EntropyForNs(dist, ns[j:j + 1]), alpha, target[j], lo[j], hi[j], glo[j], ghi[j]))
    return out


class _Found(Exception):
    """Raised by the function brentq is solving when it is already at the target within :data:`_FTOL`."""

    def __init__(self, x):
        super().__init__(x)
        self.x = x


def _root(one, alpha, target, lo, hi, glo, ghi):
    """``x`` in ``[lo, hi]`` with ``one(alpha e^x) = target`` (``glo > 0 >= ghi`` known); NaN if the evaluator refuses."""
    if abs(ghi) <= _FTOL:
        return hi
    known = {lo: glo, hi: ghi}  # the bracket's ends are evaluated already

    def g(x):
        if x in known:
            return known[x]
        v = float(one(alpha * math.exp(x))[0]) - target
        if abs(v) <= _FTOL:
            raise _Found(x)
        return v

    try:
        return brentq(g, lo, hi, xtol=_XTOL, rtol=4 * np.finfo(float).eps)
    except _Found as found:
        return found.x
    except TooMuchWork:
        return np.nan


def _share(dist, alpha, n, s0) -> float:
    from ..entropy.signal import signal_stats

    try:
        return float(signal_stats(alpha, int(n), s0, dist=dist).share)
    except TooMuchWork:
        return np.nan


def share_factors(alpha, dist, s0, n_ref, ns) -> np.ndarray:
    """The factor that holds the i.i.d. share of one key of gap ``s0`` at its value at ``n_ref``, at each ``n``.

    Parameters
    ----------
    alpha : float
        The head's scale on unit-variance scores at ``n_ref``, ``> 0``.
    dist : WeightedSample, ScoreDistribution, "normal" or array_like
        The other keys' standardised scores.
    s0 : float
        The key's standardised gap (finite).
    n_ref : int
        The reference number of keys, ``>= 2``.
    ns : array_like of int
        Numbers of keys, ``>= 2``.

    Returns
    -------
    ndarray, shape (len(ns),)
        ``f`` with ``E[p_0](f alpha, n) = E[p_0](alpha, n_ref)``; NaN where the share cannot be
        reached within ``f`` in ``[e^-4, e^4]`` (a key not above the others) or the evaluator
        cannot answer.
    """
    alpha = check_positive_float(alpha, "alpha")
    dist = get_distribution(dist)
    if isinstance(s0, (bool, np.bool_)) or not isinstance(s0, (int, float, np.integer, np.floating)) \
            or not math.isfinite(s0):
        raise ValueError(f"`s0` must be a finite number, got {s0!r}")
    s0 = float(s0)
    n_ref = check_int(n_ref, "n_ref", minimum=2)
    nn, _ = check_n_array(ns, "ns")
    target = _share(dist, alpha, n_ref, s0)
    out = np.full(nn.size, np.nan)
    if not np.isfinite(target):
        return out
    start = 0.0  # ln f of the previous n's root: the search starts there (f moves little from one n to the next)
    for j, n in enumerate(nn):
        def g(x, n=n):
            return target - _share(dist, alpha * math.exp(x), n, s0)  # falls as f grows

        g0 = g(start)
        if not np.isfinite(g0):
            continue
        if abs(g0) <= _FTOL:
            out[j] = math.exp(start)
            continue
        sign = 1.0 if g0 > 0 else -1.0
        lo, step = start, _FIRST_STEP
        while True:
            x = min(max(start + sign * step, -_SHARE_LAST_STEP), _SHARE_LAST_STEP)
            gx = g(x)
            if not np.isfinite(gx):
                break
            if np.sign(gx) != np.sign(g0) or gx == 0.0:
                a, b = sorted((lo, x))
                root = brentq(g, a, b, xtol=_SHARE_XTOL, rtol=4 * np.finfo(float).eps)
                out[j], start = math.exp(root), root
                break
            if abs(x) >= _SHARE_LAST_STEP:
                break
            lo, step = x, step * 2.0
    return out

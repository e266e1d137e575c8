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

For one key among ``n`` two rules act on the share ``E[p_0](f alpha, n)`` of a key of fixed
standardised gap ``s0`` (the head's source key, measured at ``n_ref``) under
:func:`softmax_scale.signal_stats` on the head's pooled scores, averaged over groups of queries as
:func:`~softmax_scale.heads.predict_share` is.  The share is ``1/n`` at ``f = 0``; for a key above
the others it rises and then falls towards the chance that the key is the largest (it rises for
ever only where the key is above every score the distribution can draw), so holding it has zero or
two roots:

- ``toolkit_share_max`` (:func:`share_max`): the factor that maximises the share at ``n``, the
  root of its derivative in ``ln f`` (an exact integral,
  :func:`softmax_scale.signal_share_slope`);
- ``toolkit_share`` (:func:`share_factors`): hold the share at its value at ``n_ref``, the target
  clipped to the maximum reachable at ``n``, the root taken on the side of the maximum where the
  head sits at ``n_ref`` (the branch through ``f = 1`` there).

Both scan ``ln f`` in ``[-4, 4]`` at steps of ``1/4`` (every ``n`` from one pass of the
quadrature per point and group) and refine by ``brentq`` to ``1e-9`` in ``ln f``.

*How it is solved.*  ``E[H]`` is the exact evaluator's (:class:`~softmax_scale.exact.EntropyForNs`,
~1e-13 nats) and falls with ``f``.  The root in ``x = ln f`` is bracketed on the points
``x = 0, +-1/16, +-1/8, ... +-32`` (each evaluated once for every ``n``), then found by ``brentq``
on the exact ``E[H]`` at that ``n`` to ``1e-12`` in ``x``: no interpolation.  A factor is NaN
where no root exists (a target out of reach) or the evaluator cannot answer (a head frozen far past
its critical scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from .._util.validation import check_choice, check_int, check_n_array, check_positive_float
from ..distributions import get_distribution, is_sample
from ..exact import EntropyForNs, TooMuchWork, exact_stats
from ._share import share_groups

__all__ = ["SHARE_MAX_RULE", "SHARE_RULE", "SHARE_RULES", "TOOLKIT_RULES", "ShareMax", "exact_entropy", "rule_factors",
           "share_factors", "share_max", "share_rule_factors"]

#: The toolkit's two per-head entropy rules (:func:`rule_factors`).
TOOLKIT_RULES = ("toolkit_iid", "toolkit_measured")
#: The toolkit's per-head rule that holds one key's share among ``n`` (:func:`share_factors`).
SHARE_RULE = "toolkit_share"
#: The toolkit's per-head rule that maximises one key's share among ``n`` (:func:`share_max`).
SHARE_MAX_RULE = "toolkit_share_max"
#: The per-head rules for one key among ``n`` (:func:`share_rule_factors`).
SHARE_RULES = (SHARE_RULE, SHARE_MAX_RULE)

_TARGET_MARGIN = 1e-3  # nats: toolkit_measured's target stays this far inside (0, ln n)
_FIRST_STEP = 1.0 / 16.0  # the bracket search tries ln f = +-1/16, +-1/8, +-1/4, ...
_LAST_STEP = 32.0  # ... up to +-32: f from e^-32 to e^32
_XTOL = 1e-12  # on ln f
#: The share rules search ``ln f`` in ``[-4, 4]`` only: the exact evaluator's work grows like the
#: scale, and a head that needs ``f > e^4 = 55`` to hold or raise a key's share is an argmax already.
_SHARE_LAST_STEP = 4.0
_SHARE_XTOL = 1e-9  # on ln f: the share's own accuracy is about 1e-10
_SHARE_STEP = 0.25  # the share rules scan ln f in [-4, 4] at this step
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


def _curve(dist, a, g, x, ns):
    """The mean over the groups ``(a, g)`` of ``E[p_0](e^x a, n)`` and its derivative in ``x = ln f``, at every ``n``.

    NaN at every ``n`` where the evaluator cannot answer.
    """
    from ..entropy.signal import signal_share_slope

    f = math.exp(x)
    share, slope = np.zeros(ns.size), np.zeros(ns.size)
    try:
        for ak, gk in zip(a, g):
            sh, sl = signal_share_slope(f * ak, ns, float(gk), dist)
            share += sh
            slope += f * ak * sl
    except TooMuchWork:
        return np.full(ns.size, np.nan), np.full(ns.size, np.nan)
    return share / a.size, slope / a.size


@dataclass(frozen=True)
class _Scan:
    """The group-mean share ``S`` and its slope ``D = dS/d ln f`` on the points ``x`` (rows) at every ``n`` (columns)."""

    dist: object
    a: np.ndarray
    g: np.ndarray
    x: np.ndarray
    share: np.ndarray
    slope: np.ndarray

    @classmethod
    def of(cls, dist, a, g, ns):
        x = np.arange(-_SHARE_LAST_STEP, _SHARE_LAST_STEP + _SHARE_STEP / 2, _SHARE_STEP)
        pts = [_curve(dist, a, g, xi, ns) for xi in x]
        return cls(dist, a, g, x, np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))

    def one(self, j, n, which):
        """``x -> S`` (``which`` 0) or ``x -> D`` (1) at ``n`` (column ``j``); the scan's own points are not evaluated again."""
        ns = np.array([float(n)])
        known = dict(zip(self.x.tolist(), (self.share if which == 0 else self.slope)[:, j].tolist()))

        def value(x):
            return known[x] if x in known else float(_curve(self.dist, self.a, self.g, x, ns)[which][0])

        return value


def _above_all(dist, g) -> bool:
    """Whether every group's key is above every score ``dist`` can draw (each draw's share then rises with ``f``)."""
    top = dist.support[1]
    return bool(np.all(g > top) if is_sample(dist) else np.all(g >= top))


def _unbounded(size):
    """:class:`ShareMax` of a key above every score: the supremum 1 at infinite factor."""
    return ShareMax(np.full(size, np.inf), np.ones(size), np.ones(size, dtype=bool), np.zeros(size, dtype=bool))


def _maxima(scan, ns):
    """:class:`ShareMax` from a scan: the best point, refined by ``brentq`` on ``D`` in the cell where it changes sign."""
    if _above_all(scan.dist, scan.g):
        return _unbounded(ns.size)
    factor, best = np.full(ns.size, np.nan), np.full(ns.size, np.nan)
    edge = np.zeros(ns.size, dtype=bool)
    x = scan.x
    for j, n in enumerate(ns):
        s, d = scan.share[:, j], scan.slope[:, j]
        ok = np.flatnonzero(np.isfinite(s) & np.isfinite(d))
        if ok.size == 0:
            continue
        i = int(ok[np.argmax(s[ok])])
        k = i + 1 if d[i] > 0 else i - 1  # the neighbour the share rises towards
        if d[i] == 0.0:
            xi = x[i]
        elif k in ok and np.sign(d[k]) != np.sign(d[i]):
            xi = brentq(scan.one(j, n, 1), *sorted((x[i], x[k])), xtol=_SHARE_XTOL, rtol=4 * np.finfo(float).eps)
        elif k in ok:  # two extrema inside one cell: the scan's best point
            xi = x[i]
        else:  # the share still rises past the last point the scan could evaluate
            xi, edge[j] = x[i], True
        factor[j] = math.exp(xi)
        best[j] = s[i] if xi == x[i] else max(s[i], scan.one(j, n, 0)(xi))
    return ShareMax(factor, best, np.zeros(ns.size, dtype=bool), edge)


@dataclass(frozen=True)
class ShareMax:
    """The factor on a head's scores that maximises the i.i.d. share of one key at each ``n`` (:func:`share_max`).

    Attributes
    ----------
    factor : ndarray
        ``f`` maximising ``E[p_0](f alpha, n)`` (the mean over the groups); ``inf`` where the
        supremum is at infinite factor, NaN where the evaluator cannot answer.
    share : ndarray
        The share there (1 where ``unbounded``).
    unbounded : ndarray of bool
        The key is above every score the distribution can draw, in every group: each draw's share
        rises with ``f`` to 1, so the supremum is 1 at ``f = inf``.
    edge : ndarray of bool
        The share still rises past the end of the searched range ``f`` in ``[e^-4, e^4]`` (or past
        where the evaluator can answer): ``factor`` is that end, the maximum lies beyond.
    """

    factor: np.ndarray
    share: np.ndarray
    unbounded: np.ndarray
    edge: np.ndarray


def share_max(alpha, dist, s0, ns) -> ShareMax:
    """The factor that maximises the i.i.d. share of one key of gap ``s0`` at each ``n``.

    ``E[p_0](f alpha, n)`` (:func:`softmax_scale.signal_stats` on ``dist``) is ``1/n`` at ``f = 0``
    and, for a key above the others, rises and then falls towards ``P(the key is the largest)``
    as ``f`` grows, or rises all the way to it: for ever where the key is above every score
    (``unbounded``), past ``e^4`` for a key far above the bulk at small ``n`` (``edge``).  Where
    the share has two local maxima the larger is taken, so the factor can jump between two ``n``.
    Its derivative in ``ln f`` is an exact integral over the same quadrature
    (:func:`softmax_scale.signal_share_slope`).  The mean over the groups is
    evaluated with its derivative at ``ln f = -4, -3.75, ..., 4``; the best point is refined by
    ``brentq`` on the derivative in the neighbouring cell where it changes sign, to ``1e-9`` in ``ln f``.

    Parameters
    ----------
    alpha : float or array_like
        The head's scale on unit-variance scores, ``> 0``; or one per group of queries
        (:attr:`KeyShare.alpha_bins`), ``s0`` then of the same length and the share the mean over
        the groups, as in :func:`softmax_scale.heads.predict_share` (NaN groups left out).
    dist : WeightedSample, ScoreDistribution, "normal" or array_like
        The other keys' standardised scores.
    s0 : float or array_like
        The key's standardised gap (:attr:`KeyShare.gap`), or one per group (:attr:`KeyShare.gap_bins`).
    ns : array_like of int
        Numbers of keys, ``>= 2``.

    Returns
    -------
    ShareMax
    """
    a, g = share_groups(alpha, s0, "s0")
    dist = get_distribution(dist)
    nn, _ = check_n_array(ns, "ns")
    if _above_all(dist, g):
        return _unbounded(nn.size)
    return _maxima(_Scan.of(dist, a, g, nn), nn)


def share_factors(alpha, dist, s0, n_ref, ns) -> np.ndarray:
    """The factor that holds the i.i.d. share of one key of gap ``s0`` at its value at ``n_ref``, at each ``n``.

    The target ``E[p_0](alpha, n_ref)`` is clipped to the largest share reachable at ``n``
    (:func:`share_max`), which gives the maximising factor where the target is out of reach.
    Below it the share has up to two roots, one on each side of the maximum; the rule takes the
    one on the side where the head sits at ``n_ref`` (rising: ``f`` below the maximiser; falling:
    above it), the crossing of the target nearest the maximum on the scan of :func:`share_max`.
    That is the branch through ``f = 1`` at ``n = n_ref``: the factor is 1 at the reference and
    moves continuously with ``n`` (the other root would change a head that needs no change, and
    jump from one side to the other).

    Parameters
    ----------
    alpha : float or array_like
        The head's scale on unit-variance scores at ``n_ref``, ``> 0``, or one per group (as in
        :func:`share_max`).
    dist : WeightedSample, ScoreDistribution, "normal" or array_like
        The other keys' standardised scores.
    s0 : float or array_like
        The key's standardised gap (finite), or one per group.
    n_ref : int
        The reference number of keys, ``>= 2``.
    ns : array_like of int
        Numbers of keys, ``>= 2``.

    Returns
    -------
    ndarray, shape (len(ns),)
        ``f`` with ``E[p_0](f alpha, n) = min(E[p_0](alpha, n_ref), max_f E[p_0](f alpha, n))``;
        NaN where that root lies outside ``f`` in ``[e^-4, e^4]`` or the evaluator cannot answer.
    """
    a, g = share_groups(alpha, s0, "s0")
    dist = get_distribution(dist)
    n_ref = check_int(n_ref, "n_ref", minimum=2)
    nn, _ = check_n_array(ns, "ns")
    scan = _Scan.of(dist, a, g, np.append(nn, float(n_ref)))
    mid = int(np.flatnonzero(scan.x == 0.0)[0])
    target, rising = scan.share[mid, -1], scan.slope[mid, -1] >= 0
    out = np.full(nn.size, np.nan)
    if not np.isfinite(target):
        return out
    top = _maxima(scan, nn)
    for j, n in enumerate(nn):
        s = scan.share[:, j]
        if abs(s[mid] - target) <= _FTOL:
            out[j] = 1.0
        elif target >= top.share[j]:
            out[j] = top.factor[j]
        elif np.isfinite(top.share[j]):
            out[j] = _crossing(scan, j, n, target, top, rising)
    return out


def _crossing(scan, j, n, target, top, rising):
    """``f`` with ``S = target`` on the given side of the maximum, the crossing nearest it; NaN if outside the scan.

    From the maximum (share above the target) outward over the scan's points, the first point
    below the target closes the bracket; ``brentq`` on ``S - target`` finds the root in it.
    """
    s = scan.share[:, j]
    if top.unbounded[j]:  # the maximum is at f = inf: start from the scan's last point
        x0, s0 = scan.x[-1], s[-1]
    else:
        x0, s0 = math.log(top.factor[j]), top.share[j]
    order = np.flatnonzero(scan.x < x0)[::-1] if rising else np.flatnonzero(scan.x > x0)
    for k in order:
        if not (np.isfinite(s[k]) and s0 >= target):
            return np.nan
        if s[k] < target:
            break
        x0, s0 = scan.x[k], s[k]
    else:
        return np.nan
    g = scan.one(j, n, 0)
    root = brentq(lambda x: g(x) - target, *sorted((scan.x[k], x0)), xtol=_SHARE_XTOL, rtol=4 * np.finfo(float).eps)
    return math.exp(root)


def share_rule_factors(rule, alpha, dist, s0, ns, *, n_ref=None) -> np.ndarray:
    """The factor on a head's scores at each ``n`` of ``ns`` under one of :data:`SHARE_RULES`.

    Parameters
    ----------
    rule : {"toolkit_share", "toolkit_share_max"}
        ``toolkit_share``: :func:`share_factors` (hold the share at its value at ``n_ref``);
        ``toolkit_share_max``: the factor of :func:`share_max`, an infinite one (a key above every
        score) given as ``e^4``, the end of the range the share rules search (the head is an argmax there).
    alpha, dist, s0, ns
        As in :func:`share_max`.
    n_ref : int
        ``toolkit_share`` only (required there): the reference number of keys.

    Returns
    -------
    ndarray, shape (len(ns),)
        The factors; NaN where the rule has none.
    """
    check_choice(rule, "rule", SHARE_RULES)
    if rule == SHARE_RULE:
        if n_ref is None:
            raise ValueError(f"`n_ref` is required by rule={SHARE_RULE!r}: the number of keys whose share is held")
        return share_factors(alpha, dist, s0, n_ref, ns)
    if n_ref is not None:
        raise ValueError(f"`n_ref` applies to rule={SHARE_RULE!r} only, got n_ref={n_ref!r} with rule={rule!r}")
    return np.minimum(share_max(alpha, dist, s0, ns).factor, math.exp(_SHARE_LAST_STEP))

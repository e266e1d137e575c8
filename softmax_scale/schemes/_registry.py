"""Published softmax scales, side by side: one :class:`Scheme` object per scale, in one registry.

:func:`attention_scale` returns the multiplier ``m`` a scheme puts in front of
``q.k`` (``applies_to="qk"``) or in front of a cosine (``applies_to="cosine"``),
vectorised over the number of keys ``n``.  In a causal model ``n`` is the query's
1-indexed position: the position-dependent schemes (``qwen_logn``, ``llama4``) are
implemented in that position form.

:func:`scheme_alpha` turns ``m`` into the softmax scale ``alpha`` on unit
scores under a score model:

* ``"normal"``: q, k with i.i.d. unit-variance entries, so
  ``q.k = sqrt(d) z`` with ``z ~ N(0, 1)`` and ``alpha = m sqrt(d)``;
* ``"cosine"``: q, k of norm ``sqrt(d)``, so ``q.k = d cos`` and
  ``alpha = m d`` on cosine(d) scores.

A cosine scale multiplies the cosine itself: ``alpha = m`` on cosine
scores and ``alpha = m / sqrt(d)`` on normal scores (``cos ~ z / sqrt(d)``).

The published scales themselves (their formulas, checks and pinning rules) are the catalogue,
:mod:`._published`; they are registered first, in its order, and cannot be removed.

A contributor adds a scale by writing one :class:`Scheme` and passing it to
:func:`register_scheme`: its formula, defaults, checks, pinning rule, training names,
default lists and plot style are read from it by every caller (the command line, the
entropy curves and figures, the models and the training harness).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .._util.validation import check_choice, check_int, check_n_array
from ._published import CRITICAL, ENTROPY_INVARIANT, PUBLISHED, QWEN_LOGN, SSMAX, STANDARD, YARN
from ._scheme import DEFAULT_LISTS, Scheme, Style

__all__ = [
    "COSINE_SCHEMES",
    "CRITICAL",
    "DEFAULT_LISTS",
    "ENTROPY_INVARIANT",
    "QK_SCHEMES",
    "QWEN_LOGN",
    "SCHEMES",
    "SCORE_MODELS",
    "SSMAX",
    "STANDARD",
    "TRAIN_NAMES",
    "YARN",
    "PinnedScheme",
    "Scheme",
    "SchemeKeys",
    "Style",
    "attention_scale",
    "default_list",
    "list_schemes",
    "pinned",
    "register_scheme",
    "registered",
    "scheme_alpha",
    "scheme_factor",
    "train_scheme",
    "unregister_scheme",
]

SCORE_MODELS = ("normal", "cosine")


# ---------------------------------------------------------------------------------------------
# The registry


_REGISTRY: dict[str, Scheme] = {}

#: key -> Scheme, in the order of registration (the published ones first); read-only, follows
#: :func:`register_scheme`.
SCHEMES = MappingProxyType(_REGISTRY)


class SchemeKeys(Sequence):
    """Names read from the registry at every use, in registry order: a view that follows registrations.

    Parameters
    ----------
    names : callable
        ``Scheme -> iterable of str``: the names one scheme contributes.
    """

    def __init__(self, names: Callable[[Scheme], Iterable[str]]):
        self._names = names

    def _current(self) -> tuple:
        return tuple(name for s in _REGISTRY.values() for name in self._names(s))

    def __getitem__(self, i):
        return self._current()[i]

    def __len__(self) -> int:
        return len(self._current())

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __contains__(self, name) -> bool:
        return name in self._current()

    def __eq__(self, other):
        if isinstance(other, (SchemeKeys, tuple, list)):
            return self._current() == tuple(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._current())


#: Keys of the schemes that scale ``q.k`` / a cosine.
QK_SCHEMES = SchemeKeys(lambda s: (s.key,) if s.applies_to == "qk" else ())
COSINE_SCHEMES = SchemeKeys(lambda s: (s.key,) if s.applies_to == "cosine" else ())
#: Every training name (:attr:`Scheme.train_names`).
TRAIN_NAMES = SchemeKeys(lambda s: tuple(s.train_names))


def default_list(name: str) -> SchemeKeys:
    """The keys of the schemes in the default list ``name`` (:data:`DEFAULT_LISTS`), following registrations.

    Parameters
    ----------
    name : str
        A key of :data:`DEFAULT_LISTS`.

    Returns
    -------
    SchemeKeys
    """
    check_choice(name, "name", DEFAULT_LISTS)
    return SchemeKeys(lambda s: (s.key,) if name in s.default_in else ())


def register_scheme(scheme: Scheme) -> Scheme:
    """Add a scheme to the registry: every caller of the registry then knows it.

    Parameters
    ----------
    scheme : Scheme
        A key not yet registered, training names that are neither another scheme's key nor
        another scheme's training names.

    Returns
    -------
    Scheme
        ``scheme``.
    """
    if not isinstance(scheme, Scheme):
        raise TypeError(f"`scheme` must be a Scheme, got {scheme!r}")
    if scheme.key in _REGISTRY:
        raise ValueError(f"`scheme`: the key {scheme.key!r} is registered already")
    for name in scheme.train_names:
        if name != scheme.key and name in _REGISTRY:
            raise ValueError(f"`scheme`: the training name {name!r} is the key of another scheme")
        if name in TRAIN_NAMES:
            raise ValueError(f"`scheme`: the training name {name!r} is registered already")
    if scheme.key in TRAIN_NAMES:
        raise ValueError(f"`scheme`: the key {scheme.key!r} is a training name of another scheme")
    _REGISTRY[scheme.key] = scheme
    return scheme


def unregister_scheme(key: str) -> Scheme:
    """Remove a scheme added by :func:`register_scheme` (the published ones stay).

    Parameters
    ----------
    key : str
        The key of a scheme added by :func:`register_scheme`.

    Returns
    -------
    Scheme
        The scheme removed.
    """
    check_choice(key, "key", _REGISTRY)
    if key in _PUBLISHED_KEYS:
        raise ValueError(f"`key`: {key!r} is a published scheme; only added ones can be removed")
    return _REGISTRY.pop(key)


@contextlib.contextmanager
def registered(scheme: Scheme):
    """Register ``scheme`` for the duration of a ``with`` block, then remove it.

    Parameters
    ----------
    scheme : Scheme
        As in :func:`register_scheme`.

    Yields
    ------
    Scheme
        ``scheme``.
    """
    register_scheme(scheme)
    try:
        yield scheme
    finally:
        unregister_scheme(scheme.key)


#: The keys of the published schemes (:data:`~._published.PUBLISHED`): registered first, never removed.
_PUBLISHED_KEYS = frozenset(s.key for s in PUBLISHED)
for _s in PUBLISHED:
    register_scheme(_s)
del _s


def list_schemes() -> list[Scheme]:
    """Every scheme with its formula, defaults and source, in registry order.

    Returns
    -------
    list of Scheme
    """
    return list(_REGISTRY.values())


def train_scheme(name: str, alpha: float | None = None) -> tuple[Scheme, dict]:
    """The scheme a training name stands for, and the parameters the run's ``alpha`` sets.

    Parameters
    ----------
    name : str
        One of :data:`TRAIN_NAMES` (e.g. ``alpha_star``, ``alpha``).
    alpha : float, optional
        The run's constant, given to the parameter the name sets (``alpha`` sets ``value``).

    Returns
    -------
    (Scheme, dict)
    """
    check_choice(name, "scheme", TRAIN_NAMES)
    scheme = next(s for s in _REGISTRY.values() if name in s.train_names)
    param = scheme.train_names[name]
    return scheme, ({} if param is None else {param: alpha})




# ---------------------------------------------------------------------------------------------
# Evaluation


def _check_positions(n) -> tuple[np.ndarray, bool]:
    """Numbers of keys / 1-indexed positions: integers >= 1 (a query at position 1 sees one key)."""
    return check_n_array(n, "n", minimum=1)


def _params(scheme, params):
    """The scheme and its parameters (defaults, then ``params``), checked."""
    check_choice(scheme, "scheme", _REGISTRY)
    info = _REGISTRY[scheme]
    unknown = set(params) - set(info.defaults)
    if unknown:
        allowed = sorted(info.defaults) or "none"
        raise ValueError(f"scheme {scheme!r} has no parameter(s) {sorted(unknown)}; its parameters: {allowed}")
    full = {**info.defaults, **params}
    return info, full, (full if info.check is None else info.check(full))


def attention_scale(n, d, scheme=STANDARD, **params):
    """The multiplier a published scheme puts in front of ``q.k`` (or of a cosine).

    Parameters
    ----------
    n : int or array_like
        Number of keys the query sees; in a causal model its 1-indexed
        position (``>= 1``).  Vectorised.
    d : int
        Head dimension (``>= 1``; ``>= 2`` for ``cosine_gradient_optimal``).
    scheme : str
        A key of :func:`list_schemes`.
    **params
        The scheme's parameters; published defaults in ``SCHEMES[scheme].defaults``
        (e.g. ``train_length=512`` for ``entropy_invariant``).

    Returns
    -------
    float or ndarray
        ``m``; a float for scalar ``n``.

    Examples
    --------
    >>> import softmax_scale.schemes as sc
    >>> round(sc.attention_scale(4096, 64, "entropy_invariant"), 6)  # log_512(4096)/8
    0.166667
    """
    info, _, checked = _params(scheme, params)
    nn, scalar = _check_positions(n)
    d = check_int(d, "d", minimum=1)
    out = info.multiplier(nn, d, checked)
    return float(out[0]) if scalar else out


def scheme_alpha(n, d, scheme=STANDARD, score_model="normal", **params):
    """The softmax scale ``alpha`` on unit scores that a scheme implies under a score model.

    Parameters
    ----------
    n, d, scheme, **params
        As in :func:`attention_scale`.
    score_model : {"normal", "cosine"}
        ``"normal"``: i.i.d. unit-variance entries, ``alpha = m sqrt(d)``;
        ``"cosine"``: q, k of norm ``sqrt(d)``, ``alpha = m d``.  For a
        cosine scheme ``alpha = m`` (cosine) or ``m / sqrt(d)`` (normal).

    Returns
    -------
    float or ndarray
    """
    check_choice(score_model, "score_model", SCORE_MODELS)
    m = attention_scale(n, d, scheme, **params)
    d = int(d)
    if _REGISTRY[scheme].applies_to == "qk":
        return m * (math.sqrt(d) if score_model == "normal" else float(d))
    return m / math.sqrt(d) if score_model == "normal" else m


@dataclass(frozen=True)
class PinnedScheme:
    """A scheme with every parameter fixed, pinned at a training length (see :func:`pinned`).

    Attributes
    ----------
    scheme : str
        The scheme's key.
    pin_length : int or None
        ``L`` the scheme is pinned at; ``None`` when it was not pinned.
    params : Mapping
        Every parameter of the scheme: published defaults, then the pinning rule's values,
        then the caller's overrides (read-only).
    """

    scheme: str
    pin_length: int | None
    params: Mapping = field(default_factory=dict)

    def scale(self, n, d):
        """The multiplier ``m`` on ``q.k`` (or on a cosine): :func:`attention_scale` with :attr:`params`."""
        return attention_scale(n, d, self.scheme, **self.params)

    def factor(self, n, d):
        """``m(n) / standard(n)``: the factor on ``q.k / sqrt(d)``; exactly 1 for ``standard``.

        Only for schemes that scale ``q.k``.
        """
        if _REGISTRY[self.scheme].applies_to != "qk":
            raise ValueError(f"`scheme` must scale q.k (not a cosine scheme) to give a factor on q.k/sqrt(d), "
                             f"got {self.scheme!r}")
        return self.scale(n, d) / attention_scale(n, d, STANDARD)

    def alpha(self, n, d, score_model="normal"):
        """The softmax scale on unit scores under ``score_model`` (:func:`scheme_alpha`)."""
        return scheme_alpha(n, d, self.scheme, score_model, **self.params)


def pinned(scheme: str, pin_length: int | None = None, **params) -> PinnedScheme:
    """A scheme pinned to ``standard`` at the length ``L`` (a model's training length): the one rule used everywhere.

    Each scheme's rule is written once, in its registry entry (:attr:`Scheme.pin`):

    - ``entropy_invariant``, ``qwen_logn``, ``yarn``, ``longrope``: ``train_length = L``;
    - ``llama4``: ``floor_scale = L`` (its first temperature step at ``n = L``);
    - ``ssmax``: ``s = 1 / ln L``, so ``s log n = 1`` at ``n = L`` (its published ``s`` is
      learned with the model; applied to a model trained without it, ``s = 0.43`` would
      multiply the logits by ``0.43 ln L``);
    - every other scheme has no training length and is returned with its published defaults.

    Parameters
    ----------
    scheme : str
        A key of :func:`list_schemes`.
    pin_length : int, optional
        ``L >= 2``; ``None`` keeps the published defaults (no pinning).
    **params
        Overrides applied after the pinning rule (e.g. ``min_n=16``).

    Returns
    -------
    PinnedScheme

    Examples
    --------
    >>> import softmax_scale.schemes as sc
    >>> sc.pinned("qwen_logn", 512).params["train_length"]
    512
    >>> float(sc.pinned("ssmax", 64).factor(64, 32))
    1.0
    """
    check_choice(scheme, "scheme", _REGISTRY)
    info = _REGISTRY[scheme]
    L = None if pin_length is None else check_int(pin_length, "pin_length", minimum=2)
    pin = info.pin(L) if (info.pin is not None and L is not None) else {}
    _, full, _ = _params(scheme, {**pin, **params})
    return PinnedScheme(scheme, L, MappingProxyType(full))


def scheme_factor(n, d, scheme=STANDARD, pin_length=None, **params) -> np.ndarray:
    """The per-query factor ``m(n) / standard(n)`` of a scheme pinned at ``pin_length``, as float64.

    The one factor on ``q.k / sqrt(d)`` the real decoders and the training harness apply:
    ``pinned(scheme, pin_length, **params).factor(n, d)``.

    Parameters
    ----------
    n : int or array_like
        Number of keys each query sees (``>= 1``).
    d : int
        Head dimension.
    scheme : str
        A key of :data:`QK_SCHEMES`.
    pin_length : int, optional
        ``L`` the scheme is pinned at (:func:`pinned`).
    **params
        Overrides after the pinning rule.

    Returns
    -------
    ndarray
    """
    return np.asarray(pinned(scheme, pin_length, **params).factor(n, d), dtype=np.float64)

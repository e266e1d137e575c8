"""The softmax scale in the trained model: a factor per query on ``q.k / sqrt(d_head)``.

The factor is a function of the number of keys ``n`` the query sees (the sequence length in a
bidirectional model, ``position + 1`` in a causal one): the registry's one per-query factor,
:func:`softmax_scale.schemes.scheme_factor`, of a scheme pinned at the pin length ``P``.  A run
names its scale by a training name of the registry (:attr:`softmax_scale.schemes.Scheme.train_names`):

- ``standard``: 1;
- ``entropy_invariant``: ``log_P n`` (the note pins at 512, so 6/9 at n = 64);
- ``ssmax``: ``s log n``; ``s`` is learned per head (the scheme's
  :attr:`~softmax_scale.schemes.Scheme.learned` parameter), initialised by the pinning rule to
  ``1/ln P``; the fixed part passed to the model is ``log n`` (:func:`query_factors` returns it
  times that initial ``s``, and :func:`ssmax_init` gives ``s``);
- ``alpha_star``: the mean-field ``alpha*(n)`` on unit-variance scores (``gradient_optimal``);
- ``alpha``: a constant, ``gradient_optimal`` with ``value=alpha``;
- any other key of the registry that scales ``q.k`` (``qwen_logn``, ``yarn``, ...), pinned at
  ``P``: for test-time overrides (``qwen_logn`` at 64 is ``max(1, log_64 n)``).

Factors are computed in float64 here, once per shape, and handed to the jitted model as float32.
"""

from __future__ import annotations

import numpy as np

from .._util.validation import check_choice, check_int
from ..schemes import QK_SCHEMES, SCHEMES, SSMAX, TRAIN_NAMES, pinned, scheme_factor, train_scheme

__all__ = ["FIRST_SCALES", "TRAIN_SCALES", "keys_seen", "learned_init", "learned_parameter", "model_factors", "query_factors", "ssmax_init"]

#: The scales a model can be trained with: the registry's training names (they follow registrations).
TRAIN_SCALES = TRAIN_NAMES
#: The scales FIRST's model (:mod:`softmax_scale.train.first`) is trained with: none, their unpinned ``ln n``
#: (``chiang_cholak``), ``log_P n`` pinned at the training keys ``P = L + 1`` (``entropy_invariant``), and
#: SSMax's ``s ln n``.  Here, beside the other scale names, so that reading FIRST's results needs no JAX.
FIRST_SCALES = ("standard", "chiang_cholak", "entropy_invariant", "ssmax")


def keys_seen(length: int, causal: bool) -> np.ndarray:
    """Number of keys each query of a sequence of ``length`` sees: ``length`` for all, or ``1..length``."""
    length = check_int(length, "length", minimum=1)
    if causal:
        return np.arange(1, length + 1, dtype=np.float64)
    return np.full(length, float(length))


def _resolve(scheme, alpha):
    """The registry key and parameters of a training name (or of a registry key, as it is)."""
    if scheme in TRAIN_SCALES:
        info, params = train_scheme(scheme, alpha)
        return info.key, params
    return scheme, {}


def learned_parameter(scheme: str) -> str | None:
    """The parameter a model trained with ``scheme`` learns per head (its :attr:`~softmax_scale.schemes.Scheme.learned`).

    ``"s"`` for ``ssmax``; ``None`` for a scale with nothing learned (or a name outside the registry).
    The model keeps it per head in ``params["layers"][i]["s"]``, a multiplier of its fixed factors.
    """
    key, _ = _resolve(scheme, None)
    return SCHEMES[key].learned if key in SCHEMES else None


def learned_init(scheme: str, pin_length: int) -> float | None:
    """The initial value of :func:`learned_parameter`, by the scheme's pinning rule at ``pin_length`` (``None``: none learned)."""
    learned = learned_parameter(scheme)
    return None if learned is None else float(pinned(_resolve(scheme, None)[0], pin_length).params[learned])


def query_factors(scheme: str, length: int, d_head: int, *, causal: bool, pin_length: int,
                  alpha: float | None = None) -> np.ndarray:
    """The factor on ``q.k/sqrt(d_head)`` for each query of a sequence of ``length`` (float64).

    Parameters
    ----------
    scheme : str
        One of :data:`TRAIN_SCALES`, or a registry scheme that scales ``q.k`` (a test-time override).
    length : int
        Sequence length (``>= 1``).
    d_head : int
        Head dimension.
    causal : bool
        Whether query ``i`` sees ``i + 1`` keys (else every query sees ``length``).
    pin_length : int
        The length the scheme is pinned at (``>= 2``).
    alpha : float, optional
        The constant of ``scheme="alpha"``.

    Returns
    -------
    ndarray, shape (length,)
        For ``ssmax``, ``s0 log n`` with the initial ``s0 = 1/ln pin_length``.
    """
    check_choice(scheme, "scheme", sorted(set(TRAIN_SCALES) | set(QK_SCHEMES)))
    n = keys_seen(length, causal)
    pin_length = check_int(pin_length, "pin_length", minimum=2)
    key, params = _resolve(scheme, alpha)
    return scheme_factor(n, check_int(d_head, "d_head", minimum=1), key, pin_length, **params)


def ssmax_init(pin_length: int) -> float:
    """The initial per-head ``s`` of SSMax: its pinning rule's ``s`` at ``pin_length`` (``1/ln pin_length``)."""
    return learned_init(SSMAX, pin_length)


def model_factors(config, length: int, *, scheme: str | None = None, pin_length: int | None = None) -> np.ndarray:
    """The per-query factors a model of ``config`` is run with at ``length`` (float32, for the jitted model).

    With ``scheme=None`` the trained scale: for a scheme with a learned parameter (``ssmax``)
    the fixed part, ``log n`` (the model multiplies it by its learned per-head ``s``).  With a
    ``scheme`` (and ``pin_length``, by default ``config.pin``): that scale instead of the
    trained one, at test time only.
    """
    pin = config.pin if pin_length is None else pin_length
    if scheme is None:
        f = query_factors(config.scheme, length, config.d_head, causal=config.causal, pin_length=config.pin,
                          alpha=config.alpha)
        init = learned_init(config.scheme, config.pin)
        if init is not None:
            f = f / init
    else:
        f = query_factors(scheme, length, config.d_head, causal=config.causal, pin_length=pin)
    return f.astype(np.float32)

"""The softmax scale in the trained model: a factor per query on ``q.k / sqrt(d_head)``.

The factor is a function of the number of keys ``n`` the query sees (the sequence length in a
bidirectional model, ``position + 1`` in a causal one), taken from the toolkit's scheme registry
through :func:`softmax_scale.schemes.pinned`, the one rule for a scheme pinned at a length:

- ``"standard"``: 1;
- ``"entropy_invariant"``: ``log_P n`` (``P`` the pin length; the note pins at 512, so 6/9 at n = 64);
- ``"ssmax"``: ``s log n``; ``s`` is learned per head, initialised to ``pinned("ssmax", P).params["s"]
  = 1/ln P``; the fixed part passed to the model is ``log n`` (:func:`query_factors` returns it
  times that initial ``s``, and :func:`ssmax_init` gives ``s``);
- ``"alpha_star"``: the mean-field ``alpha*(n)`` on unit-variance scores,
  ``pinned("gradient_optimal").factor(n, d)``;
- ``"alpha"``: a constant, ``pinned("gradient_optimal", value=alpha).factor(n, d)``;
- any other key of the registry that scales ``q.k`` (``qwen_logn``, ``yarn``, ...), pinned at
  ``P``: for test-time overrides (``qwen_logn`` at 64 is ``max(1, log_64 n)``).

Factors are computed in float64 here, once per shape, and handed to the jitted model as float32.
"""

from __future__ import annotations

import numpy as np

from .._util.validation import check_choice, check_int
from ..schemes import QK_SCHEMES, pinned

__all__ = ["TRAIN_SCALES", "keys_seen", "model_factors", "query_factors", "ssmax_init"]

#: The scales a model can be trained with.
TRAIN_SCALES = ("standard", "entropy_invariant", "ssmax", "alpha_star", "alpha")


def keys_seen(length: int, causal: bool) -> np.ndarray:
    """Number of keys each query of a sequence of ``length`` sees: ``length`` for all, or ``1..length``."""
    length = check_int(length, "length", minimum=1)
    if causal:
        return np.arange(1, length + 1, dtype=np.float64)
    return np.full(length, float(length))


def _pinned(scheme, pin_length, alpha):
    if scheme == "alpha_star":
        return pinned("gradient_optimal")
    if scheme == "alpha":
        return pinned("gradient_optimal", value=alpha)
    return pinned(scheme, pin_length)


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
    return np.asarray(_pinned(scheme, pin_length, alpha).factor(n, check_int(d_head, "d_head", minimum=1)),
                      dtype=np.float64)


def ssmax_init(pin_length: int) -> float:
    """The initial per-head ``s`` of SSMax: ``pinned("ssmax", pin_length).params["s"]`` (``1/ln pin_length``)."""
    return float(pinned("ssmax", pin_length).params["s"])


def model_factors(config, length: int, *, scheme: str | None = None, pin_length: int | None = None) -> np.ndarray:
    """The per-query factors a model of ``config`` is run with at ``length`` (float32, for the jitted model).

    With ``scheme=None`` the trained scale: for ``ssmax`` the fixed part ``log n`` (the model
    multiplies it by its learned per-head ``s``).  With a ``scheme`` (and ``pin_length``, by
    default ``config.pin``): that scale instead of the trained one, at test time only.
    """
    pin = config.pin if pin_length is None else pin_length
    if scheme is None:
        f = query_factors(config.scheme, length, config.d_head, causal=config.causal, pin_length=config.pin,
                          alpha=config.alpha)
        if config.scheme == "ssmax":
            f = f / ssmax_init(config.pin)
    else:
        f = query_factors(scheme, length, config.d_head, causal=config.causal, pin_length=pin)
    return f.astype(np.float32)

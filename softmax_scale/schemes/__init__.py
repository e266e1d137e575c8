"""Published softmax scales: the registry of :class:`Scheme` objects, the one pinning rule, and RoPE variants (:mod:`.rope`).

:mod:`._scheme` says what a scheme is, :mod:`._registry` holds and evaluates them, and the catalogue
:mod:`._published` lists the published ones, which the registry registers first.
"""

from ._registry import (
    COSINE_SCHEMES,
    CRITICAL,
    DEFAULT_LISTS,
    ENTROPY_INVARIANT,
    QK_SCHEMES,
    QWEN_LOGN,
    SCHEMES,
    SCORE_MODELS,
    SSMAX,
    STANDARD,
    TRAIN_NAMES,
    YARN,
    PinnedScheme,
    Scheme,
    SchemeKeys,
    Style,
    attention_scale,
    default_list,
    list_schemes,
    pinned,
    register_scheme,
    registered,
    scheme_alpha,
    scheme_factor,
    train_scheme,
    unregister_scheme,
)

__all__ = ["COSINE_SCHEMES", "CRITICAL", "DEFAULT_LISTS", "ENTROPY_INVARIANT", "QK_SCHEMES", "QWEN_LOGN", "SCHEMES",
           "SCORE_MODELS", "SSMAX", "STANDARD", "TRAIN_NAMES", "YARN", "PinnedScheme", "Scheme", "SchemeKeys", "Style",
           "attention_scale", "default_list", "list_schemes", "pinned", "register_scheme", "registered",
           "scheme_alpha", "scheme_factor", "train_scheme", "unregister_scheme"]

"""Published softmax scales: the registry, the one pinning rule, and RoPE variants (:mod:`.rope`)."""

from ._registry import (
    COSINE_SCHEMES,
    QK_SCHEMES,
    SCHEMES,
    SCORE_MODELS,
    PinnedScheme,
    SchemeInfo,
    attention_scale,
    list_schemes,
    pinned,
    scheme_alpha,
)

__all__ = ["COSINE_SCHEMES", "QK_SCHEMES", "SCHEMES", "SCORE_MODELS", "PinnedScheme", "SchemeInfo", "attention_scale",
           "list_schemes", "pinned", "scheme_alpha"]

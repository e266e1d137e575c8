"""What :func:`softmax_scale.head_stats` accepts, as frameworks hand it over: logits with mask fills, or probabilities.

**Mask fills in logits.**  Frameworks mask a key by adding (or writing) a large finite negative
number to its logit rather than ``-inf``: Hugging Face ``torch.finfo(dtype).min`` (-65504 in
float16, -3.4e38 in float32), Keras and many tutorials ``-1e9``, the original BERT and GPT-2 code
``-1e4`` (added to the score, so ``-1e4 + s``).  Read as logits, such keys count in ``n`` and make
``sigma`` enormous (the i.i.d. prediction would need a grid of 1e10 nodes).  An allowed entry
*looks like a fill* (:func:`fill_entries`) when

- it lies more than :data:`FILL_GAP` = 745 below the largest allowed logit of its row: its
  probability is then exactly 0 even in float64 (``exp(-745.2)`` underflows), a mask in effect;
  a trained head's logits are ``q·k/sqrt(d)`` of vectors of moderate norm and spread over tens,
  not hundreds (the sharpest head of all-MiniLM-L6-v2, L0H2, has ``sigma`` 19.6 at ``n = 512``),
  while the smallest fill in use (``-1e4``) leaves a gap of about ten thousand; or
- its whole row lies at or below :data:`FILL_ROW_MAX` = -1000 (a padding query whose every key is
  filled: a constant row at the fill, which would otherwise read as a uniform softmax); no
  head's largest logit is near -1000.

``-inf`` in an allowed position is a fill too.  :func:`head_stats` refuses such entries by
default with one line that says what they look like and how to pass ``mask=`` or
``causal=True``; ``mask_fill="mask"`` treats them as masked keys, ``mask_fill="keep"`` counts
them as keys (for the rare logits that really spread that wide).

**Probabilities.**  Rows of attention probabilities (``output_attentions=True``) must be
non-negative and sum to 1 over their allowed keys within :data:`PROB_SUM_TOL` (bf16 rounds each
probability to 3 significant digits); they are renormalised in float64.  A row of
non-negative logits that sums to 1 is almost surely probabilities passed as logits
(:func:`looks_like_probabilities`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FILL_GAP", "FILL_ROW_MAX", "MASK_FILLS", "PROB_SUM_TOL", "check_scores", "describe_fill", "fill_entries",
           "looks_like_probabilities"]

#: A logit this far below its row's largest has probability exactly 0 in float64: a mask in effect.
FILL_GAP = 745.0
#: A row whose largest allowed logit is at or below this is filled everywhere (a padding query).
FILL_ROW_MAX = -1000.0
#: What :func:`softmax_scale.head_stats` does with entries that look like a mask fill.
MASK_FILLS = ("refuse", "mask", "keep")
#: Probability rows must sum to 1 within this (over their allowed keys).
PROB_SUM_TOL = 1e-2

#: The fills frameworks use, to name them in messages.
_KNOWN_FILLS = ((float(np.finfo(np.float16).min), "the float16 minimum"),
                (float(np.finfo(np.float32).min), "the float32 minimum"),
                (float(np.finfo(np.float64).min), "the float64 minimum"),
                (-1e4, "-1e4"), (-1e9, "-1e9"), (-1e10, "-1e10"), (-1e30, "-1e30"))


def check_scores(x, name: str) -> np.ndarray:
    """``x`` as an array of real numbers of shape ``(..., n_queries, n_keys)``, ``n_keys >= 2``; else raise naming ``name``."""
    arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"`{name}` must be an array of real numbers, shape (..., n_queries, n_keys), got dtype {arr.dtype}")
    if arr.ndim < 2:
        raise ValueError(f"`{name}` must have shape (..., n_queries, n_keys), got shape {arr.shape}")
    if arr.shape[-1] < 2:
        raise ValueError(f"`{name}` must have at least 2 keys (last axis), got shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"`{name}` must not be empty, got shape {arr.shape}")
    return arr


def fill_entries(s, allowed) -> np.ndarray:
    """Boolean ``(Q, K)``: the allowed entries of one head's float64 logits ``s`` that look like a mask fill.

    ``allowed`` is a boolean ``(Q, K)`` or None (every key).  ``s`` must hold no NaN or ``+inf``
    where allowed.  See the module docstring for the rule.
    """
    masked = s if allowed is None else np.where(allowed, s, -np.inf)
    top = masked.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):  # -inf - 745 is -inf; a row of -inf has top -inf
        fill = (masked < top - FILL_GAP) | (top <= FILL_ROW_MAX)
    if allowed is not None:
        fill &= allowed
    return fill


def describe_fill(v: float) -> str:
    """A fill value as a reader recognises it: ``-3.40282e+38 (the float32 minimum)``, ``-1e9``, ``-9998.2 (-1e4 plus the score)``."""
    if not np.isfinite(v):
        return "-inf"
    for ref, label in _KNOWN_FILLS:
        named = not label.startswith("-")
        if v == ref:
            return f"{v:.6g} ({label})" if named else label
        if abs(v - ref) <= 1e-2 * abs(ref):
            return f"{v:.6g} ({label} plus the score)"
    return f"{v:.6g}"


def looks_like_probabilities(arr) -> bool:
    """Whether every entry of ``arr`` (``(..., n_queries, n_keys)``) is ``>= 0`` and every row sums to 1 within :data:`PROB_SUM_TOL`."""
    if not np.all(arr >= 0):  # False on NaN too
        return False
    sums = arr.sum(axis=-1, dtype=np.float64)
    return bool(np.all(np.abs(sums - 1.0) <= PROB_SUM_TOL))

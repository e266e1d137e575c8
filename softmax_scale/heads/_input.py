"""What :func:`softmax_scale.head_stats` and :func:`~softmax_scale.heads.head_pools` accept, checked once here.

:func:`check_head_input` checks the arguments the two share (the scores, ``mask``, ``causal``,
``mask_fill``) and :meth:`HeadInput.head` one head's scores: its float64 scores, the keys each
query sees and the rows that count, or a ValueError naming the parameter.  Scores come as
frameworks hand them over: logits with mask fills, or probabilities.

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

import warnings
from dataclasses import dataclass

import numpy as np

from .._util.validation import check_bool, check_choice

__all__ = ["FILL_GAP", "FILL_ROW_MAX", "MASK_FILLS", "PROB_SUM_TOL", "Head", "HeadInput", "check_head_input",
           "check_scores", "describe_fill", "fill_entries", "looks_like_probabilities"]

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


# ---------------------------------------------------------------------------------------------
# the arguments of head_stats and head_pools, and one head at a time


@dataclass(frozen=True)
class Head:
    """One head as :meth:`HeadInput.head` prepares it.

    Attributes
    ----------
    scores : ndarray (Q, K)
        float64 logits; for ``probs``, ``log p`` (clamped where ``p`` underflowed to 0).
    allowed : ndarray of bool (Q, K) or None
        The keys each query sees (None: every key).
    skip : ndarray of bool (Q,)
        Rows left out: fewer than 2 allowed keys.
    probs : ndarray (Q, K) or None
        For ``probs``, the probabilities renormalised over the allowed keys (0 elsewhere).
    fills : int
        Entries treated as masked because they look like a mask fill (``mask_fill="mask"``).
    zeros : ndarray of bool (Q, K) or None
        For ``probs``, the allowed keys whose probability underflowed to 0.
    """

    scores: np.ndarray
    allowed: np.ndarray | None
    skip: np.ndarray
    probs: np.ndarray | None = None
    fills: int = 0
    zeros: np.ndarray | None = None


@dataclass(frozen=True)
class HeadInput:
    """The checked arguments of :func:`check_head_input`: the scores, as given (never copied whole), and the mask.

    Attributes
    ----------
    source : {"logits", "probs"}
    scores : ndarray (..., Q, K)
    mask : ndarray of bool or None
        ``mask`` broadcast to the shape of the scores.
    causal : bool
    mask_fill : str
    causal_pattern : ndarray of bool (Q, K)
        Key ``j`` allowed for query ``i`` iff ``j <= i + K - Q`` (queries are the last positions).
    skip : ndarray of bool (Q,)
        Rows that ``causal`` leaves with fewer than 2 keys (none without ``causal``).
    """

    source: str
    scores: np.ndarray
    mask: np.ndarray | None
    causal: bool
    mask_fill: str
    causal_pattern: np.ndarray
    skip: np.ndarray

    @property
    def lead(self) -> tuple:
        """The leading axes of the scores: one head per entry."""
        return tuple(self.scores.shape[:-2])

    def head(self, idx) -> Head:
        """The head at ``idx`` (a tuple over :attr:`lead`), checked: see the module docstring for the rules."""
        s = np.asarray(self.scores[idx], dtype=np.float64)
        allowed = None if self.mask is None else self.mask[idx]
        if self.causal:
            allowed = self.causal_pattern if allowed is None else (allowed & self.causal_pattern)
        probs = zeros = None
        fills = 0
        if self.source == "probs":
            probs, s, zeros = _prepare_probs(s, allowed, idx)
        else:
            _check_logit_row_values(s, allowed, idx)
            if self.mask_fill == "keep":
                bad = (s == -np.inf) if allowed is None else (s == -np.inf) & allowed
                if bad.any():
                    raise ValueError("`logits` must be finite where the mask allows a key with mask_fill='keep': -inf at "
                                     f"{idx + tuple(int(i) for i in np.argwhere(bad)[0])}")
            else:
                fill = fill_entries(s, allowed)
                if fill.any():
                    if self.mask_fill == "refuse":
                        stated = self.causal or self.mask is not None
                        _refuse_fills(self.scores, s, fill, idx, None if stated else self.causal_pattern)
                    allowed = ~fill if allowed is None else (allowed & ~fill)
                    fills = int(fill.sum())
        skip = self.skip if allowed is None else (self.skip | (allowed.sum(axis=1) < 2))
        if skip.all():
            raise ValueError(f"`mask` leaves no query row of head {idx} with 2 or more keys"
                             + (" (after the mask fills)" if fills else ""))
        return Head(s, allowed, skip, probs, fills, zeros)


def check_head_input(logits=None, probs=None, *, mask=None, causal=False, mask_fill="refuse") -> HeadInput:
    """The scores and mask arguments of :func:`~softmax_scale.head_stats` and :func:`~softmax_scale.heads.head_pools`, checked.

    Exactly one of ``logits`` and ``probs``; see :func:`softmax_scale.head_stats` for each
    argument.  Warns (``UserWarning``, at the caller of the public function) when ``logits`` look
    like probabilities.

    Returns
    -------
    HeadInput
    """
    if logits is None and probs is None:
        raise ValueError("`logits`: pass the pre-softmax scores as `logits` or the attention probabilities as `probs`")
    if logits is not None and probs is not None:
        raise ValueError("`probs`: pass either `logits` or `probs`, not both")
    source = "logits" if probs is None else "probs"
    arr = check_scores(logits if probs is None else probs, source)
    causal = check_bool(causal, "causal")
    check_choice(mask_fill, "mask_fill", MASK_FILLS)
    if source == "probs" and mask_fill != "refuse":
        raise ValueError(f"`mask_fill` applies to logits; probabilities hold 0 on masked keys, got mask_fill={mask_fill!r}")
    m = _check_mask(mask, arr.shape)
    if source == "logits" and looks_like_probabilities(arr):
        warnings.warn("`logits`: every row is non-negative and sums to 1, as attention probabilities do; "
                      "pass them as head_stats(probs=...)", UserWarning, stacklevel=3)
    q, k = arr.shape[-2:]
    pattern = np.arange(k)[None, :] <= np.arange(q)[:, None] + (k - q)
    skip = np.zeros(q, dtype=bool)
    if causal:
        skip = pattern.sum(axis=1) < 2
        if skip.all():
            raise ValueError(f"`{source}`: with causal=True no query of shape {arr.shape} has 2 or more keys")
    return HeadInput(source, arr, m, causal, mask_fill, pattern, skip)


def _check_mask(mask, shape) -> np.ndarray | None:
    if mask is None:
        return None
    m = mask if isinstance(mask, np.ndarray) else np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(f"`mask` must be a boolean array (True = key allowed), got dtype {m.dtype}")
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise ValueError(f"`mask` of shape {m.shape} does not broadcast to the shape of the scores {shape}") from None


def _only_causal_fills(arr, causal_pattern):
    """Whether, in every head of ``arr``, the entries that look like a fill are exactly those a causal mask hides."""
    for idx in np.ndindex(*arr.shape[:-2]):
        fill = fill_entries(np.asarray(arr[idx], dtype=np.float64), None)
        if fill.any() and not np.array_equal(fill, ~causal_pattern):
            return False
    return True


def _refuse_fills(arr, s, fill, idx, causal_pattern):
    """The one-line refusal of entries that look like a mask fill, with what they look like and what to pass.

    ``causal_pattern``: the causal mask, when neither ``mask`` nor ``causal`` was given (then a
    tensor whose fills are exactly the causal mask's hidden keys is told to pass ``causal=True``).
    """
    where = tuple(int(i) for i in np.argwhere(fill)[0])
    row = s[where[0]][fill[where[0]]]
    if np.all(row <= FILL_ROW_MAX) and fill[where[0]].sum() == s.shape[1]:
        what = "a whole row at or below -1000, a padding query"
    else:
        what = "more than 745 below the largest logit of their row: probability exactly 0"
    if causal_pattern is not None and np.array_equal(fill, ~causal_pattern) and _only_causal_fills(arr, causal_pattern):
        how = "in every head they are exactly the keys a causal mask hides: pass causal=True"
    else:
        how = "pass mask= (True = key allowed) or causal=True"
    raise ValueError(
        f"`logits`: {int(fill.sum())} entries of head {idx} look like a mask fill ({describe_fill(float(s[where]))} at "
        f"{idx + where}; {what}); {how}, or mask_fill='mask' to treat them as masked"
    )


def _check_logit_row_values(s, allowed, idx):
    bad = np.isnan(s) | (s == np.inf)
    if allowed is not None:
        bad &= allowed
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"`logits` must not be NaN or +inf where the mask allows a key: {s[where]} at {idx + where}")


def _prepare_probs(p, allowed, idx):
    """Validate one head's float64 probabilities; return them renormalised over the allowed keys, and ``log p``.

    Zeros at allowed keys (underflow) get, in ``log p``, the log of the smallest positive
    probability of their row: the true value lies below it, so ``sigma`` is a lower bound.
    Returns ``(p, log_p, zeros)`` with ``zeros`` the boolean ``(Q, K)`` of allowed zeros.
    """
    ok = np.ones(p.shape, dtype=bool) if allowed is None else allowed
    bad = ok & ~np.isfinite(p)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"`probs` must be finite where the mask allows a key: {p[where]} at {idx + where}")
    pa = np.where(ok, p, 0.0)
    if pa.min() < 0 or pa.max() > 1.0 + PROB_SUM_TOL:
        v = pa.min() if pa.min() < 0 else pa.max()
        raise ValueError(f"`probs` must lie in [0, 1] where the mask allows a key, got {v:.6g} in head {idx}")
    sums = pa.sum(axis=1)
    off = (np.abs(sums - 1.0) > PROB_SUM_TOL) & (ok.sum(axis=1) >= 2)  # rows of fewer than 2 keys are skipped
    if off.any():
        r = int(np.flatnonzero(off)[0])
        raise ValueError(
            f"`probs`: every row must sum to 1 over its allowed keys (within {PROB_SUM_TOL:g}), row {idx + (r,)} sums to "
            f"{sums[r]:.6g}; masked keys must hold probability 0 (is `mask`/`causal` the one the model used?)"
        )
    pa /= np.where(sums > 0, sums, 1.0)[:, None]
    zeros = ok & (pa == 0.0)
    floor = np.where(ok & (pa > 0), pa, np.inf).min(axis=1, keepdims=True)  # the smallest positive probability per row
    log_p = np.log(np.where(zeros, floor, np.where(ok, pa, 1.0)))
    return pa, log_p, zeros

"""What :func:`softmax_scale.head_stats` and :func:`~softmax_scale.heads.head_pools` accept, checked once here.

:func:`check_head_input` checks the arguments the two share (the scores, ``mask``, ``causal``,
``mask_fill``) and :meth:`HeadInput.head` one head's scores: its float64 scores, the keys each
query sees and the rows that count, or a ValueError naming the parameter.  Scores come as
frameworks hand them over: logits with mask fills, or probabilities.

**Masks** (:func:`check_mask`) state their axes by their shape.  For scores ``(batch, heads,
queries, keys)`` a 2-d mask is the ``(batch, keys)`` padding mask a tokenizer returns (each
sequence's keys, for every head and query), a 4-d mask broadcasts by numpy's rules (``(batch, 1,
queries, keys)`` as transformers builds it), and any other shape is refused, so that a ``(batch,
keys)`` mask is never read as ``(queries, keys)`` when the batch and the queries have the same
length.  Booleans (True = allowed), 0/1 integers and additive float masks (0, and ``-inf`` or a
fill at or below -1e4 such as the dtype's minimum) are read alike.

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
(:func:`looks_like_probabilities`).  Without ``mask``, probabilities whose exact zeros are a mask
(every key above the diagonal, as a causal model returns them; a key at 0 for every query that
may see it, a padding key) are refused in one line that says to pass ``causal=True`` or ``mask=``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._util.validation import check_bool, check_choice

__all__ = ["ADDITIVE_FILL_MAX", "FILL_GAP", "FILL_ROW_MAX", "MASK_FILLS", "PROB_SUM_TOL", "Head", "HeadInput",
           "check_head_input", "check_mask", "check_scores", "describe_fill", "fill_entries", "looks_like_probabilities"]

#: A logit this far below its row's largest has probability exactly 0 in float64: a mask in effect.
FILL_GAP = 745.0
#: A row whose largest allowed logit is at or below this is filled everywhere (a padding query).
FILL_ROW_MAX = -1000.0
#: What :func:`softmax_scale.head_stats` does with entries that look like a mask fill.
MASK_FILLS = ("refuse", "mask", "keep")
#: Probability rows must sum to 1 within this (over their allowed keys).
PROB_SUM_TOL = 1e-2

#: An additive (float) mask entry at or below this masks its key (``-1e4``: the original BERT's fill).
ADDITIVE_FILL_MAX = -1e4

#: The fills frameworks use, to name them in messages.
_KNOWN_FILLS = ((float(np.finfo(np.float16).min), "the float16 minimum"),
                (float(np.finfo(np.float32).min), "the float32 minimum"),
                (float(np.finfo(np.float64).min), "the float64 minimum"),
                (-1e4, "-1e4"), (-1e9, "-1e9"), (-1e10, "-1e10"), (-1e30, "-1e30"))


def check_scores(x, name: str) -> np.ndarray:
    """``x`` as an array of real numbers of shape ``(..., n_queries, n_keys)``, ``n_keys >= 2``; else raise naming ``name``."""
    try:
        arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    except ValueError:  # nested lists of different lengths
        raise ValueError(f"`{name}` must have rows of the same length (an array of shape (..., n_queries, n_keys)), "
                         "got a ragged nested sequence") from None
    if arr.dtype == bool or not (arr.dtype.kind in "iu" or _is_float(arr.dtype)):
        raise TypeError(f"`{name}` must be an array of real numbers, shape (..., n_queries, n_keys), got dtype {arr.dtype}")
    if arr.ndim < 2:
        raise ValueError(f"`{name}` must have shape (..., n_queries, n_keys), got shape {arr.shape}")
    if arr.shape[-1] < 2:
        raise ValueError(f"`{name}` must have at least 2 keys (last axis), got shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"`{name}` must not be empty, got shape {arr.shape}")
    return arr


def _is_float(dtype) -> bool:
    """Whether ``dtype`` is one of numpy's floats or an extension float (ml_dtypes' bfloat16) that casts to float64."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.fields is None and np.can_cast(dtype, np.float64))


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
    with np.errstate(over="ignore"):  # logits near 1e308 sum to inf: not probabilities either way
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
    padding_mask : bool
        ``mask`` was 2-d for 4-d scores: read as the ``(batch, keys)`` padding mask.
    """

    source: str
    scores: np.ndarray
    mask: np.ndarray | None
    causal: bool
    mask_fill: str
    causal_pattern: np.ndarray
    skip: np.ndarray
    padding_mask: bool = False

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
            if self.mask is None:
                _refuse_unstated_mask(s, None if not self.causal else self.causal_pattern, self.causal_pattern, idx)
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
                             + (" (after the mask fills)" if fills else "")
                             + ("; a 2-d mask is read as the (batch, keys) padding mask, a (queries, keys) one is "
                                "mask[None, None]" if self.padding_mask else ""))
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
    m = check_mask(mask, arr.shape)
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
    padding_mask = mask is not None and arr.ndim == 4 and np.ndim(mask) == 2
    return HeadInput(source, arr, m, causal, mask_fill, pattern, skip, padding_mask)


def _mask_values(m) -> np.ndarray:
    """A mask of any of the framework encodings as booleans (True = key allowed); see :func:`check_mask`."""
    if m.dtype == bool:
        return m
    if m.dtype.kind in "iu":
        if not np.all((m == 0) | (m == 1)):
            v = m[(m != 0) & (m != 1)].flat[0]
            raise ValueError(f"`mask`: an integer mask holds 1 where a key is allowed and 0 where it is masked (as a "
                             f"tokenizer's attention_mask), got {v}")
        return m == 1
    if _is_float(m.dtype):
        f = np.asarray(m, dtype=np.float64)
        allowed = f == 0.0
        bad = ~allowed & ~(f <= ADDITIVE_FILL_MAX)  # NaN too
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"`mask`: a float mask is additive, 0 where a key is allowed and a fill (-inf, the dtype's minimum, "
                f"<= {ADDITIVE_FILL_MAX:g}) where it is masked, got {f[where]:g} at {where}; a 0/1 mask is "
                "mask.astype(bool)")
        return allowed
    raise TypeError(f"`mask` must be a boolean array (True = key allowed), a 0/1 integer array or an additive float "
                    f"mask, got dtype {m.dtype}")


def check_mask(mask, shape) -> np.ndarray | None:
    """``mask`` as booleans broadcast to the scores' ``shape``, its axes read from its own shape.

    For scores ``(batch, heads, queries, keys)`` (4-d, as frameworks shape them) a 2-d mask is the
    per-sequence padding mask ``(batch, keys)`` a tokenizer returns (read as ``(batch, 1, 1, keys)``)
    and a 4-d mask (``(batch, 1, queries, keys)``, ``(1, 1, queries, keys)``, ...) broadcasts by
    numpy's rules; any other shape is refused (a ``(queries, keys)`` mask for every head is
    ``mask[None, None]``).  Scores of any other number of axes take any mask that broadcasts.
    Values: booleans (True = allowed), integers 0/1 (1 = allowed), or an additive float mask
    (0 = allowed; ``-inf``, the dtype's minimum or anything at or below :data:`ADDITIVE_FILL_MAX` =
    masked), as transformers builds it.
    """
    if mask is None:
        return None
    m = mask if isinstance(mask, np.ndarray) else np.asarray(mask)
    if len(shape) == 4 and m.ndim == 2:
        if m.shape != (shape[0], shape[3]):
            raise ValueError(
                f"`mask` of shape {m.shape} for scores (batch, heads, queries, keys) of shape {shape}: a 2-d mask is "
                f"the (batch, keys) padding mask, shape {(shape[0], shape[3])}; a (queries, keys) mask for every "
                "head is mask[None, None]")
        m = m[:, None, None, :]
    elif len(shape) == 4 and m.ndim != 4:
        raise ValueError(f"`mask` of shape {m.shape} for scores (batch, heads, queries, keys) of shape {shape}: pass the "
                         "(batch, keys) padding mask or a 4-d mask such as (batch, 1, queries, keys)")
    m = _mask_values(m)
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


def _refuse_unstated_mask(p, allowed, causal_pattern, idx):
    """Refuse probabilities whose exact zeros form a mask that was not stated (no ``mask``).

    Without ``causal``, every key above the diagonal exactly 0 is what a causal model's
    ``output_attentions`` returns; a key exactly 0 for every one of two or more queries that may
    see it is a padding key.  Counted as keys, they would inflate ``n`` and make ``sigma`` a bound.
    """
    zero = p == 0.0
    hidden = ~causal_pattern
    if allowed is None and hidden.any() and zero[hidden].all():
        raise ValueError(f"`probs`: in head {idx} every key a causal mask hides is exactly 0 ({int(hidden.sum())} entries "
                         "above the diagonal), as a causal model's attention probabilities are; pass causal=True (or "
                         "mask= with the keys each query sees)")
    ok = np.ones(p.shape, dtype=bool) if allowed is None else allowed
    seen = ok.sum(axis=0)
    padding = (seen >= 2) & ((zero & ok).sum(axis=0) == seen)
    if padding.any():
        j = int(np.flatnonzero(padding)[0])
        raise ValueError(f"`probs`: in head {idx} key {j} has probability exactly 0 for every query that may see it, as "
                         f"a padding key has ({int(padding.sum())} such keys); pass mask= (True = key allowed, e.g. the "
                         "(batch, keys) attention_mask; an all-True mask counts them as keys)")


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

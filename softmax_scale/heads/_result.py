"""The result of :func:`softmax_scale.head_stats`: per-head diagnostics with fixed fields."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

__all__ = ["HeadStats"]


@dataclass(frozen=True)
class HeadStats:
    """Per-head softmax diagnostics, one entry per head (arrays shaped like the leading axes).

    Averages are over a head's queries (rows), each with its own number of
    allowed keys.  See :mod:`softmax_scale.heads` for the definitions.

    Attributes
    ----------
    shape : tuple
        The leading axes of ``logits`` (one head per entry); ``()`` for one head.
    n_keys : int
        Keys per row before masking (the last axis of ``logits``).
    queries : ndarray of int
        Rows averaged per head (causal rows with a single key are skipped).
    n : ndarray
        Allowed keys per query, averaged over rows.
    n_harmonic : ndarray
        ``1 / mean(1/n_r)``: the ``n`` at which ``alpha_star`` is sought.
    sigma : ndarray
        Effective scale: the standard deviation (``ddof=0``) of a query's
        scores over its allowed keys, averaged over queries.
    entropy : ndarray
        Mean Shannon entropy ``H`` in nats.
    entropy_ratio : ndarray
        Mean of ``H_r / log n_r``, in ``[0, 1]``.
    sum_p2 : ndarray
        Mean collision probability ``sum p^2``.
    gradient : ndarray
        Mean ``sigma_r (1 - sum p^2)``: the gradient objective of the row.
    top1 : ndarray
        Mean largest probability.
    sink : ndarray
        Mean probability on key 0.
    kurtosis : ndarray
        Excess kurtosis of the pooled standardised scores (0 for normal
        scores, -1.2 for uniform); NaN if every row is constant.
    predicted_entropy : ndarray
        Mean over rows of the exact ``E[H]`` for i.i.d. standard normal
        scores at the row's ``n_r`` and scale ``sigma_r sqrt(n_r/(n_r-1))``
        (NaN with ``predict=False``).
    predicted_entropy_empirical : ndarray
        The same under the head's pooled standardised scores as the
        distribution (NaN with ``predict=False``).
    predict_error : ndarray
        Bound on the interpolation error in ``alpha`` of both predictions (nats).
    alpha_star : ndarray
        Gradient-maximising scale for the head's empirical score
        distribution at ``n_harmonic`` (NaN with ``predict=False``; ``inf`` if
        the objective has no finite maximiser).
    alpha_star_se : ndarray
        Monte Carlo standard error of ``alpha_star`` (0 for mean-field).
    fills : ndarray of int
        Entries of ``logits`` that looked like a mask fill and were treated as
        masked keys (``mask_fill="mask"``); 0 otherwise.
    underflow : ndarray
        Share of the allowed probabilities that are exactly 0 (``probs`` given):
        underflowed, their ``log p`` unknown; 0 for ``logits``.
    sigma_lower_bound : ndarray of bool
        True where ``underflow > 0``: ``sigma`` was computed with each
        underflowed ``log p`` raised to the log of its row's smallest positive
        probability, so it is a lower bound on the true ``sigma`` (and
        ``kurtosis``, the predictions and ``alpha_star``, which rest on the same
        clamped values, are approximate).  Always False for ``logits``.
    source : str
        ``"logits"`` or ``"probs"``: what was passed.
    predicted : bool
        Whether the i.i.d. predictions and ``alpha_star`` were computed
        (``predict=True``); if not, those fields are NaN.
    alpha_objective : str
        ``"mean_field"`` or ``"geometric"``.
    sample_size : int
        The ``sample_size`` argument (compression of the empirical sample).
    """

    shape: tuple
    n_keys: int
    queries: np.ndarray
    n: np.ndarray
    n_harmonic: np.ndarray
    sigma: np.ndarray
    entropy: np.ndarray
    entropy_ratio: np.ndarray
    sum_p2: np.ndarray
    gradient: np.ndarray
    top1: np.ndarray
    sink: np.ndarray
    kurtosis: np.ndarray
    predicted_entropy: np.ndarray
    predicted_entropy_empirical: np.ndarray
    predict_error: np.ndarray
    alpha_star: np.ndarray
    alpha_star_se: np.ndarray
    fills: np.ndarray
    underflow: np.ndarray
    sigma_lower_bound: np.ndarray
    source: str
    predicted: bool
    alpha_objective: str
    sample_size: int

    @property
    def delta_entropy(self) -> np.ndarray:
        """``entropy - predicted_entropy``: focus beyond i.i.d. normal scores of the same scale (negative: sharper)."""
        return self.entropy - self.predicted_entropy

    @property
    def delta_entropy_empirical(self) -> np.ndarray:
        """``entropy - predicted_entropy_empirical``: focus from structure (which key), beyond the score distribution."""
        return self.entropy - self.predicted_entropy_empirical

    @property
    def sigma_over_alpha_star(self) -> np.ndarray:
        """``sigma / alpha_star``: above 1, the head is past its gradient-maximising scale."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.sigma / self.alpha_star

    def to_rows(self) -> list[dict]:
        """One dict per head, with its index tuple under ``"head"`` (for printing or a CSV writer)."""
        per_head = [f.name for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray)]
        derived = ["delta_entropy", "delta_entropy_empirical", "sigma_over_alpha_star"]
        arrays = {k: getattr(self, k) for k in per_head + derived}
        rows = []
        for idx in np.ndindex(*self.shape):
            row = {"head": idx}
            for k, v in arrays.items():
                x = v[idx]
                row[k] = bool(x) if v.dtype == bool else int(x) if v.dtype.kind in "iu" else float(x)
            rows.append(row)
        return rows

    def __repr__(self):
        def rng(x):
            x = np.asarray(x, dtype=np.float64)
            ok = x[np.isfinite(x)]
            return f"{ok.min():.3g}..{ok.max():.3g}" if ok.size else "n/a"

        bound = int(np.sum(self.sigma_lower_bound))
        sigma = rng(self.sigma) + (f" (a lower bound on {bound} heads: probabilities underflowed)" if bound else "")
        fills = int(np.sum(self.fills))
        if self.predicted:
            pred = f"delta_entropy={rng(self.delta_entropy)}, alpha_star={rng(self.alpha_star)} ({self.alpha_objective})"
        else:
            pred = "no predictions (predict=False)"
        return (
            f"HeadStats(heads={int(np.prod(self.shape, dtype=np.int64))}, shape={self.shape}, from {self.source}, "
            f"n={rng(self.n)}" + (f" ({fills} mask-fill entries masked)" if fills else "")
            + f", sigma={sigma}, entropy_ratio={rng(self.entropy_ratio)}, {pred})"
        )

"""Exact finite-``n`` softmax statistics by Laplace-transform quadrature: one engine, every caller.

With ``X = exp(alpha s)``, ``phi(t) = E[exp(-t X)]`` and ``u = log t``, ``y = t X
= exp(u + alpha s)``, independence of the ``n`` scores gives::

    E[sum p^2]      = n      ∫ E[y^2 e^-y]            phi^(n-1) du
    1 - E[sum p^2]  = n(n-1) ∫ E[y e^-y]^2            phi^(n-2) du
    E[H]            = -n     ∫ E[y e^-y (log y + γ)]  phi^(n-1) du
    E[sum p s]      = n      ∫ E[s y e^-y]            phi^(n-1) du
    E[log Z]        = -γ + ∫ (1{u<0} - phi^n) du

``phi^(n-1)`` is formed as ``exp((n-1) log1p(E[expm1(-y)]))``.  The engine, in three parts:

- :mod:`~softmax_scale.exact.grid`: the ``u`` range, step and nodes for a set of ``n``
  (trapezoid rule, spectrally accurate: the integrands are analytic and vanish at both ends);
- :mod:`~softmax_scale.exact.inner`: the inner expectations over any score distribution (normal,
  cosine(d), an :class:`~softmax_scale.Empirical` or :class:`~softmax_scale.WeightedSample`
  sample) at every node;
- :mod:`~softmax_scale.exact.outer`: the outer integral, for one ``n``, for many ``n`` at once,
  and with one key of fixed score among ``n - 1`` i.i.d. keys;

and :mod:`~softmax_scale.exact.evaluate` puts them together for the callers
(:func:`exact_stats`, :func:`softmax_scale.head_stats`, :func:`softmax_scale.signal_stats`, the
real decoder's i.i.d. predictions).  The cost is flat in ``n`` (2 to 1e15) and in ``alpha`` for
normal and cosine scores; for a sample it grows with ``alpha`` times its spread.
"""

from .evaluate import EntropyForNs, signal_at, stats_at
from .expected import expected_grad, expected_optimum, gap_density_at_zero
from .grid import TooMuchWork
from .softmax import exact_stats, exact_sum_p_s

__all__ = [
    "EntropyForNs",
    "TooMuchWork",
    "exact_stats",
    "exact_sum_p_s",
    "expected_grad",
    "expected_optimum",
    "gap_density_at_zero",
    "signal_at",
    "stats_at",
]

"""Per-head softmax statistics of a model's attention: :func:`head_stats` and its result.

The input checks (:mod:`._input`), the i.i.d. predictions (:mod:`._predict`) and the result type
(:mod:`._result`) are private; this package's names are the public ones.
"""

from ._result import HeadStats
from ._stats import head_pools, head_stats

__all__ = ["HeadStats", "head_pools", "head_stats"]

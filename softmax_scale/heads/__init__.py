"""Per-head softmax statistics of a model's attention, and the toolkit's per-head scale past a reference length.

:func:`head_stats` measures each head (:class:`HeadStats`), :func:`head_pools` gives its pooled
standardised scores, and :func:`rule_factors` turns a head's scale and scores into a factor on
its scores at longer lengths under one of :data:`TOOLKIT_RULES`; :func:`head_factors` does it for
every head from ``head_stats`` measured at two or more lengths inside ``L``, and
:func:`head_factor_errors` their standard errors by a bootstrap over the queries
(:func:`check_head_stats`: what both accept).  For one key among ``n``,
:func:`key_share` measures each head's attention on a known source key, :func:`predict_share`
gives the i.i.d. theory's share at longer lengths, :func:`share_factors` the factor that
holds it (:data:`SHARE_RULE`) and :func:`share_max` the one that maximises it
(:data:`SHARE_MAX_RULE`); :func:`share_rule_factors` names either.  The input checks
(:mod:`._input`), the i.i.d. predictions (:mod:`._predict`) and the result type (:mod:`._result`)
are private; this package's names are the public ones.
"""

from ._factors import HeadFactorTable, check_head_stats, factors_at, head_factor_errors, head_factors
from ._result import HeadStats
from ._rules import (
    SHARE_MAX_RULE,
    SHARE_RULE,
    SHARE_RULES,
    TOOLKIT_RULES,
    ShareMax,
    exact_entropy,
    rule_factors,
    share_factors,
    share_max,
    share_rule_factors,
)
from ._share import KeyShare, key_share, predict_share
from ._stats import head_pools, head_stats

__all__ = ["SHARE_MAX_RULE", "SHARE_RULE", "SHARE_RULES", "TOOLKIT_RULES", "HeadFactorTable", "HeadStats", "KeyShare",
           "ShareMax", "check_head_stats", "exact_entropy", "factors_at", "head_factor_errors", "head_factors", "head_pools", "head_stats",
           "key_share", "predict_share", "rule_factors", "share_factors", "share_max", "share_rule_factors"]

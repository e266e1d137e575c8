"""softmax_scale: the scale in front of a softmax, computed rather than guessed.

The public API is re-exported here::

    import softmax_scale as ss
    ss.optimal_alpha(512)                               # mean-field alpha*, normal scores
    ss.optimal_alpha([64, 512, 4096], dist="cosine", d=128)
    ss.softmax_stats(2.0, 1024, method="mc", trials=10_000, rng=0)
    ss.fit_alpha_law(ns, alphas, form="sqrt_log")
"""

from .distributions import Cosine, Empirical, Normal, ScoreDistribution, get_distribution
from .laws import LawFit, compare_alpha_laws, fit_alpha_law
from .montecarlo import MCTrials, mc_trials
from .objectives import OBJECTIVES, gradient_objective
from .optimize import AlphaOptimum, optimal_alpha, optimize_alpha
from .stats import SoftmaxStats, softmax_stats

__version__ = "0.1.0"

__all__ = [
    "AlphaOptimum",
    "Cosine",
    "Empirical",
    "LawFit",
    "MCTrials",
    "Normal",
    "OBJECTIVES",
    "ScoreDistribution",
    "SoftmaxStats",
    "compare_alpha_laws",
    "fit_alpha_law",
    "get_distribution",
    "gradient_objective",
    "mc_trials",
    "optimal_alpha",
    "optimize_alpha",
    "softmax_stats",
]

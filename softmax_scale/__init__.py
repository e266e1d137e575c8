"""softmax_scale: the scale in front of a softmax, computed rather than guessed.

The public API is re-exported here::

    import softmax_scale as ss
    ss.optimal_alpha(512)                               # mean-field alpha*, normal scores
    ss.optimal_alpha([64, 512, 4096], dist="cosine", d=128)
    ss.softmax_stats(2.0, 1024, method="mc", trials=10_000, rng=0)
    ss.fit_alpha_law(ns, alphas, form="sqrt_log")
"""

from .distributions import Cosine, Empirical, Normal, ScoreDistribution, get_distribution
from . import moments
from .laws import LawFit, compare_alpha_laws, fit_alpha_law
from .montecarlo import MCTrials, mc_trials
from .objectives import OBJECTIVES, gradient_objective
from .optimize import AlphaOptimum, optimal_alpha, optimize_alpha
from .moments import (
    depth_second_moments,
    dot_product_variance,
    layer_norm,
    rescale_activation,
    residual_second_moments,
    rms_norm,
    selu_constants,
    t5_score_variance,
)
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
    "depth_second_moments",
    "dot_product_variance",
    "fit_alpha_law",
    "get_distribution",
    "gradient_objective",
    "layer_norm",
    "mc_trials",
    "moments",
    "optimal_alpha",
    "optimize_alpha",
    "rescale_activation",
    "residual_second_moments",
    "rms_norm",
    "selu_constants",
    "softmax_stats",
    "t5_score_variance",
]

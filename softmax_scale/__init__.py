"""softmax_scale: the scale in front of a softmax, computed rather than guessed.

The public API is re-exported here::

    import softmax_scale as ss
    ss.optimal_alpha(512)                               # mean-field alpha*, normal scores
    ss.optimal_alpha([64, 512, 4096], dist="cosine", d=128)
    ss.softmax_stats(2.0, 1024, method="mc", trials=10_000, rng=0)
    ss.fit_alpha_law(ns, alphas, form="sqrt_log")
"""

from . import exact, moments, typical  # re-exported as modules: ss.exact, ss.moments, ss.typical
from .causal import CausalOptimum, causal_objective, optimal_alpha_causal
from .contrastive import PUBLISHED_COSINE_SCALES, TemperatureTable, temperature_table
from .distributions import (
    Cosine,
    Empirical,
    Normal,
    ScoreDistribution,
    WeightedSample,
    get_distribution,
)
from .entropy import (
    EntropyCurve,
    ExtrapolationTable,
    PhaseDiagram,
    entropy_curve,
    entropy_curves,
    extrapolation_table,
    phase_diagram,
)
from .exact import MeanFieldError, exact_stats, gap_density_at_zero, mean_field_error
from .heads import HeadStats, head_stats
from .invariant import InvariantScale, invariant_scale
from .laws import LawFit, compare_alpha_laws, fit_alpha_law
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
from .montecarlo import MCTrials, mc_trials
from .objectives import OBJECTIVES, gradient_objective
from .optimize import AlphaOptimum, optimal_alpha, optimize_alpha
from .schemes import SCHEMES, PinnedScheme, SchemeInfo, attention_scale, list_schemes, pinned, scheme_alpha
from .signal import SignalStats, signal_stats
from .stats import SoftmaxStats, softmax_stats
from .typical import ObjectiveTable, mc_objective, objective_table

__version__ = "0.1.0"


def __getattr__(name):
    """Import ``softmax_scale.models`` on first access, never at import time.

    ``ss.models``, and ``ss.real_head_table`` / ``ss.RealHeadTable`` / ``ss.length_extrapolation``
    which live there.
    """
    if name in ("models", "real_head_table", "RealHeadTable", "length_extrapolation"):
        import importlib

        models = importlib.import_module(".models", __name__)
        return models if name == "models" else getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "OBJECTIVES",
    "PUBLISHED_COSINE_SCALES",
    "SCHEMES",
    "AlphaOptimum",
    "CausalOptimum",
    "Cosine",
    "Empirical",
    "EntropyCurve",
    "ExtrapolationTable",
    "HeadStats",
    "InvariantScale",
    "LawFit",
    "MCTrials",
    "MeanFieldError",
    "Normal",
    "ObjectiveTable",
    "PhaseDiagram",
    "PinnedScheme",
    "SchemeInfo",
    "ScoreDistribution",
    "SignalStats",
    "SoftmaxStats",
    "TemperatureTable",
    "WeightedSample",
    "attention_scale",
    "causal_objective",
    "compare_alpha_laws",
    "depth_second_moments",
    "dot_product_variance",
    "entropy_curve",
    "entropy_curves",
    "exact",
    "exact_stats",
    "extrapolation_table",
    "fit_alpha_law",
    "gap_density_at_zero",
    "get_distribution",
    "gradient_objective",
    "head_stats",
    "invariant_scale",
    "layer_norm",
    "list_schemes",
    "mc_objective",
    "mc_trials",
    "mean_field_error",
    "moments",
    "objective_table",
    "optimal_alpha",
    "optimal_alpha_causal",
    "optimize_alpha",
    "phase_diagram",
    "pinned",
    "rescale_activation",
    "residual_second_moments",
    "rms_norm",
    "scheme_alpha",
    "selu_constants",
    "signal_stats",
    "softmax_stats",
    "t5_score_variance",
    "temperature_table",
    "typical",
]

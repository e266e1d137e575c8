"""softmax_scale: the scale in front of a softmax, computed rather than guessed.

The public API is re-exported here::

    import softmax_scale as ss
    ss.optimal_alpha(512)                               # mean-field alpha*, normal scores
    ss.optimal_alpha([64, 512, 4096], dist="cosine", d=128)
    ss.softmax_stats(2.0, 1024, method="mc", trials=10_000, rng=0)
    ss.fit_alpha_law(ns, alphas, form="sqrt_log")
"""

from . import exact, moments
from .contrastive import (
    PUBLISHED_COSINE_SCALES,
    ContrastiveTemperature,
    TemperatureTable,
    contrastive_temperature,
    temperature_table,
)
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
from .entropy.invariant import InvariantScale, invariant_scale
from .entropy.signal import SignalStats, signal_share_slope, signal_stats
from .exact import exact_stats, gap_density_at_zero
from .heads import (
    HeadFactorTable,
    HeadStats,
    ShareMax,
    head_factor_errors,
    head_factors,
    head_pools,
    head_stats,
    rule_factors,
    share_factors,
    share_max,
)
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
from .objectives import OBJECTIVES, MeanFieldError, gradient_objective, mean_field_error, typical
from .objectives.causal import CausalOptimum, causal_objective, optimal_alpha_causal
from .objectives.typical import ObjectiveTable, mc_objective, objective_table
from .optimize import AlphaOptimum, optimal_alpha, optimize_alpha
from .schemes import SCHEMES, PinnedScheme, Scheme, attention_scale, list_schemes, pinned, scheme_alpha
from .stats import SoftmaxStats, softmax_stats

__version__ = "0.1.0"

#: Names of the real-model studies, imported from :mod:`.experiments` on first access.
_EXPERIMENT_NAMES = {"real_head_table": "real_heads", "RealHeadTable": "real_heads",
                     "length_extrapolation": "real_extrapolation", "measure": "measure", "MeasureResult": "measure"}
#: Names of :mod:`.advice` (which reads the experiments' results), imported on first access.
_ADVICE_NAMES = ("advise", "Advice", "attention_alpha", "AttentionAlpha")
#: Names of :mod:`.engines` (which reads real model files), imported on first access.
_ENGINE_NAMES = ("engine_scales", "read_config")


def __getattr__(name):
    """Import ``softmax_scale.models`` and what sits on the experiments on first access, never at import time.

    ``ss.models``; ``ss.real_head_table`` / ``ss.RealHeadTable`` / ``ss.length_extrapolation`` /
    ``ss.measure`` / ``ss.MeasureResult`` from the experiments; ``ss.advise`` / ``ss.Advice`` /
    ``ss.attention_alpha`` / ``ss.AttentionAlpha`` from :mod:`softmax_scale.advice`; ``ss.engine_scales`` /
    ``ss.read_config`` from :mod:`softmax_scale.engines`.
    """
    import importlib

    if name == "models":
        return importlib.import_module(".models", __name__)
    if name in _EXPERIMENT_NAMES:
        return getattr(importlib.import_module(f".experiments.{_EXPERIMENT_NAMES[name]}", __name__), name)
    if name in _ADVICE_NAMES:
        return getattr(importlib.import_module(".advice", __name__), name)
    if name in _ENGINE_NAMES:
        return getattr(importlib.import_module(".engines", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    """The module's names and those :func:`__getattr__` imports on first access (without importing them)."""
    return sorted(set(globals()) | {"models", *_EXPERIMENT_NAMES, *_ADVICE_NAMES, *_ENGINE_NAMES})


__all__ = [
    "OBJECTIVES",
    "PUBLISHED_COSINE_SCALES",
    "SCHEMES",
    "AlphaOptimum",
    "CausalOptimum",
    "ContrastiveTemperature",
    "Cosine",
    "Empirical",
    "EntropyCurve",
    "ExtrapolationTable",
    "HeadFactorTable",
    "HeadStats",
    "InvariantScale",
    "LawFit",
    "MCTrials",
    "MeanFieldError",
    "Normal",
    "ObjectiveTable",
    "PhaseDiagram",
    "PinnedScheme",
    "Scheme",
    "ScoreDistribution",
    "ShareMax",
    "SignalStats",
    "SoftmaxStats",
    "TemperatureTable",
    "WeightedSample",
    "attention_scale",
    "causal_objective",
    "compare_alpha_laws",
    "contrastive_temperature",
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
    "head_factor_errors",
    "head_factors",
    "head_pools",
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
    "rule_factors",
    "scheme_alpha",
    "selu_constants",
    "share_factors",
    "share_max",
    "signal_share_slope",
    "signal_stats",
    "softmax_stats",
    "t5_score_variance",
    "temperature_table",
    "typical",
]

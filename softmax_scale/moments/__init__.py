"""Second moments: the note's first part.

Why the attention scale is ``1/sqrt(d)``: keep second moments at 1 from the
initialisation through every layer.  Each topic of the note has a Monte Carlo
estimator with its standard error and, where one exists, the closed form:

1. sampling distributions for weights and ``Var[q·k] = d``
   (:func:`sample_weights`, :func:`dot_product_variance`);
2. initialisation through depth, LeCun/Xavier, He, NTK
   (:func:`depth_second_moments`, :func:`mean_field_second_moments`);
3. activations rescaled to keep the second moment, SELU solved from its
   fixed point (:func:`rescale_activation`, :func:`selu_constants`);
4. LayerNorm against RMSNorm (:func:`layer_norm`, :func:`rms_norm`,
   :func:`normalization_moments`);
5. residuals: plain, Post-Norm, Pre-Norm, SkipInit/ReZero, warm-up
   (:func:`residual_second_moments`);
6. T5's query initialisation folds the ``1/sqrt(d)`` in
   (:func:`t5_score_variance`).

One module per topic: :mod:`.weights` (1), :mod:`.depth` (2, 3),
:mod:`.normalization` (4), :mod:`.residual` (5), :mod:`.t5` (6); every name is
re-exported here.

Every estimator takes a keyword-only ``rng`` (anything accepted by
:func:`numpy.random.default_rng`); the same seed gives bit-identical results.
Plain numpy: the work is matrix products, which numba would not speed up.
"""

from .depth import (
    ACTIVATIONS,
    INITS,
    AffineCorrection,
    DepthMoments,
    SeluConstants,
    activation,
    depth_second_moments,
    gaussian_expectation,
    mean_field_second_moments,
    preserving_gain,
    rescale_activation,
    second_moment_map_slope,
    selu_constants,
)
from .normalization import (
    NORMS,
    NormMoments,
    layer_norm,
    normalization_moments,
    rms_norm,
)
from .residual import (
    RESIDUAL_SCHEMES,
    ResidualMoments,
    residual_second_moments,
    warmup_alpha,
)
from .t5 import (
    T5_INITS,
    T5ScoreVariance,
    t5_score_variance,
)
from .weights import (
    DISTRIBUTIONS,
    TRUNCATION_BOUND,
    DotProductVariance,
    dot_product_variance,
    sample_weights,
    truncated_normal_std,
    truncation_correction,
)

__all__ = [
    "ACTIVATIONS",
    "DISTRIBUTIONS",
    "INITS",
    "NORMS",
    "RESIDUAL_SCHEMES",
    "T5_INITS",
    "TRUNCATION_BOUND",
    "AffineCorrection",
    "DepthMoments",
    "DotProductVariance",
    "NormMoments",
    "ResidualMoments",
    "SeluConstants",
    "T5ScoreVariance",
    "activation",
    "depth_second_moments",
    "dot_product_variance",
    "gaussian_expectation",
    "layer_norm",
    "mean_field_second_moments",
    "normalization_moments",
    "preserving_gain",
    "rescale_activation",
    "residual_second_moments",
    "rms_norm",
    "sample_weights",
    "second_moment_map_slope",
    "selu_constants",
    "t5_score_variance",
    "truncated_normal_std",
    "truncation_correction",
    "warmup_alpha",
]

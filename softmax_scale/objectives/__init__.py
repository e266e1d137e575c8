"""Gradient objectives ``G(alpha; n)``: mean-field, expected, typical and geometric, and a decoder's average."""

from .gradient import OBJECTIVES, REGISTRY, Objective, gradient_objective, mean_field_objective, mean_field_sum_p2
from .mean_field_error import MeanFieldError, mean_field_error

__all__ = ["OBJECTIVES", "REGISTRY", "MeanFieldError", "Objective", "gradient_objective", "mean_field_error",
           "mean_field_objective", "mean_field_sum_p2"]

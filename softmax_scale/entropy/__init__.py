"""Entropy against length: curves under published scales, the invariant scale, one signal key among n."""

from ._curves import (
    DEFAULT_SCHEMES,
    EntropyCurve,
    ExtrapolationTable,
    PhaseDiagram,
    check_match,
    entropy_curve,
    entropy_curves,
    extrapolation_table,
    phase_diagram,
)
from .invariant import InvariantScale, invariant_scale
from .signal import SignalStats, signal_share_slope, signal_stats

__all__ = ["DEFAULT_SCHEMES", "EntropyCurve", "ExtrapolationTable", "InvariantScale", "PhaseDiagram", "SignalStats",
           "check_match", "entropy_curve", "entropy_curves", "extrapolation_table", "invariant_scale", "phase_diagram",
           "signal_share_slope", "signal_stats"]

"""The mean-field optimiser over many ``n`` in one call."""

from __future__ import annotations

import numpy as np

import softmax_scale as ss

from ._harness import settings, timed


def bench_optimal_alpha(repeats: int) -> list[dict]:
    ns = np.arange(40, 20001, 40)
    ss.optimal_alpha(ns)
    t = min(timed(lambda: ss.optimal_alpha(ns)) for _ in range(repeats))
    return [
        {
            "name": "optimal_alpha (mean-field), 500 values of n in one call",
            "value": t * 1e3,
            "unit": "ms",
            "target": "< 50",
            "detail": "n = 40, 80, ..., 20000",
        }
    ]


def run(quick: bool) -> list[dict]:
    """The optimiser row."""
    return bench_optimal_alpha(settings(quick)[1] + 2)

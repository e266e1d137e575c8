"""Cost of the exact evaluator per ``(alpha, n)``: small and flat in ``n``."""

from __future__ import annotations

import numpy as np

import softmax_scale as ss

from ._harness import settings, timed


def bench_exact(repeats: int) -> list[dict]:
    try:
        ss.softmax_stats(1.5, 100, method="exact")
    except NotImplementedError:
        return [
            {
                "name": "exact evaluator per (alpha, n)",
                "value": float("nan"),
                "unit": "ms",
                "target": "< 20, flat",
                "ok": False,
                "detail": "not available yet",
            }
        ]
    ns = [10**k for k in range(2, 13)]
    times = []
    for n in ns:
        times.append(
            min(
                timed(lambda n=n: ss.softmax_stats(1.5, n, method="exact"))
                for _ in range(repeats)
            )
        )
    ms = np.array(times) * 1e3
    spread = ms.max() / ms.min()
    return [
        {
            "name": "exact evaluator per (alpha, n), worst over n = 1e2..1e12",
            "value": ms.max(),
            "unit": "ms",
            "target": "< 20 and flat in n",
            "ok": bool(ms.max() < 20 and spread < 3),
            "detail": "per n: "
            + ", ".join(f"1e{k}: {t:.1f}" for k, t in zip(range(2, 13), ms))
            + f" ms; max/min {spread:.1f}",
        }
    ]


def run(quick: bool) -> list[dict]:
    """The exact-evaluator row."""
    return bench_exact(settings(quick)[1] + 2)

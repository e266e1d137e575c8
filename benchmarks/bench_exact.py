"""Cost of one exact evaluation (all statistics at one ``(alpha, n)``) against ``n``.

Not a test: prints a table of times from one run and their ratio to the
``n = 100`` time, which should stay near 1 (the quadrature does not grow with
``n``; ``n = 2`` is shown too).  Run with ``python benchmarks/bench_exact.py``.
"""

from __future__ import annotations

import time

import numpy as np

from softmax_scale.exact import exact_stats

CASES = [
    ("normal", None, 2.0),
    ("normal", None, 30.0),
    ("cosine", 128, 25.0),
    # large alpha, moderate d: the ends s = ±1 of the cosine support need a finer u step around u = ∓alpha
    ("cosine", 8, 100.0),
    ("cosine", 8, 1000.0),
    ("cosine", 16, 100.0),
    ("cosine", 16, 1000.0),
]
NS = [2, 10**2, 10**4, 10**6, 10**9, 10**12]


def _time(alpha, n, dist, d, error_estimate, repeat=7):
    exact_stats(alpha, n, dist, d=d, error_estimate=error_estimate)  # compile / warm up
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        exact_stats(alpha, n, dist, d=d, error_estimate=error_estimate)
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    """Print the table."""
    print(f"{'dist':>14} {'alpha':>6} {'n':>8} {'ms (value)':>11} {'ms (+error)':>12} {'ratio to n=1e2':>15}")
    for dist, d, alpha in CASES:
        label = dist if d is None else f"{dist}(d={d})"
        rows = [(n, _time(alpha, n, dist, d, False), _time(alpha, n, dist, d, True)) for n in NS]
        base = next(t2 for n, _, t2 in rows if n == 10**2)
        for n, t1, t2 in rows:
            print(f"{label:>14} {alpha:6.1f} {n:8.0e} {1e3 * t1:11.2f} {1e3 * t2:12.2f} {t2 / base:15.2f}")


if __name__ == "__main__":
    main()

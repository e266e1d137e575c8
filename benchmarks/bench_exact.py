"""Cost of one exact evaluation (all statistics at one ``(alpha, n)``) against ``n``.

Not a test: prints a table of times from one run and their ratio to the
``n = 100`` time, which should stay near 1 (the quadrature does not grow with
``n``).  Run with ``python benchmarks/bench_exact.py``.
"""

from __future__ import annotations

import time

import numpy as np

from softmax_scale.exact import exact_stats

CASES = [("normal", None, 2.0), ("normal", None, 30.0), ("cosine", 128, 25.0)]
NS = [10**2, 10**4, 10**6, 10**9, 10**12]


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
        base = None
        for n in NS:
            t1 = _time(alpha, n, dist, d, False)
            t2 = _time(alpha, n, dist, d, True)
            base = base or t2
            print(f"{label:>14} {alpha:6.1f} {n:8.0e} {1e3 * t1:11.2f} {1e3 * t2:12.2f} {t2 / base:15.2f}")


if __name__ == "__main__":
    main()

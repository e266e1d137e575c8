"""Benchmark: exact entropy curves for 30 values of n up to 1e6 and 10 schemes (target < 30 s on 2 cores).

Run: ``python benchmarks/bench_entropy.py``.  Prints the wall time of the isotropic and the
signal-plus-noise curves (one exact evaluator call per n for all schemes at once).
"""

import time

import numpy as np

from softmax_scale.entropy import DEFAULT_SCHEMES, entropy_curves


def main():
    ns = np.unique(np.round(np.geomspace(16, 1e6, 30)))
    entropy_curves(ns[:2], DEFAULT_SCHEMES)  # compile / warm caches
    for label, kw in (("isotropic, normal", {"score_model": "normal"}),
                      ("isotropic, cosine d=128", {"score_model": "cosine"}),
                      ("signal-plus-noise, cosine d=128", {"score_model": "cosine", "match": 1.0})):
        t = time.perf_counter()
        entropy_curves(ns, DEFAULT_SCHEMES, d=128, **kw)
        dt = time.perf_counter() - t
        print(f"{label:<34} {ns.size} n x {len(DEFAULT_SCHEMES)} schemes: {dt:6.2f} s "
              f"({1e3 * dt / (ns.size * len(DEFAULT_SCHEMES)):.1f} ms per curve point)")


if __name__ == "__main__":
    main()

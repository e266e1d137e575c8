"""Peak memory of a Monte Carlo run over 1e9 scores, in a fresh interpreter."""

from __future__ import annotations

from ._harness import run_py

#: The notes of this topic in its results file (markdown).
NOTES = """
**Memory.**  Growth for 1e9 scores is the outputs only: `(trials x n_alpha)` x 4 float64 arrays
(3.2 MB for 1e5 trials and one scale) plus the mean/standard-error temporaries of `mc_stats`; the
per-thread work buffers are 5 x 512 floats.  ru_maxrss growth below 1 MB reads as 0.
"""

MEMORY_CODE = """
import json, resource, time, tracemalloc
import softmax_scale as ss
ss.mc_trials(1.5, 64, trials=4, rng=0)  # compile / load from cache first
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.perf_counter()
res = ss.softmax_stats(1.5, {n}, method="mc", trials={trials}, rng=0)
dt = time.perf_counter() - t0
_, peak = tracemalloc.get_traced_memory()
r1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(rss_kb=r1 - r0, traced=peak, seconds=dt, grad=res.grad)))
"""


def bench_memory(quick: bool) -> list[dict]:
    trials, n = (10**4, 10**4) if quick else (10**5, 10**4)
    out = run_py(MEMORY_CODE.format(n=n, trials=trials))
    mb = out["rss_kb"] / 1024
    return [
        {
            "name": f"peak memory growth, {trials * n:.0e} scores",
            "value": mb,
            "unit": "MB (ru_maxrss)",
            "target": "< 100",
            "detail": f"tracemalloc peak {out['traced'] / 2**20:.2f} MB; trials={trials}, n={n}, {out['seconds']:.2f} s",
        }
    ]


def run(quick: bool) -> list[dict]:
    """The memory row."""
    return bench_memory(quick)

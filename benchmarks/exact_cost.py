"""The exact evaluator's error estimate: what the default evaluation costs, and how close ``quad_error`` is to the error."""

from __future__ import annotations

import numpy as np

import softmax_scale as ss

from ._harness import best_of, settings

#: (label, dist, d, alpha, n): the scales the figures evaluate most, and a sample of 300 scores.
CASES = [("normal, alpha 2, n 100", "normal", None, 2.0, 100),
         ("cosine d=128, alpha 25, n 512", "cosine", 128, 25.0, 512),
         ("sample of 300, alpha 2, n 100", np.random.default_rng(0).standard_normal(300), None, 2.0, 100)]
STATS = ("sum_p2", "entropy", "grad", "log_z")

NOTES = """
**The exact evaluator's error estimate.**  `exact_stats` once evaluated every scale twice by
default, the second time on a grid of twice the step, and reported the change as `quad_error`: that
measures the coarser grid's error (9e-11 for `exact_stats(2.0, 100)`, whose error is 6e-15).  The
default now evaluates one grid and reports the residual of `E[sum p] = 1`; `error_estimate=True`
adds the grid of the same step offset by half a step, whose change is about twice the grid's own
error.  The "old default" side is the two grids it evaluated (`refine` 1 and 0.5), timed in this run;
each timing is 20 evaluations in a row, the times per evaluation.
The true error is the largest difference to `refine=4`.  Where the offset estimate lies far below
it (cosine scores: 3e-17 against 1e-14) the error is the inner quadrature's and the rounding's,
which a shift of the outer grid does not see; both are below 1e-12 in `tests/exact`.
"""


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "CPU flags unknown"
    return "CPU " + " ".join(x for x in ("avx2", "fma", "avx512f") if x in flags)


def _errors(dist, d, alpha, n) -> tuple[float, float, float]:
    """The true error of the default grid, the half-step grid's change, and the offset grid's estimate."""
    ref = ss.exact_stats(alpha, n, dist, d=d, refine=4.0)
    value = ss.exact_stats(alpha, n, dist, d=d, error_estimate=True)
    coarse = ss.exact_stats(alpha, n, dist, d=d, refine=0.5)
    true = max(abs(getattr(value, s) - getattr(ref, s)) for s in STATS)
    half = max(abs(getattr(value, s) - getattr(coarse, s)) for s in STATS)
    return true, half, value.quad_error


def run(quick: bool) -> list[dict]:
    """The cost of the default evaluation, old over new, and each case's errors."""
    reps, calls = settings(quick)[1], 5 if quick else 20  # each timing: `calls` evaluations in a row
    rows = []
    for label, dist, d, alpha, n in CASES:
        ss.exact_stats(alpha, n, dist, d=d, refine=0.5)  # compile and warm up

        def call(refine=1.0, estimate=False, args=(alpha, n, dist, d)):
            return ss.exact_stats(*args[:3], d=args[3], refine=refine, error_estimate=estimate)

        def times(f, k=calls):
            return lambda: [f() for _ in range(k)]

        t = best_of({"old": times(lambda: (call(), call(0.5))), "new": times(call),
                     "estimate": times(lambda: call(estimate=True))}, reps)
        t = {k: v / calls for k, v in t.items()}
        true, half, est = _errors(dist, d, alpha, n)
        rows.append({"name": f"exact_stats default, old / new cost: {label}", "value": t["old"] / t["new"], "unit": "x",
                     "target": ">= 1.3",
                     "detail": f"old (two grids) {1e3 * t['old']:.2f} ms, new (one grid) {1e3 * t['new']:.2f} ms, "
                               f"error_estimate=True {1e3 * t['estimate']:.2f} ms; {_cpu_flags()}"})
        rows.append({"name": f"quad_error against the true error: {label}", "value": est / max(true, 1e-300),
                     "unit": "x the error",
                     "target": "(information)", "ok": None,
                     "detail": f"true error {true:.1e}; offset grid (error_estimate=True) {est:.1e}; "
                               f"half-step grid (the old estimate) {half:.1e}"})
    return rows

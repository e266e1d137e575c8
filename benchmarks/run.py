"""Benchmarks of softmax_scale: ``python benchmarks/run.py`` prints a table and writes benchmarks/results.md.

Every number that is compared with a target is a *ratio measured within this
run* (the machine is shared and noisy): the two sides are interleaved and the
best of several repeats of each is kept.  Absolute times are printed for
information only.

Options: ``--quick`` (fewer trials and repeats, for a smoke run), ``--out PATH``.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numba
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import softmax_scale as ss
from softmax_scale import _kernels
from softmax_scale._random import seed_sequence
from softmax_scale.montecarlo import mc_trials

N, TRIALS = 4096, 20_000
ALPHA1 = 1.5
GRID16 = np.linspace(
    0.25, 4.0, 16
)  # arithmetic: the kernel shares exponentials within the grid
GEOM16 = np.geomspace(
    0.25, 4.0, 16
)  # not arithmetic: one exponential per score and scale



_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


def meets(value, target: str) -> bool:
    """Whether ``value`` meets a target written as ``"<op> <bound>"`` (e.g. ``">= 4"``): one source for both."""
    op, bound = target.split()
    return bool(_OPS[op](value, float(bound)))

def numpy_baseline(alphas, n, trials, seed=0, chunk_scores=2**21):
    """What a user writes in numpy: chunks of (trials x n) normal scores, max-shifted softmax statistics.

    Returns per-trial ``sum p^2``, ``H`` and ``G`` of shape (3, trials, len(alphas)).
    """
    alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    gen = np.random.default_rng(seed)
    rows = max(1, chunk_scores // n)
    out = np.empty((3, trials, alphas.size))
    for lo in range(0, trials, rows):
        s = gen.standard_normal((min(rows, trials - lo), n))
        x = s - s.max(axis=1, keepdims=True)
        hi = lo + s.shape[0]
        for k, a in enumerate(alphas):
            e = np.exp(a * x)
            z = e.sum(axis=1)
            sp2 = np.einsum("ij,ij->i", e, e) / (z * z)
            out[0, lo:hi, k] = sp2
            out[1, lo:hi, k] = np.log(z) - a * np.einsum("ij,ij->i", x, e) / z
            out[2, lo:hi, k] = a * (1.0 - sp2)
    return out


def best_of(fns: dict, repeats: int) -> dict:
    """Interleave the callables ``repeats`` times; the best wall time of each."""
    best = {k: np.inf for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def run_py(code: str, env_extra: dict | None = None, timeout: float = 600) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line last."""
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if res.returncode != 0:
        raise RuntimeError(f"subprocess failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------


def bench_kernel(trials: int, repeats: int) -> list[dict]:
    rows = []
    block, nblocks = _kernels.block_layout(trials)
    states = _kernels.block_states(seed_sequence(0), nblocks)
    empty = np.zeros(1)
    # warm every compiled path
    for a in (ALPHA1, GRID16, GEOM16):
        mc_trials(a, 64, trials=4, rng=0)
    _kernels.sample_only(64, 4, 1, states[:4].copy(), 0, 0.0, empty)

    fns = {
        "numpy 1": lambda: numpy_baseline(ALPHA1, N, trials),
        "kernel 1": lambda: mc_trials(ALPHA1, N, trials=trials, rng=0),
        "sample_only": lambda: _kernels.sample_only(
            N, trials, block, states, 0, 0.0, empty
        ),
        "numpy 16": lambda: numpy_baseline(GRID16, N, trials),
        "kernel 16 arith": lambda: mc_trials(GRID16, N, trials=trials, rng=0),
        "kernel 16 geom": lambda: mc_trials(GEOM16, N, trials=trials, rng=0),
    }
    t = best_of(fns, repeats)
    scores = N * trials
    info = f"n={N}, trials={trials}, {numba.get_num_threads()} threads; numpy single-threaded"
    rows.append(
        {
            "name": "MC kernel vs numpy, 1 scale",
            "value": t["numpy 1"] / t["kernel 1"],
            "unit": "x faster",
            "target": ">= 4",
            "detail": f"kernel {t['kernel 1']:.3f} s, numpy {t['numpy 1']:.3f} s ({info})",
        }
    )
    rows.append(
        {
            "name": "MC kernel vs numpy, 16 scales (arithmetic grid)",
            "value": t["numpy 16"] / t["kernel 16 arith"],
            "unit": "x faster",
            "target": ">= 8",
            "detail": f"kernel {t['kernel 16 arith']:.3f} s, numpy {t['numpy 16']:.3f} s; linspace(0.25, 4, 16)",
        }
    )
    rows.append(
        {
            "name": "MC kernel vs numpy, 16 scales (geometric grid, no sharing)",
            "value": t["numpy 16"] / t["kernel 16 geom"],
            "unit": "x faster",
            "target": ">= 8",
            "detail": f"kernel {t['kernel 16 geom']:.3f} s; geomspace(0.25, 4, 16): one exp per score and scale",
        }
    )
    rows.append(
        {
            "name": "MC kernel (1 scale) vs its sampling loop alone",
            "value": t["kernel 1"] / t["sample_only"],
            "unit": "x the cost",
            "target": "<= 2",
            "detail": f"sample_only {t['sample_only']:.3f} s = {t['sample_only'] * numba.get_num_threads() / scores * 1e9:.2f} "
            "thread-ns per score",
        }
    )
    ns = numba.get_num_threads() / scores * 1e9  # seconds -> thread-ns per score
    draw = t["sample_only"] * ns
    one = t["kernel 1"] * ns
    direct = (t["kernel 16 geom"] - t["kernel 1"]) * ns / 15
    shared = (t["kernel 16 arith"] - t["kernel 1"]) * ns / 15
    rows.append(
        {
            "name": "where the time goes (thread-ns per score)",
            "value": one,
            "unit": "ns, 1 scale",
            "target": "(information)",
            "ok": None,
            "detail": f"draw {draw:.2f}; first scale (max, shift, exp, sums) {one - draw:.2f}; each further scale "
            f"{direct:.2f} with its own exp, {shared:.2f} sharing exponentials on an arithmetic grid; "
            f"numpy (one thread): {t['numpy 1'] / scores * 1e9:.1f} ns per score for 1 scale, "
            f"{(t['numpy 16'] - t['numpy 1']) / scores * 1e9 / 15:.1f} per further scale",
        }
    )
    return rows


def bench_threads(trials: int, repeats: int) -> list[dict]:
    nmax = numba.config.NUMBA_NUM_THREADS
    if nmax < 2:
        return [
            {
                "name": "1 -> 2 threads",
                "value": float("nan"),
                "unit": "x",
                "target": ">= 1.7",
                "ok": False,
                "detail": "1 CPU",
            }
        ]

    def with_threads(k, a):
        def f():
            numba.set_num_threads(k)
            try:
                mc_trials(a, N, trials=trials, rng=0)
            finally:
                numba.set_num_threads(nmax)

        return f

    t = best_of(
        {
            "1": with_threads(1, ALPHA1),
            "2": with_threads(2, ALPHA1),
            "1g": with_threads(1, GRID16),
            "2g": with_threads(2, GRID16),
        },
        repeats,
    )
    return [
        {
            "name": "1 -> 2 threads, 1 scale",
            "value": t["1"] / t["2"],
            "unit": "x faster",
            "target": ">= 1.7",
            "detail": f"1 thread {t['1']:.3f} s, 2 threads {t['2']:.3f} s",
        },
        {
            "name": "1 -> 2 threads, 16 scales",
            "value": t["1g"] / t["2g"],
            "unit": "x faster",
            "target": ">= 1.7",
            "detail": f"1 thread {t['1g']:.3f} s, 2 threads {t['2g']:.3f} s",
        },
    ]


MEMORY_CODE = """
import json, resource, time, tracemalloc
import softmax_scale as ss
ss.mc_trials(1.5, 64, trials=4, rng=0)  # compile / load from cache first
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.perf_counter()
res = ss.softmax_stats(1.5, {n}, trials={trials}, rng=0)
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
                _timed(lambda n=n: ss.softmax_stats(1.5, n, method="exact"))
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


def _timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def bench_optimal_alpha(repeats: int) -> list[dict]:
    ns = np.arange(40, 20001, 40)
    ss.optimal_alpha(ns)
    t = min(_timed(lambda: ss.optimal_alpha(ns)) for _ in range(repeats))
    return [
        {
            "name": "optimal_alpha (mean-field), 500 values of n in one call",
            "value": t * 1e3,
            "unit": "ms",
            "target": "< 50",
            "detail": "n = 40, 80, ..., 20000",
        }
    ]


IMPORT_CODE = """
import json, time
t0 = time.perf_counter()
import softmax_scale
print(json.dumps(dict(seconds=time.perf_counter() - t0)))
"""

FIRST_CALL_CODE = """
import json, time
import numpy as np
import softmax_scale as ss
from softmax_scale import _kernels
from softmax_scale._random import seed_sequence
out = {}
def timed(name, f):
    t0 = time.perf_counter(); f(); out[name] = time.perf_counter() - t0
st = _kernels.block_states(seed_sequence(0), 4)
e = np.zeros(1)
timed("mc_trials (parallel)", lambda: ss.mc_trials(1.5, 64, trials=8, rng=0))
timed("mc_trials (serial)", lambda: ss.mc_trials(1.5, 64, trials=8, rng=0, parallel=False))
timed("sample_only", lambda: _kernels.sample_only(64, 4, 1, st, 0, 0.0, e))
timed("draw_scores", lambda: _kernels.draw_scores(64, 4, 1, st, 0, 0.0, e))
timed("softmax_stats exact", lambda: ss.softmax_stats(1.5, 100, method="exact"))
print(json.dumps(out))
"""


def bench_startup(repeats: int) -> list[dict]:
    rows = []
    imp = min(run_py(IMPORT_CODE)["seconds"] for _ in range(repeats))
    rows.append(
        {
            "name": "import softmax_scale",
            "value": imp,
            "unit": "s",
            "target": "< 1.5",
            "detail": "fresh process, best of repeats",
        }
    )
    with tempfile.TemporaryDirectory() as cache:
        cold = run_py(FIRST_CALL_CODE, {"NUMBA_CACHE_DIR": cache})
        warm = [
            run_py(FIRST_CALL_CODE, {"NUMBA_CACHE_DIR": cache}) for _ in range(repeats)
        ]
    for name in cold:
        w = min(x[name] for x in warm)
        rows.append(
            {
                "name": f"first call, {name}: cold / warm cache",
                "value": cold[name] / w if w > 0 else float("nan"),
                "unit": "x",
                "target": "(information)",
                "ok": None,
                "detail": f"cold (fresh NUMBA_CACHE_DIR) {cold[name]:.2f} s, warm {w:.3f} s",
            }
        )
    return rows


NOTES = """
## Notes

**Where the time goes** (the "where the time goes" row; thread-ns per score, one run).  Before this
work the kernel drew normals by Marsaglia's polar method, one call per score (the generator state
stored back to memory each time), and called libm's scalar `exp` once per score and scale.  Now:

1. *Draw*: a 256-layer ziggurat on xoshiro256** (numpy's layout: one 64-bit word gives layer,
   sign and 52-bit abscissa; 99% of draws cost that word and one table look-up), filled a chunk of
   512 scores at a time with the generator state in registers.  `draw_scores` still draws one by one
   through `_draw`, and tests check both give the same bits.
2. *Exponential*: a branch-free Cody-Waite reduction and a degree-13 polynomial (<= 2 ulp, exact
   `e^0 = 1`, gradual underflow) over the chunk, which LLVM vectorises (AVX-512 here); `2^k` is built
   from its bits through an LLVM `bitcast` intrinsic.
3. *Sums*: `sum e`, `sum e^2`, `sum x e` vectorised by allowing reassociation (`jit(reassociate=True)`,
   the `reassoc` flag only, on the pure-sum helpers).  The bits then depend on the machine's vector
   width, never on the thread count.
4. *Arithmetic grids* share exponentials in groups of 16 scales: `e^{a_{g+j} x} = e^{a_g x} (e^{h x})^j`
   (one product per score and scale, error ~j ulp), used on a chunk only where no factor of the group
   falls below `e^-700`.  A single scale never shares, so `alpha=x` and `alpha=[x]` give the same bits;
   a scale inside an arithmetic grid agrees with itself alone to ~1e-15, not bit for bit.  A
   non-arithmetic grid computes each scale on its own (the same bits as alone).

**Targets missed, and why.**

* *16 scales on a non-arithmetic grid (geometric row)*: ~3-4.5x, not 8x.  With one exponential per score
  and scale both sides are bound by the exponential's throughput: numpy's `np.exp` is itself
  AVX-512-vectorised (about 1 ns per element here), the kernel's is about as fast per element, so the
  kernel's edge is its two threads and its single pass over the data (no temporaries).  8x would
  need an exponential several times cheaper than numpy's (a table-driven one with a degree-5
  polynomial might give 1.5-2x more; an Estrin-form polynomial measured 15% faster, FMA contraction
  5%: not worth machine-dependent bits).  The target is met for the grid in the issue's spirit,
  `linspace` (the scales the figures and optimisers use), where exponentials are shared.
* *1 -> 2 threads* is met when the second core is free (1.9-2.0x); runs made while other jobs
  loaded the machine measured 1.5-1.7x.  The 256 blocks are equal pieces of work and the kernel holds
  no lock, so a shortfall is the load on the second core, not the kernel: read this row together with
  the load average in the header.

**Memory.**  Growth for 1e9 scores is the outputs only: `(trials x n_alpha)` x 4 float64 arrays
(3.2 MB for 1e5 trials and one scale) plus the mean/standard-error temporaries of `mc_stats`; the
per-thread work buffers are 5 x 512 floats.  ru_maxrss growth below 1 MB reads as 0.

**Start-up.**  `import softmax_scale` compiles nothing.  A cold cache costs 5 s on the first parallel
Monte Carlo call (numba compiles the kernel; the serial kernel and `sample_only` then share most of
the compiled callees); a warm on-disk cache loads it in ~0.2 s (mostly numba's threading layer).
"""

# ---------------------------------------------------------------------------------------------


def fmt(row) -> str:
    v = row["value"]
    val = "n/a" if np.isnan(v) else (f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}")
    ok = {True: "met", False: "MISSED", None: ""}[row["ok"] if "ok" in row else meets(row["value"], row["target"])]
    if row["detail"] == "not available yet":
        ok, val = "not available yet", "n/a"
    return f"| {row['name']} | {val} {row['unit']} | {row['target']} | {ok} | {row['detail']} |"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="fewer trials and repeats (a smoke run)"
    )
    p.add_argument(
        "--out",
        default=str(HERE / "results.md"),
        help="where to write the markdown table",
    )
    args = p.parse_args(argv)
    trials = 2000 if args.quick else TRIALS
    reps = 2 if args.quick else 3
    sections = [
        ("Monte Carlo kernel", lambda: bench_kernel(trials, reps)),
        ("Threads", lambda: bench_threads(trials, reps + 2)),
        ("Memory", lambda: bench_memory(args.quick)),
        ("Exact evaluator", lambda: bench_exact(reps + 2)),
        ("Optimiser", lambda: bench_optimal_alpha(reps + 2)),
        ("Start-up", lambda: bench_startup(reps)),
    ]
    header = (
        "| benchmark | measured | target | status | detail |\n|---|---|---|---|---|"
    )
    lines = []
    t0 = time.perf_counter()
    for title, f in sections:
        rows = f()
        for r in rows:
            line = fmt(r)
            print(line, flush=True)
            lines.append(line)
    cpu = os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = "\n".join(
        [
            "# Benchmarks",
            "",
            (
                f"`python benchmarks/run.py{' --quick' if args.quick else ''}` on {cpu} CPUs (load average {load:.1f} at the end), "
                f"numba {numba.__version__}, numpy {np.__version__}, {time.strftime('%Y-%m-%d %H:%M')}, "
                f"{time.perf_counter() - t0:.0f} s in all."
            ),
            (
                "Ratios are measured within this run, the two sides interleaved, best of "
                f"{reps} repeats each; absolute times are for information only (the machine is shared)."
            ),
            "",
            header,
            *lines,
            "",
        ]
    )
    text += "\n" + textwrap.dedent(NOTES).strip() + "\n"
    Path(args.out).write_text(text)
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()

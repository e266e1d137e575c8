"""Before and after a change, in one session: the same workloads on two source trees, interleaved.

``python benchmarks/before_after.py --base DIR [--rounds 3] [--out PATH]`` times each workload in a
fresh interpreter on the tree in ``DIR`` (e.g. ``git archive <commit> | tar -x -C DIR``) and on
this checkout, alternating the two ``--rounds`` times, and keeps the best time of each; the ratio
``after / before`` is what to read (the machine is shared and noisy: absolute times are for
information).  Every workload calls the public API only, so it runs on both trees, and each is
warmed up (numba compiled or loaded from its cache) before it is timed.

``--main-job`` adds the main job, ``softmax-scale figures`` as ``make figures`` runs it on each
tree (into a temporary folder holding a copy of that tree's committed CSVs), once per round: its
wall time and its CPU time (user + system, of the process and its children), which a loaded
machine inflates less.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: name -> (setup, statement timed); both run in a fresh interpreter with ``ss`` and ``np`` imported.
WORKLOADS = {
    "exact_stats, normal, n = 1e2..1e12 (11 calls)":
        ("", "[ss.softmax_stats(1.5, 10**k, method='exact') for k in range(2, 13)]"),
    "exact_stats, cosine d=128, alpha 25, n = 512, 64 scales":
        ("a = np.linspace(1, 40, 64)", "ss.exact_stats(a, 512, 'cosine', d=128)"),
    "head_stats with predictions, (2, 6, 256, 256) causal":
        ("x = np.random.default_rng(0).standard_t(4, (2, 6, 256, 256)) * 2.0", "ss.head_stats(x, causal=True)"),
    "signal_stats, cosine d=128, n = 512..32768":
        ("", "[ss.signal_stats([5.0, 20.0, 40.0], n, 1.0, 'cosine', d=128) for n in (512, 4096, 32768)]"),
    "extrapolation_table(512) (entropy curves, both regimes)":
        ("", "ss.extrapolation_table(512)"),
    "optimal_alpha, mean-field, 500 n":
        ("ns = np.arange(40, 20001, 40)", "ss.optimal_alpha(ns)"),
    "optimize_alpha, geometric, n = 512, 2000 trials":
        ("", "ss.optimize_alpha(512, objective='geometric', trials=2000, rng=0)"),
    "mc_trials, normal, n = 4096, 20000 trials":
        ("", "ss.mc_trials(1.5, 4096, trials=20000, rng=0)"),
    "mc_trials, cosine d=128, n = 1024, 10000 trials":
        ("", "ss.mc_trials(20.0, 1024, 'cosine', d=128, trials=10000, rng=0)"),
    "mc_trials, empirical sample, n = 4096, 5000 trials":
        ("v = np.random.default_rng(1).standard_normal(1000)", "ss.mc_trials(1.5, 4096, v, trials=5000, rng=0)"),
}

_RUNNER = """
import json, time, numpy as np
import softmax_scale as ss
assert ss.__file__.startswith({tree!r}), ss.__file__
{setup}
stmt = lambda: {stmt}
stmt()
best = float("inf")
for _ in range({repeats}):
    t0 = time.perf_counter(); stmt(); best = min(best, time.perf_counter() - t0)
print(json.dumps(best))
"""


def _time(tree: Path, setup: str, stmt: str, repeats: int) -> float:
    code = _RUNNER.format(tree=str(tree), setup=setup, stmt=stmt, repeats=repeats)
    env = dict(os.environ, PYTHONPATH=str(tree))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=str(tree),
                         timeout=1800, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{stmt} on {tree}:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _import_time(tree: Path) -> float:
    code = "import time; t0 = time.perf_counter(); import softmax_scale; print(time.perf_counter() - t0)"
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=str(tree), check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _main_job_time(tree: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``softmax-scale figures`` on ``tree``, into a folder holding its committed CSVs."""
    with tempfile.TemporaryDirectory() as out:
        for csv in sorted((tree / "figures").glob("*.csv")):
            shutil.copy(csv, out)
        env = dict(os.environ, PYTHONPATH=str(tree))
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "softmax_scale", "figures", "--out", out, "--no-progress"], env=env,
                             capture_output=True, text=True, cwd=str(tree), timeout=3600, check=False)
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise RuntimeError(f"softmax-scale figures on {tree}:\n{res.stderr[-2000:]}")
    return wall, (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="the tree before the change (a folder holding softmax_scale/)")
    p.add_argument("--rounds", type=int, default=2, help="alternations of the two trees")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats per workload and round")
    p.add_argument("--out", default=None, help="also write the markdown table here")
    p.add_argument("--only", default="", help="only the workloads whose name contains this text")
    p.add_argument("--main-job", action="store_true", help="also time `softmax-scale figures` on each tree, once a round")
    args = p.parse_args(argv)
    trees = {"before": Path(args.base).resolve(), "after": ROOT}
    work = {k: v for k, v in WORKLOADS.items() if args.only in k}
    jobs = ["main job, `softmax-scale figures`, wall", "main job, `softmax-scale figures`, CPU"] if args.main_job else []
    best = {name: {k: float("inf") for k in trees} for name in [*work, "import softmax_scale", *jobs]}
    t0 = time.perf_counter()
    for _ in range(args.rounds):
        for name, (setup, stmt) in work.items():
            for side, tree in trees.items():
                best[name][side] = min(best[name][side], _time(tree, setup, stmt, args.repeats))
        for side, tree in trees.items():
            best["import softmax_scale"][side] = min(best["import softmax_scale"][side],
                                                     min(_import_time(tree) for _ in range(3)))
        for side, tree in trees.items():
            if jobs:
                for name, sec in zip(jobs, _main_job_time(tree)):
                    best[name][side] = min(best[name][side], sec)
    load = os.getloadavg()[0]
    lines = ["| workload | before (s) | after (s) | after / before |", "|---|---:|---:|---:|"]
    for name, b in best.items():
        lines.append(f"| {name} | {b['before']:.3f} | {b['after']:.3f} | {b['after'] / b['before']:.2f} |")
    text = "\n".join(lines)
    only = (f" --only '{args.only}'" if args.only else "") + (" --main-job" if args.main_job else "")
    head = (f"`python benchmarks/before_after.py --base {args.base} --rounds {args.rounds} --repeats {args.repeats}{only}`: "
            f"{time.perf_counter() - t0:.0f} s, load average {load:.1f} at the end; best of "
            f"{args.rounds * args.repeats} per side, the two trees alternated.")
    print(head + "\n\n" + text)
    if args.out:
        Path(args.out).write_text(head + "\n\n" + textwrap.dedent(text) + "\n")


if __name__ == "__main__":
    main()

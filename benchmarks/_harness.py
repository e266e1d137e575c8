"""The shared harness of the benchmarks: timing, subprocess runs, targets, and the results files.

Every number that is compared with a target is a *ratio measured within one
run* (the machine is shared and noisy): the two sides are interleaved and the
best of several repeats of each is kept.  Absolute times are for information.

A results file is written by :func:`render` alone: a title, the paragraph that
says what ran where (:func:`run_paragraph`), the table of rows (:func:`fmt`),
and the notes of its topics (each topic module's ``NOTES``), nothing else.
"""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: The head of every results table.
TABLE_HEAD = "| benchmark | measured | target | status | detail |\n|---|---|---|---|---|"


def settings(quick: bool) -> tuple[int, int]:
    """Monte Carlo trials and repeats of one run: a full run, or a smoke run with ``--quick``."""
    return (2000, 2) if quick else (20_000, 3)


_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


def meets(value, target: str) -> bool:
    """Whether ``value`` meets a target written as ``"<op> <bound>"`` (e.g. ``">= 4"``): one source for both."""
    op, bound = target.split()
    return bool(_OPS[op](value, float(bound)))


def best_of(fns: dict, repeats: int) -> dict:
    """Interleave the callables ``repeats`` times; the best wall time of each."""
    best = {k: np.inf for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


#: Python text for a subprocess benchmark (needs ``numpy as np`` and ``time``): ``gemm_rate()``, the
#: float32 matrix-product rate (FLOP/s, best of 3 products of 2048 x 2048), the reference every
#: FLOP-rate target is a fraction of, measured in the same process as what it is compared with.
GEMM_RATE = """a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
def gemm_rate():
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter(); a @ a; best = min(best, time.perf_counter() - t0)
    return 2 * 2048**3 / best
"""


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


def timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def fmt(row) -> str:
    v = row["value"]
    val = "n/a" if np.isnan(v) else (f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}")
    ok = {True: "met", False: "MISSED", None: ""}[row["ok"] if "ok" in row else meets(row["value"], row["target"])]
    if row["detail"] == "not available yet":
        ok, val = "not available yet", "n/a"
    return f"| {row['name']} | {val} {row['unit']} | {row['target']} | {ok} | {row['detail']} |"


#: The CPU flags a run names (where the machine has them): the vector widths and number formats that change speed.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16")


def cpu_flags(path: str = "/proc/cpuinfo") -> str:
    """Which of :data:`CPU_FLAGS` this CPU has (``"unknown"`` where ``path`` cannot be read)."""
    try:
        with open(path) as f:
            line = next((x for x in f if x.startswith("flags")), "")
    except OSError:
        return "unknown"
    have = set(line.partition(":")[2].split())
    return " ".join(x for x in CPU_FLAGS if x in have) or "none of " + " ".join(CPU_FLAGS)


def run_paragraph(command: str, reps: int, seconds: float, versions: str) -> str:
    """What ran: on how many CPUs with which :func:`cpu_flags`, the load, ``versions``, when, how ratios are measured."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"`{command}` on {os.cpu_count()} CPUs (flags: {cpu_flags()}; load average {load:.1f} at the end), "
            f"{versions}, {time.strftime('%Y-%m-%d %H:%M')}, {seconds:.0f} s in all.\n"
            f"Ratios are measured within this run, the two sides interleaved, best of {reps} repeats each where a row does not "
            "say otherwise; absolute times are for information only (the machine is shared).")


def render(title: str, run: str, lines: list[str], notes: list[str]) -> str:
    """The text of a results file: ``title``, the ``run`` paragraph, the table ``lines``, then the non-empty ``notes``."""
    notes = [textwrap.dedent(n).strip() for n in notes if n.strip()]
    parts = [f"# {title}", "", run, "", TABLE_HEAD, *lines, ""]
    if notes:
        parts += ["## Notes", "", "\n\n".join(notes), ""]
    return "\n".join(parts)


def parse(text: str) -> tuple[str, list[str]]:
    """The ``run`` paragraph and the table lines of a results file that :func:`render` wrote."""
    head, sep, rest = text.partition("\n" + TABLE_HEAD + "\n")
    if not sep:
        raise ValueError("text: not a results file (no results table)")
    run = head.split("\n", 2)[2].strip() if head.startswith("# ") else ""
    lines = []
    for line in rest.split("\n"):
        if not line.startswith("|"):
            break
        lines.append(line)
    return run, lines

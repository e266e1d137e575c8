"""The main job: ``softmax-scale figures`` (what ``make figures`` runs), whole and step by step.

It runs in a fresh interpreter into a temporary folder that holds a copy of the committed
``figures/real_heads.csv``, so that the real-heads figures are drawn from it as ``make figures``
draws them; each step's seconds are those the command prints.  With ``--quick`` it times
``softmax-scale figures --quick`` instead (the smoke run; the targets are the full job's).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from ._harness import ROOT

#: The notes of this topic in its results file (markdown).
NOTES = """
**The main job.**  `softmax-scale figures` as `make figures` runs it (warm numba cache), into a
temporary folder holding a copy of the committed `real_heads.csv`: the real-heads figures are
drawn from that file (the `real_heads` experiment resumed, nothing computed), and the training and
real-extrapolation figures from their committed CSVs.  A step is the alpha* table with its
objective tables, or one figure; the targets are 2 minutes for the whole job and 15 s for any
analytic step.  On a shared machine the wall times grow with the load (the run paragraph gives it);
the CPU time much less.  The real-heads table computed afresh (`softmax-scale run real_heads` without
a `real_heads.csv`) is timed by `benchmarks/bench_real_heads.py`.
"""

#: The steps that draw from a committed result file and compute nothing analytic.
FROM_FILES = ("real_heads_sigma", "real_heads_entropy", "real_extrapolation", "train_mlm", "train_alpha",
              "train_causal", "train_causal_heads")

_WROTE = re.compile(r"^wrote (\S+)\s+\(([\d.]+) s\)$")
_TABLE = re.compile(r"^computed the alpha\* table and its objective tables \(([\d.]+) s\)$")


def steps(stdout: str) -> dict:
    """``{step: seconds}`` from the output of ``softmax-scale figures``: the alpha* table, then each figure."""
    out = {}
    for line in stdout.splitlines():
        m = _TABLE.match(line.strip())
        if m:
            out["alpha_table"] = float(m.group(1))
        m = _WROTE.match(line.strip())
        if m:
            out[os.path.splitext(os.path.basename(m.group(1)))[0]] = float(m.group(2))
    return out


def main_job(quick: bool) -> tuple[float, float, dict]:
    """Wall and CPU seconds (user + system) of one ``softmax-scale figures``, and its steps."""
    with tempfile.TemporaryDirectory() as out:
        shutil.copy(ROOT / "figures" / "real_heads.csv", out)
        cmd = [sys.executable, "-m", "softmax_scale", "figures", "--out", out, "--no-progress"] + (["--quick"] if quick else [])
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, check=False, cwd=str(ROOT))
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if res.returncode != 0:
        raise RuntimeError(f"softmax-scale figures failed:\n{res.stderr[-2000:]}")
    return wall, cpu, steps(res.stdout)


def run(quick: bool) -> list[dict]:
    """The main job's rows: the whole job, the alpha* table, the slowest analytic figure, the figures drawn from files."""
    wall, cpu, st = main_job(quick)
    form = " --quick" if quick else ""
    analytic = {k: v for k, v in st.items() if k not in FROM_FILES and k != "alpha_table"}
    slow = max(analytic, key=analytic.get)
    files = sum(v for k, v in st.items() if k in FROM_FILES)
    return [
        {"name": f"main job, `softmax-scale figures{form}`, wall time", "value": wall, "unit": "s", "target": "< 120",
         "detail": f"{len(st) - 1} figures and the alpha* table; sum of the steps {sum(st.values()):.1f} s"},
        {"name": f"main job, `softmax-scale figures{form}`, CPU time (user + system)", "value": cpu, "unit": "s",
         "target": "(information)", "ok": None, "detail": "less inflated than the wall time on a loaded machine"},
        {"name": "main job: the alpha* table with its objective tables", "value": st["alpha_table"], "unit": "s",
         "target": "< 15", "detail": "one step: the table and the typical/geometric objective tables"},
        {"name": "main job: the slowest analytic figure", "value": analytic[slow], "unit": "s", "target": "< 15",
         "detail": f"`{slow}`; next: " + ", ".join(f"`{k}` {v:.1f} s" for k, v in
                                                   sorted(analytic.items(), key=lambda kv: -kv[1])[1:4])},
        {"name": "main job: the figures drawn from committed result files", "value": files, "unit": "s",
         "target": "(information)", "ok": None,
         "detail": ", ".join(f"`{k}` {st[k]:.1f} s" for k in FROM_FILES if k in st)},
    ]

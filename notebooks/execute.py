"""Execute the notebooks in full mode and save them with their outputs, without what changes between runs.

    python notebooks/execute.py                  # every notebook, full mode: the committed state
    python notebooks/execute.py 05_real_heads    # some of them (names with or without .ipynb)
    python notebooks/execute.py --quick          # SOFTMAX_SCALE_QUICK=1, to try; not for committing

``make notebooks`` runs it.  ``tests/test_notebooks.py`` checks that the committed notebooks are
executed and stripped (:func:`strip_volatile` leaves them unchanged, no absolute path in an output)
and compares their key numbers (cells tagged ``key-numbers``) with a fresh quick run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
#: Seconds a cell may take in full mode (the slowest, notebook 02's Monte Carlo tables, takes about a minute).
TIMEOUT = 1800


def strip_volatile(nb):
    """Drop, in place, what differs between two runs of the same notebook: timings and interpreter details.

    Cell timing metadata (``execution``, ``ExecuteTime``) and the kernel's ``language_info`` beyond
    its name go, and consecutive pieces of one stream are joined (how a cell's printing is cut into
    pieces depends on when the kernel flushed); execution counts, outputs and tags stay.  Returns ``nb``.
    """
    lang = nb.metadata.get("language_info")
    if lang is not None:
        nb.metadata["language_info"] = {"name": lang.get("name", "python")}
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if cell.cell_type == "code":
            cell.outputs = _join_streams(cell.outputs)
    return nb


def _join_streams(outputs) -> list:
    joined = []
    for out in outputs:
        prev = joined[-1] if joined else None
        if (out.get("output_type") == "stream" and prev is not None and prev.get("output_type") == "stream"
                and prev.get("name") == out.get("name")):
            prev["text"] = prev["text"] + out["text"]
        else:
            joined.append(out)
    return joined


def execute(path: Path, *, quick: bool = False) -> float:
    """Run the notebook at ``path`` top to bottom in its folder and save it with its outputs; returns seconds."""
    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the inline backend, so that figures are saved as images
    if quick:
        env["SOFTMAX_SCALE_QUICK"] = "1"
    else:
        env.pop("SOFTMAX_SCALE_QUICK", None)
    saved = os.environ.copy()
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        seconds = time.perf_counter() - t0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nbformat.write(strip_volatile(nb), path)
    return seconds


def main(argv=None) -> int:
    """Execute the notebooks named in ``argv`` (default: all of ``notebooks/``)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="notebooks (default: all)")
    p.add_argument("--quick", action="store_true", help="SOFTMAX_SCALE_QUICK=1 (small runs; not for committing)")
    args = p.parse_args(argv)
    paths = sorted(HERE.glob("*.ipynb"))
    if args.names:
        want = {n.removesuffix(".ipynb") for n in args.names}
        unknown = want - {q.stem for q in paths}
        if unknown:
            print(f"execute.py: error: no notebook named {sorted(unknown)}", file=sys.stderr)
            return 2
        paths = [q for q in paths if q.stem in want]
    for path in paths:
        seconds = execute(path, quick=args.quick)
        print(f"executed {path.name} ({'quick' if args.quick else 'full'} mode, {seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

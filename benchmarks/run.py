"""Benchmarks of softmax_scale: ``python -m benchmarks`` (or ``benchmarks/run.py``) runs every topic, writes its results file.

One module per topic (:mod:`mc_kernel`, :mod:`memory`, :mod:`exact_evaluator`,
:mod:`optimiser`, :mod:`startup`, :mod:`decoder`, :mod:`bench_train`, :mod:`main_job`, :mod:`exact_cost`,
:mod:`measure_cost`, :mod:`measure_answer`), each with
``run(quick) -> rows`` and its ``NOTES``, over the shared harness in :mod:`_harness`.
:data:`RESULTS` says which results file holds which topics; a file is written by
:func:`_harness.render` from its topics' rows and notes only, and only when every topic
it holds has run.  Every number that is compared with a target is a *ratio measured within
this run* (the machine is shared and noisy): the two sides are interleaved and the best of
several repeats of each is kept.  Absolute times are printed for information only.

Options: ``--quick`` (fewer trials and repeats, for a smoke run: it prints its rows and writes no
results file unless ``--out`` is given, so that a smoke run never replaces the committed numbers),
``--only TOPIC ...``, ``--out DIR`` (default: ``benchmarks/``), ``--rewrite`` (measure nothing:
rewrite the results files from the rows they hold, with the current titles and notes).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `softmax_scale` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numba
import numpy as np

from benchmarks import (
    bench_train,
    decoder,
    exact_cost,
    exact_evaluator,
    main_job,
    mc_kernel,
    measure_answer,
    measure_cost,
    memory,
    optimiser,
    startup,
)
from benchmarks._harness import HERE, fmt, parse, render, run_paragraph, settings

#: Each results file: its title and the topics whose rows and notes it holds, in this order.
RESULTS = {
    "results.md": ("Benchmarks: the Monte Carlo kernel, memory, the exact evaluator, the optimiser, start-up",
                   (mc_kernel, memory, exact_evaluator, optimiser, startup)),
    "results_decoder.md": ("Benchmarks: the real decoder (SmolLM2-135M)", (decoder,)),
    "results_train.md": ("Benchmarks: the training harness", (bench_train,)),
    "results_main_job.md": ("Benchmarks: the main job (`make figures`)", (main_job,)),
    "results_exact.md": ("Benchmarks: the exact evaluator's default cost and its error estimate", (exact_cost,)),
    "results_measure.md": ("Benchmarks: measure's sweep and its answer within the hour (SmolLM2-135M)",
                           (measure_cost, measure_answer)),
}

#: Every topic, in the order of :data:`RESULTS`.
TOPICS = tuple(t for _, topics in RESULTS.values() for t in topics)


def topic_name(topic) -> str:
    """The name ``--only`` knows a topic by: its module's name."""
    return topic.__name__.rpartition(".")[2]


def results_text(name: str, run: str, lines: list[str]) -> str:
    """The text of the results file ``name`` for a ``run`` paragraph and its table ``lines``."""
    title, topics = RESULTS[name]
    return render(title, run, lines, [getattr(t, "NOTES", "") for t in topics])


def main(argv=None):
    """Run the topics asked for and write the results files they complete."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer trials and repeats (a smoke run)")
    p.add_argument("--out", default=None, help="the folder the results files are written to (default: benchmarks/; "
                   "with --quick, none is written unless --out is given)")
    p.add_argument("--only", nargs="+", choices=[topic_name(t) for t in TOPICS], metavar="TOPIC",
                   help=f"only these topics: {', '.join(topic_name(t) for t in TOPICS)}")
    p.add_argument("--rewrite", action="store_true",
                   help="measure nothing: rewrite the results files from the rows they hold, with the current notes")
    args = p.parse_args(argv)
    wanted = [t for t in TOPICS if not args.only or topic_name(t) in args.only]
    out = None if args.out is None and args.quick and not args.rewrite else Path(args.out or HERE)
    if args.rewrite:
        for name, (_, topics) in RESULTS.items():
            if any(t in wanted for t in topics):
                path = out / name
                path.write_text(results_text(name, *parse(path.read_text())))
                print(f"rewritten {path}")
        return
    reps = settings(args.quick)[1]
    command = "python benchmarks/run.py" + (" --quick" if args.quick else "") + (
        " --only " + " ".join(args.only) if args.only else "")
    versions = f"numba {numba.__version__}, numpy {np.__version__}"
    lines, seconds = {}, {}
    for topic in wanted:
        t0 = time.perf_counter()
        lines[topic] = []
        for r in topic.run(args.quick):
            line = fmt(r)
            print(line, flush=True)
            lines[topic].append(line)
        seconds[topic] = time.perf_counter() - t0
    for name, (_, topics) in RESULTS.items():
        ran = [t for t in topics if t in lines]
        if not ran:
            continue
        if len(ran) < len(topics):
            missing = ", ".join(topic_name(t) for t in topics if t not in lines)
            print(f"\n{name} not written: it also holds {missing}")
            continue
        if out is None:
            print(f"\n{name} not written: a --quick run writes its files only with --out DIR")
            continue
        path = out / name
        run = run_paragraph(command, reps, sum(seconds[t] for t in topics), versions)
        path.write_text(results_text(name, run, [x for t in topics for x in lines[t]]))
        print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()

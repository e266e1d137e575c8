"""Benchmark: one MiniLM forward pass at n = 512 and ``real_head_table`` with its defaults.

Targets: one forward pass at n = 512 under 1 s on 2 cores; ``real_head_table("minilm",
ns=(32, 64, 128, 256, 512), chunks=8, rng=0)`` under 60 s; weights read once per process.

Prints: the first and second ``models.load("minilm")`` in this process (the second is the
cache), the best and median ``attention_logits`` time on one 512-token window, and the wall time of
the default table with and without the i.i.d. predictions (``predict=False`` isolates the forward
passes and the measured statistics). Timings depend on the machine and its load: OpenBLAS threads
spin when cores are shared, so compare ``OPENBLAS_NUM_THREADS=1``.

Usage::

    python benchmarks/bench_real_heads.py [--repeat 5] [--no-table] [--no-predict-table]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-table", action="store_true", help="skip the default table with predictions")
    parser.add_argument("--no-predict-table", action="store_true", help="skip the table without predictions")
    args = parser.parse_args(argv)

    import softmax_scale as ss
    from softmax_scale import models

    print(f"cores: {os.cpu_count()}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}, "
          f"load average {os.getloadavg()[0]:.1f}")
    t = time.perf_counter()
    enc = models.load("minilm")
    first = time.perf_counter() - t
    t = time.perf_counter()
    assert models.load("minilm") is enc
    second = time.perf_counter() - t
    print(f"models.load('minilm'): first {first:.3f} s, second {second * 1e6:.1f} us (cached: weights read once per process)")

    pieces = enc.word_pieces(models.corpus("pydoc_topics"))
    ids = enc.wrap(models.token_chunks(pieces, 510, 1, rng=0)[0])
    enc.attention_logits(ids)  # warm up
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        enc.attention_logits(ids)
        times.append(time.perf_counter() - t)
    print(f"attention_logits at n=512: best {min(times):.3f} s, median {np.median(times):.3f} s (target < 1 s)")

    kw = dict(ns=(32, 64, 128, 256, 512), chunks=8, rng=0)
    if not args.no_predict_table:
        t, c = time.perf_counter(), time.process_time()
        ss.real_head_table("minilm", predict=False, **kw)
        print(f"real_head_table defaults, predict=False: {time.perf_counter() - t:.1f} s wall, "
              f"{time.process_time() - c:.1f} s CPU")
    if not args.no_table:
        t, c = time.perf_counter(), time.process_time()
        ss.real_head_table("minilm", **kw)
        print(f"real_head_table defaults (with predictions): {time.perf_counter() - t:.1f} s wall, "
              f"{time.process_time() - c:.1f} s CPU (target < 60 s)")


if __name__ == "__main__":
    main()

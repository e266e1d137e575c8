"""Benchmark: the numpy all-MiniLM-L6-v2 forward pass and the time to load its weights.

Target: one forward pass at n = 512 under 1 s on 2 cores. Prints the load time
(safetensors + tokenizer, in a fresh interpreter so nothing is cached, apart from the imports), the best and
median time of ``attention_logits`` on a 512-token window of the pydoc topics corpus, and the
corpus' word-piece count. It is a benchmark, not a test: timings depend on the machine and on
what else runs on it (OpenBLAS threads spin when cores are shared; compare
``OPENBLAS_NUM_THREADS=1``).

Usage::

    python benchmarks/bench_models.py [--n 512] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

LOAD = (
    "import time; t0 = time.perf_counter(); import softmax_scale.models as m, safetensors.numpy, tokenizers; "
    "t1 = time.perf_counter(); m.load('minilm'); print(t1 - t0, time.perf_counter() - t1)"
)


def bench(n: int, repeat: int) -> dict:
    """Seconds to load (fresh process) and per forward pass at length ``n``; corpus token count."""
    out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, check=True).stdout
    imports, load = (float(v) for v in out.split())
    from softmax_scale import models

    enc = models.load("minilm")
    pieces = enc.word_pieces(models.corpus("pydoc_topics"))
    ids = enc.wrap(models.token_chunks(pieces, n - 2, 1, rng=0)[0])
    enc.attention_logits(ids)  # warm up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        enc.attention_logits(ids)
        times.append(time.perf_counter() - t)
    return {"imports": imports, "load": load, "best": min(times), "median": float(np.median(times)), "tokens": len(pieces)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    r = bench(args.n, args.repeat)
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"cores: {os.cpu_count()}, OPENBLAS_NUM_THREADS={threads}")
    print(f"fresh process: import softmax_scale.models {r['imports']:.3f} s, then load('minilm') {r['load']:.3f} s")
    print(f"attention_logits at n={args.n}: best {r['best']:.3f} s, median {r['median']:.3f} s (target < 1 s)")
    print(f"pydoc_topics word pieces (MiniLM tokenizer): {r['tokens']}")


if __name__ == "__main__":
    main()

"""Benchmark: LayerNorm against RMSNorm (no centring).

RMSNorm skips the mean and the subtraction, so it makes one reduction and one
elementwise pass fewer.  Prints the times and the ratio measured in this run;
it is a benchmark, not a test (timings depend on the machine).

Usage::

    python benchmarks/bench_norms.py [--rows 4096] [--width 1024] [--repeat 7]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from softmax_scale.moments import layer_norm, rms_norm


def bench(rows: int, width: int, repeat: int, number: int) -> dict:
    """Best-of-``repeat`` seconds per call of each norm on a ``(rows, width)`` array.

    Parameters
    ----------
    rows, width : int
        Shape of the input (normalised along ``width``).
    repeat, number : int
        :func:`timeit.repeat` settings.

    Returns
    -------
    dict
        ``{"layer": seconds, "rms": seconds, "ratio": layer / rms}``.
    """
    x = np.random.default_rng(0).standard_normal((rows, width))
    out = {}
    for name, func in (("layer", layer_norm), ("rms", rms_norm)):
        func(x)  # warm up
        times = timeit.repeat(lambda f=func: f(x), repeat=repeat, number=number)
        out[name] = min(times) / number
    out["ratio"] = out["layer"] / out["rms"]
    return out


def main(argv=None) -> None:
    """Run the benchmark and print the ratio."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=5)
    a = p.parse_args(argv)
    r = bench(a.rows, a.width, a.repeat, a.number)
    print(f"input ({a.rows}, {a.width}) float64, best of {a.repeat} x {a.number} calls")
    print(f"LayerNorm {1e3 * r['layer']:8.3f} ms/call")
    print(f"RMSNorm   {1e3 * r['rms']:8.3f} ms/call")
    print(f"LayerNorm / RMSNorm time ratio (this run): {r['ratio']:.2f}")


if __name__ == "__main__":
    main()

"""bfloat16 against float32 training: loss curves over two seeds, for the masked and the causal configuration.

Run once, not by ``run.py`` (minutes of CPU per run)::

    python benchmarks/bf16_curves.py --steps 120 --only mlm --json mlm.json      # one process per configuration
    python benchmarks/bf16_curves.py --steps 120 --only causal --json causal.json
    python benchmarks/bf16_curves.py --report mlm.json causal.json --out benchmarks/results_bf16.md

Each run is one process pinned to one core with one XLA thread, as the sweeps run.  The runs are
the configurations' own at a reduced step count (warm-up a tenth of it); the held-out loss is
:func:`softmax_scale.train.evaluate` at the training length.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONFIGS = {
    "mlm": {},
    "causal": {"objective": "causal", "ffn": "swiglu", "d_ff": 344, "train_length": 128, "batch": 16},
}
DTYPES = ("float32", "bfloat16")
SEEDS = (0, 1)
EVERY = 20


def measure(name: str, steps: int) -> list[dict]:
    """Train ``name`` at ``steps`` steps in each dtype and seed; the losses along the way and at the end."""
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
                               "intra_op_parallelism_threads=1").strip()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1 if name == "mlm" else 0]})
    import numpy as np

    from softmax_scale.train import TrainConfig
    from softmax_scale.train.evaluation import evaluate
    from softmax_scale.train.loop import train_model

    rows = []
    for dtype in DTYPES:
        for seed in SEEDS:
            cfg = TrainConfig(**CONFIGS[name], steps=steps, warmup=max(1, steps // 10), compute_dtype=dtype)
            t0, c0 = time.perf_counter(), time.process_time()
            res = train_model(cfg, rng=seed, progress=False)
            cpu = time.process_time() - c0
            ev = evaluate(res.params, cfg, [cfg.train_length], tokens=16384)
            loss = res.history["loss"]
            rows.append({"config": name, "dtype": dtype, "seed": seed, "steps": steps,
                         "final_loss": float(np.mean(loss[-10:])), "heldout_loss": float(ev.loss[0]),
                         "curve": [float(np.mean(loss[max(0, i - EVERY):i])) for i in range(EVERY, steps + 1, EVERY)],
                         "cpu_seconds": cpu, "wall_seconds": time.perf_counter() - t0,
                         "step_seconds": cfg.tokens_per_step() / res.tokens_per_second})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict]) -> str:
    """The results as a markdown table and a verdict per configuration."""
    import numpy as np

    out = ["| config | dtype | seed | final train loss (mean of last 10 steps) | held-out loss | "
           f"train loss per {EVERY} steps | s/step (wall) | CPU s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['config']} | {r['dtype']} | {r['seed']} | {r['final_loss']:.4f} | {r['heldout_loss']:.4f} | "
                   f"{' '.join(f'{x:.3f}' for x in r['curve'])} | {r['step_seconds']:.2f} | {r['cpu_seconds']:.0f} |")
    out.append("")
    for name in dict.fromkeys(r["config"] for r in rows):
        for key in ("final_loss", "heldout_loss"):
            f32 = np.array([r[key] for r in rows if r["config"] == name and r["dtype"] == "float32"])
            b16 = np.array([r[key] for r in rows if r["config"] == name and r["dtype"] == "bfloat16"])
            spread = f32.max() - f32.min()
            diff = abs(b16.mean() - f32.mean())
            out.append(f"- {name}, {key.replace('_', ' ')}: float32 {f32.mean():.4f} (seed spread {spread:.4f}), "
                       f"bfloat16 {b16.mean():.4f} (seed spread {b16.max() - b16.min():.4f}); |difference of means| "
                       f"{diff:.4f}: {'within' if diff <= spread else 'NOT within'} float32's seed spread")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    """Measure one configuration into JSON, or write the report of several."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--only", choices=sorted(CONFIGS))
    p.add_argument("--json", type=Path)
    p.add_argument("--report", nargs="+", type=Path)
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    if a.report:
        rows = [r for f in a.report for r in json.loads(f.read_text())]
        text = report(rows)
        if a.out:
            a.out.write_text(text)
        print(text)
        return 0
    if not a.only or not a.json:
        p.error("give --only and --json to measure, or --report")
    a.json.write_text(json.dumps(measure(a.only, a.steps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

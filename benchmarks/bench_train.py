"""The training harness: bytes per second, the step's FLOP rate against the matmul rate, evaluation.

The step's FLOP rate is a fraction of the float32 matrix-product rate measured in the same run;
evaluation is timed at n = 1024.

Measured the way the sweeps run: one process pinned to one core, one XLA thread and one BLAS
thread (a sweep runs one such worker per core).  Run ``python benchmarks/run.py --only bench_train``.
"""

from __future__ import annotations

from ._harness import GEMM_RATE, run_py

#: The notes of this topic in its results file (markdown).
NOTES = """
Two things set the step's rate: ReLU in the feed-forward (XLA's CPU backward of a transcendental
activation such as GELU costs as much as the block's matrix products: 0.22 s per step with GELU,
0.18 s with ReLU), and one XLA thread per worker pinned to its core (with GELU an unpinned process
measured 0.34 s per step against 0.27 s pinned; two workers side by side are 17% slower each than one
alone).
"""

TRAIN_CODE = """
import json, os, time
os.sched_setaffinity(0, {{sorted(os.sched_getaffinity(0))[-1]}})
import numpy as np
from softmax_scale.train import TrainConfig
from softmax_scale.train.loop import train_model
from softmax_scale.train.evaluation import evaluate
{gemm}r0 = gemm_rate()
cfg = TrainConfig(steps={steps}, warmup=5)
res = train_model(cfg, rng=0, progress=False)
r1 = gemm_rate()
evaluate(res.params, cfg, [1024], tokens=1024)  # compile
t0 = time.perf_counter()
ev = evaluate(res.params, cfg, [1024], tokens={eval_tokens})
dt = time.perf_counter() - t0
r2 = gemm_rate()
print(json.dumps(dict(tokens_per_second=res.tokens_per_second, step_flops=cfg.step_flops(),
                      tokens_per_step=cfg.tokens_per_step(), gemm=max(r0, r1, r2), eval_seconds=dt,
                      eval_bytes=ev[1024].windows * 1024, n_params=cfg.n_params)))
"""

ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1", "OPENBLAS_NUM_THREADS": "1",
       "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run(quick: bool) -> list[dict]:
    """Training rate and FLOP fraction at the experiments' size; evaluation at n = 1024."""
    steps, eval_tokens = (15, 8192) if quick else (60, 32768)
    out = run_py(TRAIN_CODE.format(steps=steps, eval_tokens=eval_tokens, gemm=GEMM_RATE), env_extra=ENV, timeout=1800)
    flop_rate = out["step_flops"] * out["tokens_per_second"] / out["tokens_per_step"]
    step_s = out["tokens_per_step"] / out["tokens_per_second"]
    return [
        {"name": "training step FLOP rate / float32 matmul rate, experiment size, one core",
         "value": flop_rate / out["gemm"], "unit": "", "target": ">= 0.3",
         "detail": f"{flop_rate / 1e9:.1f} GFLOP/s ({out['step_flops'] / 1e9:.1f} GFLOP per step of "
                   f"{out['tokens_per_step']} bytes, {step_s:.3f} s); 2048^3 sgemm {out['gemm'] / 1e9:.0f} GFLOP/s "
                   f"(1 thread, best of 9, same run); {out['n_params'] / 1e6:.2f}M parameters"},
        {"name": "training bytes per second, one core", "value": out["tokens_per_second"], "unit": "bytes/s",
         "target": "(information)", "ok": None,
         "detail": f"4 layers, d_model 128, batch 32 x 64 bytes; {steps} steps after the compiling one"},
        {"name": "evaluation at n = 1024, one core", "value": out["eval_bytes"] / out["eval_seconds"], "unit": "bytes/s",
         "target": "(information)", "ok": None,
         "detail": f"{out['eval_bytes']} held-out bytes in {out['eval_seconds']:.2f} s (compiled; 16 windows per call)"},
    ]

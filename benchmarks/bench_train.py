"""The training harness: bytes per second, the step's FLOP rate against the matmul rate, bfloat16, evaluation.

The float32 step's FLOP rate is a fraction of the float32 matrix-product rate measured in the same
run.  float32 and bfloat16 steps (``TrainConfig(compute_dtype=...)``) are timed side by side, the
runs interleaved, at the experiments' size (whole training steps) and at ``d_model`` 256 (the
step's forward and backward pass: :func:`~softmax_scale.train.train_model` stops a ``d_model`` 256
run at its first step, whose loss exceeds ``DIVERGENCE_LOSS``), each as a fraction of the
matrix-product rate of its own dtype in XLA (a 2048^3 product, bfloat16 inputs accumulated in
float32 for bfloat16), and their ratio is the speed-up.  Evaluation is timed at n = 1024.

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
import jax, jax.numpy as jnp
from softmax_scale.train import TrainConfig
from softmax_scale.train.loop import train_model
from softmax_scale.train.evaluation import evaluate
from softmax_scale.train.tasks import train_batch
from softmax_scale.train.model import init_params, loss_and_accuracy, rope_tables
from softmax_scale.train.scales import model_factors
{gemm}
x32 = jnp.asarray(a)
products = {{"float32": jax.jit(lambda x: x @ x),
            "bfloat16": jax.jit(lambda x: jnp.matmul(x, x, preferred_element_type=jnp.float32))}}
inputs = {{"float32": x32, "bfloat16": x32.astype(jnp.bfloat16)}}
def xla_rate(dtype):
    f, x = products[dtype], inputs[dtype]
    f(x).block_until_ready()
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter(); f(x).block_until_ready(); best = min(best, time.perf_counter() - t0)
    return 2 * 2048**3 / best
r0 = gemm_rate()
sizes = {{"experiments": TrainConfig(steps={steps}, warmup=5),
         "d_model 256": TrainConfig(d_model=256, d_ff=1024, steps={steps}, warmup=5)}}
def grad_rate(cfg):  # bytes per second of the step's forward and backward pass
    g = jax.jit(jax.value_and_grad(lambda p, *a: loss_and_accuracy(p, *a[:3], cos=a[3], sin=a[4], factors=a[5],
                heads=cfg.heads, causal=cfg.causal, compute_dtype=cfg.compute_dtype)[0]))
    b = train_batch(cfg, np.random.SeedSequence(0), 0)
    args = (init_params(cfg, 0), b.inputs, b.targets, b.weights, *rope_tables(cfg, cfg.train_length),
            model_factors(cfg, cfg.train_length))
    jax.block_until_ready(g(*args))
    t0 = time.perf_counter()
    for _ in range({steps}):
        jax.block_until_ready(g(*args))
    return {steps} * cfg.tokens_per_step() / (time.perf_counter() - t0)
rates = {{"float32": [], "bfloat16": []}}
steps = {{}}
res = None
for rep in range({repeats}):
    for dtype in ("float32", "bfloat16"):
        rates[dtype].append(xla_rate(dtype))
        for size, cfg in sizes.items():
            key = size + "|" + dtype
            if size == "experiments":
                r = train_model(cfg.replace(compute_dtype=dtype), rng=0, progress=False)
                steps[key] = max(steps.get(key, 0.0), r.tokens_per_second)
                res = r if dtype == "float32" else res
            else:
                steps[key] = max(steps.get(key, 0.0), grad_rate(cfg.replace(compute_dtype=dtype)))
r1 = gemm_rate()
cfg = sizes["experiments"]
evaluate(res.params, cfg, [1024], tokens=1024)  # compile
t0 = time.perf_counter()
ev = evaluate(res.params, cfg, [1024], tokens={eval_tokens})
dt = time.perf_counter() - t0
r2 = gemm_rate()
print(json.dumps(dict(tokens_per_second=steps["experiments|float32"], step_flops=cfg.step_flops(),
                      tokens_per_step=cfg.tokens_per_step(), gemm=max(r0, r1, r2), eval_seconds=dt,
                      eval_bytes=ev[1024].windows * 1024, n_params=cfg.n_params,
                      xla={{k: max(v) for k, v in rates.items()}}, steps=steps,
                      flops={{k: c.step_flops() for k, c in sizes.items()}},
                      tokens={{k: c.tokens_per_step() for k, c in sizes.items()}})))
"""

ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1", "OPENBLAS_NUM_THREADS": "1",
       "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: The bfloat16 step's speed-up over float32 wanted at each size.
SPEEDUP_TARGETS = {"experiments": ">= 2", "d_model 256": ">= 2.5"}


def run(quick: bool) -> list[dict]:
    """Training rate and FLOP fraction at the experiments' size; bfloat16 against float32; evaluation at n = 1024."""
    steps, eval_tokens, repeats = (6, 8192, 1) if quick else (20, 32768, 2)
    out = run_py(TRAIN_CODE.format(steps=steps, eval_tokens=eval_tokens, repeats=repeats, gemm=GEMM_RATE),
                 env_extra=ENV, timeout=3600)
    flop_rate = out["step_flops"] * out["tokens_per_second"] / out["tokens_per_step"]
    step_s = out["tokens_per_step"] / out["tokens_per_second"]
    rows = [
        {"name": "training step FLOP rate / float32 matmul rate, experiment size, one core",
         "value": flop_rate / out["gemm"], "unit": "", "target": ">= 0.3",
         "detail": f"{flop_rate / 1e9:.1f} GFLOP/s ({out['step_flops'] / 1e9:.1f} GFLOP per step of "
                   f"{out['tokens_per_step']} bytes, {step_s:.3f} s); 2048^3 sgemm {out['gemm'] / 1e9:.0f} GFLOP/s "
                   f"(1 thread, best of 9, same run); {out['n_params'] / 1e6:.2f}M parameters"},
        {"name": "training bytes per second, one core", "value": out["tokens_per_second"], "unit": "bytes/s",
         "target": "(information)", "ok": None,
         "detail": f"4 layers, d_model 128, batch 32 x 64 bytes; {steps} steps after the compiling one"},
    ]
    xla = out["xla"]
    for size, target in SPEEDUP_TARGETS.items():
        per = {}
        for dtype in ("float32", "bfloat16"):
            seconds = out["tokens"][size] / out["steps"][f"{size}|{dtype}"]
            per[dtype] = (seconds, out["flops"][size] / seconds / xla[dtype])
        what = "step" if size == "experiments" else "forward+backward"
        rows.append({"name": f"bfloat16 {what} speed-up over float32, {size}, one core",
                     "value": per["float32"][0] / per["bfloat16"][0], "unit": "x", "target": target,
                     "detail": f"{what} {per['float32'][0]:.3f} s float32, {per['bfloat16'][0]:.3f} s bfloat16; "
                               f"FLOP rate / own dtype's XLA matmul rate {per['float32'][1]:.2f} float32, "
                               f"{per['bfloat16'][1]:.2f} bfloat16; XLA 2048^3 {xla['float32'] / 1e9:.0f} GFLOP/s "
                               f"float32, {xla['bfloat16'] / 1e9:.0f} GFLOP/s bfloat16 (same run)"})
    rows.append({"name": "XLA matmul rate, bfloat16 inputs / float32, one core", "value": xla["bfloat16"] / xla["float32"],
                 "unit": "x", "target": "(information)", "ok": None,
                 "detail": "the ceiling of the bfloat16 speed-up on this CPU: 2048^3, best of 3, same run"})
    rows.append({"name": "evaluation at n = 1024, one core", "value": out["eval_bytes"] / out["eval_seconds"],
                 "unit": "bytes/s", "target": "(information)", "ok": None,
                 "detail": f"{out['eval_bytes']} held-out bytes in {out['eval_seconds']:.2f} s (compiled; 16 windows per call)"})
    return rows

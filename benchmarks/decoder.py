"""The real decoder (SmolLM2-135M in numpy): its rate against the machine's matrix-product rate, per attention kernel.

One 8,192-token forward per kernel (:data:`KERNELS`), each in a fresh interpreter that also measures
sgemm's rate and its own peak memory; and the forward as ``measure`` runs it (:data:`READOUT_CODE`).
"""

from __future__ import annotations

from softmax_scale.models.attention import KEY_BLOCK

from ._harness import GEMM_RATE, run_py

#: The notes of this topic in its results file (markdown).
NOTES = """
The decoder's attention (`softmax_scale/models/attention.py`) has two kernels: the fused numba kernel
(`kernel="numba"`: units of one query block and key/value group spread over the threads, BLAS on one thread
meanwhile; per key tile of 512 the query-key product through BLAS, one numba pass over each score row
(`softmax_scale/models/tiles.py`), then the probability-value product through BLAS) and the numpy passes over
whole rows (the default, `kernel="numpy"`, what the committed results were computed with and the reference of
the tests). With statistics the pass over a row takes the tile's masked maximum, a float32 exponential
(Cephes' `expf`, within 1 ulp, vectorised by LLVM), the sums and the moments for `sigma` and the entropy;
without them it keeps the row's first tile's maximum as its reference, clamps the exponentials at `e^30` and
checks the tile's sum (the row is redone at the tile's maximum where the sum reaches `e^29`), so no pass
finds a maximum past a row's first tile. Every forward but the first row's here asks for the statistics, as
the experiments do. The attention rows time each layer's call to `attention` inside the forward of the rows
below them; the tile rows time the fused attention alone, statistics off, at each key tile.

The first row is the forward as `softmax-scale measure` runs it (`softmax_scale/models/readout.py` `read_out`,
statistics off, the fused kernel that measure passes): one 8,192-token pass scored at its last half, the
vocabulary projection of those positions counted. Under either kernel the rows of every large product are
split over the attention threads, each on one BLAS thread (`matmul_rows`, the bits of one product): the
projections; the feed-forward network, each thread its rows 512 at a time (gate, up, the SwiGLU step and down
while the chunk is in cache); the vocabulary projection of the scored rows 256 at a time, each block's
log-softmax beside it. Under the fused kernel the whole pass holds BLAS at one thread, so BLAS's own threads
never wake. The elementwise steps are numba passes (RoPE with the query scale and the head
layout, RMSNorm) or numpy passes a few rows at a time, in the same threads.

Peak memory is mostly the model and every layer's queries, keys and values that a pass keeps; the fused
kernel adds the numba runtime and compiled kernels, and each thread's tile buffers.
"""

DECODER_CODE = """
import json, resource, time
import numpy as np
from softmax_scale import models
from softmax_scale.models import layer
spent = [0.0]
def timed(*a, _f=layer.attention, **kw):
    t = time.perf_counter(); r = _f(*a, **kw); spent[0] += time.perf_counter() - t; return r
layer.attention = timed
m = models.load("smollm2")
c = m.config
ids = m.tokenize(models.corpus("pydoc_topics"))[:{n}]
n = len(ids)
{gemm}r0 = gemm_rate()
m.positions(ids[:256], kernel="{kernel}")  # warm-up
spent[0] = 0.0
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
m.positions(ids, query_block=256, kernel="{kernel}")
dt = time.perf_counter() - t0
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r1 = gemm_rate()
D, F, H, G, d, V = c.d_model, c.d_ff, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size
linear = 2 * n * c.n_layers * (D * H * d + 2 * D * G * d + H * d * D + 3 * D * F) + 2 * n * D * V
attention = 2 * 2 * c.n_layers * H * d * n * (n + 1) / 2
print(json.dumps(dict(n=n, seconds=dt, flops=linear + attention, gemm=max(r0, r1), rss_mb=rss1 / 1024,
                      attention_seconds=spent[0], attention_flops=attention,
                      rss_model_mb=rss0 / 1024)))
"""

READOUT_CODE = """
import json, time
import numpy as np
from softmax_scale import models
from softmax_scale.models.readout import read_out
m = models.load("smollm2")
c = m.config
ids = m.tokenize(models.corpus("pydoc_topics"))[:{n}]
n = len(ids)
pos = np.arange(n // 2, n - 1)
{gemm}r0 = gemm_rate()
read_out(m, ids[:256], np.arange(128, 255), probe=[], kernel="{kernel}")  # warm-up
t0 = time.perf_counter()
read_out(m, ids, pos, probe=[], kernel="{kernel}")
dt = time.perf_counter() - t0
r1 = gemm_rate()
D, F, H, G, d, V = c.d_model, c.d_ff, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size
linear = 2 * n * c.n_layers * (D * H * d + 2 * D * G * d + H * d * D + 3 * D * F) + 2 * pos.size * D * V
attention = 2 * 2 * c.n_layers * H * d * n * (n + 1) / 2
print(json.dumps(dict(n=n, seconds=dt, flops=linear + attention, gemm=max(r0, r1))))
"""

TILES_CODE = """
import json, time
import numpy as np
from softmax_scale.models import attention as A
{gemm}rng = np.random.default_rng(0)
n, H, G, d = {n}, 9, 3, 64  # SmolLM2's heads
q = rng.standard_normal((H, n, d), dtype=np.float32) / 8
k, v = (rng.standard_normal((G, n, d), dtype=np.float32) for _ in range(2))
tiles = {tiles}
A.attention(q[:, :512], k[:, :512], v[:, :512], 0, query_block=256, stats=False, kernel="numba")  # compile
best = dict.fromkeys(tiles, np.inf)
g = gemm_rate()
for _ in range(3):
    for t in tiles:
        t0 = time.perf_counter()
        A.attention(q, k, v, 0, query_block=256, stats=False, kernel="numba", key_block=t)
        best[t] = min(best[t], time.perf_counter() - t0)
g = max(g, gemm_rate())
flops = 2 * 2 * H * d * n * (n + 1) / 2
print(json.dumps(dict(n=n, gemm=g, flops=flops, seconds={{str(t): s for t, s in best.items()}})))
"""

#: Keys per tile timed by the tile rows (:data:`softmax_scale.models.attention.KEY_BLOCK` among them).
TILES = (256, 512, 1024)

#: The attention kernel ``measure`` reads its cells with (``softmax_scale/experiments/_measure_sweep.py``).
MEASURE_KERNEL = "numba"

#: Forwards of each kernel in a full run, alternating with the other kernel's.
REPEATS = 2

#: The attention kernels timed (:data:`softmax_scale.models.attention.KERNELS`), with what the rows call them.
KERNELS = {"numba": "fused numba kernel", "numpy": "numpy passes (the reference)"}


def _forward(n: int, kernel: str) -> dict:
    """One ``n``-token forward with statistics in a fresh interpreter: its rate as a fraction of sgemm's there."""
    out = run_py(DECODER_CODE.format(n=n, gemm=GEMM_RATE, kernel=kernel), timeout=7200)
    out["rate"] = out["flops"] / out["seconds"]
    out["fraction"] = out["rate"] / out["gemm"]
    return out


def run(quick: bool) -> list[dict]:
    """Rate and peak memory at 8,192 tokens (2,048 with ``quick``) for each kernel, each in its own interpreter.

    The kernels alternate (fused, numpy, fused, numpy, ...; :data:`REPEATS` each) and the fastest
    forward of each is kept, so that a change of the machine's load falls on both sides.
    """
    n = 2048 if quick else 8192
    runs: dict = {}
    readout = None
    for _ in range(1 if quick else REPEATS):
        for k in KERNELS:
            out = _forward(n, k)
            if k not in runs or out["seconds"] < runs[k]["seconds"]:
                runs[k] = out
        out = run_py(READOUT_CODE.format(n=n, gemm=GEMM_RATE, kernel=MEASURE_KERNEL), timeout=7200)
        if readout is None or out["seconds"] < readout["seconds"]:
            readout = out
    rate = readout["flops"] / readout["seconds"]
    rows = [{
        "name": f"decoder forward as measure runs it / float32 matmul rate, {readout['n']} tokens",
        "value": rate / readout["gemm"], "unit": "", "target": ">= 0.7",
        "detail": f"read_out, statistics off, {KERNELS[MEASURE_KERNEL]}, the last half of the positions scored: "
                  f"{rate / 1e9:.0f} GFLOP/s of {readout['flops'] / 1e12:.2f} TFLOP in {readout['seconds']:.1f} s; "
                  f"2048^3 sgemm {readout['gemm'] / 1e9:.0f} GFLOP/s (best of 3, same interpreter); best of "
                  f"{1 if quick else REPEATS}, alternating with the forwards below",
    }]
    for k, out in runs.items():
        rate = out["attention_flops"] / out["attention_seconds"]
        rows.append({
            "name": f"decoder attention rate / float32 matmul rate, {out['n']} tokens, {KERNELS[k]}",
            "value": rate / out["gemm"], "unit": "", "target": ">= 0.5" if k == "numba" else "(reference)",
            "detail": f"{rate / 1e9:.0f} GFLOP/s: {out['attention_flops'] / 1e12:.2f} TFLOP (causal q.k and p.v) in "
                      f"{out['attention_seconds']:.1f} s of the forward below, timed around each layer's attention call",
            **({} if k == "numba" else {"ok": None}),
        })
    for k, out in runs.items():
        rows.append({
            "name": f"decoder forward rate / float32 matmul rate, {out['n']} tokens, {KERNELS[k]}",
            "value": out["fraction"], "unit": "", "target": "(whole pass)", "ok": None,
            "detail": f"{out['rate'] / 1e9:.0f} GFLOP/s of {out['flops'] / 1e12:.2f} TFLOP in {out['seconds']:.1f} s; "
                      f"2048^3 sgemm {out['gemm'] / 1e9:.0f} GFLOP/s (best of 3, same interpreter); statistics on",
        })
    tiles = run_py(TILES_CODE.format(n=n, gemm=GEMM_RATE, tiles=TILES), timeout=1800)
    fastest = min(tiles["seconds"], key=tiles["seconds"].get)
    for t in TILES:
        sec = tiles["seconds"][str(t)]
        rows.append({
            "name": f"fused attention alone / float32 matmul rate, {tiles['n']} tokens, key tile {t}"
                    + (" (KEY_BLOCK)" if t == KEY_BLOCK else ""),
            "value": tiles["flops"] / sec / tiles["gemm"], "unit": "", "target": "(tile)", "ok": None,
            "detail": f"random queries, keys and values in SmolLM2's heads (9 / 3 of 64), query block 256, statistics "
                      f"off: {sec:.2f} s, best of 3 with the other tiles interleaved"
                      + ("; the fastest here" if str(t) == fastest else ""),
        })
    fused, ref = runs["numba"], runs["numpy"]
    rows.append({
        "name": f"decoder forward speed, fused kernel / numpy passes, {fused['n']} tokens", "value":
        ref["seconds"] / fused["seconds"], "unit": "x", "target": ">= 1",
        "detail": f"best of {1 if quick else REPEATS} alternating forwards each: {fused['seconds']:.1f} s against "
                  f"{ref['seconds']:.1f} s",
    })
    rows.append({
        "name": f"decoder peak memory, one {fused['n']}-token forward, fused kernel", "value": fused["rss_mb"],
        "unit": "MB (ru_maxrss)", "target": f"<= {ref['rss_mb']:.0f}", "ok": bool(fused["rss_mb"] <= ref["rss_mb"]),
        "detail": f"the numpy kernel's peak {ref['rss_mb']:.0f} MB in its own interpreter; "
                  f"{fused['rss_model_mb']:.0f} MB after loading the model",
    })
    return rows

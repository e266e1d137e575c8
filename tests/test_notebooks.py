"""The notebooks: committed executed (full mode), run fresh here (quick mode), their answers checked.

Every notebook in ``notebooks/`` runs top to bottom in quick mode (``SOFTMAX_SCALE_QUICK=1``): a
failing cell fails the suite.  The committed notebooks are executed in full mode by
``notebooks/execute.py`` (``make notebooks``), so a reader on a code host sees the numbers; they
must hold outputs and nothing that changes between runs (timings, absolute paths).

**Key numbers, opt-in per notebook.**  A notebook opts in with code cells tagged ``key-numbers``
whose printed numbers are computed the same way in quick and full mode (from committed CSVs,
exact evaluations, or Monte Carlo at a fixed size and seed), and a last cell, markdown, tagged
``answer``.  Then

- the fresh quick run prints the same key numbers as the committed full run: the same text
  around them, and each number within one unit of its last printed digit;
- every decimal number in the answer is one of the committed key numbers, rounded as the answer
  writes it.

A notebook without these tags is only executed (so a new notebook can adopt the check later).

``-m slow`` also runs every notebook in full mode, as ``make notebooks`` does, and compares its key
numbers with the committed ones the same way (without saving anything).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KEY, ANSWER = "key-numbers", "answer"
#: The long quick runs, under ``-m slow`` with the full ones: their key numbers come from Monte Carlo and
#: exact evaluations at the committed sizes (02's is the alpha table's 4,000-draw objective table), 05 runs
#: both real models.
SLOW_QUICK = {"01_second_moments", "02_gradient_maximization", "03_entropy_and_length", "05_real_heads"}
QUICK_RUNS = [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW_QUICK else p for p in NOTEBOOKS]

_spec = importlib.util.spec_from_file_location("notebooks_execute", ROOT / "notebooks" / "execute.py")
execute_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_tool)

#: A decimal number; a sign counts only after a space, a bracket or the start (not in ``[8k-12k`` or ``a-0.5``).
_NUMBER = re.compile(r"(?<![\d.])([-+−]?)(\d+\.\d+)(?!\d|\.\d)")


def numbers(text: str) -> list[tuple[float, int]]:
    """The decimal numbers of ``text`` in order, each with its number of decimals."""
    out = []
    for m in _NUMBER.finditer(text):
        sign, digits = m.group(1), m.group(2)
        if sign and m.start() > 0 and not (text[m.start() - 1].isspace() or text[m.start() - 1] in "([{=:,;/"):
            sign = ""
        value = float(digits) * (-1.0 if sign in "-−" and sign else 1.0)
        out.append((value, len(digits.split(".")[1])))
    return out


def skeleton(text: str) -> str:
    """``text`` with every decimal number (and its sign) replaced by ``#``."""
    return _NUMBER.sub("#", text)


def tagged(nb, tag: str) -> list:
    return [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]


def key_output(nb) -> str:
    """The text the ``key-numbers`` cells printed, in order."""
    parts = []
    for cell in tagged(nb, KEY):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                parts.append(out["text"])
            elif out.get("output_type") in ("execute_result", "display_data") and "text/plain" in out.get("data", {}):
                parts.append(out["data"]["text/plain"] + "\n")
    return "".join(parts)


def compare_key_numbers(committed: str, fresh: str, where: str = "") -> None:
    """Assert that ``fresh`` prints the numbers of ``committed``: same text around them, each within a unit of its last digit."""
    assert skeleton(fresh) == skeleton(committed), f"{where}: the key-number output changed its text:\n{fresh}"
    a, b = numbers(committed), numbers(fresh)
    assert len(a) == len(b), f"{where}: {len(b)} key numbers, {len(a)} committed"
    assert a, f"{where}: {len(b)} key numbers, {len(a)} committed"
    for k, ((x, dx), (y, _)) in enumerate(zip(a, b)):
        assert abs(x - y) <= 1.01 * 10.0 ** -dx, f"{where}: key number {k} is {y}, committed {x} (line: {_line(fresh, k)})"


def _line(text: str, k: int) -> str:
    m = list(_NUMBER.finditer(text))[k]
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start:end if end >= 0 else None]


def check_answer(answer: str, key_text: str, where: str = "") -> int:
    """Assert that every decimal number of ``answer`` is a key number rounded as written; returns how many were checked."""
    keys = [v for v, _ in numbers(key_text)]
    said = numbers(answer)
    for value, decimals in said:
        assert any(f"{k:.{decimals}f}" == f"{value:.{decimals}f}" for k in keys), \
            f"{where}: the answer says {value:.{decimals}f}, which no key number gives at {decimals} decimals"
    return len(said)


def _opted_in(path) -> bool:
    return bool(tagged(nbformat.read(path, as_version=4), KEY))


OPTED_IN = [p for p in NOTEBOOKS if _opted_in(p)]


def test_the_notebooks_exist_and_opt_in():
    names = {p.stem for p in NOTEBOOKS}
    expected = {"01_second_moments", "02_gradient_maximization", "03_entropy_and_length", "04_contrastive_temperature",
                "05_real_heads", "06_real_extrapolation", "07_training_with_the_scale",
                "08_causal_extrapolation", "09_one_key_among_n", "10_real_one_key"}
    assert expected <= names, f"missing notebooks: {sorted(expected - names)}"
    assert expected <= {p.stem for p in OPTED_IN}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_executed_and_stripped(path):
    """A reader on a code host sees every output; rerunning `make notebooks` makes small diffs."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), f"{path.name}: committed without running every cell"
    assert code[-1].get("outputs"), f"{path.name}: the last code cell shows nothing"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: committed with an error"
    before = nbformat.writes(nb)
    assert nbformat.writes(execute_tool.strip_volatile(nb)) == before, f"{path.name}: volatile metadata (run make notebooks)"
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for c in code for o in c.get("outputs", []))
    for private in {str(ROOT), os.path.expanduser("~"), "/tmp/"} - {"/", ""}:
        assert private not in text, f"{path.name}: an output shows the path {private!r}"
    drawn = [o for c in code for o in c.get("outputs", []) if "data" in o]
    bare = [o for o in drawn if "image/png" not in o["data"] and str(o["data"].get("text/plain", "")).startswith("<Figure")]
    assert not bare, f"{path.name}: a figure shows as its text ({bare[0]['data']['text/plain']}): %matplotlib inline"


@pytest.mark.parametrize("path", OPTED_IN, ids=[p.stem for p in OPTED_IN])
def test_committed_answer_states_the_key_numbers(path):
    nb = nbformat.read(path, as_version=4)
    last = nb.cells[-1]
    why = f"{path.name}: the notebook must end with its answer (a markdown cell tagged {ANSWER!r})"
    assert last.cell_type == "markdown", why
    assert ANSWER in last.metadata.get("tags", []), why
    assert check_answer(last.source, key_output(nb), path.name) >= 5, f"{path.name}: the answer gives too few numbers"


def test_the_checks_catch_planted_mismatches():
    """Negative controls on committed outputs: a changed key number, changed text, an answer with a number no cell printed."""
    nb = nbformat.read(OPTED_IN[0], as_version=4)
    committed = key_output(nb)
    compare_key_numbers(committed, committed)
    value, decimals = numbers(committed)[0]
    m = _NUMBER.search(committed)
    planted = committed[:m.start(2)] + f"{abs(value) + 3 * 10.0 ** -decimals:.{decimals}f}" + committed[m.end(2):]
    with pytest.raises(AssertionError, match="key number 0 is"):
        compare_key_numbers(committed, planted)
    within = committed[:m.start(2)] + f"{abs(value) + 10.0 ** -decimals:.{decimals}f}" + committed[m.end(2):]
    compare_key_numbers(committed, within)  # the last digit may move by one (another machine's rounding)
    with pytest.raises(AssertionError, match="changed its text"):
        compare_key_numbers(committed, committed.replace(" ", "  ", 1))
    answer = nb.cells[-1].source
    check_answer(answer, committed)
    with pytest.raises(AssertionError, match="no key number gives"):
        check_answer(answer + " It is 987.654321.", committed)
    assert numbers("in [8k-12k) +0.25 (-0.5) x1.062 a-0.5, 1.2.3 and 10.1.") == [(0.25, 2), (-0.5, 1), (1.062, 3), (0.5, 1),
                                                                                (10.1, 1)]


def _execute(path, monkeypatch, *, quick: bool):
    """``path`` run top to bottom in its folder, in quick or full mode, with the Agg backend; the notebook with its outputs."""
    if quick:
        monkeypatch.setenv("SOFTMAX_SCALE_QUICK", "1")
    else:
        monkeypatch.delenv("SOFTMAX_SCALE_QUICK", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300 if quick else execute_tool.TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def check_fresh_run(path, nb) -> None:
    """Assert that the fresh run ``nb`` of ``path`` has no error, ends by printing, and reproduces the committed key numbers."""
    committed = nbformat.read(path, as_version=4)
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    # the notebook ends with its answer: the last code cell prints something
    last = [c for c in nb.cells if c.cell_type == "code"][-1]
    assert last.get("outputs"), "the last cell should state the answer"
    if tagged(committed, KEY):
        compare_key_numbers(key_output(committed), key_output(nb), path.name)


# jupyter_client/zmq emit deprecation warnings of their own on some versions; the cells' output is what is tested.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning:zmq")
@pytest.mark.parametrize("path", QUICK_RUNS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_reproduces_its_key_numbers(path, monkeypatch):
    check_fresh_run(path, _execute(path, monkeypatch, quick=True))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning:zmq")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_in_full_mode_reproduces_its_key_numbers(path, monkeypatch):
    check_fresh_run(path, _execute(path, monkeypatch, quick=False))

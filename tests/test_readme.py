"""Every Python block of the README runs as pasted, and the values its comments state are what it prints.

A line ``expr  # 2.0084: text`` (or ``# array([18.25, 24.21])``, ``# {'c': 0.8413}``) states a value:
the expression must equal it to the digits shown.  Blocks run in order, in one namespace, as a reader
pasting them into one session would.

The default run executes every block with the training harness's model sized as its ``--quick``
model (:data:`softmax_scale.train.QUICK`'s layers, width, batch and steps; every call as written,
every stated value checked); ``-m slow`` executes the blocks exactly as pasted, training included.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
import types
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
#: The :class:`TrainConfig` fields the default run takes from the quick model: its size and its length of training.
QUICK_SIZE = ("layers", "d_model", "heads", "d_ff", "batch", "steps", "warmup")
_VALUE = re.compile(r"^\s*(array\(\[.*?\]\)|\{.*?\}|-?\d[\d.eE+-]*)(?=[:\s]|$)")


def python_blocks(text: str) -> list[str]:
    """The fenced ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def stated_value(comment: str):
    """The value a comment states at its start (a number, an array or a dict), and its precision; else None."""
    m = _VALUE.match(comment)
    if not m:
        return None
    text = m.group(1)
    decimals = max((len(d) for d in re.findall(r"\.(\d+)", text)), default=0)
    value = eval(text, {"array": np.array, "inf": np.inf})  # noqa: S307 - our own README
    return value, 0.5 * 10.0 ** -decimals


def _comments(src: str) -> dict[int, str]:
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string[1:]
    return out


def _close(got, want, tol):
    if isinstance(want, dict):
        assert set(got) == set(want)
        for k in want:
            _close(got[k], want[k], tol)
        return
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=0, atol=tol * 1.0001)


def test_the_checker_reads_comments():
    assert stated_value(" 2.0084: mean-field") == (2.0084, 0.00005)
    v, tol = stated_value(" array([18.25, 24.21, 29.70])")
    assert np.allclose(v, [18.25, 24.21, 29.70])
    assert tol == 0.005
    assert stated_value(" result: alpha, value") is None
    with pytest.raises(AssertionError):
        _close(2.0095, 2.0084, 0.00005)


def quick_sized(train):
    """The module ``train`` as a block sees it, but whose ``TrainConfig`` defaults to the quick model's size."""
    small = types.ModuleType(train.__name__)
    small.__dict__.update(vars(train))
    small.TrainConfig = functools.partial(train.TrainConfig, **{f: getattr(train.QUICK, f) for f in QUICK_SIZE})
    return small


def run_readme_blocks(blocks: list[str], *, quick: bool) -> int:
    """Run ``blocks`` in order in one namespace, check every stated value; returns how many were checked."""
    ns: dict = {}
    checked = 0
    for src in blocks:
        comments = _comments(src)
        for node in ast.parse(src).body:
            code = ast.get_source_segment(src, node)
            assert code
            if isinstance(node, ast.Expr):
                got = eval(compile(ast.Expression(node.value), "README", "eval"), ns)  # noqa: S307
                stated = stated_value(comments.get(node.end_lineno, ""))
                if stated is not None:
                    _close(got, *stated)
                    checked += 1
            else:
                exec(compile(ast.Module([node], []), "README", "exec"), ns)  # noqa: S102
                if quick:
                    for k, v in ns.items():
                        if isinstance(v, types.ModuleType) and v.__name__ == "softmax_scale.train" and hasattr(v, "QUICK"):
                            ns[k] = quick_sized(v)
    return checked


def test_quick_sized_keeps_every_name_and_shrinks_only_the_size():
    import softmax_scale.train as st

    small = quick_sized(st)
    assert set(vars(st)) <= set(vars(small))
    cfg = small.TrainConfig(scheme="entropy_invariant", pin_length=512)
    assert cfg == st.TrainConfig(scheme="entropy_invariant", pin_length=512,
                                 **{f: getattr(st.QUICK, f) for f in QUICK_SIZE})
    assert cfg.steps < st.TrainConfig().steps
    assert small.train_model is st.train_model


def test_readme_python_blocks_run_and_state_true_values():
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README has Python blocks"
    assert any("softmax_scale.train" in b for b in blocks), "the README trains a model (else drop quick_sized)"
    assert run_readme_blocks(blocks, quick=True) >= 5


@pytest.mark.slow
def test_readme_python_blocks_run_as_pasted():
    assert run_readme_blocks(python_blocks(README.read_text(encoding="utf-8")), quick=False) >= 5

"""Every Python block of the README and of the docs pages runs as pasted, and the values its comments state are what it prints.

A line ``expr  # 2.0084: text`` (or ``# array([18.25, 24.21])``, ``# {'c': 0.8413}``) states a value:
the expression must equal it to the digits shown.  A page's blocks run in order, in one namespace, as a
reader pasting them into one session would.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
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


def run_blocks(blocks: list[str], name: str) -> int:
    """Run ``blocks`` in order in one namespace and check every value a comment states; returns how many."""
    ns: dict = {}
    checked = 0
    for src in blocks:
        comments = _comments(src)
        for node in ast.parse(src).body:
            code = ast.get_source_segment(src, node)
            assert code
            if isinstance(node, ast.Expr):
                got = eval(compile(ast.Expression(node.value), name, "eval"), ns)  # noqa: S307
                stated = stated_value(comments.get(node.end_lineno, ""))
                if stated is not None:
                    _close(got, *stated)
                    checked += 1
            else:
                exec(compile(ast.Module([node], []), name, "exec"), ns)  # noqa: S102
    return checked


def test_readme_python_blocks_run_and_state_true_values():
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README has Python blocks"
    assert run_blocks(blocks, "README") >= 5


DOCS = README.parent / "docs"
#: The documentation pages with Python blocks; each page's blocks run in one namespace of their own.
DOC_PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and python_blocks(p.read_text(encoding="utf-8")))


def test_the_docs_have_python_blocks():
    assert len(DOC_PAGES) >= 5


#: Pages whose blocks train a model or run a real one for many seconds, under ``-m slow``.
SLOW_PAGES = {"findings/training.md", "own_model.md"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if str(p.relative_to(DOCS)) in SLOW_PAGES else p
                                  for p in DOC_PAGES], ids=[str(p.relative_to(DOCS)) for p in DOC_PAGES])
def test_docs_python_blocks_run_and_state_true_values(page):
    assert run_blocks(python_blocks(page.read_text(encoding="utf-8")), str(page.relative_to(DOCS))) >= 1

"""The examples in the docstrings run and print what they say."""

import doctest

import pytest

import softmax_scale.advice
import softmax_scale.heads._factors
import softmax_scale.laws
import softmax_scale.optimize

MODULES = [softmax_scale.optimize, softmax_scale.laws, softmax_scale.heads._factors, softmax_scale.advice]


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__ for m in MODULES])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_layout_map_names_every_module():
    """The README's layout map matches the tree: every module is named (plotting/ and moments/ as folders)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    text = (root / "README.md").read_text()
    block = text[text.index("## Layout"):]
    block = block[:block.index("\n## ", 1)]
    pkg = root / "softmax_scale"
    missing = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg)
        if path.name in ("__init__.py", "__main__.py"):
            continue
        if rel.parts[0] in ("plotting", "moments"):
            name = rel.parts[0] + "/"
        else:
            name = path.name
        if name not in block:
            missing.append(str(rel))
    for folder in (p for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        if folder.name + "/" not in block:
            missing.append(folder.name + "/")
    assert missing == []

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


def layout_map(text: str) -> dict[str, set[str]]:
    """The README's layout map read as a tree: ``{folder: names listed in it}``.

    Entries sit at indents 0, 2, 4 (the repository, ``softmax_scale/``, its folders); a deeper line
    continues the entry above it.  A line that starts with ``name/`` is that folder's entry and the
    ``.py`` names on it are its modules; any other entry's ``.py`` names are modules of the folder it
    is indented under.  Folders are keyed by their path inside the repository (``"softmax_scale/heads"``).
    """
    block = text[text.index("<!-- layout:start -->"):text.index("<!-- layout:end -->")]
    tree = block[block.index("```\n") + 4:block.rindex("```")]
    out: dict[str, set[str]] = {}
    stack: list[str] = []
    here = ""
    for line in tree.splitlines():
        words = line.split()
        if not words:
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= 4 and indent % 2 == 0:
            depth = indent // 2
            stack = stack[:depth]
            if words[0].endswith("/"):
                stack.append(words[0].rstrip("/"))
                words = words[1:]
            here = "/".join(stack)
            out.setdefault(here, set())
        out[here].update(w.strip("(),;:") for w in words if w.strip("(),;:").endswith(".py"))
    return out


def test_the_layout_reader_places_names_in_their_folder():
    text = ("<!-- layout:start -->\n```\npkg/\n  a.py   x\n  sub/   b.py c.py\n           d.py\n    e.py\n"
            "  f.py\n```\n<!-- layout:end -->")
    tree = layout_map(text)
    assert tree["pkg"] == {"a.py", "f.py"}
    assert tree["pkg/sub"] == {"b.py", "c.py", "d.py", "e.py"}


def test_readme_layout_map_names_every_module():
    """The README's layout map matches the tree: every module is named in its own folder (plotting/ and moments/ as folders)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    tree = layout_map((root / "README.md").read_text())
    pkg = root / "softmax_scale"
    missing = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(root)
        if path.name in ("__init__.py", "__main__.py"):
            continue
        folder = str(rel.parent)
        if rel.parts[1] in ("plotting", "moments"):
            if f"softmax_scale/{rel.parts[1]}" not in tree:
                missing.append(str(rel))
        elif path.name not in tree.get(folder, set()):
            missing.append(str(rel))
    for folder in (p for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        if f"softmax_scale/{folder.name}" not in tree:
            missing.append(folder.name + "/")
    assert missing == []


def _fit_coefficient(objective: str) -> float:
    """``c`` of the ``c sqrt(log n)`` law fitted to ``objective``'s alpha* (normal scores), from the committed table."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "figures" / "alpha_table.md").read_text()
    return float(re.search(rf"^- {objective}: alpha\* ~ ([\d.]+) sqrt\(log n\)", text, flags=re.M).group(1))


def test_each_objective_optimum_sits_under_its_own_name():
    """Wherever the prose quotes the geometric or the typical law, the clause it sits in names that objective.

    The law is found as plain text (``1.45 sqrt(log n)``) or as the pages' math (``$1.45\\sqrt{\\log n}$``).
    """
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs"
    words = {"geometric": ("geometric",), "typical": ("typical", "median")}
    coefficient = {k: _fit_coefficient(k) for k in words}
    wrong, found = [], 0
    for page in sorted(docs.glob("*.md")) + sorted((docs / "findings").glob("*.md")):
        for para in page.read_text().split("\n\n"):
            if para.lstrip().startswith(("|", "```")):
                continue
            para = " ".join(para.split())
            for m in re.finditer(r"(\d+\.(\d+))(?: |\\,)?\\?sqrt(?:\(log n\)|\{\\log n\})", para):
                for objective, names in words.items():
                    if round(coefficient[objective], len(m.group(2))) == float(m.group(1)):
                        found += 1
                        clause = re.split(r"[.;:,]\s", para[:m.start()])[-1]
                        if not any(w in clause for w in names) or "typical draw" in clause:
                            wrong.append(f"{page.name}: ...{clause}{m.group(0)}")
    assert found >= 6
    assert wrong == []

"""The import graph of the core package, read from the source: no cycles, and the core never imports ``models``.

Every ``import`` counts, including those inside functions (a lazy import that closes a
cycle is still a cycle for a reader).  The graph is built from the files, not by importing
them.  ``softmax_scale.models`` (real pretrained models) sits on top of the core: it is left
out of the graph (it imports the core; its own layout is its business) and no core module
may import it.  Importing ``a.b.c`` implicitly runs the packages ``a`` and ``a.b`` first; those
implicit edges are not counted, only the imports written in the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = "softmax_scale"
ROOT = Path(__file__).resolve().parent.parent / PKG
#: On top of the core, left out of the graph: the real models, the training harness (JAX), and the front ends
#: that use them (the command line and `python -m`, and the figure modules of real models and of training, which
#: the figure runner skips with one line when the weights or the committed CSV are missing).
ON_TOP = (f"{PKG}.models", f"{PKG}.train", f"{PKG}.cli", f"{PKG}.__main__", f"{PKG}.plotting.real",
          f"{PKG}.plotting.real_extrapolation", f"{PKG}.plotting.train")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of the package that ``name`` imports anywhere in its code."""
    package = name if _is_package(path) else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            if t == PKG or t.startswith(PKG + "."):
                # `import a.b.c` names a.b.c; keep the longest known prefix
                while t not in known and "." in t:
                    t = t.rpartition(".")[0]
                out.add(t)
    out.discard(name)
    return out


def _on_top(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in ON_TOP)


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def test_import_softmax_scale_loads_neither_jax_nor_the_harness():
    import subprocess
    import sys

    code = ("import sys, softmax_scale; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'jax' or m.startswith('softmax_scale.train')))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT.parent)
    assert res.stdout.strip() == "[]"


def test_graph_is_read():
    graph = import_graph()
    # a few edges known to exist, so an empty graph cannot pass
    assert f"{PKG}.distributions" in graph[f"{PKG}.exact"]
    assert f"{PKG}.stats_result" in graph[f"{PKG}.montecarlo"]
    assert f"{PKG}.moments.normalization" in graph[f"{PKG}.moments.residual"]
    assert f"{PKG}.moments" in graph[f"{PKG}.plotting.moments"]
    assert f"{PKG}.schemes" in graph[f"{PKG}.train.scales"]  # the harness sits on the core


def test_core_import_graph_has_no_cycle():
    graph = {k: v for k, v in import_graph().items() if not _on_top(k)}
    # the package's __init__ imports everything to re-export it; an edge back to it from a
    # submodule (`from softmax_scale import x`) would be a cycle and is reported like any other
    assert _cycles(graph) == []


def test_cycle_detector_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_core_never_imports_the_models_subpackage():
    bad = {k: sorted(v for v in deps if _on_top(v)) for k, deps in import_graph().items() if not _on_top(k)}
    assert {k: v for k, v in bad.items() if v} == {}

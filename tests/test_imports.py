"""The import graph of the package, read from the source: no cycles, and no import from a lower layer to a higher one.

Every ``import`` counts, including those inside functions (a lazy import that closes a
cycle is still a cycle for a reader).  The graph is built from the files, not by importing
them.  :data:`LAYERS` orders the package's top-level parts, lowest first (the README's layout
states the same order): a module imports only modules of its own layer or of lower ones.
Importing ``a.b.c`` implicitly runs the packages ``a`` and ``a.b`` first; those
implicit edges are not counted, only the imports written in the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = "softmax_scale"
ROOT = Path(__file__).resolve().parent.parent / PKG
#: The package's top-level parts (a subpackage or a module; ``__init__`` is the package's own), lowest layer
#: first; the parts of one layer may import each other.  The private helpers; the scores and their statistics;
#: the objectives; their maximiser; the published scales, entropy, contrastive temperatures, second moments,
#: head diagnostics and the public API; the engines' rules; the real models; the training harness (JAX); the
#: studies; the advice read from their results; the figures; the front ends.
LAYERS = (
    ("_util", "_kernels", "_rng_kernels"),
    ("distributions", "_stats_result", "montecarlo", "exact", "laws", "stats"),
    ("objectives",),
    ("optimize",),
    ("schemes", "entropy", "contrastive", "moments", "heads", "__init__"),
    ("engines",),
    ("models",),
    ("train",),
    ("experiments",),
    ("advice",),
    ("plotting",),
    ("figures", "cli", "_cli_theory", "__main__"),
)
#: The layer of each part.
LAYER_OF = {part: i for i, layer in enumerate(LAYERS) for part in layer}
#: The core: the layers up to the public API's.
CORE_TOP = LAYER_OF["__init__"]


def part(name: str) -> str:
    """The top-level part of the package that the module ``name`` belongs to (a key of :data:`LAYER_OF`)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


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
    return LAYER_OF[part(name)] > CORE_TOP


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
    assert f"{PKG}.distributions" in graph[f"{PKG}.exact.grid"]
    assert f"{PKG}._stats_result" in graph[f"{PKG}.montecarlo"]
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


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a module to one of a higher layer, as ``"a (layer i) -> b (layer j)"``."""
    out = []
    for name, deps in sorted(graph.items()):
        for dep in sorted(deps):
            i, j = LAYER_OF[part(name)], LAYER_OF[part(dep)]
            if j > i:
                out.append(f"{name} (layer {i}) -> {dep} (layer {j})")
    return out


def test_every_module_has_a_layer():
    parts = {part(name) for name in import_graph()}
    assert sorted(parts - set(LAYER_OF)) == []
    assert sorted(set(LAYER_OF) - parts) == []  # no layer names a part that is gone
    assert len(LAYER_OF) == sum(len(layer) for layer in LAYERS)  # no part in two layers


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    assert upward_imports(import_graph()) == []


def test_the_layer_check_finds_a_planted_upward_import():
    graph = {f"{PKG}.exact.grid": {f"{PKG}.distributions"}, f"{PKG}.models.llama": {f"{PKG}.train.backend"},
             f"{PKG}.cli": {PKG}, PKG: {f"{PKG}.heads"}}
    assert upward_imports(graph) == [f"{PKG}.models.llama (layer 6) -> {PKG}.train.backend (layer 7)"]
    assert upward_imports({f"{PKG}.objectives.causal": {f"{PKG}.optimize"}}) == [
        f"{PKG}.objectives.causal (layer 2) -> {PKG}.optimize (layer 3)"]


def test_the_readme_states_the_layers():
    """The README's layout gives :data:`LAYERS` in one code span, ``a b < c < ...``, lowest first."""
    import re

    text = (ROOT.parent / "README.md").read_text()
    span = " ".join(re.search(r"`([^`]*\s<\s[^`]*)`", text[text.index("<!-- layout:start -->"):]).group(1).split())
    assert tuple(tuple(group.split()) for group in span.split(" < ")) == LAYERS


# ---------------------------------------------------------------------------------------------
# Modules use each other's public names only, and nothing registers itself by being imported.

#: The shared private helpers of the whole package: private *modules* whose names every module may
#: import (argument checks, rng handling, progress bars, the numba options, the numba kernels).
SHARED = tuple(f"{PKG}.{m}" for m in ("_util.validation", "_util.rng", "_util.progress", "_util.jit", "_kernels"))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _may_use_private_module(user: str, target: str) -> bool:
    """A private module (``a.b._m``) serves its own package ``a.b``; the :data:`SHARED` helpers serve everyone."""
    if target in SHARED:
        return True
    parent = target.rpartition(".")[0]
    return _is_private(target.rpartition(".")[2]) and (user == parent or user.startswith(parent + "."))


def _resolve(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = (name if is_package else name.rpartition(".")[0]).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _module_aliases(name: str, is_package: bool, tree, known: set[str]) -> dict[str, str]:
    """Local names bound to modules of the package anywhere in the file: ``{alias: module}``."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in known and a.asname:
                    out[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(name, is_package, node)
            for a in node.names:
                if f"{mod}.{a.name}" in known:
                    out[a.asname or a.name] = f"{mod}.{a.name}"
    return out


def private_uses(name: str, source: str, known: set[str], is_package: bool = False) -> list[str]:
    """Private names of *other* package modules that ``source`` (the module ``name``) imports or reads.

    ``from .m import _x``, ``from . import m; m._x`` and ``import pkg.m as m; m._x`` count, wherever
    they stand; a private module imported whole counts unless :func:`_may_use_private_module`.
    """
    tree = ast.parse(source)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _resolve(name, is_package, node)
            if not (mod == PKG or mod.startswith(PKG + ".")) or mod == name:
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                if sub in known:  # a module
                    if _is_private(a.name) and not _may_use_private_module(name, sub):
                        out.append(f"{name} imports the private module {sub}")
                elif _is_private(a.name) and not (mod in SHARED or _may_use_private_module(name, mod)):
                    out.append(f"{name} imports {mod}.{a.name}")
    aliases = _module_aliases(name, is_package, tree, known)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            mod = aliases[node.value.id]
            if mod != name and _is_private(node.attr) and mod not in SHARED and f"{mod}.{node.attr}" not in known:
                out.append(f"{name} reads {mod}.{node.attr}")
    return out


_MUTATORS = {"update", "append", "extend", "insert", "setdefault", "add", "register", "__setitem__"}


def _root_module(node, aliases):
    """The package module at the root of ``m.x[...]`` / ``m.x.y`` (an attribute of it, not the bare name)."""
    seen_attr = False
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        seen_attr = seen_attr or isinstance(node, ast.Attribute)
        node = node.value
    if seen_attr and isinstance(node, ast.Name) and node.id in aliases:
        return aliases[node.id]
    return None


def side_effect_registrations(name: str, source: str, known: set[str], is_package: bool = False) -> list[str]:
    """Places where ``source`` writes into another package module's namespace (``m.REGISTRY[k] = f``,
    ``m.x = ...``, ``m.table.update(...)``, ``setattr(m, ...)``): registration as a side effect of import."""
    tree = ast.parse(source)
    aliases = _module_aliases(name, is_package, tree, known)
    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            mod = _root_module(t, aliases)
            if mod and mod != name:
                out.append(f"{name} line {node.lineno} writes into {mod}")
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in _MUTATORS:
                mod = _root_module(f.value, aliases) if isinstance(f.value, (ast.Attribute, ast.Subscript)) else None
                if mod and mod != name:
                    out.append(f"{name} line {node.lineno} calls {f.attr} on {mod}")
            if isinstance(f, ast.Name) and f.id == "setattr" and node.args and isinstance(node.args[0], ast.Name) \
                    and node.args[0].id in aliases and aliases[node.args[0].id] != name:
                out.append(f"{name} line {node.lineno} sets an attribute of {aliases[node.args[0].id]}")
    return out


def unused_init_imports(name: str, source: str) -> list[str]:
    """Names a package's ``__init__`` imports but neither re-exports (``__all__``) nor uses: imports for a side effect."""
    tree = ast.parse(source)
    exported = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                if local != "annotations" and local not in exported and local not in used:
                    out.append(f"{name} imports {a.name} without re-exporting or using it")
    return out


def test_no_private_names_across_modules():
    mods = _modules()
    known = set(mods)
    bad = [x for n, p in mods.items() for x in private_uses(n, p.read_text(), known, _is_package(p))]
    assert bad == []


def test_no_registration_by_import_side_effect():
    mods = _modules()
    known = set(mods)
    bad = [x for n, p in mods.items() for x in side_effect_registrations(n, p.read_text(), known, _is_package(p))]
    bad += [x for n, p in mods.items() if _is_package(p) for x in unused_init_imports(n, p.read_text())]
    assert bad == []


def test_checkers_catch_planted_examples():
    """Negative controls: each checker fails on a small synthetic source that breaks its rule."""
    known = {PKG, f"{PKG}.exact", f"{PKG}.exact.grid", f"{PKG}.objectives", f"{PKG}.heads", f"{PKG}._validation",
             f"{PKG}.models", f"{PKG}.models._files", f"{PKG}.models.bert"}
    planted = "from .exact.grid import _u_grid\nfrom . import exact as ex\nx = ex._TAIL\n"
    assert private_uses(f"{PKG}.heads", planted, known) == [
        f"{PKG}.heads imports {PKG}.exact.grid._u_grid", f"{PKG}.heads reads {PKG}.exact._TAIL"]
    fine = "from ._validation import check_int, _is_number\nfrom .exact import exact_stats\n"
    assert private_uses(f"{PKG}.heads", fine, known) == []
    assert private_uses(f"{PKG}.models.bert", "from ._files import package_file\n", known) == []
    assert private_uses(f"{PKG}.heads", "from .models import _files\n", known) == [
        f"{PKG}.heads imports the private module {PKG}.models._files"]
    registers = ("def _register():\n    from . import objectives\n    objectives._EVALUATORS['expected'] = f\n"
                 "    objectives.TABLE.update(x=1)\n_register()\n")
    assert side_effect_registrations(f"{PKG}.exact", registers, known) == [
        f"{PKG}.exact line 3 writes into {PKG}.objectives", f"{PKG}.exact line 4 calls update on {PKG}.objectives"]
    assert side_effect_registrations(f"{PKG}.heads", "from . import objectives\nR = dict(objectives.REGISTRY)\n", known) == []
    init = "from . import exact, typical  # typical registers its objectives\n__all__ = ['exact']\n"
    assert unused_init_imports(PKG, init) == [f"{PKG} imports typical without re-exporting or using it"]



def test_dir_lists_the_lazy_names_without_importing_them(monkeypatch):
    import importlib

    import softmax_scale

    calls = []
    monkeypatch.setattr(importlib, "import_module", lambda *a, **k: calls.append(a))  # what __getattr__ imports with
    names = dir(softmax_scale)
    assert calls == []
    for name in ("advise", "Advice", "attention_alpha", "engine_scales", "read_config", "models", "real_head_table"):
        assert name in names
    assert names == sorted(set(names))
    assert set(softmax_scale.__all__) <= set(names)


#: The most lines a module of the package may have (a longer one is split along its parts).
MAX_LINES = 560


def long_modules(root: Path, limit: int = MAX_LINES) -> list[str]:
    """``"path: N lines"`` for every ``.py`` file under ``root`` longer than ``limit`` lines."""
    out = []
    for p in sorted(root.rglob("*.py")):
        n = len(p.read_text().splitlines())
        if n > limit:
            out.append(f"{p.relative_to(root)}: {n} lines")
    return out


def test_no_module_is_over_the_line_limit(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert long_modules(tmp_path) == [f"sub/long.py: {MAX_LINES + 1} lines"]
    assert long_modules(ROOT) == []

"""Sphinx configuration: the PyData theme, numpydoc, autosummary over ``__all__``, the notebooks as committed.

Three things are written at build time and not committed: the API pages, from the packages' ``__all__``
(``api/generated/``), so a name added to or removed from ``__all__`` gets or loses its page with no
edit here; a copy of the committed notebooks (``notebooks/``), since Sphinx reads only files
under this folder; and the landing page's answer (``_generated/advise.txt``), what
``softmax-scale advise`` prints for its question.  MathJax comes from the ``sphinx-mathjax-offline``
package (the ``docs`` extra) and is copied into the built site (:func:`copy_mathjax`): no page loads
anything from another host. The pages link to the repository's files as a code host shows them
(``../notebooks/01_second_moments.ipynb``); :func:`site_links` points those links at the site's pages.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import inspect
import io
import os
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))  # document the checkout this folder is in, whatever else is installed

import softmax_scale  # noqa: E402

GENERATED = DOCS / "api" / "generated"
NOTEBOOKS = DOCS / "notebooks"
LANDING = DOCS / "_generated"
#: The command the landing page shows (its one ``softmax-scale advise`` line); its output is written at build time.
LANDING_QUESTION = tuple(re.search(r"^softmax-scale (advise .*)$", (DOCS / "index.md").read_text(encoding="utf-8"),
                                   flags=re.M).group(1).split())
#: MathJax 3 as the ``sphinx-mathjax-offline`` package ships it, and the parts of it the site copies:
#: the TeX-to-HTML component, the TeX packages it loads on use, its fonts, menu and accessibility parts.
try:
    MATHJAX = Path(importlib.metadata.distribution("sphinx-mathjax-offline").locate_file(
        "sphinx-mathjax-offline/static/mathjax"))
except importlib.metadata.PackageNotFoundError as exc:
    raise ImportError("the site's MathJax comes in sphinx-mathjax-offline: pip install -e '.[docs]'") from exc
MATHJAX_PARTS = ("tex-chtml.js", "input", "output/chtml.js", "output/chtml", "ui", "a11y", "sre")
#: The packages whose ``__all__`` the API reference documents (modules in an ``__all__`` get a page too).
API_PACKAGES = ("softmax_scale", "softmax_scale.advice", "softmax_scale.engines", "softmax_scale.models",
                "softmax_scale.train")

project = "softmax_scale"
author = "the softmax_scale authors"
copyright = "the softmax_scale authors, MIT licence"  # noqa: A001 - Sphinx's name
release = softmax_scale.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# The notebooks are committed executed (`make notebooks`); the site shows those outputs, never re-runs them.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
mathjax_path = "mathjax/tex-chtml.js"
myst_heading_anchors = 3

autosummary_generate = True
autosummary_imported_members = True
autosummary_ignore_module_all = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"no-value": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = "softmax_scale"
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 6,  # the API reference among them, the rest under "More"
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}


def leaf_pages() -> list[str]:
    """The front page and the pages of its toctree that have no toctree of their own (no subpages)."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    block = re.search(r"^```\{toctree\}\n(.*?)^```", index, flags=re.M | re.S).group(1)
    pages = [line.strip() for line in block.splitlines() if line.strip() and not line.startswith(":")]
    return ["index"] + [page for page in pages
                        if not re.search(r"\{toctree\}|toctree::", (DOCS / f"{page}.md").read_text(encoding="utf-8"))]


# Pages with no subpages get no left sidebar (it would hold only an empty "Section Navigation").
html_sidebars = {page: [] for page in leaf_pages()}
html_static_path = ["_static"]
html_css_files = ["wide.css"]
html_show_sourcelink = False


def _kind(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "data"


_SECTIONS = (("function", "Functions"), ("class", "Classes"), ("exception", "Exceptions"),
             ("data", "Constants"), ("module", "Modules"))


def data_doc(obj, name: str) -> list[str]:
    """The ``#:`` comment above the assignment that defines ``name`` (found in whichever module of the package holds it)."""
    from sphinx.errors import PycodeError
    from sphinx.pycode import ModuleAnalyzer

    for modname, module in sorted(sys.modules.items()):
        if modname.split(".")[0] != "softmax_scale" or getattr(module, name, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except PycodeError:
            continue
        if ("", name) in docs:
            return [line for line in docs[("", name)] if line]
    return []


def data_page(modname: str, name: str, obj) -> str:
    """The page of one constant: its doc comment and, when short, its value."""
    value = repr(obj)
    lines = [name, "=" * len(name), "", f".. currentmodule:: {modname}", "", f".. data:: {name}"]
    if len(value) <= 100:
        lines.append(f"   :value: {value}")
    return "\n".join(lines + [""] + [f"   {line}" for line in data_doc(obj, name)] + [""])


def api_pages(modname: str, documented: dict[int, str]) -> tuple[dict[str, str], list[str]]:
    """The reST pages of one module: its own (its docstring and a summary of every name in its ``__all__``) and its constants'.

    Functions and classes get their pages from autosummary.  ``documented`` maps each object already
    given a page to that page's name: such a name is listed with a link to it rather than documented
    twice; the new pages are added to it.  Returns the pages written here (name -> text), the pages
    autosummary writes, and the modules of ``__all__``, which get pages of their own.
    """
    module = importlib.import_module(modname)
    names = list(module.__all__)
    objects = {name: getattr(module, name) for name in names}
    kinds = {name: _kind(obj) for name, obj in objects.items()}
    lines = [modname, "=" * len(modname), "", f".. automodule:: {modname}", "   :no-members:", "",
             f".. currentmodule:: {modname}", ""]
    pages, autosummarised, submodules, elsewhere = {}, [], [], []
    for kind, title in _SECTIONS:
        group = [name for name in names if kinds[name] == kind]
        if kind != "module":
            elsewhere += [name for name in group if id(objects[name]) in documented]
            group = [name for name in group if id(objects[name]) not in documented]
        if not group:
            continue
        lines += [title, "-" * len(title), ""]
        if kind == "module":
            real = [objects[name].__name__ for name in group]
            submodules += real
            lines += [".. autosummary::", ""] + [f"   {r.removeprefix(modname + '.')}" for r in real] + [""]
            lines += [".. toctree::", "   :hidden:", ""] + [f"   {r}" for r in real] + [""]
            continue
        if kind == "data":
            lines += [".. list-table::", "   :widths: 35 65", ""]
            for name in group:
                doc = data_doc(objects[name], name)
                lines += [f"   * - :data:`{name}`", f"     - {doc[0] if doc else ''}"]
                pages[f"{modname}.{name}"] = data_page(modname, name, objects[name])
            lines += ["", ".. toctree::", "   :hidden:", ""] + [f"   {modname}.{name}" for name in group] + [""]
        else:
            lines += [".. autosummary::", "   :toctree: .", ""] + [f"   {name}" for name in group] + [""]
            autosummarised += [f"{modname}.{name}" for name in group]
        documented.update({id(objects[name]): f"{modname}.{name}" for name in group})
    if elsewhere:
        refs = ", ".join(f":obj:`{name} <{documented[id(objects[name])]}>`" for name in elsewhere)
        lines += ["Also here", "---------", "", f"Documented where first exported: {refs}.", ""]
    pages[modname] = "\n".join(lines)
    return pages, autosummarised, submodules


def write_api_pages() -> list[str]:
    """Write ``api/generated/`` for every API package and the modules their ``__all__`` names; remove stale pages."""
    GENERATED.mkdir(parents=True, exist_ok=True)
    todo, done, documented, keep = list(API_PACKAGES), [], {}, set()
    while todo:
        modname = todo.pop(0)
        if modname in done:
            continue
        pages, autosummarised, submodules = api_pages(modname, documented)
        for name, text in pages.items():
            path = GENERATED / f"{name}.rst"
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
        keep |= set(pages) | set(autosummarised)
        done.append(modname)
        todo += submodules
    for path in GENERATED.glob("*.rst"):
        if path.stem not in keep:
            path.unlink()
    return done


API_MODULES = write_api_pages()


def copy_notebooks() -> list[str]:
    """Copy the committed notebooks into ``notebooks/`` (only those that changed; stale copies removed)."""
    NOTEBOOKS.mkdir(exist_ok=True)
    names = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    for stale in set(p.name for p in NOTEBOOKS.glob("*.ipynb")) - set(names):
        (NOTEBOOKS / stale).unlink()
    for name in names:
        src, dst = REPO / "notebooks" / name, NOTEBOOKS / name
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dst)
    return names


NOTEBOOK_NAMES = copy_notebooks()


def write_landing() -> Path:
    """Write what ``softmax-scale`` prints for :data:`LANDING_QUESTION` to ``_generated/advise.txt`` (when it changed)."""
    from softmax_scale import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(list(LANDING_QUESTION))
    LANDING.mkdir(exist_ok=True)
    path = LANDING / "advise.txt"
    if not path.exists() or path.read_text(encoding="utf-8") != out.getvalue():
        path.write_text(out.getvalue(), encoding="utf-8")
    return path


LANDING_ANSWER = write_landing()
_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")


def _site_page(path: Path) -> Path | None:
    """The site's page for a repository file a link points at, if it is not a page itself."""
    if path.parent == REPO / "notebooks" and path.suffix == ".ipynb":
        return NOTEBOOKS / path.name
    if path.parent == REPO / "benchmarks" and path.name.startswith("results") and path.suffix == ".md":
        return DOCS / "benchmarks.md"
    return None


def site_links(text: str, file_dir: Path, doc_dir: Path) -> str:
    """Point the Markdown links of ``text`` (a file in ``file_dir``) that go to notebooks or benchmark results at their pages.

    ``doc_dir`` is the folder of the page being built (an included file's links resolve from there).
    """
    def sub(m):
        target = m.group(2)
        if "://" in target or target.startswith("mailto:"):
            return m.group(0)
        page = _site_page(Path(os.path.normpath(file_dir / target)))
        if page is None:
            return m.group(0)
        anchor = (m.group(3) or "") if page.suffix == ".ipynb" else ""
        return f"{m.group(1)}{os.path.relpath(page, doc_dir)}{anchor}{m.group(4)}"

    return _LINK.sub(sub, text)


def _on_source_read(app, docname, source):
    folder = (DOCS / docname).parent
    source[0] = site_links(source[0], folder, folder)


def _on_include_read(app, relative_path, parent_docname, content):
    doc_dir = (DOCS / app.env.docname).parent
    content[0] = site_links(content[0], (DOCS / relative_path).parent, doc_dir)


def copy_mathjax(app, exc):
    """Copy :data:`MATHJAX_PARTS` into the built site's ``_static/mathjax`` (where :data:`mathjax_path` points)."""
    if exc is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / "mathjax"
    for part in MATHJAX_PARTS:
        src = MATHJAX / part
        if src.is_dir():
            shutil.copytree(src, dest / part, dirs_exist_ok=True)
        else:
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / part)


def setup(app):
    """Register the link rewriting for pages and for the files they include, and the copy of MathJax."""
    app.connect("source-read", _on_source_read)
    app.connect("include-read", _on_include_read)
    app.connect("build-finished", copy_mathjax)

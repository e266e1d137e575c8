"""The documentation site builds with warnings as errors, has a page for every public name, and cites only files in the repository."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: The Markdown pages of the site (``docs/notebooks/`` and ``docs/_build/`` are written by the build).
PAGES = sorted(p for p in DOCS.rglob("*.md") if not {"_build", "notebooks"} & set(p.relative_to(DOCS).parts))
#: The packages whose every public name the API reference must document.
API_PACKAGES = ("softmax_scale", "softmax_scale.advice", "softmax_scale.engines", "softmax_scale.models",
                "softmax_scale.train")
#: Where the build writes (the pages name it; a fresh clone has none of it).
BUILT = ("docs/_build",)
#: Files of other projects the pages name (everything else they name is in this repository).
EXTERNAL_FILES = {"_pydecimal.py", "convert_hf_to_gguf.py", "modeling_qwen.py"}
#: Folders a path in a page may start from: the repository's, and the package's (``train/model.py``).
ROOTS = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} | {
    p.name for p in (ROOT / "softmax_scale").iterdir() if p.is_dir() and not p.name.startswith("__")}
_FILE = re.compile(r"^[\w.\-/]+\.(py|md|csv|png|ipynb|cfg|toml|json)$")
_PATH = re.compile(r"^[\w.\-]+(/[\w.\-]*)+$")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built as ``make docs`` builds it (warnings are errors), into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
                          "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
                         cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    return res, out / "html"


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(site):
    res, _ = site
    assert res.returncode == 0, res.stderr[-5000:]


def _documented_object(stem: str):
    """The object a generated API page is named for: ``softmax_scale.models.corpus`` is the function, not its module."""
    parent, _, name = stem.rpartition(".")
    if parent:
        module = importlib.import_module(parent)
        if hasattr(module, name):
            return getattr(module, name)
    return importlib.import_module(stem)


@pytest.mark.slow
def test_every_public_name_has_a_page(site):
    _, html = site
    pages = [p.stem for p in (html / "api" / "generated").glob("*.html")]
    documented = {id(_documented_object(stem)) for stem in pages}
    missing = []
    for package in API_PACKAGES:
        module = importlib.import_module(package)
        missing += [f"{package}.{name}" for name in module.__all__ if id(getattr(module, name)) not in documented]
    assert missing == []


@pytest.mark.slow
def test_no_api_page_for_a_name_outside_all(site):
    _, html = site
    strays = []
    for page in (html / "api" / "generated").glob("*.html"):
        if inspect.ismodule(_documented_object(page.stem)):
            continue
        parent, name = page.stem.rsplit(".", 1)
        if name not in importlib.import_module(parent).__all__:
            strays.append(page.stem)
    assert strays == []


@pytest.mark.slow
def test_every_notebook_is_shown_with_its_committed_outputs(site):
    _, html = site
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = html / "notebooks" / f"{notebook.stem}.html"
        assert "cell_output" in page.read_text(encoding="utf-8"), notebook.name


def _scales_table() -> str:
    """The published-scales table as the guide shows it, from ``softmax-scale scale --list --json``."""
    from softmax_scale import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(["scale", "--list", "--json"])

    def shown(v):
        return "None" if v is None else f"{v:g}" if isinstance(v, float) else str(v)

    lines = ["| scheme | applies to | formula | published defaults | `--train-length L` sets | source |",
             "|---|---|---|---|---|---|"]
    for key, r in json.loads(out.getvalue()).items():
        defaults = ", ".join(f"{k}={shown(v)}" for k, v in r["defaults"].items()) or "no parameters"
        lines.append(f"| `{key}` | {r['applies_to']} | {r['formula']} | {defaults} | "
                     f"{r['pinned_at_train_length'] or ''} | {r['source']} |")
    return "\n".join(lines)


def test_the_guide_shows_the_scheme_registry():
    text = (DOCS / "choosing_a_scale.md").read_text(encoding="utf-8")
    table = text[text.index("<!-- scales-table:start -->\n") + 28:text.index("\n<!-- scales-table:end -->")]
    assert table == _scales_table()


def _prose(text: str) -> str:
    """``text`` without its fenced blocks (code and directives)."""
    return re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.S | re.M)


def _cited(page: Path) -> list[tuple[str, Path | None]]:
    """Every repository file a page names: (what it says, where that is), ``None`` where nothing fits."""
    text = _prose(page.read_text(encoding="utf-8"))
    out = []
    # a link is neither code nor math: `E[H](64L)` and $E[H](64L)$ name no file
    links = re.sub(r"\$[^$\n]+\$", "", re.sub(r"`[^`]*`", "", text))
    for target in re.findall(r"\]\(([^)\s]+)\)", links):
        target = target.split("#")[0]
        if target and "://" not in target and not target.startswith("mailto:"):
            path = (page.parent / target).resolve()
            out.append((target, path if path.exists() else None))
    for span in re.findall(r"`([^`\s]+)`", text):
        if span in EXTERNAL_FILES or span.startswith(BUILT) or not (_FILE.match(span) or _PATH.match(span)):
            continue
        if "/" in span:
            if span.split("/")[0] not in ROOTS:
                continue
            hits = [p for p in (ROOT / span, ROOT / "softmax_scale" / span) if p.exists()]
        else:
            hits = [p for p in ROOT.rglob(span) if ".venv" not in p.parts and "_build" not in p.parts]
        out.append((span, hits[0] if hits else None))
    return out


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_cite_only_files_in_the_repository(page):
    assert [what for what, where in _cited(page) if where is None] == []


def test_the_citation_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See `DESIGN.md`, `figures/nowhere.png`, `E[H](64L)`, $E[H](64L)$ and [the notes](notes.md).\n",
                    encoding="utf-8")
    assert [what for what, where in _cited(page) if where is None] == ["notes.md", "DESIGN.md", "figures/nowhere.png"]


def test_the_benchmarks_page_includes_every_results_file():
    text = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    included = set(re.findall(r"^```\{include\} \.\./benchmarks/(\S+)$", text, flags=re.M))
    assert included == {p.name for p in (ROOT / "benchmarks").glob("results*.md")}


def test_the_readme_fits_on_a_few_screens():
    assert len(README.read_bytes()) < 12 * 1024


def test_the_readme_links_every_page():
    """The README's table of contents names every page but the site's own front page (which the README is on a code host)."""
    text = README.read_text(encoding="utf-8")
    linked = {(ROOT / t.split("#")[0]).resolve() for t in re.findall(r"\]\((docs/[^)\s]+)\)", text)}
    assert [str(p.relative_to(ROOT)) for p in PAGES if p.resolve() not in linked and p != DOCS / "index.md"] == []


#: An attribute that loads something into a page (a script, a style sheet, an image, a frame, a font).
_LOADS = re.compile(r"<(?:script|link|img|iframe|source)\b[^>]*?\b(?:src|href)\s*=\s*[\"']([^\"']+)[\"']", re.I)


def _foreign_loads(html: str) -> list[str]:
    """What a built page loads from another host (an absolute or protocol-relative address)."""
    return [url for url in _LOADS.findall(html) if re.match(r"^(?:[a-z][a-z0-9+.-]*:)?//", url, re.I)]


def test_the_foreign_load_check_can_fail():
    page = ('<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
            '<link rel="stylesheet" href="//fonts.example/x.css"><script src="_static/mathjax/tex-chtml.js"></script>'
            '<a href="https://arxiv.org/abs/1706.03762">a link is not a load</a>')
    assert _foreign_loads(page) == ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", "//fonts.example/x.css"]


@pytest.mark.slow
def test_the_site_loads_nothing_from_another_host(site):
    """No CDN: every script, style and font a page loads is in the built site, MathJax included."""
    _, html = site
    foreign, missing = {}, []
    for page in sorted(p for p in html.rglob("*.html") if "_static" not in p.relative_to(html).parts):
        text = page.read_text(encoding="utf-8")
        if _foreign_loads(text):
            foreign[str(page.relative_to(html))] = _foreign_loads(text)
        for url in _LOADS.findall(text):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I) and not (page.parent / url.split("?")[0].split("#")[0]).exists():
                missing.append(f"{page.relative_to(html)}: {url}")
    assert foreign == {}
    assert missing == []
    notebook = (html / "notebooks" / "01_second_moments.html").read_text(encoding="utf-8")
    assert re.search(r"<script[^>]*src=\"\.\./_static/mathjax/tex-chtml\.js\"", notebook)
    assert (html / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2" / "MathJax_Main-Regular.woff").exists()


def _headings(text: str) -> list[str]:
    return re.findall(r"^#{1,6} (.+)$", _prose(text), flags=re.M)


def test_no_page_title_or_heading_is_raw_latex():
    """Titles and headings feed the sidebar and the browser's tab, where TeX is not typeset."""
    raw = [f"{p.relative_to(ROOT)}: {h}" for p in [*PAGES] for h in _headings(p.read_text(encoding="utf-8"))
           if "$" in h or "\\" in h]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                raw += [f"{path.name}: {h}" for h in _headings("".join(cell["source"])) if "$" in h or "\\" in h]
    assert raw == []


#: The widest line (in characters) a page's code blocks may have, so that none scrolls sideways.
CODE_WIDTH = 100
#: A fence opens or closes a block: three or more backticks or tildes at the start of a line (a list item's indented).
_FENCE = re.compile(r"^ {0,12}(`{3,}|~{3,})(.*)$")


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(number, line) of each line inside a fenced code block; a directive's fence (```{include}) shows no code."""
    out, fence, code = [], "", False
    for number, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if not fence:
            if m:
                fence, info = m.group(1), m.group(2).strip()
                code = not info.startswith("{") or info.startswith("{code")
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip():
            fence = ""
        elif code:
            out.append((number, line))
    return out


def _too_wide(text: str) -> list[str]:
    return [f"{n}: {len(line)} characters" for n, line in _code_lines(text) if len(line) > CODE_WIDTH]


def test_the_width_check_can_fail():
    fits, wide = "x" * CODE_WIDTH, "x" * (CODE_WIDTH + 1)
    text = (f"{wide} prose wraps, `{wide}` too\n\n```python\n{fits}\n{wide}\n```\n\n- a list item:\n\n"
            f"   ```bash\n   {fits[3:]}\n   {wide[3:]}\n   ```\n\n```{{include}} x.md\n:start-after: {wide}\n```\n"
            f"~~~\n{wide}\n~~~\n")
    assert _too_wide(text) == [f"{n}: {CODE_WIDTH + 1} characters" for n in (5, 12, 19)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_no_code_block_scrolls_sideways(page):
    """Every line of a page's code blocks fits the page's width."""
    assert _too_wide(page.read_text(encoding="utf-8")) == []


@pytest.mark.slow
def test_the_landing_page_shows_the_answer_to_its_question(site):
    """The front page shows ``softmax-scale advise``'s output for its question, as the command prints it now."""
    import html as html_lib

    from softmax_scale import cli

    _, built = site
    command = re.search(r"^softmax-scale (advise .*)$", (DOCS / "index.md").read_text(encoding="utf-8"), flags=re.M).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(command.split()) == 0
    page = html_lib.unescape(re.sub(r"<[^>]+>", "", (built / "index.html").read_text(encoding="utf-8")))
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert len(lines) > 3 and lines[0] in page and lines[-1] in page
    assert f"softmax-scale {command}" in page

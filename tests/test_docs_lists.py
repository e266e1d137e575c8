"""What the docs list follows the code: every committed figure on the figures page, one count of engines everywhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from softmax_scale.engines import ENGINES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The README and every page written by hand (not the build's or the generated ones).
PAGES = [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if not {"_build", "_generated"} & set(p.parts))]
_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
          "seventeen eighteen nineteen twenty").split()
#: The inference engines of the registry: every entry but the model authors' reference code.
INFERENCE_ENGINES = [name for name in ENGINES if name != "reference"]


def test_the_figures_page_lists_every_committed_figure():
    text = (DOCS / "figures.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(\.\./figures/([^)\s]+\.png)\)", text))
    committed = {p.name for p in (ROOT / "figures").glob("*.png")}
    assert sorted(committed - listed) == [], "figures/*.png missing from docs/figures.md"
    assert sorted(listed - committed) == [], "docs/figures.md shows figures that are not committed"


def engine_counts(text: str) -> list[int]:
    """Every number of engines a text states ("eight inference engines", "8 engines")."""
    found = re.findall(r"\b(\d+|" + "|".join(_WORDS) + r")\s+(?:inference\s+)?engines\b", text, flags=re.I)
    return [int(w) if w.isdigit() else _WORDS.index(w.lower()) for w in found]


def test_the_engine_count_reader_reads_words_and_digits():
    assert engine_counts("eight inference engines; the Eight engines, 9 engines, engines six") == [8, 8, 9]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_count_of_engines_is_the_registry_s(page):
    counts = engine_counts(page.read_text(encoding="utf-8"))
    assert all(c == len(INFERENCE_ENGINES) for c in counts), \
        f"{page.name} counts {counts} engines, the registry {len(INFERENCE_ENGINES)} ({', '.join(INFERENCE_ENGINES)})"


def test_the_readme_counts_the_engines_and_getting_started_names_each():
    assert engine_counts((ROOT / "README.md").read_text(encoding="utf-8")), "the README says how many engines"
    text = (DOCS / "getting_started.md").read_text(encoding="utf-8")
    sentence = re.search(r"`softmax-scale engines CONFIG.*?\)", text, flags=re.S)
    assert sentence, "getting_started describes `softmax-scale engines`"
    flat = re.sub(r"[\s-]+", "", sentence.group(0).lower())
    missing = [e for e in INFERENCE_ENGINES if re.sub(r"[\s-]+", "", e.lower()) not in flat]
    assert missing == [], f"getting_started's `engines` sentence does not name {missing}"

"""The benchmarks' results files: each generated one is what the harness renders, and no prose is copied between files.

``benchmarks/run.py`` writes every results file it lists from its topics' rows and notes only;
the others (``results_before_after.md``, ``results_real_heads.md``) are records kept by hand.
Nothing here measures: the topics are replaced by planted ones where ``run.main`` is exercised.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `benchmarks` is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import _harness, run  # noqa: E402

RESULTS_FILES = sorted((ROOT / "benchmarks").glob("results*.md"))


def paragraphs(text: str) -> list[str]:
    """The prose paragraphs of a Markdown text (not headings, not table rows), whitespace normalised."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [x for x in block.splitlines() if x.strip() and not x.lstrip().startswith(("|", "#"))]
        if lines:
            out.append(" ".join(" ".join(lines).split()))
    return out


def copied_paragraphs(texts: dict[str, str]) -> dict[str, list[str]]:
    """The paragraphs that appear in more than one of ``texts`` (name -> text), with the names holding each."""
    where: dict[str, list[str]] = {}
    for name, text in texts.items():
        for p in set(paragraphs(text)):
            where.setdefault(p, []).append(name)
    return {p: names for p, names in where.items() if len(names) > 1}


def test_every_generated_results_file_is_committed_and_known():
    names = {p.name for p in RESULTS_FILES}
    assert set(run.RESULTS) <= names
    assert {"results_before_after.md", "results_real_heads.md"} <= names


@pytest.mark.parametrize("name", sorted(run.RESULTS))
def test_generated_results_file_is_what_the_harness_renders_from_its_rows(name):
    """The committed file is its own run paragraph and table, rendered with its topics' titles and notes: nothing else."""
    text = (ROOT / "benchmarks" / name).read_text(encoding="utf-8")
    assert run.results_text(name, *_harness.parse(text)) == text, f"{name}: run `python benchmarks/run.py --rewrite`"


@pytest.mark.parametrize("name", sorted(run.RESULTS))
def test_generated_results_file_holds_rows_of_its_topics(name):
    _, lines = _harness.parse((ROOT / "benchmarks" / name).read_text(encoding="utf-8"))
    assert lines, f"{name}: no rows"
    assert all(line.count(" | ") == 4 for line in lines), f"{name}: a row without the five columns"


def test_no_paragraph_is_copied_between_results_files():
    texts = {p.name: p.read_text(encoding="utf-8") for p in RESULTS_FILES}
    assert copied_paragraphs(texts) == {}


def test_every_topic_is_in_one_results_file_and_has_notes_or_none():
    held = [t for _, topics in run.RESULTS.values() for t in topics]
    assert len(held) == len(set(held))
    assert all(isinstance(getattr(t, "NOTES", ""), str) for t in held)
    notes = [t.NOTES for t in held if getattr(t, "NOTES", "").strip()]
    assert len(set(notes)) == len(notes)


def test_the_checks_catch_a_copied_paragraph_and_a_changed_file():
    """Negative controls: a paragraph planted in two files, and a committed file with a line of prose added."""
    texts = {p.name: p.read_text(encoding="utf-8") for p in RESULTS_FILES}
    planted = dict(texts)
    planted["results_train.md"] += "\n" + paragraphs(texts["results.md"])[-1] + "\n"
    assert list(copied_paragraphs(planted).values()) == [["results.md", "results_train.md"]]
    text = texts["results_decoder.md"] + "\nA note copied in by hand.\n"
    assert run.results_text("results_decoder.md", *_harness.parse(text)) != text
    with pytest.raises(ValueError, match="text"):
        _harness.parse("# Benchmarks\n\nno table here\n")


def _planted(name: str, rows: list[dict], notes: str):
    """A topic module as ``run`` sees one: a name, ``run(quick) -> rows`` and ``NOTES``."""
    topic = types.ModuleType(f"benchmarks.{name}")
    topic.run, topic.NOTES = (lambda quick: rows), notes
    return topic


def test_main_writes_a_file_only_when_all_its_topics_ran(tmp_path, monkeypatch, capsys):
    row = {"name": "planted", "value": 2.0, "unit": "x", "target": ">= 1", "detail": "d"}
    a, b = _planted("alpha", [row], "**A.** Notes of a."), _planted("beta", [dict(row, value=0.5)], "")
    monkeypatch.setattr(run, "RESULTS", {"results_ab.md": ("Benchmarks: a and b", (a, b))})
    monkeypatch.setattr(run, "TOPICS", (a, b))
    run.main(["--out", str(tmp_path), "--only", "alpha"])
    assert not (tmp_path / "results_ab.md").exists()
    assert "results_ab.md not written: it also holds beta" in capsys.readouterr().out
    run.main(["--out", str(tmp_path)])
    text = (tmp_path / "results_ab.md").read_text()
    assert text.startswith("# Benchmarks: a and b\n\n`python benchmarks/run.py` on ")
    assert _harness.parse(text)[1] == ["| planted | 2 x | >= 1 | met | d |", "| planted | 0.5 x | >= 1 | MISSED | d |"]
    assert text.endswith("## Notes\n\n**A.** Notes of a.\n")
    monkeypatch.setattr(a, "NOTES", "**A.** New notes.")
    run.main(["--out", str(tmp_path), "--rewrite"])
    rewritten = (tmp_path / "results_ab.md").read_text()
    assert rewritten == text.replace("Notes of a.", "New notes.")


def test_run_paragraph_names_the_cpu_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma avx512f avx512_bf16 amx_tile\n")
    assert _harness.cpu_flags(str(info)) == "avx2 fma avx512f avx512_bf16"
    info.write_text("flags\t\t: fpu sse2\n")
    assert _harness.cpu_flags(str(info)).startswith("none of avx2")
    assert _harness.cpu_flags(str(tmp_path / "missing")) == "unknown"
    assert f"flags: {_harness.cpu_flags()};" in _harness.run_paragraph("cmd", 3, 1.0, "v")


def test_a_quick_run_writes_no_results_file_unless_told_where(tmp_path, monkeypatch, capsys):
    """``--quick`` alone prints its rows and leaves the committed files as they are; ``--out`` writes them there."""
    row = {"name": "planted", "value": 2.0, "unit": "x", "target": ">= 1", "detail": "d"}
    a = _planted("alpha", [row], "")
    monkeypatch.setattr(run, "RESULTS", {"results_a.md": ("Benchmarks: a", (a,))})
    monkeypatch.setattr(run, "TOPICS", (a,))
    monkeypatch.setattr(run, "HERE", tmp_path / "committed")
    (tmp_path / "committed").mkdir()
    run.main(["--quick"])
    out = capsys.readouterr().out
    assert "| planted | 2 x | >= 1 | met | d |" in out
    assert "results_a.md not written: a --quick run writes its files only with --out DIR" in out
    assert list((tmp_path / "committed").iterdir()) == []
    run.main(["--quick", "--out", str(tmp_path)])
    assert (tmp_path / "results_a.md").read_text().startswith("# Benchmarks: a\n\n`python benchmarks/run.py --quick` on ")
    run.main([])
    assert (tmp_path / "committed" / "results_a.md").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("topic", [run.topic_name(t) for t in run.TOPICS])
def test_each_topic_runs_in_its_quick_form(topic, tmp_path):
    """``python benchmarks/run.py --quick --only TOPIC`` runs to the end and prints its rows; a topic alone in its
    results file writes that file (to ``--out``, never over the committed one)."""
    import subprocess

    res = subprocess.run([sys.executable, "benchmarks/run.py", "--quick", "--only", topic, "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [x for x in res.stdout.splitlines() if x.startswith("| ")]
    assert rows and all(x.count(" | ") == 4 for x in rows), res.stdout[-3000:]
    name = next(n for n, (_, topics) in run.RESULTS.items() if topic in [run.topic_name(t) for t in topics])
    if len(run.RESULTS[name][1]) == 1:
        assert _harness.parse((tmp_path / name).read_text(encoding="utf-8"))[1] == rows

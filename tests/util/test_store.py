"""The resumable result store: round trip, resume, torn and partial blocks, foreign files."""

from __future__ import annotations

import numpy as np
import pytest

from softmax_scale._util.store import ResultStore, format_value, read_table

COLS = ("task", "seed", "x", "y")


def _store(path, **kw):
    return ResultStore(path, {"command": "test", "version": 1}, COLS, key=("task", "seed"), match=("version",), **kw)


def test_round_trip_and_resume(tmp_path):
    p = tmp_path / "sub" / "r.csv"
    s = _store(p)
    assert s.append([("a", 0, 1, 0.5), ("a", 0, 2, float("nan"))]) == 2
    s.append([("b", 1, 1, 1 / 3)])
    t = read_table(p, COLS, text=("task",), ints=("seed", "x"))
    assert t.header == {"command": "test", "version": "1"}
    assert list(t.rows["task"]) == ["a", "a", "b"]
    assert t.rows["seed"].dtype == np.int64
    assert np.isnan(t.rows["y"][1])
    assert t.rows["y"][2] == pytest.approx(1 / 3, rel=1e-6)
    again = _store(p)
    assert again.has(("a", 0), 2)
    assert again.has(("b", 1))
    assert not again.has(("a", 0), 3)
    assert not again.has(("c", 0))


def test_a_resume_that_appends_updates_the_provenance_and_keeps_the_old(tmp_path):
    p = tmp_path / "r.csv"
    ResultStore(p, {"command": "run 1", "code": "aaa", "version": 1}, COLS, key=("task", "seed"),
                match=("version",)).append([("a", 0, 1, 0.5)])
    before = p.read_bytes()
    # a resume with nothing to append leaves the file byte for byte
    ResultStore(p, {"command": "run 1", "code": "bbb", "version": 1}, COLS, key=("task", "seed"), match=("version",))
    assert p.read_bytes() == before
    s = ResultStore(p, {"command": "run 2", "code": "bbb", "version": 1}, COLS, key=("task", "seed"), match=("version",))
    s.append([("b", 0, 1, 0.25)])
    s.append([("c", 0, 1, 0.125)])  # the header is refreshed once
    t = read_table(p, COLS, text=("task",), ints=("seed", "x"))
    assert t.header == {"command": "run 2", "code": "bbb", "version": "1", "resumed": "command was run 1; code was aaa"}
    assert list(t.rows["task"]) == ["a", "b", "c"]
    s = ResultStore(p, {"command": "run 3", "code": "bbb", "version": 1}, COLS, key=("task", "seed"), match=("version",))
    s.append([("d", 0, 1, 0.0)])
    assert read_table(p, COLS, text=("task",)).header["resumed"] == "command was run 1; code was aaa | command was run 2"


def test_partial_and_torn_blocks_are_dropped(tmp_path):
    p = tmp_path / "r.csv"
    s = _store(p)
    s.append([("a", 0, 1, 0.5), ("a", 0, 2, 0.25)])
    s.append([("b", 0, 1, 0.5)])  # should have had two rows
    with open(p, "a") as f:
        f.write("c,0,1")  # a write cut short
    again = _store(p)
    assert again.drop_partial(lambda k: 2) == [("b", "0")]
    t = read_table(p, COLS, text=("task",))
    assert list(t.rows["task"]) == ["a", "a"]
    assert not again.has(("b", 0))
    assert p.read_text().endswith("\n")


def test_foreign_files_are_refused(tmp_path):
    p = tmp_path / "r.csv"
    _store(p).append([("a", 0, 1, 0.5)])
    with pytest.raises(ValueError, match="version"):
        ResultStore(p, {"version": 2}, COLS, key=("task", "seed"), match=("version",))
    with pytest.raises(ValueError, match="columns"):
        ResultStore(p, {"version": 1}, ("task", "seed", "z"), key=("task", "seed"))
    with pytest.raises(ValueError, match="columns"):
        read_table(p, ("other",))
    with pytest.raises(ValueError, match="cells"):
        _store(p).append([("a", 1, 2)])
    fresh = _store(p, overwrite=True)
    assert fresh.done == {}
    assert len(read_table(p)) == 0


def test_format_value():
    assert [format_value(v) for v in ("x", 3, np.int64(4), True, 0.1 + 0.2, float("inf"))] == \
        ["x", "3", "4", "1", "0.3", ""]
    assert float(format_value(1 / 3, ".17g")) == 1 / 3  # round trip, bit for bit


def test_as_written_is_the_value_read_back_from_the_file():
    from softmax_scale._util.store import as_written

    x = np.array([[1 / 3, 2e-7 / 3], [np.nan, -np.inf]])
    got = as_written(x, ".4g")
    assert got.shape == x.shape
    assert got[0].tolist() == [float(format_value(v, ".4g")) for v in x[0]] == [0.3333, 6.667e-08]
    assert np.isnan(got[1, 0]) and got[1, 1] == -np.inf
    assert as_written(2 / 3, ".2g") == 0.67 and isinstance(as_written(2 / 3), float)


def test_source_revision_names_a_commit():
    from softmax_scale._util.store import source_revision

    rev = source_revision()
    assert rev == "unknown" or (len(rev.split("+")[0]) == 40 and rev.split("+")[0].isalnum())


def test_reorder_sorts_the_rows_stably_and_keeps_the_header(tmp_path):
    p = tmp_path / "r.csv"
    s = _store(p)
    s.append([("b", 1, 1, 0.5), ("b", 1, 2, 0.25)])
    s.append([("a", 0, 2, 1.0), ("a", 0, 1, 2.0)])
    rank = {"a": 0, "b": 1}
    assert s.reorder(lambda cells: rank[cells[0]])
    t = read_table(p, COLS, text=("task",), ints=("seed", "x"))
    assert t.header == {"command": "test", "version": "1"}
    assert list(t.rows["task"]) == ["a", "a", "b", "b"]
    assert list(t.rows["x"]) == [2, 1, 1, 2]  # within a task: the order written
    before = p.read_bytes()
    assert not s.reorder(lambda cells: rank[cells[0]])  # already in order: not rewritten
    assert p.read_bytes() == before
    again = _store(p)
    assert again.has(("a", 0), 2)
    assert again.has(("b", 1), 2)


def test_a_file_without_header_lines_is_refused_saying_so(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text(",".join(COLS) + "\na,0,1,0.5\n")
    with pytest.raises(ValueError, match="no header lines"):
        _store(p)
    assert _store(p, overwrite=True).done == {}


def _resume(p, blocks):
    """What a sweep does on resume: drop partial blocks, then run each block not done (here: write its rows)."""
    s = _store(p)
    s.drop_partial(lambda k: 2)
    ran = [b for b in blocks if not s.has((b, 0), 2)]
    for b in ran:
        s.append([(b, 0, 1, 0.5), (b, 0, 2, 0.125)])
    return ran


def test_a_last_line_cut_mid_cell_is_not_counted_and_its_block_is_rerun(tmp_path):
    """A torn last line with every cell but no newline: counted as done, dropped as torn, never rerun (before)."""
    p = tmp_path / "r.csv"
    s = _store(p)
    s.append([("a", 0, 1, 0.5), ("a", 0, 2, 0.125)])
    s.append([("b", 0, 1, 0.5), ("b", 0, 2, 0.125)])
    text = p.read_text()
    p.write_text(text[: text.rindex("0.125") + 3])  # "b,0,2,0.1": four cells, no newline
    assert not _store(p).has(("b", 0), 2)
    assert _resume(p, ["a", "b"]) == ["b"]
    t = read_table(p, COLS, text=("task",), ints=("seed", "x"))
    assert list(t.rows["task"]) == ["a", "a", "b", "b"]
    assert t.rows["y"].tolist() == [0.5, 0.125, 0.5, 0.125]
    assert _resume(p, ["a", "b"]) == []


def test_a_writer_killed_mid_line_loses_only_its_block(tmp_path):
    """A real process killed while its last row is half written: the resume reruns that block, nothing else."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    p = tmp_path / "r.csv"
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from softmax_scale._util.store import ResultStore
        s = ResultStore({str(p)!r}, {{"command": "test", "version": 1}}, {COLS!r}, key=("task", "seed"), match=("version",))
        s.append([("a", 0, 1, 0.5), ("a", 0, 2, 0.125)])
        with open({str(p)!r}, "a") as f:  # the rows of block b, the second cut short where the kill lands
            f.write("b,0,1,0.5\\nb,0,2,0.1")
            f.flush()
        print("written", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert not p.read_text().endswith("\n")
    assert _resume(p, ["a", "b", "c"]) == ["b", "c"]
    t = read_table(p, COLS, text=("task",), ints=("seed", "x"))
    assert list(t.rows["task"]) == ["a", "a", "b", "b", "c", "c"]
    assert p.read_text().endswith("0.125\n")


def test_an_append_after_a_torn_tail_starts_its_own_line(tmp_path):
    p = tmp_path / "r.csv"
    _store(p).append([("a", 0, 1, 0.5)])
    with open(p, "a") as f:
        f.write("b,0,1,0.2")
    s = _store(p)  # no drop_partial: the append itself must not continue the torn line
    s.append([("c", 0, 1, 0.25)])
    t = read_table(p, COLS, text=("task",))
    assert list(t.rows["task"]) == ["a", "c"]
    assert _store(p).done == {("a", "0"): 1, ("c", "0"): 1}


def _git(repo, *args):
    import subprocess

    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


@pytest.fixture
def package_repo(tmp_path, monkeypatch):
    """A git repository holding a package of two subpackages, the store reading its state."""
    import shutil

    from softmax_scale._util import store

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    for rel in ("pkg/__init__.py", "pkg/_util/store.py", "pkg/heads/_rules.py"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x = 1\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "README").write_text("outside the package\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    monkeypatch.setattr(store, "PACKAGE_DIR", str(repo / "pkg"))
    return repo


def test_source_revision_sees_every_file_of_the_package(package_repo):
    from softmax_scale._util.store import source_revision

    repo = package_repo
    clean = source_revision()
    assert len(clean) == 40 and "+" not in clean
    (repo / "README").write_text("edited, but not the package\n")
    (repo / "pkg/__pycache__").mkdir()
    (repo / "pkg/__pycache__/x.pyc").write_bytes(b"\0")  # ignored
    assert source_revision() == clean
    (repo / "pkg/heads/_rules.py").write_text("x = 2\n")  # a module outside _util/
    assert source_revision() == clean + "+changes"
    _git(repo, "checkout", "--", "pkg/heads/_rules.py")
    (repo / "pkg/heads/_new.py").write_text("y = 1\n")  # untracked
    assert source_revision() == clean + "+changes"
    _git(repo, "add", "pkg/heads/_new.py")  # staged
    assert source_revision() == clean + "+changes"


def test_a_result_file_written_with_an_edited_module_says_changes(package_repo, tmp_path, capsys):
    """``softmax-scale run`` with a module of the package edited: the file's code line ends in ``+changes``."""
    from softmax_scale.cli import main

    (package_repo / "pkg/heads/_rules.py").write_text("x = 2\n")
    out = tmp_path / "out"
    assert main(["run", "alpha_table", "--quick", "--no-figure", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    header = read_table(out / "alpha_star_quick.csv", text=("scores",)).header
    assert header["code"].startswith("softmax_scale at ")
    assert header["code"].endswith("+changes")


def test_read_header_reads_the_leading_lines_only(tmp_path):
    from softmax_scale._util.store import read_header

    p = tmp_path / "r.csv"
    p.write_text("# experiment: measure\n# model: a: b\na,b\n1,2\n# late: not header\n", encoding="utf-8")
    assert read_header(p) == {"experiment": "measure", "model": "a: b"}
    assert read_header(tmp_path / "missing.csv") == {}
    (tmp_path / "bin.csv").write_bytes(b"# x: \xff\xfe\n")
    assert read_header(tmp_path / "bin.csv") == {}

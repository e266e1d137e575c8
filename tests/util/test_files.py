"""Atomic writes: the whole new file or the old one, with the permissions a plain write gives."""

import os
import stat

import pytest

from softmax_scale._util.files import atomic_write, atomic_write_text


def test_the_file_gets_the_permissions_of_a_plain_write(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    written = atomic_write_text(tmp_path / "atomic.txt", "x")
    assert stat.S_IMODE(os.stat(written).st_mode) == stat.S_IMODE(os.stat(plain).st_mode)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = atomic_write_text(tmp_path / "a.csv", "old")

    def fail(tmp):
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        atomic_write(path, fail)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]

"""Atomic file writes (a result is either the old file or the whole new one, never half of either), and a file's hash."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_text", "file_sha256"]


def atomic_write(path, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp)`` for a temporary file beside ``path``, flush it to disk, then rename it onto ``path``.

    The temporary file has the suffix of ``path`` (so that writers which read the format from the
    name, such as matplotlib's, write the same bytes) and is removed if ``write`` fails or the
    process is interrupted.  The file gets the permissions a plain ``open(path, "w")`` would give it
    (``0o666`` less the umask), not the temporary file's private ``0o600``.  Returns ``path`` as a
    :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp" + path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def file_sha256(path) -> str:
    """SHA-256 of a file's bytes as hex, read a mebibyte at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

"""Resumable result files: a CSV with a provenance header, appended one finished task at a time.

Long experiments (a real decoder at 16k tokens, a sweep of training runs) write their results
here as they go, so a run that is stopped loses at most the task in flight and a rerun skips
what is done.  The file is plain CSV after ``# key: value`` header lines (the command, inputs,
hashes and versions that made it), readable by any CSV reader that skips comments.

- :class:`ResultStore` opens (or creates) the file, checks that the header lines that define
  the experiment (``match``) agree with the file's, counts the rows already written for each
  task key, drops torn or partial blocks, appends a task's rows in one ``fsync``-ed write, and
  rewrites the rows in one canonical order once the work is done (:meth:`ResultStore.reorder`).
- :func:`read_table` reads such a file back into one array per column.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .files import atomic_write_text

__all__ = ["PACKAGE_DIR", "ResultStore", "Table", "as_written", "format_value", "read_header", "read_table",
           "source_revision"]


#: The package's folder: :func:`source_revision` reports the git state of every file under it.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def source_revision() -> str:
    """The git commit the package's source is at, with ``+changes`` when any file of the package differs from it.

    For the ``code`` line of a result file's header.  Every file under :data:`PACKAGE_DIR` counts,
    modified, staged or untracked (files git ignores, such as ``__pycache__``, do not);
    ``"unknown"`` outside a git checkout (an installed wheel) or without git.
    """
    import subprocess

    here = PACKAGE_DIR
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=all", "--", "."],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def format_value(x, float_format: str = ".6g") -> str:
    """One CSV cell: strings as they are, integers exactly, floats with ``float_format``, NaN empty."""
    if isinstance(x, (str, np.str_)):
        return str(x)
    if isinstance(x, (bool, np.bool_)):
        return str(int(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    return "" if not np.isfinite(x) else format(x, float_format)


def as_written(x, float_format: str = ".6g"):
    """``x`` (a float or an array of floats) rounded as :func:`format_value` writes it, read back (non-finite kept).

    A figure or table drawn from these is the one drawn from the result file, on any CPU whose
    results agree to the digits ``float_format`` keeps.
    """
    a = np.asarray(x, dtype=np.float64)
    out = np.array([float(format(v, float_format)) if np.isfinite(v) else v for v in a.reshape(-1)]).reshape(a.shape)
    return out if a.ndim else float(out)


@dataclass(frozen=True)
class Table:
    """A result file read back.

    Attributes
    ----------
    header : dict
        The ``# key: value`` lines.
    rows : dict of str -> ndarray
        One array per column: ``object`` for text columns, ``int64`` for integer columns,
        float (NaN for an empty cell) otherwise.
    path : str
    """

    header: dict
    rows: dict
    path: str

    def __len__(self) -> int:
        return len(next(iter(self.rows.values()))) if self.rows else 0


def _split(path) -> tuple[dict, list[str], list[int]]:
    """The ``# key: value`` header, the other non-blank lines and their 1-based line numbers in the file."""
    header, lines, numbers = {}, [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if line.startswith("#"):
                k, _, v = line[1:].partition(":")
                header[k.strip()] = v.strip()
            elif line.strip():
                lines.append(line)
                numbers.append(number)
    return header, lines, numbers


def read_header(path) -> dict:
    """The ``# key: value`` lines a result file starts with, read up to its first other line (empty if unreadable).

    Cheap on a large file: a folder's result files can be told apart by their headers without reading them.
    """
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.startswith("#"):
                    break
                k, _, v = line[1:].partition(":")
                out.setdefault(k.strip(), v.strip())
    except (OSError, UnicodeDecodeError):
        return {}
    return out


def _cell(value: str, kind, path, number: int, column: str):
    """One cell read as ``kind`` (``int``, or ``float`` with an empty cell NaN); else a ValueError naming the line and column."""
    try:
        return kind(value) if value or kind is int else np.nan
    except ValueError:
        raise ValueError(f"`path`: {os.fspath(path)} line {number}: `{column}` must be "
                         f"{'an integer' if kind is int else 'a number'}, got {value!r} (a damaged file)") from None


def read_table(path, columns: Sequence[str] | None = None, *, text: Iterable[str] = (),
               ints: Iterable[str] = ()) -> Table:
    """Read a result file (header lines start with ``#``, then a CSV with a column row).

    Parameters
    ----------
    path : str or PathLike
    columns : sequence of str, optional
        The columns the file must have, in order; ``ValueError`` naming ``path`` otherwise.
    text, ints : iterable of str
        Columns read as strings and as integers; the others are floats.

    Returns
    -------
    Table
        A torn last line (cut short by a writer that was stopped: no newline, too few cells) is
        left out.

    Raises
    ------
    ValueError
        Naming ``path`` and the line: a row elsewhere with the wrong number of cells, or a cell
        that is not a number where one is read (a damaged file).
    """
    header, lines, numbers = _split(path)
    cols = tuple(next(csv.reader(lines[:1]), ()))
    if columns is not None and cols != tuple(columns):
        raise ValueError(f"`path`: {os.fspath(path)} has columns {list(cols)}, expected {list(columns)}")
    data, at = [], []
    for k, (line, number) in enumerate(zip(lines[1:], numbers[1:]), start=1):
        row = next(csv.reader([line]), [])
        if len(row) != len(cols):
            if k == len(lines) - 1 and not line.endswith("\n"):  # a torn tail
                continue
            raise ValueError(f"`path`: {os.fspath(path)} line {number} has {len(row)} cell{'s' * (len(row) != 1)}, "
                             f"expected {len(cols)} (a damaged file)")
        data.append(row)
        at.append(number)
    text, ints = set(text), set(ints)
    rows = {}
    for j, c in enumerate(cols):
        vals = [row[j] for row in data]
        if c in text:
            rows[c] = np.asarray(vals, dtype=object)
        elif c in ints:
            rows[c] = np.asarray([_cell(v, int, path, n, c) for v, n in zip(vals, at)], dtype=np.int64)
        else:
            rows[c] = np.asarray([_cell(v, float, path, n, c) for v, n in zip(vals, at)], dtype=np.float64)
    return Table(header, rows, os.fspath(path))


class ResultStore:
    """A CSV result file as a resumable store: one block of rows per task key.

    Parameters
    ----------
    path : str or PathLike
        The file; its folder is created.
    header : dict
        Provenance written as ``# key: value`` lines when the file is new.  When resuming, the
        lines outside ``match`` that differ (the code revision, the date, the list of runs) are
        updated on the first :meth:`append`, their old values kept in a ``resumed`` line; a
        resume that appends nothing leaves the file as it was.
    columns : sequence of str
        Column names.
    key : sequence of str
        The leading columns that name a task (a block of rows).
    match : sequence of str
        Header keys that define the experiment: resuming a file whose values differ raises
        ``ValueError`` (a file from another experiment is never extended).
    overwrite : bool
        Start a new file even if one exists.
    float_format : str
        Format of float cells.

    Attributes
    ----------
    header : dict
        The file's header (the existing one when resuming).
    done : dict
        ``{key tuple: rows written}``, over complete (newline-terminated) lines only.
    """

    def __init__(self, path, header: dict, columns: Sequence[str], key: Sequence[str], *,
                 match: Sequence[str] = (), overwrite: bool = False, float_format: str = ".6g"):
        self.path = os.fspath(path)
        self.columns = tuple(columns)
        self.key = tuple(key)
        if self.columns[: len(self.key)] != self.key:
            raise ValueError(f"`key` must be the leading columns, got {self.key} for columns {self.columns}")
        self.float_format = float_format
        self.done: dict = {}
        self._stale: dict = {}
        if os.path.exists(self.path) and not overwrite:
            old_header, lines, _ = _split(self.path)
            if not lines or next(csv.reader(lines[:1])) != list(self.columns):
                raise ValueError(f"`out`: {self.path} exists and is not a file of this experiment "
                                 f"(columns differ); pass overwrite=True or another file")
            if match and not old_header:
                raise ValueError(f"`out`: {self.path} has no header lines (# key: value) saying what it was run with, "
                                 "so it cannot be resumed; pass overwrite=True (or another file) to start again")
            for k in match:
                if old_header.get(k) != str(header[k]):
                    raise ValueError(
                        f"`out`: {self.path} was written with {k} = {old_header.get(k)!r}, not {header[k]!r}; "
                        "pass overwrite=True (or another file) to start again")
            self.done = self._count(lines[1:])
            self.header = old_header
            # Provenance that may change between sessions (the code, the list of runs, the date):
            # brought up to date on the first append, the old values kept in a `resumed` line.
            self._stale = {k: str(v) for k, v in header.items() if k not in match and old_header.get(k) != str(v)}
        else:
            atomic_write_text(self.path, "".join(f"# {k}: {v}\n" for k, v in header.items())
                              + ",".join(self.columns) + "\n")
            self.header = dict(header)

    def _complete(self, line: str) -> list | None:
        """A body line's cells, or None for a torn line (no newline, or the wrong number of cells)."""
        if not line.endswith("\n"):
            return None
        row = next(csv.reader([line]), [])
        return row if len(row) == len(self.columns) else None

    def _count(self, body) -> dict:
        """``{key: rows}`` over the complete lines of ``body`` (the lines after the column row)."""
        done: dict = {}
        for line in body:
            row = self._complete(line)
            if row is not None:
                k = tuple(row[: len(self.key)])
                done[k] = done.get(k, 0) + 1
        return done

    def _key(self, key) -> tuple:
        key = tuple(key)
        if len(key) != len(self.key):
            raise ValueError(f"`key` must have {len(self.key)} parts {self.key}, got {key!r}")
        return tuple(format_value(k, self.float_format) for k in key)

    def has(self, key, rows: int | None = None) -> bool:
        """Whether the task ``key`` is in the file (with exactly ``rows`` rows, when given)."""
        c = self.done.get(self._key(key), 0)
        return c > 0 if rows is None else c == rows

    def drop_partial(self, expected: Callable[[tuple], int]) -> list:
        """Rewrite the file without the blocks whose row count is not ``expected(key)`` (and torn lines).

        Only complete lines (newline-terminated, every cell) count, so a block whose last line was
        cut short is partial and dropped; :attr:`done` is recounted from what is kept.
        ``expected`` receives the key as written (a tuple of strings).  Returns the dropped keys.
        """
        bad = {k for k, c in self.done.items() if c != expected(k)}
        with open(self.path, encoding="utf-8") as f:
            lines = f.readlines()
        keep, torn = [], False
        seen_columns = False
        for line in lines:
            if line.startswith("#"):
                keep.append(line)
                continue
            if not seen_columns:
                seen_columns = True
                keep.append(line)
                continue
            row = self._complete(line)
            if row is None:
                torn = True
                continue
            if tuple(row[: len(self.key)]) in bad:
                continue
            keep.append(line)
        if bad or torn:
            atomic_write_text(self.path, "".join(keep))
        self.done = self._count([line for line in keep if not line.startswith("#")][1:])
        return sorted(bad)

    def _cut_torn_tail(self) -> None:
        """Drop a last line without its newline (a write cut short), so that an append starts a line of its own."""
        with open(self.path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
        with open(self.path, encoding="utf-8") as f:
            text = f.read()
        atomic_write_text(self.path, text[: text.rfind("\n") + 1])

    def _refresh_header(self) -> None:
        """Write the new values of the header lines that changed since the file was made (once, atomically).

        The rows already in the file came from the old values, so these are kept: each change is
        added to a ``resumed`` line as ``key was old value``.
        """
        with open(self.path, encoding="utf-8") as f:
            lines = f.readlines()
        body = [line for line in lines if not line.startswith("#")]
        was = "; ".join(f"{k} was {self.header.get(k, '(absent)')}" for k in self._stale)
        header = dict(self.header)
        header.update(self._stale)
        header["resumed"] = f"{header['resumed']} | {was}" if header.get("resumed") else was
        atomic_write_text(self.path, "".join(f"# {k}: {v}\n" for k, v in header.items()) + "".join(body))
        self.header, self._stale = header, {}

    def reorder(self, rank: Callable[[tuple], object]) -> bool:
        """Rewrite the rows sorted by ``rank(cells)`` (stable: rows of equal rank keep their order), atomically.

        ``rank`` receives a row's cells as written (a tuple of strings).  The header is left as
        it is; a file already in that order is not touched.  Returns whether it was rewritten.
        """
        with open(self.path, encoding="utf-8") as f:
            lines = f.readlines()
        head = [line for line in lines if line.startswith("#")]
        body = [line for line in lines if not line.startswith("#")]
        if len(body) < 2:
            return False
        ranked = [(rank(tuple(next(csv.reader([line])))), i) for i, line in enumerate(body[1:])]
        order = [i for _, i in sorted(ranked)]
        if order == sorted(order):
            return False
        rows = body[1:]
        atomic_write_text(self.path, "".join(head) + body[0] + "".join(rows[i] for i in order))
        return True

    def append(self, rows: Iterable[Sequence]) -> int:
        """Append whole rows (each starting with its key) in one write, flushed to disk.

        Returns the number of rows written.
        """
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        counts: dict = {}
        for row in rows:
            row = list(row)
            if len(row) != len(self.columns):
                raise ValueError(f"`rows`: each row must have {len(self.columns)} cells, got {len(row)}")
            cells = [format_value(v, self.float_format) for v in row]
            w.writerow(cells)
            k = tuple(cells[: len(self.key)])
            counts[k] = counts.get(k, 0) + 1
        text = buf.getvalue()
        if text:
            self._cut_torn_tail()
        if text and self._stale:
            self._refresh_header()
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        for k, c in counts.items():
            self.done[k] = self.done.get(k, 0) + c
        return sum(counts.values())

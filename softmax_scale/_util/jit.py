"""Numba options in one place.

Every jitted function of the package is compiled through :func:`jit`, so that
``cache=True`` (compiled code kept on disk next to the module),
``error_model="numpy"`` (no Python exception checks on float division) and
``nogil=True`` hold everywhere.

A read-only install must still import and run, silently.  numba itself falls
back from ``__pycache__`` to a user-wide cache (``~/.cache/numba``), and raises
at decoration time when neither is writable.  :func:`_ensure_cache_dir` runs
first: if ``NUMBA_CACHE_DIR`` is unset and the package directory is not
writable, it points numba at a private per-user directory under the system
temporary directory; if nothing at all is writable, caching is switched off
(compiled in memory on every start, ``cache=False``).

Processes that compile into one cache at once (two test workers, the workers
of a sweep) can leave numba's index naming a data file that another process
then overwrote with another signature's code, which a later load runs on the
wrong arguments (a segmentation fault; numba issue 10128).  Each data file
written through :func:`jit` therefore also holds the key it was written for,
and a load whose file holds another key is a miss: the function is compiled
again, and the file rewritten.
"""

from __future__ import annotations

import os
import stat
import tempfile

import numba
from numba.core.caching import IndexDataCacheFile

__all__ = ["jit"]

_OPTIONS = {"cache": True, "error_model": "numpy", "nogil": True, "fastmath": False}


def _writable(path: str) -> bool:
    """Whether a file can be created in ``path`` (created if missing): ``os.access`` and a real attempt."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        if not os.access(path, os.W_OK):
            return False
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _private_dir(path: str) -> bool:
    """``path`` exists (or is created), belongs to this user and is not writable by others."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _ensure_cache_dir() -> bool:
    """Make sure numba has a writable cache; return whether caching is on.

    Order: ``NUMBA_CACHE_DIR`` if set (numba's own rule), the package's
    ``__pycache__``, then ``<tmp>/softmax_scale-numba-cache-<uid>`` (private,
    mode 0700; a directory someone else owns is never used: cache files are
    loaded as code).  With none writable, caching is turned off.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return True
    here = os.path.dirname(os.path.abspath(__file__))
    if os.access(here, os.W_OK) and _writable(os.path.join(here, "__pycache__")):
        return True
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    cache = os.path.join(tempfile.gettempdir(), f"softmax_scale-numba-cache-{uid}")
    if _private_dir(cache) and _writable(cache):
        numba.config.CACHE_DIR = cache
        return True
    return False


if not _ensure_cache_dir():  # nowhere to write: compile in memory at every start
    _OPTIONS["cache"] = False


#: First item of every data file :class:`_KeyedCacheFile` writes.
_ENTRY = "softmax_scale cache entry 1"


class _KeyedCacheFile(IndexDataCacheFile):
    """numba's index and data files, each data file holding its key beside the compiled code."""

    def save(self, key, data):
        super().save(key, (_ENTRY, key, data))

    def load(self, key):
        got = super().load(key)
        if isinstance(got, tuple) and len(got) == 3 and got[0] == _ENTRY and got[1] == key:
            return got[2]
        return None  # no entry, one written by numba itself, or another key's code


def _keyed(dispatcher):
    """Make ``dispatcher``'s disk cache a :class:`_KeyedCacheFile` (nothing to do without one)."""
    cache = getattr(dispatcher, "_cache", None)
    cache_file = getattr(cache, "_cache_file", None)
    if isinstance(cache_file, IndexDataCacheFile):
        cache_file.__class__ = _KeyedCacheFile
    return dispatcher


def jit(*, parallel: bool = False, reassociate: bool = False):
    """Return a decorator: ``numba.njit`` with the package's options (``parallel`` as given) and the keyed cache.

    ``reassociate=True`` allows LLVM to reorder floating-point sums (the
    ``reassoc`` fast-math flag, nothing else: no contraction into FMA, no
    finite-math assumptions), which is what lets it vectorise a reduction.  Use
    it only on small functions that are pure sums: their result then depends on
    the vector width of the machine (bits may differ between machines and with
    ``NUMBA_DISABLE_JIT``), never on the number of threads.
    """
    options = dict(_OPTIONS)
    if reassociate:
        options["fastmath"] = {"reassoc"}
    compile_ = numba.njit(parallel=parallel, **options)
    return lambda fn: _keyed(compile_(fn))

"""Numba options in one place.

Every jitted function of the package is compiled through :func:`jit`, so that
``cache=True`` (compiled code kept on disk next to the module),
``error_model="numpy"`` (no Python exception checks on float division) and
``nogil=True`` hold everywhere.  If the cache directory cannot be written
(a read-only install), numba falls back to ``NUMBA_CACHE_DIR`` or compiles in
memory; see :func:`_ensure_cache_dir`.
"""

from __future__ import annotations

import os
import tempfile

import numba

__all__ = ["jit"]

_OPTIONS = {"cache": True, "error_model": "numpy", "nogil": True, "fastmath": False}


def _ensure_cache_dir() -> None:
    """Point numba at a writable cache if the package directory is read-only."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if os.access(here, os.W_OK):
        return
    cache = os.path.join(tempfile.gettempdir(), "softmax_scale-numba-cache")
    try:
        os.makedirs(cache, exist_ok=True)
    except OSError:  # pragma: no cover - nowhere to cache; numba compiles in memory
        return
    numba.config.CACHE_DIR = cache


_ensure_cache_dir()


def jit(*, parallel: bool = False, reassociate: bool = False):
    """Return ``numba.njit`` with the package's options (``parallel`` as given).

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
    return numba.njit(parallel=parallel, **options)

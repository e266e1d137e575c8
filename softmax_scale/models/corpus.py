"""Real text that ships with Python: nothing is downloaded.

- ``"pydoc_topics"``: the language reference as bundled for ``help()``, the values of
  ``pydoc_data.topics.topics`` joined in sorted-key order, separated by blank lines (about
  465,000 characters; 128,071 word pieces under all-MiniLM-L6-v2's tokenizer on CPython 3.11).
- ``"stdlib/<module>"``: the source text of a long pure-Python standard-library module, read
  from its file in the standard library directory (the module is not imported).

Chunks of a tokenised text are drawn at seeded offsets (:func:`chunk_offsets`,
:func:`token_chunks`), shared by the encoder and the decoder.
"""

from __future__ import annotations

import functools
import numbers
import sysconfig
from pathlib import Path

import numpy as np

from .._util.rng import seed_sequence

__all__ = ["STDLIB_MODULES", "chunk_offsets", "corpus", "corpus_names", "token_chunks"]

#: Long standard-library modules (each over 90,000 characters in CPython 3.11); the last two, with
#: ``pydoc_topics`` and ``_pydecimal``, are the ones over 32,768 tokens of SmolLM2's tokenizer.
STDLIB_MODULES = ("_pydecimal", "typing", "inspect", "argparse", "pydoc", "tarfile", "doctest", "_pyio",
                  "tkinter", "turtle")


def corpus_names() -> list[str]:
    """Names accepted by :func:`corpus`: ``"pydoc_topics"`` then ``"stdlib/<module>"``."""
    return ["pydoc_topics", *(f"stdlib/{m}" for m in STDLIB_MODULES)]


def _stdlib_file(module: str) -> Path:
    root = Path(sysconfig.get_path("stdlib"))
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"the standard-library module `{module}` has no source file under {root} in this Python")


@functools.lru_cache(maxsize=None)
def corpus(name: str) -> str:
    """The text called ``name`` (see :func:`corpus_names`); cached per process.

    Raises
    ------
    ValueError
        For an unknown name.
    FileNotFoundError
        If this Python lacks the module's source file (or ``pydoc_data``).
    """
    if name == "pydoc_topics":
        try:
            from pydoc_data.topics import topics
        except ImportError as err:  # some distributions split pydoc_data out
            raise FileNotFoundError("`pydoc_data.topics` is not available in this Python") from err
        return "\n\n".join(topics[key] for key in sorted(topics))
    if isinstance(name, str) and name.startswith("stdlib/") and name[len("stdlib/") :] in STDLIB_MODULES:
        return _stdlib_file(name[len("stdlib/") :]).read_text(encoding="utf-8")
    raise ValueError(f"unknown corpus {name!r}; known: {', '.join(corpus_names())}")


def _count(value, name: str, minimum: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    return int(value)


def chunk_offsets(total_tokens: int, n: int, count: int, rng=None) -> np.ndarray:
    """Start offsets of ``count`` windows of length ``n`` in a text of ``total_tokens`` tokens.

    Offsets are drawn uniformly (with replacement) from ``0 .. total_tokens - n``, so every
    window lies inside the text; the same ``rng`` gives the same offsets.

    Parameters
    ----------
    total_tokens, n, count : int
        Text length, window length (``1 <= n <= total_tokens``), number of windows.
    rng : None, int, SeedSequence or numpy Generator
        Seed (SciPy SPEC 7).

    Returns
    -------
    ndarray of int64, shape (count,)
    """
    total_tokens = _count(total_tokens, "total_tokens", 1)
    n = _count(n, "n", 1)
    count = _count(count, "count", 0)
    if n > total_tokens:
        raise ValueError(f"`n` must be <= total_tokens = {total_tokens}, got {n}")
    gen = np.random.default_rng(seed_sequence(rng))
    return gen.integers(0, total_tokens - n + 1, size=count, dtype=np.int64)


def token_chunks(ids, n: int, count: int, rng=None) -> np.ndarray:
    """``count`` windows of length ``n`` cut from the token ids ``ids`` at :func:`chunk_offsets`.

    Returns
    -------
    ndarray, shape (count, n), of the dtype of ``ids``
    """
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"`ids` must be 1-D, got shape {ids.shape}")
    offsets = chunk_offsets(len(ids), n, count, rng)
    return ids[offsets[:, None] + np.arange(n)]

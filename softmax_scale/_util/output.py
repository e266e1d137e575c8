"""What the command line prints: plain JSON values (``--json``), words counted, numbers parsed."""

from __future__ import annotations

import argparse
import json

import numpy as np

__all__ = ["INT_KEYS", "emit", "jsonable", "number", "plural"]

#: JSON keys whose values are counts, sizes or seeds: written as JSON integers, never ``512.0``.
INT_KEYS = frozenset({"n", "d", "trials", "seed", "rng", "chunks", "layer", "head", "train_length", "nfev"})


def jsonable(x, key=None):
    """``x`` as plain JSON values: integers (under :data:`INT_KEYS`) as ints, non-finite floats as None (null).

    Arrays become lists; numpy scalars become Python numbers; ``key`` is the dict key ``x`` sits under.
    """
    if isinstance(x, dict):
        return {str(k): jsonable(v, str(k)) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v, key) for v in x]
    if isinstance(x, np.ndarray):
        return [jsonable(v, key) for v in x.tolist()]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if not np.isfinite(x):
            return None
        return int(x) if key in INT_KEYS and x == int(x) else x
    return x


def emit(args, obj, text: str) -> None:
    """Print ``obj`` as JSON under ``--json``, else ``text``."""
    if getattr(args, "json", False):
        print(json.dumps(jsonable(obj), indent=2, allow_nan=False))
    else:
        print(text)


def plural(count: int, word: str) -> str:
    """``"1 window"``, ``"8 windows"``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def number(s: str) -> float:
    """Parse 1e6, 4096, 2.5 (argparse type): ints stay exact."""
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None

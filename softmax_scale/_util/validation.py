"""Input validation shared by the public functions.

Each checker names the parameter and the rule in its message, e.g.
``"`n` must be an integer >= 2, got 1"``, and fails early on NaN and inf.
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal

import numpy as np

#: Largest number of keys accepted anywhere (the numerics are checked to 1e12; 1e15 still works).
N_MAX = 10**15
#: Largest softmax scale accepted.
ALPHA_MAX = 1e9
#: Integral values from here on print in scientific notation (:func:`show`).
_COMPACT_FROM = 10**6


def show(x) -> str:
    """A number as a user typed it, large ones compact: ``1``, ``2.5``, ``1e+15``, ``2e+9``, ``1e-5``.

    The one format of every number a message prints.  Integers below a million print in full;
    larger integral values in scientific notation (exact up to 16 significant digits, rounded to 6
    beyond: ``10**300`` is ``1e+300``, ``2**80`` is ``1.20893e+24``); other floats as their
    shortest repr.  Exponents are never zero-padded.  Anything but a real number prints as its repr.
    """
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x.item()
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return repr(x)
    if isinstance(x, numbers.Integral):
        v = int(x)
        if abs(v) < _COMPACT_FROM:
            return str(v)
        digits = str(abs(v)).rstrip("0")
        text = format(Decimal(v), f".{len(digits) - 1 if len(digits) <= 16 else 5}e")
        text = re.sub(r"\.?0+e", "e", text) if "." in text else text
    else:
        x = float(x)
        if math.isfinite(x) and x == int(x) and abs(x) < _COMPACT_FROM:
            return str(int(x))
        big = math.isfinite(x) and x == int(x)
        text = np.format_float_scientific(x, unique=True, trim="-") if big else repr(x)
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", text)


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_int(value, name: str, *, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as a Python int, or raise naming ``name`` and the rule.

    Every integer is at most ``maximum``, by default :data:`N_MAX` (``1e15``): a count
    or size beyond that is a typo (``1e300``, ``2**80``), never a request.
    """
    maximum = N_MAX if maximum is None else maximum
    rule = f"an integer >= {show(minimum)} and <= {show(maximum)}"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if not _is_number(value):
        raise TypeError(f"`{name}` must be {rule}, got {show(value)} of type {type(value).__name__}")
    if not isinstance(value, numbers.Integral) and (not math.isfinite(value) or value != int(value)):
        raise ValueError(f"`{name}` must be {rule}, got {show(value)}")
    if value < minimum or value > maximum:
        raise ValueError(f"`{name}` must be {rule}, got {show(value)}")
    return int(value)


def check_n_array(n, name: str = "n", *, minimum: int = 2) -> tuple[np.ndarray, bool]:
    """Validate one or many numbers of keys (integers ``>= minimum`` and ``<= 1e15``).

    Returns the values as a 1-D float64 array (exact for integers below 2**53)
    and whether the input was a scalar.
    """
    scalar = np.ndim(n) == 0
    rule = f"an integer >= {show(minimum)} and <= {show(N_MAX)}"
    if scalar and not _is_number(n if not isinstance(n, np.ndarray) else n.item()):
        raise TypeError(f"`{name}` must be {rule}, got {show(n)} of type {type(n).__name__}")
    arr = np.asarray(n)
    if scalar and arr.dtype == object and isinstance(arr.item(), numbers.Integral):
        raise ValueError(f"`{name}` must be {rule}, got {show(arr.item())}")  # beyond int64, e.g. 10**30
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"`{name}` must be {rule} (or an array of them), got dtype {arr.dtype}")
    arr = np.atleast_1d(arr).astype(np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`{name}` must be a scalar or a non-empty 1-D array, got shape {np.shape(n)}")
    bad = ~np.isfinite(arr) | (arr != np.floor(arr)) | (arr < minimum) | (arr > N_MAX)
    if bad.any():
        raise ValueError(f"`{name}` must be {rule}, got {show(arr[bad][0])}")
    return arr, scalar


def check_alpha_array(alpha, name: str = "alpha") -> tuple[np.ndarray, bool]:
    """Validate one or many scales: finite, >= 0 and <= ALPHA_MAX."""
    scalar = np.ndim(alpha) == 0
    rule = f"a finite number >= 0 and <= {show(ALPHA_MAX)}"
    if scalar and not _is_number(alpha if not isinstance(alpha, np.ndarray) else alpha.item()):
        raise TypeError(f"`{name}` must be {rule}, got {show(alpha)} of type {type(alpha).__name__}")
    arr = np.asarray(alpha)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"`{name}` must be {rule} (or a 1-D array of them), got dtype {arr.dtype}")
    arr = np.ascontiguousarray(np.atleast_1d(arr), dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`{name}` must be a scalar or a non-empty 1-D array, got shape {np.shape(alpha)}")
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > ALPHA_MAX)
    if bad.any():
        raise ValueError(f"`{name}` must be {rule}, got {show(arr[bad][0])}")
    return arr, scalar


def check_choice(value, name: str, choices) -> str:
    """Check that ``value`` is one of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"`{name}` must be one of {sorted(choices)}, got {value!r}")
    return value


def check_bool(value, name: str) -> bool:
    """``True`` or ``False`` (a numpy bool too); anything else, 0 and 1 included, is a TypeError."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)


def check_mc_options(method, trials, rng, *, default_trials: int, mc: str = "mc") -> tuple:
    """The Monte Carlo options ``trials`` and ``rng`` of a function with a ``method``: one rule for all of them.

    With ``method == mc``, ``trials`` (``None``: ``default_trials``) must be an integer ``>= 2``
    and ``rng`` a seed (:func:`softmax_scale._util.rng.check_rng`); returns ``(trials, rng)``.
    With any other (deterministic) method both must be ``None``: a ValueError names the one given.
    """
    from .rng import check_rng

    if method != mc:
        given = [(name, v) for name, v in (("trials", trials), ("rng", rng)) if v is not None]
        if given:
            raise ValueError(f"`trials` and `rng` are Monte Carlo options: pass method={mc!r} with them (method="
                             f"{method!r} is deterministic), got " + ", ".join(f"{k}={show(v)}" for k, v in given))
        return None, None
    trials = check_int(default_trials if trials is None else trials, "trials", minimum=2)
    return trials, check_rng(rng)


def check_real(value, name: str, rule: str = "a finite number") -> float:
    """A finite real number as a Python float: a Python or numpy number (or a 0-d array) alike; a bool is a TypeError."""
    v = value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value
    if not _is_number(v):
        raise TypeError(f"`{name}` must be {rule}, got {show(value)} of type {type(value).__name__}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"`{name}` must be {rule}, got {show(value)}")
    return v


def check_positive_float(value, name: str, *, allow_zero: bool = False) -> float:
    """A finite float > 0 (or >= 0)."""
    if not _is_number(value if not isinstance(value, np.ndarray) else value.item()):
        raise TypeError(f"`{name}` must be a finite number, got {show(value)}")
    value = float(value)
    ok = np.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise ValueError(f"`{name}` must be a finite number {'>=' if allow_zero else '>'} 0, got {show(value)}")
    return value


def restore(values: np.ndarray, scalar: bool):
    """Return a float for scalar input, else the array."""
    return float(values[0]) if scalar else values


def check_float_array(values, name: str, *, finite: bool = True, nonempty: bool = True) -> np.ndarray:
    """A 1-D (or scalar) array of real numbers as float64, rejecting strings, NaN and inf."""
    arr = np.asarray(values)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"`{name}` must be an array of real numbers, got {values!r}")
    arr = np.atleast_1d(arr).astype(np.float64)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D array, got shape {arr.shape}")
    if nonempty and arr.size == 0:
        raise ValueError(f"`{name}` must not be empty")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be finite (no NaN or inf)")
    return arr


def check_choices(values, name: str, choices) -> tuple:
    """A non-empty sequence (not a string) of names, each one of ``choices``."""
    if isinstance(values, str) or not isinstance(values, (list, tuple, np.ndarray)):
        raise TypeError(f"`{name}` must be a list of names from {sorted(choices)}, got {values!r}")
    values = tuple(values)
    if not values:
        raise ValueError(f"`{name}` must name at least one of {sorted(choices)}")
    bad = [v for v in values if not isinstance(v, str) or v not in choices]
    if bad:
        raise ValueError(f"`{name}` must contain only names from {sorted(choices)}, got {bad[0]!r}")
    return values


def check_output_dir(path, name: str = "out"):
    """Create the folder ``path`` if needed and check it can be written, before any work is done.

    Returns it as a :class:`pathlib.Path`; raises ``ValueError`` naming ``name`` when it is a
    file, cannot be created, or is not writable (a bad argument, not a failure halfway).
    """
    import os
    from pathlib import Path

    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"`{name}` must be a folder that can be created, got {os.fspath(path)!r} ({exc.strerror})") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise ValueError(f"`{name}` must be a writable folder, got {os.fspath(path)!r} (permission denied)")
    return p

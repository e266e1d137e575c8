"""The user's own measurement (``softmax-scale measure``) as evidence: the closest there is, read first.

A ``measure`` result file holds, at each length ``n``, every cell (a constant multiplier on the
queries past ``L``, a published shape, the file's own recipe) on the same documents and pass-key
prompts.  Each cell against the model as it runs now (the recipe's cell where it was read, else the
constant 1) is one :class:`~softmax_scale.experiments.Evidence` row per length, paired by document
(loss) and by prompt (keys retrieved, 0 or 1), and goes through the same comparisons and the same
rule as every other result.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._util.files import file_sha256
from .._util.store import read_header
from ..experiments import Evidence, at_test_label

__all__ = ["OWN_EXPERIMENT", "OWN_KIND", "OwnMeasurement", "constant_label", "is_measurement", "own_evidence", "own_result"]

#: The experiment name of the user's own rows in advise's comparisons.
OWN_EXPERIMENT = "measure (your model)"
#: What :attr:`~._evidence.Comparison.kind` says of them.
OWN_KIND = "your own model, measured against its recipe"
_CONSTANT = "constant"


def constant_label(factor: float) -> str:
    """The scale label of a constant multiplier on the queries past ``L``: ``"constant x1.1"``."""
    return f"{_CONSTANT} x{factor:g}"


def _cell_name(scheme: str, factor: float) -> str:
    return constant_label(factor) if scheme == _CONSTANT else scheme


def is_measurement(path, sha: str | None = None) -> bool:
    """Whether ``path`` is a result file of ``measure`` (its header's ``experiment``), of the model of hash ``sha`` if given."""
    from ..experiments.measure import MeasureExperiment

    header = read_header(path)
    return header.get("experiment") == MeasureExperiment.name and (sha is None or header.get("model_sha256") == sha)


def _gguf(model, name: str) -> Path:
    """``model`` as a Path to a GGUF file (its first bytes ``GGUF``); else a ValueError naming ``name``."""
    model = Path(model)
    if model.is_dir():
        raise ValueError(f"`{name}`: {model} is a folder, not a GGUF file")
    if not model.is_file():
        raise ValueError(f"`{name}`: {model} does not exist")
    with open(model, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ValueError(f"`{name}`: {model} is not a GGUF file (it does not start with the bytes GGUF)")
    return model


def own_result(model, folders=None, *, name: str = "model") -> Path:
    """The ``measure`` result file of a GGUF model, found by the model file's SHA-256.

    Parameters
    ----------
    model : str or PathLike
        The GGUF file that was measured.
    folders : sequence of str or PathLike, optional
        Where to look: by default ``measure/`` (where :func:`softmax_scale.measure` writes unless told
        otherwise) under the current directory, then the committed ``figures/``.
    name : str
        The parameter the errors name.

    Returns
    -------
    Path
        The result file of ``measure`` (its header's ``experiment``; other experiments that ran the
        same model are not measurements of it) whose header's ``model_sha256`` is the model's; among several, a full run
        before a ``--quick`` one, then the one with the most rows, then the first by name.

    Raises
    ------
    ValueError
        Naming ``name``: a missing file, a folder, a file that is not GGUF, or no result file of
        that model in ``folders``.
    """
    from ..experiments.base import RESULTS

    model = _gguf(model, name)
    sha = file_sha256(model)
    folders = [Path("measure"), RESULTS] if folders is None else [Path(x) for x in folders]
    hits = sorted({p.resolve() for d in folders if d.is_dir() for p in d.glob("*.csv") if is_measurement(p, sha)})
    if not hits:
        raise ValueError(f"`{name}`: no result of softmax-scale measure for {model.name} (sha256 {sha[:12]}) in "
                         f"{', '.join(str(d) for d in folders)}: run `softmax-scale measure {model}` first")

    def rank(p):
        with open(p, encoding="utf-8") as f:
            rows = sum(1 for line in f if line.strip() and not line.startswith("#")) - 1
        return ("quick" in p.stem, -rows, p.name)

    return min(hits, key=rank)


@dataclass(frozen=True)
class OwnMeasurement:
    """A ``measure`` result file read as evidence (:func:`own_evidence`).

    Attributes
    ----------
    rows : tuple of Evidence
        Each cell against the recipe's cell (or the constant 1 where the recipe was not read), at
        each length past ``L``.
    header : dict
        The file's provenance header.
    head_dim : int or None
        The header's ``head_dim`` (None: not stated).
    train_length : int
        The header's ``train_length``, ``L``.
    unused : tuple
        ``(task, line)`` pairs: what in the file contributes no comparison, and why; ``task`` is the
        :attr:`~softmax_scale.experiments.Evidence.task` it concerns, or ``""`` for the whole file.
    """

    rows: tuple
    header: dict
    head_dim: int | None
    train_length: int
    unused: tuple


#: What each task of a ``measure`` file reads: its value column, the rule on it, the metric, what a
#: row is one of, the Evidence task, and the value in words.
_TASKS = {"loss": ("loss", "a loss in nats must be a finite number >= 0", "loss", "documents", "next token", "loss"),
          "passkey": ("retrieved", "keys retrieved must be 0 or 1", "accuracy", "prompts", "passkey retrieval",
                      "keys retrieved")}


def _lines(path: Path) -> tuple[dict, list]:
    """``({header key: line number}, [(line number, cells)])``: where each header key and data row is in the file.

    The lines read as :func:`~softmax_scale.experiments.Experiment.read` reads them: ``#`` lines are
    the header, blank lines are skipped, the first other line names the columns.
    """
    keys, rows = {}, []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if line.startswith("#"):
                keys[line[1:].partition(":")[0].strip()] = number
            elif line.strip():
                rows.append((number, next(csv.reader([line]), [])))
    return keys, rows[1:]


def _header_int(path: Path, header: dict, where: dict, key: str, required: bool) -> int | None:
    """The header's ``key`` as an integer ``>= 2`` (None where absent and not ``required``); else a ValueError."""
    raw = str(header.get(key, "")).strip()
    if not raw:
        if required:
            raise ValueError(f"`evidence`: {path} has no `{key}` in its header (a `# {key}: ...` line): "
                             "not a result file of softmax-scale measure")
        return None
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < 2:
        raise ValueError(f"`evidence`: {path} line {where[key]}: the header's `{key}` must be an integer >= 2, "
                         f"got {raw!r}")
    return value


def _check_rows(path: Path, r: dict, lines: list) -> None:
    """Refuse a row ``advise`` cannot read as a measurement, naming the file, the line and the column.

    The task is ``loss`` or ``passkey``; the length an integer ``>= 2``; the item and scheme named;
    the factor and the mean factor applied finite and ``> 0``; the task's value in range (a loss
    finite and ``>= 0``, keys retrieved 0 or 1); one row per cell (task, length, item, cell).
    """
    from ..experiments.measure import COLUMNS

    seen: dict = {}
    for i, (number, cells) in enumerate(lines[: len(r["task"])]):
        task = str(r["task"][i])
        fault = None
        if task not in _TASKS:
            fault = "task", f"the task must be {' or '.join(_TASKS)}"
        elif r["length"][i] < 2:
            fault = "length", "the length must be an integer >= 2"
        else:
            named = [c for c in ("item", "scheme") if not str(r[c][i]).strip()]
            bad = [c for c in ("factor", "factor_mean") if not (math.isfinite(r[c][i]) and r[c][i] > 0)]
            column, rule = _TASKS[task][:2]
            v = float(r[column][i])
            if named:
                fault = named[0], f"the {named[0]} must be named"
            elif bad:
                fault = bad[0], f"the {bad[0].replace('_', ' ')} must be a finite number > 0"
            elif not (math.isfinite(v) and (v >= 0 if task == "loss" else v in (0.0, 1.0))):
                fault = column, rule
        if fault is not None:
            column, rule = fault
            raise ValueError(f"`evidence`: {path} line {number}, column `{column}`: {rule}, "
                             f"got {cells[COLUMNS.index(column)]!r}")
        key = (task, int(r["length"][i]), str(r["item"][i]), _cell_name(str(r["scheme"][i]), float(r["factor"][i])))
        if key in seen:
            raise ValueError(f"`evidence`: {path} line {number} repeats the cell of line {seen[key]} (task {key[0]}, "
                             f"length {key[1]}, item {key[2]}, {key[3]}): one row per cell")
        seen[key] = number


def own_evidence(path) -> OwnMeasurement:
    """The Evidence of a ``measure`` result file, its header, and what in it contributes nothing.

    Parameters
    ----------
    path : str or PathLike
        A result file written by :func:`softmax_scale.measure`.

    Returns
    -------
    OwnMeasurement
        Its rows paired by document (loss) and by prompt (keys retrieved); a cell that is the
        reference's own reading (the same mean factor and the same values on every item) is not
        compared with it, and says so in :attr:`OwnMeasurement.unused`, with the rows at ``n <= L``,
        the lengths without a reference cell and the items one cell lacks.

    Raises
    ------
    ValueError
        Naming ``evidence``, and the line and column where a row or header line is at fault: a
        missing file or a folder, one that is not a ``measure`` result file, a header's
        ``train_length`` or ``head_dim`` that is not an integer ``>= 2``, a row out of range or a
        cell given twice (:func:`_check_rows`).
    """
    from ..experiments.measure import RECIPE, MeasureExperiment

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"`evidence`: {path} is a folder, not a result file of softmax-scale measure")
    if not path.is_file():
        raise ValueError(f"`evidence`: {path} does not exist")
    try:
        table = MeasureExperiment(progress=False).read(path)
        where, lines = _lines(path)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"`evidence`: {path} is not a result file of softmax-scale measure ({exc})") from None
    header = dict(table.header)
    L = _header_int(path, header, where, "train_length", required=True)
    head_dim = _header_int(path, header, where, "head_dim", required=False)
    r = table.rows
    _check_rows(path, r, lines)
    model = f"{header.get('model', path.name)} (sha256 {str(header.get('model_sha256', ''))[:12]})"
    rope = str(header.get("rope", "file"))
    out, unused = [], []
    if not len(table):
        unused.append(("", f"{path.name} has no rows: it contributes nothing."))
    for task, (column, _, metric, replicates, label_task, value) in _TASKS.items():
        sel = r["task"] == task
        if not sel.any():
            continue
        items = {it: i for i, it in enumerate(dict.fromkeys(r["item"][sel]))}
        inside = sorted({int(n) for n in r["length"][sel] if n <= L})
        if inside:
            count = int((sel & (r["length"] <= L)).sum())
            unused.append((label_task, f"{count} {task} row{'s' * (count != 1)} at n <= L = {L:,} (n = "
                                       f"{', '.join(f'{n:,}' for n in inside)}) contribute nothing: advise compares "
                                       "past L."))
        for n in sorted({int(n) for n in r["length"][sel] if n > L}):
            at = sel & (r["length"] == n)
            cells: dict = {}
            for scheme, factor, item, v, applied in zip(r["scheme"][at], r["factor"][at], r["item"][at], r[column][at],
                                                        r["factor_mean"][at]):
                cells.setdefault(_cell_name(str(scheme), float(factor)), {})[str(item)] = (float(v), float(applied))
            ref_name = next((k for k in cells if k == RECIPE), constant_label(1.0))
            ref = cells.get(ref_name)
            if ref is None:
                unused.append((label_task, f"the {task} rows at n = {n:,} have no `{RECIPE}` cell and no "
                                           f"`{constant_label(1.0)}` cell to compare with: they contribute nothing."))
                continue
            at_n = [it for it in items if any(it in c for c in cells.values())]
            for name, got in sorted(cells.items()):
                if name == ref_name:
                    continue
                common = [it for it in items if it in got and it in ref]
                if common and all(got[it][0] == ref[it][0] and math.isclose(got[it][1], ref[it][1], rel_tol=1e-9)
                                  for it in common):
                    unused.append((label_task, f"{name} at n = {n:,} is the {ref_name} cell's own reading (the same "
                                               f"mean factor and {value} on every one of its {replicates}): "
                                               "not compared with it."))
                    continue
                if len(common) < len(at_n):
                    lack = [it for it in at_n if it not in common]
                    unused.append((label_task, f"{name} at n = {n:,} is paired with the {ref_name} cell on "
                                               f"{len(common)} of {len(at_n)} {replicates}: no row of "
                                               f"{', '.join(lack)} in one of the two."))
                if not common:
                    continue
                d = np.array([got[it][0] - ref[it][0] for it in common])
                label = at_test_label("standard", name)  # on the model as it runs now (its recipe's cell)
                out.append(Evidence(OWN_EXPERIMENT, model, 0, "your model", rope, label_task, n / L, label,
                                    "standard", metric, float(d.mean()),
                                    float(d.std(ddof=1)) if d.size > 1 else float("nan"),
                                    tuple(items[it] for it in common), head_dim or 0, L, "tokens", replicates,
                                    values=tuple(float(x) for x in d), binary=task == "passkey"))
    return OwnMeasurement(tuple(out), header, head_dim, L, tuple(unused))

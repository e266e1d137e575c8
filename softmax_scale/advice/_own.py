"""The user's own measurement (``softmax-scale measure``) as evidence: the closest there is, read first.

A ``measure`` result file holds, at each length ``n``, every cell (a constant multiplier on the
queries past ``L``, a published shape, the file's own recipe) on the same documents and pass-key
prompts.  Each cell against the model as it runs now (the recipe's cell where it was read, else the
constant 1) is one :class:`~softmax_scale.experiments.Evidence` row per length, paired by document
(loss) and by prompt (keys retrieved, 0 or 1), and goes through the same comparisons and the same
rule as every other result.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .._util.files import file_sha256
from ..experiments import Evidence, at_test_label

__all__ = ["OWN_EXPERIMENT", "OWN_KIND", "constant_label", "own_evidence", "own_result"]

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


def _header_sha(path: Path) -> str | None:
    """The ``model_sha256`` of a result file's header (its leading ``#`` lines), or None."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.startswith("#"):
                    return None
                key, _, value = line[1:].partition(":")
                if key.strip() == "model_sha256":
                    return value.strip()
    except (OSError, UnicodeDecodeError):
        return None
    return None


def own_result(model, folders=None) -> Path:
    """The ``measure`` result file of a GGUF model, found by the model file's SHA-256.

    Parameters
    ----------
    model : str or PathLike
        The GGUF file that was measured.
    folders : sequence of str or PathLike, optional
        Where to look: by default ``measure/`` (where :func:`softmax_scale.measure` writes unless told
        otherwise) under the current directory, then the committed ``figures/``.

    Returns
    -------
    Path
        The result file whose header's ``model_sha256`` is the model's; among several, a full run
        before a ``--quick`` one, then the one with the most rows, then the first by name.

    Raises
    ------
    ValueError
        Naming ``model``: a missing file, or no result file of that model in ``folders``.
    """
    from ..experiments.base import RESULTS

    model = Path(model)
    if not model.is_file():
        raise ValueError(f"`model`: {model} does not exist")
    sha = file_sha256(model)
    folders = [Path("measure"), RESULTS] if folders is None else [Path(x) for x in folders]
    hits = sorted({p.resolve() for d in folders if d.is_dir() for p in d.glob("*.csv") if _header_sha(p) == sha})
    if not hits:
        raise ValueError(f"`model`: no result of softmax-scale measure for {model.name} (sha256 {sha[:12]}) in "
                         f"{', '.join(str(d) for d in folders)}: run `softmax-scale measure {model}` first")

    def rank(p):
        with open(p, encoding="utf-8") as f:
            rows = sum(1 for line in f if line.strip() and not line.startswith("#")) - 1
        return ("quick" in p.stem, -rows, p.name)

    return min(hits, key=rank)


def own_evidence(path) -> tuple:
    """``(rows, header)``: the Evidence of a ``measure`` result file and its provenance header.

    Parameters
    ----------
    path : str or PathLike
        A result file written by :func:`softmax_scale.measure`.

    Returns
    -------
    tuple
        A list of :class:`~softmax_scale.experiments.Evidence` (each cell against the recipe's cell,
        or the constant 1 where the recipe was not read, at each length past ``L``) and the header.

    Raises
    ------
    ValueError
        Naming ``evidence``: a missing file, or one that is not a ``measure`` result file.
    """
    from ..experiments.measure import RECIPE, MeasureExperiment

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"`evidence`: {path} does not exist")
    try:
        table = MeasureExperiment(progress=False).read(path)
        L = int(table.header["train_length"])
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"`evidence`: {path} is not a result file of softmax-scale measure ({exc})") from None
    r = table.rows
    head_dim = int(table.header.get("head_dim", 0) or 0)
    model = f"{table.header.get('model', path.name)} (sha256 {str(table.header.get('model_sha256', ''))[:12]})"
    rope = str(table.header.get("rope", "file"))
    out = []
    for task, metric, column, replicates in (("loss", "loss", "loss", "documents"),
                                               ("passkey", "accuracy", "retrieved", "prompts")):
        sel = r["task"] == task
        if not sel.any():
            continue
        items = {it: i for i, it in enumerate(dict.fromkeys(r["item"][sel]))}
        for n in sorted(set(r["length"][sel].tolist())):
            at = sel & (r["length"] == n)
            cells = {}
            for scheme, factor, item, v in zip(r["scheme"][at], r["factor"][at], r["item"][at], r[column][at]):
                if math.isfinite(float(v)):
                    cells.setdefault(_cell_name(str(scheme), float(factor)), {})[str(item)] = float(v)
            ref_name = next((k for k in cells if k == RECIPE), constant_label(1.0))
            ref = cells.get(ref_name)
            if ref is None or n <= L:
                continue
            for name, got in sorted(cells.items()):
                if name == ref_name or (name == constant_label(1.0) and ref_name == constant_label(1.0)):
                    continue
                common = [it for it in items if it in got and it in ref]
                if not common or all(got[it] == ref[it] for it in common):  # none, or the recipe's own reading
                    continue
                d = np.array([got[it] - ref[it] for it in common])
                label = at_test_label("standard", name)  # on the model as it runs now (its recipe's cell)
                out.append(Evidence(OWN_EXPERIMENT, model, 0, "your model", rope,
                                    "next token" if task == "loss" else "passkey retrieval", n / L, label,
                                    "standard", metric, float(d.mean()),
                                    float(d.std(ddof=1)) if d.size > 1 else float("nan"),
                                    tuple(items[it] for it in common), head_dim, L, "tokens", replicates,
                                    values=tuple(float(x) for x in d), binary=task == "passkey"))
    return out, dict(table.header)

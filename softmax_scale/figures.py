"""The main job: regenerate every figure and the alpha* table."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from .plotting import FigureUnavailable, all_figures
from .report import NOTE_GRID, alpha_table

__all__ = ["atomic_write", "make_figures", "write_table"]


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename onto ``path``: an interrupted run leaves no half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_table(out="figures", *, quick: bool = False):
    """Compute the alpha* table and write ``alpha_table.md`` and ``alpha_table.csv`` to ``out``."""
    if quick:
        table = alpha_table(NOTE_GRID[::10], objectives=True, objective_ns=(40, 640, 10240), trials=1000)
    else:
        table = alpha_table(NOTE_GRID, objectives=True)
    out = Path(out)
    md = table.to_markdown()
    atomic_write(out / "alpha_table.md", lambda p: Path(p).write_text(md))
    atomic_write(out / "alpha_table.csv", lambda p: Path(p).write_text(table.to_csv()))
    return table


def make_figures(out="figures", *, quick: bool = False, only=None, progress: bool = True, dpi: int = 110) -> list:
    """Make every registered figure (or those named in ``only``) and save ``<name>.png`` in ``out``.

    Returns a list of ``(name, path, seconds)``.  Figures that raise
    :class:`~softmax_scale.plotting.FigureUnavailable` (e.g. without the model weights) are left
    out of it, and one line on stderr names them and says how to add them.
    """
    figs = all_figures()
    names = [f[0] for f in figs]
    if only:
        only = [only] if isinstance(only, str) else list(only)
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise ValueError(f"`only` must name registered figures {names}, got {unknown}")
        figs = [f for f in figs if f[0] in only]
    done = []
    skipped: dict = {}  # message -> names
    out = Path(out)
    for name, func, full, quick_kw in tqdm(figs, desc="figures", unit="fig", disable=not progress):
        t0 = time.perf_counter()
        try:
            fig = func(**(quick_kw if quick else full))
        except FigureUnavailable as exc:
            skipped.setdefault(str(exc), []).append(name)
            continue
        path = out / f"{name}.png"
        atomic_write(path, lambda p, fig=fig: fig.savefig(p, dpi=dpi, format="png"))
        done.append((name, path, time.perf_counter() - t0))
    for message, names in skipped.items():
        print(f"skipped {', '.join(names)}: {message}", file=sys.stderr)
    return done

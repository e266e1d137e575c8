"""The main job: regenerate every figure and the alpha* table, computing each thing once.

The typical/geometric objective tables are the costly part; :func:`main_job`
computes them once, for the alpha* table, and hands them to the figure that
plots them (any figure function with a parameter named like a key of
``shared`` receives it).  The real-heads figures are drawn from the ``real_heads``
experiment's result file in the output folder (:func:`softmax_scale.plotting.real.experiment_table`),
as ``softmax-scale run real_heads`` draws them: a rerun on the complete file computes nothing.
"""

from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path

from ._util.files import atomic_write, atomic_write_text
from ._util.progress import progress_bar
from ._util.validation import check_output_dir
from .experiments.alpha_table import NOTE_GRID, QUICK_OBJECTIVE_NS, QUICK_OBJECTIVE_TRIALS, alpha_table
from .plotting import FigureUnavailable, all_figures
from .plotting.real import FIGURES as REAL_HEADS_FIGURES
from .plotting.real import experiment_table

__all__ = ["compute_table", "main_job", "make_figures", "write_table"]


def compute_table(*, quick: bool = False, progress: bool | None = None):
    """The alpha* table of the main job, with its objective tables (the full or the ``quick`` settings; ``progress`` bars)."""
    if quick:
        return alpha_table(NOTE_GRID[::10], objectives=True, objective_ns=QUICK_OBJECTIVE_NS, trials=QUICK_OBJECTIVE_TRIALS,
                           progress=progress)
    return alpha_table(NOTE_GRID, objectives=True, progress=progress)


def write_table(out="figures", *, quick: bool = False, table=None):
    """Write ``alpha_table.md`` and ``alpha_table.csv`` to ``out``; compute the table unless ``table`` is given."""
    if table is None:
        table = compute_table(quick=quick)
    out = Path(out)
    md = table.to_markdown()
    atomic_write_text(out / "alpha_table.md", md)
    atomic_write_text(out / "alpha_table.csv", table.to_csv())
    return table


def make_figures(out="figures", *, quick: bool = False, only=None, progress: bool = True, dpi: int = 110,
                 shared: dict | None = None) -> list:
    """Make every registered figure (or those named in ``only``) and save ``<name>.png`` in ``out``.

    ``shared`` maps parameter names to results already computed (e.g. ``{"tables": ...}``);
    a figure function that has such a parameter receives it instead of computing it.

    The real-heads figures are drawn from the ``real_heads`` experiment's result file in ``out``
    (:func:`softmax_scale.plotting.real.experiment_table`: run or resumed there first).

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
    shared = shared or {}
    done = []
    skipped: dict = {}  # message -> names
    out = check_output_dir(out, "out")
    given: dict = {}  # figure name -> keyword arguments read from a result file
    lead: dict = {}  # figure name -> seconds spent on that result file, counted with the figure
    heads = [f[0] for f in figs if f[0] in {r[0] for r in REAL_HEADS_FIGURES}]
    if heads:
        t0 = time.perf_counter()
        try:
            table = experiment_table(out, quick=quick, progress=progress)
        except FigureUnavailable as exc:
            skipped[str(exc)] = heads
            figs = [f for f in figs if f[0] not in heads]
        else:
            given = {h: {"table": table} for h in heads}
            lead = {heads[0]: time.perf_counter() - t0}
    for name, func, full, quick_kw in progress_bar(figs, desc="figures", unit="fig", disable=not progress):
        t0 = time.perf_counter() - lead.get(name, 0.0)
        params = inspect.signature(func).parameters
        kwargs = {**(quick_kw if quick else full), **{k: v for k, v in shared.items() if k in params}, **given.get(name, {})}
        try:
            fig = func(**kwargs)
        except FigureUnavailable as exc:
            skipped.setdefault(str(exc), []).append(name)
            continue
        path = out / f"{name}.png"
        atomic_write(path, lambda p, fig=fig: fig.savefig(p, dpi=dpi, format="png"))
        done.append((name, path, time.perf_counter() - t0))
    for message, names in skipped.items():
        print(f"skipped {', '.join(names)}: {message}", file=sys.stderr)
    return done


def main_job(out="figures", *, quick: bool = False, progress: bool = True, dpi: int = 110):
    """Every figure and the alpha* table, the objective tables computed once for both.

    Returns ``(done, table, seconds_for_the_table)`` with ``done`` as from :func:`make_figures`.
    """
    check_output_dir(out, "out")  # before the table's half minute, not after it
    t0 = time.perf_counter()
    table = compute_table(quick=quick, progress=progress)
    t_table = time.perf_counter() - t0
    done = make_figures(out, quick=quick, progress=progress, dpi=dpi, shared={"tables": table.objectives})
    write_table(out, table=table)
    return done, table, t_table

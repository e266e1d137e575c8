"""Figures: one function per figure, each returning a :class:`matplotlib.figure.Figure`.

Each submodule defines ``FIGURES``, a list of
``(name, function, full_kwargs, quick_kwargs)``; :func:`all_figures` collects
them for the figure runner (``softmax-scale figures``), which saves
``<name>.png``.  A figure that needs something optional (the real-heads figures need
the MiniLM weights) raises :class:`FigureUnavailable`; the runner skips it with one line.
:func:`save_figures` draws an experiment's figures (its ``figure_names``) beside its result file.
"""

from __future__ import annotations

import importlib
from pathlib import Path

#: Submodules holding figures, in the order the figures are made.
FIGURE_MODULES = ("alpha", "exact", "entropy", "moments", "real", "real_extrapolation", "train", "train_causal", "one_key",
                  "one_key_first", "real_one_key", "engine_cost")


class FigureUnavailable(RuntimeError):
    """A figure cannot be drawn on this installation (e.g. model weights missing); the message says how to add it."""


def all_figures() -> list:
    """Every registered figure as ``(name, function, full_kwargs, quick_kwargs)``."""
    figs = []
    for mod in FIGURE_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{mod}":
                raise
            continue
        figs.extend(module.FIGURES)
    return figs


def _experiment_figures(exp) -> list:
    """``(name, function)`` of each figure of the experiment ``exp``."""
    return exp.figures({f[0]: f[1] for f in all_figures()})


def figure_paths(experiment, csv) -> list:
    """``(name, png path)`` of each of the experiment's figures for the result file ``csv``.

    A figure whose name starts with the experiment's file stem is ``<csv stem><rest of the name>.png``
    (``train_causal_heads`` beside ``train_causal_quick.csv``: ``train_causal_quick_heads.png``);
    any other is ``<csv stem>_<name>.png``.
    """
    from ..experiments import resolve_experiment

    exp = resolve_experiment(experiment)
    csv = Path(csv)
    out = []
    for name, _ in _experiment_figures(exp):
        rest = name[len(exp.file_stem):] if exp.file_stem and name.startswith(exp.file_stem) else f"_{name}"
        out.append((name, csv.with_name(csv.stem + rest + ".png")))
    return out


def save_figures(experiment, table, csv, dpi: int = 110) -> list:
    """Draw each of the experiment's figures from ``table`` and save it beside ``csv``; the paths written."""
    from .._util.files import atomic_write
    from ..experiments import resolve_experiment

    exp = resolve_experiment(experiment)
    funcs = dict(_experiment_figures(exp))
    written = []
    for name, png in figure_paths(exp, csv):
        fig = funcs[name](table=table)
        atomic_write(png, lambda p, fig=fig: fig.savefig(p, dpi=dpi, format="png"))
        written.append(png)
    return written

"""Figures: one function per figure, each returning a :class:`matplotlib.figure.Figure`.

Each submodule defines ``FIGURES``, a list of
``(name, function, full_kwargs, quick_kwargs)``; :func:`all_figures` collects
them for the figure runner (``softmax-scale figures``), which saves
``<name>.png``.  A figure that needs something optional (the real-heads figures need
the MiniLM weights) raises :class:`FigureUnavailable`; the runner skips it with one line.
"""

from __future__ import annotations

import importlib

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

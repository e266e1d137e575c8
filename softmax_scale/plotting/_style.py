"""Shared figure helpers."""

from __future__ import annotations

from matplotlib.figure import Figure


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float = 6.4, height: float = 4.2, **kw):
    """A constrained-layout Figure and its axes (no pyplot state)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
    return fig, axes

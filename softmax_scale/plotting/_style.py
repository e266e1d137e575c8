"""Shared figure helpers.

Every figure is a :class:`SettledFigure`: when it is drawn (saved, or shown in a notebook) each
coordinate and colour value it draws is first rounded to :data:`DRAWN_DIGITS` significant digits
(:func:`round_drawn`).  Two CPUs compute the float64 core's results to within about 1e-12
(AVX2 and AVX-512, different summation orders and vector math); the pixels need about 4 digits.
Drawn unrounded, a last-bit difference can move an antialiased edge by 1/255 and change the PNG;
rounded, both CPUs draw the same numbers, so the same bytes.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import Collection
from matplotlib.figure import Figure
from matplotlib.patches import Polygon, Rectangle

__all__ = ["DRAWN_DIGITS", "SettledFigure", "new_figure", "round_drawn"]

#: Significant digits every figure draws: 1e-6 of an axis is under 1/500 of a pixel on the widest
#: figure (15 inches at 110 dpi), and six orders of magnitude above the CPUs' float64 differences.
DRAWN_DIGITS = 6


def round_drawn(values, scale=None, *, digits: int = DRAWN_DIGITS):
    """``values`` rounded to ``digits`` significant digits, as a figure draws them, the same on every CPU.

    Parameters
    ----------
    values : array_like
        Coordinates or colour values; an array that is not of floats is returned unchanged.
    scale : float, optional
        The magnitude the digits count from (a linear axis: the larger end of its view), so a value
        that is zero up to rounding, a difference of nearly equal terms, is drawn as 0.  Without it
        each value keeps its own significant digits (a logarithmic axis, where a small value is drawn
        as large as a large one).
    digits : int
        Significant digits kept.

    Returns
    -------
    numpy.ndarray
        The rounded values, float64 (non-finite values unchanged), or ``values`` itself when not floats.

    Notes
    -----
    Only correctly rounded operations are used (decimal formatting, ``numpy.round``'s product with a
    power of ten), never a vectorised ``log10`` or power, whose last bit differs between CPUs.
    """
    if np.ma.isMaskedArray(values):
        return np.ma.array(round_drawn(values.data, scale, digits=digits), mask=np.ma.getmask(values))
    a = np.asarray(values)
    if a.dtype.kind != "f":
        return values
    a = a.astype(np.float64)
    if scale is not None:
        decimals = _decimals(scale, digits)
        return a if decimals is None else np.round(a, decimals)
    flat = [float(f"{v:.{digits - 1}e}") for v in a.ravel().tolist()]  # dtoa: correctly rounded
    return np.array(flat, dtype=np.float64).reshape(a.shape)


def _decimals(scale, digits):
    """Decimal places that leave ``digits`` significant digits of ``scale``; None when ``scale`` is 0 or not finite."""
    scale = abs(float(scale))
    if not np.isfinite(scale) or scale == 0.0:
        return None
    return digits - 1 - int(f"{scale:e}".split("e")[1])


def _round_dim(values, ax, axis: str):
    if ax is None:
        return round_drawn(values)
    if (ax.get_xscale() if axis == "x" else ax.get_yscale()) != "linear":
        return round_drawn(values)
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    return round_drawn(values, max(abs(lo), abs(hi)))


def _round_xy(xy, ax):
    if np.ma.isMaskedArray(xy):
        return np.ma.array(_round_xy(xy.data, ax), mask=np.ma.getmask(xy))
    xy = np.asarray(xy)
    if xy.dtype.kind != "f" or xy.ndim != 2 or xy.shape[1] != 2 or xy.shape[0] == 0:
        return xy
    return np.column_stack([_round_dim(xy[:, 0], ax, "x"), _round_dim(xy[:, 1], ax, "y")])


def settle(fig: Figure) -> Figure:
    """Round, in place, what ``fig`` draws in its axes (lines, collections, images, patches, text positions).

    The view's ends are rounded per value, then each coordinate for its axis: to the digits of the view's
    larger end on a linear axis, per value on a logarithmic one; colour values (an image's or a
    collection's array) to the digits of their largest magnitude.  Returns ``fig``.
    """
    for ax in fig.get_axes():
        # the view too: autoscaled from the data, its ends differ between CPUs in the last bit
        for get, set_ in ((ax.get_xlim, ax.set_xlim), (ax.get_ylim, ax.set_ylim)):
            lo, hi = round_drawn(np.array(get(), dtype=np.float64))
            if lo != hi:  # a view narrower than the digits keeps its ends
                set_(lo, hi, auto=None)
        for line in ax.get_lines():
            x, y = line.get_data(orig=True)
            if np.ndim(x) == 1 and np.ndim(y) == 1:
                line.set_data(_round_dim(x, ax, "x"), _round_dim(y, ax, "y"))
        for item in ax.collections:
            _settle_collection(item, ax)
        for image in ax.get_images():
            image.set_data(_round_colours(image.get_array()))
        for patch in ax.patches:
            if isinstance(patch, Rectangle):
                (x0, y0), (x1, y1) = _round_xy(np.array([[patch.get_x(), patch.get_y()],
                                                          [patch.get_x() + patch.get_width(),
                                                           patch.get_y() + patch.get_height()]], dtype=float), ax)
                patch.set_bounds(x0, y0, x1 - x0, y1 - y0)
            elif isinstance(patch, Polygon):
                patch.set_xy(_round_xy(patch.get_xy(), ax))
        for text in ax.texts:  # a label placed at a computed point
            text.set_position(_round_point(text.get_position(), ax))
            if hasattr(text, "xy"):
                text.xy = _round_point(text.xy, ax)
    return fig


def _round_point(point, ax):
    try:
        xy = np.array([point], dtype=np.float64)
    except (TypeError, ValueError):  # not two numbers (a date, a unit's name)
        return point
    return tuple(float(v) for v in _round_xy(xy, ax)[0]) if xy.shape == (1, 2) else point


def _round_colours(values):
    if values is None or np.asarray(values).dtype.kind != "f" or np.size(values) == 0:
        return values
    finite = np.abs(np.asarray(values, dtype=np.float64)[np.isfinite(values)])
    return round_drawn(values, finite.max() if finite.size else None)


def _settle_collection(item: Collection, ax) -> None:
    offsets = item.get_offsets()
    if np.size(offsets):
        item.set_offsets(_round_xy(offsets, ax))
    if item.get_transform().contains_branch(ax.transData):  # paths drawn in data coordinates (fills, contours)
        for path in item.get_paths():
            if not path.readonly:
                path.vertices = _round_xy(path.vertices, ax)
        item.stale = True
    values = item.get_array()
    if values is not None:
        item.set_array(_round_colours(values))


class SettledFigure(Figure):
    """A :class:`~matplotlib.figure.Figure` that draws its data rounded to :data:`DRAWN_DIGITS` digits (:func:`settle`)."""

    def draw(self, renderer):
        settle(self)
        super().draw(renderer)

    def __repr__(self):
        # a notebook shows it as the Figure it is ("<Figure size 640x420 with 1 Axes>")
        return super().__repr__().replace(f"<{type(self).__name__} ", "<Figure ", 1)


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float = 6.4, height: float = 4.2, **kw):
    """A constrained-layout :class:`SettledFigure` and its axes (no pyplot state)."""
    fig = SettledFigure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
    return fig, axes

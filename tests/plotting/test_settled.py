"""Every figure draws its data to DRAWN_DIGITS significant digits, so last-bit differences between CPUs draw the same bytes."""

import io
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
import pytest

from softmax_scale.plotting._style import DRAWN_DIGITS, SettledFigure, new_figure, round_drawn


def _reference(x, digits=DRAWN_DIGITS):
    """``x`` to ``digits`` significant digits by exact decimal arithmetic."""
    d = Decimal(float(x))
    return float(d.quantize(Decimal(1).scaleb(d.adjusted() - digits + 1), rounding=ROUND_HALF_EVEN))


def test_each_value_keeps_its_significant_digits_as_exact_decimal_rounding_does():
    x = np.random.default_rng(0).lognormal(0.0, 20.0, 2000) * np.where(np.arange(2000) % 2, -1.0, 1.0)
    assert np.array_equal(round_drawn(x), [_reference(v) for v in x])


def test_with_a_scale_the_digits_count_from_it_and_what_is_zero_up_to_rounding_is_0():
    x = np.array([4.71705869123, -0.3444618912345, 2.1e-17, -4.2e-17, 1.23456789e-3])
    got = round_drawn(x, 4.7)
    assert np.all(np.abs(got - x) <= 0.5e-5 * (1 + 1e-9))
    assert np.allclose(got * 1e5, np.round(got * 1e5), rtol=0, atol=1e-6)  # multiples of 1e-5
    assert got[2] == 0.0 and got[3] == 0.0


def test_what_is_not_a_float_array_is_left_alone():
    ints = np.arange(5)
    assert round_drawn(ints) is ints
    assert np.array_equal(round_drawn(np.array([np.nan, np.inf, 1.0 / 3.0])), [np.nan, np.inf, 0.333333], equal_nan=True)


def _draw(y, bump):
    """A figure of every kind of artist the figures use, its data moved by ``bump`` units in the last place."""
    def b(v):
        v = np.asarray(v, dtype=np.float64)
        return v if bump == 0 else np.nextafter(v, np.inf * np.sign(bump)) if abs(bump) == 1 else v * (1 + bump * 2.0**-52)

    fig, (a1, a2, a3) = new_figure(3, width=12, height=3.5)
    x = np.linspace(1.0, 64.0, y.size)
    a1.plot(b(x), b(y), "o-")
    a1.fill_between(b(x), b(y) - 0.1, b(y) + 0.1, alpha=0.3)
    a1.errorbar(b(x), b(y), yerr=b(np.full(y.size, 0.05)))
    a1.annotate("a point", (b(x[3]), b(y[3])))
    a1.bar(b(x[:5]), b(y[:5]), width=1.0)
    a2.scatter(b(x), b(np.exp(y)), c=b(y))
    a2.set_yscale("log")
    a3.pcolormesh(b(np.outer(y, y)))
    a3.contour(b(np.outer(y, y)), levels=5)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60)
    return fig, buf.getvalue()


@pytest.mark.parametrize("bump", [1, 3, -5])
def test_data_differing_in_the_last_bits_draw_the_same_numbers_and_bytes(bump):
    y = np.sin(np.linspace(0.1, 3.0, 40)) * 2.3 + 0.01 * np.arange(40) / 7.0
    f0, png0 = _draw(y, 0)
    f1, png1 = _draw(y, bump)
    for ax0, ax1 in zip(f0.axes, f1.axes):
        assert ax0.get_xlim() == ax1.get_xlim() and ax0.get_ylim() == ax1.get_ylim()
        for l0, l1 in zip(ax0.get_lines(), ax1.get_lines()):
            assert np.array_equal(l0.get_xydata(), l1.get_xydata())
        for c0, c1 in zip(ax0.collections, ax1.collections):
            assert np.array_equal(c0.get_offsets(), c1.get_offsets())
            assert all(np.array_equal(p.vertices, q.vertices) for p, q in zip(c0.get_paths(), c1.get_paths()))
    assert png0 == png1


def test_the_figure_helper_gives_a_settled_figure():
    fig, _ = new_figure()
    assert isinstance(fig, SettledFigure)


def test_a_view_narrower_than_the_digits_keeps_its_ends():
    fig, ax = new_figure()
    ax.plot([0.0, 1.0], [1.0, 1.0 + 1e-9])
    before = ax.get_ylim()
    fig.savefig(io.BytesIO(), format="png", dpi=30)  # no warning about identical limits (warnings are errors)
    assert ax.get_ylim() == before


def test_a_notebook_shows_it_as_a_figure():
    fig, _ = new_figure(width=6.4, height=4.2)
    assert repr(fig) == "<Figure size 640x420 with 1 Axes>"

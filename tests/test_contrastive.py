"""``contrastive_temperature`` and ``softmax-scale temperature``: n from the batch, tau* per d, mean-field against exact.

References: the cosine density ``∝ (1 - s^2)^((d-3)/2)`` integrated by ``scipy.integrate.quad`` gives
``M(a)`` and ``M'(a)``; the mean-field optimum is the ``brentq`` root of
``d/da [a (1 - M(2a)/(n M(a)^2))]``; the exact ``E[sum p^2]`` is checked against a numpy Monte Carlo
(cosines drawn as ``2 Beta((d-1)/2, (d-1)/2) - 1``, max-shifted softmax).
"""

import json
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

import softmax_scale as ss
from softmax_scale.cli import main


def _log_integral(a, d, power):
    """``log ∫ s^power exp(a s) (1 - s^2)^((d-3)/2) ds`` over (-1, 1) (power 0; power 1 returns the value), max-shifted."""
    k = (d - 3) / 2
    top = (math.sqrt(k * k + a * a) - k) / a if a > 0 else 0.0  # where the exponent peaks
    peak = a * top + k * math.log1p(-top * top)
    width = math.sqrt((1 - top * top) ** 2 / (2 * k * (1 + top * top)))
    lo, hi = max(-1.0, top - 40 * width), min(1.0, top + 40 * width)

    def f(s):
        return s**power * math.exp(a * s + k * math.log1p(-s * s) - peak)

    value = sum(quad(f, x0, x1, epsabs=0, epsrel=1e-13, limit=200)[0] for x0, x1 in ((lo, top), (top, hi)))
    return peak, value


def _moments(a, d):
    """``log M(a)`` and ``M'(a) / M(a)`` for cosine(d) scores, by quadrature over the normalised density."""
    p0, z = _log_integral(0.0, d, 0)
    pa, m = _log_integral(a, d, 0)
    _, m1 = _log_integral(a, d, 1)
    return pa - p0 + math.log(m / z), m1 / m


def _log_ratio(a, n, d):
    """``log(M(2a) / (n M(a)^2))``: the mean-field ``log sum p^2``."""
    return _moments(2 * a, d)[0] - 2 * _moments(a, d)[0] - math.log(n)


def _mean_field_sum_p2(a, n, d):
    return math.exp(_log_ratio(a, n, d))


def _mean_field_optimum(n, d):
    def slope(a):
        r = math.exp(_log_ratio(a, n, d))
        return 1.0 - r - a * r * (2.0 * _moments(2 * a, d)[1] - 2.0 * _moments(a, d)[1])

    return brentq(slope, 1.0, 3.0 * math.sqrt(d * math.log(n)), xtol=1e-12, rtol=1e-13)


@pytest.fixture(scope="module")
def clip():
    return ss.contrastive_temperature(4096, d=64)


@pytest.mark.parametrize("loss, n", [("infonce", 4096), ("nt_xent", 8191)])
def test_n_follows_from_the_batch_and_the_loss(loss, n):
    t = ss.contrastive_temperature(4096, d=128, loss=loss)
    assert t.n == n
    i = t.at(128)
    assert t.alpha[i] == pytest.approx(_mean_field_optimum(n, 128), rel=1e-8)
    assert t.tau[i] == pytest.approx(1.0 / t.alpha[i], rel=1e-15)


def test_every_dimension_is_its_own_root_and_d_matters(clip):
    assert clip.d == 64
    assert 64 in clip.ds.tolist()
    assert set(ss.contrastive.DIMENSIONS) <= set(clip.ds.tolist())
    for d, a in zip(clip.ds, clip.alpha):
        assert a == pytest.approx(_mean_field_optimum(4096, int(d)), rel=1e-8)
    assert np.all(np.diff(clip.tau) < 0)  # colder with more dimensions


def test_mean_field_sum_p2_matches_its_quadrature(clip):
    i = clip.at(64)
    assert clip.sum_p2_mean_field[i] == pytest.approx(_mean_field_sum_p2(clip.alpha[i], 4096, 64), rel=1e-8)


def test_exact_sum_p2_at_the_optimum_agrees_with_monte_carlo(clip):
    i = clip.at(64)
    a, n, d, trials = clip.alpha[i], 4096, 64, 1500
    rng = np.random.default_rng(7)
    s = 2.0 * rng.beta((d - 1) / 2, (d - 1) / 2, size=(trials, n)) - 1.0
    x = a * s
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    sp2 = (p * p).sum(axis=1)
    se = sp2.std(ddof=1) / math.sqrt(trials)
    assert abs(clip.sum_p2_exact[i] - sp2.mean()) < 4 * se
    # the negative control: the mean-field value is far outside that band
    assert abs(clip.sum_p2_mean_field[i] - sp2.mean()) > 10 * se
    assert clip.mean_field_ratio[i] == pytest.approx(clip.sum_p2_mean_field[i] / clip.sum_p2_exact[i], rel=1e-15)


def test_text_says_n_d_and_the_ratio(clip):
    text = clip.text()
    assert "n = B = 4096" in text
    assert "n = 2B - 1 = 8191" in text
    assert "depends on d" in text
    assert f"{clip.mean_field_ratio[clip.at(64)]:.3g}x the exact" in text


def test_without_d_every_default_dimension_is_an_answer():
    t = ss.contrastive_temperature(256)
    assert t.d is None
    assert t.ds.tolist() == list(ss.contrastive.DIMENSIONS)
    assert "pass --d D" in t.text()


def test_cli_json_matches_the_library(capsys, clip):
    assert main(["temperature", "--batch", "4096", "--d", "64", "--json"]) == 0
    out, err = capsys.readouterr()
    assert not err
    obj = json.loads(out)
    assert obj["n"] == 4096
    np.testing.assert_array_equal(obj["tau"], clip.tau)
    np.testing.assert_array_equal(obj["mean_field_ratio"], clip.mean_field_ratio)
    assert obj["n_rule"].startswith("n = B:")
    assert main(["temperature", "--batch", "4096", "--d", "64"]) == 0
    assert f"{clip.tau[clip.at(64)]:.4g}" in capsys.readouterr()[0]


@pytest.mark.parametrize("argv, name", [
    (["temperature", "--batch", "1"], "`batch`"),
    (["temperature", "--batch", "2.5"], "`batch`"),
    (["temperature", "--batch", "4096", "--d", "1"], "`d`"),
    (["temperature", "--batch", "4096", "--loss", "clip"], "`loss`"),
])
def test_cli_bad_input_exits_2_with_one_line(capsys, argv, name):
    assert main(argv) == 2
    err = capsys.readouterr()[1]
    assert name in err
    assert len(err.strip().splitlines()) == 1

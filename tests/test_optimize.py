"""Mean-field objective and optimal alpha: closed forms, the note's laws, bad input."""

import warnings

import numpy as np
import pytest
from scipy import optimize, special

import softmax_scale as ss
from softmax_scale.distributions import Cosine

NOTE_GRID = np.arange(40, 20001, 40)


def lambert_alpha(n):
    """Normal scores: d/da [a (1 - e^{a^2}/n)] = 0  <=>  (1 + 2a^2) e^{a^2} = n  <=>  a^2 = W(n sqrt(e)/2) - 1/2."""
    return np.sqrt(special.lambertw(np.asarray(n, dtype=float) * np.sqrt(np.e) / 2).real - 0.5)


def test_mean_field_objective_closed_form_for_normal():
    a = np.array([0.0, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(ss.gradient_objective(a, 512), a * (1 - np.exp(a * a) / 512), rtol=1e-14)


def test_mean_field_objective_cosine_uses_bessel_form():
    a, n, d = 20.0, 1000, 128
    nu = d / 2 - 1

    def log_m(x):
        return special.gammaln(d / 2) + nu * np.log(2 / x) + np.log(special.iv(nu, x))

    ref = a * (1 - np.exp(log_m(2 * a) - 2 * log_m(a)) / n)
    assert ss.gradient_objective(a, n, "cosine", d=d) == pytest.approx(ref, rel=1e-12)


def test_optimal_alpha_normal_matches_lambert_w():
    np.testing.assert_allclose(ss.optimal_alpha(NOTE_GRID), lambert_alpha(NOTE_GRID), rtol=1e-11)
    assert ss.optimal_alpha(2) == pytest.approx(lambert_alpha(2), rel=1e-11)
    assert ss.optimal_alpha(1e12) == pytest.approx(lambert_alpha(1e12), rel=1e-11)


def test_scalar_in_float_out_array_in_array_out():
    assert isinstance(ss.optimal_alpha(512), float)
    out = ss.optimal_alpha([64, 512, 4096])
    assert isinstance(out, np.ndarray)
    assert out.shape == (3,)
    assert out[1] == ss.optimal_alpha(512)


@pytest.mark.parametrize("n", [3, 100, 20000])
def test_cosine_optimum_against_scipy_bounded_scalar_search(n):
    dist = Cosine(128)
    a_star = ss.optimal_alpha(n, dist)
    # brute grid, then scipy's bounded Brent search on the two cells around the best grid point
    grid = np.linspace(1e-3, 200, 20001)
    i = np.argmax(ss.gradient_objective(grid, n, dist))
    ref = optimize.minimize_scalar(
        lambda a: -ss.gradient_objective(a, n, dist),
        bounds=(grid[i - 1], grid[i + 1]),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert a_star == pytest.approx(ref.x, rel=1e-6)


def test_optimum_is_a_maximum_not_an_edge():
    res = ss.optimize_alpha(NOTE_GRID, "cosine", d=128)
    assert res.success.all()
    assert res.bounded.all()
    for eps in (1e-4, -1e-4):
        assert np.all(ss.gradient_objective(res.alpha * (1 + eps), NOTE_GRID, "cosine", d=128) < res.value)


def test_note_law_normal_c_084():
    fit = ss.fit_alpha_law(NOTE_GRID, ss.optimal_alpha(NOTE_GRID), "sqrt_log")
    assert round(fit.params["c"], 2) == 0.84


def test_cosine_d128_log_law_c_35_and_sqrt_log_fits_better():
    alphas = ss.optimal_alpha(NOTE_GRID, "cosine", d=128)
    laws = ss.compare_alpha_laws(NOTE_GRID, alphas)
    assert round(laws["log"].params["c"], 1) == 3.5
    # the note writes 3.5 sqrt(log n); the sqrt_log coefficient is ~10.5, and fits the grid better
    assert laws["sqrt_log"].params["c"] > 10
    assert laws["sqrt_log"].rmse < laws["log"].rmse


def test_result_fields_are_fixed():
    r = ss.optimize_alpha(512)
    fields = ("alpha", "value", "n", "dist", "objective", "success", "bounded", "message", "nfev", "alpha_se")
    assert all(hasattr(r, f) for f in fields)
    assert r.value == pytest.approx(ss.gradient_objective(r.alpha, 512), rel=1e-14)
    assert r.bounded
    assert r.success
    assert r.nfev > 0


def test_empirical_sample_with_unbounded_mean_field_objective():
    # four points, two at the maximum: M(2a)/M(a)^2 -> 4/2 = 2 < n, so a(1 - R/n) grows without bound
    r = ss.optimize_alpha(512, np.array([0.0, 1.0, 2.0, 2.0]))
    assert not r.bounded
    assert r.alpha == np.inf
    # a large normal sample reproduces the normal optimum closely
    x = np.random.default_rng(0).standard_normal(200_000)
    assert ss.optimal_alpha(64, x) == pytest.approx(lambert_alpha(64), rel=0.02)


def test_no_overflow_or_warning_up_to_1e12_and_alpha_1e6():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ns = np.logspace(np.log10(2), 12, 50).round()
        for dist, d in [("normal", None), ("cosine", 128), ("cosine", 4)]:
            res = ss.optimize_alpha(ns, dist, d=d)
            assert np.all(np.isfinite(res.alpha))
            assert res.success.all()
            g = ss.gradient_objective(np.array([0.0, 1.0, 1e3, 1e6]), 1e12, dist, d=d)
            assert np.all(np.isfinite(g))
            assert np.all(g >= 0)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ss.optimal_alpha(1), "`n`"),
        (lambda: ss.optimal_alpha(2.5), "`n`"),
        (lambda: ss.optimal_alpha(np.nan), "`n`"),
        (lambda: ss.optimal_alpha([10, 1]), "`n`"),
        (lambda: ss.optimal_alpha([]), "`n`"),
        (lambda: ss.optimal_alpha(10, "laplace"), "`dist`"),
        (lambda: ss.optimal_alpha(10, "cosine"), "`d`"),
        (lambda: ss.optimal_alpha(10, "cosine", d=1), "`d`"),
        (lambda: ss.optimal_alpha(10, objective="best"), "`objective`"),
        (lambda: ss.gradient_objective(-1.0, 10), "`alpha`"),
        (lambda: ss.gradient_objective(np.nan, 10), "`alpha`"),
        (lambda: ss.gradient_objective([1.0, 2.0], [10, 20, 30]), "broadcast"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("d", [10**4, 10**6, 10**9, 10**12, 10**15])
def test_cosine_optimum_tends_to_the_normal_value(d):
    # sqrt(d) s tends to N(0, 1): alpha*/sqrt(d) meets the normal optimum (Lambert W) with a relative
    # gap of order log(n)/d, up to the largest accepted d = 1e15
    ns = np.array([2.0, 512.0, 1e6, 1e9, 1e12, 1e15])
    ratio = ss.optimal_alpha(ns, dist="cosine", d=d) / np.sqrt(d) / lambert_alpha(ns)
    assert np.all(np.abs(ratio - 1.0) <= 2.0 * np.log(ns) / d + 1e-13)


def test_cosine_optimum_at_d_2_and_3_has_closed_forms():
    # d = 3: M(a) = sinh(a)/a, R(a) = a coth(a), so G = a (1 - a/n) up to e^-2a: alpha* = n/2
    n3 = np.array([100.0, 1e6, 1e15])
    np.testing.assert_allclose(ss.optimal_alpha(n3, dist="cosine", d=3), n3 / 2, rtol=1e-10)
    # d = 2: M(a) = I_0(a), R(a) = sqrt(pi a) (1 + O(1/a)), so alpha* = 4 n^2 / (9 pi) (1 + O(1/alpha*))
    n2 = np.array([1e4, 30964.0, 1e6, 1e15])
    np.testing.assert_allclose(ss.optimal_alpha(n2, dist="cosine", d=2), 4 * n2**2 / (9 * np.pi), rtol=1e-6)


def test_empirical_optimum_is_scale_free():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])

    def neg_g(a):  # the mean-field objective of the sample at n = 3, by its definition
        lme = special.logsumexp(np.outer([a, 2 * a], x), axis=1) - np.log(x.size)
        return -a * (1 - np.exp(lme[1] - 2 * lme[0]) / 3)

    ref = optimize.minimize_scalar(neg_g, bounds=(1e-6, 10.0), method="bounded", options={"xatol": 1e-12}).x
    assert ss.optimal_alpha(3, dist=x) == pytest.approx(ref, rel=1e-6)  # a flat maximum: the bounded search resolves ~1e-8
    for scale, shift in [(1e300, 0.0), (1e-300, 0.0), (1e-5, 7.0), (1e300, 1e300)]:
        got = ss.optimal_alpha([3, 4], dist=x * scale + shift)
        # rtol: a shift of 7 on a spread of 4e-5 leaves the scores 1e-11 of relative rounding
        np.testing.assert_allclose(got * scale, ss.optimal_alpha([3, 4], dist=x), rtol=1e-10)

"""The exact (quadrature) evaluator against Monte Carlo, scipy quadrature, limits and invariants."""

import numpy as np
import pytest
from scipy import integrate, special

import softmax_scale as ss
from softmax_scale.exact import exact_stats, exact_sum_p_s

STATS = ("sum_p2", "entropy", "grad", "log_z")

# (dist, d, alpha, n): normal and cosine (d = 128 and d = 16), n from 10 to 1e4, from the
# nearly uniform softmax to the frozen one (cosine scales are on the cosine, sd 1/sqrt(d)).
MC_POINTS = [
    ("normal", None, 0.5, 10),
    ("normal", None, 2.0, 100),
    ("normal", None, 1.0, 1000),
    ("normal", None, 5.0, 1000),
    ("normal", None, 2.5, 10_000),
    ("normal", None, 30.0, 10_000),
    ("cosine", 128, 8.0, 10),
    ("cosine", 128, 20.0, 100),
    ("cosine", 128, 30.0, 1000),
    ("cosine", 128, 120.0, 1000),
    ("cosine", 16, 2.0, 10),
    ("cosine", 16, 8.0, 100),
    ("cosine", 16, 30.0, 1000),
    # small d: the density (1-s^2)^((d-3)/2) is singular (d = 2) or not smooth (d = 4) at s = ±1
    ("cosine", 2, 20.0, 1000),
    ("cosine", 4, 2.0, 10),
]


@pytest.mark.parametrize(("dist", "d", "alpha", "n"), MC_POINTS)
def test_exact_agrees_with_monte_carlo(dist, d, alpha, n):
    ex = exact_stats(alpha, n, dist, d=d)
    mc = ss.softmax_stats(alpha, n, dist, d=d, method="mc", trials=10_000, rng=12345)
    for name in STATS:
        z = (getattr(ex, name) - getattr(mc, name)) / getattr(mc, name + "_se")
        assert abs(z) < 4.0, (name, getattr(ex, name), getattr(mc, name), z)


def test_empirical_sample_agrees_with_monte_carlo_resampling():
    sample = np.random.default_rng(5).gamma(2.0, size=300) - 2.0  # skewed, with ties when resampled
    for alpha, n in [(1.0, 50), (4.0, 500)]:
        ex = exact_stats(alpha, n, sample)
        mc = ss.softmax_stats(alpha, n, sample, method="mc", trials=10_000, rng=7)
        for name in STATS:
            z = (getattr(ex, name) - getattr(mc, name)) / getattr(mc, name + "_se")
            assert abs(z) < 4.0, (name, z)


@pytest.mark.parametrize(("dist", "d", "unit"), [("normal", None, 1.0), ("cosine", 128, np.sqrt(128)), ("cosine", 16, 4.0)])
def test_doubling_the_resolution_keeps_six_significant_digits(dist, d, unit):
    alphas = unit * np.array([0.01, 0.3, 1.0, 2.0, 5.0, 30.0, 1000.0])
    for n in [2, 10, 1000, 10**6, 10**12]:
        a = exact_stats(alphas, n, dist, d=d, error_estimate=False)
        b = exact_stats(alphas, n, dist, d=d, refine=2.0, error_estimate=False)
        for name in STATS:
            x, y = getattr(a, name), getattr(b, name)
            assert np.all(np.abs(x - y) <= 5e-7 * np.abs(y) + 1e-13), (name, n, x, y)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_small_dimension_cosine_is_resolved(d):
    # the density is singular (d = 2), flat (d = 3) or not smooth (d = 5) at s = ±1: five digits
    alphas = np.array([0.3, 1.0, 5.0, 30.0])
    for n in [10, 1000, 10**12]:
        a = exact_stats(alphas, n, "cosine", d=d, error_estimate=False)
        b = exact_stats(alphas, n, "cosine", d=d, refine=2.0, error_estimate=False)
        for name in STATS:
            x, y = getattr(a, name), getattr(b, name)
            assert np.all(np.abs(x - y) <= 1e-5 * np.abs(y) + 1e-13), (name, n, x, y)
    with pytest.raises(ValueError, match="`alpha` = 1e\\+06 is too large"):
        exact_stats(1e6, 10, "cosine", d=d)


def test_quad_error_estimate_is_small_and_bounds_the_refinement_change():
    r = exact_stats(np.array([0.5, 2.0, 8.0]), 4096, error_estimate=True)
    fine = exact_stats(np.array([0.5, 2.0, 8.0]), 4096, refine=4.0)
    assert 0 <= r.quad_error < 1e-12
    for name in STATS:
        assert np.all(np.abs(getattr(r, name) - getattr(fine, name)) <= max(r.quad_error, 1e-12))


_SAMPLE = np.random.default_rng(0).standard_normal(300)


@pytest.mark.parametrize(("dist", "d", "alpha", "n"), [("normal", None, 2.0, 100), ("normal", None, 8.0, 4096),
                                                       (_SAMPLE, None, 2.0, 100), ("cosine", 128, 25.0, 512)],
                         ids=["normal-2", "normal-8", "sample", "cosine128"])
def test_quad_error_is_the_error_of_the_grid_it_is_reported_for(dist, d, alpha, n):
    """On grids coarse enough to be wrong by 1e-9 to 1e-2, the estimate is within a factor 3 of the true error."""
    ref = exact_stats(alpha, n, dist, d=d, refine=4.0)
    for refine in (0.2, 0.3, 0.4, 0.5):
        r = exact_stats(alpha, n, dist, d=d, refine=refine, error_estimate=True)
        true = max(abs(getattr(r, s) - getattr(ref, s)) for s in STATS)
        assert true > 5e-11
        assert true / 3 <= r.quad_error <= 3 * true, (refine, true, r.quad_error)
    # at the default step: the error of 1e-14 is reported as such (a half-step grid said 9e-11 and 1e-7)
    assert exact_stats(alpha, n, dist, d=d, error_estimate=True).quad_error < 1e-13


def test_the_default_evaluation_costs_one_grid(monkeypatch):
    from softmax_scale.exact import evaluate

    calls = []
    one = evaluate._one

    def counted(*args, **kwargs):
        calls.append(args)
        return one(*args, **kwargs)

    monkeypatch.setattr(evaluate, "_one", counted)
    r = exact_stats(np.array([1.0, 2.0]), 100)
    assert len(calls) == 2  # one grid per scale
    assert 0 <= r.quad_error < 1e-13  # the residual of E[sum p] = 1, free
    exact_stats(np.array([1.0, 2.0]), 100, error_estimate=True)
    assert len(calls) == 6
    assert all(c[3] == 1.0 for c in calls)  # the estimate's grid has the same step


@pytest.mark.parametrize("n", [2, 3, 17, 1000, 10**6, 10**12])
@pytest.mark.parametrize(("dist", "d"), [("normal", None), ("cosine", 128), ("cosine", 16)])
def test_invariants(dist, d, n):
    alphas = np.concatenate([[0.0], np.geomspace(1e-3, 1e6, 19)])
    r = exact_stats(alphas, n, dist, d=d, error_estimate=False)
    tol = 1e-12
    assert np.all(np.isfinite([r.sum_p2, r.entropy, r.grad, r.log_z]))
    assert np.all(r.sum_p2 >= 1.0 / n - tol)
    assert np.all(r.sum_p2 <= 1.0 + tol)
    assert np.all(r.entropy >= -tol)
    assert np.all(r.entropy <= np.log(n) + tol)
    assert np.allclose(r.grad, alphas * (1.0 - r.sum_p2), rtol=1e-9, atol=1e-12)
    # E[sum p^2] rises and E[H] falls with alpha (more peaked softmax)
    assert np.all(np.diff(r.sum_p2) >= -1e-12)
    assert np.all(np.diff(r.entropy) <= 1e-12)
    # Jensen: E[log Z] <= log E[Z] = log n + log M(alpha)
    assert np.all(r.log_z <= np.log(n) + ss.get_distribution(dist, d).log_mgf(alphas) + 1e-9)


def test_alpha_zero_is_exactly_uniform():
    r = exact_stats(0.0, 1000)
    assert r.sum_p2 == 1.0 / 1000
    assert r.entropy == np.log(1000)
    assert r.grad == 0.0
    assert r.log_z == np.log(1000)


def test_entropy_identity_between_independent_formulas():
    # E[H] is computed from the kernel y e^-y (log y + gamma); E[log Z] and E[sum p s] from other integrals.
    for dist, d, alpha in [("normal", None, 0.7), ("normal", None, 3.0), ("cosine", 128, 25.0)]:
        for n in [5, 300, 10**7]:
            r = exact_stats(alpha, n, dist, d=d)
            sps = exact_sum_p_s(alpha, n, dist, d=d)
            assert r.entropy == pytest.approx(r.log_z - alpha * sps, rel=1e-8, abs=1e-9)


@pytest.mark.parametrize("alpha", [0.2, 1.0, 3.0, 10.0])
def test_two_normal_scores_against_one_dimensional_quadrature(alpha):
    # D = s1 - s2 ~ N(0, 2); sum p^2 = (1 + e^{2aD}) / (1 + e^{aD})^2 = 1 - 2 sigmoid(aD) sigmoid(-aD)
    def integrand(x):
        return (1.0 - 2.0 * special.expit(alpha * x) * special.expit(-alpha * x)) * np.exp(-x * x / 4) / np.sqrt(4 * np.pi)

    ref, _ = integrate.quad(integrand, -np.inf, np.inf, epsabs=0, epsrel=1e-13, limit=200)
    assert exact_stats(alpha, 2).sum_p2 == pytest.approx(ref, rel=1e-9)


def test_large_n_matches_the_law_of_large_numbers():
    # far below the freezing scale sqrt(2 log n), Z/n -> M(alpha): E[sum p^2] -> e^{a^2}/n, E[H] -> log n - a^2/2
    n = 10**12
    for a in [0.5, 1.0, 2.0]:
        r = exact_stats(a, n)
        assert r.sum_p2 * n == pytest.approx(np.exp(a * a), rel=1e-3)
        assert r.entropy == pytest.approx(np.log(n) - 0.5 * a * a, abs=1e-3)
        assert r.log_z == pytest.approx(np.log(n) + 0.5 * a * a, abs=1e-3)


def test_huge_n_and_huge_scales_are_finite():
    for dist, d in [("normal", None), ("cosine", 128)]:
        r = exact_stats(np.array([1e-9, 1.0, 1e3, 1e5, 1e6]), 10**12, dist, d=d)
        assert np.all(np.isfinite(r.sum_p2))
        assert np.all(np.isfinite(r.log_z))
        assert np.all(np.isfinite(r.grad))
        assert r.sum_p2[0] * 1e12 == pytest.approx(1.0, rel=1e-6)
        # nearly one-hot: 1 - E[sum p^2] ~ sup E[G] / alpha, so E[G] has converged between 1e5 and 1e6
        assert r.sum_p2[-1] > 0.999
        assert r.grad[-1] == pytest.approx(r.grad[-2], rel=1e-4)


def test_cost_is_fine_for_n_from_2_to_1e15():
    r = exact_stats(2.0, 10**15)
    assert np.isfinite(r.sum_p2)
    assert r.quad_error < 1e-6


def test_softmax_stats_dispatches_to_exact():
    a = ss.softmax_stats(np.array([1.0, 2.0]), 64, method="exact")
    b = exact_stats(np.array([1.0, 2.0]), 64)
    assert a.method == "exact"
    assert a.trials == 0
    assert np.array_equal(a.sum_p2, b.sum_p2)
    assert np.all(a.grad_se == 0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"alpha": 1.0, "n": 1}, ValueError, "`n` must be an integer >= 2"),
        ({"alpha": -1.0, "n": 10}, ValueError, "`alpha` must be"),
        ({"alpha": np.nan, "n": 10}, ValueError, "`alpha` must be"),
        ({"alpha": 1.0, "n": 10, "refine": 0.0}, ValueError, "`refine` must be"),
        ({"alpha": 1.0, "n": 10, "dist": "cosine"}, ValueError, "`d` is required"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        exact_stats(**kwargs)


@pytest.mark.parametrize("alpha", [1e-300, 1e-20, 1e-7])
@pytest.mark.parametrize("n", [2, 1000, 10**12])
def test_tiny_scales_follow_the_second_order_expansion(alpha, n):
    # p_i = (1 + alpha (s_i - mean) + O(alpha^2)) / n: E[sum p^2] = 1/n + alpha^2 var (n-1)/n^2, E[H] = log n - ...
    import softmax_scale as ss

    r = ss.softmax_stats(alpha, n, method="exact")
    v = (n - 1) / n
    assert r.sum_p2 == pytest.approx(1 / n + alpha * alpha * v / n, rel=1e-14)
    assert r.entropy == pytest.approx(np.log(n) - 0.5 * alpha * alpha * v, rel=1e-14)
    assert 0 <= r.grad <= alpha


@pytest.mark.parametrize("d", [2, 3, 4, 5])
@pytest.mark.parametrize("alpha", [1e-3, 0.01])
@pytest.mark.parametrize("n", [2, 100, 10**6])
def test_small_dimension_cosine_follows_the_second_order_expansion(d, alpha, n):
    # symmetric scores: n E[sum p^2] - 1 = a^2 (n-1)/(n d) + O(a^4), E[H] = log n - a^2 (n-1)/(2 n d) + O(a^4).
    # A Gauss-Legendre panel ending a rounding error short of s = -1 (d = 4) broke this at 2e-5.
    r = exact_stats(alpha, n, "cosine", d=d)
    v = (n - 1) / n / d
    assert abs(r.sum_p2 * n - 1 - alpha * alpha * v) < 1e-9 + 2 * alpha**4
    assert abs(r.entropy - np.log(n) + 0.5 * alpha * alpha * v) < 1e-9 + 2 * alpha**4
    assert 1.0 / n <= r.sum_p2 <= 1.0
    assert 0.0 <= r.entropy <= np.log(n)
    assert r.quad_error < 1e-6


def _two_cosine_scores(alpha, d):
    # s = cos(theta), theta with density ∝ sin^(d-2): smooth integrand even where (1-s^2)^((d-3)/2) is singular
    c = 1.0 / integrate.quad(lambda t: np.sin(t) ** (d - 2), 0, np.pi, epsabs=0, epsrel=1e-13)[0]

    def g(t2, t1):
        x = alpha * (np.cos(t1) - np.cos(t2))
        return c * c * (np.sin(t1) * np.sin(t2)) ** (d - 2) * 0.5 / np.cosh(0.5 * x) ** 2

    return integrate.dblquad(g, 0, np.pi, 0, np.pi, epsabs=1e-15, epsrel=1e-12)[0]  # 1 - E[sum p^2]


@pytest.mark.parametrize(
    ("d", "alpha"), [(2, 0.1), (2, 10.0), (2, 100.0), (3, 1.0), (4, 0.1), (4, 10.0), (5, 3.0), (8, 100.0), (10, 300.0)]
)
def test_two_cosine_scores_against_double_quadrature(d, alpha):
    # d = 2: E[expm1(-y)] lost the mass next to s = 1 when the march was capped at z = 5 just short of it;
    # d = 8, 10: the coarse u step missed the end s = 1 (now a graded grid around u = -alpha)
    ref = _two_cosine_scores(alpha, d)
    r = exact_stats(alpha, 2, "cosine", d=d)
    assert 1.0 - r.sum_p2 == pytest.approx(ref, rel=1e-9)
    assert r.grad == pytest.approx(alpha * ref, rel=1e-9)


def test_softmax_stats_defaults_to_the_deterministic_exact_method():
    a = ss.softmax_stats(1.7, 333)
    b = ss.softmax_stats(1.7, 333)
    c = ss.softmax_stats(1.7, 333, method="exact")
    assert a.method == "exact"
    assert a.entropy == b.entropy == c.entropy
    assert a.sum_p2 == c.sum_p2


@pytest.mark.parametrize("d", [10**6, 10**12, 10**15])
def test_cosine_at_large_d_meets_the_normal_limit(d):
    # sqrt(d) s tends to N(0, 1): at alpha = c sqrt(d) every statistic meets the normal one at scale c,
    # with a gap of order 1/d (its coefficient stays below 1e3 here), up to the largest accepted d = 1e15
    for c, n in [(1.0, 512), (2.0, 10**6), (4.0, 10**15)]:
        r = exact_stats(c * np.sqrt(d), n, "cosine", d=d, error_estimate=True)
        ref = exact_stats(c, n, "normal")
        assert r.entropy <= np.log(n)
        assert abs(r.entropy - ref.entropy) <= 1e3 / d + 2 * r.quad_error + 1e-13
        assert abs(r.sum_p2 - ref.sum_p2) <= 1e3 / d * ref.sum_p2 + 2 * r.quad_error + 1e-15

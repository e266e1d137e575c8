"""Score distributions: densities, log-MGFs against closed forms and quadrature, samplers."""

import numpy as np
import pytest
from scipy import integrate, special, stats

import softmax_scale as ss
from softmax_scale.distributions import Cosine, Empirical, Normal, get_distribution

SCALES = np.array([1e-8, 1e-4, 0.1, 1.0, 7.5, 60.0, 1e3, 1e5, 1e6])


def test_normal_log_mgf_closed_form():
    assert np.array_equal(Normal().log_mgf(SCALES), SCALES**2 / 2)


def test_cosine_d3_is_uniform_and_mgf_is_sinh():
    c = Cosine(3)
    s = np.linspace(-0.99, 0.99, 7)
    np.testing.assert_allclose(c.pdf(s), 0.5, rtol=1e-13)
    a = SCALES[SCALES < 500]
    # log(sinh(a)/a) computed independently, stable for large a
    ref = a + np.log1p(-np.exp(-2 * a)) - np.log(2 * a)
    small = a < 1e-3
    ref[small] = a[small] ** 2 / 6 - a[small] ** 4 / 180  # series of log(sinh(a)/a)
    np.testing.assert_allclose(c.log_mgf(a), ref, rtol=1e-10, atol=1e-300)


def test_cosine_d2_is_the_cosine_of_a_uniform_angle():
    c = Cosine(2)
    for a in [0.3, 3.0, 40.0]:
        val, _ = integrate.quad(lambda th, a=a: np.exp(a * (np.cos(th) - 1)) / (2 * np.pi), 0, 2 * np.pi, epsrel=1e-13)
        assert c.log_mgf(a) == pytest.approx(np.log(val) + a, rel=1e-10)


@pytest.mark.parametrize("d", [5, 16, 128, 768])
def test_cosine_log_mgf_against_scipy_quadrature(d):
    c = Cosine(d)
    for a in [0.3, 3.0, 40.0]:
        # E[exp(a s)] with the Beta density of (s+1)/2, independent of the Bessel form
        b = 0.5 * (d - 1)
        f = lambda x, a=a, b=b: stats.beta.pdf(x, b, b) * np.exp(a * (2 * x - 1) - a)  # noqa: E731
        val, _ = integrate.quad(f, 0, 1, epsabs=0, epsrel=1e-12, limit=400, points=[0.5])
        assert c.log_mgf(a) == pytest.approx(np.log(val) + a, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("d", [2, 3, 64, 768, 4096, 100_000])
def test_cosine_log_mgf_finite_monotone_and_continuous(d):
    a = np.logspace(-8, 6, 4001)
    v = Cosine(d).log_mgf(a)
    assert np.all(np.isfinite(v))
    assert np.all(np.diff(v) >= 0)
    # small-scale limit: variance 1/d
    assert v[0] == pytest.approx(a[0] ** 2 / (2 * d), rel=1e-6)
    # no jumps where the evaluation switches branch: log M is smooth in log a
    dv = np.diff(v) / np.diff(np.log(a))
    assert np.all(np.abs(np.diff(dv)) <= 0.02 * np.abs(dv[1:]) + 1e-12)


@pytest.mark.parametrize("d", [2, 3, 4, 16, 129])
def test_cosine_pdf_integrates_to_one_and_matches_beta(d):
    c = Cosine(d)
    total, _ = integrate.quad(c.pdf, -1, 1, limit=200)
    assert total == pytest.approx(1.0, rel=1e-8)
    s = np.array([-0.5, 0.1, 0.7])
    b = 0.5 * (d - 1)
    np.testing.assert_allclose(c.pdf(s), stats.beta.pdf((s + 1) / 2, b, b) / 2, rtol=1e-12)
    np.testing.assert_allclose(c.cdf(s), stats.beta.cdf((s + 1) / 2, b, b), rtol=1e-12)


@pytest.mark.parametrize("dist", [Normal(), Cosine(3), Cosine(40)])
def test_quadrature_integrates_polynomials_and_mgf(dist):
    x, w = dist.quadrature(60)
    assert w.sum() == pytest.approx(1.0)
    var = 1.0 if isinstance(dist, Normal) else 1.0 / dist.d
    assert np.dot(w, x * x) == pytest.approx(var, rel=1e-12)
    assert np.log(np.dot(w, np.exp(1.5 * x))) == pytest.approx(dist.log_mgf(1.5), rel=1e-10)


def test_empirical_log_mgf_is_log_mean_exp():
    v = np.array([-1.0, 0.0, 0.5, 3.0])
    e = Empirical(v)
    for a in [0.0, 0.7, 1e6]:
        ref = special.logsumexp(a * v) - np.log(v.size)
        assert e.log_mgf(a) == pytest.approx(ref, rel=1e-14)


def test_samplers_match_their_distribution():
    rng = np.random.default_rng(1)
    for dist in [Normal(), Cosine(5), Cosine(128)]:
        x = dist.sample(20_000, rng)
        assert stats.kstest(x, dist.cdf).pvalue > 1e-3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dist="gauss"), "`dist`"),
        (dict(dist="cosine"), "`d`"),
        (dict(dist="cosine", d=1), "`d`"),
        (dict(dist="cosine", d=2.5), "`d`"),
        (dict(dist="empirical"), "`dist`"),
        (dict(dist=np.array([])), "sample"),
        (dict(dist=np.array([1.0, np.nan])), "sample"),
        (dict(dist=np.ones((2, 2))), "sample"),
    ],
)
def test_bad_distribution_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_distribution(**kwargs)


def test_public_entry_points_reject_bad_distributions():
    with pytest.raises(ValueError, match="`d`"):
        ss.optimal_alpha(512, dist="cosine")
    with pytest.raises(ValueError, match="sample"):
        ss.softmax_stats(1.0, 10, dist=np.array([np.inf, 1.0]))


def _cosine_log_mgf_by_quadrature(d, a):
    """``log E[exp(a s)]`` for cosine(d) by ``scipy.integrate.quad`` in log space.

    Small ``d``: the end factors ``(1 -+ s)^((d-3)/2)`` as quad's algebraic weight, the constant
    from ``betaln``.  Larger ``d``: in ``x = sqrt(d) s`` around the tilted mode, the integrand
    shifted by its peak, and the constant by the same quadrature at ``a = 0``.
    """
    beta = 0.5 * (d - 3)
    if d < 8:
        logc = -special.betaln(0.5, 0.5 * (d - 1))
        lo = 1.0 - 60.0 / a if a > 30.0 else -1.0
        if lo > -1.0:
            val, _ = integrate.quad(lambda t: np.exp(a * (t - 1.0)) * (1.0 + t) ** beta, lo, 1.0,
                                    weight="alg", wvar=(0.0, beta), epsabs=0, epsrel=1e-13, limit=200)
        else:
            val, _ = integrate.quad(lambda t: np.exp(a * (t - 1.0)), -1.0, 1.0,
                                    weight="alg", wvar=(beta, beta), epsabs=0, epsrel=1e-13, limit=200)
        return np.log(val) + a + logc
    sd = np.sqrt(d)

    def log_integral(c):
        def g(x):
            return c * x / sd + beta * np.log1p(-x * x / d)
        mode = c / (beta + np.hypot(beta, c))  # of the tilted density, in s
        width = min(1.0, (1 - mode**2) / np.sqrt(2 * beta * (1 + mode**2))) * sd
        m = mode * sd
        top = g(m)
        val, _ = integrate.quad(lambda x: np.exp(g(x) - top), max(-sd, m - 40 * width), min(sd, m + 40 * width),
                                points=[m], epsabs=0, epsrel=1e-13, limit=400)
        return np.log(val) + top

    return log_integral(a) - log_integral(0.0)


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
@pytest.mark.parametrize("d", [2, 3, 8, 128, 10**4, 10**6, 10**9, 10**12, 10**15])
def test_cosine_log_mgf_at_any_d_against_log_space_quadrature(d):
    # scales from the normal-limit regime (a ~ sqrt(d)) to far beyond it, up to the largest accepted 1e9
    for c in [0.05, 1.0, 4.0, 12.0, 60.0, 3e4]:
        a = c * np.sqrt(d)
        if a > 1e9:
            continue
        assert Cosine(d).log_mgf(a) == pytest.approx(_cosine_log_mgf_by_quadrature(d, a), rel=1e-10)


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
@pytest.mark.parametrize("d", [64, 10**4, 10**9, 10**12, 10**15])
def test_cosine_tail_at_any_d_against_log_space_quadrature(d):
    c = Cosine(d)
    beta, sd = 0.5 * (d - 3), np.sqrt(d)

    def f(x):  # the density of sqrt(d) s, up to its constant
        return np.exp(beta * np.log1p(-x * x / d))

    total, _ = integrate.quad(f, -min(60.0, sd), min(60.0, sd), points=[0.0], epsabs=0, epsrel=1e-13, limit=400)
    for x in [0.5, 3.0, 8.0, 20.0]:
        if x >= sd:
            continue
        tail, _ = integrate.quad(f, x, min(x + 60.0, sd), epsabs=0, epsrel=1e-13, limit=400)
        assert c.cdf(-x / sd) == pytest.approx(tail / total, rel=1e-10)
        assert c.sf(x / sd) == pytest.approx(tail / total, rel=1e-10)
        assert c.isf(tail / total) * sd == pytest.approx(x, rel=1e-10)


def test_debye_polynomials_match_their_closed_forms_and_bound():
    from softmax_scale.distributions._cosine import _debye_polynomials

    u = _debye_polynomials(9)
    t = np.linspace(0.0, 1.0, 2001)
    # DLMF 10.41.10
    np.testing.assert_allclose(u[0](t), (3 * t - 5 * t**3) / 24, atol=1e-16)
    np.testing.assert_allclose(u[1](t), (81 * t**2 - 462 * t**4 + 385 * t**6) / 1152, atol=1e-16)
    np.testing.assert_allclose(
        u[2](t), (30375 * t**3 - 369603 * t**5 + 765765 * t**7 - 425425 * t**9) / 414720, atol=1e-15)
    # the bound on the first term left out that cosine_log_mgf states
    assert np.max(np.abs(u[8](t))) <= 0.6

"""Monte Carlo kernel: per-trial values against numpy on the same draws, statistics, seeding."""

import numpy as np
import pytest
from scipy import integrate

import softmax_scale as ss
from softmax_scale import _kernels
from softmax_scale._util.rng import seed_sequence
from softmax_scale.distributions import get_distribution


def _numpy_reference(scores, alphas):
    """Plain numpy: max-shifted softmax of every trial at every scale."""
    z = scores[:, :, None] * alphas
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    zsum = e.sum(axis=1)
    p = e / zsum[:, None, :]
    sp2 = (p * p).sum(axis=1)
    logz = np.log(zsum) + m[:, 0, :]
    ent = logz - (p * z).sum(axis=1)
    return sp2, ent, alphas * (1 - sp2), logz


@pytest.mark.parametrize("dist", ["normal", "cosine", "empirical"])
def test_per_trial_values_match_numpy_on_the_same_draws(dist):
    n, trials, seed = 300, 50, 7
    alphas = np.array([0.0, 0.5, 1.3, 2.5]) * (10.0 if dist == "cosine" else 1.0)
    sample = np.random.default_rng(3).standard_normal(40)
    dobj = get_distribution(sample if dist == "empirical" else dist, d=32 if dist == "cosine" else None)
    tr = ss.mc_trials(alphas, n, dobj, trials=trials, rng=seed)
    kind, param, sample = dobj.kernel_spec
    block, nblocks = _kernels.block_layout(trials)
    states = _kernels.block_states(seed_sequence(seed), nblocks)
    scores = _kernels.draw_scores(n, trials, block, states, kind, param, sample)
    sp2, ent, grad, logz = _numpy_reference(scores, alphas)
    np.testing.assert_allclose(tr.sum_p2, sp2, rtol=1e-12)
    np.testing.assert_allclose(tr.entropy, ent, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tr.grad, grad, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tr.log_z, logz, rtol=1e-12)


def test_draws_have_the_right_distribution():
    from scipy import stats

    for name, d in [("normal", None), ("cosine", 2), ("cosine", 3), ("cosine", 9), ("cosine", 128)]:
        dobj = get_distribution(name, d)
        kind, param, sample = dobj.kernel_spec
        block, nb = _kernels.block_layout(20)
        x = _kernels.draw_scores(1000, 20, block, _kernels.block_states(seed_sequence(11), nb), kind, param, sample)
        assert stats.kstest(x.ravel(), dobj.cdf).pvalue > 1e-3, (name, d)


def _exact_two_normal_sum_p2(a):
    """E[sum p^2] for n = 2 normal scores: D = s1 - s2 ~ N(0, 2), sum p^2 = (1 + e^{2aD}) / (1 + e^{aD})^2."""

    def f(x):
        return np.exp(-x * x / 4) / np.sqrt(4 * np.pi) * (1 - 0.5 / np.cosh(a * x / 2) ** 2)

    val, _ = integrate.quad(f, -40, 40, limit=200, points=[0.0])
    return val  # sum p^2 = 1 - 2 p(1-p) = 1 - 1/(2 cosh^2(aD/2))


def test_estimates_agree_with_closed_forms_within_their_errors():
    # n = 2: one-dimensional quadrature
    a = np.array([0.5, 2.0])
    r = ss.softmax_stats(a, 2, method="mc", trials=40_000, rng=5)
    ref = np.array([_exact_two_normal_sum_p2(x) for x in a])
    assert np.all(np.abs(r.sum_p2 - ref) < 4 * r.sum_p2_se)
    # E[log Z] for alpha -> 0 scores is log n exactly; E[max] for large alpha
    r0 = ss.softmax_stats(0.0, 1000, method="mc", trials=100, rng=1)
    assert r0.entropy == pytest.approx(np.log(1000), rel=1e-13)
    assert r0.sum_p2 == pytest.approx(1e-3, rel=1e-13)


def test_log_z_expectation_for_normal_scores_small_alpha():
    # E[log Z] <= log E[Z] = log n + a^2/2 (Jensen) and close to it for large n
    n, a = 5000, 0.5
    r = ss.softmax_stats(a, n, method="mc", trials=4000, rng=2)
    bound = np.log(n) + a * a / 2
    assert r.log_z < bound + 4 * r.log_z_se
    assert bound - r.log_z < 0.01


def test_independent_seeds_agree_within_four_standard_errors():
    a = np.array([0.5, 1.5, 3.0])
    r1 = ss.softmax_stats(a, 512, method="mc", trials=20_000, rng=101)
    r2 = ss.softmax_stats(a, 512, method="mc", trials=20_000, rng=202)
    for name in ("sum_p2", "entropy", "grad", "log_z"):
        diff = np.abs(getattr(r1, name) - getattr(r2, name))
        se = np.hypot(getattr(r1, name + "_se"), getattr(r2, name + "_se"))
        assert np.all(diff < 4 * se), name
    # negative control: a different n is detected by the same criterion
    r3 = ss.softmax_stats(a, 600, method="mc", trials=20_000, rng=303)
    assert np.any(np.abs(r3.entropy - r1.entropy) > 4 * np.hypot(r1.entropy_se, r3.entropy_se))


def test_parallel_and_serial_kernels_agree_exactly():
    a = np.array([0.7, 2.0])
    par = ss.mc_trials(a, 257, "cosine", d=16, trials=333, rng=9, parallel=True)
    ser = ss.mc_trials(a, 257, "cosine", d=16, trials=333, rng=9, parallel=False)
    for name in ("sum_p2", "entropy", "grad", "log_z"):
        assert np.array_equal(getattr(par, name), getattr(ser, name))


def test_scalar_and_array_alpha_give_the_same_numbers():
    s = ss.softmax_stats(1.25, 100, method="mc", trials=500, rng=4)
    v = ss.softmax_stats([1.25], 100, method="mc", trials=500, rng=4)
    assert isinstance(s.grad, float)
    assert v.grad.shape == (1,)
    assert s.grad == v.grad[0]
    assert s.entropy == v.entropy[0]


def test_huge_scale_is_finite_and_one_hot():
    r = ss.softmax_stats(np.array([1e3, 1e6]), 1000, method="mc", trials=50, rng=0)
    assert np.all(np.isfinite([r.sum_p2, r.entropy, r.grad, r.log_z]))
    # at 1e6 only a gap below ~3e-5 between the two largest of 1000 normals keeps p from one-hot
    assert r.sum_p2[1] == pytest.approx(1.0, abs=1e-9)
    assert np.all(r.entropy >= 0)
    assert np.all(r.grad >= 0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(alpha=1.0, n=1), "`n`"),
        (dict(alpha=1.0, n=10.5), "`n`"),
        (dict(alpha=1.0, n=float("nan")), "`n`"),
        (dict(alpha=1.0, n=float("inf")), "`n`"),
        (dict(alpha=-1.0, n=10), "`alpha`"),
        (dict(alpha=float("nan"), n=10), "`alpha`"),
        (dict(alpha=[1.0, np.nan], n=10), "`alpha`"),
        (dict(alpha=1.0, n=10, method="mc", trials=1), "`trials`"),
        (dict(alpha=1.0, n=10, trials=100), "`trials`"),  # a Monte Carlo option with the default exact method
        (dict(alpha=1.0, n=10, rng=0), "`rng`"),
        (dict(alpha=1.0, n=10, method="magic"), "`method`"),
        (dict(alpha=1.0, n=10**9, method="mc", trials=10**6), "`trials`"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ss.softmax_stats(**kwargs)


def test_wrong_types_raise_type_error():
    with pytest.raises(TypeError, match="`n`"):
        ss.softmax_stats(1.0, "10")
    with pytest.raises(TypeError, match="`alpha`"):
        ss.softmax_stats("1", 10)
    with pytest.raises(TypeError, match="`rng`"):
        ss.softmax_stats(1.0, 10, method="mc", rng="seed")


def test_seed_forms():
    a = ss.softmax_stats(1.0, 50, method="mc", trials=100, rng=np.random.SeedSequence(3)).grad
    b = ss.softmax_stats(1.0, 50, method="mc", trials=100, rng=3).grad
    assert a == b
    g1 = ss.softmax_stats(1.0, 50, method="mc", trials=100, rng=np.random.default_rng(3)).grad
    g2 = ss.softmax_stats(1.0, 50, method="mc", trials=100, rng=np.random.default_rng(3)).grad
    assert g1 == g2

"""Tests for softmax_scale.moments: every Monte Carlo number against a closed form.

Statistical checks use fixed seeds and a tolerance of 4 standard errors; the
negative controls show the same check rejecting a wrong claim.
"""

import io
import math

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy import integrate, stats

from softmax_scale import moments as m

Z = 4.0  # standard errors allowed
# Literature values (Klambauer et al. 2017, "Self-Normalizing Neural Networks").
SELU_LAMBDA = 1.0507009873554805
SELU_ALPHA = 1.6732632423543772


def within(est, se, target, z=Z):
    """True where ``est`` is within ``z`` standard errors of ``target``."""
    return np.all(np.abs(np.asarray(est) - np.asarray(target)) <= z * np.asarray(se))


def ref_expectation(f):
    """E[f(x)], x ~ N(0, 1), independently of scipy.quad.

    Composite Simpson on [-12, 0] and [0, 12] (the kink of ReLU-like
    functions sits on a node), checked against Gauss-Hermite for smooth ``f``.
    """
    x = np.linspace(0.0, 12.0, 24_001)
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return float(integrate.simpson(f(x) * pdf, x=x) + integrate.simpson(f(-x) * pdf, x=x))


def test_ref_expectation_reference():
    nodes, weights = hermegauss(80)
    for f in (np.tanh, np.cos, lambda x: x**4):
        ref = float(np.sum(weights * f(nodes)) / math.sqrt(2 * math.pi))
        assert ref_expectation(f) == pytest.approx(ref, rel=1e-9, abs=1e-12)


# --- 1. sampling distributions and Var[q·k] ---------------------------------------


def test_truncated_normal_std_matches_scipy():
    ref = stats.truncnorm(-2, 2).std()
    assert m.truncated_normal_std() == pytest.approx(ref, rel=1e-12)
    assert m.truncated_normal_std() == pytest.approx(0.8796, abs=5e-5)
    assert m.truncation_correction() == pytest.approx(1.137, abs=5e-4)


@pytest.mark.parametrize("dist", m.DISTRIBUTIONS)
def test_sample_weights_unit_variance(dist):
    x = m.sample_weights(200_000, dist, rng=1)
    se = np.std(x * x, ddof=1) / math.sqrt(x.size)
    assert within(np.mean(x * x), se, 1.0)
    assert x.dtype == np.float64
    if dist == "uniform":
        assert np.max(np.abs(x)) <= math.sqrt(3)
    if dist == "truncated_normal":
        assert np.max(np.abs(x)) <= 2 * m.truncation_correction()


def test_sample_weights_uncorrected_truncation_variance():
    x = m.sample_weights(200_000, "truncated_normal", correct_truncation=False, rng=2)
    se = np.std(x * x, ddof=1) / math.sqrt(x.size)
    assert within(np.mean(x * x), se, stats.truncnorm(-2, 2).var())
    assert np.max(np.abs(x)) <= 2.0


@pytest.mark.parametrize("dist", m.DISTRIBUTIONS)
@pytest.mark.parametrize("d", [1, 16, 128])
def test_dot_product_variance_is_d(dist, d):
    r = m.dot_product_variance(d, dist, trials=20_000, rng=d)
    assert r.closed_form == pytest.approx(d)
    assert r.target == d
    assert within(r.estimate, r.stderr, d)
    s = m.dot_product_variance(d, dist, trials=20_000, scaled=True, rng=d + 1)
    assert within(s.estimate, s.stderr, 1.0)


def test_uncorrected_truncated_normal_is_below_d():
    """Negative control: without the 1.137 factor Var[q·k] is 0.60 d, not d."""
    d = 64
    r = m.dot_product_variance(d, "truncated_normal", correct_truncation=False, trials=20_000, rng=3)
    assert not within(r.estimate, r.stderr, d)
    assert r.estimate < d - 10 * r.stderr
    assert within(r.estimate, r.stderr, d * stats.truncnorm(-2, 2).var() ** 2)
    assert r.closed_form == pytest.approx(d * stats.truncnorm(-2, 2).var() ** 2)


def test_reproducible():
    a = m.dot_product_variance(32, "uniform", trials=1000, rng=7)
    b = m.dot_product_variance(32, "uniform", trials=1000, rng=7)
    c = m.dot_product_variance(32, "uniform", trials=1000, rng=8)
    assert a == b
    assert a.estimate != c.estimate
    g1 = m.depth_second_moments(3, "tanh", "lecun", width=8, trials=4, rng=np.random.default_rng(5))
    g2 = m.depth_second_moments(3, "tanh", "lecun", width=8, trials=4, rng=5)
    np.testing.assert_array_equal(g1.second_moment, g2.second_moment)
    r1 = m.residual_second_moments(3, "pre_norm", width=8, trials=4, rng=9)
    r2 = m.residual_second_moments(3, "pre_norm", width=8, trials=4, rng=9)
    np.testing.assert_array_equal(r1.second_moment, r2.second_moment)
    t1 = m.t5_score_variance(16, 4, trials=10, rng=1)
    assert t1 == m.t5_score_variance(16, 4, trials=10, rng=1)


# --- 3. activations ------------------------------------------------------------------


def test_gaussian_expectation_closed_forms():
    assert m.gaussian_expectation(lambda x: max(x, 0.0)) == pytest.approx(1 / math.sqrt(2 * math.pi), rel=1e-10)
    assert m.gaussian_expectation(lambda x: max(x, 0.0) ** 2) == pytest.approx(0.5, rel=1e-10)
    assert m.gaussian_expectation(lambda x: x * x, variance=3.0) == pytest.approx(3.0, rel=1e-10)
    # GELU: E[x Phi(x)] = E[phi(x)] = 1 / (2 sqrt(pi))
    gelu_mean = m.rescale_activation("gelu").mean
    assert gelu_mean == pytest.approx(1 / (2 * math.sqrt(math.pi)), rel=1e-9)


def test_he_factor_two_from_relu():
    assert m.preserving_gain("relu") ** 2 == pytest.approx(2.0, rel=1e-10)
    assert m.preserving_gain("linear") == pytest.approx(1.0, rel=1e-10)
    c = m.rescale_activation("relu")
    assert c.second_moment == pytest.approx(0.5, rel=1e-10)
    assert c.mean == pytest.approx(1 / math.sqrt(2 * math.pi), rel=1e-10)


@pytest.mark.parametrize("name", m.ACTIVATIONS)
def test_rescaled_activation_zero_mean_unit_second_moment(name):
    c = m.rescale_activation(name)
    assert ref_expectation(c) == pytest.approx(0.0, abs=1e-9)
    assert ref_expectation(lambda x: c(x) ** 2) == pytest.approx(1.0, rel=1e-9)
    g = m.rescale_activation(name, center=False)
    assert g.shift == 0.0
    assert g.scale == pytest.approx(m.preserving_gain(name))
    assert ref_expectation(lambda x: g(x) ** 2) == pytest.approx(1.0, rel=1e-9)
    # and by Monte Carlo
    x = np.random.default_rng(11).standard_normal(200_000)
    y2 = c(x) ** 2
    assert within(y2.mean(), y2.std(ddof=1) / math.sqrt(x.size), 1.0)


def test_sigmoid_needs_shift_and_scale():
    c = m.rescale_activation("sigmoid")
    assert c.mean == pytest.approx(0.5, abs=1e-12)  # symmetry
    assert c.scale == pytest.approx(1 / math.sqrt(ref_expectation(lambda x: (1 / (1 + np.exp(-x)) - 0.5) ** 2)),
                                    rel=1e-6)
    x = np.linspace(-5, 5, 11)
    np.testing.assert_allclose(m.activation(x, "shifted_sigmoid"), c(x), rtol=1e-12, atol=1e-15)
    assert m.preserving_gain("shifted_sigmoid") == pytest.approx(1.0, rel=1e-10)


def test_selu_constants_solved():
    c = m.selu_constants()
    assert c.converged
    assert f"{c.lambda_:.4g}" == f"{SELU_LAMBDA:.4g}" == "1.051"
    assert f"{c.alpha:.4g}" == f"{SELU_ALPHA:.4g}" == "1.673"
    assert c.lambda_ == pytest.approx(SELU_LAMBDA, rel=1e-8)
    assert c.alpha == pytest.approx(SELU_ALPHA, rel=1e-8)
    # independent closed form for alpha from E[elu_alpha(x)] = 0
    alpha_cf = (1 / math.sqrt(2 * math.pi)) / (0.5 - math.exp(0.5) * stats.norm.cdf(-1))
    assert c.alpha == pytest.approx(alpha_cf, rel=1e-9)
    assert ref_expectation(lambda x: m.activation(x, "selu")) == pytest.approx(0.0, abs=1e-9)
    assert ref_expectation(lambda x: m.activation(x, "selu") ** 2) == pytest.approx(1.0, rel=1e-9)


# --- 2. depth ------------------------------------------------------------------------


@pytest.mark.parametrize("init", m.INITS)
@pytest.mark.parametrize("act", ["linear", "relu"])
def test_depth_exact_for_homogeneous(act, init):
    r = m.depth_second_moments(6, act, init, width=48, trials=200, inputs=4, rng=21)
    assert r.exact
    c = 1.0 if act == "linear" else 0.5  # E[f(x)^2] for x ~ N(0, 1)
    gain2 = {"lecun": 1.0, "xavier": 1.0, "ntk": 1.0, "he": 2.0, "preserving": 1 / c}[init]
    np.testing.assert_allclose(r.predicted, (gain2 * c) ** r.layers, rtol=1e-12)
    assert within(r.second_moment, r.stderr, r.predicted)


def test_vanishing_and_exploding_shown():
    relu_lecun = m.depth_second_moments(10, "relu", "lecun", width=48, trials=100, rng=22)
    assert within(relu_lecun.second_moment[-1], relu_lecun.stderr[-1], 2.0**-10)
    lin_he = m.depth_second_moments(10, "linear", "he", width=48, trials=100, rng=23)
    assert within(lin_he.second_moment[-1], lin_he.stderr[-1], 2.0**10)
    relu_he = m.depth_second_moments(10, "relu", "he", width=48, trials=100, rng=24)
    assert within(relu_he.second_moment, relu_he.stderr, 1.0)
    # negative control: LeCun on ReLU is not at 1
    assert not within(relu_lecun.second_moment[-1], relu_lecun.stderr[-1], 1.0)


@pytest.mark.parametrize("act", ["tanh", "shifted_sigmoid", "selu", "elu", "sigmoid"])
def test_preserving_gain_keeps_one_at_large_width(act):
    """Non-homogeneous activations: the recursion is exact only as width -> inf.

    The finite-width bias is O(1/width); 2% is allowed on top of 4 standard errors.
    """
    r = m.depth_second_moments(8, act, "preserving", width=256, trials=24, inputs=8, rng=25)
    np.testing.assert_allclose(r.predicted, 1.0, rtol=1e-8)
    assert np.all(np.abs(r.second_moment - 1.0) <= Z * r.stderr + 0.02)


def test_mean_field_recursion_tanh_lecun_vanishes():
    q = m.mean_field_second_moments(50, "tanh", "lecun")
    assert np.all(np.diff(q) < 0)
    assert q[-1] < 0.1
    r = m.depth_second_moments(5, "tanh", "lecun", width=256, trials=16, rng=26)
    assert np.all(np.abs(r.second_moment - r.predicted) <= Z * r.stderr + 0.02 * r.predicted)


def test_second_moment_map_slope():
    assert m.second_moment_map_slope("relu", "he") == pytest.approx(1.0, rel=1e-7)
    assert m.second_moment_map_slope("relu", "lecun") == pytest.approx(0.5, rel=1e-7)
    assert m.second_moment_map_slope("linear", "he", q=3.0) == pytest.approx(2.0, rel=1e-7)
    for act in ("tanh", "selu", "shifted_sigmoid", "elu"):
        assert m.second_moment_map_slope(act) < 1.0  # stable fixed point at 1
    assert m.second_moment_map_slope("gelu") > 1.0  # unstable: drifts away at finite width
    # central difference against a Simpson derivative of the same map
    g2 = m.preserving_gain("tanh") ** 2
    h = 1e-3
    ref = g2 * (ref_expectation(lambda x: np.tanh(math.sqrt(1 + h) * x) ** 2)
                - ref_expectation(lambda x: np.tanh(math.sqrt(1 - h) * x) ** 2)) / (2 * h)
    assert m.second_moment_map_slope("tanh") == pytest.approx(ref, rel=1e-5)


def test_ntk_matches_lecun_forward():
    a = m.depth_second_moments(5, "relu", "ntk", width=32, trials=8, rng=27)
    b = m.depth_second_moments(5, "relu", "lecun", width=32, trials=8, rng=27)
    np.testing.assert_allclose(a.second_moment, b.second_moment, rtol=1e-10)


# --- 4. normalisation ------------------------------------------------------------------


def test_layer_norm_and_rms_norm_fix_their_moments():
    x = 0.7 + 2.0 * np.random.default_rng(31).standard_normal((50, 300))
    y = m.layer_norm(x)
    np.testing.assert_allclose(y.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=1), 1.0, rtol=1e-12)
    z = m.rms_norm(x)
    np.testing.assert_allclose(np.mean(z * z, axis=1), 1.0, rtol=1e-12)
    assert np.all(z.mean(axis=1) > 0.1)  # mean not removed
    np.testing.assert_allclose(m.rms_norm(x - x.mean(axis=1, keepdims=True)), y, rtol=1e-12)
    np.testing.assert_allclose(m.layer_norm(x.T, axis=0), y.T, rtol=1e-12)
    assert np.all(m.layer_norm(x, eps=1.0).var(axis=1) < 1.0)


def test_normalization_moments():
    ln = m.normalization_moments("layer", width=512, mean=0.5, trials=200, rng=32)
    assert ln.mean == pytest.approx(0.0, abs=1e-12)
    assert ln.variance == pytest.approx(1.0, rel=1e-12)
    assert ln.second_moment == pytest.approx(1.0, rel=1e-12)
    rms = m.normalization_moments("rms", width=4096, mean=0.5, trials=400, rng=33)
    assert rms.second_moment == pytest.approx(1.0, rel=1e-12)
    assert within(rms.mean, rms.mean_stderr, 0.5 / math.sqrt(1.25))
    assert within(rms.variance, rms.variance_stderr, 1.0 / 1.25)
    assert not within(rms.mean, rms.mean_stderr, 0.0)  # RMSNorm keeps the mean


# --- 5. residuals ------------------------------------------------------------------------


@pytest.mark.parametrize("branch", ["linear", "mlp"])
def test_plain_residual_doubles(branch):
    r = m.residual_second_moments(8, "plain", width=48, branch=branch, trials=150, rng=41)
    np.testing.assert_array_equal(r.closed_form, 2.0 ** np.arange(9))
    assert within(r.second_moment, r.stderr, r.closed_form)
    assert not within(r.second_moment[-1], r.stderr[-1], 2.0**7)  # negative control


def test_pre_norm_linear_post_norm_flat():
    pre = m.residual_second_moments(8, "pre_norm", width=48, trials=150, rng=42)
    assert within(pre.second_moment, pre.stderr, 1.0 + np.arange(9))
    assert np.all(np.diff(pre.update_ratio) < 0)  # later blocks change the stream less
    rms = m.residual_second_moments(6, "pre_norm", norm="rms", width=48, trials=150, rng=43)
    assert within(rms.second_moment, rms.stderr, 1.0 + np.arange(7))
    post = m.residual_second_moments(8, "post_norm", width=48, trials=20, rng=44)
    np.testing.assert_allclose(post.second_moment[1:], 1.0, rtol=1e-12)
    # the identity path of Post-Norm shrinks like 2^(-l/2), Pre-Norm's like (1+l)^(-1/2)
    assert post.input_cosine[4] < pre.input_cosine[4]


def test_skipinit_rezero_and_warmup():
    z = m.residual_second_moments(5, "rezero", width=16, trials=4, rng=45)
    np.testing.assert_allclose(z.second_moment, z.second_moment[0])
    np.testing.assert_array_equal(z.update_ratio, 0.0)
    s = m.residual_second_moments(8, "skipinit", alpha=0.5, width=48, trials=150, rng=46)
    assert within(s.second_moment, s.stderr, 1.25 ** np.arange(9))
    w = m.residual_second_moments(8, "warmup", step=300, warmup_steps=1000, width=48, trials=150, rng=47)
    assert w.alpha == pytest.approx(0.3)
    assert within(w.second_moment, w.stderr, 1.09 ** np.arange(9))
    # |alpha F(x)| / |x| is alpha up to an O(1/width) bias
    np.testing.assert_allclose(w.update_ratio, 0.3, rtol=0.05)
    np.testing.assert_allclose(m.warmup_alpha([0, 250, 1000, 5000], 1000), [0, 0.25, 1, 1])


# --- 6. T5 ---------------------------------------------------------------------------------


def test_t5_unit_variance_standard_d_kv():
    t5 = m.t5_score_variance(64, 16, init="t5", trials=1500, rng=51)
    assert t5.closed_form == pytest.approx(1.0)
    assert within(t5.estimate, t5.stderr, 1.0)
    st = m.t5_score_variance(64, 16, init="standard", trials=1500, rng=52)
    assert st.closed_form == pytest.approx(16.0)
    assert within(st.estimate, st.stderr, 16.0)
    assert not within(st.estimate, st.stderr, 1.0)  # negative control
    assert t5.query_std == pytest.approx((64 * 16) ** -0.5)
    assert t5.key_std == pytest.approx(64**-0.5)


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: m.depth_second_moments(3, width=0), "width"),
        (lambda: m.depth_second_moments(0), "depth"),
        (lambda: m.depth_second_moments(3, "swish"), "activation"),
        (lambda: m.depth_second_moments(3, "relu", "glorot"), "init"),
        (lambda: m.depth_second_moments(3, trials=1), "trials"),
        (lambda: m.residual_second_moments(3, "fixup"), "scheme"),
        (lambda: m.residual_second_moments(0), "depth"),
        (lambda: m.residual_second_moments(3, width=0), "width"),
        (lambda: m.residual_second_moments(3, "post_norm", width=1), "width"),
        (lambda: m.residual_second_moments(3, "rezero", alpha=-1.0), "alpha"),
        (lambda: m.residual_second_moments(3, branch="attention"), "branch"),
        (lambda: m.residual_second_moments(3, "warmup", step=-1), "step"),
        (lambda: m.residual_second_moments(3, "warmup", warmup_steps=0), "warmup_steps"),
        (lambda: m.dot_product_variance(0), "d"),
        (lambda: m.dot_product_variance(4, "cauchy"), "dist"),
        (lambda: m.sample_weights(3, std=0.0), "std"),
        (lambda: m.rescale_activation("swish"), "name"),
        (lambda: m.preserving_gain("swish"), "name"),
        (lambda: m.mean_field_second_moments(3, "relu", "glorot"), "init"),
        (lambda: m.normalization_moments("batch"), "norm"),
        (lambda: m.normalization_moments("layer", width=1), "width"),
        (lambda: m.normalization_moments("layer", mean=float("nan")), "mean"),
        (lambda: m.layer_norm(np.ones(3), eps=-1.0), "eps"),
        (lambda: m.t5_score_variance(0, 4), "d_model"),
        (lambda: m.t5_score_variance(8, 0), "d_kv"),
        (lambda: m.t5_score_variance(8, 4, init="xavier"), "init"),
        (lambda: m.activation(1.0, "swish"), "name"),
        (lambda: m.truncated_normal_std(0.0), "bound"),
        (lambda: m.second_moment_map_slope("relu", "he", q=0.0), "q"),
        (lambda: m.second_moment_map_slope("swish"), "activation"),
    ],
)
def test_bad_input_raises_naming_parameter(call, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        call()


def test_results_are_frozen():
    r = m.dot_product_variance(4, trials=10, rng=0)
    with pytest.raises(AttributeError):
        r.estimate = 0.0


# --- figures -----------------------------------------------------------------------------------


def test_quick_figures_return_labelled_figures():
    from matplotlib.figure import Figure

    from softmax_scale.plotting.moments import FIGURES

    names = [f[0] for f in FIGURES]
    assert len(set(names)) == len(names)
    assert all(n.startswith("moments_") for n in names)
    for _name, func, full, quick in FIGURES:
        assert set(quick) <= set(full) | {"activations"}
        fig = func(**quick)
        assert isinstance(fig, Figure)
        fig.savefig(io.BytesIO(), format="png", dpi=40)  # glyph warnings would raise here
        assert fig.get_suptitle()
        for ax in fig.axes:
            if ax.get_visible():
                assert ax.get_xlabel()
                assert ax.get_ylabel()
                assert ax.get_legend() is not None

"""Tests for softmax_scale.entropy: entropy against length, the signal model, invariant scale, decoder optimum.

References: Monte Carlo within 4 standard errors (with a negative control), the
exact isotropic evaluator, closed forms, and brute-force grid searches.
"""

import math

import numpy as np
import pytest

from softmax_scale import entropy as E
from softmax_scale.objectives.causal import optimal_alpha_causal
from softmax_scale.stats import softmax_stats

Z = 4.0


@pytest.mark.parametrize(
    "dist,d,s0,alpha",
    [("normal", None, 2.0, 1.5), ("normal", None, 0.0, 3.0), ("cosine", 128, 1.0, 11.3), ("cosine", 64, 0.3, 30.0)],
)
def test_signal_quadrature_matches_monte_carlo(dist, d, s0, alpha):
    ex = E.signal_stats(alpha, 500, s0, dist, d=d)
    mc = E.signal_stats(alpha, 500, s0, dist, d=d, method="mc", trials=3000, rng=7)
    for f in ("share", "sum_p2", "entropy", "grad", "log_z"):
        est, se = getattr(mc, f), getattr(mc, f + "_se")
        assert abs(getattr(ex, f) - est) <= Z * se, f


def test_signal_monte_carlo_negative_control():
    # The same check must reject the isotropic answer (no signal key) when the signal matters.
    iso = softmax_stats(11.3, 500, "cosine", d=128, method="exact")
    mc = E.signal_stats(11.3, 500, 1.0, "cosine", d=128, method="mc", trials=3000, rng=7)
    assert abs(iso.entropy - mc.entropy) > Z * mc.entropy_se


def test_signal_mc_is_reproducible():
    a = E.signal_stats([1.0, 2.0], 100, 1.0, "normal", method="mc", trials=50, rng=3)
    b = E.signal_stats([1.0, 2.0], 100, 1.0, "normal", method="mc", trials=50, rng=3)
    assert np.array_equal(a.entropy, b.entropy)


def test_signal_key_far_below_is_isotropic_with_n_minus_1_keys():
    # A signal at cosine -1 with alpha = 40 carries weight e^-40 relative to typical keys.
    r = E.signal_stats(40.0, 1000, -1.0, "cosine", d=128)
    iso = softmax_stats(40.0, 999, "cosine", d=128, method="exact")
    assert r.share < 1e-12
    assert r.entropy == pytest.approx(iso.entropy, abs=1e-8)
    assert r.sum_p2 == pytest.approx(iso.sum_p2, abs=1e-8)


def test_signal_closed_form_two_keys():
    # n = 2, normal: p0 = 1/(1 + exp(a (s - s0))), s ~ N(0,1); reference by dense quadrature.
    a, s0 = 1.7, 0.4
    s = np.linspace(-12, 12, 200_001)
    w = np.exp(-0.5 * s * s)
    w /= w.sum()
    p0 = 1 / (1 + np.exp(a * (s - s0)))
    h = -(p0 * np.log(p0) + (1 - p0) * np.log1p(-p0))
    r = E.signal_stats(a, 2, s0, "normal")
    assert r.share == pytest.approx(np.dot(w, p0), abs=1e-9)
    assert r.entropy == pytest.approx(np.dot(w, h), abs=1e-9)
    assert r.sum_p2 == pytest.approx(np.dot(w, p0**2 + (1 - p0) ** 2), abs=1e-9)


def test_standard_grows_log2_per_doubling():
    ns = 2 ** np.arange(9, 21)
    c = E.entropy_curve(ns, "standard", d=64, score_model="normal")
    np.testing.assert_allclose(np.diff(c.entropy), math.log(2), atol=0.02)
    assert np.all(c.entropy <= np.log(ns))
    assert np.all(c.entropy_ratio < 1)
    # Under standard on normal scores alpha = 1: E[H] ~ log n - 1/2 for large n.
    assert c.entropy[-1] == pytest.approx(math.log(ns[-1]) - 0.5, abs=0.02)


def test_entropy_curve_exact_matches_monte_carlo():
    ns = np.array([64, 512])
    ex = E.entropy_curve(ns, "chiang_cholak", d=64, score_model="cosine")
    mc = E.entropy_curve(ns, "chiang_cholak", d=64, score_model="cosine", method="mc", trials=2000, rng=1)
    assert np.all(np.abs(ex.entropy - mc.entropy) <= Z * mc.entropy_se)
    assert np.all(np.abs(ex.grad - mc.grad) <= Z * mc.grad_se)
    assert np.all(np.isnan(ex.signal_share))


def test_isotropic_drift_invariant_smaller_than_standard():
    tab = E.extrapolation_table(512, ("standard", "entropy_invariant"), d=128, score_model="cosine", match=1.0)
    std, inv = tab.drift_isotropic
    # standard drifts by log(n/L) (up to the alpha^2/2 term): 64L -> log 64 = 4.16
    assert std[-1] == pytest.approx(math.log(64), abs=0.05)
    assert 0 < inv[-1] < std[-1]
    # measured: about 3.30 against 4.16 nats, i.e. the log n scale removes about 20% of the drift
    assert 0.1 < 1 - inv[-1] / std[-1] < 0.4


def test_signal_share_falls_under_standard_not_under_invariant():
    tab = E.extrapolation_table(512, ("standard", "entropy_invariant"), d=128, score_model="cosine", match=1.0)
    std, inv = tab.share_signal
    assert np.all(np.diff(std) < 0)
    assert std[-1] < std[0] - 0.2
    assert np.all(np.diff(inv) >= -1e-12)
    # the entropy with the signal present stays within 0.15 nats of its value at L
    assert np.max(np.abs(tab.drift_signal[1])) < 0.15


def test_invariant_scale_reproduces_target():
    ns = np.array([64, 1000, 30000, 10**6])
    r = E.invariant_scale(ns, 2.5)
    assert r.converged.all()
    for n, a in zip(ns, r.alpha):
        h = softmax_stats(float(a), int(n), "normal", method="exact").entropy
        assert h == pytest.approx(2.5, abs=1e-6)
    assert np.all(np.diff(r.alpha) > 0)
    assert set(r.laws) == {"sqrt_log", "log", "power", "affine_log"}


def test_invariant_scale_bad_target():
    with pytest.raises(ValueError, match="target_entropy"):
        E.invariant_scale([16, 100], 3.0)  # log 16 = 2.77 < 3
    with pytest.raises(ValueError, match="target_entropy"):
        E.invariant_scale([16, 100], -1.0)


def test_phase_diagram_limits():
    pd = E.phase_diagram(ns=[16, 1000, 10**6], ratios=[0.0, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(pd.entropy_ratio[0], 1.0, atol=1e-12)
    assert np.all(np.diff(pd.entropy_ratio, axis=0) < 0)
    # below freezing at large n: E[H]/log n ~ 1 - ratio^2 (log n - alpha^2/2); n = 1e6, ratio 0.5 -> 0.75
    assert pd.entropy_ratio[1, -1] == pytest.approx(0.75, abs=0.03)


def _brute_force_causal(L):
    i = np.arange(2, L + 1, dtype=float)

    def avg(a):
        return np.mean(a * (1 - np.minimum(1.0, np.exp(a * a) / i)))

    grid = np.linspace(0.01, 4, 4000)
    best = grid[np.argmax([avg(a) for a in grid])]
    for width in (1e-3, 1e-5, 1e-7):
        grid = np.linspace(best - width, best + width, 201)
        best = grid[np.argmax([avg(a) for a in grid])]
    return best, avg(best)


@pytest.mark.parametrize("L", [64, 512, 4096])
def test_optimal_alpha_causal_matches_brute_force(L):
    r = optimal_alpha_causal(L)
    a, v = _brute_force_causal(L)
    assert r.alpha == pytest.approx(a, abs=1e-4)
    assert r.value == pytest.approx(v, rel=1e-8)
    assert r.value >= r.value_heuristic >= 0
    assert r.value >= r.value_at_length
    assert r.loss_heuristic == pytest.approx(1 - r.value_heuristic / r.value)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: E.entropy_curve([64, 128], "nope"), "scheme"),
        (lambda: E.entropy_curve([64, 1], "standard"), "ns"),
        (lambda: E.entropy_curve([64, 128], "standard", d=1), "d"),
        (lambda: E.entropy_curve([64, 128], "standard", score_model="laplace"), "score_model"),
        (lambda: E.entropy_curve([64, 128], "standard", match=2.0), "match"),
        (lambda: E.entropy_curve([64, 128], "standard", method="quad"), "method"),
        (lambda: E.entropy_curve([64, 128], "entropy_invariant", pin_length=0), "pin_length"),
        (lambda: E.extrapolation_table(1), "train_length"),
        (lambda: E.extrapolation_table(64, factors=(0.5, 2)), "factors"),
        (lambda: E.extrapolation_table(64, factors=(1, 1.01)), "factors"),  # 64.64 keys
        (lambda: E.signal_stats(1.0, 10, 1.5, "cosine", d=16), "s0"),
        (lambda: E.signal_stats(-1.0, 10, 0.5, "normal"), "alpha"),
        (lambda: optimal_alpha_causal(2), "L"),
        (lambda: E.phase_diagram(ratios=[-1.0, 1.0]), "ratios"),
    ],
)
def test_bad_parameters(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_temperature_table():
    from softmax_scale.contrastive import temperature_table

    t = temperature_table(ds=(128, 768), ns=(256, 65536))
    np.testing.assert_allclose(t.tau * t.alpha, 1.0)
    assert np.all(np.diff(t.alpha, axis=0) > 0)
    assert np.all(np.diff(t.alpha, axis=1) > 0)
    assert t.published["clip"] == pytest.approx(1 / 0.07)
    assert t.published["simcse"] == pytest.approx(20.0)
    for loss in t.published_loss.values():
        assert np.all((loss >= 0) & (loss <= 1))
    # mean-field objective for cosine by dense quadrature: the optimum beats CLIP's 14.3 at d=128, n=65536
    s = np.linspace(-1, 1, 40_001)
    w = (1 - s * s) ** (125 / 2)
    w /= w.sum()

    def g(a, n):
        return a * (1 - np.dot(w, np.exp(2 * a * s)) / (n * np.dot(w, np.exp(a * s)) ** 2))

    a = t.alpha[0, 1]
    assert g(a, 65536) > g(a * 1.01, 65536)
    assert g(a, 65536) > g(a * 0.99, 65536)
    assert t.published_loss["clip"][0, 1] == pytest.approx(1 - g(1 / 0.07, 65536) / g(a, 65536), abs=1e-6)


def test_extrapolation_table_takes_a_multiple_that_is_not_a_whole_number():
    """``n / L = 1.5``: the drift is the exact entropy at 96 keys minus that at 64, under the scheme pinned at 64."""
    t = E.extrapolation_table(64, ("qwen_logn",), d=16, score_model="normal", factors=(1, 1.5))
    c = E.entropy_curve([64, 96], "qwen_logn", d=16, score_model="normal", pin_length=64)
    assert t.drift_isotropic[0, 1] == pytest.approx(c.entropy[1] - c.entropy[0], abs=1e-12)

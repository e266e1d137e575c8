"""Tests for softmax_scale.schemes: every scheme against a hand computation of its published formula."""

import math

import numpy as np
import pytest

from softmax_scale import schemes as sc

POINTS = [(64, 64), (4096, 128), (40000, 256)]  # (n, d)


def hand(key, n, d):
    """The published formulas, written out independently of the implementation."""
    r = math.sqrt(d)
    if key == "standard":
        return 1 / r
    if key == "chiang_cholak":
        return math.log(n) / r
    if key == "entropy_invariant":
        return math.log(n) / math.log(512) / r
    if key == "qwen_logn":  # Qwen v1: math.log(i, seq_length) if i > seq_length else 1
        return (math.log(n, 8192) if n > 8192 else 1.0) / r
    if key == "yarn":  # dynamic: s = n / L, L = 4096; mscale on q and k
        s = n / 4096
        return ((0.1 * math.log(s) + 1) ** 2 if s > 1 else 1.0) / r
    if key == "deepseek_yarn":  # s = 40, mscale_all_dim = 1, d_qk = d
        return (0.1 * 1.0 * math.log(40) + 1) ** 2 / r
    if key == "longrope":
        s = max(1.0, n / 4096)
        return (1 + math.log(s) / math.log(4096)) / r
    if key == "llama4":  # pos 0-indexed = n - 1
        pos = n - 1
        return (1 + 0.1 * math.log(1 + math.floor((pos + 1) / 8192))) / r
    if key == "ssmax":
        return 0.43 * math.log(n) / r
    if key == "critical":
        return math.sqrt(2 * math.log(n)) / r
    return {"clip": 1 / 0.07, "swin_v2": 10.0, "am_softmax": 30.0, "simcse": 20.0, "simclr": 10.0}[key]


HAND_KEYS = [k for k in sc.SCHEMES if k not in ("gradient_optimal", "cosine_gradient_optimal")]


@pytest.mark.parametrize("key", HAND_KEYS)
@pytest.mark.parametrize("n,d", POINTS)
def test_hand_computation(key, n, d):
    assert sc.attention_scale(n, d, key) == pytest.approx(hand(key, n, d), rel=1e-13)


@pytest.mark.parametrize("key", HAND_KEYS)
def test_vectorised_matches_scalar(key):
    ns = np.array([p[0] for p in POINTS])
    out = sc.attention_scale(ns, 128, key)
    assert out.shape == ns.shape
    np.testing.assert_allclose(out, [sc.attention_scale(int(x), 128, key) for x in ns], rtol=1e-15)


def test_gradient_optimal_is_the_mean_field_maximiser():
    # G = a (1 - e^{a^2}/n) -> dG/da = 1 - (1 + 2a^2) e^{a^2}/n = 0, solved by bisection here.
    for n, d in POINTS:
        lo, hi = 0.0, math.sqrt(math.log(n))
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if 1 - (1 + 2 * mid * mid) * math.exp(mid * mid) / n > 0 else (lo, mid)
        assert sc.attention_scale(n, d, "gradient_optimal") == pytest.approx(lo / math.sqrt(d), rel=1e-8)
    assert sc.attention_scale(512, 64, "gradient_optimal", value=2.5) == pytest.approx(2.5 / 8)


def test_cosine_gradient_optimal_is_the_mean_field_maximiser():
    # M(a) = E[exp(a s)] for cosine(d) by quadrature of the density (1 - s^2)^((d-3)/2), then a grid maximum.
    d = 128
    s = np.linspace(-1, 1, 40_001)
    w = (1 - s * s) ** ((d - 3) / 2)
    w /= w.sum()

    def g(a, n):
        m1 = np.exp(np.outer(a, s)) @ w
        m2 = np.exp(np.outer(2 * a, s)) @ w
        return a * (1 - m2 / (n * m1 * m1))

    for n in (40, 20000):
        a = np.linspace(5, 60, 551)
        a = np.linspace(a[np.argmax(g(a, n))] - 0.1, a[np.argmax(g(a, n))] + 0.1, 401)
        best = a[np.argmax(g(a, n))]
        assert sc.attention_scale(n, d, "cosine_gradient_optimal") == pytest.approx(best, abs=2e-3)


# --- the traps -------------------------------------------------------------------------------


def test_llama4_step_at_position_8191():
    # floor((pos+1)/8192): pos = 8191 (n = 8192) is already on the first step; floor(pos/8192) would not be.
    r = math.sqrt(128)
    assert sc.attention_scale(8191, 128, "llama4") == pytest.approx(1 / r, rel=1e-15)
    assert sc.attention_scale(8192, 128, "llama4") == pytest.approx((1 + 0.1 * math.log(2)) / r, rel=1e-14)
    assert sc.attention_scale(16384, 128, "llama4") == pytest.approx((1 + 0.1 * math.log(3)) / r, rel=1e-14)


def test_qwen_table_limit():
    r = math.sqrt(128)
    assert sc.attention_scale(32767, 128, "qwen_logn", max_position=32767) == pytest.approx(
        math.log(32767, 8192) / r, rel=1e-14)
    with pytest.raises(ValueError, match="max_position"):
        sc.attention_scale(32768, 128, "qwen_logn", max_position=32767)
    # default: the formula continued
    assert sc.attention_scale(65536, 128, "qwen_logn") == pytest.approx(math.log(65536, 8192) / r, rel=1e-14)
    assert sc.attention_scale(100, 128, "qwen_logn", train_length=64) == pytest.approx(
        math.log(100) / math.log(64) / r, rel=1e-14)


def test_yarn_uses_the_factor_not_the_length():
    r = math.sqrt(64)
    # static factor: constant in n
    out = sc.attention_scale([10, 10_000, 10**6], 64, "yarn", factor=16)
    np.testing.assert_allclose(out, (0.1 * math.log(16) + 1) ** 2 / r, rtol=1e-14)
    # dynamic: s = n / L; at n = L the scale is standard (s = 1), not (0.1 ln L + 1)^2
    assert sc.attention_scale(4096, 64, "yarn") == pytest.approx(1 / r, rel=1e-15)
    with pytest.raises(ValueError, match="factor"):
        sc.attention_scale(100, 64, "yarn", factor=0.5)


def test_ssmax_is_a_multiplication_not_a_shift():
    # Softmax of (s log n) x differs from softmax of x; a shift x - s log n would not.
    x = np.array([0.3, -1.2, 2.0, 0.1])
    n = x.size
    m = sc.attention_scale(n, 1, "ssmax")
    p = np.exp(m * x) / np.exp(m * x).sum()
    shift = np.exp(x - 0.43 * math.log(n)) / np.exp(x - 0.43 * math.log(n)).sum()
    assert m == pytest.approx(0.43 * math.log(4))
    assert not np.allclose(p, shift)


def test_entropy_invariant_pinned_and_variants():
    assert sc.attention_scale(512, 64, "entropy_invariant") == pytest.approx(1 / 8, rel=1e-15)
    assert sc.attention_scale(100, 64, "entropy_invariant") < 1 / 8  # no clamp at 1
    assert sc.attention_scale(8, 64, "entropy_invariant", min_n=16) == pytest.approx(
        math.log(16) / math.log(512) / 8, rel=1e-14)
    assert sc.attention_scale(1000, 64, "entropy_invariant", kappa=0.5) == pytest.approx(
        0.5 * math.log(1000) / 64, rel=1e-14)


def test_clamps_at_100():
    assert sc.attention_scale(10, 64, "clip", scale=500.0) == 100.0
    assert sc.attention_scale(10, 64, "swin_v2", scale=150.0) == 100.0
    assert sc.attention_scale(10, 64, "simclr", temperature=0.5) == pytest.approx(2.0)


def test_scheme_alpha_score_models():
    n, d = 1024, 64
    m = sc.attention_scale(n, d, "chiang_cholak")
    assert sc.scheme_alpha(n, d, "chiang_cholak", "normal") == pytest.approx(m * 8)
    assert sc.scheme_alpha(n, d, "chiang_cholak", "cosine") == pytest.approx(m * 64)
    assert sc.scheme_alpha(n, d, "simcse", "cosine") == pytest.approx(20.0)
    assert sc.scheme_alpha(n, d, "simcse", "normal") == pytest.approx(20.0 / 8)


def test_list_schemes_covers_both_tables():
    rows = sc.list_schemes()
    keys = [r.key for r in rows]
    assert len(keys) == len(set(keys)) == 17
    assert all(r.formula and r.source for r in rows)
    assert {r.applies_to for r in rows} == {"qk", "cosine"}


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"n": 100, "d": 64, "scheme": "nope"}, "scheme"),
        ({"n": 0, "d": 64, "scheme": "standard"}, "n"),
        ({"n": 2.5, "d": 64, "scheme": "standard"}, "n"),
        ({"n": [10, np.nan], "d": 64, "scheme": "standard"}, "n"),
        ({"n": 100, "d": 0, "scheme": "standard"}, "d"),
        ({"n": 100, "d": 64, "scheme": "entropy_invariant", "train_length": 1}, "train_length"),
        ({"n": 100, "d": 64, "scheme": "ssmax", "s": -1.0}, "s"),
        ({"n": 100, "d": 64, "scheme": "simclr", "temperature": 0.0}, "temperature"),
        ({"n": 100, "d": 64, "scheme": "standard", "train_length": 512}, "train_length"),
        ({"n": 100, "d": 64, "scheme": "deepseek_yarn", "factor": float("inf")}, "factor"),
    ],
)
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sc.attention_scale(**kwargs)


def test_bad_score_model():
    with pytest.raises(ValueError, match="score_model"):
        sc.scheme_alpha(100, 64, "standard", "uniform")


def test_gradient_optimal_at_one_key_alone():
    # a query that sees one key: every scale gives the same one-hot softmax; 0 by convention
    import softmax_scale as ss

    assert ss.pinned("gradient_optimal").factor([1], 64).tolist() == [0.0]
    assert ss.attention_scale([1], 64, "cosine_gradient_optimal").tolist() == [0.0]
    assert ss.attention_scale(1, 64, "gradient_optimal") == 0.0

"""The one-key measurement (key_share), its i.i.d. prediction (predict_share), the share's derivative in alpha
(signal_share_slope) and the share rules (share_max, share_factors, share_rule_factors).

The derivative is checked against central differences of ``signal_stats`` and against Monte Carlo of
``dp_0/d alpha = p_0 (s0 - sum p s)``; the maximiser against a dense grid search over ``f`` of
``signal_stats`` (of ``predict_share`` for groups of queries); the hold rule against a plain
``brentq`` on ``signal_stats`` in the regime where the share rises and then falls.
"""

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from softmax_scale import signal_stats
from softmax_scale.distributions import Empirical, WeightedSample
from softmax_scale.entropy.signal import signal_share_slope
from softmax_scale.heads import (
    SHARE_MAX_RULE,
    SHARE_RULE,
    SHARE_RULES,
    key_share,
    predict_share,
    share_factors,
    share_max,
    share_rule_factors,
)


def _naive(s, allowed, source):
    """One head, one query at a time, in plain Python loops."""
    shares, gaps, sds, ns = [], [], [], []
    for q in range(s.shape[0]):
        j = source[q]
        keys = [k for k in range(s.shape[1]) if allowed[q, k]]
        if j < 0 or j not in keys or len(keys) < 2:
            continue
        others = [s[q, k] for k in keys if k != j]
        m = sum(others) / len(others)
        sd = math.sqrt(sum((x - m) ** 2 for x in others) / len(others))
        top = max(s[q, k] for k in keys)
        z = sum(math.exp(s[q, k] - top) for k in keys)
        shares.append(math.exp(s[q, j] - top) / z)
        gaps.append((s[q, j] - m) / sd)
        sds.append(sd)
        ns.append(len(keys))
    return np.mean(shares), np.mean(gaps), np.mean(sds), np.mean(ns), len(shares)


def test_key_share_matches_a_naive_loop_on_a_causal_head():
    gen = np.random.default_rng(3)
    s = gen.standard_normal((2, 3, 12, 12)) * 1.5
    source = np.full(12, -1)
    source[4:] = np.arange(4, 12) - 3
    ks = key_share(s, source, causal=True)
    allowed = np.tril(np.ones((12, 12), dtype=bool))
    for idx in np.ndindex(2, 3):
        share, gap, sd, n, count = _naive(s[idx], allowed, source)
        assert ks.share[idx] == pytest.approx(share, rel=1e-12)
        assert ks.gap[idx] == pytest.approx(gap, rel=1e-12)
        assert ks.alpha[idx] == pytest.approx(sd, rel=1e-12)
        assert ks.n[idx] == pytest.approx(n)
        assert ks.queries[idx] == count


def test_key_share_honours_a_mask_and_skips_a_masked_source():
    gen = np.random.default_rng(4)
    s = gen.standard_normal((10, 10))
    mask = gen.random((10, 10)) < 0.7
    source = gen.integers(0, 10, size=10)
    ks = key_share(s, source, mask=mask)
    share, gap, sd, n, count = _naive(s, mask, source)
    assert ks.share[()] == pytest.approx(share, rel=1e-12)
    assert ks.gap[()] == pytest.approx(gap, rel=1e-12)
    assert ks.queries[()] == count


def test_signal_stats_on_a_sample_agrees_with_monte_carlo():
    gen = np.random.default_rng(5)
    pool = np.concatenate([gen.standard_normal(6000), gen.gumbel(size=2000)])
    pool = (pool - pool.mean()) / pool.std()
    for dist in (Empirical(pool), WeightedSample.from_pool(pool, 3000)):
        ex = signal_stats(2.0, 300, 3.5, dist=dist)
        mc = signal_stats(2.0, 300, 3.5, dist=Empirical(pool), method="mc", trials=6000, rng=1)
        assert abs(ex.share - mc.share) < 4 * mc.share_se
        assert abs(ex.entropy - mc.entropy) < 4 * mc.entropy_se


def test_predict_share_agrees_with_monte_carlo_of_the_same_model():
    gen = np.random.default_rng(6)
    pool = WeightedSample.from_pool(gen.standard_normal(20000) ** 3, 2000)
    alpha, gap, ns, growth = 1.3, 5.0, [64, 512, 2048], [1.0, 1.2, 1.5]
    pred = predict_share(alpha, pool, gap, ns, growth=growth)
    draw = np.random.default_rng(7)
    for p, n, g in zip(pred, ns, growth):
        a = alpha * g
        others = pool.sample((3000, n - 1), rng=draw)
        top = np.maximum(others.max(axis=1), gap)
        e0 = np.exp(a * (gap - top))
        share = e0 / (e0 + np.exp(a * (others - top[:, None])).sum(axis=1))
        assert abs(p - share.mean()) < 4 * share.std(ddof=1) / math.sqrt(share.size)


def test_share_factors_hold_the_share_and_grow_with_n():
    f = share_factors(1.5, "normal", 4.0, 128, [128, 512, 4096])
    target = signal_stats(1.5, 128, 4.0).share
    assert f[0] == pytest.approx(1.0, abs=1e-9)
    for fj, n in zip(f, (128, 512, 4096)):
        assert signal_stats(1.5 * fj, n, 4.0).share == pytest.approx(target, abs=1e-9)
    assert np.all(np.diff(f) > 0)
    assert SHARE_RULE == "toolkit_share"


def test_a_key_below_the_others_is_held_on_the_falling_side():
    # the share only falls with f (its maximum 1/n is at f = 0): the target is met below f = 1
    f = share_factors(1.0, "normal", -1.0, 64, [256])[0]
    target = signal_stats(1.0, 64, -1.0).share
    assert 0.0 < f < 1.0
    assert signal_stats(f, 256, -1.0).share == pytest.approx(target, abs=1e-12)
    best = share_max(1.0, "normal", -1.0, [256])
    assert best.edge[0] and best.factor[0] == pytest.approx(math.exp(-4.0))


def _share(alpha, n, s0, dist="normal"):
    return float(signal_stats(float(alpha), int(n), float(s0), dist=dist).share)


_POOL = WeightedSample.from_pool(np.random.default_rng(8).standard_t(5, 50000), 1024)


@pytest.mark.parametrize("dist, alpha, s0", [("normal", 6.0, 2.0), ("normal", 1.5, 4.0), ("normal", 0.4, -1.0),
                                             (_POOL, 3.0, 2.5), (_POOL, 0.8, 6.0)])
def test_share_slope_is_the_derivative_of_signal_stats(dist, alpha, s0):
    ns = [2, 40, 300, 5000]
    share, slope = signal_share_slope(alpha, ns, s0, dist)
    h = 1e-5
    for j, n in enumerate(ns):
        assert share[j] == pytest.approx(_share(alpha, n, s0, dist), abs=1e-13)
        fd = (_share(alpha + h, n, s0, dist) - _share(alpha - h, n, s0, dist)) / (2 * h)
        assert slope[j] == pytest.approx(fd, abs=1e-9)


def test_share_slope_agrees_with_monte_carlo():
    gen = np.random.default_rng(9)
    pool = Empirical(gen.gumbel(size=500))
    alpha, n, s0, trials = 2.0, 60, 3.0, 40000
    s = pool.sample((trials, n - 1), rng=gen)
    z = np.concatenate([np.full((trials, 1), s0), s], axis=1) * alpha
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    per = p[:, 0] * (s0 - (p[:, 0] * s0 + (p[:, 1:] * s).sum(axis=1)))  # dp_0/d alpha of each draw
    _, slope = signal_share_slope(alpha, [n], s0, pool)
    assert abs(slope[0] - per.mean()) < 4 * per.std(ddof=1) / math.sqrt(trials)
    assert abs(slope[0]) > 8 * per.std(ddof=1) / math.sqrt(trials)  # a test that can tell the sign


def test_share_slope_at_zero_scale_is_the_first_order_term():
    n, s0 = 50, 1.5
    share, slope = signal_share_slope(0.0, [n], s0, "normal")
    assert share[0] == 1.0 / n
    h = 1e-4
    assert slope[0] == pytest.approx((_share(h, n, s0) - _share(0.0, n, s0)) / h, rel=1e-3)


def _grid_max(curve, lo=-4.0, hi=4.0):
    """The largest ``curve(x)`` on a grid of step 1/20 in ``x = ln f``, then on a grid of step 1/1000 around it."""
    xs = np.arange(lo, hi + 1e-9, 1.0 / 20)
    best = xs[int(np.argmax([curve(x) for x in xs]))]
    fine = best + np.arange(-30, 31) / 1000.0
    vals = [curve(x) for x in fine]
    k = int(np.argmax(vals))
    return fine[k], vals[k]


def test_share_max_matches_a_dense_grid_search_where_the_share_rises_then_falls():
    # alpha = 6, s0 = 2: E[p_0] rises from 1/n to a maximum near f = 0.4, then falls to Phi(2)^(n-1)
    ns = [300, 1000]
    res = share_max(6.0, "normal", 2.0, ns)
    for j, n in enumerate(ns):
        x, best = _grid_max(lambda x, n=n: _share(6.0 * math.exp(x), n, 2.0), lo=-3.0, hi=1.0)
        assert math.log(res.factor[j]) == pytest.approx(x, abs=1.5e-3)
        assert best - 1e-12 <= res.share[j] <= best + 1e-8
        assert _share(6.0 * res.factor[j], n, 2.0) == pytest.approx(res.share[j], abs=1e-14)
    assert not res.unbounded.any() and not res.edge.any()
    assert 0.3 < res.factor[1] < res.factor[0] < 0.5


def test_share_max_over_groups_maximises_predict_share():
    alphas, gaps, n = np.array([1.0, 2.5, np.nan]), np.array([1.0, 3.5, np.nan]), 512  # the NaN group is left out
    res = share_max(alphas, _POOL, gaps, [n])
    x, best = _grid_max(lambda x: float(predict_share(alphas, _POOL, gaps, [n], growth=[math.exp(x)])[0]), -1.0, 3.0)
    assert math.log(res.factor[0]) == pytest.approx(x, abs=1.5e-3)
    assert best - 1e-12 <= res.share[0] <= best + 1e-8


def test_share_max_is_unbounded_for_a_key_above_every_score():
    sample = Empirical(np.random.default_rng(10).standard_normal(300))
    s0 = sample.support[1] + 0.3
    res = share_max(1.0, sample, s0, [100, 1000])
    assert res.unbounded.all() and np.all(res.factor == np.inf) and np.all(res.share == 1.0)
    shares = [_share(a, 1000, s0, sample) for a in (1.0, 4.0, 16.0, 64.0)]
    assert np.all(np.diff(shares) > 0) and shares[-1] > 0.99  # rises towards 1
    below = share_max(1.0, sample, sample.support[1] - 0.3, [1000])  # a key below the sample's largest: bounded
    assert not below.unbounded[0] and np.isfinite(below.factor[0])


def test_share_max_flags_a_share_that_still_rises_past_the_range():
    # s0 = 3 among 361 normal keys: the share rises to Phi(3)^361 = 0.614 without a maximum; at 2047 keys it has one
    res = share_max(4.0, "normal", 3.0, [362, 2048])
    assert res.edge[0] and res.factor[0] == pytest.approx(math.exp(4.0)) and not res.unbounded[0]
    shares = [_share(4.0 * math.exp(x), 362, 3.0) for x in (2.0, 3.0, 4.0, 5.0)]
    assert np.all(np.diff(shares) > 0)
    assert not res.edge[1] and 1.0 < res.factor[1] < 3.0


def test_the_hold_rule_takes_the_root_on_the_heads_side_where_two_exist():
    # at n_ref = 256 the head (alpha = 6) is past the maximum, on the falling side
    alpha, s0, n_ref, n = 6.0, 2.0, 256, 300
    target = _share(alpha, n_ref, s0)
    h = 1e-5
    assert _share(alpha + h, n_ref, s0) < _share(alpha - h, n_ref, s0)  # falling at n_ref
    f_top = share_max(alpha, "normal", s0, [n]).factor[0]

    def g(f):
        return _share(f * alpha, n, s0) - target

    low, high = brentq(g, 0.05, f_top, xtol=1e-13), brentq(g, f_top, 1.0, xtol=1e-13)  # the two roots
    f = share_factors(alpha, "normal", s0, n_ref, [n_ref, n])
    assert f[0] == 1.0
    assert f[1] == pytest.approx(high, rel=1e-8)
    assert 0.75 < f[1] < 0.85 and low < 0.3


def test_the_hold_rule_clips_an_unreachable_target_to_the_maximum():
    alpha, s0, n_ref, ns = 6.0, 2.0, 256, [1000, 4096]
    target = _share(alpha, n_ref, s0)
    best = share_max(alpha, "normal", s0, ns)
    for j, n in enumerate(ns):
        _, top = _grid_max(lambda x, n=n: _share(alpha * math.exp(x), n, s0), lo=-2.0, hi=0.0)
        assert top < target  # out of reach at n
    assert np.array_equal(share_factors(alpha, "normal", s0, n_ref, ns), best.factor)


def test_the_hold_rule_on_groups_holds_the_mean_share():
    alphas, gaps, n_ref, n = np.array([1.0, 1.6]), np.array([3.0, 4.5]), 128, 400
    f = share_factors(alphas, _POOL, gaps, n_ref, [n])[0]
    target = float(predict_share(alphas, _POOL, gaps, [n_ref])[0])
    assert float(predict_share(alphas, _POOL, gaps, [n], growth=[f])[0]) == pytest.approx(target, abs=1e-9)
    assert f > 1.0


def test_share_rule_factors_names_both_rules():
    assert SHARE_RULES == (SHARE_RULE, SHARE_MAX_RULE) == ("toolkit_share", "toolkit_share_max")
    ns, sample = [300], Empirical(np.linspace(-1.0, 1.0, 50))
    assert np.array_equal(share_rule_factors(SHARE_RULE, 6.0, sample, 0.8, ns, n_ref=256),
                          share_factors(6.0, sample, 0.8, 256, ns))
    best = share_max(6.0, sample, 0.8, ns)
    assert np.isfinite(best.factor).all() and not best.edge.any()
    assert np.array_equal(share_rule_factors(SHARE_MAX_RULE, 6.0, sample, 0.8, ns), best.factor)
    assert np.all(share_rule_factors(SHARE_MAX_RULE, 1.0, sample, 1.5, ns) == math.exp(4.0))  # inf given as e^4


@pytest.mark.parametrize("call, name", [
    (lambda: key_share(np.zeros((4, 4)) + np.arange(4), np.full(4, 7)), "source"),
    (lambda: key_share(np.zeros((4, 4)) + np.arange(4), np.full(4, 1.0)), "source"),
    (lambda: key_share(np.zeros((4, 4)) + np.arange(4), np.zeros(3, dtype=int)), "source"),
    (lambda: predict_share(0.0, "normal", 2.0, [10]), "alpha"),
    (lambda: predict_share(1.0, "normal", float("nan"), [10]), "gap"),
    (lambda: share_factors(1.0, "normal", float("inf"), 10, [20]), "s0"),
    (lambda: share_factors(1.0, "normal", 1.0, 1, [20]), "n_ref"),
    (lambda: share_factors([1.0, 2.0], "normal", [1.0], 10, [20]), "s0"),
    (lambda: share_max([1.0, np.nan], "normal", [np.nan, 2.0], [20]), "s0"),
    (lambda: share_max(-1.0, "normal", 2.0, [20]), "alpha"),
    (lambda: share_max(1.0, "normal", "2", [20]), "s0"),
    (lambda: share_max(1.0, "normal", 2.0, [1]), "ns"),
    (lambda: share_rule_factors("toolkit_iid", 1.0, "normal", 2.0, [20]), "rule"),
    (lambda: share_rule_factors(SHARE_RULE, 1.0, "normal", 2.0, [20]), "n_ref"),
    (lambda: share_rule_factors(SHARE_MAX_RULE, 1.0, "normal", 2.0, [20], n_ref=10), "n_ref"),
    (lambda: signal_share_slope(1.0, [20], float("nan")), "s0"),
    (lambda: signal_share_slope(-1.0, [20], 1.0), "alpha"),
    (lambda: signal_share_slope(1.0, [1], 1.0), "ns"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()

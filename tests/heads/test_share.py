"""The one-key measurement (key_share), its i.i.d. prediction (predict_share) and the share-holding rule."""

import math

import numpy as np
import pytest

from softmax_scale import signal_stats
from softmax_scale.distributions import Empirical, WeightedSample
from softmax_scale.heads import SHARE_RULE, key_share, predict_share, share_factors


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


def test_share_factors_are_nan_for_a_key_below_the_others():
    f = share_factors(1.0, "normal", -1.0, 64, [256])
    assert np.isnan(f[0])


@pytest.mark.parametrize("call, name", [
    (lambda: key_share(np.zeros((4, 4)) + np.arange(4), np.full(4, 7)), "source"),
    (lambda: key_share(np.zeros((4, 4)) + np.arange(4), np.full(4, 1.0)), "source"),
    (lambda: key_share(np.zeros((4, 4)) + np.arange(4), np.zeros(3, dtype=int)), "source"),
    (lambda: predict_share(0.0, "normal", 2.0, [10]), "alpha"),
    (lambda: predict_share(1.0, "normal", float("nan"), [10]), "gap"),
    (lambda: share_factors(1.0, "normal", float("inf"), 10, [20]), "s0"),
    (lambda: share_factors(1.0, "normal", 1.0, 1, [20]), "n_ref"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()

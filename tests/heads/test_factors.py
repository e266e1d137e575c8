"""Each head's factor from ``head_stats`` inside ``L`` (:func:`softmax_scale.head_factors`), against independent computations.

- synthetic heads of i.i.d. normal scores: the scale and the entropy slope computed here from the raw
  scores with numpy, the factors then from :func:`softmax_scale.heads.rule_factors` directly;
- invariants: a factor of 1 at ``n = L`` under both rules, and under ``toolkit_measured`` for a head
  whose measured entropy does not move;
- bad input names the parameter.
"""

import dataclasses
import math

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale.heads import TOOLKIT_RULES, head_pools, rule_factors

L = 256
LENGTHS = (64, 128, 256)
SCALES = (0.7, 1.5, 2.5)  # one head each
NS = np.array([256.0, 512.0, 2048.0])


def _logits(n, rng, queries=48):
    return np.stack([a * rng.standard_normal((queries, n)) for a in SCALES])


@pytest.fixture(scope="module")
def measured():
    rng = np.random.default_rng(7)
    logits = {n: _logits(n, rng) for n in LENGTHS}
    stats = [ss.head_stats(logits[n], predict=False) for n in LENGTHS]
    return logits, stats


def _by_hand(logits):
    """Per head: the scale ``sigma sqrt(n/(n-1))`` at the longest length and the least-squares slope of H on ln n."""
    entropies, x = [], []
    for n, s in logits.items():
        z = s - s.max(axis=-1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
        entropies.append(-(p * np.log(p)).sum(axis=-1).mean(axis=-1))
        x.append(math.log(n))
    e, x = np.array(entropies), np.array(x)
    slope = ((x - x.mean())[:, None] * (e - e.mean(axis=0))).sum(axis=0) / ((x - x.mean()) ** 2).sum()
    longest = logits[max(logits)]
    n = longest.shape[-1]
    alpha = longest.std(axis=-1).mean(axis=-1) * math.sqrt(n / (n - 1))
    return alpha, slope


@pytest.mark.parametrize("rule", TOOLKIT_RULES)
def test_factors_are_the_rules_on_the_scale_and_slope_computed_from_the_scores(measured, rule):
    logits, stats = measured
    alpha, slope = _by_hand(logits)
    got = ss.head_factors(stats, train_length=L, n=NS).factors[rule]
    want = np.array([rule_factors(rule, float(alpha[h]), "normal", L, NS,
                                  **({"slope": float(slope[h])} if rule == "toolkit_measured" else {}))
                     for h in range(len(SCALES))])
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_scale_and_slope_are_those_computed_from_the_scores(measured):
    logits, stats = measured
    alpha, slope = _by_hand(logits)
    table = ss.head_factors(stats, train_length=L, n=NS)
    np.testing.assert_allclose(table.alpha, alpha, rtol=1e-12)
    np.testing.assert_allclose(table.slope, slope, rtol=1e-9)


@pytest.mark.parametrize("rule", TOOLKIT_RULES)
def test_the_factor_is_one_at_the_training_length(measured, rule):
    _, stats = measured
    np.testing.assert_allclose(ss.head_factors(stats, train_length=L, n=L).factors[rule], 1.0, atol=1e-9)


def test_a_head_whose_entropy_does_not_move_keeps_its_scale_under_the_measured_rule(measured):
    _, stats = measured
    flat = [dataclasses.replace(s, entropy=stats[-1].entropy) for s in stats]
    np.testing.assert_allclose(ss.head_factors(flat, train_length=L, n=NS).factors["toolkit_measured"], 1.0,
                               atol=1e-9)


def test_the_iid_factor_grows_with_n_for_iid_heads(measured):
    _, stats = measured
    f = ss.head_factors(stats, train_length=L, n=NS).factors["toolkit_iid"]
    assert np.all(np.diff(f, axis=-1) > 0)


def test_pools_give_the_rules_on_each_heads_own_scores(measured):
    logits, stats = measured
    pools = head_pools(logits[L])
    table = ss.head_factors(stats, train_length=L, n=2048, pools=pools)
    want = [rule_factors("toolkit_iid", float(table.alpha[h]), pools[h], L, [2048])[0] for h in range(len(SCALES))]
    np.testing.assert_allclose(table.factors["toolkit_iid"], want, rtol=1e-9)


def test_pools_are_named_in_the_result(measured):
    logits, stats = measured
    assert ss.head_factors(stats, train_length=L, n=2048, pools=head_pools(logits[L])).score_model == "pooled"


def test_a_number_n_gives_one_factor_per_head(measured):
    _, stats = measured
    assert ss.head_factors(stats, train_length=L, n=2048).factors["toolkit_iid"].shape == (len(SCALES),)


def test_the_result_is_frozen(measured):
    _, stats = measured
    table = ss.head_factors(stats, train_length=L, n=2048)
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.train_length = 1


@pytest.mark.parametrize(("args", "kwargs", "error", "needle"), [
    ("one", {}, ValueError, "`stats`"),
    ("same_length", {}, ValueError, "different lengths"),
    ("beyond", {}, ValueError, "inside the training length"),
    ("shapes", {}, ValueError, "one shape"),
    ("ok", {"n": 1}, ValueError, "`n`"),
    ("ok", {"train_length": 1}, ValueError, "`train_length`"),
    ("ok", {"pools": [None]}, ValueError, "`pools`"),
    ("ok", {"pools": [1, 2, 3]}, TypeError, "`pools`"),
    ("not_stats", {}, TypeError, "`stats`"),
])
def test_bad_input_names_the_parameter(measured, args, kwargs, error, needle):
    logits, stats = measured
    given = {"one": stats[:1], "same_length": [stats[0], stats[0]], "beyond": stats, "ok": stats,
             "shapes": [stats[0], ss.head_stats(logits[L][:2], predict=False)], "not_stats": [stats[0], 3]}[args]
    call = {"train_length": 128 if args == "beyond" else L, "n": 2048, **kwargs}
    with pytest.raises(error, match=needle):
        ss.head_factors(given, **call)


# ---------------------------------------------------------------------------------------------
# never below 1 inside L; the factor at every position


@pytest.mark.parametrize("rule", TOOLKIT_RULES)
def test_a_target_inside_l_gets_1_where_the_rule_alone_gives_no_factor_of_1_or_more(measured, rule):
    _, stats = measured
    table = ss.head_factors(stats, train_length=L, n=[64, 128, 512])
    kw = {"slope": float(table.slope[0])} if rule == "toolkit_measured" else {}
    raw = rule_factors(rule, float(table.alpha[0]), "normal", L, [64, 128], **kw)
    assert not np.any(raw >= 1.0)  # with fewer keys than L the rule asks for less than 1, or has no answer (NaN)
    assert np.all(table.factors[rule][:, :2] == 1.0)
    assert np.all(table.factors[rule][:, 2] > 1.0)


def test_the_factor_at_each_position_is_1_up_to_l_then_log_linear_in_log_n(measured):
    _, stats = measured
    table = ss.head_factors(stats, train_length=L, n=[512, 2048])
    f = table.factors["toolkit_iid"]
    positions = [1, 100, L, 2 * L, int(round(math.sqrt(L * 2 * L))), 4 * L, 8 * L, 64 * L]
    got = table.at(positions, "toolkit_iid")
    assert got.shape == (len(SCALES), len(positions))
    np.testing.assert_array_equal(got[:, :3], 1.0)
    np.testing.assert_allclose(got[:, 3], f[:, 0], rtol=1e-15)
    mid = f[:, 0] ** (math.log(positions[4] / L) / math.log(2.0))  # ln f linear from (L, 0) to (2L, ln f)
    np.testing.assert_allclose(got[:, 4], mid, rtol=1e-12)
    np.testing.assert_allclose(got[:, 5], np.sqrt(f[:, 0] * f[:, 1]), rtol=1e-12)  # 4L: halfway from 2L to 8L
    np.testing.assert_allclose(got[:, 6], f[:, 1], rtol=1e-15)
    np.testing.assert_allclose(got[:, 7], f[:, 1], rtol=1e-15)  # held past the last target


def test_the_factor_at_each_position_names_a_bad_rule(measured):
    _, stats = measured
    with pytest.raises(ValueError, match="`rule`"):
        ss.head_factors(stats, train_length=L, n=[512]).at([600], "toolkit_share")


# ---------------------------------------------------------------------------------------------
# the factors' standard errors, by a bootstrap over the queries


def _heads_logits(rng, queries=24, lengths=(64, 128), scales=(0.7, 1.5)):
    return [np.stack([a * rng.standard_normal((queries, n)) for a in scales]) for n in lengths]


def test_the_bootstrap_error_is_0_inside_l_positive_past_it_and_seeded():
    logits = _heads_logits(np.random.default_rng(3))
    err = ss.head_factor_errors(logits, 128, [128, 512], resamples=6, rng=1)
    assert set(err) == set(TOOLKIT_RULES)
    for rule in TOOLKIT_RULES:
        assert err[rule].shape == (2, 2)
        np.testing.assert_array_equal(err[rule][:, 0], 0.0)
        assert np.all(err[rule][:, 1] > 0)
    again = ss.head_factor_errors(logits, 128, [128, 512], resamples=6, rng=1)
    np.testing.assert_array_equal(again["toolkit_iid"], err["toolkit_iid"])


@pytest.mark.slow
def test_the_bootstrap_error_is_the_spread_of_the_factor_over_fresh_queries():
    rng = np.random.default_rng(11)
    fresh = []
    for _ in range(40):  # the sampling distribution itself: new queries from the same heads
        stats = [ss.head_stats(x, predict=False) for x in _heads_logits(rng)]
        fresh.append(ss.head_factors(stats, 128, 512).factors["toolkit_iid"])
    want = np.std(fresh, axis=0, ddof=1)
    got = ss.head_factor_errors(_heads_logits(rng), 128, 512, resamples=60, rng=0)["toolkit_iid"]
    assert np.all((got > want / 2) & (got < want * 2)), (got, want)

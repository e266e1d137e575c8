"""The toolkit's per-head rules (:func:`softmax_scale.heads.rule_factors`) against independent computations.

- each rule's factor solves its equation on the exact evaluator: checked by a plain scipy
  root-finder on :func:`softmax_scale.exact_stats` (a different entry to the engine, a different
  bracket and solver);
- the factor holds the i.i.d. entropy by Monte Carlo too (softmaxes of scores drawn from the sample);
- invariants: a factor of exactly 1 at ``n = n_ref`` and for a head whose entropy does not drift;
- NaN where no factor exists or the evaluator cannot answer; bad input names the parameter.
"""

import math

import numpy as np
import pytest
from scipy.optimize import brentq

import softmax_scale as ss
from softmax_scale.distributions import get_distribution
from softmax_scale.heads import TOOLKIT_RULES, exact_entropy, rule_factors


def _pool(kind, rng, size=40000):
    x = {"normal": rng.standard_normal, "t5": lambda m: rng.standard_t(5, m), "gumbel": lambda m: rng.gumbel(size=m)}[kind](size)
    return ss.WeightedSample.from_pool((x - x.mean()) / x.std(), 1024)


RNG = np.random.default_rng(2026)
HEADS = [  # (score distribution, alpha at n_ref, n_ref)
    (_pool("normal", RNG), 1.2, 192),
    (_pool("t5", RNG), 1.8, 96),
    (_pool("gumbel", RNG), 0.7, 384),
]
NS = [256, 724, 1536]


def _entropy(alpha, n, dist):
    return float(ss.exact_stats(alpha, n, dist, error_estimate=False).entropy)


def _plain_root(target, alpha, n, dist):
    """``f`` with ``exact_stats(f alpha, n).entropy == target``: brentq on a wide bracket in ``f``."""
    return brentq(lambda f: _entropy(f * alpha, n, dist) - target, 0.05, 20.0, xtol=1e-13, rtol=1e-14)


@pytest.mark.parametrize("head", range(len(HEADS)))
def test_toolkit_iid_solves_its_equation_on_the_exact_evaluator(head):
    dist, alpha, n_ref = HEADS[head]
    f = rule_factors("toolkit_iid", alpha, dist, n_ref, NS)
    target = _entropy(alpha, n_ref, dist)
    for j, n in enumerate(NS):
        assert f[j] == pytest.approx(_plain_root(target, alpha, n, dist), rel=1e-9)


@pytest.mark.parametrize("slope", [0.25, -0.1, 0.6])
def test_toolkit_measured_solves_its_equation_on_the_exact_evaluator(slope):
    dist, alpha, n_ref = HEADS[1]
    f = rule_factors("toolkit_measured", alpha, dist, n_ref, NS, slope=slope)
    for j, n in enumerate(NS):
        goal = _entropy(alpha, n, dist) - slope * math.log(n / n_ref)
        goal = min(max(goal, 1e-3), math.log(n) - 1e-3)
        assert f[j] == pytest.approx(_plain_root(goal, alpha, n, dist), rel=1e-9)


def test_the_factor_holds_the_entropy_by_monte_carlo():
    """Softmaxes of ``n`` scores drawn from the head's sample at ``f alpha``: mean entropy at the target."""
    rng = np.random.default_rng(7)
    trials = 4000
    for dist, alpha, n_ref in HEADS[:2]:
        n = 724
        f = rule_factors("toolkit_iid", alpha, dist, n_ref, [n])[0]
        s = f * alpha * rng.choice(dist.x, p=dist.w, size=(trials, n))
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        h = -np.sum(p * np.log(p), axis=1)
        target = _entropy(alpha, n_ref, dist)
        assert abs(h.mean() - target) < 4.0 * h.std(ddof=1) / math.sqrt(trials)


def test_a_factor_of_one_where_nothing_is_to_be_corrected():
    dist, alpha, n_ref = HEADS[0]
    assert rule_factors("toolkit_iid", alpha, dist, n_ref, [n_ref])[0] == 1.0
    # a head whose measured entropy does not drift keeps its i.i.d. entropy at every n: f = 1
    assert np.all(rule_factors("toolkit_measured", alpha, dist, n_ref, NS, slope=0.0) == 1.0)


def test_the_iid_factor_grows_with_n_for_normal_scores():
    f = rule_factors("toolkit_iid", 1.0, "normal", 64, [128, 256, 512, 1024, 4096])
    assert np.all(np.diff(f) > 0)
    assert np.all(f > 1.0)


def test_nan_where_no_factor_exists_or_the_evaluator_refuses():
    # E[H](alpha, 1000) = 6.9 nats cannot be reached with 10 keys (log 10 = 2.3): no factor
    f = rule_factors("toolkit_iid", 0.1, "normal", 1000, [10, 2000])
    assert np.isnan(f[0])
    assert np.isfinite(f[1])
    # a sample with a huge spread at a huge scale: the quadrature refuses, the head gets NaN
    wide = get_distribution(np.array([-1e6, 0.0, 1e6]))
    assert np.all(np.isnan(rule_factors("toolkit_iid", 1e6, wide, 64, [128, 256])))
    assert np.isnan(exact_entropy(1e6, 100, wide))


def test_exact_entropy_refuses_bad_arguments_and_turns_only_the_evaluators_refusal_into_nan():
    assert exact_entropy(1.0, 100, "normal") == _entropy(1.0, 100, "normal")
    for args, name in (((-1.0, 100, "normal"), "alpha"), ((1.0, 1, "normal"), "n"), ((1.0, 100, "nope"), "dist")):
        with pytest.raises(ValueError, match=f"`{name}`"):
            exact_entropy(*args)


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        (("nope", 1.0, "normal", 64, NS), {}, "rule"),
        (("toolkit_iid", 0.0, "normal", 64, NS), {}, "alpha"),
        (("toolkit_iid", -1.0, "normal", 64, NS), {}, "alpha"),
        (("toolkit_iid", float("nan"), "normal", 64, NS), {}, "alpha"),
        (("toolkit_iid", 1.0, "nope", 64, NS), {}, "dist"),
        (("toolkit_iid", 1.0, "normal", 1, NS), {}, "n_ref"),
        (("toolkit_iid", 1.0, "normal", 64.5, NS), {}, "n_ref"),
        (("toolkit_iid", 1.0, "normal", 64, [1, 128]), {}, "ns"),
        (("toolkit_iid", 1.0, "normal", 64, []), {}, "ns"),
        (("toolkit_iid", 1.0, "normal", 64, NS), {"slope": 0.1}, "slope"),
        (("toolkit_measured", 1.0, "normal", 64, NS), {}, "slope"),
        (("toolkit_measured", 1.0, "normal", 64, NS), {"slope": float("nan")}, "slope"),
    ],
)
def test_bad_input_names_the_parameter(args, kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        rule_factors(*args, **kwargs)


@pytest.mark.parametrize("rule", TOOLKIT_RULES)
def test_wrong_types_raise_type_error_naming_the_parameter(rule):
    with pytest.raises(TypeError, match="`alpha`"):
        rule_factors(rule, "1.0", "normal", 64, NS, **({"slope": 0.1} if rule == "toolkit_measured" else {}))
    with pytest.raises(TypeError, match="`n_ref`"):
        rule_factors(rule, 1.0, "normal", "64", NS, **({"slope": 0.1} if rule == "toolkit_measured" else {}))
    with pytest.raises(TypeError, match="`ns`"):
        rule_factors(rule, 1.0, "normal", 64, ["a"], **({"slope": 0.1} if rule == "toolkit_measured" else {}))
    if rule == "toolkit_measured":
        with pytest.raises(TypeError, match="`slope`"):
            rule_factors(rule, 1.0, "normal", 64, NS, slope="0.1")

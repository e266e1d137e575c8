"""The i.i.d. cost of a factor on q.k against Monte Carlo (with a negative control), and its invariants."""

import numpy as np
import pytest

from softmax_scale.engines.cost import iid_cost

TRIALS, N = 400, 1024


def mc_kl(alpha, ratio, rng, *, sign=1.0):
    """KL(p_a || p_{r a}) and the entropy change averaged over draws of N normal scores, with their standard errors."""
    z = rng.standard_normal((TRIALS, N))
    x, y = alpha * z, sign * ratio * alpha * z
    lp = x - np.logaddexp.reduce(x, axis=1, keepdims=True)
    lq = y - np.logaddexp.reduce(y, axis=1, keepdims=True)
    p, q = np.exp(lp), np.exp(lq)
    kl = (p * (lp - lq)).sum(axis=1)
    dh = -(q * lq).sum(axis=1) + (p * lp).sum(axis=1)
    se = lambda v: v.std(ddof=1) / np.sqrt(v.size)  # noqa: E731
    return kl.mean(), se(kl), dh.mean(), se(dh)


@pytest.mark.parametrize("alpha, ratio", [(0.7, 1.2965), (1.5, 1 / 1.2965), (3.0, 1.8739)])
def test_the_exact_cost_is_the_monte_carlo_mean(alpha, ratio):
    c = iid_cost(alpha, N, ratio)
    kl, kl_se, dh, dh_se = mc_kl(alpha, ratio, np.random.default_rng(0))
    assert abs(float(c.kl) - kl) < 4 * kl_se
    assert abs(float(c.delta_entropy) - dh) < 4 * dh_se


def test_a_wrong_kl_fails_the_same_check():
    """Negative control: the KL towards the other direction's row (sign flipped) is far outside 4 SE."""
    c = iid_cost(1.5, N, 1.2965)
    kl, kl_se, _, _ = mc_kl(1.5, 1.2965, np.random.default_rng(0), sign=-1.0)
    assert abs(float(c.kl) - kl) > 4 * kl_se


def test_invariants():
    alpha = np.array([0.5, 1.0, 2.0, 4.0])
    up, down, same = iid_cost(alpha, 4096, 1.3), iid_cost(alpha, 4096, 1 / 1.3), iid_cost(alpha, 4096, 1.0)
    assert np.all(up.kl > 0)
    assert np.all(down.kl > 0)
    assert np.all(up.delta_entropy < 0)
    assert np.all(down.delta_entropy > 0)
    assert np.all(same.kl == 0)
    assert np.all(same.delta_entropy == 0)
    assert np.all(np.diff(iid_cost(1.0, 4096, [1.1, 1.3, 1.6]).kl) > 0)


@pytest.mark.parametrize("kw, name", [({"alpha": 0.0}, "alpha"), ({"alpha": np.nan}, "alpha"), ({"ratio": -1.0}, "ratio"),
                                      ({"n": 1}, "n")])
def test_bad_input_names_the_parameter(kw, name):
    args = {"alpha": 1.0, "n": 64, "ratio": 1.2, **kw}
    with pytest.raises(ValueError, match=f"`{name}`"):
        iid_cost(args["alpha"], args["n"], args["ratio"])

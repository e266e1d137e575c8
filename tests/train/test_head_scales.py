"""The toolkit's per-head scale on a model the harness trains: each head measured inside ``L``, a factor past it.

The rules themselves are checked against independent computations in ``tests/heads/test_rules.py``;
here, that :func:`~softmax_scale.train.head_scales.head_factors` measures the heads and applies
them as stated, and that :func:`~softmax_scale.train.head_scales.position_factors` spreads the
factors over the query positions.
"""

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import softmax_scale as ss  # noqa: E402
from softmax_scale.heads import head_stats  # noqa: E402
from softmax_scale.train import TrainConfig  # noqa: E402
from softmax_scale.train.evaluation import attention_scores  # noqa: E402
from softmax_scale.train.head_scales import factor_grid, head_factors, position_factors, query_rows  # noqa: E402
from softmax_scale.train.loop import train_model  # noqa: E402


@pytest.fixture(scope="module")
def trained():
    cfg = TrainConfig(objective="causal", scheme="standard", ffn="swiglu", train_length=8, layers=2, d_model=16,
                      heads=2, d_ff=24, batch=4, steps=12, warmup=2, lr=3e-3, rope_base=100.0)
    return cfg, train_model(cfg, rng=0, progress=False).params


@pytest.fixture(scope="module")
def factors(trained):
    cfg, p = trained
    return head_factors(p, cfg, windows=4, longest=4 * cfg.train_length, sample_size=256)


def _entropy(alpha, n, dist):
    return float(ss.exact_stats(alpha, n, dist, error_estimate=False).entropy)


def test_the_grid_past_L():
    assert factor_grid(8, 32).tolist() == [11, 16, 23, 32]  # L sqrt(2)^k
    assert factor_grid(64, 91).tolist() == [round(64 * math.sqrt(2))]
    assert factor_grid(64, 90).tolist() == []


def test_each_head_is_measured_on_the_queries_just_below_L(trained, factors):
    cfg, p = trained
    L = cfg.train_length
    s = attention_scores(p, cfg, L, windows=4, rope="none")
    logits, mask = query_rows(s, L // 2, L, 4)
    st = head_stats(logits, mask=mask, predict=False)
    np.testing.assert_array_equal(factors.sigma, st.sigma)
    n_ref = np.mean(np.arange(L // 2, L) + 1)  # keys of the queries L/2 .. L-1
    np.testing.assert_allclose(factors.alpha, st.sigma * math.sqrt(n_ref / (n_ref - 1)), rtol=1e-15)


def test_toolkit_iid_holds_each_heads_iid_entropy_at_its_value_at_L(trained, factors):
    cfg, _ = trained
    L = cfg.train_length
    f = factors.factors["toolkit_iid"]
    assert np.all(np.isfinite(f))
    for h, idx in enumerate(np.ndindex(cfg.layers, cfg.heads)):
        dist, a = factors.pools[h], float(factors.alpha[idx])
        assert factors.predicted[idx] == pytest.approx(_entropy(a, L, dist), abs=1e-12)
        for j, n in enumerate(factors.ns):
            assert _entropy(float(f[idx][j]) * a, int(n), dist) == pytest.approx(factors.predicted[idx], abs=1e-9)


def test_toolkit_measured_cancels_the_measured_drift(trained, factors):
    cfg, _ = trained
    L = cfg.train_length
    f = factors.factors["toolkit_measured"]
    for h, idx in enumerate(np.ndindex(cfg.layers, cfg.heads)):
        dist, a = factors.pools[h], float(factors.alpha[idx])
        for j, n in enumerate(factors.ns):
            goal = _entropy(a, int(n), dist) - factors.slope[idx] * math.log(n / L)
            goal = min(max(goal, 1e-3), math.log(n) - 1e-3)
            assert _entropy(float(f[idx][j]) * a, int(n), dist) == pytest.approx(goal, abs=1e-9)


def test_position_factors(trained, factors):
    cfg, _ = trained
    L = cfg.train_length
    pf = position_factors(factors, "toolkit_measured", 4 * L)
    assert pf.shape == (cfg.layers, cfg.heads, 4 * L)
    assert pf.dtype == np.float32
    assert np.all(pf[..., :L] == 1.0)
    np.testing.assert_allclose(pf[..., 15], factors.factors["toolkit_measured"][..., 1], rtol=1e-6)  # n = 16 keys
    # between grid points ln f is linear in ln n, from f = 1 at n = L
    x = np.log([L, 11.0])
    y = np.log([np.ones(factors.sigma.shape), factors.factors["toolkit_measured"][..., 0]])
    want = np.exp(y[0] + (y[1] - y[0]) * (math.log(10.0) - x[0]) / (x[1] - x[0]))
    np.testing.assert_allclose(pf[..., 9], want, rtol=1e-6)  # the query at position 9 sees 10 keys


def test_bad_input(trained, factors):
    cfg, p = trained
    with pytest.raises(ValueError, match="`rule`"):
        position_factors(factors, "nope", 16)
    with pytest.raises(ValueError, match="`length`"):
        position_factors(factors, "toolkit_iid", 0)
    with pytest.raises(ValueError, match="`config`"):
        head_factors(p, cfg.replace(scheme="entropy_invariant"))
    with pytest.raises(ValueError, match="`longest`"):
        head_factors(p, cfg, longest=cfg.train_length)

"""FIRST's model (softmax_scale.train.first) against a naive numpy forward on tiny weights, its training and its inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import naive_first

pytest.importorskip("jax")

from softmax_scale.train.first import FIRST_SCALES, FirstModel, first_factors, first_forward, first_logits, init_first, train_first
from softmax_scale.train.tasks import first_batch


def _naive(params, inputs, factors, heads, eps):
    z, _, scores = naive_first(params, inputs, factors, heads, eps)
    return z, scores


def _tiny(scheme="standard", heads=1):
    m = FirstModel(6, scheme, d_model=8, d_ff=12, heads=heads)
    p = init_first(m, 3)
    gen = np.random.default_rng(9)
    for layer in p["layers"]:  # layers differ and every bias and gain is in play
        for k in layer:
            layer[k] = layer[k] + (0.3 * gen.standard_normal(layer[k].shape)).astype(np.float32)
    return m, p


@pytest.mark.parametrize("scheme, heads", [("standard", 1), ("ssmax", 1), ("chiang_cholak", 2)])
def test_the_model_is_the_naive_forward(scheme, heads):
    m, p = _tiny(scheme, heads)
    batch = first_batch(9, 5, np.random.default_rng(1))
    f = first_factors(m, 9)
    want_z, want_s = _naive(p, batch.inputs, f.astype(np.float64), m.heads, m.eps)
    import jax.numpy as jnp

    z, scores = first_forward(p, jnp.asarray(batch.inputs), jnp.asarray(f), heads=m.heads, eps=m.eps,
                              return_scores=True)
    np.testing.assert_allclose(np.asarray(z), want_z, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(scores)[:, :, :, 0, :], want_s, rtol=1e-4, atol=1e-4)


def test_first_logits_deduplicates_without_changing_the_answer():
    """Distinct (first bit, count of ones) run once: the logits and the query-0 scores are the naive forward's."""
    m, p = _tiny()
    batch = first_batch(7, 40, np.random.default_rng(2))  # 40 sequences, at most 2 x 7 distinct pairs
    per_head = np.stack([first_factors(m, 7) * 1.3, first_factors(m, 7) * 0.8])[:, None, :]
    want_z, want_s = _naive(p, batch.inputs, per_head.astype(np.float64), m.heads, m.eps)
    z, s = first_logits(p, m, batch.inputs, per_head, chunk=4)
    np.testing.assert_allclose(z, want_z, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s, want_s, rtol=1e-4, atol=1e-4)


def test_the_permutation_argument_can_fail():
    """Negative control: with the mark moved off the first bit the answer is no longer the canonical sequence's."""
    m, p = _tiny()
    batch = first_batch(7, 3, np.random.default_rng(2))
    z, _ = first_logits(p, m, batch.inputs)
    swapped = batch.inputs.copy()
    swapped[:, [1, 2]] = swapped[:, [2, 1]]  # first bit exchanged with the second
    differs = swapped[:, 1] != batch.inputs[:, 1]
    assert differs.any()
    z2, _ = first_logits(p, m, swapped)
    assert np.all(np.abs(z2[differs] - z[differs]) > 1e-6)


def test_the_factors_are_the_registry_scales():
    L, n = 10, 1000
    assert first_factors(FirstModel(L, "standard"), n) == pytest.approx(np.ones(n + 1))
    np.testing.assert_allclose(first_factors(FirstModel(L, "chiang_cholak"), n), math.log(n + 1), rtol=1e-6)
    np.testing.assert_allclose(first_factors(FirstModel(L, "entropy_invariant"), n), math.log(n + 1) / math.log(L + 1),
                               rtol=1e-6)
    np.testing.assert_allclose(first_factors(FirstModel(L, "entropy_invariant"), L), 1.0, rtol=1e-6)
    np.testing.assert_allclose(first_factors(FirstModel(L, "ssmax"), n), math.log(n + 1), rtol=1e-6)  # times s
    np.testing.assert_allclose(first_factors(FirstModel(L, "standard"), n, scheme="qwen_logn"),
                               math.log(n + 1) / math.log(L + 1), rtol=1e-6)


def test_ssmax_starts_at_one_over_ln_of_the_training_keys():
    p = init_first(FirstModel(30, "ssmax"), 0)
    assert p["layers"][0]["s"] == pytest.approx([1 / math.log(31)])


def test_same_seed_same_start_and_data_whatever_the_scale():
    a, b = init_first(FirstModel(10, "standard"), 4), init_first(FirstModel(10, "ssmax"), 4)
    np.testing.assert_array_equal(a["layers"][1]["wq"], b["layers"][1]["wq"])
    np.testing.assert_array_equal(a["layers"][0]["wq"], a["layers"][1]["wq"])  # torch copies its one layer


def test_training_learns_first_at_the_training_length():
    m = FirstModel(6, "standard", steps=1500)
    res = train_first(m, 0)
    assert res.loss.shape == (1500,)
    assert res.correct[-300:].mean() > 0.95
    batch = first_batch(6, 200, np.random.default_rng(5))
    z, _ = first_logits(res.params, m, batch.inputs)
    assert np.mean((z > 0) == (batch.labels == 1)) > 0.95


@pytest.mark.slow
def test_training_is_seeded():
    m = FirstModel(4, "ssmax", steps=50)
    a, b = train_first(m, 1, chunk=20), train_first(m, 1, chunk=50)
    np.testing.assert_array_equal(a.loss, b.loss)
    np.testing.assert_array_equal(a.params["layers"][0]["s"], b.params["layers"][0]["s"])


@pytest.mark.parametrize("kw, name", [({"train_length": 0}, "`train_length`"), ({"scheme": "yarn"}, "`scheme`"),
                                      ({"d_model": 15}, "`d_model`"), ({"lr": -1.0}, "`lr`")])
def test_bad_model_is_one_clear_error(kw, name):
    args = {"train_length": 10, **kw}
    with pytest.raises(ValueError, match=name):
        FirstModel(**args)


def test_bad_inputs_are_one_clear_error():
    m = FirstModel(4)
    p = init_first(m, 0)
    with pytest.raises(ValueError, match="`inputs`"):
        first_logits(p, m, np.array([[2, 0, 3]]))
    with pytest.raises(ValueError, match="`inputs`"):
        first_logits(p, m, np.array([2, 0, 1]))


def test_every_scale_is_a_scale_the_model_runs():
    assert FIRST_SCALES == ("standard", "chiang_cholak", "entropy_invariant", "ssmax")

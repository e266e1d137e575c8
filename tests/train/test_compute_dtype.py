"""bfloat16 matrix products: the configuration field, determinism, bit-identical resume, float32 statistics."""

import json

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from softmax_scale.heads import head_stats  # noqa: E402
from softmax_scale.train import QUICK, TrainConfig  # noqa: E402
from softmax_scale.train.evaluation import attention_scores, evaluate, head_sigmas  # noqa: E402
from softmax_scale.train.loop import train_model  # noqa: E402

F32 = QUICK.replace(steps=20, checkpoint_every=5, warmup=3)
BF16 = F32.replace(compute_dtype="bfloat16")


def same_bits(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(la, lb))


def representable_in_bfloat16(x):
    x = np.asarray(x, np.float32)
    return np.asarray(x.astype(jax.numpy.bfloat16), np.float32) == x


@pytest.fixture(scope="module")
def reference():
    return train_model(BF16, rng=7, progress=False)


@pytest.fixture(scope="module")
def float32_run():
    return train_model(F32, rng=7, progress=False)


def test_compute_dtype_is_checked():
    with pytest.raises(ValueError, match="`compute_dtype` must be one of"):
        TrainConfig(compute_dtype="float16")
    with pytest.raises(ValueError, match="`compute_dtype`"):
        TrainConfig(compute_dtype=None)


def test_describe_names_compute_dtype_only_when_it_is_not_float32():
    assert "compute_dtype" not in json.loads(F32.describe())  # headers and checkpoints of float32 runs as before
    assert json.loads(BF16.describe())["compute_dtype"] == "bfloat16"
    assert TrainConfig.from_json(BF16.describe()) == BF16
    assert TrainConfig.from_json(F32.describe()) == F32


def test_same_seed_same_numbers_bit_for_bit(reference):
    again = train_model(BF16, rng=7, progress=False)
    np.testing.assert_array_equal(again.history["loss"], reference.history["loss"])
    assert same_bits(again.params, reference.params)


def test_the_parameters_stay_float32(reference):
    assert {x.dtype for x in jax.tree_util.tree_leaves(reference.params)} == {np.dtype(np.float32)}


def test_bfloat16_is_not_float32_and_learns_alike(reference, float32_run):
    assert not np.array_equal(reference.history["loss"], float32_run.history["loss"])  # the rounding happens
    assert reference.history["loss"][-1] < reference.history["loss"][0] - 0.5  # it learns
    # 20 steps of a tiny model: the two runs' losses stay within a few hundredths of a nat
    np.testing.assert_allclose(reference.history["loss"], float32_run.history["loss"], atol=0.05)


def test_resume_after_a_stop_is_bit_identical(reference, tmp_path):
    ckpt = tmp_path / "run.npz"
    part = train_model(BF16, rng=7, checkpoint=ckpt, stop_after=13, progress=False)
    assert part.steps == 13
    rest = train_model(BF16, rng=7, checkpoint=ckpt, progress=False)
    assert rest.resumed_from == 10
    assert same_bits(rest.params, reference.params)
    np.testing.assert_array_equal(rest.history["loss"], reference.history["loss"])


def test_a_float32_checkpoint_is_refused_by_a_bfloat16_run(tmp_path):
    ckpt = tmp_path / "run.npz"
    train_model(F32, rng=7, checkpoint=ckpt, stop_after=6, progress=False)
    with pytest.raises(ValueError, match="`checkpoint`.*another configuration"):
        train_model(BF16, rng=7, checkpoint=ckpt, progress=False)


def test_the_softmax_statistics_are_float32(reference):
    s = attention_scores(reference.params, BF16, BF16.train_length)
    assert s.dtype == np.float32
    assert not np.all(representable_in_bfloat16(s))  # accumulated and scaled in float32, not rounded to bfloat16
    s32 = attention_scores(reference.params, F32, F32.train_length)
    rel = np.max(np.abs(s - s32)) / np.max(np.abs(s32))
    assert 0 < rel < 4 * 2.0 ** -8  # the query-key product's inputs rounded to bfloat16 (see test_model)


def test_head_sigmas_read_the_bfloat16_scores(reference):
    sig = head_sigmas(reference.params, BF16, windows=2)
    s = attention_scores(reference.params, BF16, BF16.train_length, windows=2).astype(np.float64)
    rows = s.transpose(0, 2, 1, 3, 4).reshape(BF16.layers, BF16.heads, -1, BF16.train_length)
    np.testing.assert_array_equal(sig, head_stats(rows, predict=False).sigma)
    sig32 = head_sigmas(reference.params, F32, windows=2)
    np.testing.assert_allclose(sig, sig32, rtol=4 * 2.0 ** -8)


def test_evaluation_runs_in_the_configured_dtype(reference):
    ev = evaluate(reference.params, BF16, [16, 32], tokens=512)
    ev32 = evaluate(reference.params, F32, [16, 32], tokens=512)
    assert not np.array_equal(ev.loss, ev32.loss)
    np.testing.assert_allclose(ev.loss, ev32.loss, rtol=1e-2)

"""Training runs: determinism, bit-identical resume, divergence, checkpoints, two devices."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from softmax_scale.train import QUICK  # noqa: E402
from softmax_scale.train.loop import train_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CFG = QUICK.replace(steps=20, checkpoint_every=5, warmup=3)


def leaves(params):
    return jax.tree_util.tree_leaves(params)


def same_bits(a, b):
    return all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(leaves(a), leaves(b)))


@pytest.fixture(scope="module")
def reference():
    return train_model(CFG, rng=7, progress=False)


def test_same_seed_same_loss_bit_for_bit(reference):
    again = train_model(CFG, rng=7, progress=False)
    assert again.finished
    assert not again.diverged
    np.testing.assert_array_equal(again.history["loss"], reference.history["loss"])
    assert same_bits(again.params, reference.params)
    other = train_model(CFG, rng=8, progress=False)
    assert other.history["loss"][-1] != reference.history["loss"][-1]  # the check can fail
    assert reference.history["loss"][-1] < reference.history["loss"][0]  # it learns something


def test_resume_after_a_stop_is_bit_identical(reference, tmp_path):
    ckpt = tmp_path / "run.npz"
    part = train_model(CFG, rng=7, checkpoint=ckpt, stop_after=13, progress=False)
    assert not part.finished
    assert part.steps == 13
    assert ckpt.exists()
    rest = train_model(CFG, rng=7, checkpoint=ckpt, progress=False)
    assert rest.resumed_from == 10
    assert rest.finished
    assert same_bits(rest.params, reference.params)
    np.testing.assert_array_equal(rest.history["loss"], reference.history["loss"])
    # a finished checkpoint resumes to the same end without training
    done = train_model(CFG, rng=7, checkpoint=ckpt, progress=False)
    assert done.resumed_from == CFG.steps
    assert same_bits(done.params, reference.params)


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    ckpt = tmp_path / "run.npz"
    train_model(CFG, rng=7, checkpoint=ckpt, stop_after=6, progress=False)
    with pytest.raises(ValueError, match="`checkpoint`.*another seed"):
        train_model(CFG, rng=8, checkpoint=ckpt, progress=False)
    with pytest.raises(ValueError, match="`checkpoint`.*another configuration"):
        train_model(CFG.replace(lr=1e-3), rng=7, checkpoint=ckpt, progress=False)


@pytest.mark.parametrize("content", [b"", b"not a zip file", b"PK\x03\x04truncated"])
def test_a_corrupt_checkpoint_is_one_clear_error(tmp_path, content):
    ckpt = tmp_path / "run.npz"
    ckpt.write_bytes(content)
    with pytest.raises(ValueError) as err:
        train_model(CFG, rng=7, checkpoint=ckpt, progress=False)
    assert "`checkpoint`" in str(err.value)
    assert str(ckpt) in str(err.value)
    assert ckpt.read_bytes() == content  # left as it was, nothing written beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz"]


def test_divergence_stops_with_a_message():
    res = train_model(CFG.replace(lr=500.0, clip=1e9, warmup=0), rng=0, progress=False)
    assert res.diverged
    assert not res.finished
    assert "diverged at step" in res.message
    assert res.steps < CFG.steps
    assert len(res.history["loss"]) == res.steps


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="`scheme`"):
        CFG.replace(scheme="no_such_scale")
    with pytest.raises(ValueError, match="`train_length`"):
        CFG.replace(train_length=CFG.max_length + 1)  # longer than the model is built for
    with pytest.raises(ValueError, match="`train_length`"):
        CFG.replace(train_length=2)
    with pytest.raises(ValueError, match="`alpha`"):
        CFG.replace(scheme="alpha")
    with pytest.raises(ValueError, match="`d_model`"):
        CFG.replace(d_model=30, heads=4)
    with pytest.raises(TypeError, match="`config`"):
        train_model({"steps": 3})


TWO_DEVICES = """
import json, numpy as np, jax
from softmax_scale.train import QUICK
from softmax_scale.train.loop import train_model
cfg = QUICK.replace(steps=6, warmup=2)
assert len(jax.devices()) == 2
two = train_model(cfg, rng=3, progress=False)
one = train_model(cfg, rng=3, progress=False, devices=jax.devices()[:1])
try:
    train_model(cfg.replace(batch=7), rng=3, progress=False)
    bad = ""
except ValueError as e:
    bad = str(e)
print(json.dumps({"two": two.history["loss"].tolist(), "one": one.history["loss"].tolist(), "bad": bad}))
"""


@pytest.mark.slow
def test_two_devices_match_one_to_float32_accuracy():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-W", "error", "-c", TWO_DEVICES], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(out["two"], out["one"], rtol=2e-5)
    assert "`batch`" in out["bad"]

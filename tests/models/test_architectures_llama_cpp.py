"""The tiny random files of every architecture (:mod:`tiny_gguf`) run through llama.cpp and through the decoder.

llama.cpp (``llama-cpp-python``) reads each file with its own loader, dequantiser, RoPE (YaRN at
``s = 4`` on ``L``, from the file's keys) and multiplier; the decoder reads it with
:func:`~softmax_scale.models.recipe.file_recipe`.  The logits are compared at three times ``L``.

- Float32 weights (llama.cpp's key/value cache set to float32 too): the largest absolute
  difference of the logits (of order 10) is under :data:`TOL`.
- Quantised weights (every type the loader reads, on one file): llama.cpp quantises the activations
  entering a quantised matrix product (to 8 bits), the decoder does not, so the check is the mean
  KL divergence of the next-token distributions, under :data:`TOL_KL`.
- Negative controls: one weight of the decoder's copy broken (a row of a query projection
  tripled), and the decoder's frequencies left unscaled, each far outside.

``llama_cpp`` is imported plainly (no skip): ``make test-slow`` installs it, and these fail without it.
"""

import numpy as np
import pytest
from helpers import mean_kl

from softmax_scale.models.llama import LlamaDecoder, model_frequencies
from softmax_scale.models.recipe import file_recipe

from .tiny_gguf import ARCHS, SIZES, write

S = 4.0
L = SIZES["L"]
N = 3 * L
#: Largest |logit difference| with float32 weights and cache (measured: at most 1e-3 over the four architectures).
TOL = 3e-3
#: Largest mean KL (nats) with quantised weights (measured 2e-5: llama.cpp's 8-bit activations).
TOL_KL = 1e-4
#: The quantised file's weights are scaled down: at full scale the random model is so sensitive that
#: llama.cpp's 8-bit activations alone move its distributions by 0.25 nats.
GAIN = 0.3
#: How far past the tolerance a negative control must land.
CLEARLY = 10.0
QUANTISED = {"blk.0.attn_q.weight": "Q4_0", "blk.0.attn_k.weight": "Q4_1", "blk.0.attn_v.weight": "Q8_0",
             "blk.0.attn_output.weight": "F16", "blk.0.ffn_gate.weight": "BF16", "blk.0.ffn_up.weight": "Q5_0",
             "blk.0.ffn_down.weight": "Q4_K", "blk.1.ffn_down.weight": "Q5_K", "blk.2.ffn_down.weight": "Q6_K",
             "blk.3.ffn_down.weight": "Q3_K", "blk.4.ffn_down.weight": "Q2_K"}


def llama_cpp_logits(path, ids):
    """llama.cpp's logits ``[len(ids), vocab]`` (float64), float32 cache, one batch."""
    import llama_cpp

    m = llama_cpp.Llama(model_path=str(path), n_ctx=2 * N, n_batch=N, n_threads=2, seed=0, logits_all=True,
                        verbose=False, type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    try:
        m.eval([int(i) for i in ids])
        return np.array(m.scores[:len(ids)], dtype=np.float64)
    finally:
        m.close()


def decoder_logits(model, ids, inv_freq=None):
    recipe = file_recipe(model)
    inv = recipe.frequencies(model.config, len(ids)) if inv_freq is None else inv_freq
    p = model._forward(ids, factors=recipe.factors(model, len(ids)), inv_freq=inv, stats=False)
    return (p.x @ model.weights["output.weight"].T).astype(np.float64)


def _ids():
    return np.random.default_rng(3).integers(1, 262, size=N)


@pytest.fixture(scope="module", params=ARCHS)
def run(request, tmp_path_factory):
    arch = request.param
    path = tmp_path_factory.mktemp("lcpp") / f"{arch}.gguf"
    write(path, arch, rope_scaling={"type": "yarn", "factor": S}, freq_divisors=arch == "llama")
    return arch, path, llama_cpp_logits(path, _ids())


@pytest.mark.slow
def test_llama_cpp_and_the_decoder_agree_past_L_under_the_files_yarn(run):
    arch, path, ref = run
    got = decoder_logits(LlamaDecoder.from_gguf(path), _ids())
    assert np.abs(got - ref).max() < TOL, arch


@pytest.mark.slow
def test_a_broken_weight_is_far_outside(run):
    arch, path, ref = run
    model = LlamaDecoder.from_gguf(path)
    model.weights["blk.1.attn_q.weight"] = model.weights["blk.1.attn_q.weight"].copy()
    model.weights["blk.1.attn_q.weight"][3] *= 3.0
    assert np.abs(decoder_logits(model, _ids()) - ref).max() > CLEARLY * TOL, arch


@pytest.mark.slow
def test_unscaled_frequencies_are_far_outside(run):
    arch, path, ref = run
    model = LlamaDecoder.from_gguf(path)
    got = decoder_logits(model, _ids(), model_frequencies(model.config))
    assert np.abs(got - ref).max() > CLEARLY * TOL, arch


@pytest.fixture(scope="module")
def quantised(tmp_path_factory):
    path = tmp_path_factory.mktemp("lcppq") / "q.gguf"
    write(path, "llama", rope_scaling={"type": "yarn", "factor": S}, types=QUANTISED, seed=1, sizes={"layers": 5},
          gain=GAIN)
    return path, llama_cpp_logits(path, _ids())


@pytest.mark.slow
def test_every_tensor_type_is_dequantised_as_llama_cpp_does(quantised):
    path, ref = quantised
    assert mean_kl(ref, decoder_logits(LlamaDecoder.from_gguf(path), _ids())) < TOL_KL


@pytest.mark.slow
@pytest.mark.parametrize("name", ["blk.0.ffn_down.weight", "blk.2.ffn_down.weight", "blk.0.attn_k.weight"])
def test_a_misread_quantised_tensor_is_far_outside(quantised, name):
    """Negative control: one quantised tensor read with its sign flipped."""
    path, ref = quantised
    model = LlamaDecoder.from_gguf(path)
    model.weights[name] = -model.weights[name]
    assert mean_kl(ref, decoder_logits(model, _ids())) > CLEARLY * TOL_KL

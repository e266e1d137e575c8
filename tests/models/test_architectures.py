"""Every architecture the GGUF loader reads, on tiny random-weight files (:mod:`tiny_gguf`).

- The decoder's logits against the naive float64 pass of :mod:`tiny_gguf`, per architecture, at
  three times the training length under the file's own YaRN scaling (its frequencies and the
  multiplier llama.cpp applies), with a negative control per architecture: the naive pass without
  the architecture's addition (Qwen 2's biases, Qwen 3's q/k norm, SmolLM3's NoPE layers, Llama 3's
  frequency divisors) is far outside the tolerance.
- The JAX read-out against the numpy one on the same files.
- Every tensor type ``gguf`` dequantises, read back; an unsupported type or architecture refused by name.
- The slow tier runs the same files through llama.cpp (``llama-cpp-python``).
"""

import math

import numpy as np
import pytest

from softmax_scale.models import gguf_file
from softmax_scale.models.llama import LlamaDecoder
from softmax_scale.models.readout import read_out
from softmax_scale.models.recipe import file_recipe

from .tiny_gguf import ARCHS, SIZES, ggml_frequencies, naive_logits, rewrite, sizes_of, write

S = 4.0
L = SIZES["L"]
N = 3 * L
#: Largest |logit difference| of the float32 decoder from the float64 naive pass (logits are O(10)).
TOL = 2e-3
#: How far past TOL the negative control must land.
CLEARLY = 50.0


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Per architecture: the file (YaRN s = 4 on L; Llama with frequency divisors) and its stored weights."""
    d = tmp_path_factory.mktemp("archs")
    out = {}
    for arch in ARCHS:
        path = d / f"{arch}.gguf"
        out[arch] = path, write(path, arch, rope_scaling={"type": "yarn", "factor": S}, freq_divisors=arch == "llama")
    return out


def _ids(n=N, seed=3):
    return np.random.default_rng(seed).integers(1, 262, size=n)


def decoder_logits(model, ids, factors, inv_freq):
    p = model._forward(ids, factors=factors, inv_freq=inv_freq, stats=False)
    return (p.x @ model.weights["output.weight"].T).astype(np.float64)


def naive_inputs(arch, weights):
    """The naive pass's frequencies (ggml's, written out) and llama.cpp's YaRN multiplier (1 + 0.1 ln s)^2.

    llama.cpp puts that multiplier on cos/sin, so a NoPE layer runs without it (``nope_factors = 1``).
    """
    divisors = weights.get("rope_freqs.weight")
    inv = ggml_frequencies(sizes_of(arch)["head_dim"], SIZES["base"], L, S, divisors)
    return inv, np.full(N, (1 + 0.1 * math.log(S)) ** 2)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_decoder_is_the_naive_pass_past_L_under_the_files_yarn(files, arch):
    path, weights = files[arch]
    model = LlamaDecoder.from_gguf(path)
    recipe = file_recipe(model)
    assert (recipe.rope, recipe.train_length, recipe.factor) == ("yarn", L, S)
    ids = _ids()
    got = decoder_logits(model, ids, recipe.factors(model, N), recipe.frequencies(model.config, N))
    inv, f = naive_inputs(arch, weights)
    want = naive_logits(weights, ids, arch, inv, f, nope_factors=np.ones(N))
    assert np.abs(got - want).max() < TOL


@pytest.mark.parametrize("arch", ARCHS)
def test_the_naive_pass_without_the_architectures_addition_is_far_outside(files, arch):
    """Negative control: each addition changes the logits by much more than the tolerance."""
    path, weights = files[arch]
    model = LlamaDecoder.from_gguf(path)
    recipe = file_recipe(model)
    ids = _ids()
    got = decoder_logits(model, ids, recipe.factors(model, N), recipe.frequencies(model.config, N))
    inv, f = naive_inputs(arch, weights)
    without = {"smollm3": ("nope",), "qwen2": ("bias",), "qwen3": ("qk_norm",)}.get(arch, ())
    if arch == "llama":  # the divisors ignored
        inv = ggml_frequencies(SIZES["head_dim"], SIZES["base"], L, S)
    want = naive_logits(weights, ids, arch, inv, f, without=without, nope_factors=np.ones(N))
    assert np.abs(got - want).max() > CLEARLY * TOL


def test_one_broken_weight_is_far_outside(files):
    """Negative control on the comparison itself: one query row of one layer scaled."""
    path, weights = files["qwen2"]
    model = LlamaDecoder.from_gguf(path)
    recipe = file_recipe(model)
    ids = _ids()
    model.weights["blk.1.attn_q.weight"] = model.weights["blk.1.attn_q.weight"].copy()
    model.weights["blk.1.attn_q.weight"][3] *= 3.0
    got = decoder_logits(model, ids, recipe.factors(model, N), recipe.frequencies(model.config, N))
    inv, f = naive_inputs("qwen2", weights)
    assert np.abs(got - naive_logits(weights, ids, "qwen2", inv, f)).max() > CLEARLY * TOL


@pytest.mark.parametrize("arch", ARCHS)
def test_the_files_sizes_and_layers(files, arch):
    c = LlamaDecoder.from_gguf(files[arch][0]).config
    d = sizes_of(arch)["head_dim"]
    assert (c.arch, c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff) == (arch, 4, 32, 4, 2, d, 256)
    assert c.nope_layers == ((3,) if arch == "smollm3" else ())
    assert len(c.freq_divisors) == (d // 2 if arch == "llama" else 0)


@pytest.mark.parametrize("arch", ARCHS)
def test_jax_and_numpy_read_outs_agree(files, arch):
    """The same pass on JAX (float32, highest precision) and numpy, past L from a cached prefix."""
    pytest.importorskip("jax")
    model = LlamaDecoder.from_gguf(files[arch][0])
    recipe = file_recipe(model)
    ids = _ids()
    inv = recipe.frequencies(model.config, N)
    f = np.where(np.arange(N) >= L, 1.3, 1.0)
    pos = np.arange(L, N - 1)
    out = {}
    for backend in ("numpy", "jax"):
        pre = read_out(model, ids, [], stop=L, inv_freq=inv, backend=backend)
        out[backend] = read_out(model, ids, pos, probe=[], start=L, cache=pre.cache, factors=f, inv_freq=inv,
                                backend=backend)
    # float32 passes of different reduction orders: losses of O(10) nats agree to 1e-4 relative
    np.testing.assert_allclose(out["jax"].nll, out["numpy"].nll, atol=1e-4, rtol=1e-4)
    assert np.mean(out["jax"].argmax == out["numpy"].argmax) > 0.95


# ---------------------------------------------------------------------------------------------
# Tensor types.

QUANTISED = {"blk.0.attn_q.weight": "Q4_0", "blk.0.attn_k.weight": "Q4_1", "blk.0.attn_v.weight": "Q8_0",
             "blk.0.attn_output.weight": "F16", "blk.0.ffn_gate.weight": "BF16", "blk.0.ffn_up.weight": "Q5_0",
             "blk.0.ffn_down.weight": "Q4_K", "blk.1.ffn_down.weight": "Q5_K", "blk.2.ffn_down.weight": "Q6_K",
             "blk.3.ffn_down.weight": "Q2_K", "blk.3.ffn_up.weight": "F32"}


@pytest.fixture(scope="module")
def quantised(tmp_path_factory):
    path = tmp_path_factory.mktemp("quant") / "q.gguf"
    return path, write(path, "llama", types=QUANTISED, seed=1)


def test_every_type_is_read_as_written(quantised):
    """Each tensor read back equals what the writer stored, after llama.cpp's row permutation is undone."""
    path, stored = quantised
    model = LlamaDecoder.from_gguf(path)
    for name in QUANTISED:
        want = stored[name]
        if name.endswith(("attn_q.weight", "attn_k.weight")):
            want = gguf_file._unpermute(want, 4 if "attn_q" in name else 2)
        np.testing.assert_allclose(model.weights[name], want, rtol=1e-6, atol=1e-7, err_msg=name)


def test_quantised_weights_are_close_to_the_floats_they_quantise(tmp_path):
    """Independent of the dequantiser: the types gguf can write from floats read back near those floats."""
    a = write(tmp_path / "f.gguf", "qwen2", seed=2)
    types = {"blk.0.attn_q.weight": "Q8_0", "blk.0.attn_k.weight": "Q4_0", "blk.0.attn_v.weight": "F16",
             "blk.1.attn_q.weight": "BF16"}
    write(tmp_path / "q.gguf", "qwen2", seed=2, types=types)
    model = LlamaDecoder.from_gguf(tmp_path / "q.gguf")
    for name, kind in types.items():
        err = np.abs(model.weights[name] - a[name]).max() / np.abs(a[name]).max()
        assert err < {"Q8_0": 0.01, "Q4_0": 0.15, "F16": 1e-3, "BF16": 0.01}[kind], (name, err)
        assert err > 0


def test_an_unsupported_tensor_type_is_one_error_naming_it(tmp_path):
    import gguf

    path = tmp_path / "iq.gguf"
    write(path, "llama")
    r = gguf.GGUFReader(str(path))
    w = gguf.GGUFWriter(str(tmp_path / "iq2.gguf"), "llama")
    for f in r.fields.values():
        if not f.name.startswith("GGUF.") and f.name != "general.architecture":
            w.add_key_value(f.name, f.contents(), f.types[0], f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY
                            else None)
    for t in r.tensors:
        if t.name == "blk.0.attn_v.weight":
            raw = np.zeros((t.shape[1], t.shape[0] // 32 * 18), dtype=np.uint8)
            w.add_tensor(t.name, raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType.IQ4_NL)
        else:
            w.add_tensor(t.name, np.asarray(t.data).reshape([int(x) for x in reversed(t.shape)]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError) as e:
        LlamaDecoder.from_gguf(tmp_path / "iq2.gguf")
    assert "`blk.0.attn_v.weight` of type IQ4_NL, which cannot be dequantised" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_qwen2_file_without_its_biases_names_them(tmp_path):
    path = tmp_path / "q.gguf"
    write(path, "llama", sizes={})
    rewrite(path, tmp_path / "q2.gguf", "qwen2",
            lambda name: "qwen2." + name[len("llama."):] if name.startswith("llama.")
            else name if name.startswith("tokenizer.") else None)
    with pytest.raises(ValueError, match=r"lacks the tensors blk\.0\.attn_q\.bias, blk\.0\.attn_k\.bias, "
                                         r"blk\.0\.attn_v\.bias and 9 more"):
        LlamaDecoder.from_gguf(tmp_path / "q2.gguf")


@pytest.mark.parametrize("pre, pieces", [
    ("llama-bpe", ["Call", "Ġ", "123", "45", "Ġtimes", ",", "Ġok", "?!"]),
    ("qwen2", ["Call", "Ġ", "1", "2", "3", "4", "5", "Ġtimes", ",", "Ġok", "?!"]),
    ("smollm", ["Call", "Ġ", "1", "2", "3", "4", "5", "Ġtimes", ",", "Ġok", "?!"]),
    ("default", ["Call", "Ġ12345", "Ġtimes", ",", "Ġok", "?!"]),
])
def test_the_pre_tokeniser_follows_the_files_pre_field(pre, pieces):
    """Llama 3 groups digits by three, Qwen 2 and SmolLM split each, GPT-2 keeps them (llama.cpp's pre types)."""
    from tokenizers import pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = gguf_file._tokenizer(alphabet, [], [1] * len(alphabet), pre)
    assert [p for p, _ in tok.pre_tokenizer.pre_tokenize_str("Call 12345 times, ok?!")] == pieces

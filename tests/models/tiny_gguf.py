"""Tiny random-weight GGUF files of each architecture the loader reads, and a naive forward pass to check them by.

:func:`write` draws weights in the Hugging Face layout, permutes the q/k rows (and biases) of the
architectures that llama.cpp rotates in adjacent pairs as ``convert_hf_to_gguf.py`` does, and
writes them with the ``gguf`` package's writer, each tensor in the type asked for (the numpy
quantisers where ``gguf`` has one; the K-quants from random blocks whose scales are set so that
the weights are of order 1).  The metadata is what llama.cpp needs to run the file: a byte-level
BPE vocabulary with a few merges (or a SentencePiece one), and the RoPE scaling keys when asked.

:func:`naive_logits` is the reference: float64, one full attention matrix per head, RoPE written
out again (adjacent pairs on the file's own rows for ``llama``/``smollm3``, halves for the Qwens),
the biases, the per-head q/k RMSNorm and the NoPE layers each written out from the architecture's
description, the weights dequantised by ``gguf`` (the only shared step).
"""

from __future__ import annotations

import numpy as np

#: Sizes of the tiny files: ``head_dim`` 16 with ``d_model`` 32 and 4 heads exercises ``attention.key_length``
#: (``heads x head_dim != d_model``); ``d_ff`` 256 lets a K-quant (256-value blocks) hold ``ffn_down``.
SIZES = dict(layers=4, d_model=32, heads=4, kv_heads=2, head_dim=16, d_ff=256, L=32, base=1000.0, eps=1e-5)
ARCHS = ("llama", "smollm3", "qwen2", "qwen3")
#: Per architecture, what differs from :data:`SIZES`: llama.cpp's qwen2 takes ``head_dim = d_model / heads``.
ARCH_SIZES = {"qwen2": {"head_dim": 8}}


def sizes_of(arch, sizes=None):
    """:data:`SIZES` with ``arch``'s own (:data:`ARCH_SIZES`) and ``sizes`` over them."""
    return dict(SIZES, **ARCH_SIZES.get(arch, {}), **(sizes or {}))
#: The types :func:`write` can store a tensor in.
TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
#: Byte offsets of the float16 scales ``d`` (and ``dmin``) in one block of each K-quant.
_K_SCALES = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def byte_vocab():
    from tokenizers import pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = ["Ġ t", "h e", "Ġt he", "i n", "e r"]
    tokens = ["<|endoftext|>"] + alphabet + [m.replace(" ", "") for m in merges]
    return tokens, merges


#: SentencePiece pieces of :func:`spm_vocab` beyond the single characters, with their scores: the
#: equal scores of ``"▁a"`` and ``"an"`` make the leftmost pair win ("▁an" from "▁a" + "n").
SPM_PIECES = {"▁t": -1.0, "he": -2.0, "▁the": -3.0, "in": -4.0, "er": -5.0, "▁a": -6.0, "an": -6.0,
              "▁an": -7.0, "▁in": -8.0, "ing": -9.0, "▁k": -10.0, "ey": -10.5, "▁key": -11.0, "é": -12.0}


def spm_vocab():
    """A SentencePiece vocabulary as ``convert_hf_to_gguf.py`` writes one: ``(tokens, scores, types)``.

    ``<unk>``, ``<s>`` and ``</s>`` (types unknown, control, control), the 256 byte pieces
    ``<0xXX>`` (type byte), the space ``"▁"``, printable ASCII and :data:`SPM_PIECES` (normal).
    """
    chars = ["▁"] + [chr(c) for c in range(33, 127)]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + chars + list(SPM_PIECES)
    scores = [0.0] * 259 + [-100.0 - i for i in range(len(chars))] + list(SPM_PIECES.values())
    types = [2, 3, 3] + [6] * 256 + [1] * (len(chars) + len(SPM_PIECES))
    return tokens, scores, types


def permute(w, n_head):
    """llama.cpp's convert_hf_to_gguf permutation of q/k rows (halves -> adjacent pairs); a bias as one column."""
    if w.ndim == 1:
        return permute(w[:, None], n_head)[:, 0]
    out, inp = w.shape
    return w.reshape(n_head, 2, out // n_head // 2, inp).swapaxes(1, 2).reshape(out, inp)


def _k_quant(a, kind, rng):
    """Random K-quant blocks of ``a``'s shape with weights of order 1 (the raw bytes and their dequantised values)."""
    import gguf

    qt = gguf.GGMLQuantizationType[kind]
    block, size = gguf.GGML_QUANT_SIZES[qt]
    rows, cols = a.shape
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    for off in _K_SCALES[kind]:
        raw[..., off:off + 2] = np.frombuffer(np.float16(1.0).tobytes(), dtype=np.uint8)
    top = np.abs(gguf.quants.dequantize(raw.reshape(rows, -1), qt)).max()
    for off in _K_SCALES[kind]:
        raw[..., off:off + 2] = np.frombuffer(np.float16(2.0 * np.abs(a).max() / top).tobytes(), dtype=np.uint8)
    raw = raw.reshape(rows, -1)
    return raw, gguf.quants.dequantize(raw, qt)


def write(path, arch="llama", *, seed=0, types=None, rope_scaling=None, freq_divisors=False, sizes=None, gain=1.0,
          vocab="bpe", add_bos=False):
    """Write a tiny random ``arch`` GGUF at ``path``; its weights as the decoder should read them.

    Parameters
    ----------
    arch : one of :data:`ARCHS`
    types : dict, optional
        Tensor name -> one of :data:`TYPES` (F32 for the others).
    rope_scaling : dict, optional
        ``{"type": "yarn", "factor": 4.0}``: written as ``{arch}.rope.scaling.*`` with the
        original context length ``L``.
    freq_divisors : bool
        Write a ``rope_freqs.weight`` (Llama 3's RoPE divisors).
    gain : float
        Multiplies every projection's weights (below 1: a smoother model, its logits less sensitive
        to rounding).
    vocab : {"bpe", "spm"}
        Byte-level BPE (:func:`byte_vocab`) or SentencePiece (:func:`spm_vocab`).
    add_bos : bool or None
        ``tokenizer.ggml.add_bos_token``; None leaves the key out.

    Returns
    -------
    dict
        Tensor name -> float64 weights as stored (dequantised), q/k rows in the file's order.
    """
    import gguf

    t = sizes_of(arch, sizes)
    rng = np.random.default_rng([seed, ARCHS.index(arch)])
    if vocab == "spm":
        tokens, scores, token_types = spm_vocab()
    else:
        tokens, merges = byte_vocab()
    V, D, F = len(tokens), t["d_model"], t["d_ff"]
    H, G, d = t["heads"], t["kv_heads"], t["head_dim"]
    pairs = arch in ("llama", "smollm3")

    def mat(o, i, scale=0.3):
        return (rng.standard_normal((o, i)) * scale * gain).astype(np.float32)

    def vec(n, centre=1.0, scale=0.1):
        return (centre + scale * rng.standard_normal(n)).astype(np.float32)

    hf = {"token_embd.weight": mat(V, D, 1.0), "output_norm.weight": vec(D), "output.weight": mat(V, D, 0.5)}
    if freq_divisors:
        hf["rope_freqs.weight"] = np.exp(rng.uniform(0.0, 2.0, d // 2)).astype(np.float32)
    for b in range(t["layers"]):
        p = f"blk.{b}."
        hf.update({p + "attn_norm.weight": vec(D), p + "ffn_norm.weight": vec(D), p + "attn_q.weight": mat(H * d, D, 0.5),
                   p + "attn_k.weight": mat(G * d, D, 0.5), p + "attn_v.weight": mat(G * d, D),
                   p + "attn_output.weight": mat(D, H * d), p + "ffn_gate.weight": mat(F, D, 0.2),
                   p + "ffn_up.weight": mat(F, D, 0.2), p + "ffn_down.weight": mat(D, F, 0.1)})
        if arch == "qwen2":
            hf.update({p + "attn_q.bias": vec(H * d, 0.0, 0.5), p + "attn_k.bias": vec(G * d, 0.0, 0.5),
                       p + "attn_v.bias": vec(G * d, 0.0, 0.3)})
        if arch == "qwen3":
            hf.update({p + "attn_q_norm.weight": vec(d, 1.0, 0.3), p + "attn_k_norm.weight": vec(d, 1.0, 0.3)})
    stored = {}
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-random-{arch}")
    w.add_block_count(t["layers"])
    w.add_context_length(t["L"])
    w.add_embedding_length(D)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(G)
    w.add_key_length(d)
    w.add_value_length(d)
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(t["base"])
    w.add_layer_norm_rms_eps(t["eps"])
    if rope_scaling:
        w.add_rope_scaling_type(gguf.RopeScalingType[rope_scaling["type"].upper()])
        w.add_rope_scaling_factor(float(rope_scaling["factor"]))
        w.add_rope_scaling_orig_ctx_len(t["L"])
    if vocab == "spm":
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(token_types)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_space_prefix(True)
    else:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types([3] + [1] * (len(tokens) - 1))
        w.add_token_merges(merges)
        w.add_bos_token_id(0)
        w.add_eos_token_id(0)
    if add_bos is not None:
        w.add_add_bos_token(bool(add_bos))
    for name, a in hf.items():
        if pairs and name.endswith(("attn_q.weight", "attn_q.bias")):
            a = permute(a, H)
        elif pairs and name.endswith(("attn_k.weight", "attn_k.bias")):
            a = permute(a, G)
        kind = (types or {}).get(name, "F32")
        if kind in _K_SCALES:
            raw, value = _k_quant(a, kind, rng)
            w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType[kind])
        elif kind == "F32":
            value = a
            w.add_tensor(name, a)
        else:
            qt = gguf.GGMLQuantizationType[kind]
            raw = gguf.quants.quantize(a, qt)
            value = gguf.quants.dequantize(raw, qt)
            w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qt)
        stored[name] = np.asarray(value, dtype=np.float64).reshape(a.shape)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return stored


def naive_logits(weights, ids, arch, inv_freq, factors, sizes=None, without=(), nope_factors=None):
    """Logits ``[len(ids), vocab]`` of the tiny model, float64, written out without the decoder's code.

    ``inv_freq`` ``[d/2]`` the RoPE frequency of each rotated pair; ``factors`` ``[len(ids)]`` the
    multiplier on each query's ``q.k / sqrt(d)``; ``without`` the additions left out (``"nope"``,
    ``"qk_norm"``, ``"bias"``: the negative controls); ``nope_factors`` the multiplier on a NoPE
    layer (``factors`` where None).
    """
    t = sizes_of(arch, sizes)
    W = weights
    H, G, d, eps = t["heads"], t["kv_heads"], t["head_dim"], t["eps"]
    n = len(ids)
    pos = np.arange(n)

    def norm(x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g

    ang = pos[:, None] * np.asarray(inv_freq)[None, :]  # [n, d/2]
    c, s = np.cos(ang), np.sin(ang)

    def rotate(v):  # [n, d]: pair i is (2i, 2i+1) on llama.cpp's rows, (i, i + d/2) on the Qwens'
        out = v.copy()
        if arch in ("llama", "smollm3"):
            a, b = v[:, 0::2], v[:, 1::2]
            out[:, 0::2], out[:, 1::2] = a * c - b * s, a * s + b * c
        else:
            a, b = v[:, :d // 2], v[:, d // 2:]
            out[:, :d // 2], out[:, d // 2:] = a * c - b * s, a * s + b * c
        return out

    x = W["token_embd.weight"][ids]
    for layer in range(t["layers"]):
        p = f"blk.{layer}."
        h = norm(x, W[p + "attn_norm.weight"])
        bias = "bias" not in without
        q = h @ W[p + "attn_q.weight"].T + bias * W.get(p + "attn_q.bias", 0.0)
        k = h @ W[p + "attn_k.weight"].T + bias * W.get(p + "attn_k.bias", 0.0)
        v = h @ W[p + "attn_v.weight"].T + bias * W.get(p + "attn_v.bias", 0.0)
        att = np.zeros((n, H * d))
        nope = arch == "smollm3" and (layer + 1) % 4 == 0 and "nope" not in without
        for hd in range(H):
            g = hd // (H // G)
            qh, kh, vh = q[:, hd * d:(hd + 1) * d], k[:, g * d:(g + 1) * d], v[:, g * d:(g + 1) * d]
            if arch == "qwen3" and "qk_norm" not in without:
                qh, kh = norm(qh, W[p + "attn_q_norm.weight"]), norm(kh, W[p + "attn_k_norm.weight"])
            if not nope:
                qh, kh = rotate(qh), rotate(kh)
            f = factors if not nope or nope_factors is None else nope_factors
            S = qh @ kh.T / np.sqrt(d) * np.asarray(f)[:, None]
            S = np.where(pos[None, :] <= pos[:, None], S, -np.inf)
            P = np.exp(S - S.max(axis=1, keepdims=True))
            att[:, hd * d:(hd + 1) * d] = (P / P.sum(axis=1, keepdims=True)) @ vh
        x = x + att @ W[p + "attn_output.weight"].T
        h = norm(x, W[p + "ffn_norm.weight"])
        gate = h @ W[p + "ffn_gate.weight"].T
        x = x + ((gate / (1 + np.exp(-gate))) * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
    return norm(x, W["output_norm.weight"]) @ W["output.weight"].T


def ggml_frequencies(d, base, L, s=1.0, divisors=None):
    """llama.cpp's RoPE frequency of each rotated pair (float64), written out from ggml.

    ``ggml_rope_yarn_corr_dims`` (ggml/src/ggml.c): ``corr(r) = d ln(L / (2 pi r)) / (2 ln base)``,
    from ``floor(corr(32))`` (clipped at 0) to ``ceil(corr(1))`` (clipped at ``d - 1``); ``rope_yarn``
    (ggml/src/ggml-cpu/ops.cpp): ``theta = theta_e (1 - mix) / s + theta_e mix``, ``mix = 1 - ramp``,
    with ``theta_e = base^(-2i/d) / divisor_i`` (``rope_freqs.weight``); ``s = 1``: no YaRN.
    """
    i = np.arange(d // 2, dtype=np.float64)
    theta = base ** (-2.0 * i / d) / (1.0 if divisors is None else np.asarray(divisors, dtype=np.float64))
    if s == 1.0:
        return theta

    def corr(r):
        return d * np.log(L / (r * 2 * np.pi)) / (2 * np.log(base))

    start, end = max(0.0, np.floor(corr(32.0))), min(d - 1.0, np.ceil(corr(1.0)))
    mix = 1.0 - np.clip((i - start) / max(0.001, end - start), 0.0, 1.0)
    return theta / s * (1.0 - mix) + theta * mix


def rewrite(src, dst, arch, rename, extra=None):
    """Copy the GGUF ``src`` to ``dst`` as architecture ``arch``: every tensor, and the fields ``rename`` keeps.

    ``rename(name)`` gives a field's new name, or None to leave it out; ``extra(writer)`` adds fields.
    """
    import gguf

    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), arch)
    for f in r.fields.values():
        name = rename(f.name)
        if name is not None:
            w.add_key_value(name, f.contents(), f.types[0], f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY
                            else None)
    if extra is not None:
        extra(w)
    for t in r.tensors:  # as stored: quantised blocks stay quantised
        w.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


#: A short story to read (the measure tests' documents).
STORY = ("The river rose through the night, and by morning the old stone bridge was gone. The villagers gathered on "
         "the bank and argued about whether to rebuild it where it had stood or to move it upstream. ") * 12


def refuse_reads(m) -> None:
    """On the monkeypatch ``m``, make reading any unit of ``measure`` fail the test (a rerun must read nothing)."""
    from softmax_scale.experiments.measure import MeasureExperiment

    def refuse(self, task):
        raise AssertionError(f"a rerun read {task.item} again")

    m.setattr(MeasureExperiment, "run_task", refuse)

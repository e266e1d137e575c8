"""The causal experiment: RoPE variants in the trained model, test-time scales, the toolkit's per-head scale, the GGUF cross-check.

- each RoPE variant of the JAX model against a naive float64 forward written from the formulas
  (relative positions as complex rotations; ReRoPE as relative position ``min(i - j, w)``);
- invariants: ``dynamic_ntk`` leaves a sequence of at most ``L`` bytes bit-identical to ``none``,
  ``rerope`` every pair inside its window, a scale of 1 every number; causal outputs never see
  the future under any variant;
- a model trained by the harness exported as GGUF and read by the numpy decoder: the same
  per-token loss to float32 accuracy under every RoPE variant;
- the quick experiment from the command line.
"""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from softmax_scale import models  # noqa: E402
from softmax_scale.experiments import EXPERIMENTS  # noqa: E402
from softmax_scale.experiments.causal import CAUSAL_COLUMNS, causal_summary, expected_causal_rows  # noqa: E402
from softmax_scale.schemes.rope import ROPES, rerope_window, rope_frequencies  # noqa: E402
from softmax_scale.train import TrainConfig, model_factors  # noqa: E402
from softmax_scale.train.evaluation import attention_scores, evaluate, position_buckets  # noqa: E402
from softmax_scale.train.export import export_gguf  # noqa: E402
from softmax_scale.train.loop import train_model  # noqa: E402
from softmax_scale.train.model import forward, init_params, rope_tables  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def tiny(scheme="standard", **kw):
    base = dict(objective="causal", scheme=scheme, ffn="swiglu", train_length=8, layers=2, d_model=16, heads=2,
                d_ff=24, batch=4, steps=12, warmup=2, lr=3e-3, rope_base=100.0)
    base.update(kw)
    return TrainConfig(**base)


def perturbed(cfg, seed=0):
    p = init_params(cfg, seed)
    g = np.random.default_rng(seed + 1)
    for layer in p["layers"]:
        for k in ("norm1", "norm2"):
            layer[k] = (1 + 0.3 * g.standard_normal(layer[k].shape)).astype(np.float32)
        for k in ("wq", "wk"):  # larger scores, so the scale and the positions matter
            layer[k] = (layer[k] * 3).astype(np.float32)
    return p


# ---------------------------------------------------------------------------------------------
# The naive forward: float64, one sequence, relative rotations written as complex numbers.


def naive_theta(rope, d, base, L, n):
    """Each variant's inverse frequencies from its source (not through rope.py)."""
    theta = np.array([base ** (-2 * i / d) for i in range(d // 2)])
    s = max(1.0, n / L)
    if rope in ("none", "rerope") or s == 1:
        return theta
    if rope == "pi":  # Chen et al.: positions divided by s
        return theta / s
    if rope == "ntk":  # bloc97: base s^(d/(d-2))
        return np.array([(base * s ** (d / (d - 2))) ** (-2 * i / d) for i in range(d // 2)])
    if rope == "dynamic_ntk":  # Hugging Face _compute_dynamic_ntk_parameters, factor f = 1, seq_len = n
        f = 1.0
        b = base * ((f * n / L) - (f - 1)) ** (d / (d - 2))
        return np.array([b ** (-2 * i / d) for i in range(d // 2)])
    assert rope == "yarn"  # Peng et al., NTK-by-parts, ramp in the index between r = 32 and r = 1 rotations
    lo = max(math.floor(d * math.log(L / (32 * 2 * math.pi)) / (2 * math.log(base))), 0)
    hi = min(math.ceil(d * math.log(L / (2 * math.pi)) / (2 * math.log(base))), d - 1)
    ramp = np.clip((np.arange(d // 2) - lo) / max(hi - lo, 1e-3), 0, 1)
    return theta / s * ramp + theta * (1 - ramp)


def naive_forward(params, ids, cfg, rope, factors=None, window=None):
    """Logits ``[T, V]``; the score of (i, j) is Re(sum q_i conj(k_j) e^{i r theta}), ``r`` the relative position."""
    D, H = cfg.d_model, cfg.heads
    dh = D // H
    T = len(ids)
    L = cfg.train_length
    theta = naive_theta(rope, dh, cfg.rope_base, L, T)
    w = L // 2
    x = np.asarray(params["embed"], np.float64)[ids] * math.sqrt(D)

    def norm(v, g):
        return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + 1e-6) * g

    for li, layer in enumerate(params["layers"]):
        lay = {k: np.asarray(v, np.float64) for k, v in layer.items()}
        h = norm(x, lay["norm1"])
        out = np.zeros((T, D))
        for head in range(H):
            sl = slice(head * dh, (head + 1) * dh)
            q, k, v = h @ lay["wq"][:, sl], h @ lay["wk"][:, sl], h @ lay["wv"][:, sl]
            zq = q[:, : dh // 2] + 1j * q[:, dh // 2:]
            zk = k[:, : dh // 2] + 1j * k[:, dh // 2:]
            for i in range(T):
                js = np.arange(i + 1) if window is None else np.arange(max(0, i - window + 1), i + 1)
                rel = i - js
                if rope == "rerope":
                    rel = np.minimum(rel, w)
                s = np.real(np.sum(zq[i] * np.conj(zk[js]) * np.exp(1j * rel[:, None] * theta), axis=1))
                f = 1.0 if factors is None else factors[li, head, i]
                s = s * f / math.sqrt(dh)
                p = np.exp(s - s.max())
                out[i, sl] = (p / p.sum()) @ v[js]
        x = x + out @ lay["wo"]
        h = norm(x, lay["norm2"])
        g = h @ lay["w1"]
        x = x + (g / (1 + np.exp(-g)) * (h @ lay["w3"])) @ lay["w2"]
    return norm(x, np.asarray(params["norm"], np.float64)) @ np.asarray(params["embed"], np.float64).T


def jax_logits(cfg, params, ids, rope, factors=None, window=None):
    T = ids.shape[1]
    cos, sin = rope_tables(cfg, T, rope)
    f = model_factors(cfg, T) if factors is None else factors
    return np.asarray(forward(params, ids, cos=cos, sin=sin, factors=f, heads=cfg.heads, causal=True,
                              window=window, rerope=rerope_window(cfg.train_length) if rope == "rerope" else None))


@pytest.mark.parametrize("rope", ROPES)
def test_each_rope_variant_against_a_naive_forward(rope):
    cfg = tiny()
    params = perturbed(cfg)
    ids = np.random.default_rng(2).integers(0, 256, size=(1, 5 * cfg.train_length)).astype(np.int32)
    got = jax_logits(cfg, params, ids, rope)[0]
    want = naive_forward(params, ids[0], cfg, rope)
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    assert err < 3e-5, err
    if rope != "none":  # and the variant changes something past L (a negative control of the naive check)
        other = naive_forward(params, ids[0], cfg, "none")
        assert np.max(np.abs(other - want)) / np.max(np.abs(want)) > 1e-3


def test_window_and_per_head_factors_against_the_naive_forward():
    cfg = tiny()
    params = perturbed(cfg, 3)
    T = 4 * cfg.train_length
    ids = np.random.default_rng(4).integers(0, 256, size=(1, T)).astype(np.int32)
    f = (1 + 0.5 * np.random.default_rng(5).random((cfg.layers, cfg.heads, T))).astype(np.float32)
    got = jax_logits(cfg, params, ids, "ntk", factors=f, window=cfg.train_length)[0]
    want = naive_forward(params, ids[0], cfg, "ntk", factors=f, window=cfg.train_length)
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < 3e-5


def test_rope_frequencies_of_the_new_variants():
    for n in (8, 16, 40, 200):
        np.testing.assert_allclose(rope_frequencies("dynamic_ntk", 8, 100.0, 8, n), naive_theta("dynamic_ntk", 8, 100.0, 8, n),
                                   rtol=1e-13)
        assert np.array_equal(rope_frequencies("rerope", 8, 100.0, 8, n), rope_frequencies("none", 8, 100.0, 8, n))
    assert rerope_window(64) == 32
    assert rerope_window(512) == 256


@pytest.fixture(scope="module")
def trained():
    cfg = tiny()
    return cfg, train_model(cfg, rng=0, progress=False).params


def test_dynamic_ntk_leaves_sequences_up_to_L_bit_identical(trained):
    cfg, p = trained
    L = cfg.train_length
    for n in (L // 2, L):
        a = evaluate(p, cfg, [n], rope="dynamic_ntk", tokens=256)[n]
        b = evaluate(p, cfg, [n], rope="none", tokens=256)[n]
        assert np.array_equal(a.nll, b.nll)
        assert np.array_equal(a.correct, b.correct)
    # past L it differs from none and, read per bucket, from the static ntk of the whole sequence
    n = 8 * L
    d, s, z = (evaluate(p, cfg, [n], rope=r, tokens=512)[n] for r in ("dynamic_ntk", "ntk", "none"))
    # inside L: the trained RoPE, from a prefix pass of another shape (float32 rounding of other products)
    np.testing.assert_allclose(d.nll[:L], z.nll[:L], rtol=1e-5, atol=1e-5)
    assert not np.allclose(d.nll[L:], z.nll[L:])
    assert not np.allclose(d.nll[L:], s.nll[L:])
    # the last bucket ends at n: its positions are the static ntk's, to float32 accuracy (prefix = whole)
    lo = position_buckets(L, n)[-2]
    np.testing.assert_allclose(d.nll[lo:], s.nll[lo:], rtol=1e-5, atol=1e-5)


def test_rerope_keeps_every_pair_inside_the_window(trained):
    cfg, p = trained
    n = 4 * cfg.train_length
    w = rerope_window(cfg.train_length)
    a = attention_scores(p, cfg, n, windows=2, rope="rerope")[0]  # the first layer: the same inputs
    b = attention_scores(p, cfg, n, windows=2, rope="none")[0]
    i, j = np.indices((n, n))
    near, far = (i - j < w) & (j <= i), i - j >= w
    assert np.array_equal(a[..., near], b[..., near])
    assert not np.allclose(a[..., far], b[..., far])
    # a far key is seen at relative position w: its score is the none score of the pair at distance w
    cos, sin = rope_tables(cfg, n, "none")
    assert np.allclose(a[..., far].std(), b[..., i - j == w].std(), rtol=0.5)
    # a sequence whose every pair lies inside the window is the trained model, every number
    for m in (w // 2, w):
        e, z = (evaluate(p, cfg, [m], rope=r, tokens=256)[m] for r in ("rerope", "none"))
        assert np.array_equal(e.nll, z.nll)


def test_a_scale_of_one_changes_nothing(trained):
    cfg, p = trained
    L = cfg.train_length
    n = 4 * L
    ref = evaluate(p, cfg, [n], tokens=512)[n]
    ones = evaluate(p, cfg, [n], factors=np.ones((cfg.layers, cfg.heads, n), np.float32), tokens=512)[n]
    assert np.array_equal(ref.nll, ones.nll)
    assert np.array_equal(ref.correct, ones.correct)
    for scheme in ("qwen_logn", "yarn"):  # 1 up to n = L: those positions bit for bit, the rest changed
        e = evaluate(p, cfg, [n], scheme=scheme, pin_length=L, tokens=512)[n]
        assert np.array_equal(e.nll[:L], ref.nll[:L])
        assert not np.allclose(e.nll[L:], ref.nll[L:])


@pytest.mark.parametrize("rope", ROPES)
def test_causal_outputs_never_see_later_bytes(trained, rope):
    cfg, p = trained
    T = 6 * cfg.train_length
    ids = np.random.default_rng(6).integers(0, 256, size=(1, T)).astype(np.int32)
    j = 3 * cfg.train_length + 1
    other = ids.copy()
    other[0, j] = (ids[0, j] + 7) % 256
    f = (1 + np.random.default_rng(7).random((cfg.layers, cfg.heads, T))).astype(np.float32)
    for kw in ({}, {"factors": f}, {"window": cfg.train_length}):
        a, b = jax_logits(cfg, p, ids, rope, **kw), jax_logits(cfg, p, other, rope, **kw)
        changed = np.max(np.abs(a - b), axis=-1)[0]
        assert np.all(changed[:j] == 0.0)
        assert changed[j] > 0.0


def test_export_to_gguf_and_the_numpy_decoder_agree(trained, tmp_path):
    """A model trained by the harness, written as LLaMA GGUF, read by models.load: the same per-token loss."""
    from softmax_scale.models.llama import scale_factors

    cfg, p = trained
    for scheme in ("standard", "entropy_invariant"):
        c = cfg.replace(scheme=scheme)
        params = p if scheme == "standard" else train_model(c, rng=1, progress=False).params
        path = export_gguf(params, c, tmp_path / f"{scheme}.gguf")
        dec = models.load("smollm2", path=path)
        assert dec.config.context_length == c.train_length
        assert dec.config.vocab_size == 257
        L, n = c.train_length, 6 * c.train_length
        ids = np.random.default_rng(8).integers(0, 256, size=n + 1).astype(np.int64)
        f = scale_factors(scheme, np.arange(1, n + 1), c.d_head, L)
        for rope in ROPES:
            inv = rope_frequencies(rope, c.d_head, c.rope_base, L, n)
            st = dec.positions(ids[:n], factors=f, inv_freq=inv, rerope=rerope_window(L) if rope == "rerope" else None,
                               query_block=16)
            logits = jax_logits(c, params, ids[None, :n].astype(np.int32), rope)[0]
            logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(
                1, keepdims=True)
            nll = -logp[np.arange(n - 1), ids[1:n]]
            assert np.max(np.abs(st.nll[:-1] - nll)) < 1e-4, (scheme, rope)
    with pytest.raises(ValueError, match="`config`"):
        export_gguf(p, cfg.replace(ffn="relu"), tmp_path / "x.gguf")


def test_bad_input(trained):
    cfg, p = trained
    with pytest.raises(ValueError, match="`ffn`"):
        TrainConfig(ffn="gelu")
    with pytest.raises(ValueError, match="`rope`"):
        TrainConfig(rope="rerope")
    with pytest.raises(ValueError, match="`rope`"):
        evaluate(p, cfg.replace(objective="mlm"), [16], rope="rerope")
    with pytest.raises(ValueError, match="`window`"):
        evaluate(p, cfg.replace(objective="mlm"), [16], window=8)
    with pytest.raises(ValueError, match="`factors`"):
        evaluate(p, cfg, [16], factors=np.ones((3, 16), np.float32))
    with pytest.raises(ValueError, match="`factors`"):
        evaluate(p, cfg, [16], factors=np.ones(16, np.float32), scheme="qwen_logn")


def test_a_relu_config_describes_itself_as_before():
    """The mlm/alpha result files and checkpoints written before ``ffn`` existed still match."""
    assert '"ffn"' not in TrainConfig().describe()
    assert '"ffn":"swiglu"' in tiny().describe()
    assert TrainConfig.from_json(TrainConfig().describe()) == TrainConfig()


@pytest.mark.slow
def test_quick_causal_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-W", "error", "-m", "softmax_scale", "train", "--experiment", "causal", "--quick", "--workers", "1", "--out",
           str(tmp_path), "--no-progress"]
    # no wall-time assertion (timings belong to the benchmarks and the README); a hang guard only
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    causal = EXPERIMENTS["causal"]
    t = causal.read(tmp_path / "train_causal_quick.csv")
    assert tuple(t.rows) == CAUSAL_COLUMNS
    for key in ("command", "config", "corpus", "jax", "code", "date", "ropes", "window"):
        assert t.header[key], key
    tasks = causal.tasks(causal.config(quick=True))
    assert len(t) == sum(expected_causal_rows(x) for x in tasks)
    s = causal_summary(t)
    assert s["diverged"] == []
    assert s["lengths"].tolist() == [16, 128, 256]
    assert {k[1] for k in s["rows"]} == set(ROPES)
    assert (tmp_path / "train_causal_quick.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "train_causal_quick_heads.png").read_bytes()[:4] == b"\x89PNG"
    # the rows in task order: seed by seed, each trained scale's block whole
    blocks = [(a, int(b)) for a, b in dict.fromkeys(zip(t.rows["scheme"], t.rows["seed"]))]
    assert blocks == [(x.label, x.seed) for x in tasks]
    ev = causal.evidence(t)
    assert {e.multiple for e in ev} == {8.0, 16.0}
    assert {e.rope for e in ev} == set(ROPES)
    one = next(e for e in ev if e.scale == "entropy_invariant@16" and e.reference == "standard" and e.metric == "loss"
               and e.rope == "none" and e.multiple == 16.0)
    assert one.seeds == (0, 1)
    s16 = causal_summary(t)["rows"]
    per_seed = s16[("entropy_invariant@16", "none", "trained")]["loss_seeds"][-1] - s16[("standard", "none", "trained")]["loss_seeds"][-1]
    assert one.difference == pytest.approx(per_seed.mean(), abs=1e-12)
    assert one.spread == pytest.approx(per_seed.std(ddof=1), abs=1e-12)
    # a rerun trains nothing: the same rows, no checkpoint left behind
    before = (tmp_path / "train_causal_quick.csv").read_bytes()
    res = subprocess.run(cmd + ["--no-figure"], env=env, capture_output=True, text=True, timeout=1800, check=False,
                         cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "train_causal_quick.csv").read_bytes() == before
    assert not list((tmp_path / ".train-checkpoints").glob("*.npz"))

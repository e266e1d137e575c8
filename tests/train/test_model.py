"""The training model: the JAX forward against a naive numpy forward, the scale factors, what each query sees."""

import math

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale.schemes import pinned

jax = pytest.importorskip("jax")

from softmax_scale.train import TrainConfig, model_factors  # noqa: E402
from softmax_scale.train.model import forward, init_params, rope_tables  # noqa: E402

SCHEMES = [("standard", {}), ("entropy_invariant", {"pin_length": 512}), ("ssmax", {}), ("alpha_star", {}),
           ("alpha", {"alpha": 2.5})]


def small(scheme="standard", objective="mlm", **kw):
    return TrainConfig(objective=objective, scheme=scheme, train_length=12, layers=2, d_model=16, heads=2, d_ff=24,
                       batch=2, **kw)


def random_params(cfg, seed=0):
    """Initial parameters with every gain and s perturbed, so that no term is the identity."""
    p = init_params(cfg, seed)
    g = np.random.default_rng(seed + 1)
    for layer in p["layers"]:
        for k in ("norm1", "norm2"):
            layer[k] = (1 + 0.3 * g.standard_normal(layer[k].shape)).astype(np.float32)
        if "s" in layer:
            layer["s"] = (layer["s"] * (1 + 0.5 * g.random(layer["s"].shape))).astype(np.float32)
    p["norm"] = (1 + 0.3 * g.standard_normal(p["norm"].shape)).astype(np.float32)
    return p


def naive_factor(cfg, n):
    """The per-query factor written out from the published formulas, not through the registry."""
    if cfg.scheme == "standard":
        return 1.0
    if cfg.scheme == "entropy_invariant":
        return math.log(n) / math.log(cfg.pin_length)
    if cfg.scheme == "ssmax":
        return math.log(n)  # times the learned s
    if cfg.scheme == "alpha":
        return cfg.alpha
    return 0.0 if n < 2 else float(ss.optimal_alpha(n))  # alpha*(n) on unit-variance scores


def bf16(a):
    """``a`` rounded to bfloat16 (to nearest, ties to even), back in float64: written out on the bits, not through JAX."""
    bits = np.asarray(a, np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def naive_forward(params, ids, cfg, rounded=False):
    """Float64, one sequence, one head at a time, full T x T matrices; RoPE as complex rotations.

    ``rounded``: every matrix product's two inputs rounded to bfloat16 first (the sum in float64).
    """
    p = {k: v for k, v in params.items()}
    D, H = cfg.d_model, cfg.heads
    dh = D // H
    T = len(ids)
    x = np.asarray(p["embed"], np.float64)[ids] * math.sqrt(D)
    theta = cfg.rope_base ** (-2.0 * np.arange(dh // 2) / dh)
    rot = np.exp(1j * np.arange(T)[:, None] * theta[None, :])  # [T, dh/2]

    def norm(v, g):
        return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + 1e-6) * g

    def mm(a, b):
        return bf16(a) @ bf16(b) if rounded else a @ b

    def rope(m):  # [T, dh]: pair (i, i + dh/2) as one complex number
        c = (m[:, : dh // 2] + 1j * m[:, dh // 2:]) * rot
        return np.concatenate([c.real, c.imag], axis=1)

    for layer in p["layers"]:
        lay = {k: np.asarray(v, np.float64) for k, v in layer.items()}
        h = norm(x, lay["norm1"])
        out = np.zeros((T, D))
        for head in range(H):
            sl = slice(head * dh, (head + 1) * dh)
            q, k, v = rope(mm(h, lay["wq"][:, sl])), rope(mm(h, lay["wk"][:, sl])), mm(h, lay["wv"][:, sl])
            for i in range(T):
                keys = i + 1 if cfg.objective == "causal" else T
                f = naive_factor(cfg, keys) * (lay["s"][head] if "s" in lay else 1.0)
                z = f * mm(q[i], k[:keys].T) / math.sqrt(dh)
                w = np.exp(z - z.max())
                w /= w.sum()
                out[i, sl] = mm(w, v[:keys])
        x = x + mm(out, lay["wo"])
        h = mm(norm(x, lay["norm2"]), lay["w1"])
        x = x + mm(np.maximum(h, 0.0), lay["w2"])
    return mm(norm(x, np.asarray(p["norm"], np.float64)), np.asarray(p["embed"], np.float64).T)


def run(cfg, params, ids):
    cos, sin = rope_tables(cfg, ids.shape[1])
    return np.asarray(forward(params, ids, cos=cos, sin=sin, factors=model_factors(cfg, ids.shape[1]),
                              heads=cfg.heads, causal=cfg.causal, compute_dtype=cfg.compute_dtype))


@pytest.mark.parametrize("objective", ["mlm", "causal"])
@pytest.mark.parametrize("scheme, kw", SCHEMES, ids=[s for s, _ in SCHEMES])
def test_forward_matches_a_naive_numpy_forward(scheme, kw, objective):
    cfg = small(scheme, objective, **kw)
    params = random_params(cfg)
    ids = np.random.default_rng(2).integers(0, 257, size=(2, cfg.train_length)).astype(np.int32)
    got = run(cfg, params, ids)
    for b in range(2):
        want = naive_forward(params, ids[b], cfg)
        err = np.max(np.abs(got[b] - want)) / np.max(np.abs(want))
        assert err < 2e-5, err  # float32 against float64


#: bfloat16's unit roundoff: 8 significant bits, a rounded input is within 2^-8 of its value (relative).
U_BF16 = 2.0 ** -8


@pytest.mark.parametrize("objective", ["mlm", "causal"])
@pytest.mark.parametrize("scheme, kw", SCHEMES, ids=[s for s, _ in SCHEMES])
def test_bfloat16_forward_matches_the_naive_forward(scheme, kw, objective):
    cfg = small(scheme, objective, **kw).replace(compute_dtype="bfloat16")
    params = random_params(cfg)
    ids = np.random.default_rng(2).integers(0, 257, size=(2, cfg.train_length)).astype(np.int32)
    got = run(cfg, params, ids)
    for b in range(2):
        # Rounded alike: a product of two bfloat16 numbers (8 + 8 significant bits) is exact in float32, so
        # what is left is float32 accumulation and elementwise work, as in the float32 test.
        alike = naive_forward(params, ids[b], cfg, rounded=True)
        assert np.max(np.abs(got[b] - alike)) / np.max(np.abs(alike)) < 2e-5
        # Against exact products: each product's two inputs carry up to U_BF16 each (2 U_BF16 on the
        # output's own product) and the residual stream carries the earlier products' errors in by addition,
        # as much again: 4 U_BF16 relative to the largest logit.
        exact = naive_forward(params, ids[b], cfg)
        err = np.max(np.abs(got[b] - exact)) / np.max(np.abs(exact))
        assert err < 4 * U_BF16
        assert err > 1e-4  # the products are rounded: float32 (2e-5 above) is not what ran


def test_the_bfloat16_rounding_of_the_reference_is_jax_s():
    g = np.random.default_rng(0)
    x = np.concatenate([g.standard_normal(10000) * 10.0 ** g.uniform(-30, 30, 10000),
                        [0.0, 1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8)]])  # ties to even, both ways
    want = np.asarray(jax.numpy.asarray(x, jax.numpy.float32).astype(jax.numpy.bfloat16), np.float64)
    np.testing.assert_array_equal(bf16(x), want)


def test_the_public_names():
    import softmax_scale.train as st

    assert callable(st.evaluate)
    assert callable(st.train_model)
    assert not hasattr(st, "run_sweep")  # the sweep runner is the experiments' (softmax_scale.experiments.sweep)
    assert st.model.forward is forward
    assert st.TrainResult.__name__ == "TrainResult"
    with pytest.raises(AttributeError):
        st.no_such_name  # noqa: B018


def test_the_naive_check_can_fail():
    cfg = small("entropy_invariant", pin_length=512)
    params = random_params(cfg)
    ids = np.random.default_rng(2).integers(0, 257, size=(1, cfg.train_length)).astype(np.int32)
    wrong = cfg.replace(pin_length=256)  # another scale: the naive forward must notice
    err = np.max(np.abs(run(cfg, params, ids)[0] - naive_forward(params, ids[0], wrong)))
    assert err > 1e-3


@pytest.mark.parametrize("objective", ["mlm", "causal"])
def test_scale_factors_are_the_registry_s(objective):
    d = 32
    for length in (2, 16, 64, 1024):  # length 1 alone: the registry's gradient_optimal refuses n = [1] (core)
        n = np.arange(1, length + 1) if objective == "causal" else np.full(length, length)
        for scheme, kw, rule in [
            ("standard", {}, pinned("standard")),
            ("entropy_invariant", {"pin_length": 512}, pinned("entropy_invariant", 512)),
            ("alpha_star", {}, pinned("gradient_optimal")),
            ("alpha", {"alpha": 1.7}, pinned("gradient_optimal", value=1.7)),
        ]:
            cfg = TrainConfig(objective=objective, scheme=scheme, d_model=128, heads=4, **kw)
            np.testing.assert_array_equal(model_factors(cfg, length), rule.factor(n, d).astype(np.float32))
        cfg = TrainConfig(objective=objective, scheme="ssmax")  # log n; the model multiplies by s = 1/ln 64 at init
        s0 = pinned("ssmax", 64).params["s"]
        np.testing.assert_allclose(model_factors(cfg, length), pinned("ssmax", 64).factor(n, d) / s0, rtol=1e-7)
        assert init_params(cfg, 0)["layers"][0]["s"][0] == np.float32(1 / math.log(64))
        # a test-time override: max(1, log_64 n)
        cfg = TrainConfig(objective=objective)
        np.testing.assert_array_equal(model_factors(cfg, length, scheme="qwen_logn", pin_length=64),
                                      pinned("qwen_logn", 64).factor(n, d).astype(np.float32))
    # the note's choice: entropy_invariant pinned at 512 is 6/9 of standard at n = 64
    assert model_factors(TrainConfig(scheme="entropy_invariant", pin_length=512), 64)[0] == np.float32(6 / 9)
    np.testing.assert_allclose(model_factors(TrainConfig(scheme="alpha_star"), 64)[0], ss.optimal_alpha(64), rtol=1e-7)


@pytest.mark.parametrize("objective", ["mlm", "causal"])
def test_what_each_query_sees(objective):
    cfg = small("entropy_invariant", objective, pin_length=512)
    params = random_params(cfg)
    ids = np.random.default_rng(3).integers(0, 256, size=(1, cfg.train_length)).astype(np.int32)
    j = 7
    other = ids.copy()
    other[0, j] = (ids[0, j] + 1) % 256
    a, b = run(cfg, params, ids), run(cfg, params, other)
    changed = np.max(np.abs(a - b), axis=-1)[0]  # per position
    if objective == "causal":
        assert np.all(changed[:j] == 0.0)  # never the future, bit for bit
    else:
        assert np.all(changed[:j] > 0.0)  # bidirectional: every position sees every key
    assert np.all(changed[j:] > 0.0)

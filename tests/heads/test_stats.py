"""head_stats: invariants, a naive per-row reference, the exact evaluator under i.i.d. scores, bad input."""

import numpy as np
import pytest
from scipy import special

import softmax_scale as ss
from softmax_scale._kernels import sort_floats
from softmax_scale.exact import EntropyForNs
from softmax_scale.heads import _stats as heads


def naive(s, allowed):
    """Slow reference: one row at a time, straight from the definitions (rows with < 2 keys skipped)."""
    out = {k: [] for k in ("n", "sigma", "entropy", "ratio", "sum_p2", "gradient", "top1", "sink")}
    for i in range(s.shape[0]):
        keys = np.flatnonzero(allowed[i])
        if keys.size < 2:
            continue
        x = s[i, keys].astype(np.float64)
        p = np.exp(x - x.max())
        p /= p.sum()
        assert abs(p.sum() - 1.0) < 1e-12
        h = -np.sum(p[p > 0] * np.log(p[p > 0]))
        full = np.zeros(s.shape[1])
        full[keys] = p
        n = keys.size
        out["n"].append(n)
        out["sigma"].append(x.std())
        out["entropy"].append(h)
        out["ratio"].append(h / np.log(n))
        out["sum_p2"].append(np.sum(p * p))
        out["gradient"].append(x.std() * (1 - np.sum(p * p)))
        out["top1"].append(p.max())
        out["sink"].append(full[0])
    return {k: np.mean(v) for k, v in out.items()}


FIELDS = {"n": "n", "sigma": "sigma", "entropy": "entropy", "ratio": "entropy_ratio", "sum_p2": "sum_p2",
          "gradient": "gradient", "top1": "top1", "sink": "sink"}


def test_matches_naive_rows_with_causal_and_user_masks():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 40, 40)) * 1.7 + rng.standard_normal((2, 3, 40, 1))
    mask = rng.random((40, 40)) < 0.7
    mask[:, :3] = True
    r_c = ss.head_stats(x, causal=True, predict=False)
    r_m = ss.head_stats(x, mask=mask[None, None], predict=False)  # (queries, keys) for every head
    tril = np.tril(np.ones((40, 40), dtype=bool))
    for idx in np.ndindex(2, 3):
        for r, allowed in ((r_c, tril), (r_m, mask)):
            ref = naive(x[idx], allowed)
            for k, f in FIELDS.items():
                np.testing.assert_allclose(getattr(r, f)[idx], ref[k], rtol=1e-12, atol=1e-14, err_msg=f)
    assert np.all(r_c.queries == 39)  # query 0 (one key) is skipped
    assert r_c.n[0, 0] == pytest.approx(np.mean(np.arange(2, 41)))


def test_causal_equals_explicit_mask_and_per_query_n_is_exact():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 64, 64)) * 2.0
    tril = np.tril(np.ones((64, 64), dtype=bool))
    tril[0, 1] = True  # query 0 gets 2 keys, so the explicit mask keeps it: drop it from both instead
    a = ss.head_stats(x[:, 1:], causal=True)  # queries 1..63 of 64 keys: aligned at the end
    b = ss.head_stats(x[:, 1:], mask=np.tril(np.ones((64, 64), dtype=bool))[1:])
    for f in ("n", "sigma", "entropy", "predicted_entropy", "predicted_entropy_empirical", "alpha_star", "kurtosis"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    # the prediction is the average over rows of the exact E[H] at each row's own n and scale
    s = x[0, 1:]
    pred = []
    for i in range(63):
        row = s[i, : i + 2]
        n = row.size
        pred.append(ss.exact_stats(row.std() * np.sqrt(n / (n - 1)), n, error_estimate=False).entropy)
    assert a.predicted_entropy[0] == pytest.approx(np.mean(pred), abs=2e-6)
    assert a.predict_error[0] < 1e-5


def test_vectorised_evaluator_matches_exact_stats():
    ns = np.array([2.0, 7.0, 100.0, 512.0])
    normal = EntropyForNs(ss.Normal(), ns)
    rng = np.random.default_rng(2)
    v = rng.standard_normal(3000) ** 3  # heavy-tailed, skewed sample, used whole
    v = (v - v.mean()) / v.std()
    emp = EntropyForNs(ss.WeightedSample.from_pool(v, 4096), ns)
    for alpha in (1e-8, 0.3, 2.0, 5.0):
        ref_n = [ss.exact_stats(alpha, int(n), error_estimate=False).entropy for n in ns]
        ref_e = [ss.exact_stats(alpha, int(n), np.sort(v), error_estimate=False).entropy for n in ns]
        np.testing.assert_allclose(normal(alpha), ref_n, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(emp(alpha), ref_e, rtol=1e-9, atol=1e-12)


def test_invariants():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 50, 80)) * np.array([0.1, 1.0, 3.0, 30.0])[:, None, None]
    r = ss.head_stats(x, predict=False)
    assert np.all((r.entropy >= 0) & (r.entropy <= np.log(80)))
    assert np.all((r.entropy_ratio >= 0) & (r.entropy_ratio <= 1))
    assert np.all((r.sum_p2 >= 1 / 80) & (r.sum_p2 <= 1))
    assert np.all(r.top1 >= r.sum_p2 - 1e-15)  # sum p^2 <= max p
    shifted = ss.head_stats(x + rng.standard_normal((4, 50, 1)) * 100, predict=False)  # per-row shift
    np.testing.assert_allclose(shifted.entropy, r.entropy, rtol=1e-9)
    np.testing.assert_allclose(shifted.sigma, r.sigma, rtol=1e-9)
    perm = rng.permutation(80)
    permuted = ss.head_stats(x[..., perm], predict=False)
    for f in ("entropy", "sum_p2", "sigma", "top1", "kurtosis"):
        np.testing.assert_allclose(getattr(permuted, f), getattr(r, f), rtol=1e-12)
    scaled = ss.head_stats(2.5 * x, predict=False)
    np.testing.assert_allclose(scaled.sigma, 2.5 * r.sigma, rtol=1e-12)
    np.testing.assert_allclose(scaled.kurtosis, r.kurtosis, rtol=1e-9, atol=1e-12)
    # one-hot-like rows: entropy near 0; constant rows: exactly uniform
    c = ss.head_stats(np.zeros((5, 10)))
    assert c.entropy == pytest.approx(np.log(10))
    assert c.sigma == 0.0
    assert c.predicted_entropy == pytest.approx(np.log(10))
    assert np.isnan(c.kurtosis)


def test_iid_normal_logits_match_exact_entropy():
    """Measured mean entropy of i.i.d. N(0, alpha^2) logits against the exact E[H] (and a negative control)."""
    alpha, n = 2.0, 256
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, 256, n)) * alpha
    r = ss.head_stats(x)
    h_rows = []
    for idx in np.ndindex(4, 3):
        s = x[idx]
        p = special.softmax(s, axis=1)
        h_rows.append(-np.sum(p * np.log(p), axis=1))
    se = np.std(np.concatenate(h_rows)) / np.sqrt(12 * 256)
    exact = ss.exact_stats(alpha, n, error_estimate=False).entropy
    measured = float(np.mean(r.entropy))
    assert abs(measured - exact) < 4 * se
    assert abs(float(np.mean(r.predicted_entropy)) - exact) < 4 * se  # the per-row prediction is unbiased
    assert abs(float(np.mean(r.delta_entropy))) < 4 * se
    wrong = ss.exact_stats(alpha * 1.05, n, error_estimate=False).entropy  # negative control
    assert abs(measured - wrong) > 4 * se
    # the head's own empirical distribution: normal scores, so close to the normal prediction; a pool of
    # row-standardised scores has a slightly lighter extreme tail (seen: +0.03 nats on average at alpha 2)
    assert np.all(np.abs(r.predicted_entropy_empirical - r.predicted_entropy) < 0.08)
    assert abs(np.mean(r.predicted_entropy_empirical - r.predicted_entropy)) < 0.04
    assert np.all(np.abs(r.kurtosis + 6 / (n + 1)) < 0.07)  # row-standardised: E[kurtosis] ~ -6/(n+1)
    # mean-field alpha* hangs on M(2a), i.e. on the extreme tail of the pool: up to 30 % off here
    assert np.all(np.abs(r.alpha_star / ss.optimal_alpha(n) - 1) < 0.4)


def test_kurtosis_of_uniform_scores():
    x = np.random.default_rng(5).uniform(-1, 1, (2, 128, 128))
    r = ss.head_stats(x, predict=False)
    np.testing.assert_allclose(r.kurtosis, -1.2, atol=0.05)


def test_float32_input_and_result_object():
    x = np.random.default_rng(6).standard_normal((2, 2, 32, 32)).astype(np.float32)
    r = ss.head_stats(x, causal=True)
    r64 = ss.head_stats(x.astype(np.float64), causal=True)
    np.testing.assert_array_equal(r.entropy, r64.entropy)
    rows = r.to_rows()
    assert len(rows) == 4
    assert rows[3]["head"] == (1, 1)
    assert rows[0]["delta_entropy"] == pytest.approx(rows[0]["entropy"] - rows[0]["predicted_entropy"])
    assert "HeadStats(heads=4" in repr(r)
    one = ss.head_stats(x[0, 0])
    assert one.shape == ()
    assert one.entropy.shape == ()
    assert len(one.to_rows()) == 1


def test_geometric_alpha_star_is_reproducible():
    x = np.random.default_rng(7).standard_normal((1, 64, 64)) * 1.5
    a = ss.head_stats(x, alpha_objective="geometric", trials=400, rng=3)
    b = ss.head_stats(x, alpha_objective="geometric", trials=400, rng=3)
    assert a.alpha_star[0] == b.alpha_star[0]
    assert np.isfinite(a.alpha_star[0])
    assert a.alpha_star_se[0] > 0


GOOD = np.random.default_rng(8).standard_normal((2, 8, 8))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"logits": np.where(np.eye(8, dtype=bool), np.nan, GOOD)}, "logits"),
        ({"logits": np.where(np.eye(8, dtype=bool), np.inf, GOOD)}, "logits"),
        ({"logits": GOOD[..., :1]}, "logits"),
        ({"logits": np.zeros(5)}, "logits"),
        ({"logits": np.zeros((2, 0, 8))}, "logits"),
        ({"logits": GOOD, "mask": np.ones((3, 8), dtype=bool)}, "mask"),
        ({"logits": GOOD, "mask": np.eye(8, dtype=bool)}, "mask"),
        ({"logits": GOOD, "mask": np.zeros((8, 8), dtype=bool)}, "mask"),
        ({"logits": GOOD, "mask": np.ones((8, 8))}, "mask"),  # a float mask is additive: 1.0 is neither 0 nor a fill
        ({"logits": GOOD[:, :1, :1], "causal": True}, "logits"),
        ({"logits": GOOD, "sample_size": 3}, "sample_size"),
        ({"logits": GOOD, "alpha_objective": "expected"}, "alpha_objective"),
    ],
)
def test_bad_input_raises_value_error_naming_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        ss.head_stats(**kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"logits": "abc"}, "logits"),
        ({"logits": GOOD, "mask": np.ones((8, 8), dtype=complex)}, "mask"),
        ({"logits": GOOD, "causal": "yes"}, "causal"),
        ({"logits": GOOD, "predict": None}, "predict"),
    ],
)
def test_wrong_types_raise_type_error_naming_the_parameter(kwargs, name):
    with pytest.raises(TypeError, match=f"`{name}`"):
        ss.head_stats(**kwargs)


def test_masked_nonfinite_scores_are_ignored():
    x = GOOD.copy()
    tril = np.tril(np.ones((8, 8), dtype=bool))
    x[:, ~tril] = -np.inf
    np.testing.assert_array_equal(ss.head_stats(x, causal=True).entropy, ss.head_stats(GOOD, causal=True).entropy)


def _heavy_tailed_heads(rng):
    """Three heads of (64, 256) heavy-tailed scores: moderate, skewed, and one at alpha ~ 20 with outliers at +-10."""
    q, k = 64, 256
    x = np.empty((3, q, k))
    x[0] = rng.standard_t(3, (q, k)) * rng.uniform(0.5, 2.5, (q, 1))
    x[1] = rng.standard_normal((q, k)) ** 3 * rng.uniform(0.2, 1.5, (q, 1))
    s = rng.standard_t(4, (q, k))
    s[:, :3] = [10.0, -10.0, 8.0]  # standardised scores reach about +-10
    x[2] = (s - s.mean(axis=1, keepdims=True)) / s.std(axis=1, keepdims=True) * rng.uniform(18.0, 22.0, (q, 1))
    return x


def test_fast_evaluator_matches_reference():
    """The trimmed grid and windowed kernel against every point at every node of the whole grid (1e-10 nats)."""
    rng = np.random.default_rng(11)
    ns = np.array([32.0, 256.0, 512.0])
    for head in _heavy_tailed_heads(rng):
        z = (head - head.mean(axis=1, keepdims=True)) / head.std(axis=1, keepdims=True)
        emp = ss.WeightedSample.from_pool(z.ravel(), 2048)
        for dist in (ss.Normal(), emp):
            fast, ref = EntropyForNs(dist, ns), EntropyForNs(dist, ns, reference=True)
            for alpha in (0.05, 0.7, 2.0, 5.0, 12.0, 20.0, 35.0):
                np.testing.assert_allclose(fast(alpha), ref(alpha), rtol=0, atol=1e-10, err_msg=f"{dist.name} {alpha}")
        a = np.array([-3.0, 0.0, 0.5, 20.0, 400.0])
        ref = special.logsumexp(a[:, None] * emp.x + emp.logw, axis=1)
        np.testing.assert_allclose(emp.log_mgf(a), ref, rtol=1e-14, atol=1e-13)  # sequential vs pairwise sum
        assert emp.log_mgf(1.5) == pytest.approx(special.logsumexp(1.5 * emp.x + emp.logw), rel=1e-14)


def test_head_stats_fast_path_matches_reference(monkeypatch):
    """head_stats' predictions with the fast evaluator agree with the slow reference to 1e-6 nats (in fact ~1e-12)."""
    import functools

    x = _heavy_tailed_heads(np.random.default_rng(12))
    fast = ss.head_stats(x, sample_size=1024)
    monkeypatch.setattr("softmax_scale.heads._stats.EntropyForNs", functools.partial(EntropyForNs, reference=True))
    ref = ss.head_stats(x, sample_size=1024)
    assert fast.sigma[2] > 15.0  # the large-alpha head is there
    for f in ("predicted_entropy", "predicted_entropy_empirical", "predict_error", "alpha_star"):
        np.testing.assert_allclose(getattr(fast, f), getattr(ref, f), rtol=1e-9, atol=1e-9, err_msg=f)
    for f in ("predicted_entropy", "predicted_entropy_empirical"):
        np.testing.assert_allclose(getattr(fast, f), getattr(ref, f), rtol=0, atol=1e-6, err_msg=f)


def test_radix_sort_is_np_sort():
    rng = np.random.default_rng(13)
    for v in (rng.standard_t(2, 200_000), np.concatenate([rng.standard_normal(70_000) * 1e-300, [0.0, -0.0, 5.0, -np.inf]]),
              np.round(rng.standard_normal(100_000), 2)):
        np.testing.assert_array_equal(sort_floats(v), np.sort(v))


# ---------------------------------------------------------------------------------------------
# attention as frameworks hand it over: [batch, heads, queries, keys], additive mask fills, probabilities

F16_MIN, F32_MIN = float(np.finfo(np.float16).min), float(np.finfo(np.float32).min)
FILLS = [F16_MIN, F32_MIN, -1e9, -1e4]


def _framework_logits(fill, *, added, dtype=np.float32, seed=20):
    """Causal scores [1, 2, 48, 48] with the hidden keys set to ``fill`` (``added``: fill + score, as BERT adds it)."""
    x = (np.random.default_rng(seed).standard_normal((1, 2, 48, 48)) * 2.0).astype(dtype)
    hidden = ~np.tril(np.ones((48, 48), dtype=bool))
    if added:
        return x, (x + np.where(hidden, fill, 0.0)).astype(dtype)
    return x, np.where(hidden, np.asarray(fill, dtype=dtype), x)


_REFERENCE: dict = {}


def _causal_reference(x):
    """head_stats of the unmasked scores with causal=True, computed once for the tests below."""
    key = x.tobytes()
    if key not in _REFERENCE:
        _REFERENCE[key] = ss.head_stats(x, causal=True)
    return _REFERENCE[key]


@pytest.mark.parametrize("added", [False, True], ids=["written", "added"])
@pytest.mark.parametrize("fill", FILLS, ids=["float16-min", "float32-min", "-1e9", "-1e4"])
def test_mask_fills_are_refused_in_one_line_or_masked_on_request(fill, added):
    x, logits = _framework_logits(fill, added=added)
    with pytest.raises(ValueError, match="`logits`.*look like a mask fill") as err:
        ss.head_stats(logits)
    msg = str(err.value)
    assert "\n" not in msg
    assert "causal=True" in msg
    assert "mask_fill='mask'" in msg
    assert "in every head they are exactly the keys a causal mask hides" in msg  # it says which mask the fills form
    ref = _causal_reference(x)
    predict = fill == F32_MIN and added  # as Hugging Face adds it; the predictions follow from the same masked rows
    masked = ss.head_stats(logits, mask_fill="mask", predict=predict)
    fields = ["n", "queries", "sigma", "entropy", "sum_p2", "kurtosis"]
    for f in fields + (["predicted_entropy", "predicted_entropy_empirical", "alpha_star"] if predict else []):
        np.testing.assert_array_equal(getattr(masked, f), getattr(ref, f), err_msg=f)
    assert np.all(masked.fills == 48 * 47 // 2)
    assert np.all(ref.fills == 0)
    # with the mask stated, the fills sit on masked keys and are never read
    np.testing.assert_array_equal(ss.head_stats(logits, causal=True, predict=False).entropy, ref.entropy)


def test_float16_scores_with_the_float16_minimum():
    x, logits = _framework_logits(F16_MIN, added=True, dtype=np.float16)
    assert logits.dtype == np.float16
    with pytest.raises(ValueError, match=r"-65504 \(the float16 minimum"):
        ss.head_stats(logits)
    np.testing.assert_array_equal(ss.head_stats(logits, mask_fill="mask", predict=False).entropy,
                                  ss.head_stats(x, causal=True, predict=False).entropy)


def test_padding_keys_and_padding_queries():
    """A right-padded batch: the mask fills hide the padding keys (and the causal future); padding queries keep their keys."""
    rng = np.random.default_rng(21)
    B, H, T = 2, 2, 40
    real = np.ones((B, T), dtype=bool)
    real[1, 28:] = False  # the second sequence has 12 padding tokens
    allowed = real[:, None, None, :] & np.tril(np.ones((T, T), dtype=bool))  # [batch, 1, queries, keys]
    x = rng.standard_normal((B, H, T, T)).astype(np.float32) * 1.5
    logits = x + np.where(allowed, 0.0, F32_MIN).astype(np.float32)
    for kw in ({}, {"causal": True}):  # the first sequence alone looks causal; the padding keys need mask=
        with pytest.raises(ValueError, match="look like a mask fill.*; pass mask= .*or causal=True") as err:
            ss.head_stats(logits, **kw)
        assert "causal mask hides" not in str(err.value)
    ref = ss.head_stats(x, mask=allowed, predict=False)
    np.testing.assert_array_equal(ss.head_stats(logits, mask=allowed, predict=False).entropy, ref.entropy)
    np.testing.assert_array_equal(ss.head_stats(logits, mask_fill="mask", predict=False).entropy, ref.entropy)
    assert ref.queries.tolist() == [[T - 1] * H, [T - 1] * H]  # query 0 (one key) skipped
    # a padding query whose every key is filled (left padding): a row at the fill, refused or skipped
    left = np.where(np.arange(T)[None, :] >= 4, x[0, 0], F32_MIN)  # keys 0..3 padding
    left[:4] = F32_MIN  # queries 0..3 are padding too: every key filled
    with pytest.raises(ValueError, match="a whole row at or below -1000, a padding query"):
        ss.head_stats(left[None])
    r = ss.head_stats(left[None], mask_fill="mask", predict=False)
    assert r.queries[0] == T - 4
    assert r.n[0] == T - 4


def test_fills_never_raise_a_memory_error():
    """Kept as keys (mask_fill='keep'), fills make sigma enormous: the prediction says so in a ValueError, never a MemoryError."""
    for fill in FILLS:
        _, logits = _framework_logits(fill, added=False)
        with pytest.raises(ValueError, match="`logits`.*too large for the exact prediction; pass predict=False"):
            ss.head_stats(logits[:1, :1], mask_fill="keep")
        r = ss.head_stats(logits[:1, :1], mask_fill="keep", predict=False)
        assert r.n[0, 0] == 48
        assert r.sigma[0, 0] > 1e3
        assert not r.predicted
        assert "no predictions (predict=False)" in repr(r)
    with pytest.raises(ValueError, match="`logits` must be finite .* mask_fill='keep'"):
        ss.head_stats(np.where(np.eye(8, dtype=bool), -np.inf, GOOD), mask_fill="keep")


def test_engine_refuses_huge_grids_before_allocating():
    e = ss.Empirical(np.random.default_rng(22).standard_normal(100))
    with pytest.raises(ValueError, match="too large for the exact method"):
        ss.softmax_stats(1e9, 512, e)


def _float32_probs(logits):
    e = np.exp((logits - logits.max(axis=-1, keepdims=True)).astype(np.float32))
    return e / e.sum(axis=-1, keepdims=True)


def test_probabilities_give_exact_entropy_and_the_sigma_of_log_p():
    rng = np.random.default_rng(23)
    x = rng.standard_normal((1, 3, 64, 64)) * 2.0
    tril = np.tril(np.ones((64, 64), dtype=bool))
    ref = ss.head_stats(x, causal=True)
    p64 = np.where(tril, np.exp(x - x.max(-1, keepdims=True)), 0.0)
    p64 /= p64.sum(-1, keepdims=True)
    r = ss.head_stats(probs=p64, causal=True)
    assert r.source == "probs"
    assert ref.source == "logits"
    for f in ("n", "queries", "sigma", "entropy", "entropy_ratio", "sum_p2", "top1", "sink", "kurtosis", "predicted_entropy",
              "predicted_entropy_empirical", "alpha_star"):
        np.testing.assert_allclose(getattr(r, f), getattr(ref, f), rtol=1e-9, atol=1e-9, err_msg=f)
    assert not r.sigma_lower_bound.any()
    assert np.all(r.underflow == 0)
    # float32 probabilities, as a framework returns them (masked keys exactly 0): float32 accuracy
    r32 = ss.head_stats(probs=_float32_probs(np.where(tril, x, F32_MIN)), causal=True, predict=False)
    np.testing.assert_allclose(r32.entropy, ref.entropy, rtol=1e-5)
    np.testing.assert_allclose(r32.sigma, ref.sigma, rtol=1e-5)
    assert not r32.sigma_lower_bound.any()
    # padding queries (left padding: queries 0..3 see no real key) masked out: their rows, NaN or uniform, are not read
    real = np.arange(64) >= 4
    allowed = real[None, :] & real[:, None] & tril
    p = np.where(allowed, np.exp(x - x.max(-1, keepdims=True)), 0.0)
    with np.errstate(invalid="ignore"):
        p = p / p.sum(-1, keepdims=True)  # 0/0 = NaN in the padding rows, as softmax over -inf gives
    rp = ss.head_stats(probs=p, mask=allowed[None, None], predict=False)
    rl = ss.head_stats(x, mask=allowed[None, None], predict=False)
    assert np.all(rp.queries == 59)  # 64 - 4 padding queries - the first real one (a single key)
    np.testing.assert_allclose(rp.entropy, rl.entropy, rtol=1e-12)
    np.testing.assert_allclose(rp.sigma, rl.sigma, rtol=1e-12)


def test_underflowed_probabilities_make_sigma_a_lower_bound_and_say_so():
    """A sharp head (sigma 28.2) in float32: a quarter of its probabilities underflow; sigma from log p is a lower bound."""
    rng = np.random.default_rng(24)
    x = rng.standard_normal((1, 2, 128, 512)) * 28.2
    x[0, 1] *= 2.0 / 28.2  # a diffuse head beside it: nothing underflows
    p = _float32_probs(x)
    assert (p[0, 0] == 0).mean() > 0.2
    assert (p[0, 1] == 0).sum() == 0
    true = ss.head_stats(x, predict=False)
    r = ss.head_stats(probs=p, predict=False)
    assert r.sigma_lower_bound.tolist() == [[True, False]]
    assert r.underflow[0, 0] == pytest.approx((p[0, 0] == 0).mean())
    assert r.underflow[0, 1] == 0
    assert true.sigma[0, 0] == pytest.approx(28.2, rel=0.02)
    assert 15.0 < r.sigma[0, 0] < 0.85 * true.sigma[0, 0]  # well below the truth, and below it
    assert r.sigma[0, 1] == pytest.approx(true.sigma[0, 1], rel=1e-5)
    np.testing.assert_allclose(r.entropy, true.entropy, rtol=1e-4)  # underflowed terms carry no entropy
    np.testing.assert_allclose(r.sum_p2, true.sum_p2, rtol=1e-5)
    assert "a lower bound on 1 heads" in repr(r)
    row = r.to_rows()[0]
    assert row["sigma_lower_bound"] is True
    assert isinstance(row["fills"], int)


def test_probabilities_passed_as_logits_warn_naming_the_probabilities_path():
    p = _float32_probs(np.random.default_rng(25).standard_normal((2, 16, 16)))
    with pytest.warns(UserWarning, match=r"head_stats\(probs=\.\.\.\)"):
        r = ss.head_stats(p, predict=False)
    assert np.all(r.entropy_ratio > 0.99)  # the confident nonsense the warning is about


def test_compressed_pool_stays_sorted_with_runs_of_equal_values():
    # the mean of 997 copies of v rounds one ulp above v, past the next bin's first value (v itself)
    v = -1.3812797174167781
    assert np.add.reduceat(np.full(997, v), [0])[0] / 997 > v
    pool = np.concatenate([np.linspace(-3.0, v, 400), np.full(997 * 32, v), np.linspace(v, 3.0, 400)])
    w = ss.WeightedSample.from_pool(pool, 130)  # 32 tail points each side, 65 bins of ~997 in the bulk
    assert np.all(np.diff(w.x) >= 0)


PROBS = _float32_probs(np.random.default_rng(26).standard_normal((2, 8, 8)))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"probs": -PROBS}, "probs"),
        ({"probs": PROBS * 2.0}, "probs"),
        ({"probs": PROBS * 0.9}, "probs"),
        ({"probs": np.where(np.eye(8, dtype=bool), np.nan, PROBS)}, "probs"),
        ({"probs": PROBS, "causal": True}, "probs"),  # mass on keys a causal mask hides
        ({"probs": PROBS[..., :1]}, "probs"),
        ({"probs": PROBS, "logits": GOOD}, "probs"),
        ({}, "logits"),
        ({"probs": PROBS, "mask_fill": "mask"}, "mask_fill"),
        ({"logits": GOOD, "mask_fill": "drop"}, "mask_fill"),
        ({"logits": np.where(np.eye(8, dtype=bool), -1e9, GOOD)}, "logits"),
    ],
)
def test_bad_framework_input_raises_naming_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        ss.head_stats(**kwargs)


# ---------------------------------------------------------------------------------------------
# head_pools: the pooled standardised scores head_stats predicts from, checked by the same rules


def _naive_pool(x, allowed):
    """Every allowed score of every row with 2+ keys and a spread, standardised over its row, pooled."""
    out = []
    for s, a in zip(x, allowed):
        v = s[a]
        if v.size >= 2 and v.std() > 0:
            out.append((v - v.mean()) / v.std())
    return np.concatenate(out)


def test_head_pools_are_the_pools_head_stats_predicts_from():
    rng = np.random.default_rng(30)
    x = rng.standard_normal((2, 3, 40, 40)) * 1.7
    pools = heads.head_pools(x, causal=True, sample_size=64)
    tril = np.tril(np.ones((40, 40), dtype=bool))
    assert len(pools) == 6
    for h, idx in enumerate(np.ndindex(2, 3)):
        ref = ss.WeightedSample.from_pool(_naive_pool(x[idx], tril), 4 * 40)  # at least 4 max n points
        np.testing.assert_allclose(pools[h].x, ref.x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(pools[h].w, ref.w, rtol=1e-12)
    # the empirical prediction of head_stats is the exact E[H] on that sample
    r = ss.head_stats(x[:1, :1, -1:], sample_size=64)  # one row of 40 keys: one alpha, one n
    pool = heads.head_pools(x[:1, :1, -1:], sample_size=64)[0]
    alpha = r.sigma[0, 0] * np.sqrt(40 / 39)
    assert r.predicted_entropy_empirical[0, 0] == pytest.approx(EntropyForNs(pool, [40.0])(alpha)[0], abs=1e-12)


def test_head_pools_treat_mask_fills_as_head_stats_does():
    x, logits = _framework_logits(F32_MIN, added=True)
    clean = heads.head_pools(x, causal=True)
    filled = heads.head_pools(logits, mask_fill="mask")
    for a, b in zip(clean, filled):
        np.testing.assert_array_equal(a.x, b.x)
        np.testing.assert_array_equal(a.w, b.w)


def test_a_head_of_constant_rows_has_no_pool():
    x = np.stack([np.ones((8, 8)), GOOD[0]])
    pools = heads.head_pools(x)
    assert pools[0] is None
    assert isinstance(pools[1], ss.WeightedSample)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"logits": np.where(np.eye(8, dtype=bool), np.nan, GOOD)},
        {"logits": GOOD[..., :1]},
        {"logits": np.zeros((2, 0, 8))},
        {"logits": "abc"},
        {"logits": GOOD, "mask": np.ones((3, 8), dtype=bool)},
        {"logits": GOOD, "mask": np.ones((8, 8))},
        {"logits": GOOD, "mask": np.eye(8, dtype=bool)},
        {"logits": GOOD[:, :1, :1], "causal": True},
        {"logits": GOOD, "causal": "yes"},
        {"logits": GOOD, "mask_fill": "drop"},
        {"logits": GOOD, "sample_size": 3},
        {"logits": np.where(np.eye(8, dtype=bool), -1e9, GOOD)},
    ],
)
def test_head_pools_refuse_what_head_stats_refuses_in_the_same_words(kwargs):
    with pytest.raises((ValueError, TypeError)) as want:
        ss.head_stats(**kwargs)
    with pytest.raises(want.type) as got:
        heads.head_pools(**kwargs)
    assert str(got.value) == str(want.value)


def test_rows_constant_up_to_rounding_are_flat_and_keep_the_pool_standardised():
    """Three 0.1s have a float sigma of 1.4e-17: a uniform softmax, not z-scores of -1 in the pool."""
    rng = np.random.default_rng(30)
    live = rng.standard_normal((6, 3))
    consts = [0.1, 1.0 / 3.0, -0.7, 1e5 + 0.1, 3e-8]
    x = np.concatenate([live, np.array(consts)[:, None] * np.ones((len(consts), 3))])
    assert np.std(x[6]) > 0.0  # the rounding the rule must absorb
    r = ss.head_stats(x[None], predict=False)
    (pool,) = heads.head_pools(x[None], sample_size=10**4)
    ref = np.concatenate([(row - row.mean()) / row.std() for row in live])
    np.testing.assert_allclose(np.sort(pool.x), np.sort(ref), rtol=0, atol=1e-12)
    assert abs(pool.mean) < 1e-12 and abs(pool.var - 1.0) < 1e-12
    sig = np.concatenate([live.std(axis=1), np.zeros(len(consts))])
    np.testing.assert_allclose(r.sigma[0], sig.mean(), rtol=1e-13)
    # a real spread of a million ulps is kept
    tiny = np.full(9, 0.1) + 1e6 * np.finfo(float).eps * 0.1 * rng.standard_normal(9)
    _, pool2 = heads._measure(tiny[None], None, np.zeros(1, dtype=bool))
    assert pool2.size == 9

"""The decoder's attention: the fused numba kernel against the numpy passes it replaces, and its invariants.

The two implementations share no arithmetic past the query-key product: the fused kernel takes
the keys in tiles with a running maximum (each row rescaled when it moves), its own float32
exponential and float64 sums; the numpy kernel whole rows, ``np.exp`` and float32 sums.
So they agree to float32 rounding, the tolerance stated below, and never bit for bit.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from softmax_scale.models import attention as att
from softmax_scale.models import tiles
from softmax_scale.schemes.rope import rerope_window

#: float32 tolerance, absolute (with a relative 1e-5 beside it), of the fused kernel against the numpy kernel
#: and of either against float64: outputs (weighted means of values of order 1), entropy (nats), sigma (the
#: numpy kernel's float32 sums are the less accurate side) and the sink probability.  Measured on these
#: inputs: at most 1.7e-5, 5e-6, 9e-5 and 6e-7 from float64 for the numpy kernel, the fused one no further
#: (sigma 3e-6).
ATOL = {"out": 2e-5, "entropy": 1e-5, "sigma": 1e-4, "sink": 2e-6}


def _inputs(H=6, G=2, m=150, past=0, d=16, seed=0, trend=0.0):
    """Random queries, keys and values; ``trend`` > 0 makes later keys score higher (the maximum moves)."""
    rng = np.random.default_rng(seed)
    n = past + m
    q = rng.standard_normal((H, m, d), dtype=np.float32)
    k = rng.standard_normal((G, n, d), dtype=np.float32) * (1 + trend * np.arange(n) / n).astype(np.float32)[:, None]
    v = rng.standard_normal((G, n, d), dtype=np.float32)
    return q, k, v


def _far(q, k, window, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(q.shape, dtype=np.float32), rng.standard_normal(k.shape, dtype=np.float32), window)


def _compare(a, b):
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=ATOL["out"])
    for name, x, y in zip(("entropy", "sigma", "sink"), a[1], b[1]):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=ATOL[name], err_msg=name)


def _naive(q, k, v, past):
    """float64, one head and one query at a time, from the definitions."""
    H, m, d = q.shape
    rep = H // k.shape[0]
    out, ent, sig, snk = np.zeros((m, H * d)), np.zeros((H, m)), np.zeros((H, m)), np.zeros((H, m))
    for h in range(H):
        kh, vh = k[h // rep].astype(np.float64), v[h // rep].astype(np.float64)
        for i in range(m):
            row = kh[:past + i + 1] @ q[h, i].astype(np.float64)
            e = np.exp(row - row.max())
            pr = e / e.sum()
            out[i, h * d:(h + 1) * d] = pr @ vh[:past + i + 1]
            ent[h, i] = -np.sum(pr[pr > 0] * np.log(pr[pr > 0]))
            sig[h, i] = row.std()
            snk[h, i] = pr[0]
    return out, (ent, sig, snk)


@pytest.mark.parametrize("trend", [0.0, 20.0])
def test_both_kernels_against_float64(trend):
    q, k, v = _inputs(m=100, past=20, trend=trend)
    truth = _naive(q, k, v, 20)
    for kernel in att.KERNELS:
        _compare(att.attention(q, k, v, 20, query_block=32, stats=True, kernel=kernel), truth)
    _compare(att._attention_fused(q, k, v, 20, query_block=32, stats=True, key_block=9), truth)


@pytest.mark.parametrize("trend", [0.0, 20.0])
def test_fused_kernel_without_statistics_against_float64(trend):
    """The pass without statistics keeps a row's first tile's maximum as its reference: with scores rising along the
    keys (``trend``; at 20 they reach 300, so later tiles pass the reference by far more than 29 and rows are redone
    at the new maximum), the outputs are float64's to float32 rounding, and the statistics' pass gives the same."""
    q, k, v = _inputs(m=100, past=20, trend=trend)
    truth = _naive(q, k, v, 20)[0]
    for key_block in (9, 32, 1024):
        got, none = att._attention_fused(q, k, v, 20, query_block=32, stats=False, key_block=key_block)
        assert none is None
        np.testing.assert_allclose(got, truth, rtol=1e-5, atol=ATOL["out"])
        with_stats = att._attention_fused(q, k, v, 20, query_block=32, stats=True, key_block=key_block)[0]
        np.testing.assert_allclose(got, with_stats, rtol=1e-5, atol=ATOL["out"])


def test_tile_without_statistics_moves_its_reference_when_a_score_passes_it_by_29():
    """Two tiles of one row: the second holds a score 40 above the first's maximum.  The exponentials stay finite, the
    reference moves to 40 (and the first tile's normaliser and output with it), and both agree with float64; a
    score 20 above it leaves the reference where it was."""
    for jump, moved in ((40.0, True), (20.0, False)):
        first = np.array([[0.0, -1.0, -3.0, -2.0]], np.float32)
        second = np.array([[-5.0, jump, 1.0, -2.0]], np.float32)
        vals = np.arange(8, dtype=np.float32).reshape(8, 1)
        o, mx, acc = np.zeros((1, 1), np.float32), np.zeros(1, np.float32), np.zeros((8, 1))
        p = np.empty_like(first)
        for key0, s in ((0, first), (4, second)):
            tiles.tile(s.copy(), p, o, key0, 7, 1, mx, acc, False)
            assert np.isfinite(p).all() and p.max() <= np.exp(30.0) * (1 + 1e-6)
            o += p @ vals[key0:key0 + 4]
        assert mx[0] == (jump if moved else 0.0)
        scores = np.concatenate([first, second], axis=1)[0].astype(np.float64)
        e = np.exp(scores - mx[0])
        np.testing.assert_allclose(acc[0, 0], e.sum(), rtol=1e-6)
        np.testing.assert_allclose(o[0, 0] / acc[0, 0], e @ np.arange(8.0) / e.sum(), rtol=1e-6)


@pytest.mark.parametrize("query_block", [1, 16, 64, 256])
@pytest.mark.parametrize("key_block", [7, 32, 1024])
def test_fused_matches_numpy(query_block, key_block):
    q, k, v = _inputs(trend=3.0)
    ref = att.attention(q, k, v, 0, query_block=query_block, stats=True, kernel="numpy")
    got = att._attention_fused(q, k, v, 0, query_block=query_block, stats=True, key_block=key_block)
    _compare(got, ref)


def test_fused_matches_numpy_after_a_cache_and_with_rerope():
    q, k, v = _inputs(m=70, past=90, trend=2.0)
    ref = att.attention(q, k, v, 90, query_block=32, stats=True, kernel="numpy")
    _compare(att._attention_fused(q, k, v, 90, query_block=32, stats=True, key_block=40), ref)
    q, k, v = _inputs(m=200)
    far = _far(q, k, rerope_window(32))
    ref = att.attention(q, k, v, 0, query_block=64, stats=True, far=far, kernel="numpy")
    _compare(att._attention_fused(q, k, v, 0, query_block=64, stats=True, far=far, key_block=48), ref)
    # negative control: the far scores matter
    plain = att._attention_fused(q, k, v, 0, query_block=64, stats=True, key_block=48)
    assert np.max(np.abs(plain[1][0] - ref[1][0])) > 1e-2


def test_rescaling_is_exercised_and_exact_enough():
    """Keys growing along the sequence move every row's maximum tile after tile; one tile sees no move."""
    q, k, v = _inputs(H=2, G=1, m=300, trend=20.0)
    one = att._attention_fused(q, k, v, 0, query_block=300, stats=True, key_block=300)
    many = att._attention_fused(q, k, v, 0, query_block=300, stats=True, key_block=5)
    _compare(many, one)
    ent = one[1][0]
    assert ent.max() > 1.0  # not one-hot: the rescaled sums carry weight


def test_output_without_stats_is_the_same():
    q, k, v = _inputs()
    a = att.attention(q, k, v, 0, query_block=32, stats=True)
    b = att.attention(q, k, v, 0, query_block=32, stats=False)
    assert b[1] is None
    assert np.array_equal(a[0], b[0])


def test_a_row_does_not_depend_on_the_other_rows():
    """Query 5's numbers are the same bits whether the other queries change or not (rows are independent)."""
    q, k, v = _inputs(m=64)
    a = att.attention(q, k, v, 0, query_block=64, stats=True)
    q2 = q.copy()
    q2[:, 6:] *= 3.0
    b = att.attention(q2, k, v, 0, query_block=64, stats=True)
    assert np.array_equal(a[0][5], b[0][5])
    assert np.array_equal(a[1][0][:, 5], b[1][0][:, 5])
    assert not np.array_equal(a[1][0][:, 6], b[1][0][:, 6])


def test_bad_kernel_is_named():
    q, k, v = _inputs(m=4)
    with pytest.raises(ValueError, match="`kernel`"):
        att.attention(q, k, v, 0, query_block=4, stats=True, kernel="torch")
    for bad in (0, 2.5):
        with pytest.raises((ValueError, TypeError), match="`key_block`"):
            att.attention(q, k, v, 0, query_block=4, stats=True, kernel="numba", key_block=bad)


@pytest.mark.parametrize("workers", [1, 3])
def test_same_bits_for_any_thread_count(monkeypatch, workers):
    q, k, v = _inputs(m=300)
    ref = att._attention_fused(q, k, v, 0, query_block=128, stats=True, key_block=64)
    monkeypatch.setattr(att, "_WORKERS", workers)
    got = att._attention_fused(q, k, v, 0, query_block=128, stats=True, key_block=64)
    assert np.array_equal(got[0], ref[0])
    for x, y in zip(got[1], ref[1]):
        assert np.array_equal(x, y)


def test_float32_exponential_within_one_ulp():
    """The fused kernel's exponential against float64 ``exp`` rounded to float32, on [-87, 0] densely and at the ends."""
    rng = np.random.default_rng(3)
    y = np.concatenate([np.linspace(-87.0, 0.0, 200_001), -rng.exponential(5.0, 100_000), [0.0, -1e-30, -87.0]])
    y = y[y >= -87.0].astype(np.float32)
    row, out = y.copy(), np.empty_like(y)
    tiles.shift_exp32(row, y.size, np.float32(0.0), out)
    true = np.exp(y.astype(np.float64))
    ulps = np.abs(out - true) / np.spacing(true.astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.0
    assert out[-3] == 1.0 and out[-2] == 1.0
    assert np.array_equal(row, y)  # shifted by 0


def test_float32_exponential_shifts_and_flushes_below_its_range():
    row = np.array([3.0, 2.0, -90.0, 1e30, 7.0], dtype=np.float32)
    out = np.full(5, -1.0, dtype=np.float32)
    tiles.shift_exp32(row, 4, np.float32(3.0), out)  # the fifth entry is not touched
    np.testing.assert_array_equal(row, np.array([0.0, -1.0, -93.0, 1e30 - 3.0, 7.0], dtype=np.float32))
    assert out[0] == 1.0 and abs(out[1] - np.exp(-1.0)) <= np.spacing(np.float32(np.exp(-1.0)))
    assert out[2] == 0.0 and out[4] == -1.0


@pytest.mark.parametrize("hi", [1, 2, 15, 16, 17, 63, 64, 1000, 1024])
def test_row_maximum_is_numpys_over_the_first_hi_entries(hi):
    """The tile's row maximum against ``np.max`` of the masked prefix, wherever the largest entry sits."""
    rng = np.random.default_rng(hi)
    for where in (0, hi // 2, hi - 1):
        row = rng.standard_normal(1024).astype(np.float32)
        row[hi:] = 1e30  # past hi: the keys this row does not see
        row[where] = 5.0 + rng.random()
        got = tiles.row_max(row, hi)
        assert got == row[:hi].max() and got == row[where]
    row = np.full(1024, att._MASK)
    assert tiles.row_max(row, hi) == att._MASK


def test_row_maximum_ignores_nans_like_nanmax():
    row = np.array([np.nan, -3.0, 2.0, np.nan, 1.0], dtype=np.float32)
    assert tiles.row_max(row, 5) == np.nanmax(row) == 2.0
    assert tiles.row_max(row, 2) == -3.0


def test_blas_runs_on_one_thread_in_the_fused_kernel_and_gets_its_count_back():
    """Every OpenBLAS numpy loaded is found (Linux, numpy's wheels), set to one thread inside, restored after."""
    setters = att._blas_thread_setters()
    assert setters, "no OpenBLAS found in /proc/self/maps: numpy's BLAS is not OpenBLAS 0.3.27 or later"
    before = [fn(3) for fn in setters]  # a known count to get back
    try:
        with att.blas_on_one_thread():
            inside = [fn(1) for fn in setters]
        after = [fn(3) for fn in setters]
        assert inside == [1] * len(setters) and after == [3] * len(setters)
        with pytest.raises(RuntimeError):
            with att.blas_on_one_thread():
                raise RuntimeError("a unit failed")
        assert [fn(3) for fn in setters] == [3] * len(setters)
        outer = att.blas_on_one_thread()  # overlapping calls (two threads): the last to leave restores
        inner = att.blas_on_one_thread()
        outer.__enter__()
        inner.__enter__()
        outer.__exit__(None, None, None)
        assert [fn(1) for fn in setters] == [1] * len(setters)
        inner.__exit__(None, None, None)
        assert [fn(3) for fn in setters] == [3] * len(setters)
    finally:
        for fn, count in zip(setters, before):
            fn(count)


def test_fused_calls_from_two_threads_at_once_give_the_same_bits():
    """Two callers share the pool and the BLAS setting: each gets what it gets alone, and BLAS its count back."""
    inputs = [_inputs(m=200, seed=s) for s in (4, 5)]
    alone = [att._attention_fused(*x, 0, query_block=64, stats=True, key_block=64) for x in inputs]
    with ThreadPoolExecutor(2) as ex:
        both = list(ex.map(lambda x: att._attention_fused(*x, 0, query_block=64, stats=True, key_block=64), inputs))
    for got, ref in zip(both, alone):
        assert np.array_equal(got[0], ref[0]) and all(np.array_equal(a, b) for a, b in zip(got[1], ref[1]))
    assert att._BLAS_HELD[0] == 0


@pytest.mark.parametrize("shape", [(1, 24, 8), (37, 64, 9), (600, 576, 192), (1030, 192, 576)])
def test_matmul_rows_is_one_product_bit_for_bit(shape):
    """The rows split over the threads on one BLAS thread each give the bits of one ``np.matmul`` on BLAS's threads
    (the layers' shapes; small products are not split), into ``out`` where given; the BLAS count comes back."""
    m, k, n = shape
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((n, k), dtype=np.float32).T  # a transposed weight, as the layers pass them
    setters = att._blas_thread_setters()
    before = [fn(2) for fn in setters]
    try:
        ref = a @ b
        assert np.array_equal(att.matmul_rows(a, b), ref)
        out = np.full((m, n), np.nan, np.float32)
        assert att.matmul_rows(a, b, out=out) is out and np.array_equal(out, ref)
        assert [fn(2) for fn in setters] == [2] * len(setters)
    finally:
        for fn, count in zip(setters, before):
            fn(count)


@pytest.mark.parametrize("r0, r1, most", [(0, 1, 4), (3, 10, 4), (0, 4096, 512), (5, 1030, 256), (0, 300, 512)])
def test_chunks_cover_the_range_in_even_pieces(r0, r1, most):
    got = att.chunks(r0, r1, most)
    assert got[0][0] == r0 and got[-1][1] == r1 and all(b == c for (_, b), (c, _) in zip(got, got[1:]))
    sizes = [b - a for a, b in got]
    assert max(sizes) <= most and max(sizes) - min(sizes) <= 1 and len(got) == -(-(r1 - r0) // most)


def test_split_rows_gives_no_thread_fewer_than_its_minimum():
    seen = []
    att.split_rows(lambda a, b: seen.append((a, b)), 700, 256)
    assert sorted(seen) == ([(0, 350), (350, 700)] if att._WORKERS >= 2 else [(0, 700)])
    seen.clear()
    att.split_rows(lambda a, b: seen.append((a, b)), 511, 256)
    assert seen == [(0, 511)]

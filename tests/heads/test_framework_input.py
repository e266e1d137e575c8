"""What frameworks hand over, as a table: each case is the answer of a naive per-row loop over the allowed keys, or one clear error.

The inputs are shaped and masked as transformers makes them: logits ``(batch, heads, queries,
keys)`` with an additive mask added (``-inf``, the float16 or float32 minimum, ``-1e4``), the
probabilities of ``output_attentions=True`` (0 on masked keys), the ``(batch, keys)``
``attention_mask`` of a tokenizer (bool or 0/1 integers) and the ``(batch, 1, queries, keys)``
boolean or additive masks; float64, float32, float16 and bfloat16 (``ml_dtypes``) arrays; a batch
of one.  The batch of three sequences of three tokens is the one where a ``(batch, keys)`` mask
could pass for ``(queries, keys)``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import softmax_scale as ss

BF16 = ml_dtypes.bfloat16
F16_MIN = float(np.finfo(np.float16).min)
F32_MIN = float(np.finfo(np.float32).min)
#: batch, heads, tokens, and each sequence's real tokens (right padding)
GEOMETRIES = {"wide": (2, 2, 7, (7, 5)), "square": (3, 2, 3, (3, 2, 2)), "one": (1, 3, 6, (4,))}


def _geometry(name):
    B, H, T, lengths = GEOMETRIES[name]
    rng = np.random.default_rng(list(GEOMETRIES).index(name))
    x = 1.5 * rng.standard_normal((B, H, T, T))
    real = np.arange(T)[None, :] < np.array(lengths)[:, None]  # [batch, keys]
    tril = np.tril(np.ones((T, T), dtype=bool))
    return x, real, tril


def _allowed(name, kind):
    x, real, tril = _geometry(name)
    B, H, T = x.shape[:3]
    pad = np.broadcast_to(real[:, None, None, :], (B, 1, T, T))
    out = {"pad": pad, "causal": np.broadcast_to(tril, (B, 1, T, T)), "causal+pad": pad & tril}[kind]
    return np.broadcast_to(out, x.shape)


def _cast(a, dtype):
    return np.asarray(a, dtype=np.float64).astype(dtype)


def _softmax(logits, dtype):
    """The probabilities a framework returns in ``dtype``: computed in float32, exact zeros on masked keys."""
    z = np.asarray(logits, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(dtype)


def naive(scores, allowed, source):
    """One row at a time over the allowed keys of the array handed over (rows of fewer than 2 keys skipped)."""
    s64 = np.asarray(scores, dtype=np.float64)
    out = {k: np.zeros(s64.shape[:-2]) for k in ("n", "sigma", "entropy", "sum_p2")}
    queries = np.zeros(s64.shape[:-2], dtype=np.int64)
    for idx in np.ndindex(*s64.shape[:-2]):
        acc = {k: [] for k in out}
        for i in range(s64.shape[-2]):
            keys = np.flatnonzero(allowed[idx][i])
            if keys.size < 2:
                continue
            v = s64[idx][i, keys]
            if source == "probs":
                p = v / v.sum()
                logit = np.log(p)
            else:
                logit = v
                p = np.exp(v - v.max())
                p /= p.sum()
            acc["n"].append(keys.size)
            acc["sigma"].append(logit.std())
            acc["entropy"].append(-np.sum(p * np.log(p)))
            acc["sum_p2"].append(np.sum(p * p))
        queries[idx] = len(acc["n"])
        for k in out:
            out[k][idx] = np.mean(acc[k])
    return out, queries


def _cases():
    """``(id, build)``: ``build()`` returns ``(kwargs, (scores, allowed, source) or None, error regex or None)``."""
    cases = []

    def add(case_id, build):
        cases.append(pytest.param(build, id=case_id))

    for g in GEOMETRIES:
        # the (batch, keys) attention_mask of a tokenizer: bool and 0/1 integers, per sequence
        for mdtype in (bool, np.int64):
            def build(g=g, mdtype=mdtype):
                x, real, _ = _geometry(g)
                return {"logits": x, "mask": real.astype(mdtype)}, (x, _allowed(g, "pad"), "logits"), None
            add(f"{g}-logits-BK-{np.dtype(mdtype).name}", build)

        # causal+pad logits as a hook sees them, per fill, with the additive or boolean (B, 1, Q, K) mask
        for fill, dtype in ((-np.inf, np.float32), (F32_MIN, np.float32), (-1e4, np.float32), (F16_MIN, np.float16),
                            (F32_MIN, BF16)):
            def build(g=g, fill=fill, dtype=dtype):
                x, _, _ = _geometry(g)
                allowed = _allowed(g, "causal+pad")
                additive = np.where(allowed[:, :1], 0.0, fill)
                with np.errstate(invalid="ignore"):
                    logits = _cast(x + additive, dtype)
                return {"logits": logits, "mask": _cast(additive, dtype)}, (logits, allowed, "logits"), None
            add(f"{g}-logits-additive-{fill:g}-{np.dtype(dtype).name}", build)

        # the same logits without a mask: refused, or read with mask_fill="mask"
        def build(g=g):
            x, _, _ = _geometry(g)
            logits = np.where(_allowed(g, "causal+pad"), x, F32_MIN).astype(np.float32)
            return {"logits": logits}, None, r"`logits`: .* look like a mask fill .*pass mask="
        add(f"{g}-logits-fills-no-mask", build)

        def build(g=g):
            x, _, _ = _geometry(g)
            allowed = _allowed(g, "causal+pad")
            logits = np.where(allowed, x, F32_MIN).astype(np.float32)
            return {"logits": logits, "mask_fill": "mask"}, (logits, allowed, "logits"), None
        add(f"{g}-logits-fills-mask_fill", build)

        # output_attentions: causal probabilities, without a mask (refused), with causal=True, in each dtype
        for dtype in (np.float32, np.float16, BF16):
            def build(g=g, dtype=dtype):
                x, _, _ = _geometry(g)
                p = _softmax(np.where(_allowed(g, "causal"), x, F32_MIN), dtype)
                return {"probs": p}, None, r"`probs`: .*every key a causal mask hides is exactly 0.*pass causal=True"
            add(f"{g}-probs-causal-no-mask-{np.dtype(dtype).name}", build)

            def build(g=g, dtype=dtype):
                x, _, _ = _geometry(g)
                allowed = _allowed(g, "causal")
                p = _softmax(np.where(allowed, x, F32_MIN), dtype)
                return {"probs": p, "causal": True}, (p, allowed, "probs"), None
            add(f"{g}-probs-causal-{np.dtype(dtype).name}", build)

        # padded probabilities: without the mask (refused where a padding key exists), with (B, K) and (B, 1, Q, K)
        def build(g=g):
            x, real, _ = _geometry(g)
            p = _softmax(np.where(_allowed(g, "pad"), x, F32_MIN), np.float32)
            if real.all():
                return {"probs": p}, (p, _allowed(g, "pad"), "probs"), None
            return {"probs": p}, None, r"`probs`: .*probability exactly 0 for every query that may see it.*pass mask="
        add(f"{g}-probs-pad-no-mask", build)

        def build(g=g):
            x, real, _ = _geometry(g)
            allowed = _allowed(g, "pad")
            p = _softmax(np.where(allowed, x, F32_MIN), np.float32)
            return {"probs": p, "mask": real}, (p, allowed, "probs"), None
        add(f"{g}-probs-pad-BK", build)

        def build(g=g):
            x, real, _ = _geometry(g)
            allowed = _allowed(g, "causal+pad")
            p = _softmax(np.where(allowed, x, F32_MIN), np.float32)
            return {"probs": p, "mask": real, "causal": True}, (p, allowed, "probs"), None
        add(f"{g}-probs-causal+pad-BK-causal", build)

        def build(g=g):
            x, _, _ = _geometry(g)
            allowed = _allowed(g, "causal+pad")
            p = _softmax(np.where(allowed, x, -np.inf), np.float32)
            return {"probs": p, "mask": np.where(allowed[:, :1], 0.0, F32_MIN)}, (p, allowed, "probs"), None
        add(f"{g}-probs-causal+pad-additive", build)

        # shapes that do not state their axes
        def build(g=g):
            x, _, tril = _geometry(g)
            return {"logits": x, "mask": tril}, None, r"`mask` .*a 2-d mask is (the|read as the) \(batch, keys\) padding mask"
        add(f"{g}-QK-mask-refused", build)

    def build():
        x, real, _ = _geometry("wide")
        return {"logits": x, "mask": real[:, None, :]}, None, r"`mask` of shape \(2, 1, 7\) .*pass the \(batch, keys\)"
    add("3-d-mask-refused", build)

    def build():
        x, real, _ = _geometry("wide")
        return {"logits": x, "mask": real[0]}, None, r"`mask` of shape \(7,\) "
    add("1-d-mask-refused", build)

    def build():
        x, real, _ = _geometry("wide")
        return {"logits": x, "mask": np.where(real, 0.0, -0.5)[:, None, None, :]}, None, \
            r"`mask`: a float mask is additive.*got -0.5"
    add("additive-mask-with-a-bias-refused", build)

    def build():
        x, real, _ = _geometry("wide")
        return {"logits": x, "mask": real.astype(np.int64) * 2}, None, r"`mask`: an integer mask holds 1 .*got 2"
    add("integer-mask-of-2s-refused", build)

    def build():
        x, real, _ = _geometry("square")
        real = real.copy()
        real[2, 1:] = False  # a sequence of one token: no query has 2 keys
        return {"logits": x, "mask": real}, None, r"`mask` leaves no query row of head \(2, 0\)"
    add("one-token-sequence-refused", build)

    def build():
        x, real, tril = _geometry("one")
        allowed = _allowed("one", "causal+pad")
        return {"logits": x, "mask": (real[:, None, None, :] & tril)}, (x, allowed, "logits"), None
    add("one-logits-B1QK-bool", build)
    return cases


CASES = _cases()


def test_the_table_has_at_least_thirty_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("build", CASES)
def test_framework_input_is_the_naive_answer_or_one_clear_error(build):
    kwargs, ref, error = build()
    if error is not None:
        with pytest.raises(ValueError, match=error) as exc:
            ss.head_stats(**kwargs, predict=False)
        assert "\n" not in str(exc.value)
        return
    r = ss.head_stats(**kwargs, predict=False)
    want, queries = naive(*ref)
    np.testing.assert_array_equal(r.queries, queries)
    for f in ("n", "sigma", "entropy", "sum_p2"):
        np.testing.assert_allclose(getattr(r, f), want[f], rtol=1e-10, atol=1e-12, err_msg=f)


def test_a_padding_mask_of_as_many_sequences_as_tokens_is_read_per_sequence():
    """Three sequences of three tokens holding 3, 2 and 2 real ones: n is 3, 2, 2, not 2.33 for each."""
    x, real, _ = _geometry("square")
    r = ss.head_stats(x, mask=real, predict=False)
    assert r.n.tolist() == [[3.0, 3.0], [2.0, 2.0], [2.0, 2.0]]
    # the (queries, keys) reading it was taken for before
    assert not np.allclose(r.entropy, ss.head_stats(x, mask=real[None, None], predict=False).entropy)

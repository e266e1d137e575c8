"""Your own model, measured: the multiplier on ``q.k`` past the training length that its loss prefers.

:func:`measure` reads a user's GGUF decoder (any architecture of
:data:`softmax_scale.models.gguf_file.ARCHITECTURES`) at the lengths asked, under the RoPE
scaling the file carries (:func:`softmax_scale.models.recipe.file_recipe`) or a named variant,
and for every *cell* — a constant multiplier on the logits of the queries past ``L`` (the
queries that see more than ``L`` keys), a published shape from the scheme registry
(``qwen_logn``, ``yarn``'s temperature, ``llama4``), and the multiplier the file's own recipe
applies (llama.cpp's) — it scores

- the next-token loss on documents (windows of ``n`` tokens of the user's text, or of the texts
  that ship with Python, :func:`softmax_scale.models.corpus`: the first window of every text, then
  the second...), mean over the positions past ``L``;
- pass-key retrieval (:func:`softmax_scale.experiments.real_passkey.passkey_sequence`): a key is
  retrieved when the greedy choice is right at all five digits, teacher-forced.

**Units.** One unit is a (task, length, document or prompt): the positions where the cells'
multipliers are 1 run once (the cached prefix: up to ``L``, or ``L - 1`` with ``llama4``), and
every cell continues from their keys and values (:func:`softmax_scale.models.readout.read_out`);
a cell that changes the multiplier earlier (a recipe's factor on every position) reads its whole
sequence, and two cells with the same multipliers are read once.  Units go to any
:class:`concurrent.futures.Executor` (:func:`~.sweep.run_sweep`); the result file is resumable
and names the model's SHA-256, the command and the code revision.

**Statistics** (float64, over documents).  The minimising constant multiplier is the vertex of the
parabola through the grid's lowest mean loss and its two neighbours (the grid's end where the
lowest is there); its interval is the 2.5 and 97.5 percentiles of the same minimiser over
:data:`BOOTSTRAP` resamples of the documents (a percentile bootstrap, seeded).  Each other cell
is compared with the constant 1 document by document (mean paired difference and its standard
error).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._util.store import ResultStore, source_revision
from .._util.validation import check_choice, check_int, check_real
from .base import Experiment

__all__ = ["BOOTSTRAP", "CONSTANT", "DEFAULT_FACTORS", "FILE_ROPE", "RECIPE", "SHAPES", "LengthCurve", "MeasureConfig",
           "MeasureExperiment", "MeasureResult", "measure", "quick_config", "score_bound", "summarise"]

#: The constant multipliers on ``q.k`` past ``L`` (1: the model as trained).
DEFAULT_FACTORS = (1.0, 1.05, 1.1, 1.2, 1.3, 1.5)
#: The published shapes, by their names in the scheme registry.
SHAPES = ("qwen_logn", "yarn", "llama4")
#: ``scheme`` of the constant cells and of the file's own recipe.
CONSTANT, RECIPE = "constant", "recipe"
#: ``rope`` meaning the file's own RoPE scaling.
FILE_ROPE = "file"
#: Where the key's line sits in the filler, by prompt (prompt ``k`` at ``DEPTHS[k % 3]``).
DEPTHS = (0.1, 0.5, 0.9)
#: Seeds the pass keys (key ``k``: ``numpy.random.default_rng([KEY_SEED, k])``) and the bootstrap.
KEY_SEED = 2026
#: Bootstrap resamples of the documents.
BOOTSTRAP = 2000
#: Columns: the unit (``task`` ``loss`` or ``passkey``, ``length``, ``item``: the document or prompt),
#: the cell (``scheme``; ``factor``: the constant, or a shape's multiplier at the last position),
#: ``rope``, ``depth`` (a prompt's), then the metric: ``loss`` (mean nats over ``count`` scored
#: tokens), ``retrieved`` (1 or 0; empty for documents), ``factor_mean`` (the multiplier actually
#: applied, mean over the scored queries), ``seconds``.
COLUMNS = ("task", "length", "item", "scheme", "factor", "rope", "depth", "loss", "retrieved", "factor_mean", "count",
           "seconds")
TEXT = ("task", "item", "scheme", "rope")
INTS = ("length", "count")


@dataclass(frozen=True)
class MeasureConfig:
    """What :func:`measure` runs.

    Attributes
    ----------
    model : str
        The GGUF file.
    lengths : tuple of int
        Sequence lengths ``n`` (each above ``L``).
    rope : str
        :data:`FILE_ROPE` (the file's own scaling) or a variant of :data:`softmax_scale.schemes.rope.ROPES`
        but ``rerope``, set for ``L`` and each ``n``.
    train_length : int or None
        ``L``; the file's (its original context length under a RoPE scaling) where None.
    factors : tuple of float
        The constant multipliers (1 is added where missing).
    shapes : tuple of str
        Published shapes from the scheme registry.
    recipe : bool
        Also read the file's own multiplier.
    texts : tuple of str
        Text files to cut documents from; the texts that ship with Python where empty.
    docs : int
        Documents per length.
    prompts : int
        Pass-key prompts per length (0: none).
    query_block : int
    backend : {"numpy", "jax"}
    quick : bool
    """

    model: str
    lengths: tuple
    rope: str = FILE_ROPE
    train_length: int | None = None
    factors: tuple = DEFAULT_FACTORS
    shapes: tuple = SHAPES
    recipe: bool = True
    texts: tuple = ()
    docs: int = 6
    prompts: int = 12
    query_block: int = 256
    backend: str = "numpy"
    quick: bool = False


def quick_config(config: MeasureConfig) -> MeasureConfig:
    """The quick form of ``config``: the pipeline at a pretend ``L``, not the model.

    ``L`` is ``15/16`` of the shortest length ``n``, at most ``n - 2`` (unless given); constants 0.9, 1
    and 1.2; the ``yarn`` shape; at most two documents and one prompt.
    """
    n = min(config.lengths)
    L = config.train_length or max(2, min(n * 15 // 16, n - 2))
    return dataclasses.replace(config, train_length=L, factors=(0.9, 1.0, 1.2), shapes=("yarn",),
                               docs=min(config.docs, 2), prompts=min(config.prompts, 1), quick=True)


# ---------------------------------------------------------------------------------------------
# The run: model, texts, cells


_RUNS: dict = {}


@dataclass
class _Run:
    """What the units of one configuration share in one process: the model, its recipe, the texts."""

    config: MeasureConfig
    model: object
    L: int
    recipe: object
    texts: dict = field(default_factory=dict)

    def frequencies(self, n: int) -> np.ndarray:
        from ..models.llama import model_frequencies

        if self.config.rope == FILE_ROPE:
            return self.recipe.frequencies(self.model.config, n)
        return model_frequencies(self.model.config, self.config.rope, self.L, n)

    def cells(self, n: int) -> list:
        """``(scheme, factor label, multipliers [n] or [layers, heads, n])`` of every cell at length ``n``."""
        from ..models.llama import scale_factors

        c = self.model.config
        out = []
        past = np.arange(n) >= self.L  # the queries that see more than L keys
        for f in self.config.factors:
            out.append((CONSTANT, float(f), np.where(past, float(f), 1.0)))
        for s in self.config.shapes:
            m = scale_factors(s, np.arange(1, n + 1), c.head_dim, self.L)
            out.append((s, float(m[-1]), m))
        if self.config.recipe:
            m = self.recipe.factors(self.model, n)
            out.append((RECIPE, float(np.mean(m[..., -1])), m))
        return out

    def documents(self, n: int) -> list:
        """``(name, ids [n])`` of the documents at length ``n``.

        Windows of ``n`` tokens: the first of every text, then the second...; a window is named
        ``<text>#<w>`` (the ``w``-th ``n`` tokens of the text).  When the file asks for a BOS first
        (``config.add_bos``), a window is the BOS and the first ``n - 1`` of its tokens.
        """
        from ..models.corpus import corpus, corpus_names

        cfg = self.config
        sources = cfg.texts or tuple(corpus_names())
        for src in sources:
            if src not in self.texts:
                try:
                    text = Path(src).read_text(encoding="utf-8") if cfg.texts else corpus(src)
                except FileNotFoundError:
                    if cfg.texts:
                        raise
                    self.texts[src] = (np.zeros(0, dtype=np.int64), None)  # not in this Python: no windows
                    continue
                self.texts[src] = (self.model.tokenize(text), hashlib.sha256(text.encode()).hexdigest()[:16])
        windows = {src: len(self.texts[src][0]) // n for src in sources}
        out = []
        for w in range(max(windows.values(), default=0)):
            for src in sources:
                if w < windows[src] and len(out) < cfg.docs:
                    label = os.path.basename(src) if cfg.texts else src
                    bos = self.model.bos_first()
                    window = self.texts[src][0][w * n:(w + 1) * n - bos.size]
                    out.append((f"{label}#{w}", np.concatenate([bos, window])))
        if len(out) < cfg.docs:
            raise ValueError(f"`text`: {len(out)} windows of {n} tokens, fewer than `docs` = {cfg.docs} "
                             f"({'in the files given' if cfg.texts else 'in the texts that ship with Python'})")
        return out

    def prompt(self, n: int, k: int):
        from .real_passkey import passkey_sequence

        key = "".join(str(int(x)) for x in np.random.default_rng([KEY_SEED, k]).integers(0, 10, size=5))
        return passkey_sequence(self.model, n, DEPTHS[k % len(DEPTHS)], key)


def _run_of(config: MeasureConfig) -> _Run:
    """The run of ``config`` in this process (the model read once)."""
    if config not in _RUNS:
        from ..models.llama import LlamaDecoder
        from ..models.recipe import file_recipe

        _RUNS.clear()
        model = LlamaDecoder.from_gguf(config.model)
        recipe = file_recipe(model) if config.rope == FILE_ROPE or config.recipe else None
        L = config.train_length or (recipe.train_length if recipe is not None else model.config.context_length)
        _RUNS[config] = _Run(config, model, int(L), recipe)
    return _RUNS[config]


# ---------------------------------------------------------------------------------------------
# The experiment


def _first_change(f, n: int) -> int:
    """The first position whose multiplier is not 1 (``n`` where there is none)."""
    ones = np.all(np.reshape(f, (-1, n)) == 1.0, axis=0)
    return n if ones.all() else int(np.argmin(ones))


def _prefix_length(factors, n: int, L: int, first_scored: int) -> int:
    """The positions read once and continued: up to the first change of the cells that keep 1 up to ``L / 2``.

    A cell whose multiplier changes earlier (a recipe's factor on every position) reads its whole
    sequence; the prefix never runs past the first scored position.
    """
    starts = [s for s in (_first_change(f, n) for f in factors) if s >= L // 2]
    return min(starts + [first_scored]) if starts else 0


@dataclass(frozen=True)
class MeasureTask:
    """One unit: a (task, length, document or prompt)."""

    task: str
    length: int
    item: str
    config: MeasureConfig = field(repr=False, compare=False)


def _text_hashes(documents: str) -> dict:
    """``{text: sha256 prefix}`` as a header's ``documents`` line names them."""
    return dict(re.findall(r"(?:\(|; )([^;]+?) sha256 ([0-9a-f]{16})", documents))


def _same_documents(store, header: dict, run, lengths) -> None:
    """Refuse to extend a file whose rows were read from other text than this run would read.

    A file may gain lengths (and so documents) it did not have; what it holds must stay what it
    was: every text both runs read has the same hash, and every document row at a length this run
    asks for is one of this run's windows at that length.
    """
    old, new = _text_hashes(store.header.get("documents", "")), _text_hashes(header["documents"])
    changed = sorted(t for t in old.keys() & new.keys() if old[t] != new[t])
    if changed:
        raise ValueError(f"`out`: {store.path} was read from other text ({', '.join(changed)} changed); "
                         "pass overwrite=True (or another file) to start again")
    windows = {n: {name for name, _ in run.documents(n)} for n in lengths}
    for task, n, item in store.done:
        if task == "loss" and int(n) in windows and item not in windows[int(n)]:
            raise ValueError(f"`out`: {store.path} holds document {item} at n = {n}, which this run does not "
                             "read; pass overwrite=True (or another file) to start again")


def _overflow(scheme, label, task) -> ValueError:
    """The refusal of a cell whose loss is not finite (nothing of its unit is written)."""
    where = f"on {task.item} at n = {task.length}"
    if scheme == CONSTANT and label != 1.0:
        return ValueError(f"`factors`: {label:g} times q.k overflows float32 (a non-finite loss {where}); "
                          "use smaller factors")
    return ValueError(f"`model`: the cell {scheme} {label:g} gives a non-finite loss {where} (float32 overflows)")


def _prompt_name(k: int) -> str:
    return f"d{DEPTHS[k % len(DEPTHS)]:g}-k{k}"


class MeasureExperiment(Experiment):
    """The sweep behind :func:`measure` (see the module docstring); not one of the project's experiments."""

    name = "measure"
    description = "a user's GGUF decoder: loss and pass keys against the multiplier on q.k past L"
    file_stem = "measure"
    columns, text, ints = COLUMNS, TEXT, INTS
    key = task_columns = ("task", "length", "item")
    match = ("model_sha256", "train_length", "rope", "cells", "prompts", "scoring")  # documents: _same_documents
    float_format = ".9g"

    def __init__(self, progress: bool = True):
        self.progress = progress
        self.started = time.perf_counter()
        self._finished = 0
        self.todo = 0

    def config(self, quick: bool = False):
        """Not used: :func:`measure` builds the configuration."""
        raise NotImplementedError("measure's configuration comes from measure()")

    def tasks(self, config, *, out=None, progress: bool = False) -> list:
        """Per length: the documents, then the prompts."""
        run = _run_of(config)
        tasks = []
        for n in config.lengths:
            tasks += [MeasureTask("loss", n, name, config) for name, _ in run.documents(n)]
            tasks += [MeasureTask("passkey", n, _prompt_name(k), config) for k in range(config.prompts)]
        return tasks

    def task_cells(self, task) -> tuple:
        """``(task, length, item)``."""
        return (task.task, task.length, task.item)

    def expected_rows(self, task) -> int:
        """A row per cell."""
        c = task.config
        return len(c.factors) + len(c.shapes) + bool(c.recipe)

    def run_task(self, task) -> list:
        """Read the unit's sequence under every cell, continuing the shared prefix."""
        from ..models.readout import read_out

        run = _run_of(task.config)
        n, L = task.length, run.L
        if task.task == "loss":
            ids = dict(run.documents(n))[task.item]
            scored, depth, all_of = np.arange(L, n - 1), float("nan"), False
        else:
            seq = run.prompt(n, int(task.item.split("-k")[1]))
            ids, scored, depth, all_of = seq.ids, seq.scored, seq.depth, True
        inv = run.frequencies(n)
        cells = run.cells(n)
        start = _prefix_length([f for _, _, f in cells], n, L, int(scored.min()))
        kw = dict(inv_freq=inv, query_block=task.config.query_block, backend=task.config.backend)
        prefix = read_out(run.model, ids, [], stop=start, **kw) if start > 0 else None
        read, rows = {}, []
        for scheme, label, f in cells:
            t0 = time.perf_counter()
            k = f.tobytes()
            if k not in read:
                whole = prefix is None or _first_change(f, n) < start
                r = read_out(run.model, ids, scored, probe=[], start=0 if whole else start,
                             cache=None if whole else prefix.cache, factors=f, **kw)
                read[k] = (r.argmax, r.nll)
            argmax, nll = read[k]
            if not np.all(np.isfinite(nll)):
                raise _overflow(scheme, label, task)
            hit = argmax == ids[scored + 1]
            applied = np.reshape(f, (-1, n))[:, scored].mean()
            rows.append((task.task, n, task.item, scheme, label, task.config.rope, depth, float(np.mean(nll)),
                         float(hit.all()) if all_of else float("nan"), float(applied), int(scored.size),
                         round(time.perf_counter() - t0, 2)))
        return rows

    def task_finished(self, task) -> None:
        """After the first unit: the estimate of the whole sweep, measured on it."""
        self._finished += 1
        if self._finished == 1 and self.progress:
            took = time.perf_counter() - self.started
            print(f"measure: the first unit took {took:.0f} s; about {took * (self.todo - 1) / 60:.1f} min for "
                  f"the other {self.todo - 1}", file=sys.stderr)

    def header(self, config, tasks, command) -> dict:
        """The command, the model file and its hash, ``L``, the RoPE, the cells, the texts, the code."""
        run = _run_of(config)
        m, r = run.model, run.recipe
        docs = sorted({t.item for t in tasks if t.task == "loss"})
        hashes = "; ".join(f"{os.path.basename(s) if config.texts else s} " + (f"sha256 {h}" if h else "absent")
                           for s, (_, h) in run.texts.items())
        recipe = "none" if r is None else f"{r.rope_type} s = {r.factor:g} at L = {r.train_length}, {r.engine}'s multiplier"
        return {
            "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "experiment": f"measure{' (quick)' if config.quick else ''}",
            "model": os.path.basename(m.path),
            "model_sha256": m.sha256,
            "architecture": m.config.arch,
            "train_length": run.L,
            "head_dim": m.config.head_dim,
            "rope": config.rope if config.rope != FILE_ROPE else f"file ({recipe})",
            "recipe": recipe,
            "cells": f"constant {', '.join(f'{f:g}' for f in config.factors)} on the queries past L; shapes "
                     f"{', '.join(config.shapes) or 'none'} (scheme registry, pinned at L)"
                     + ("; the file's recipe" if config.recipe else ""),
            "documents": f"{len(docs)} per length: {', '.join(docs)} ({hashes})",
            "prompts": f"{config.prompts} per length: real_passkey.passkey_sequence at depths "
                       f"{', '.join(f'{d:g}' for d in DEPTHS)} in turn, key k = numpy default_rng([{KEY_SEED}, k])",
            "scoring": "loss: mean next-token nats at the positions past L; passkey: all five digits the greedy "
                       "choice (teacher-forced); float32 activations, float64 statistics"
                       + ("; a BOS first in every sequence (the file's add_bos_token)" if m.config.add_bos else ""),
            "backend": config.backend,
            "statistics": f"minimiser: vertex of the parabola through the lowest mean loss and its neighbours; "
                          f"interval: percentile bootstrap over documents ({BOOTSTRAP} resamples, 95%)",
            "code": f"softmax_scale at {source_revision()}",
            "date": datetime.date.today().isoformat(),
        }

    def summaries(self, table) -> list:
        """The curves, one table per length."""
        return [curve.to_text() for curve in summarise(table)]


# ---------------------------------------------------------------------------------------------
# Statistics


@dataclass(frozen=True)
class LengthCurve:
    """The result at one length.

    Attributes
    ----------
    length, train_length : int
    factors : ndarray
        The constant multipliers, ascending.
    loss : ndarray
        Mean loss over the documents at each (nats).
    loss_se : ndarray
        Standard error of each one's paired difference from the constant 1.
    documents : int
    minimiser : float
        The constant multiplier the loss prefers (see the module docstring).
    interval : tuple of float
        Its 95% bootstrap interval over documents (NaN with fewer than two documents).
    at_edge : bool
        The lowest mean loss is at an end of the grid: the minimiser may lie beyond it.
    recipe_factor : float
        The file's own multiplier past ``L`` (mean over the scored queries); NaN when not read.
    recipe_inside : bool or None
        Whether it lies inside :attr:`interval` (None when either is missing).
    cells : dict
        ``"scheme factor"`` -> ``{"factor_mean", "loss", "difference", "se", "retrieved", "prompts"}``:
        every cell's mean loss, its paired difference from the constant 1 (and standard error), and
        the pass keys it retrieved out of the prompts.
    """

    length: int
    train_length: int
    factors: np.ndarray
    loss: np.ndarray
    loss_se: np.ndarray
    documents: int
    minimiser: float
    interval: tuple
    at_edge: bool
    recipe_factor: float
    recipe_inside: bool | None
    cells: dict

    def to_json(self) -> dict:
        """The fields as a dict (arrays as arrays)."""
        return {"length": self.length, "train_length": self.train_length, "factors": self.factors,
                "loss": self.loss, "loss_se": self.loss_se, "documents": self.documents,
                "minimiser": self.minimiser, "interval": list(self.interval), "at_edge": self.at_edge,
                "recipe_factor": self.recipe_factor, "recipe_inside": self.recipe_inside, "cells": self.cells}

    def to_text(self) -> str:
        """A markdown table of the cells and the minimiser's line."""
        lines = [f"n = {self.length} (L = {self.train_length}), {self.documents} document"
                 f"{'s' * (self.documents != 1)}", "", "| cell | multiplier | loss | vs constant 1 | keys |",
                 "|---|---|---|---|---|"]
        for name, c in self.cells.items():
            keys = f"{c['retrieved']}/{c['prompts']}" if c["prompts"] else "-"
            se = f" ± {c['se']:.4f}" if np.isfinite(c["se"]) else ""  # one document: no standard error
            lines.append(f"| {name} | {c['factor_mean']:.4g} | {c['loss']:.4f} | {c['difference']:+.4f}{se} | {keys} |")
        lo, hi = self.interval
        edge = " (at the grid's edge)" if self.at_edge else ""
        lines.append("")
        spread = (f"95% interval [{lo:.4g}, {hi:.4g}]" if np.isfinite(lo) and np.isfinite(hi)
                  else "no interval (it needs two documents)")
        lines.append(f"minimising constant multiplier {self.minimiser:.4g}{edge}, {spread}")
        if self.recipe_inside is not None:
            lines.append(f"the file's recipe applies {self.recipe_factor:.4g}: "
                         f"{'inside' if self.recipe_inside else 'outside'} the interval")
        return "\n".join(lines)


def _minimiser(factors: np.ndarray, mean: np.ndarray) -> tuple:
    """The parabola vertex through the lowest of ``mean`` and its neighbours; ``(x, at_edge)``."""
    j = int(np.argmin(mean))
    if j == 0 or j == factors.size - 1:
        return float(factors[j]), True
    x, y = factors[j - 1:j + 2], mean[j - 1:j + 2]
    a = np.polyfit(x, y, 2)
    if not a[0] > 0:
        return float(factors[j]), False
    return float(np.clip(-a[1] / (2 * a[0]), x[0], x[2])), False


def _curve(rows, n, L) -> LengthCurve:
    """The :class:`LengthCurve` of the rows at length ``n``."""
    loss_rows = rows["task"] == "loss"
    docs = list(dict.fromkeys(rows["item"][loss_rows]))
    const = loss_rows & (rows["scheme"] == CONSTANT)
    factors = np.unique(rows["factor"][const])
    D = np.full((len(docs), factors.size), np.nan)
    index = {d: i for i, d in enumerate(docs)}
    for d, f, v in zip(rows["item"][const], rows["factor"][const], rows["loss"][const]):
        D[index[d], np.searchsorted(factors, f)] = v
    D = D[np.all(np.isfinite(D), axis=1)]
    mean = D.mean(axis=0) if D.size else np.full(factors.size, np.nan)
    one = int(np.argmin(np.abs(factors - 1.0)))
    diff_se = ((D - D[:, [one]]).std(axis=0, ddof=1) / math.sqrt(D.shape[0]) if D.shape[0] > 1
               else np.full(factors.size, np.nan))
    x, edge = _minimiser(factors, mean) if D.size else (float("nan"), False)
    interval = (float("nan"), float("nan"))
    if D.shape[0] > 1:
        rng = np.random.default_rng([KEY_SEED, n])
        picks = rng.integers(0, D.shape[0], size=(BOOTSTRAP, D.shape[0]))
        boots = np.array([_minimiser(factors, D[p].mean(axis=0))[0] for p in picks])
        interval = (float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5)))
    cells = {}
    ref = {(t, i): v for t, i, v, s, f in zip(rows["task"], rows["item"], rows["loss"], rows["scheme"], rows["factor"])
           if s == CONSTANT and f == factors[one]}
    keys = list(dict.fromkeys(zip(rows["scheme"], rows["factor"])))
    recipe_factor = float("nan")
    for scheme, f in keys:
        sel = (rows["scheme"] == scheme) & (rows["factor"] == f)
        lsel = sel & loss_rows
        psel = sel & (rows["task"] == "passkey")
        d = np.array([v - ref[("loss", i)] for i, v in zip(rows["item"][lsel], rows["loss"][lsel])
                      if ("loss", i) in ref])
        name = f"{scheme} {f:g}" if scheme == CONSTANT else scheme
        applied = float(np.mean(rows["factor_mean"][lsel])) if lsel.any() else float(np.mean(rows["factor_mean"][sel]))
        cells[name] = {"factor_mean": applied, "loss": float(np.mean(rows["loss"][lsel])) if lsel.any() else float("nan"),
                       "difference": float(d.mean()) if d.size else float("nan"),
                       "se": float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else float("nan"),
                       "retrieved": int(np.nansum(rows["retrieved"][psel])), "prompts": int(psel.sum())}
        if scheme == RECIPE:
            recipe_factor = applied
    inside = None
    if np.isfinite(recipe_factor) and np.all(np.isfinite(interval)):
        inside = bool(interval[0] <= recipe_factor <= interval[1])
    return LengthCurve(int(n), int(L), factors, mean, diff_se, int(D.shape[0]), x, interval, edge, recipe_factor,
                       inside, cells)


def summarise(table) -> list:
    """One :class:`LengthCurve` per length of a result file read back (:meth:`MeasureExperiment.read`)."""
    r = table.rows
    L = int(table.header["train_length"])
    bad = np.flatnonzero(~np.isfinite(r["loss"]))
    if bad.size:
        i = bad[0]
        raise ValueError(f"`path`: {table.path} has a non-finite loss ({r['task'][i]}, n = {r['length'][i]}, "
                         f"{r['item'][i]}, {r['scheme'][i]} {r['factor'][i]:g}); its statistics would drop it")
    out = []
    for n in sorted(set(r["length"].tolist())):
        sel = r["length"] == n
        out.append(_curve({k: v[sel] for k, v in r.items()}, n, L))
    return out


# ---------------------------------------------------------------------------------------------
# The figure


def figure(curves, title: str = ""):
    """Loss against the constant multiplier, one line per length; the shapes and the recipe as markers, the interval as a bar."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    markers = {s: m for s, m in zip((*SHAPES, RECIPE), ("s", "^", "D", "*"))}
    for i, c in enumerate(curves):
        colour = f"C{i}"
        ax.errorbar(c.factors, c.loss, yerr=c.loss_se, color=colour, marker="o", ms=4, capsize=2,
                    label=f"n = {c.length} ({c.documents} documents)")
        y = np.nanmin(c.loss) if np.isfinite(c.loss).any() else 0.0
        lo, hi = c.interval
        if np.isfinite(lo) and np.isfinite(hi):
            ax.plot([lo, hi], [y, y], color=colour, lw=5, alpha=0.35, solid_capstyle="butt")
        for name, cell in c.cells.items():
            scheme = name.split()[0]
            if scheme in markers and np.isfinite(cell["loss"]):
                ax.plot(cell["factor_mean"], cell["loss"], marker=markers[scheme], color=colour, ls="none", ms=7,
                        mfc="none", label=scheme if i == 0 else None)
    ax.set_xlabel("multiplier on q·k past L (shapes: mean over the scored queries)")
    ax.set_ylabel("next-token loss past L (nats)")
    ax.set_title(title or "loss against the multiplier; bars: 95% bootstrap interval of the minimiser", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# The public function


@dataclass(frozen=True)
class MeasureResult:
    """What :func:`measure` wrote and found.

    Attributes
    ----------
    path : pathlib.Path
        The result file (CSV with a provenance header).
    figure : pathlib.Path or None
        The figure (PNG beside it).
    header : dict
        The file's provenance lines.
    curves : tuple of LengthCurve
        One per length.
    method : str
        How the minimiser and its interval are computed.
    """

    path: Path
    figure: Path | None
    header: dict
    curves: tuple
    method: str

    def to_json(self) -> dict:
        """Plain JSON values (for ``--json``; NaN as None)."""
        from .._util.output import jsonable

        return jsonable({"path": str(self.path), "figure": None if self.figure is None else str(self.figure),
                "model": self.header.get("model"), "model_sha256": self.header.get("model_sha256"),
                "train_length": int(self.header["train_length"]), "rope": self.header.get("rope"),
                "method": self.method, "lengths": [c.to_json() for c in self.curves]})

    def to_text(self) -> str:
        """The curves as text."""
        return "\n\n".join([f"{self.header.get('model')} (sha256 {self.header.get('model_sha256', '')[:12]}...), "
                            f"rope {self.header.get('rope')}"] + [c.to_text() for c in self.curves])


def _file(path, name: str, what: str) -> str:
    """``path`` resolved, naming an existing file; the error names ``name``."""
    from ..models._files import MissingWeightsError, check_path

    try:
        return os.fspath(check_path(path, "file", what))
    except MissingWeightsError:
        raise ValueError(f"`{name}` must be {what}, got {os.fspath(path)!r}, which does not exist") from None
    except ValueError:
        raise ValueError(f"`{name}` must be {what}, got {os.fspath(path)!r}, which is a directory") from None
    except TypeError:
        raise TypeError(f"`{name}` must be a str or path-like naming {what}, got {type(path).__name__}") from None


def _utf8(path: str) -> str:
    """``path``, whose bytes must decode as UTF-8; the error names its line and column."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        line, column = data.count(b"\n", 0, exc.start) + 1, len(data[start:exc.start].decode("utf-8")) + 1
        raise ValueError(f"`text`: {path} line {line} column {column} is not UTF-8 text "
                         f"(byte 0x{data[exc.start]:02x})") from None
    return path


def _distinct(values, name: str, what: str = "a value") -> tuple:
    """``values`` as a tuple, refused where one comes twice."""
    values = tuple(values)
    twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if twice is not None:
        raise ValueError(f"`{name}` must not repeat {what}, got {twice!r} twice")
    return values


def _past(lengths, L: int) -> None:
    """Every length must score a position past ``L`` (one whose next token is read)."""
    if lengths[0] < L + 2:
        raise ValueError(f"`n` must be at least L + 2 = {L + 2} (past the training length L = {L} is what is "
                         f"measured, and a scored token needs a next one), got {lengths[0]}")


def _target(out, quick: bool, figure_file: bool) -> Path:
    """The result file that ``out`` names; its folder must take a new file (checked by writing one)."""
    import tempfile

    from .._util.validation import check_output_dir

    out = Path(out)
    target = out if out.suffix == ".csv" else out / f"measure{'_quick' if quick else ''}.csv"
    folder = check_output_dir(target.parent, "out")
    for p in (target, target.with_suffix(".png")) if figure_file else (target,):
        if p.is_dir():
            raise ValueError(f"`out`: {p} is a folder, where the result is written as a file")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(f"`out` must be in a folder where files can be written, got {os.fspath(folder)!r} "
                         f"({exc.strerror or exc})") from None
    return target


def score_bound(model) -> float:
    """A bound on ``|q.k| / sqrt(d)`` over every layer, head and input of ``model``, from its weights.

    The attention's RMSNorm leaves ``|h| <= max|g| sqrt(D)``; a head's query is then at most
    ``||W_h||_F |h| + |b_h|`` long (or ``max|g_q| sqrt(d)`` under a per-head RMSNorm), and so is
    a key; RoPE is a rotation, so ``|q.k| <= |q| |k|`` (Cauchy-Schwarz).
    """
    c, w = model.config, model.weights
    out = 0.0
    for layer in range(c.n_layers):
        p = f"blk.{layer}."
        g = w[p + "attn_norm.weight"]
        h = float(np.max(np.abs(g))) * math.sqrt(g.size)
        q, k = (_longest(w, p + name, heads, h, c.head_dim) for name, heads in (("attn_q", c.n_heads),
                                                                               ("attn_k", c.n_kv_heads)))
        out = max(out, q * k / math.sqrt(c.head_dim))
    return out


def _longest(w, name: str, heads: int, h: float, d: int) -> float:
    """The longest of the ``heads`` vectors the tensor ``name`` makes from an input of length at most ``h``."""
    if name + "_norm.weight" in w:
        return float(np.max(np.abs(w[name + "_norm.weight"]))) * math.sqrt(d)
    W = w[name + ".weight"].astype(np.float64).reshape(heads, -1)
    b = w.get(name + ".bias", np.zeros(heads)).astype(np.float64).reshape(heads, -1)
    return float(np.max(np.linalg.norm(W, axis=1) * h + np.linalg.norm(b, axis=1)))


def _check_factors(factors, model) -> None:
    """The constants must keep every ``factor * q.k / sqrt(d)`` (and a difference of two) inside float32's range."""
    bound = score_bound(model)
    top = float(np.finfo(np.float32).max)
    limit = top / (4 * max(bound, 1.0))  # 2: the softmax subtracts the row's maximum; 2: rounding's margin
    if max(factors) > limit:
        raise ValueError(f"`factors` must be at most {limit:.3g} for this model (its weights bound |q.k| / sqrt(d) "
                         f"by {bound:.3g}; float32 holds {top:.3g}), got {max(factors):g}")


def _check(model, lengths, rope, train_length, factors, shapes, texts, docs, prompts, backend) -> tuple:
    from ..schemes import scheme_factor
    from ..schemes.rope import ROPES

    path = _file(model, "model", "a GGUF file")
    if isinstance(lengths, (int, np.integer)):
        lengths = (lengths,)
    lengths = tuple(sorted({check_int(n, "n", minimum=16) for n in lengths}))
    if not lengths:
        raise ValueError("`n` must hold at least one length")
    check_choice(rope, "rope", (FILE_ROPE, *[r for r in ROPES if r != "rerope"]))
    if train_length is not None:
        train_length = check_int(train_length, "train_length", minimum=2)
        _past(lengths, train_length)
    if isinstance(factors, (int, float, np.number)):
        factors = (factors,)
    fs = _distinct((check_real(f, "factors") for f in factors), "factors")
    if fs and min(fs) <= 0:
        raise ValueError(f"`factors` must be positive, got {min(fs)!r}")
    top = float(np.finfo(np.float32).max)
    if fs and max(fs) > top:  # the read-out multiplies q.k in float32: beyond its range at any q.k
        raise ValueError(f"`factors` must be at most {top:.4g} (float32's largest number), got {max(fs)!r}")
    shapes = _distinct((shapes,) if isinstance(shapes, str) else shapes, "shapes")
    for s in shapes:
        try:
            scheme_factor([1.0], 64, s, 2)
        except ValueError:
            raise ValueError(f"`shapes` must hold schemes of the registry (softmax-scale scale --list), got {s!r}") from None
    if isinstance(texts, (str, os.PathLike)):
        texts = (texts,)
    texts = tuple(_utf8(_file(t, "text", "a text file")) for t in texts or ())
    _distinct((os.path.basename(t) for t in texts), "text", "a file name (it names the documents)")
    docs = check_int(docs, "docs", minimum=1)
    prompts = check_int(prompts, "prompts", minimum=0)
    check_choice(backend, "backend", ("numpy", "jax"))
    return path, lengths, train_length, tuple(sorted(set(fs) | {1.0})), shapes, texts, docs, prompts


def measure(model, n, *, rope: str = FILE_ROPE, train_length: int | None = None, factors=None,
            shapes=None, recipe: bool = True, text=None, docs: int = 6, prompts: int = 12, quick: bool = False,
            out="measure", overwrite: bool = False, executor=None, workers: int = 0, scheduler: str | None = None,
            backend: str = "numpy", query_block: int = 256, figure_file: bool = True, progress: bool = True,
            command: str | None = None) -> MeasureResult:
    """Sweep the multiplier on ``q.k`` past the training length on a GGUF decoder (see the module docstring).

    Parameters
    ----------
    model : str or os.PathLike
        The GGUF file.
    n : int or sequence of int
        Sequence lengths, each above ``L``.
    rope : str
        ``"file"``: the file's own RoPE scaling; or a variant of :data:`softmax_scale.schemes.rope.ROPES`.
    train_length : int, optional
        ``L`` (the file's where omitted).
    factors : sequence of float, optional
        Constant multipliers past ``L`` (1 is always read); :data:`DEFAULT_FACTORS` (``quick``'s) where omitted.
    shapes : sequence of str, optional
        Published shapes from the scheme registry; :data:`SHAPES` (``quick``'s) where omitted.
    recipe : bool
        Also read the multiplier the file's recipe applies.
    text : str, os.PathLike or sequence of them, optional
        Text files cut into windows of ``n`` tokens; the texts that ship with Python otherwise.
    docs, prompts : int
        Documents and pass-key prompts per length.
    quick : bool
        :func:`quick_config`: the pipeline at a pretend ``L`` in a minute (``factors`` and ``shapes``
        as given, where given).
    out : str or os.PathLike
        Folder of the result file (``measure.csv``, ``measure_quick.csv``) and figure; a path ending in
        ``.csv`` names the file itself.
    overwrite : bool
        Start a new file instead of resuming.  A file resumed may gain lengths and change backend;
        it must hold rows of the same model, RoPE, cells and prompts, read from the same text.
    executor : concurrent.futures.Executor, optional
        Where the units run; ``workers`` local processes (0: this one) or a Dask ``scheduler`` otherwise.
    backend : {"numpy", "jax"}
        The read-out (:data:`softmax_scale.models.readout.BACKENDS`).
    query_block : int
    figure_file : bool
        Draw the figure.
    progress : bool
        A progress bar over the units, and the estimate after the first.
    command : str, optional
        The command recorded in the header.

    Returns
    -------
    MeasureResult

    Raises
    ------
    ValueError
        Naming the parameter: a missing, unreadable or unsupported model file, a length not at
        least ``L + 2``, an unknown RoPE variant or shape, a repeated or out-of-range factor, text
        that is missing, not UTF-8 or too short, an output folder that takes no file, a factor
        whose scores could overflow float32 (:func:`score_bound`); at run time, a non-finite loss
        (nothing of its unit is written).
    """
    from .sweep import dask_executor, run_sweep

    path, lengths, train_length, fs, shs, texts, docs, prompts = _check(
        model, n, rope, train_length, DEFAULT_FACTORS if factors is None else factors,
        SHAPES if shapes is None else shapes, text, docs, prompts, backend)
    cfg = MeasureConfig(path, lengths, rope, train_length, fs, shs, bool(recipe), texts, docs, prompts,
                        check_int(query_block, "query_block", minimum=1), backend)
    if quick:
        cfg = quick_config(cfg)
        cfg = dataclasses.replace(cfg, factors=cfg.factors if factors is None else fs,
                                  shapes=cfg.shapes if shapes is None else shs)
        _past(lengths, cfg.train_length)
    workers = check_int(workers, "workers", minimum=0, maximum=1024)
    target = _target(out, cfg.quick, figure_file)
    run = _run_of(cfg)
    _past(lengths, run.L)
    _check_factors(cfg.factors, run.model)
    if cfg.prompts:
        from .real_passkey import passkey_min_tokens

        try:
            need = passkey_min_tokens(run.model)
        except ValueError as exc:
            raise ValueError(f"`prompts`: no pass-key prompt can be built for this model ({exc}); pass prompts=0") from None
        if lengths[0] < need:
            raise ValueError(f"`n` must be at least {need} tokens for a pass-key prompt of this model, got {lengths[0]}; "
                             "pass a longer n or prompts=0")
    exp = MeasureExperiment(progress)
    tasks = exp.tasks(cfg)
    header = exp.header(cfg, tasks, command)
    store = ResultStore(target, header, COLUMNS, key=exp.key, match=exp.match, overwrite=overwrite,
                        float_format=exp.float_format)
    _same_documents(store, header, run, cfg.lengths)
    exp.todo = sum(not exp.is_done(store, t) for t in tasks)
    exp.started = time.perf_counter()
    if scheduler is not None:
        with dask_executor(scheduler) as ex:
            run_sweep(exp, tasks, store, executor=ex, progress=progress)
    else:
        run_sweep(exp, tasks, store, executor=executor, workers=workers, progress=progress)
    table = exp.read(target)
    curves = tuple(summarise(table))
    png = None
    if figure_file:
        from .._util.files import atomic_write

        fig = figure(curves, f"{os.path.basename(path)}: loss against the multiplier past L = {run.L}")
        png = target.with_suffix(".png")
        atomic_write(png, lambda p: fig.savefig(p, dpi=110, format="png"))
    return MeasureResult(target, png, dict(table.header), curves, header["statistics"])

"""measure's units: one (task, length, document or prompt) read under every cell; the result file's header.

The :class:`~.base.Experiment` behind :func:`softmax_scale.experiments.measure.measure`.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .._util.store import source_revision
from ._measure_run import (
    BOOTSTRAP,
    COLUMNS,
    CONSTANT,
    DEPTHS,
    FILE_ROPE,
    INTS,
    KEY_SEED,
    RECIPE,
    SMOKE,
    TEXT,
    MeasureConfig,
    _first_change,
    _prefix_length,
    _run_of,
)
from ._measure_stats import MIN_DOCUMENTS, adaptive_cells, documents_table, documents_wanted, follow_factors, summarise
from .base import Experiment


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


def _prompt_name(k: int, keys: int = 1) -> str:
    """Prompt ``k``'s item: ``d<depth>-k<k>`` (one key), ``h<k>-keys<keys>`` (a haystack of ``keys`` keys)."""
    return f"d{DEPTHS[k % len(DEPTHS)]:g}-k{k}" if keys == 1 else f"h{k}-keys{keys}"


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
        self.plan: list = []
        self.clock = time.perf_counter()  # the run's start: the stopping rule's estimate of a unit's time
        self.deadline: float | None = None  # where the stopping rule must stop (time.perf_counter), under a budget
        self._weight = 0.0

    def config(self, quick: bool = False):
        """Not used: :func:`measure` builds the configuration."""
        raise NotImplementedError("measure's configuration comes from measure()")

    def tasks(self, config, *, out=None, progress: bool = False) -> list:
        """Per length: the documents, then the prompts.

        Under an adaptive sweep, the first document searches (``config``), and the others and the
        prompts read the constants its rows in the file ``out`` choose (:func:`follow_factors`);
        until the file holds them, the first document alone.  Under the stopping rule
        (``config.width``), the documents its rows in ``out`` ask for (:meth:`documents`), and the
        prompts once the rule has stopped.
        """
        run = _run_of(config)
        rows = None
        if (config.adaptive or config.width) and out is not None and os.path.exists(out):
            rows = self.read(out).rows
        tasks = []
        for n in config.lengths:
            docs = [name for name, _ in run.documents(n)]
            stopped = True
            if config.width:
                docs, stopped = self.documents(config, n, docs, rows)
            cfg = config
            if config.adaptive:
                tasks.append(MeasureTask("loss", n, docs[0], config))
                first = None if rows is None else ((rows["task"] == "loss") & (rows["length"] == n)
                                                   & (rows["item"] == docs[0]) & (rows["scheme"] == CONSTANT))
                if first is None or first.sum() != config.adaptive:
                    continue
                cfg = dataclasses.replace(config, adaptive=0, factors=follow_factors(rows["factor"][first],
                                                                                      rows["loss"][first]))
                docs = docs[1:]
            tasks += [MeasureTask("loss", n, name, cfg) for name in docs]
            if stopped:
                tasks += [MeasureTask("passkey", n, _prompt_name(k, config.keys), cfg) for k in range(config.prompts)]
        return tasks

    def documents(self, config, n: int, names: list, rows) -> tuple:
        """The stopping rule at length ``n``: ``(the documents to read, whether the rule has stopped)``.

        ``names`` in window order; the leading ones the file's ``rows`` hold are read, and
        :func:`~._measure_stats.documents_wanted` says how many to read.  Under a budget
        (:attr:`deadline`), the rule also stops where the next document and the prompts still to read
        would pass it, at the time per unit of reads and length squared measured so far.
        """
        have = set()
        if rows is not None:
            sel = (rows["task"] == "loss") & (rows["length"] == n)
            have = set(rows["item"][sel].tolist())
        k = next((i for i, name in enumerate(names) if name not in have), len(names))
        factors, D = np.zeros(0), np.zeros((0, 0))
        if k:
            mine = (rows["length"] == n) & np.isin(rows["item"], names[:k])
            factors, D = documents_table({c: v[mine] for c, v in rows.items()})
        want = documents_wanted(factors, D, config.width, [KEY_SEED, n], len(names))
        if want == k + 1 and k >= min(MIN_DOCUMENTS, len(names)) and not self._fits(config, n, rows):
            print(f"measure: the budget stops the documents at {k} at n = {n}", file=sys.stderr)
            want = k
        return names[:want], want == k

    def _fits(self, config, n: int, rows) -> bool:
        """Whether one more document at ``n`` and every prompt not read yet fit before :attr:`deadline`."""
        if self.deadline is None or not self._weight:
            return True
        later = (4 if config.adaptive else len(config.factors)) + len(config.shapes) + bool(config.recipe)
        read = set() if rows is None else set(zip(rows["task"], rows["length"].tolist(), rows["item"]))
        prompts = [m for m in config.lengths for k in range(config.prompts) if ("passkey", m, _prompt_name(k, config.keys)) not in read]
        weight = (later + 1) * (float(n) ** 2 + sum(float(m) ** 2 for m in prompts))
        rate = (time.perf_counter() - self.clock) / self._weight
        return time.perf_counter() + rate * weight <= self.deadline

    def task_cells(self, task) -> tuple:
        """``(task, length, item)``."""
        return (task.task, task.length, task.item)

    def expected_rows(self, task) -> int:
        """A row per cell (a haystack's: one per key and cell)."""
        c = task.config
        return ((c.adaptive or len(c.factors)) + len(c.shapes) + bool(c.recipe)) * (c.keys if task.task == "passkey" else 1)

    def run_task(self, task) -> list:
        """Read the unit's sequence under every cell, continuing the shared prefix.

        Under an adaptive sweep (``config.adaptive``), the constants are read one after another
        (:func:`~._measure_stats.adaptive_cells` on this unit's loss, from 1 and the recipe's
        multiplier) and written in ascending order.  A haystack (``config.keys`` above 1) is read
        once per cell up to its end, and each key's question continues from its keys and values
        under the cell's multipliers at the question's positions: a row per key and cell.
        """
        from ..models.readout import read_out

        run = _run_of(task.config)
        n, L = task.length, run.L
        questions = None
        if task.task == "loss":
            ids = dict(run.documents(n))[task.item]
            scored, depth, all_of = np.arange(L, n - 1), float("nan"), False
        elif task.config.keys > 1:
            hay = run.haystack(n, int(task.item[1:].split("-")[0]))
            questions = [hay.question(j) for j in range(len(hay.keys))]
            ids, scored, all_of = hay.ids, np.array([hay.ids.size - 1]), True
        else:
            seq = run.prompt(n, int(task.item.split("-k")[1]))
            ids, scored, depth, all_of = seq.ids, seq.scored, seq.depth, True
        items = [(ids, scored, depth)] if questions is None else [(q.ids, q.scored, q.depth) for q in questions]
        inv = run.frequencies(n)
        cells = run.cells(n)
        past = np.arange(n) >= L
        adaptive = [np.where(past, 2.0, 1.0)] if task.config.adaptive else []  # the constants to come
        start = _prefix_length([f for _, _, f in cells] + adaptive, n, L, int(scored.min()))
        kw = dict(inv_freq=inv, query_block=task.config.query_block, backend=task.config.backend, kernel="numba")
        prefix = read_out(run.model, ids, [], stop=start, **kw) if start > 0 else None
        read = {}

        def row(scheme, label, f):  # the cell's rows: one, or a haystack's one per key
            t0 = time.perf_counter()
            k = f.tobytes()
            if k not in read:
                whole = prefix is None or _first_change(f, n) < start
                go = dict(start=0 if whole else start, cache=None if whole else prefix.cache)
                if questions is None:
                    r = read_out(run.model, ids, scored, probe=[], factors=f, **go, **kw)
                    read[k] = [(r.argmax, r.nll)]
                else:  # the haystack's keys and values, then each question after them (one cell's at a time)
                    cache = read_out(run.model, ids, [], stop=ids.size, factors=f[..., :ids.size], **go, **kw).cache
                    read[k] = [(r.argmax, r.nll) for r in (
                        read_out(run.model, q.ids, q.scored, probe=[], start=ids.size, cache=cache,
                                 factors=f[..., :q.ids.size], **kw) for q in questions)]
            out = []
            seconds = round((time.perf_counter() - t0) / len(items), 2)  # a haystack's read shared by its keys
            for (argmax, nll), (xs, at, where) in zip(read[k], items):
                if not np.all(np.isfinite(nll)):
                    raise _overflow(scheme, label, task)
                hit = argmax == xs[at + 1]
                applied = np.reshape(f, (-1, n))[:, at].mean()
                out.append((task.task, n, task.item, scheme, label, task.config.rope, where, float(np.mean(nll)),
                            float(hit.all()) if all_of else float("nan"), float(applied), int(at.size), seconds))
            return out

        rows = [r for c in cells for r in row(*c)]
        if task.config.adaptive:
            const = {r[4]: r for r in rows if r[3] == CONSTANT}  # 1, read with the cells: its row keeps its time

            def loss(x):
                if x not in const:
                    const[x] = row(CONSTANT, x, np.where(past, x, 1.0))[0]
                return const[x][7]

            recipe = [r[9] for r in rows if r[3] == RECIPE]
            adaptive_cells(loss, (1.0, *recipe), task.config.adaptive, task.config.spacing)
            rows = [const[x] for x in sorted(const)] + [r for r in rows if r[3] != CONSTANT]
        return rows

    def task_finished(self, task) -> None:
        """After the first unit: the estimate of the whole sweep, measured on it (:func:`estimate_seconds`)."""
        self._finished += 1
        self._weight += (self.expected_rows(task) + 1) * float(task.length) ** 2
        if self._finished == 1 and self.progress:
            took = time.perf_counter() - self.started
            print(estimate_line(took, self.plan), file=sys.stderr)

    def header(self, config, tasks, command) -> dict:
        """The command, the model file and its hash, ``L``, the RoPE, the cells, the texts, the code."""
        run = _run_of(config)
        m, r = run.model, run.recipe
        docs = sorted({name for n in config.lengths for name, _ in run.documents(n)})  # an adaptive sweep's too
        hashes = "; ".join(f"{os.path.basename(s) if config.texts else s} " + (f"sha256 {h}" if h else "absent")
                           for s, (_, h) in run.texts.items())
        recipe = "none" if r is None else f"{r.rope_type} s = {r.factor:g} at L = {r.train_length}, {r.engine}'s multiplier"
        return {
            "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "experiment": "measure" + (f" (quick: {SMOKE}; L = {run.L} is pretend, the model's is {config.model_length})"
                                       if config.model_length else " (quick)" if config.quick else ""),
            "model": os.path.basename(m.path),
            "model_sha256": m.sha256,
            "architecture": m.config.arch,
            "train_length": run.L,
            "head_dim": m.config.head_dim,
            "rope": config.rope if config.rope != FILE_ROPE else f"file ({recipe})",
            "recipe": recipe,
            "cells": (f"adaptive, {config.adaptive} constants on the queries past L read on the first document one "
                      f"after another from 1 and the recipe's multiplier, {config.spacing:g} apart (bracket, then "
                      "parabola or golden section: _measure_stats.next_factor); on the other documents and the "
                      "prompts, 1 and the first's lowest constant with its two neighbours; shapes "
                      if config.adaptive else
                      f"constant {', '.join(f'{f:g}' for f in config.factors)} on the queries past L; shapes ")
                     + f"{', '.join(config.shapes) or 'none'} (scheme registry, pinned at L)"
                     + ("; the file's recipe" if config.recipe else ""),
            "documents": f"{'at most ' if config.width else ''}{len(docs)} per length: {', '.join(docs)} ({hashes})",
            "prompts": _prompts_line(config),
            "scoring": "loss: mean next-token nats at the positions past L; passkey: all five digits the greedy "
                       "choice (teacher-forced); float32 activations, float64 statistics"
                       + ("; a BOS first in every sequence (the file's add_bos_token)" if m.config.add_bos else ""),
            "backend": config.backend,
            "statistics": f"minimiser: vertex of the parabola through the lowest mean loss and its neighbours; "
                          f"interval: percentile bootstrap over documents ({BOOTSTRAP} resamples, 95%), each end's "
                          "distance from the minimiser times 1.2 t(D - 1) / z sqrt(D / (D - 1)) "
                          "(_measure_stats.minimiser_interval)",
            **({"stopping": stopping_line(config.width)} if config.width else {}),
            "code": f"softmax_scale at {source_revision()}",
            "date": datetime.date.today().isoformat(),
        }

    def summaries(self, table) -> list:
        """The curves, one table per length."""
        return [curve.to_text() for curve in summarise(table)]


def stopping_line(width: float) -> str:
    """The header's ``stopping`` line: the rule a resumed file continues (a file without it reads every document)."""
    return (f"documents one at a time in window order, at least {MIN_DOCUMENTS}, until the minimiser's 95% interval "
            f"is at most ±{width:g} wide or the budget ends (_measure_stats.documents_wanted); then the prompts")
def _prompts_line(config) -> str:
    """The header's ``prompts`` line: the single-key prompts, or the multi-key haystacks."""
    from .real_passkey import HAYSTACK_LINE, HAYSTACK_WORDS, haystack_depths

    if config.keys == 1:
        return (f"{config.prompts} per length: real_passkey.passkey_sequence at depths "
                f"{', '.join(f'{d:g}' for d in DEPTHS)} in turn, key k = numpy default_rng([{KEY_SEED}, k])")
    return (f"{config.prompts} per length, the multi-key variant: real_passkey.passkey_haystack, {config.keys} keys "
            f"in one haystack at depths {', '.join(f'{d:.3g}' for d in haystack_depths(config.keys))}, key j in "
            f"line {HAYSTACK_LINE.strip()!r} after word j of {', '.join(HAYSTACK_WORDS[:config.keys])}, each asked "
            f"by its own question continued from the haystack's keys and values under the cell; key j of haystack "
            f"h = numpy default_rng([{KEY_SEED}, h, j]) (drawn again while it repeats one of the haystack)")


def unit_plan(config, done=()) -> list:
    """``(length, reads)`` of every unit of ``config`` not in ``done`` (task keys), in the order they run.

    ``reads``: the unit's cells (an adaptive sweep's later units at 1 and three constants, their most);
    a haystack is one unit, its questions' short reads not counted.  Under the stopping rule
    (``config.width``), the documents it reads at the least.
    """
    run = _run_of(config)
    extra = len(config.shapes) + bool(config.recipe)
    later = (4 if config.adaptive else len(config.factors)) + extra
    out = []
    for n in config.lengths:
        names = [name for name, _ in run.documents(n)]
        for i, name in enumerate(names[:MIN_DOCUMENTS] if config.width else names):
            if ("loss", n, name) not in done:
                out.append((n, (config.adaptive + extra) if config.adaptive and i == 0 else later))
        out += [(n, later) for k in range(config.prompts) if ("passkey", n, _prompt_name(k, config.keys)) not in done]
    return out


def estimate_seconds(took: float, plan) -> float:
    """The time of the units ``plan[1:]`` from ``took``, the first one's.

    A unit's time is taken as its reads plus one (the prefix) times the square of its length (the
    attention), in proportion to the first's.
    """
    if not plan:
        return 0.0
    w = [(reads + 1) * float(n) ** 2 for n, reads in plan]
    return took * sum(w[1:]) / w[0]


def estimate_line(took: float, plan, budget: float | None = None) -> str:
    """The one line said after the first unit: its time and the whole run's estimate from it."""
    rest = estimate_seconds(took, plan)
    line = (f"measure: the first unit took {took:.2g} s; the whole run about {(took + rest) / 60:.2g} min "
            f"({len(plan)} units, estimated from the first by reads and length squared)")
    return line + (f"; budget {budget:g} min" if budget is not None else "")

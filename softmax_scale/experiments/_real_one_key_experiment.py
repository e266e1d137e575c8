"""The :class:`~softmax_scale.experiments.base.Experiment` of the real-decoder one-key experiments (:mod:`._real_one_key`).

Its tasks are the cells of one :class:`~._real_one_key.RealRun`; its rows are each cell's score and its
retrieving heads' shares, its evidence each (RoPE, scale) past ``L`` against ``standard``, paired by sequence.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._util.store import source_revision
from .._util.validation import check_choice, check_int
from ..models.readout import BACKENDS
from ._real_one_key import (
    COLUMNS,
    HEADS,
    INTS,
    MODEL,
    PARAMETERS,
    REFERENCE,
    RULE_POINTS,
    SAMPLE_SIZE,
    SHARE_MAX,
    TEXT,
    TRAINED_ROPE,
    OneKeySequence,
    RealRun,
    _logits,
    _shares,
    scoring_line,
)
from .base import Evidence, Experiment, at_test_label

__all__ = ["RealOneKeyExperiment", "RealTask"]


@dataclass(frozen=True)
class RealTask:
    """One cell: ``(task, length, prompt, rope, scale)``."""

    task: str
    length: int
    prompt: str
    rope: str
    scale: str
    run: RealRun = field(repr=False, compare=False)


class RealOneKeyExperiment(Experiment):
    """A real decoder on a one-key task (see the module docstring).

    Subclasses set the names and implement :meth:`config`, :meth:`cells` (the cells in their
    canonical order, the ``heads`` cell first), :meth:`sequence`, :meth:`selection`,
    :meth:`references`, :meth:`extra_header` and the summaries.
    """

    columns, text, ints = COLUMNS, TEXT, INTS
    key = task_columns = ("task", "length", "prompt", "rope", "scale")
    match = ("model_sha256", "train_length", "sequences", "heads", "rules", "scoring")
    in_process = True
    float_format = ".6g"

    def cells(self, config, model, L) -> list:
        """``(task, length, prompt, rope, scale)`` of every cell, in order, after checking the configuration."""
        raise NotImplementedError

    def sequence(self, run, task, length, prompt) -> OneKeySequence:
        """The sequence of a cell."""
        raise NotImplementedError

    def selection(self, config, L) -> tuple:
        """The ``(task, length, prompt)`` cells at ``L`` the retrieving heads are chosen on."""
        raise NotImplementedError

    def references(self, config, L) -> tuple:
        """The ``(task, length, prompt)`` cells at ``L`` that set the prediction's reference."""
        raise NotImplementedError

    def extra_header(self, run) -> dict:
        """The header lines of the sequences (``sequences`` among them)."""
        raise NotImplementedError

    def tasks(self, config, *, out=None, progress: bool = False) -> list:
        """The cells as tasks sharing one :class:`RealRun`; the configuration is checked before any pass."""
        from ..models.registry import check_kind, load

        backend = check_choice(config.backend, "backend", BACKENDS)
        if backend == "jax":
            from .._util import jax_backend as _  # noqa: F401 - without JAX: one ImportError naming the extra, before any pass
        model = config.model
        if isinstance(model, str):
            check_kind(model, "decoder", f"{self.name} runs decoders")
            model = load(model, path=config.path)
        L = model.config.context_length if config.train_length is None else \
            check_int(config.train_length, "train_length", minimum=16)
        cells = self.cells(config, model, L)
        stem = f"{self.file_stem}{'_quick' if config.quick else ''}"
        ref = None if out is None else Path(out) / f".{stem}-reference.npz"
        run = RealRun(self, model, L, config, ref, check_int(config.query_block, "query_block", minimum=1), backend)
        return [RealTask(*c, run) for c in cells]

    def task_cells(self, task) -> tuple:
        """``(task, length, prompt, rope, scale)``."""
        return (task.task, task.length, task.prompt, task.rope, task.scale)

    def expected_rows(self, task) -> int:
        """``heads``: a row per head and per retrieving head; any other cell a score row and a row per retrieving head."""
        c = task.run.model.config
        return c.n_layers * c.n_heads + HEADS if task.task == "heads" else 1 + HEADS

    def row(self, task, kind, **cells) -> tuple:
        """One row of ``task``; the cells not given are empty."""
        vals = {"layer": -1, "head": -1, "count": 0, "note": "", "depth": float("nan")}
        vals.update(cells)
        lead = self.task_cells(task)
        return (*lead, kind, *[vals.get(c, float("nan")) for c in COLUMNS[6:]])

    def run_task(self, task) -> list:
        """The ``heads`` cell chooses and measures the retrieving heads; any other reads its sequence under its (RoPE, scale)."""
        run = task.run
        t0 = time.perf_counter()
        if task.task == "heads":
            ref, sel = run.measure_heads()
            rows = []
            for la, he in np.ndindex(*sel.share.shape):
                rows.append(self.row(task, "head_L", layer=la, head=he, share=float(sel.share[la, he]),
                                     gap=float(sel.gap[la, he]), sigma=float(sel.alpha[la, he]),
                                     value=float(sel.n[la, he]), count=int(sel.queries[la, he]),
                                     note="retrieving" if (la, he) in ref["heads"] else ""))
            for h in ref["heads"]:
                r = ref[h]
                rows.append(self.row(task, "reference", layer=h[0], head=h[1], share=r["share"], gap=r["gap"],
                                     sigma=r["alpha"], value=r["n"], count=r["queries"]))
            return rows
        seq = run.sequence(task.task, task.length, task.prompt)
        ref = run.heads()
        cell = (task.task, task.length, task.prompt)
        if (task.rope, task.scale) == (TRAINED_ROPE, REFERENCE) and cell in run.measured:  # read by the heads cell
            argmax, nll, lg, seconds = run.measured.pop(cell)
            mask = np.arange(seq.scored.max() + 1)[None, :] <= seq.probe[:, None]  # the keys read: 0 .. stop-1
        else:
            r = run.read(seq, task.rope, task.scale, cell)
            argmax, nll = r.argmax, r.nll
            lg, mask = _logits(r, seq, ref["heads"])
            seconds = time.perf_counter() - t0
        hit = argmax == seq.ids[seq.scored + 1]
        acc = float(hit.all()) if seq.all_of else float(hit.mean())
        rows = [self.row(task, "score", depth=seq.depth, accuracy=acc, loss=float(np.mean(nll)),
                         count=int(seq.scored.size), value=float(seq.ids.size), seconds=round(seconds, 1))]
        for h in ref["heads"]:
            ks = _shares(lg[h][None], mask, seq.source)
            n_test = float(ks.n[0])
            pred = run.predicted(h, n_test, task.scale, seq.ids.size)
            rows.append(self.row(task, "share", layer=h[0], head=h[1], depth=seq.depth, share=float(ks.share[0]),
                                 share_predicted=pred, sigma=float(ks.alpha[0]),
                                 gap=float(ks.gap[0]), value=n_test, count=int(ks.queries[0])))
        return rows

    def header(self, config, tasks, command) -> dict:
        """The command, the model file and its hash, ``L``, the sequences, how the heads are chosen, the code."""
        run = tasks[0].run
        m = run.model
        sel, refs = self.selection(config, run.L), self.references(config, run.L)
        return {
            "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "experiment": f"{self.name}{' (quick)' if config.quick else ''}",
            "model": os.path.basename(m.path or "?"),
            "model_sha256": m.sha256,
            "train_length": run.L,
            "head_dim": m.config.head_dim,
            **self.extra_header(run),
            "heads": f"the {HEADS} heads with the largest share on the source keys over "
                     f"{', '.join('/'.join(str(x) for x in c) for c in sel)}; reference of every head (gap groups, scale, "
                     f"pooled scores, {SAMPLE_SIZE} points) from {', '.join('/'.join(str(x) for x in c) for c in refs)}",
            "rules": f"{SHARE_MAX}: past L each retrieving head's share maximiser (heads.share_max on its reference) "
                     f"at {RULE_POINTS} log-spaced n from L + 1, ln f linear in ln n between them, e^4 where the "
                     "supremum is at infinite factor; every other head and position as trained",
            "scoring": scoring_line(run.backend),
            "code": f"softmax_scale at {source_revision()}",
            "date": datetime.date.today().isoformat(),
        }

    @staticmethod
    def paired_differences(table, task, n, rope, scale, column, ref_rope, ref_scale=REFERENCE) -> dict:
        """``scale`` under ``rope`` minus ``ref_scale`` under ``ref_rope``, sequence by sequence, at length ``n``.

        Returns ``{sequence: difference}`` of ``column`` (``"accuracy"`` or ``"loss"``) over the
        sequences both cells hold with a finite value, in the order of the file.
        """
        r = table.rows
        sc = (r["kind"] == "score") & (r["task"] == task) & (r["length"] == n)

        def cell(rope_, scale_):
            m = sc & (r["rope"] == rope_) & (r["scale"] == scale_)
            return {p: v for p, v in zip(r["prompt"][m], r[column][m]) if np.isfinite(v)}

        a, b = cell(rope, scale), cell(ref_rope, ref_scale)
        return {p: a[p] - b[p] for p in dict.fromkeys(r["prompt"][r["kind"] == "score"]) if p in a and p in b}

    def evidence(self, table) -> list:
        """Each (RoPE, scale) past ``L`` against ``standard`` under the same RoPE and under the trained one, paired by sequence.

        Accuracy and loss on the scored tokens; the "seeds" are the sequences (in the order of
        the file), :attr:`replicates` says what they are; every scale but ``standard`` is applied at
        test time to a model trained without it.
        """
        r = table.rows
        sc = r["kind"] == "score"
        L = int(table.header["train_length"])
        head_dim = int(table.header.get("head_dim", 0))  # 0: not stated (a file written before the line was)
        prompts = {p: i for i, p in enumerate(dict.fromkeys(r["prompt"][sc]))}
        out = []
        for task, n, rope, scale in sorted(set(zip(r["task"][sc], r["length"][sc], r["rope"][sc], r["scale"][sc]))):
            if n <= L or task in ("control", "heads"):
                continue
            refs = [] if scale == REFERENCE else [(REFERENCE, rope)]
            if rope != TRAINED_ROPE:
                refs.append((REFERENCE, TRAINED_ROPE))
            for ref_scale, ref_rope in refs:
                name = ref_scale if ref_rope == rope else f"{ref_scale}, RoPE {ref_rope}"
                for metric in ("accuracy", "loss"):
                    diff = self.paired_differences(table, task, n, rope, scale, metric, ref_rope, ref_scale)
                    if not diff:
                        continue
                    d = np.array(list(diff.values()))
                    label = scale if scale == REFERENCE else at_test_label(REFERENCE, scale)
                    out.append(Evidence(self.name, MODEL, PARAMETERS, "parameters", rope, self.evidence_task,
                                        float(n) / L, label, name, metric, float(d.mean()),
                                        float(d.std(ddof=1)) if d.size > 1 else float("nan"),
                                        tuple(prompts[p] for p in diff), head_dim, L, "tokens", self.replicates,
                                        values=tuple(float(x) for x in d),
                                        binary=self.binary_accuracy and metric == "accuracy"))
        return out

    #: :attr:`Evidence.task` of the rows.
    evidence_task = ""
    #: :attr:`Evidence.replicates` of the rows: what the paired sequences are.
    replicates = "documents"
    #: Whether a cell's accuracy is 0 or 1 (every scored token right, or not): :attr:`Evidence.binary`.
    binary_accuracy = False

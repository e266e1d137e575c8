"""What the training experiments share, written once: the run's record, the header, rows, summaries' cells.

:class:`TrainingExperiment` is the part of :class:`~softmax_scale.experiments.base.Experiment`
common to :mod:`.mlm`, :mod:`.alpha` and :mod:`.causal`: a task is one training run
(``label``, ``seed``), its rows are keyed ``(scheme, seed, status)``, a run that diverged is one
row of kind ``diverged`` (status ``diverged``, its message in ``note``) and counts as done, and
checkpoints live in ``out/.train-checkpoints/``.  Every ``±`` a summary prints is a standard
error over the replicates of its cell, through :func:`pm`.  :class:`Task`, :func:`run_task` and
:data:`COLUMNS` are the masked-LM run of :mod:`.mlm` and :mod:`.alpha`.  Reading needs numpy
only; the runners import JAX when they run.
"""

from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._util.store import source_revision
from ..train.config import TrainConfig
from .base import Experiment

__all__ = ["COLUMNS", "INTS", "TEXT", "Task", "TrainingExperiment", "diverged_line", "diverged_runs", "expected_rows",
           "mean_std", "ok", "pm", "pm_of", "run_summary", "run_task", "se", "std"]

#: Columns of the masked-LM result files.  ``kind``: ``run`` (x = steps; final training loss and
#: accuracy, mean over the last 5% of steps; seconds), ``curve`` (x = step; mean training loss and
#: accuracy over the preceding ``curve_every`` steps), ``test`` (x = test length; held-out loss and
#: accuracy under the test-time ``scale``; count = predicted positions), ``sigma_init`` /
#: ``sigma_end`` (per layer and head), ``diverged`` (x = the step; the message in ``note``).
COLUMNS = ("scheme", "seed", "status", "kind", "scale", "x", "layer", "head", "loss", "accuracy", "sigma", "count",
           "seconds", "note")
TEXT = ("scheme", "status", "kind", "scale", "note")
INTS = ("seed", "x", "layer", "head", "count")


@dataclass(frozen=True)
class Task:
    """One masked-LM training run and what to measure on it.

    Attributes
    ----------
    label : str
        The run's name in the ``scheme`` column (e.g. ``"entropy_invariant@512"``, ``"alpha=2"``).
    seed : int
        The run's seed (initialisation and data order).
    config : TrainConfig
    lengths : tuple of int
        Test lengths.
    overrides : tuple of (str, int)
        Test-time scales ``(scheme, pin_length)`` evaluated besides the trained one.
    curve_every : int
        Steps per point of the training curve.
    sigma : bool
        Measure each head's ``sigma`` at initialisation and at the end.
    eval_tokens : int
        Held-out bytes per test length.
    checkpoint : str or None
        The run's checkpoint file (resumed from if it exists).
    progress : bool
        A progress bar in the worker.
    """

    label: str
    seed: int
    config: TrainConfig
    lengths: tuple
    overrides: tuple = ()
    curve_every: int = 50
    sigma: bool = False
    eval_tokens: int = 32768
    checkpoint: str | None = None
    progress: bool = False


def expected_rows(task: Task) -> int:
    """Rows a finished (not diverged) masked-LM task writes."""
    c = task.config
    return (1 + c.steps // task.curve_every + len(task.lengths) * (1 + len(task.overrides))
            + (2 * c.layers * c.heads if task.sigma else 0))


def run_summary(res, config, curve_every: int) -> list[tuple]:
    """What every training experiment records of a finished run, one rule for all of them.

    Returns ``(kind, step, loss, accuracy, count, seconds)`` tuples: first ``"run"``, the loss and
    accuracy averaged over the last 5% of the steps (at least one), with the bytes trained on and the
    run's seconds; then one ``"curve"`` tuple per ``curve_every`` steps, the mean over those steps
    (seconds NaN).  ``res`` is a :class:`~softmax_scale.train.loop.TrainResult` that did not diverge.
    """
    h = res.history
    tail = max(1, config.steps // 20)
    out = [("run", res.steps, float(np.mean(h["loss"][-tail:])), float(np.mean(h["accuracy"][-tail:])),
            res.steps * config.tokens_per_step(), res.seconds)]
    k = curve_every
    for end in range(k, config.steps + 1, k):
        out.append(("curve", end, float(np.mean(h["loss"][end - k:end])), float(np.mean(h["accuracy"][end - k:end])),
                    k, np.nan))
    return out


class TrainingExperiment(Experiment):
    """A sweep of training runs: one task per (trained scale, seed); see the module docstring.

    Subclasses set :attr:`name`, :attr:`columns` and the column types, :attr:`row_defaults` (the
    cells a row leaves out), and implement :meth:`config`, :meth:`tasks`, :meth:`run_task`,
    :meth:`expected_rows` and :meth:`summaries`.
    """

    key = ("scheme", "seed", "status")
    #: The scheme of the base configuration (the one the header describes).
    reference = ""
    task_columns = ("scheme", "seed")
    match = ("experiment", "config", "lengths", "eval")
    #: The value of a cell a row does not name, by column (the others: -1 for layer and head, 0 for
    #: other integers, "" for text, NaN for floats).
    row_defaults: dict = {}

    @property
    def file_stem(self) -> str:
        """``train_<name>``."""
        return f"train_{self.name}"

    def task_cells(self, task) -> tuple:
        """``(label, seed)``."""
        return (task.label, task.seed)

    def block_rows(self, key, expected) -> int:
        """A diverged run is one row; a finished one as many as :meth:`expected_rows` says."""
        return 1 if key[2] == "diverged" else super().block_rows(key, expected)

    def is_done(self, store, task) -> bool:
        """Finished with all its rows, or diverged."""
        return (store.has((task.label, task.seed, "ok"), self.expected_rows(task))
                or store.has((task.label, task.seed, "diverged"), 1))

    def task_finished(self, task) -> None:
        """Remove the finished run's checkpoint."""
        if task.checkpoint and os.path.exists(task.checkpoint):
            os.remove(task.checkpoint)

    def checkpoint(self, out, label: str, seed: int) -> str | None:
        """The checkpoint file of a run (``None`` without ``out``); the folder is created."""
        if out is None:
            return None
        folder = Path(out) / ".train-checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f"{self.name}-{label}-seed{seed}.npz")

    def row(self, task, status: str, kind: str, **cells) -> tuple:
        """One row of ``task`` in the order of :attr:`columns`; the cells not given take their defaults."""
        unknown = set(cells) - set(self.columns[4:])
        if unknown:
            raise TypeError(f"`cells`: no columns {sorted(unknown)} in {self.columns}")
        out = [task.label, task.seed, status, kind]
        for c in self.columns[4:]:
            if c in cells:
                out.append(cells[c])
            elif c in self.row_defaults:
                out.append(self.row_defaults[c])
            elif c in self.ints:
                out.append(-1 if c in ("layer", "head") else 0)
            else:
                out.append("" if c in self.text else np.nan)
        return tuple(out)

    def extra_header(self, tasks) -> dict:
        """Header lines of this experiment only, placed after ``short_budget``."""
        return {}

    def header(self, config, tasks, command) -> dict:
        """Provenance: the command, the configuration, the runs, the held-out data and its baseline, versions."""
        import jax
        import optax

        from ..train.data import EVAL_SEED, corpus_hashes, eval_batch, most_frequent_byte

        base = tasks[0].config.replace(scheme=self.reference, alpha=None, pin_length=None)
        lengths = tasks[0].lengths
        top = most_frequent_byte()
        base_acc = []
        for n in lengths:
            b = eval_batch(base.objective, n, max(1, tasks[0].eval_tokens // n), base.mask_rate, EVAL_SEED)
            base_acc.append(f"{n}: {np.sum((b.targets == top) * b.weights) / b.weights.sum():.4f}")
        hashes = corpus_hashes()
        return {
            "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "experiment": f"{self.name}{' (quick)' if config.quick else ''}",
            "config": base.describe(),
            "runs": "; ".join(sorted({f"{t.label}" + (f" + test {'/'.join(f'{s}@{p}' for s, p in t.overrides)}"
                                                      if t.overrides else "") for t in tasks})),
            "lengths": " ".join(str(n) for n in lengths),
            "short_budget": str(config.short_budget),
            **self.extra_header(tasks),
            "eval": f"{tasks[0].eval_tokens} held-out bytes per length, seed {EVAL_SEED}, mask rate {base.mask_rate}",
            "baseline": f"most frequent training byte {top!r} ({chr(top)!r}) predicted everywhere: accuracy "
                        + ", ".join(base_acc),
            "corpus": "; ".join(f"{k} {v}" for k, v in hashes.items()),
            "jax": f"jax {jax.__version__}, optax {optax.__version__}, {jax.default_backend()}",
            "code": f"softmax_scale at {source_revision()}",
            "date": datetime.date.today().isoformat(),
        }


def run_task(experiment: TrainingExperiment, task: Task) -> list[tuple]:
    """Train, evaluate and measure one masked-LM task; its rows (see :data:`COLUMNS`).  Runs in a worker."""
    from .sweep import limit_threads

    limit_threads()
    from ..train.evaluation import evaluate, head_sigmas
    from ..train.loop import initial_params, train_model

    c = task.config
    row = experiment.row
    res = train_model(c, rng=task.seed, checkpoint=task.checkpoint, progress=task.progress,
                      desc=f"{task.label} seed {task.seed}")
    if res.diverged:
        return [row(task, "diverged", "diverged", x=res.steps, seconds=res.seconds, note=res.message)]
    rows = [row(task, "ok", kind, x=step, loss=loss, accuracy=acc, count=count, seconds=sec)
            for kind, step, loss, acc, count, sec in run_summary(res, c, task.curve_every)]
    for scheme, pin in [(None, None), *task.overrides]:
        ev = evaluate(res.params, c, task.lengths, scheme=scheme, pin_length=pin, tokens=task.eval_tokens)
        for n in task.lengths:
            r = ev[n]
            rows.append(row(task, "ok", "test", scale=ev.scale, x=n, loss=r.loss, accuracy=r.accuracy, count=r.count))
    if task.sigma:
        for kind, params in (("sigma_init", initial_params(c, task.seed)), ("sigma_end", res.params)):
            sig = head_sigmas(params, c)
            for layer in range(c.layers):
                for head in range(c.heads):
                    rows.append(row(task, "ok", kind, x=c.train_length, layer=layer, head=head,
                                    sigma=float(sig[layer, head])))
    return rows


def ok(table) -> np.ndarray:
    """The rows of runs that did not diverge."""
    return table.rows["status"] == "ok"


def diverged_runs(table) -> list:
    """The ``(label, seed)`` pairs that diverged, sorted."""
    r = table.rows
    bad = ~ok(table)
    return sorted(zip(r["scheme"][bad], r["seed"][bad].tolist()))


def std(x) -> float:
    """Sample standard deviation (NaN for fewer than two values)."""
    return x.std(ddof=1) if x.size > 1 else np.nan


def mean_std(a):
    """Mean and sample std over the last axis, ignoring NaN (a length a row has no value at: NaN, no warning)."""
    good = np.isfinite(a)
    k = good.sum(axis=-1)
    x = np.where(good, a, 0.0)
    mean = np.divide(x.sum(axis=-1), k, out=np.full(k.shape, np.nan), where=k > 0)
    dev = np.where(good, a - mean[..., None], 0.0)
    sd = np.sqrt(np.divide((dev * dev).sum(axis=-1), k - 1, out=np.full(k.shape, np.nan), where=k > 1))
    return mean, sd


def se(std, k):
    """The standard error of a mean of ``k`` replicates whose sample standard deviation is ``std``: ``std / sqrt(k)``.

    NaN where ``k < 2`` (one replicate says nothing of its spread) or ``std`` is NaN; elementwise
    for arrays (a float for scalars).  The one definition every summary's ``±`` and every error
    bar of the experiments' figures goes through.
    """
    std, k = np.asarray(std, dtype=float), np.asarray(k, dtype=float)
    out = np.where(k >= 2, std / np.sqrt(np.maximum(k, 1.0)), np.nan)
    return float(out) if out.ndim == 0 else out


def pm(mean, std, k, scale=1.0, digits=2, sign=False) -> str:
    """``mean ± standard error`` (both times ``scale``) with ``digits`` decimals, from the replicates' mean and sample std.

    ``k`` is the number of replicates (seeds, documents, prompts) the mean is over; the ``±`` part
    is :func:`se` of ``std`` and ``k``, left out where that is NaN (``k < 2`` or a NaN ``std``).
    Empty for a NaN mean; ``sign``: the mean with its sign (``+0.12``).
    """
    if not np.isfinite(mean):
        return ""
    err = se(std, k)
    return f"{mean * scale:{'+' if sign else ''}.{digits}f}" + (f" ± {err * scale:.{digits}f}" if np.isfinite(err) else "")


def pm_of(values, scale=1.0, digits=2, sign=False) -> str:
    """:func:`pm` of the replicates ``values`` themselves (their mean, sample std and number); empty for none."""
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0:
        return ""
    return pm(v.mean(), std(v), v.size, scale, digits, sign)


def diverged_line(pairs) -> list:
    """The lines under a summary that name the diverged runs (none when there are none)."""
    if not pairs:
        return []
    return ["", "diverged: " + ", ".join(f"{k} seed {sd}" for k, sd in pairs)]

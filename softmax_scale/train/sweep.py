"""A sweep of training runs as independent tasks on any :class:`concurrent.futures.Executor`.

Each :class:`Task` (a scale, a seed, a configuration, what to measure) runs :func:`run_task` in a
worker and returns its rows; the main process appends them to the result file at once
(:class:`softmax_scale._util.store.ResultStore`), so a sweep that is stopped loses only the runs in
flight (and those resume from their checkpoints), and a rerun skips every run already written.

- Locally (:func:`local_executor`): a process pool with the ``spawn`` start method, one XLA
  thread per worker, each worker pinned to its own core when there are enough: two workers use
  two cores.
- On a cluster: ``dask.distributed`` (:func:`dask_executor`, ``--scheduler ADDRESS``); its
  ``Client.get_executor()`` is a ``concurrent.futures.Executor``.  Checkpoints are then written
  on the workers' file system.

A run that diverges is written as one row of kind ``diverged`` with status ``diverged`` (its
message in ``note``), never as rows of NaN, and is skipped on a rerun like a finished one.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import sys
from dataclasses import dataclass

import numpy as np

from .._util.progress import progress_bar
from .._util.store import ResultStore, read_table
from .config import TrainConfig

__all__ = ["COLUMNS", "KEY", "Task", "dask_executor", "expected_rows", "limit_threads", "local_executor", "read_sweep",
           "run_summary", "run_sweep", "run_task"]

#: Columns of a sweep's result file.  ``kind``: ``run`` (x = steps; final training loss and
#: accuracy, mean over the last 5% of steps; seconds), ``curve`` (x = step; mean training loss and
#: accuracy over the preceding ``curve_every`` steps), ``test`` (x = test length; held-out loss and
#: accuracy under the test-time ``scale``; count = predicted positions), ``sigma_init`` /
#: ``sigma_end`` (per layer and head), ``diverged`` (x = the step; the message in ``note``).
COLUMNS = ("scheme", "seed", "status", "kind", "scale", "x", "layer", "head", "loss", "accuracy", "sigma", "count",
           "seconds", "note")
#: The columns that name a task's block of rows.
KEY = ("scheme", "seed", "status")
#: XLA flags of a worker: one thread for the whole process.
WORKER_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


@dataclass(frozen=True)
class Task:
    """One training run of a sweep and what to measure on it.

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
    """Rows a finished (not diverged) task writes."""
    c = task.config
    return (1 + c.steps // task.curve_every + len(task.lengths) * (1 + len(task.overrides))
            + (2 * c.layers * c.heads if task.sigma else 0))


def limit_threads() -> None:
    """One XLA thread in this process, if JAX is not running yet (a pool or a Dask worker); every task runner calls it."""
    if "jax" not in sys.modules:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + WORKER_XLA_FLAGS).strip()


def _row(task, status, kind, scale="trained", x=0, layer=-1, head=-1, loss=np.nan, accuracy=np.nan, sigma=np.nan,
         count=0, seconds=np.nan, note=""):
    return (task.label, task.seed, status, kind, scale, x, layer, head, loss, accuracy, sigma, count, seconds, note)


def run_summary(res, config, curve_every: int) -> list[tuple]:
    """What every experiment records of a finished training run, one rule for all of them.

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


def run_task(task: Task) -> list[tuple]:
    """Train, evaluate and measure one task; its rows (see :data:`COLUMNS`).  Runs in a worker."""
    limit_threads()
    from .evaluation import evaluate, head_sigmas
    from .loop import initial_params, train_model

    c = task.config
    res = train_model(c, rng=task.seed, checkpoint=task.checkpoint, progress=task.progress,
                      desc=f"{task.label} seed {task.seed}")
    if res.diverged:
        return [_row(task, "diverged", "diverged", x=res.steps, seconds=res.seconds, note=res.message)]
    rows = [_row(task, "ok", kind, x=step, loss=loss, accuracy=acc, count=count, seconds=sec)
            for kind, step, loss, acc, count, sec in run_summary(res, c, task.curve_every)]
    scales = [(None, None), *task.overrides]
    for scheme, pin in scales:
        ev = evaluate(res.params, c, task.lengths, scheme=scheme, pin_length=pin, tokens=task.eval_tokens)
        for n in task.lengths:
            r = ev[n]
            rows.append(_row(task, "ok", "test", scale=ev.scale, x=n, loss=r.loss, accuracy=r.accuracy, count=r.count))
    if task.sigma:
        for kind, params in (("sigma_init", initial_params(c, task.seed)), ("sigma_end", res.params)):
            sig = head_sigmas(params, c)
            for layer in range(c.layers):
                for head in range(c.heads):
                    rows.append(_row(task, "ok", kind, x=c.train_length, layer=layer, head=head,
                                     sigma=float(sig[layer, head])))
    return rows


def _init_worker(counter, pin: bool) -> None:
    """Pool initialiser: one XLA thread, and (``pin``) a core of its own."""
    limit_threads()
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    if pin and hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[index % len(cores)]})


def local_executor(workers: int = 2) -> cf.ProcessPoolExecutor:
    """A process pool of ``workers`` (``spawn``), one XLA thread each, pinned to distinct cores when there are enough."""
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.Value("i", 0)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                  initargs=(counter, workers <= cores))


@contextlib.contextmanager
def dask_executor(address: str, timeout: str = "20s"):
    """A ``concurrent.futures.Executor`` on the Dask cluster whose scheduler is at ``address``."""
    try:
        from distributed import Client
    except ImportError as err:  # pragma: no cover
        raise ImportError("`scheduler` needs dask.distributed: pip install 'softmax_scale[train]'") from err
    if not isinstance(address, str) or not address:
        raise ValueError(f"`scheduler` must be an address like tcp://host:8786, got {address!r}")
    try:
        client = Client(address, timeout=timeout)
    except OSError as err:
        raise ValueError(f"`scheduler`: no Dask scheduler answers at {address} ({err})") from None
    try:
        yield client.get_executor()
    finally:
        client.close()


def _done(store, task, n_ok) -> bool:
    return store.has((task.label, task.seed, "ok"), n_ok) or store.has((task.label, task.seed, "diverged"), 1)


def run_sweep(tasks, out, header: dict, *, executor: cf.Executor | None = None, workers: int = 2,
              match=("experiment", "config"), overwrite: bool = False, progress: bool = True, desc: str = "runs",
              columns=COLUMNS, run=None, expected=None, read=None):
    """Run every task not yet in ``out`` on ``executor`` (a local pool of ``workers`` by default); append as they finish.

    Parameters
    ----------
    tasks : sequence of Task
        Distinct ``(label, seed)`` pairs.
    out : str or PathLike
        The result file (created with ``header``, or resumed when its ``match`` header lines agree).
    header : dict
        Provenance lines.
    executor : concurrent.futures.Executor, optional
        Where the tasks run.
    workers : int
        Size of the local pool when no executor is given.
    match : sequence of str
        Header keys that must agree with an existing file's.
    overwrite : bool
        Start the file again.
    progress : bool
        A progress bar over the runs.
    desc : str
        Its label.
    columns, run, expected, read
        Another experiment's layout: its columns (the first three ``KEY``), the function that runs
        a task in a worker (a picklable module-level function), the rows a finished task writes,
        and the reader of the file (defaults: :data:`COLUMNS`, :func:`run_task`,
        :func:`expected_rows`, :func:`read_sweep`).

    Returns
    -------
    softmax_scale._util.store.Table
        The file read back.
    """
    run = run_task if run is None else run
    expected = expected_rows if expected is None else expected
    read = read_sweep if read is None else read
    tasks = list(tasks)
    n_ok = {(t.label, str(t.seed)): expected(t) for t in tasks}
    if len(n_ok) != len(tasks):
        raise ValueError("`tasks` must have distinct (label, seed) pairs")
    store = ResultStore(out, header, columns, key=KEY, match=match, overwrite=overwrite, float_format=".9g")
    store.drop_partial(lambda k: 1 if k[2] == "diverged" else n_ok.get(k[:2], -1))
    todo = [t for t in tasks if not _done(store, t, expected(t))]
    bar = progress_bar(total=len(tasks), initial=len(tasks) - len(todo), desc=desc, unit="run", disable=not progress)
    own = executor is None and bool(todo)
    futures = {}
    ex = local_executor(workers) if own else executor
    try:
        futures = {ex.submit(run, t): t for t in todo}
        for fut in cf.as_completed(futures):
            t = futures[fut]
            store.append(fut.result())
            if t.checkpoint and os.path.exists(t.checkpoint):
                os.remove(t.checkpoint)
            bar.update()
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    finally:
        bar.close()
        if own:
            ex.shutdown(wait=True, cancel_futures=True)
    return read(out)


def read_sweep(path):
    """A sweep's result file read back (:func:`softmax_scale._util.store.read_table` with the column types)."""
    return read_table(path, COLUMNS, text=("scheme", "status", "kind", "scale", "note"),
                      ints=("seed", "x", "layer", "head", "count"))

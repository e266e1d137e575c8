"""Where an experiment's tasks run: a sweep of independent tasks on any :class:`concurrent.futures.Executor`.

:func:`run_sweep` runs every task of an :class:`~softmax_scale.experiments.base.Experiment` that
its result file (:class:`softmax_scale._util.store.ResultStore`) does not hold yet, appends each
task's rows the moment it finishes (so a sweep that is stopped loses only the tasks in flight), and
once every task is done rewrites the file in the tasks' order, so that two runs of the same
experiment write the same bytes whatever order the workers finished in.

- In this process (an experiment with ``in_process = True``, or ``workers=0``): one task after
  the other, in order.
- Locally (:func:`local_executor`): a process pool with the ``spawn`` start method, one XLA
  thread per worker, each worker pinned to its own core when there are enough: two workers use
  two cores.
- On a cluster: ``dask.distributed`` (:func:`dask_executor`, ``--scheduler ADDRESS``); its
  ``Client.get_executor()`` is a ``concurrent.futures.Executor``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import sys

from .._util.progress import progress_bar

__all__ = ["WORKER_XLA_FLAGS", "dask_executor", "limit_threads", "local_executor", "run_sweep"]

#: XLA flags of a worker: one thread for the whole process.
WORKER_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def limit_threads() -> None:
    """One XLA thread in this process, if JAX is not running yet (a pool or a Dask worker); training task runners call it."""
    if "jax" not in sys.modules:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + WORKER_XLA_FLAGS).strip()


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


def run_sweep(experiment, tasks, store, *, executor: cf.Executor | None = None, workers: int = 2,
              progress: bool = True) -> int:
    """Run the tasks that ``store`` does not hold yet, append their rows as they finish, then put the file in task order.

    Parameters
    ----------
    experiment : Experiment
        Supplies the task runner (``run_task``, a picklable method or function when the tasks go
        to other processes), the rows a finished task writes and the key naming its rows.
    tasks : sequence
        The experiment's tasks, in their canonical order (distinct task keys).
    store : softmax_scale._util.store.ResultStore
        The result file, opened (or resumed) with the experiment's columns and key.
    executor : concurrent.futures.Executor, optional
        Where the tasks run; default a local pool of ``workers``, or this process when the
        experiment runs ``in_process`` or ``workers`` is 0.
    workers : int
        Size of the local pool.
    progress : bool
        A progress bar over the tasks.

    Returns
    -------
    int
        The number of tasks run.
    """
    tasks = list(tasks)
    rank = {experiment.task_key(t): i for i, t in enumerate(tasks)}
    if len(rank) != len(tasks):
        raise ValueError("`tasks` must have distinct task keys")
    expected = {k: experiment.expected_rows(t) for k, t in zip(rank, tasks)}
    store.drop_partial(lambda key: experiment.block_rows(key, expected))
    todo = [t for t in tasks if not experiment.is_done(store, t)]
    bar = progress_bar(total=len(tasks), initial=len(tasks) - len(todo), desc=f"{experiment.name} tasks", unit="task",
                       disable=not progress)
    inline = executor is None and (experiment.in_process or workers == 0)
    try:
        if inline:
            for t in todo:
                store.append(experiment.run_task(t))
                experiment.task_finished(t)
                bar.update()
        elif todo:
            _run_on(experiment, todo, store, executor, workers, bar)
    finally:
        bar.close()
    width = len(experiment.task_columns)
    store.reorder(lambda cells: rank.get(cells[:width], len(rank)))
    return len(todo)


def _run_on(experiment, todo, store, executor, workers, bar) -> None:
    own = executor is None
    ex = local_executor(workers) if own else executor
    futures = {}
    try:
        futures = {ex.submit(experiment.run_task, t): t for t in todo}
        for fut in cf.as_completed(futures):
            t = futures[fut]
            store.append(fut.result())
            experiment.task_finished(t)
            bar.update()
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    finally:
        if own:
            ex.shutdown(wait=True, cancel_futures=True)

"""The two experiments of the issue "Train with the scale", as sweeps of training runs.

**mlm** (the note's table, kexue.fm 8823): masked LM at training length 64, trained with
``standard``, ``entropy_invariant`` pinned at 512 (``log_512 n``, as in the note), ``ssmax`` and
``alpha_star``, the same data order per seed; each model tested at 64, 128, 256, 512, 1024 on the
held-out text (the same masked positions for every model), and each ``standard`` model also with
``max(1, log_64 n)`` applied at test time only (``qwen_logn`` pinned at 64).

**alpha** (the gradient-maximising alpha in training): masked LM at 64 with a constant factor
``alpha`` on unit-variance scores over a doubling grid bracketing ``optimal_alpha(64)`` (mean-field,
1.55) and ``optimal_alpha(64, objective="geometric")`` (2.98), plus ``alpha_star`` per query; the
training loss after a short budget (the curve point at :data:`SHORT_BUDGET` steps) and at the end,
the held-out loss at 64, and each head's ``sigma`` at initialisation and at the end.

The defaults are sized so that both experiments together take about 90 minutes on 2 cores (see
the README); ``quick=True`` runs the same pipeline on a tiny model in seconds.  This module needs
JAX only to run; :func:`read_results` reads the files with numpy alone.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

import numpy as np

from .._validation import check_choice, check_int
from .config import QUICK, TrainConfig
from .data import EVAL_SEED, corpus_hashes, eval_batch, most_frequent_byte

__all__ = ["ALPHA_GRID", "DEFAULT_CONFIG", "EXPERIMENTS", "MLM_LENGTHS", "MLM_SCALES", "SHORT_BUDGET", "experiment_tasks",
           "read_results", "result_path", "run_experiment"]

EXPERIMENTS = ("mlm", "alpha")
#: The scales trained in experiment 1: (scheme, pin length).
MLM_SCALES = (("standard", None), ("entropy_invariant", 512), ("ssmax", None), ("alpha_star", None))
#: Test lengths of experiment 1 (the note's).
MLM_LENGTHS = (64, 128, 256, 512, 1024)
#: The test-time scale applied to each standard model: max(1, log_64 n).
LOGN_AT_TEST = ("qwen_logn", 64)
#: The constant factors of experiment 2: doubling from 0.5 to 8 (1 is ``standard``).
ALPHA_GRID = (0.5, 1.0, 2.0, 4.0, 8.0)
#: The short budget of experiment 2 (steps).
SHORT_BUDGET = 300
#: The model and optimiser of both experiments (sized for about 90 minutes in all on 2 cores).
DEFAULT_CONFIG = TrainConfig()
DEFAULT_SEEDS = {"mlm": 3, "alpha": 2}
_QUICK = {"lengths": (16, 32, 64), "alpha_grid": (0.5, 2.0, 8.0), "curve_every": 10, "eval_tokens": 2048}


def result_path(experiment: str, out="figures", quick: bool = False) -> Path:
    """``out/train_<experiment>.csv`` (``..._quick.csv`` with ``quick``)."""
    check_choice(experiment, "experiment", EXPERIMENTS)
    return Path(out) / f"train_{experiment}{'_quick' if quick else ''}.csv"


def experiment_tasks(experiment: str, *, quick: bool = False, seeds: int | None = None, config: TrainConfig | None = None,
                     checkpoints=None, progress: bool = False) -> list:
    """The tasks of an experiment (see the module docstring), seeds ``0 .. seeds-1``."""
    from .sweep import Task

    check_choice(experiment, "experiment", EXPERIMENTS)
    k = DEFAULT_SEEDS[experiment] if seeds is None else check_int(seeds, "seeds", minimum=1, maximum=1000)
    if quick and seeds is None:
        k = 2
    base = (QUICK if quick else DEFAULT_CONFIG) if config is None else config
    base = base.replace(objective="mlm", scheme="standard", alpha=None, pin_length=None)
    L = base.train_length
    curve = _QUICK["curve_every"] if quick else 50
    tokens = _QUICK["eval_tokens"] if quick else 32768
    if experiment == "mlm":
        lengths = _QUICK["lengths"] if quick else MLM_LENGTHS
        runs = [(base.replace(scheme=s, pin_length=p), LOGN_AT_TEST if s == "standard" else None)
                for s, p in MLM_SCALES]
        runs = [(c, () if o is None else ((o[0], L if quick else o[1]),)) for c, o in runs]
        sigma = False
    else:
        lengths = (L,)
        grid = _QUICK["alpha_grid"] if quick else ALPHA_GRID
        runs = [(base.replace(scheme="alpha", alpha=float(a)), ()) for a in grid] + [(base.replace(scheme="alpha_star"), ())]
        sigma = True
    tasks = []
    for seed in range(k):
        for c, overrides in runs:
            label = c.label()
            ckpt = None if checkpoints is None else str(Path(checkpoints) / f"{experiment}-{label}-seed{seed}.npz")
            tasks.append(Task(label, seed, c, tuple(lengths), tuple(overrides), curve, sigma, tokens, ckpt, progress))
    return tasks


def _header(experiment, tasks, command, quick):
    import jax
    import optax

    base = tasks[0].config.replace(scheme="standard", alpha=None, pin_length=None)
    lengths = tasks[0].lengths
    top = most_frequent_byte()
    base_acc = []
    for n in lengths:
        b = eval_batch(base.objective, n, max(1, tasks[0].eval_tokens // n), base.mask_rate, EVAL_SEED)
        base_acc.append(f"{n}: {np.sum((b.targets == top) * b.weights) / b.weights.sum():.4f}")
    hashes = corpus_hashes()
    header = {
        "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "experiment": f"{experiment}{' (quick)' if quick else ''}",
        "config": base.describe(),
        "runs": "; ".join(sorted({f"{t.label}" + (f" + test {'/'.join(f'{s}@{p}' for s, p in t.overrides)}"
                                                  if t.overrides else "") for t in tasks})),
        "lengths": " ".join(str(n) for n in lengths),
        "eval": f"{tasks[0].eval_tokens} held-out bytes per length, seed {EVAL_SEED}, mask rate {base.mask_rate}",
        "baseline": f"most frequent training byte {top!r} ({chr(top)!r}) predicted everywhere: accuracy "
                    + ", ".join(base_acc),
        "corpus": "; ".join(f"{k} {v}" for k, v in hashes.items()),
        "jax": f"jax {jax.__version__}, optax {optax.__version__}, {jax.default_backend()}",
        "date": datetime.date.today().isoformat(),
    }
    return header


def run_experiment(experiment: str, *, quick: bool = False, seeds: int | None = None, scheduler: str | None = None,
                   out="figures", workers: int = 2, config: TrainConfig | None = None, progress: bool = True,
                   command: str | None = None, executor=None):
    """Run (or resume) an experiment's sweep and write ``out/train_<experiment>[_quick].csv``.

    Parameters
    ----------
    experiment : {"mlm", "alpha"}
    quick : bool
        The tiny model and short runs (seconds; checks the pipeline, not the science).
    seeds : int, optional
        Seeds per scale (default 3 for mlm, 2 for alpha; 2 with ``quick``).
    scheduler : str, optional
        Address of a Dask scheduler; the runs go there instead of a local process pool.
    out : str or PathLike
        Folder of the result file; checkpoints go to ``out/.train-checkpoints/``.
    workers : int
        Local worker processes.
    config : TrainConfig, optional
        Another base model and optimiser (the scale and objective are set per run).
    progress : bool
        A progress bar over the runs.
    command : str, optional
        The command recorded in the header.
    executor : concurrent.futures.Executor, optional
        Any executor (instead of the local pool or ``scheduler``).

    Returns
    -------
    softmax_scale.store.Table
        The result file read back.
    """
    from .sweep import dask_executor, run_sweep

    check_choice(experiment, "experiment", EXPERIMENTS)
    workers = check_int(workers, "workers", minimum=1, maximum=1024)
    path = result_path(experiment, out, quick)
    checkpoints = Path(out) / ".train-checkpoints"
    tasks = experiment_tasks(experiment, quick=quick, seeds=seeds, config=config, checkpoints=checkpoints,
                             progress=progress and not quick)
    header = _header(experiment, tasks, command, quick)
    checkpoints.mkdir(parents=True, exist_ok=True)
    kw = {"match": ("experiment", "config", "lengths", "eval"), "progress": progress, "desc": f"{experiment} runs"}
    if scheduler is not None:
        with dask_executor(scheduler) as ex:
            return run_sweep(tasks, path, header, executor=ex, **kw)
    return run_sweep(tasks, path, header, executor=executor, workers=workers, **kw)


def read_results(experiment: str, out="figures", quick: bool = False, path=None):
    """An experiment's result file read back (numpy only), or ``None`` if it does not exist."""
    from .sweep import read_sweep

    p = Path(path) if path is not None else result_path(experiment, out, quick)
    return read_sweep(p) if p.exists() else None

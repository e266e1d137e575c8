"""The two experiments of the issue "Train with the scale", as sweeps of training runs.

**mlm** (the note's table, kexue.fm 8823): masked LM at training length 64, trained with
``standard``, ``entropy_invariant`` pinned at 512 (``log_512 n``, as in the note), ``ssmax`` and
``alpha_star``, the same data order per seed; each model tested at 64, 128, 256, 512, 1024 on the
held-out text (the same masked positions for every model), and each ``standard`` model also with
``max(1, log_64 n)`` applied at test time only (``qwen_logn`` pinned at 64).

**alpha** (the gradient-maximising alpha in training): masked LM at 64 with a constant factor
``alpha`` on unit-variance scores over a doubling grid (:data:`ALPHA_GRID`, 0.125 to 8) bracketing
``optimal_alpha(64)`` (mean-field, 1.55) and ``optimal_alpha(64, objective="geometric")`` (3.00 at
rng=0), plus ``alpha_star`` per query; the training loss after a short budget (the curve point at
:data:`SHORT_BUDGET` steps) and at the end, the held-out loss at 64, and each head's ``sigma`` at
initialisation and at the end.

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

from .._util.store import source_revision
from .._util.validation import check_choice, check_int
from ..train.config import QUICK, TrainConfig
from ..train.data import EVAL_SEED, corpus_hashes, eval_batch, most_frequent_byte

__all__ = ["ALPHA_GRID", "DEFAULT_CONFIG", "EXPERIMENTS", "MLM_LENGTHS", "MLM_SCALES", "PUBLISHED", "SHORT_BUDGET",
           "alpha_summary", "experiment_tasks", "mlm_summary", "read_results", "result_path", "run_experiment",
           "summary_markdown"]

EXPERIMENTS = ("mlm", "alpha", "causal")
#: The scales trained in experiment 1: (scheme, pin length).
MLM_SCALES = (("standard", None), ("entropy_invariant", 512), ("ssmax", None), ("alpha_star", None))
#: Test lengths of experiment 1 (the note's).
MLM_LENGTHS = (64, 128, 256, 512, 1024)
#: The test-time scale applied to each standard model: max(1, log_64 n).
LOGN_AT_TEST = ("qwen_logn", 64)
#: The constant factors of experiment 2, doubling from 0.125 to 8 (1 is ``standard``): 0.5 .. 8 brackets
#: both alpha*(64); 0.125 and 0.25 were added after the first full run found the loss still falling at
#: 0.5 (the resumed run appended them; the CSV header's ``resumed`` line says so).
ALPHA_GRID = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: The short budget of experiment 2 (steps).
SHORT_BUDGET = 300
#: The model and optimiser of both experiments (sized for about 90 minutes in all on 2 cores).
DEFAULT_CONFIG = TrainConfig()
DEFAULT_SEEDS = {"mlm": 3, "alpha": 2, "causal": 3}
_QUICK = {"lengths": (16, 32, 64), "alpha_grid": (0.5, 2.0, 8.0), "curve_every": 10, "eval_tokens": 2048}


def result_path(experiment: str, out="figures", quick: bool = False) -> Path:
    """``out/train_<experiment>.csv`` (``..._quick.csv`` with ``quick``)."""
    check_choice(experiment, "experiment", EXPERIMENTS)
    return Path(out) / f"train_{experiment}{'_quick' if quick else ''}.csv"


def experiment_tasks(experiment: str, *, quick: bool = False, seeds: int | None = None, config: TrainConfig | None = None,
                     checkpoints=None, progress: bool = False) -> list:
    """The tasks of an experiment (see the module docstring; ``causal``: :mod:`.causal`), seeds ``0 .. seeds-1``."""
    from ..train.sweep import Task

    check_choice(experiment, "experiment", EXPERIMENTS)
    if experiment == "causal":
        from .causal import causal_tasks

        return causal_tasks(quick=quick, seeds=seeds, config=config, checkpoints=checkpoints, progress=progress)
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
        "short_budget": str(_QUICK["curve_every"] if quick else SHORT_BUDGET),
        **({} if experiment != "causal" else _causal_header(tasks)),
        "eval": f"{tasks[0].eval_tokens} held-out bytes per length, seed {EVAL_SEED}, mask rate {base.mask_rate}",
        "baseline": f"most frequent training byte {top!r} ({chr(top)!r}) predicted everywhere: accuracy "
                    + ", ".join(base_acc),
        "corpus": "; ".join(f"{k} {v}" for k, v in hashes.items()),
        "jax": f"jax {jax.__version__}, optax {optax.__version__}, {jax.default_backend()}",
        "code": f"softmax_scale at {source_revision()}",
        "date": datetime.date.today().isoformat(),
    }
    return header


def _causal_header(tasks) -> dict:
    from ..schemes.rope import rerope_window

    t = tasks[0]
    L = t.config.train_length
    return {"ropes": " ".join(t.ropes) + f" (rerope window {rerope_window(L)}; dynamic_ntk read per bucket of positions)",
            "scales": "; ".join(sorted({f"{x.label}: " + " ".join(x.scales) for x in tasks})),
            "window": f"sliding window of {L} bytes, rope none, scale as trained",
            "measure": f"heads on {t.probe_windows} windows of {L}; entropy against n on {t.entropy_windows} windows "
                       f"of {max(t.lengths)}"}


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
    softmax_scale._util.store.Table
        The result file read back.
    """
    from ..train.sweep import dask_executor, run_sweep

    check_choice(experiment, "experiment", EXPERIMENTS)
    workers = check_int(workers, "workers", minimum=1, maximum=1024)
    path = result_path(experiment, out, quick)
    checkpoints = Path(out) / ".train-checkpoints"
    tasks = experiment_tasks(experiment, quick=quick, seeds=seeds, config=config, checkpoints=checkpoints,
                             progress=progress and not quick)
    header = _header(experiment, tasks, command, quick)
    checkpoints.mkdir(parents=True, exist_ok=True)
    kw = {"match": ("experiment", "config", "lengths", "eval"), "progress": progress, "desc": f"{experiment} runs"}
    if experiment == "causal":
        from .causal import CAUSAL_COLUMNS, expected_causal_rows, read_causal, run_causal_task

        kw.update(columns=CAUSAL_COLUMNS, run=run_causal_task, expected=expected_causal_rows, read=read_causal)
    if scheduler is not None:
        with dask_executor(scheduler) as ex:
            return run_sweep(tasks, path, header, executor=ex, **kw)
    return run_sweep(tasks, path, header, executor=executor, workers=workers, **kw)


def read_results(experiment: str, out="figures", quick: bool = False, path=None):
    """An experiment's result file read back (numpy only), or ``None`` if it does not exist."""
    from ..train.sweep import read_sweep

    p = Path(path) if path is not None else result_path(experiment, out, quick)
    if not p.exists():
        return None
    if experiment == "causal":
        from .causal import read_causal

        return read_causal(p)
    return read_sweep(p)


#: The note's table (kexue.fm 8823): RoFormer-small, masked LM trained at 64, masked-token accuracy (%).
PUBLISHED = {
    "lengths": (64, 128, 256, 512, 1024),
    "Attention-O, 1/sqrt(d)": (43.27, 36.53, 23.02, 15.12, 11.54),
    "Attention-E, log_512(n)/sqrt(d)": (43.11, 41.17, 34.04, 20.15, 13.58),
}


def _ok(table):
    return table.rows["status"] == "ok"


def mlm_summary(table) -> dict:
    """Experiment 1 per (trained scale, test scale): test lengths, mean and sample std over seeds of accuracy and loss.

    Returns ``{(label, scale): {"lengths", "accuracy", "accuracy_std", "loss", "loss_std", "seeds"}}`` and,
    under ``"diverged"``, the ``(label, seed)`` pairs that diverged.
    """
    r = table.rows
    out: dict = {"diverged": sorted(zip(r["scheme"][~_ok(table)], r["seed"][~_ok(table)].tolist()))}
    test = _ok(table) & (r["kind"] == "test")
    for key in sorted(set(zip(r["scheme"][test], r["scale"][test]))):
        m = test & (r["scheme"] == key[0]) & (r["scale"] == key[1])
        lengths = np.unique(r["x"][m])
        acc = [r["accuracy"][m & (r["x"] == n)] for n in lengths]
        loss = [r["loss"][m & (r["x"] == n)] for n in lengths]
        out[key] = {"lengths": lengths, "seeds": min(len(a) for a in acc),
                    "accuracy": np.array([a.mean() for a in acc]), "loss": np.array([x.mean() for x in loss]),
                    "accuracy_std": np.array([a.std(ddof=1) if a.size > 1 else np.nan for a in acc]),
                    "loss_std": np.array([x.std(ddof=1) if x.size > 1 else np.nan for x in loss])}
    return out


def alpha_summary(table) -> dict:
    """Experiment 2 per trained scale: the loss at the short budget and at the end, the heads' sigma.

    Per scale the constant ``alpha`` (NaN for ``alpha_star``), and per seed the training loss at
    the short budget and at the end, the held-out loss and accuracy at the training length,
    each head's ``sigma`` at initialisation and at the end.

    Returns ``{label: {"alpha", "seeds", "short", "final", "test_loss", "test_accuracy",
    "sigma_init", "sigma_end"}}`` (arrays over seeds; sigmas ``[seeds, layers * heads]``), the
    short budget under ``"short_budget"`` and diverged ``(label, seed)`` pairs under ``"diverged"``.
    """
    r = table.rows
    budget = int(table.header.get("short_budget", SHORT_BUDGET))
    ok = _ok(table)
    out: dict = {"short_budget": budget, "diverged": sorted(zip(r["scheme"][~ok], r["seed"][~ok].tolist()))}
    for label in sorted(set(r["scheme"][ok])):
        m = ok & (r["scheme"] == label)
        seeds = np.unique(r["seed"][m])

        def pick(kind, column, x=None, seed_mask=m, seeds=seeds):
            rows = seed_mask & (r["kind"] == kind) & (True if x is None else r["x"] == x)
            return np.array([r[column][rows & (r["seed"] == sd)] for sd in seeds], dtype=float)

        alpha = float(label.split("=", 1)[1]) if label.startswith("alpha=") else np.nan
        out[label] = {"alpha": alpha, "seeds": seeds, "short": pick("curve", "loss", budget)[:, 0],
                      "final": pick("run", "loss")[:, 0], "test_loss": pick("test", "loss")[:, 0],
                      "test_accuracy": pick("test", "accuracy")[:, 0], "sigma_init": pick("sigma_init", "sigma"),
                      "sigma_end": pick("sigma_end", "sigma")}
    return out


def _pm(mean, std, scale=1.0, digits=2):
    if not np.isfinite(mean):
        return ""
    return f"{mean * scale:.{digits}f}" + (f" ± {std * scale:.{digits}f}" if np.isfinite(std) else "")


def summary_markdown(experiment: str, table, metric: str = "accuracy") -> str:
    """The experiment's result as a markdown table, mean ± std over seeds.

    For ``"mlm"``, ``metric`` is ``"accuracy"`` (%, beside the published table) or ``"loss"`` (nats
    per masked byte).
    """
    check_choice(experiment, "experiment", EXPERIMENTS)
    check_choice(metric, "metric", ("accuracy", "loss"))
    if experiment == "causal":
        from .causal import causal_markdown

        return causal_markdown(table, metric)
    if experiment == "mlm":
        s = mlm_summary(table)
        order = {k: i for i, k in enumerate(["standard", "entropy_invariant@512", "ssmax", "alpha_star"])}
        keys = sorted((k for k in s if k != "diverged"), key=lambda k: (order.get(k[0], 9), k[0], k[1] != "trained"))
        lengths = s[keys[0]]["lengths"] if keys else ()
        unit = "accuracy %" if metric == "accuracy" else "loss, nats per masked byte"
        lines = [f"| model (seeds), {unit} | " + " | ".join(str(n) for n in lengths) + " |",
                 "|---|" + "---:|" * len(lengths)]
        for key in keys:
            v = s[key]
            name = key[0] if key[1] == "trained" else f"{key[0]}, {key[1]} at test only"
            cells = (_pm(a, sd, 100) if metric == "accuracy" else _pm(a, sd, digits=3)
                     for a, sd in zip(v[metric], v[f"{metric}_std"]))
            lines.append(f"| {name} ({v['seeds']}) | " + " | ".join(cells) + " |")
        if metric == "loss":
            return "\n".join(lines)
        lines.append("")
        lines.append("| published (kexue.fm 8823) | " + " | ".join(str(n) for n in PUBLISHED["lengths"]) + " |")
        lines.append("|---|" + "---:|" * len(PUBLISHED["lengths"]))
        for name in list(PUBLISHED)[1:]:
            lines.append(f"| {name} | " + " | ".join(f"{x:.2f}" for x in PUBLISHED[name]) + " |")
    else:
        s = alpha_summary(table)
        b = s["short_budget"]
        lines = [f"| scale (seeds) | train loss at {b} steps | final train loss | held-out loss | held-out acc. % | "
                 "sigma at init (mean over heads) | sigma at end: mean [min, max] |", "|---|---:|---:|---:|---:|---:|---|"]
        labels = sorted((k for k in s if k not in ("short_budget", "diverged")),
                        key=lambda k: (np.isnan(s[k]["alpha"]), s[k]["alpha"]))
        for k in labels:
            v = s[k]
            se = v["sigma_end"]
            lines.append(f"| {k} ({len(v['seeds'])}) | {_pm(v['short'].mean(), _std(v['short']), digits=3)} | "
                         f"{_pm(v['final'].mean(), _std(v['final']), digits=3)} | "
                         f"{_pm(v['test_loss'].mean(), _std(v['test_loss']), digits=3)} | "
                         f"{_pm(v['test_accuracy'].mean(), _std(v['test_accuracy']), 100)} | "
                         f"{np.mean(v['sigma_init']):.2f} | {np.mean(se):.2f} [{np.min(se):.2f}, {np.max(se):.2f}] |")
    if s["diverged"]:
        lines.append("")
        lines.append("diverged: " + ", ".join(f"{k} seed {sd}" for k, sd in s["diverged"]))
    return "\n".join(lines)


def _std(x):
    return x.std(ddof=1) if x.size > 1 else np.nan

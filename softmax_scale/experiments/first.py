"""FIRST (Chiang & Cholak, arXiv 2202.12172): one marked key among ``n``, with the theory's share beside the measured one.

``$`` then ``n`` random bits; the answer is the first bit, read at ``$``
(:mod:`softmax_scale.train.first`: their model, 2 layers, 1 head, ``d_model`` 16, no positions
but a mark on the first bit).  Trained at ``L`` in :data:`TRAIN_LENGTHS` with each scale of
:data:`~softmax_scale.train.first.FIRST_SCALES` (the same initialisation and data order per
seed), tested at every ``n >= L`` of :data:`TEST_LENGTHS` on the same seeded sequences for
every model; the ``standard`` models also under two test-time scales (:data:`TEST_SCALES`):
``qwen_logn`` pinned at the training keys, and ``toolkit_share``, the toolkit's share-holding
factor per head (:func:`softmax_scale.heads.share_factors`).

**The theory beside every measurement.**  In each layer the head's share on the first bit from
the query ``$`` (:func:`softmax_scale.heads.key_share`) is measured at ``L`` and at each ``n``;
from what is measured at ``L`` alone (the head's scale ``sigma``, the first bit's standardised
gap and its spread over queries, the pooled standardised scores of the other keys), :func:`softmax_scale.heads.predict_share`
gives the share at each ``n`` under the scale's own growth.

Every number is a row of ``figures/one_key_first.csv`` (:data:`FIRST_COLUMNS`), a training run
at a time, through :func:`softmax_scale.experiments.run_experiment`, so the experiment resumes.
What one task does (the configuration, training, tests and measured heads) is in
:mod:`._first_runs`; this module is the experiment, its tables and its evidence.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys

import numpy as np

from .._util.store import source_revision
from . import _training as tr
from ._first_runs import (
    EVAL_SEED,
    QUICK_FIRST,
    TEST_LENGTHS,
    TEST_SCALES,
    TRAIN_LENGTHS,
    FirstConfig,
    FirstTask,
    expected_first_rows,
    first_accuracy,
    first_shares,
    run_first_task,
)
from .base import Evidence, Experiment

__all__ = ["EVAL_SEED", "EXPERIMENT", "FIRST_COLUMNS", "PUBLISHED_FIRST", "QUICK_FIRST", "TEST_LENGTHS", "TEST_SCALES",
           "TRAIN_LENGTHS", "FirstConfig", "FirstExperiment", "FirstTask", "expected_first_rows", "first_accuracy",
           "first_cells", "first_head_markdown", "first_markdown", "first_scale_name", "first_share_markdown",
           "first_shares", "run_first_task"]

#: Columns of ``one_key_first.csv``.  ``kind``: ``run`` (length = L; loss and accuracy over the
#: last 5% of the steps, count = steps, seconds), ``curve`` (length = step; the mean over the
#: preceding steps), ``test`` (one test length ``n`` under the test-time ``scale``: accuracy,
#: mean ``-log sigmoid`` loss, count = sequences), ``share`` (one layer's head at ``n``: the
#: measured ``share`` of the first bit from ``$``, ``share_predicted`` from what was measured at
#: ``L``, the first bit's standardised ``gap``, the head's scale ``sigma`` on unit-variance scores
#: (``alpha`` of :func:`softmax_scale.heads.key_share`), count = queries),
#: ``factor`` (``toolkit_share``'s factor for one head at ``n``, in ``value``), ``diverged``.
FIRST_COLUMNS = ("train_length", "scheme", "seed", "status", "kind", "rope", "scale", "length", "layer", "head",
                 "accuracy", "loss", "share", "share_predicted", "gap", "sigma", "value", "count", "seconds", "note")
_TEXT = ("scheme", "status", "kind", "rope", "scale", "note")
_INTS = ("train_length", "seed", "length", "layer", "head", "count")
#: Chiang & Cholak's table (arXiv 2202.12172): test accuracy at n = 1000 by training length.
PUBLISHED_FIRST = {"train_lengths": (10, 30, 100), "standard": (0.51, 0.73, 0.89), "chiang_cholak": (0.98, 1.00, 1.00)}
_REFERENCE = "standard"


def first_cells(table, kind: str, what: str, layer: int | None = None) -> dict:
    """The cells of one column of the result file, by run and test length.

    Parameters
    ----------
    table : Table
        The result file read back.
    kind : str
        The rows (``"test"``, ``"share"``, ``"factor"``).
    what : str
        The column (``"accuracy"``, ``"share"``, ``"share_predicted"``, ...).
    layer : int, optional
        Only this layer's rows.

    Returns
    -------
    dict
        ``{(L, scheme, scale, n): {seed: value}}``.
    """
    r = table.rows
    m = (r["status"] == "ok") & (r["kind"] == kind)
    if layer is not None:
        m &= r["layer"] == layer
    out: dict = {}
    for i in np.flatnonzero(m):
        key = (int(r["train_length"][i]), str(r["scheme"][i]), str(r["scale"][i]), int(r["length"][i]))
        out.setdefault(key, {})[int(r["seed"][i])] = float(r[what][i])
    return out


def first_scale_name(scheme: str, scale: str) -> str:
    """How a (trained scale, test scale) pair is named in the summaries and figures."""
    base = scheme.split("@")[0]
    names = {"standard": "standard", "chiang_cholak": "their log n (ln(n+1))", "entropy_invariant": "log_L n trained in",
             "ssmax": "ssmax (s ln n)"}
    name = names.get(base, scheme)
    return name if scale == "trained" else f"{name} + {scale} at test"


def _order(keys):
    rank = {"standard": 0, "chiang_cholak": 1, "entropy_invariant": 2, "ssmax": 3}
    return sorted(keys, key=lambda k: (k[0], rank.get(k[1].split("@")[0], 9), k[1], 0 if k[2] == "trained" else 1, k[2]))


def _lengths(cells) -> list:
    return sorted({k[3] for k in cells})


def _signs(d) -> str:
    d = np.asarray(d)
    return f"{int(np.sum(d > 0))}+ {int(np.sum(d < 0))}- {int(np.sum(d == 0))}="


def first_markdown(table) -> str:
    """Accuracy at each test length per (L, trained scale, test scale), mean ± standard error over seeds; the published column at 1000.

    Then, per ``n > L``, each scale minus ``standard`` as trained, paired by seed: mean ± standard
    error of the differences and the seeds above, below and equal.
    """
    cells = first_cells(table, "test", "accuracy")
    lengths = _lengths(cells)
    runs = _order({k[:3] for k in cells})
    lines = ["| L | scale (accuracy, mean ± standard error over seeds; seeds) | "
             + " | ".join(f"n = {n}" for n in lengths) + " | published at 1000 |",
             "|---:|---|" + "---:|" * (len(lengths) + 1)]
    pub = dict(zip(PUBLISHED_FIRST["train_lengths"], range(3)))
    for L, scheme, scale in runs:
        out, seeds = [], 0
        for n in lengths:
            v = cells.get((L, scheme, scale, n))
            if not v:
                out.append("")
                continue
            a = np.array(list(v.values()))
            seeds = max(seeds, a.size)
            out.append(tr.pm_of(a, digits=3))
        base = scheme.split("@")[0]
        p = PUBLISHED_FIRST.get(base) if scale == "trained" else None
        published = f"{p[pub[L]]:.2f}" if p is not None and L in pub else ""
        lines.append(f"| {L} | {first_scale_name(scheme, scale)} ({seeds}) | " + " | ".join(out) + f" | {published} |")
    lines += ["", "| L | scale minus standard (accuracy, paired by seed, mean ± standard error over seeds) | "
              + " | ".join(f"n = {n}" for n in lengths) + " |", "|---:|---|" + "---:|" * len(lengths)]
    for L, scheme, scale in runs:
        if (scheme, scale) == (_REFERENCE, "trained"):
            continue
        out = []
        for n in lengths:
            a, b = cells.get((L, scheme, scale, n)), cells.get((L, _REFERENCE, "trained", n))
            seeds = sorted(set(a or {}) & set(b or {}))
            if n <= L or not seeds:
                out.append("")
                continue
            d = np.array([a[s] - b[s] for s in seeds])
            out.append(f"{tr.pm_of(d, digits=3)} ({_signs(d)})")
        lines.append(f"| {L} | {first_scale_name(scheme, scale)} | " + " | ".join(out) + " |")
    return "\n".join(lines + tr.diverged_line(_diverged(table)))


def first_share_markdown(table) -> str:
    """Per layer, the head's share on the first bit at each test length: measured and predicted from ``L`` (means over seeds).

    Each cell is ``measured / predicted``; the last column the mean absolute error of the
    prediction past ``L`` over seeds and lengths.
    """
    r = table.rows
    layers = sorted({int(x) for x in r["layer"][(r["status"] == "ok") & (r["kind"] == "share")]})
    lines = []
    for layer in layers:
        meas, pred = first_cells(table, "share", "share", layer), first_cells(table, "share", "share_predicted", layer)
        lengths = _lengths(meas)
        lines += [f"| L | layer {layer}: scale (share measured / predicted) | " + " | ".join(f"n = {n}" for n in lengths)
                  + " | mean abs error past L |", "|---:|---|" + "---:|" * (len(lengths) + 1)]
        for L, scheme, scale in _order({k[:3] for k in meas}):
            out, err = [], []
            for n in lengths:
                a, b = meas.get((L, scheme, scale, n)), pred.get((L, scheme, scale, n))
                if not a:
                    out.append("")
                    continue
                ma = np.mean(list(a.values()))
                mb = np.nanmean(list(b.values())) if b and np.any(np.isfinite(list(b.values()))) else np.nan
                out.append(f"{ma:.3f} / {mb:.3f}" if np.isfinite(mb) else f"{ma:.3f} / ")
                if n > L:
                    err += [abs(a[s] - b[s]) for s in a if s in b and np.isfinite(b[s])]
            e = f"{np.mean(err):.3f}" if err else ""
            lines.append(f"| {L} | {first_scale_name(scheme, scale)} | " + " | ".join(out) + f" | {e} |")
        lines.append("")
    return "\n".join(lines).rstrip()


def first_head_markdown(table) -> str:
    """Per layer, the head's ``sigma`` and the first bit's standardised gap at each test length (means over seeds).

    What the i.i.d. prediction holds fixed from ``L`` (the gap; ``sigma`` up to the scale's own
    growth), as the model changes it: each cell ``sigma / gap``.
    """
    r = table.rows
    layers = sorted({int(x) for x in r["layer"][(r["status"] == "ok") & (r["kind"] == "share")]})
    lines = []
    for layer in layers:
        al, gp = first_cells(table, "share", "sigma", layer), first_cells(table, "share", "gap", layer)
        lengths = _lengths(al)
        lines += [f"| L | layer {layer}: scale (sigma / gap) | " + " | ".join(f"n = {n}" for n in lengths) + " |",
                  "|---:|---|" + "---:|" * len(lengths)]
        for L, scheme, scale in _order({k[:3] for k in al}):
            out = []
            for n in lengths:
                a, g = al.get((L, scheme, scale, n)), gp.get((L, scheme, scale, n))
                out.append(f"{np.mean(list(a.values())):.2f} / {np.mean(list(g.values())):.2f}" if a else "")
            lines.append(f"| {L} | {first_scale_name(scheme, scale)} | " + " | ".join(out) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def _diverged(table) -> list:
    r = table.rows
    bad = r["status"] != "ok"
    return sorted({(f"L={int(a)} {b}", int(c)) for a, b, c in zip(r["train_length"][bad], r["scheme"][bad], r["seed"][bad])})


class FirstExperiment(Experiment):
    """The FIRST experiment (see the module docstring)."""

    name = "first"
    description = "FIRST (Chiang & Cholak): the first of n bits, trained at 10/30/100, tested to 1000, share predicted"
    file_stem = "one_key_first"
    columns, text, ints = FIRST_COLUMNS, _TEXT, _INTS
    key = ("train_length", "scheme", "seed", "status")
    task_columns = ("train_length", "scheme", "seed")
    match = ("experiment", "config", "model", "eval")
    figure_names = ("one_key_first",)

    def config(self, quick: bool = False) -> FirstConfig:
        """:class:`FirstConfig` or its quick form."""
        return QUICK_FIRST if quick else FirstConfig()

    def tasks(self, config: FirstConfig, *, out=None, progress: bool = False) -> list:
        """One task per (seed, training length, trained scale), the seed outermost."""
        from ..train.first import FirstModel

        tasks = []
        for seed in range(config.seeds):
            for L in config.train_lengths:
                lengths = tuple(n for n in config.test_lengths if n >= L)
                for scheme in config.scales:
                    tasks.append(FirstTask(FirstModel(L, scheme, steps=config.steps), seed, lengths, config.count,
                                           tuple(config.test_scales) if scheme == _REFERENCE else (),
                                           config.curve_every))
        return tasks

    def task_cells(self, task) -> tuple:
        """``(L, label, seed)``."""
        return (task.model.train_length, task.label, task.seed)

    def run_task(self, task) -> list:
        """:func:`run_first_task`."""
        return run_first_task(self, task)

    def expected_rows(self, task) -> int:
        """:func:`expected_first_rows`."""
        return expected_first_rows(task)

    def block_rows(self, key, expected) -> int:
        """A diverged run is one row."""
        return 1 if key[3] == "diverged" else super().block_rows(key, expected)

    def is_done(self, store, task) -> bool:
        """Finished with all its rows, or diverged."""
        cells = self.task_key(task)
        return store.has((*cells, "ok"), self.expected_rows(task)) or store.has((*cells, "diverged"), 1)

    def row(self, task, status: str, kind: str, **cells) -> tuple:
        """One row of ``task`` in the order of :attr:`columns`; the cells not given take their defaults."""
        unknown = set(cells) - set(self.columns[5:])
        if unknown:
            raise TypeError(f"`cells`: no columns {sorted(unknown)} in {self.columns}")
        out = [task.model.train_length, task.label, task.seed, status, kind]
        for c in self.columns[5:]:
            if c in cells:
                out.append(cells[c])
            elif c == "rope":
                out.append("none")
            elif c in self.ints:
                out.append(-1 if c in ("layer", "head") else 0)
            else:
                out.append("" if c in self.text else np.nan)
        return tuple(out)

    def header(self, config, tasks, command) -> dict:
        """Provenance: the command, the configuration, the model, the test sequences, versions."""
        import jax
        import optax

        m = tasks[0].model
        cfg = {k: v for k, v in dataclasses.asdict(config).items() if k not in ("quick", "seeds")}  # seeds may grow
        model = {k: v for k, v in m.describe().items() if k not in ("train_length", "scheme", "steps")}
        return {
            "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "experiment": f"{self.name}{' (quick)' if config.quick else ''}",
            "config": json.dumps(cfg, sort_keys=True, separators=(",", ":")),
            "model": json.dumps(model, sort_keys=True, separators=(",", ":")) + f"; {m.n_params} parameters "
                     "(ssmax: + 1 per head); Post-LN, bidirectional, a fixed mark on the first bit, float32",
            "scales": "standard; chiang_cholak ln(n+1); entropy_invariant pinned at L+1 keys; ssmax s ln(n+1), "
                      "s learned per head from 1/ln(L+1); at test on standard: " + ", ".join(config.test_scales),
            "eval": f"{config.count} sequences per test length n (n bits after $), numpy seed [{EVAL_SEED}, n], "
                    "the same for every model",
            "theory": "per layer, key_share of the query $ on the first bit; predict_share from the head's scale and the "
                      "gap in its query groups (gap_bins) and its pooled scores at L, with the scale's growth; "
                      "toolkit_share: share_factors on the mean gap (a head whose first bit is not above the others "
                      "is left as trained)",
            "jax": f"jax {jax.__version__}, optax {optax.__version__}, {jax.default_backend()}",
            "code": f"softmax_scale at {source_revision()}",
            "date": datetime.date.today().isoformat(),
        }

    def summaries(self, table) -> list:
        """Accuracy (and the paired differences), the share measured against predicted, the heads' sigma and gap."""
        return [first_markdown(table), first_share_markdown(table), first_head_markdown(table)]

    def evidence(self, table) -> list:
        """Every (L, trained scale, test scale) against ``standard`` as trained, in accuracy at each ``n > L``, paired by seed."""
        from ..train.first import FirstModel

        cells = first_cells(table, "test", "accuracy")
        out = []
        for L, scheme, scale in _order({k[:3] for k in cells}):
            if (scheme, scale) == (_REFERENCE, "trained"):
                continue
            fm = FirstModel(L, scheme.split("@")[0])
            for n in _lengths(cells):
                a, b = cells.get((L, scheme, scale, n)), cells.get((L, _REFERENCE, "trained", n))
                seeds = tuple(sorted(set(a or {}) & set(b or {})))
                if n <= L or not seeds:
                    continue
                d = np.array([a[s] - b[s] for s in seeds])
                out.append(Evidence(self.name, "FIRST encoder (Chiang & Cholak)", fm.n_params, "parameters", "none",
                                    "first bit", float(n) / L, first_scale_name(scheme, scale), _REFERENCE, "accuracy",
                                    float(np.mean(d)), float(tr.std(d)), seeds, fm.d_model // fm.heads, L, "bits",
                                    values=tuple(float(x) for x in d)))
        return out


EXPERIMENT = FirstExperiment()

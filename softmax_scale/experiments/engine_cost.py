"""What an engine's wrong factor costs a real decoder (SmolLM2-135M): the loss change when ``q.k`` is multiplied by ``r``.

A document's first ``n`` tokens are read once as the model was trained (the reference) and once
for each factor ``r`` of :data:`RATIOS` on ``q.k``, in each shape of :data:`SHAPES` (every layer; every
layer on half of the dimensions, as a factor on ``cos``/``sin`` of a half rotation puts it; or one layer
in four as Llama 4's and Laguna's per-layer rules put it); the loss is the mean
next-token negative log-likelihood over the second half of the positions, and the change is
paired position by position with its standard error; the next-token KL from the reference's
distribution to the run's (:meth:`~softmax_scale.models.llama.LlamaDecoder.next_token_kl`) is
averaged over the same positions.  Beside each row, the i.i.d. theory
(:func:`softmax_scale.engines.cost.iid_cost`) at the reference pass's measured head scales: the KL
between a head's attention rows at the two factors and the change of its entropy, averaged over the
heads the factor reaches (whole logits only: a factor on half of the dimensions does not scale a row's
scores by one number, so its theory columns are NaN).  It is the experiment ``engine_cost`` (:data:`EXPERIMENT`).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from dataclasses import asdict, dataclass

import numpy as np

from .._util.store import source_revision
from ..engines.cost import MEASURED_TRAIN_LENGTH, committed_file, measured_cost
from .base import Experiment

__all__ = ["EXPERIMENT", "LAGUNA_CONFIG", "LAGUNA_SHAPE", "MEASURED_TRAIN_LENGTH", "QUICK_CONFIG", "RATIOS", "SHAPES",
           "EngineCostConfig",
           "EngineCostExperiment",
           "committed_file", "dim_factor_array", "factor_array", "measured_cost"]

#: Factors on ``q.k`` measured: transformers 4.51 against now on Qwen3's static YaRN, its inverse, YaRN 4's
#: temperature, YaRN 64's cos/sin factor, YaRN 16's temperature (vLLM on Ministral 3), DeepSeek-V3's.
RATIOS = (1.0451 / 1.2965, 1 / 1.2965, 1.2965, 1.4159, 1.6314, 1.8739)
#: Where the factor goes: every layer; every layer on half of each head's dimensions (the rotation pairs
#: ``(i, i + d/2)`` with ``i < d/4``); or the layers ``i`` with ``(i + 1) % 4 == 0``.
SHAPES = ("all", "half", "every_fourth")
#: Laguna-XS.2's shape in vLLM to 0.29.0 (prime-rl PR #2802): half of the dimensions of one layer in four,
#: measured apart from the committed grid (:data:`LAGUNA_CONFIG`).
LAGUNA_SHAPE = "half_every_fourth"


@dataclass(frozen=True)
class EngineCostConfig:
    """The engine_cost experiment.

    Attributes
    ----------
    quick : bool
    model : str
        The decoder (:func:`softmax_scale.models.load`).
    lengths : tuple of int
        Numbers of tokens ``n`` read (one task each).
    ratios : tuple of float
    shapes : tuple of str
    doc : str
        The corpus document read (:func:`softmax_scale.models.corpus`).
    query_block : int
    """

    quick: bool = False
    model: str = "smollm2"
    lengths: tuple = (1024, 4096, 8192, 16384)
    ratios: tuple = RATIOS
    shapes: tuple = SHAPES
    doc: str = "stdlib/argparse"
    query_block: int = 256


#: The quick form: 256 tokens, a factor of 1 (a control: the reference's own numbers) and one other, both shapes.
QUICK_CONFIG = EngineCostConfig(quick=True, lengths=(256,), ratios=(1.0, 1.2965))
#: Laguna's factor, 1.4159 on cos/sin, in its shape (run into a folder of its own: its grid is not the committed one).
LAGUNA_CONFIG = EngineCostConfig(ratios=(1.4159 ** 2,), shapes=(LAGUNA_SHAPE,))


@dataclass(frozen=True)
class _Task:
    config: EngineCostConfig
    n: int


def factor_array(ratio: float, shape: str, n_layers: int, n_heads: int, length: int) -> np.ndarray:
    """The decoder's ``factors`` for ``ratio`` in ``shape``: ``[length]`` (``all``, ``half``: ones) or ``[layers, heads, length]``."""
    if shape == "all":
        return np.full(length, float(ratio))
    if shape == "half":
        return np.ones(length)
    if shape == "every_fourth":
        f = np.ones((n_layers, n_heads, length))
        f[3::4] = float(ratio)
        return f
    if shape == LAGUNA_SHAPE:
        return np.ones(length)
    raise ValueError(f"`shape` must be one of {', '.join((*SHAPES, LAGUNA_SHAPE))}, got {shape!r}")


def dim_factor_array(ratio: float, shape: str, head_dim: int, n_layers: int | None = None):
    """The decoder's ``dim_factors`` for ``ratio`` in ``shape``: on the pairs ``(i, i + d/2)``, ``i < d/4``, or None.

    ``half``: ``[head_dim]``; :data:`LAGUNA_SHAPE`: ``[n_layers, head_dim]``, the layers ``(i + 1) % 4 == 0``.
    """
    if shape not in (*SHAPES, LAGUNA_SHAPE):
        raise ValueError(f"`shape` must be one of {', '.join((*SHAPES, LAGUNA_SHAPE))}, got {shape!r}")
    if shape not in ("half", LAGUNA_SHAPE):
        return None
    dims = np.ones(head_dim)
    q = head_dim // 4
    dims[:q] = dims[head_dim // 2:head_dim // 2 + q] = float(ratio)
    if shape == "half":
        return dims
    out = np.ones((n_layers, head_dim))
    out[3::4] = dims
    return out


class EngineCostExperiment(Experiment):
    """One task per length ``n``: the reference pass and one pass per factor and shape."""

    name = "engine_cost"
    description = "SmolLM2-135M's loss when an engine multiplies q.k by a factor its authors do not (every layer or one in four)"
    file_stem = "engine_cost"
    columns = ("length", "ratio", "shape", "loss_reference", "loss", "delta_loss", "delta_se", "kl", "kl_se", "tokens",
               "heads", "iid_kl", "iid_delta_entropy")
    text = ("shape",)
    ints = ("length", "tokens", "heads")
    key = task_columns = ("length",)
    match = ("model_sha256", "doc", "ratios", "shapes", "scoring")
    in_process = True
    figure_names = ("engine_cost",)

    def config(self, quick: bool = False) -> EngineCostConfig:
        """The full grid, or :data:`QUICK_CONFIG`."""
        return QUICK_CONFIG if quick else EngineCostConfig()

    def tasks(self, config, *, out=None, progress: bool = False) -> list:
        """One task per length, shortest first."""
        return [_Task(config, int(n)) for n in sorted(config.lengths)]

    def task_cells(self, task) -> tuple:
        """``(n,)``."""
        return (task.n,)

    def expected_rows(self, task) -> int:
        """One row per factor and shape."""
        return len(task.config.ratios) * len(task.config.shapes)

    def run_task(self, task) -> list:
        """The reference pass, then each factor and shape; the i.i.d. theory at the reference's head scales."""
        from ..engines.cost import iid_cost
        from ..models import corpus, load

        c, n = task.config, task.n
        model = load(c.model)
        ids = model.tokenize(corpus(c.doc))[:n + 1]
        if ids.size < n + 1:
            raise ValueError(f"`lengths`: {c.doc} has {ids.size} tokens, fewer than {n + 1}")
        L, H = model.config.n_layers, model.config.n_heads
        scored = slice(n // 2, n)
        ref = model.positions(ids, stop=n, query_block=c.query_block, keep_hidden=True)
        sigma = ref.sigma[:, :, scored].mean(axis=-1)  # [layers, heads]
        rows = []
        for ratio in c.ratios:
            theory = iid_cost(sigma, n, ratio)
            for shape in c.shapes:
                run = model.positions(ids, stop=n, factors=factor_array(ratio, shape, L, H, n + 1),
                                      dim_factors=dim_factor_array(ratio, shape, model.config.head_dim, L),
                                      query_block=c.query_block, keep_hidden=True)
                d = run.nll[scored] - ref.nll[scored]
                kl = model.next_token_kl(ref, run)[scored]
                reach = np.ones((L, H), bool) if shape in ("all", "half") else factor_array(2.0, "every_fourth", L, H, 1)[..., 0] != 1.0
                rows.append((n, float(ratio), shape, float(ref.nll[scored].mean()), float(run.nll[scored].mean()),
                             float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size)), float(kl.mean()),
                             float(kl.std(ddof=1) / np.sqrt(kl.size)), int(d.size), int(reach.sum()),
                             *((float("nan"),) * 2 if shape in ("half", LAGUNA_SHAPE) else
                               (float(theory.kl[reach].mean()), float(theory.delta_entropy[reach].mean())))))
        return rows

    def header(self, config, tasks, command) -> dict:
        """The command, the model and its hash, the document, the grid, the scoring, the code."""
        from ..models import load

        m = load(config.model)
        return {"command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                "experiment": f"{self.name}{' (quick)' if config.quick else ''}",
                "model": os.path.basename(m.path or "?"), "model_sha256": m.sha256, "doc": config.doc,
                "lengths": " ".join(str(n) for n in config.lengths),
                "ratios": " ".join(f"{r:.6g}" for r in config.ratios), "shapes": " ".join(config.shapes),
                "scoring": "mean next-token NLL over positions n/2 .. n-1 of the first n + 1 tokens; the change "
                           "paired by position, its standard error over positions; kl: the next-token KL(reference || run) "
                           "over the same positions, its mean and standard error; iid_kl and iid_delta_entropy: "
                           "engines.cost.iid_cost at each reached head's sigma (mean over the scored queries of the "
                           "reference pass), averaged over the reached heads",
                "config": json.dumps(asdict(config)),
                "code": f"softmax_scale at {source_revision()}", "date": datetime.date.today().isoformat()}

    def summaries(self, table) -> list:
        """One markdown table: the loss change and the theory at each length, factor and shape."""
        r = table.rows
        out = ["| n | factor on q.k | where | loss change (nats/token) | next-token KL (nats) | i.i.d. KL per head | "
               "i.i.d. entropy change |", "|---:|---:|---|---:|---:|---:|---:|"]
        for i in range(r["length"].size):
            out.append(f"| {r['length'][i]} | {r['ratio'][i]:.4f} | {r['shape'][i]} | {r['delta_loss'][i]:+.4f} ± "
                       f"{r['delta_se'][i]:.4f} | {r['kl'][i]:.4f} ± {r['kl_se'][i]:.4f} | {r['iid_kl'][i]:.4f} | "
                       f"{r['iid_delta_entropy'][i]:+.4f} |")
        return ["\n".join(out) + "\n"]


EXPERIMENT = EngineCostExperiment()

"""The passkey experiment: whether a byte model trained at ``L`` retrieves five digits hidden farther back than ``L``.

The usual construction (:func:`~softmax_scale.train.tasks.passkey_batch`): filler sentences
repeated to the length, the line ``The pass key is K. Remember it. K is the pass key.`` at a depth
in ``[0, 1]``, and the question at the end; ``K`` is five random digits.  A prompt counts as
retrieved when all five digits are the model's greedy choices (teacher-forced arg-max at each of
the five positions: the same as greedy decoding, which follows the right digits as long as it is
right).  Test lengths ``L``, ``2L``, ``4L`` x five depths, the same prompts for every model.

The models are :mod:`._one_key`'s (an eighth of each training batch is passkey prompts of ``L``),
under the RoPE variants and test-time scales of :class:`PasskeyConfig`; the retrieving head's
share on the digits of the key's line is measured at each length (RoPE ``none``) and predicted
from ``L``.  Rows of ``figures/one_key_passkey.csv`` (test kind ``passkey``: ``accuracy`` the
exact-match rate, ``loss`` the mean cross-entropy per digit, ``count`` the prompts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..heads import SHARE_RULE
from ..train.data import EVAL_SEED
from . import _one_key as ok
from . import _training as tr
from .base import Evidence

__all__ = ["DEPTHS", "EXPERIMENT", "PASSKEY_MULTIPLES", "QUICK_CONFIG", "PasskeyConfig", "PasskeyExperiment",
           "passkey_markdown", "passkey_summary"]

#: Test lengths as multiples of ``L``.
PASSKEY_MULTIPLES = (1, 2, 4)
#: Depths of the key's line, as fractions of the filler.
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class PasskeyConfig(ok.OneKeyConfig):
    """The passkey experiment: :class:`~softmax_scale.experiments._one_key.OneKeyConfig`, the lengths and depths.

    Attributes
    ----------
    multiples : tuple of int
        Test lengths as multiples of ``L``.
    depths : tuple of float
        Depths of the key's line.

    ``count`` is the prompts per (length, depth) cell.
    """

    ropes: tuple = ("none", "yarn")
    test_scales: tuple = ok.ONE_KEY_TEST_SCALES[:1]
    rules: tuple = (SHARE_RULE,)
    count: int = 100
    multiples: tuple = PASSKEY_MULTIPLES
    depths: tuple = DEPTHS

    def __post_init__(self):
        super().__post_init__()
        for m in self.multiples:
            if not isinstance(m, int) or isinstance(m, bool) or m < 1 or m * self.model.train_length > self.model.max_length:
                raise ValueError(f"`multiples`: each test length is an integer multiple >= 1 of the training length "
                                 f"(a prompt shorter than L is not the question), at most max_length, got {m!r}")
        for d in self.depths:
            if not isinstance(d, (int, float)) or isinstance(d, bool) or not 0.0 <= d <= 1.0:
                raise ValueError(f"`depths`: each depth must be a fraction of the filler in [0, 1], got {d!r}")


#: The quick form: the tiny model, two seeds, two lengths and two depths, a few prompts.
QUICK_CONFIG = PasskeyConfig(quick=True, seeds=2, model=ok.QUICK_ONE_KEY_MODEL, ropes=("none",), multiples=(1, 2),
                             depths=(0.0, 1.0), count=4, share_windows=1, probe_windows=4, entropy_windows=2,
                             curve_every=10)


def _prompts(length, depth, count):
    """The prompts of one cell: the same for every model."""
    from ..train.tasks import passkey_batch

    return passkey_batch(length, depth, count, np.random.default_rng([EVAL_SEED, length, round(1000 * depth)]))


class PasskeyExperiment(ok.OneKeyExperiment):
    """The passkey experiment (see the module docstring)."""

    name = "passkey"
    description = "passkey retrieval from L to 4L at five depths: trained scales, RoPE variants, test-time scales"
    figure_names = ("one_key_passkey",)
    full_config = PasskeyConfig()
    quick_config = QUICK_CONFIG

    def tests_of(self, config) -> tuple:
        """The ``(length, depth)`` cells, ``count`` prompts each."""
        L = config.model.train_length
        return tuple((m * L, float(d)) for m in config.multiples for d in config.depths)

    def test_lengths(self, task) -> tuple:
        """The test lengths."""
        return tuple(sorted({n for n, _ in task.tests}))

    def probe_batch(self, task):
        """Prompts of ``L`` at depths spread over ``[0, 1]``."""
        from ..train.tasks import passkey_batch

        L = task.config.train_length
        w = task.probe_windows
        parts = [passkey_batch(L, d, 1, np.random.default_rng([EVAL_SEED, 2, L, i]))
                 for i, d in enumerate(np.linspace(0.0, 1.0, w))]
        return _stack(parts)

    def describe_tests(self, task) -> str:
        """Lengths, depths, prompts."""
        depths = sorted({d for _, d in task.tests})
        return (f"passkey prompts of {' '.join(str(n) for n in self.test_lengths(task))} bytes x depths "
                f"{' '.join(f'{d:g}' for d in depths)}, {task.count} prompts per cell, exact match of the five "
                "digits (greedy)")

    def test_row_count(self, task) -> int:
        """A passkey row per RoPE x scale x cell, a share row per scale x length."""
        return len(task.ropes) * len(task.scales) * len(task.tests) + len(task.scales) * len(self.test_lengths(task))

    def test_rows(self, row, task, params, probe) -> list:
        """The passkey and share rows of one model."""
        from ..train.evaluation import evaluate_batch

        c = task.config
        rows = []
        for n in self.test_lengths(task):
            scales = ok.scales_of(task, probe, n)
            cells = [(d, _prompts(n, d, task.count)) for m, d in task.tests if m == n]
            for rope in task.ropes:
                for scale, kwargs, _ in scales:
                    for depth, b in cells:
                        nll, correct, count = evaluate_batch(params, c, b.batch, rope=rope, **kwargs)
                        rows.append(row(task, "ok", "passkey", rope=rope, scale=scale, length=n, depth=depth,
                                        distance=int(np.mean(b.distance)), loss=float(nll.sum() / count.sum()),
                                        accuracy=float(np.mean(correct == count)), count=int(count.size)))
            w = task.share_windows
            mixed = _stack([_prompts(n, d, task.count) for d in sorted({d for _, d in task.tests})], rows=w)
            for scale, kwargs, factors in scales:
                rows.append(ok.share_row(row, task, probe, params, mixed.batch.inputs, mixed.source, scale, kwargs,
                                         factors, rope="none", length=n))
        return rows

    def summaries(self, table) -> list:
        """Exact-match rate per length (over depths), and the retrieving head's share."""
        return [passkey_markdown(table), ok.share_markdown(table, "length")]

    def evidence(self, table) -> list:
        """Every (trained scale, RoPE, test scale) against ``standard`` as trained, past ``L``."""
        from ..train.config import TrainConfig

        try:
            cfg = TrainConfig.from_json(table.header.get("config", "{}"))
        except (TypeError, ValueError):
            return []
        s = passkey_summary(table)
        L = cfg.train_length
        out = []
        for (label, rope, scale), v in sorted(s["rows"].items()):
            if (label, scale) == (ok.REFERENCE, "trained"):
                continue
            ref = s["rows"].get((ok.REFERENCE, rope, "trained"))
            if ref is None:
                continue
            name = label if scale == "trained" else f"{label} + {scale} at test"
            for i, n in enumerate(s["lengths"]):
                if n <= L:
                    continue
                for metric in ("accuracy", "loss"):
                    p = ok.paired(v[f"{metric}_by_seed"][i], ref[f"{metric}_by_seed"][i])
                    if p is not None:
                        out.append(Evidence(self.name, "byte-level decoder", cfg.n_params, "parameters", rope,
                                            "passkey retrieval", float(n) / L, name, ok.REFERENCE, metric, *p[:3],
                                            cfg.d_model // cfg.heads, L, "bytes", values=p[3]))
        return out


def _stack(parts, rows=None):
    """One OneKeyBatch of several (``rows`` first rows of each)."""
    from ..train.data import Batch
    from ..train.tasks import OneKeyBatch

    k = slice(None) if rows is None else slice(0, rows)
    b = Batch(np.concatenate([p.batch.inputs[k] for p in parts]), np.concatenate([p.batch.targets[k] for p in parts]),
              np.concatenate([p.batch.weights[k] for p in parts]))
    return OneKeyBatch(b, np.concatenate([p.source[k] for p in parts]), np.concatenate([p.distance[k] for p in parts]))


def passkey_summary(table) -> dict:
    """Exact-match rate and loss per digit per (trained scale, RoPE, test scale) and length, over depths, then seeds.

    Returns ``{"lengths", "depths", "rows": {(label, rope, scale): {"accuracy", "accuracy_std", "accuracy_n",
    "loss", "loss_std", "loss_n", "seeds", "accuracy_by_seed", "loss_by_seed", "by_depth"}},
    "diverged"}``: per seed the mean over depths (prompts weighted); over the seeds their mean,
    sample std and number (``*_n``); ``by_depth`` the mean over seeds ``[lengths, depths]``.
    """
    r = table.rows
    m0 = tr.ok(table) & (r["kind"] == "passkey")
    lengths, depths = np.unique(r["length"][m0]), np.unique(r["depth"][m0])
    out: dict = {"lengths": lengths, "depths": depths, "rows": {}, "diverged": tr.diverged_runs(table)}
    for key in sorted(set(zip(r["scheme"][m0], r["rope"][m0], r["scale"][m0]))):
        m = m0 & (r["scheme"] == key[0]) & (r["rope"] == key[1]) & (r["scale"] == key[2])
        entry = {"seeds": int(np.unique(r["seed"][m]).size)}
        for metric in ("accuracy", "loss"):
            by = []
            for n in lengths:
                mn = m & (r["length"] == n)
                per = {}
                for sd in np.unique(r["seed"][mn]):
                    ms = mn & (r["seed"] == sd)
                    w = r["count"][ms].astype(float)
                    per[int(sd)] = float(np.sum(r[metric][ms] * w) / w.sum())
                by.append(per)
            entry[f"{metric}_by_seed"] = by
            entry[metric] = np.array([np.mean(list(b.values())) if b else np.nan for b in by])
            entry[f"{metric}_std"] = np.array([tr.std(np.array(list(b.values()))) if b else np.nan for b in by])
            entry[f"{metric}_n"] = np.array([len(b) for b in by])
        entry["by_depth"] = np.array([[np.mean(r["accuracy"][m & (r["length"] == n) & (r["depth"] == d)])
                                       if np.any(m & (r["length"] == n) & (r["depth"] == d)) else np.nan
                                       for d in depths] for n in lengths])
        out["rows"][key] = entry
    return out


def passkey_markdown(table) -> str:
    """Rows trained scale x RoPE x test scale, columns the test lengths: exact-match % (mean ± standard error over seeds)."""
    s = passkey_summary(table)
    lengths = s["lengths"]
    L = int(lengths.min()) if lengths.size else 0
    head = [f"{n} ({n // L}L)" if L else str(n) for n in lengths]
    lines = ["| trained | RoPE | scale (passkey exact match %, all depths, mean ± standard error over seeds; seeds) | "
             + " | ".join(head) + " |",
             "|---|---|---|" + "---:|" * len(lengths)]
    for key in sorted(s["rows"], key=lambda k: (k[0] != ok.REFERENCE, k[0], k[1], k[2] != "trained", k[2])):
        v = s["rows"][key]
        cells = [tr.pm(v["accuracy"][i], v["accuracy_std"][i], v["accuracy_n"][i], 100.0, 1) for i in range(lengths.size)]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} ({v['seeds']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines + tr.diverged_line(s["diverged"]))


EXPERIMENT = PasskeyExperiment()

"""The size trend of the one-key regime: ``standard`` against ``log_L n`` trained in, copying, at three sizes.

Does the difference that copying past ``L`` shows (:mod:`.copy`) grow with the model?  The
one-key models (:mod:`._one_key`) at ``d_model`` 32, 64 and 128 (about 16x in parameters,
:data:`~softmax_scale.experiments._one_key.SIZE_MODELS`), two seeds each, tested as the copy
experiment tests them at ``L .. 8L`` under every RoPE variant with the scale as trained.  The
``d_model`` 64 models are the copy experiment's (the same checkpoints).  Rows of
``figures/one_key_size.csv`` (the copy experiment's columns; ``scheme`` is ``label/d<d_model>``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _one_key as ok
from . import _training as tr
from .base import Evidence
from .copy import CopyConfig, CopyExperiment, copy_markdown, copy_summary

__all__ = ["EXPERIMENT", "QUICK_SIZE", "SizeConfig", "SizeExperiment", "size_differences", "size_markdown", "size_parameters"]


@dataclass(frozen=True)
class SizeConfig(CopyConfig):
    """The size trend: :class:`~softmax_scale.experiments.copy.CopyConfig` at several model sizes.

    Attributes
    ----------
    sizes : tuple of (int, int)
        ``(d_model, d_ff)`` of each size.

    Two seeds, ``standard`` against ``log_L n`` trained in, the scale as trained (no test-time scale).
    """

    seeds: int = 2
    scales: tuple = ok.SIZE_SCALES
    test_scales: tuple = ()
    rules: tuple = ()
    multiples: tuple = (1, 2, 4, 8)
    sizes: tuple = ok.SIZE_MODELS

    def __post_init__(self):
        super().__post_init__()
        for size in self.sizes:
            ok.one_key_model(self.model, "standard", None, size)


#: The quick form: two tiny sizes, one seed each.
QUICK_SIZE = SizeConfig(quick=True, seeds=1, model=ok.QUICK_ONE_KEY_MODEL, sizes=((16, 32), (32, 48)), ropes=("none",),
                        multiples=(2,), count=256, share_windows=1, probe_windows=4, entropy_windows=2, curve_every=10)


class SizeExperiment(CopyExperiment):
    """Copying at three model sizes: ``standard`` against ``log_L n`` trained in (the ``scheme`` column ``label/d<d_model>``)."""

    name = "size"
    description = "copying past L at three model sizes: standard against log_L n trained in"
    figure_names = ("one_key_size",)
    full_config = SizeConfig()
    quick_config = QUICK_SIZE

    def tasks(self, config, *, out=None, progress: bool = False) -> list:
        """One task per (size, seed, trained scale), the RoPE variants only (no test-time scale)."""
        show = progress and not config.quick
        out_dir = None if out is None else str(out)
        tasks = []
        for size in config.sizes:
            for seed in range(config.seeds):
                for scheme, pin in config.scales:
                    c = ok.one_key_model(config.model, scheme, pin, size)
                    tasks.append(ok.OneKeyTask(f"{c.label()}/d{c.d_model}", seed, c, out_dir, tuple(config.ropes), (),
                                               False, (), self.tests_of(config), config.count, config.share_windows,
                                               config.probe_windows, config.entropy_windows, config.curve_every, show))
        return tasks

    def extra_header(self, tasks) -> dict:
        """The sizes: ``d_model:d_ff=parameters``."""
        sizes = sorted({(t.config.d_model, t.config.d_ff, t.config.n_params) for t in tasks})
        return {"sizes": " ".join(f"{d}:{f}={p}" for d, f, p in sizes)}

    def summaries(self, table) -> list:
        """Copy accuracy per size and distance, and the difference ``log_L n`` minus ``standard`` paired by seed."""
        return [copy_markdown(table, "accuracy"), size_markdown(table)]

    def evidence(self, table) -> list:
        """``log_L n`` trained in against ``standard`` at each size, RoPE and distance past ``L``."""
        from ..train.config import TrainConfig

        try:
            base = TrainConfig.from_json(table.header.get("config", "{}"))
        except (TypeError, ValueError):
            return []
        out = []
        for (d_model, rope, m), d in sorted(size_differences(table).items()):
            seeds = tuple(sorted(d))
            v = np.array([d[s] for s in seeds])
            out.append(Evidence(self.name, "byte-level decoder", size_parameters(table, d_model), "parameters", rope,
                                "copy a segment m bytes back", 2 * m / base.train_length, "log_L n trained in", ok.REFERENCE,
                                "accuracy", float(v.mean()), float(tr.std(v)), seeds, d_model // base.heads,
                                base.train_length, "bytes", values=tuple(float(x) for x in v)))
        return out


def size_parameters(table, d_model) -> int:
    """The parameters of the ``standard`` model of width ``d_model`` (the header's ``sizes`` line)."""
    for item in table.header.get("sizes", "").split():
        d, _, rest = item.partition(":")
        if int(d) == d_model:
            return int(rest.partition("=")[2])
    return -1


def size_differences(table) -> dict:
    """``{(d_model, rope, distance): {seed: accuracy of log_L n trained in minus standard}}``, distances past ``L``."""
    s = copy_summary(table)
    L = s["L"]
    widths: dict = {}
    for label, _, _ in s["rows"]:
        scheme, _, d = label.partition("/d")
        widths.setdefault(int(d), set()).add(scheme)
    out = {}
    for d in sorted(widths):
        ref = next((x for x in sorted(widths[d]) if x.startswith(ok.REFERENCE)), None)
        other = next((x for x in sorted(widths[d]) if not x.startswith(ok.REFERENCE)), None)
        if ref is None or other is None:
            continue
        for rope in sorted({k[1] for k in s["rows"] if k[2] == "trained"}):
            a, b = s["rows"].get((f"{other}/d{d}", rope, "trained")), s["rows"].get((f"{ref}/d{d}", rope, "trained"))
            if a is None or b is None:
                continue
            for i, m in enumerate(s["distances"]):
                seeds = sorted(set(a["accuracy_by_seed"][i]) & set(b["accuracy_by_seed"][i]))
                if m > L and seeds:
                    out[d, rope, int(m)] = {sd: a["accuracy_by_seed"][i][sd] - b["accuracy_by_seed"][i][sd] for sd in seeds}
    return out


def size_markdown(table) -> str:
    """``log_L n`` trained in minus ``standard`` in copy accuracy (points) per size: mean ± standard error over seeds, and each seed's."""
    L = copy_summary(table)["L"]
    lines = ["| d_model (parameters) | RoPE | n / L (n = 2m) | log_L n − standard (points, mean ± standard error over "
             "seeds; seeds) | per seed |", "|---|---|---:|---:|---|"]
    for (d_model, rope, m), d in sorted(size_differences(table).items()):
        v = 100 * np.array(list(d.values()))
        lines.append(f"| {d_model} ({size_parameters(table, d_model)}) | {rope} | {2 * m / L:g} | "
                     f"{tr.pm_of(v, digits=1)} ({v.size}) | " + " ".join(f"{x:+.1f}" for x in v) + " |")
    return "\n".join(lines)


EXPERIMENT = SizeExperiment()

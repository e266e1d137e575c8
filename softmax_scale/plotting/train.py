"""The masked-LM training experiments' figures, drawn from their CSVs (``softmax-scale run mlm`` and ``run alpha`` write them).

``make figures`` redraws them from ``figures/train_mlm.csv`` and ``figures/train_alpha.csv`` and
never trains; without a CSV the figure is skipped with one line.  Reading needs numpy only, not JAX.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..experiments.base import RESULTS
from ..schemes import ENTROPY_INVARIANT, SCHEMES, STANDARD, TRAIN_NAMES, train_scheme
from ._style import new_figure


def _color(label):
    """A trained or test-time scale's colour: its scheme's ``train_color`` (``entropy_invariant@512`` is ``entropy_invariant``)."""
    name = label.partition("@")[0]
    if name in TRAIN_NAMES:
        return train_scheme(name)[0].style.train_color
    return SCHEMES[name].style.train_color if name in SCHEMES else "C4"


def _name(label):
    """A trained scale's name as the registry spells it (``alpha_star`` is ``gradient_optimal``), its pin kept."""
    name, at, pin = label.partition("@")
    return (train_scheme(name)[0].key if name in TRAIN_NAMES else name) + at + pin


def committed_table(experiment, table=None, csv=None):
    """``table``, or the experiment's result file ``csv`` (default: the committed one) read back.

    Raises :class:`~softmax_scale.plotting.FigureUnavailable` when the file does not exist.
    """
    if table is not None:
        return table
    path = Path(csv) if csv is not None else experiment.result_path(experiment.config(), RESULTS)
    if not path.exists():
        from . import FigureUnavailable

        raise FigureUnavailable(f"{path} not found: it is written by `softmax-scale run {experiment.name}`; "
                                "`make figures` only redraws it")
    return experiment.read(path)


def _config(table):
    import json

    return json.loads(table.header.get("config", "{}"))


def train_mlm_figure(table=None, csv=None):
    """Experiment 1: held-out masked-byte accuracy against test length, beside the published rows.

    Per trained scale the mean ± its standard error over seeds (each seed a dot), the note's two
    rows in their own panel, and the training curves.
    """
    from ..experiments._training import se
    from ..experiments.mlm import EXPERIMENT, PUBLISHED, mlm_summary

    table = committed_table(EXPERIMENT, table, csv)
    s = mlm_summary(table)
    fig, (ax, ax_p, ax_c) = new_figure(3, 1, width=15.0, height=4.4)
    r = table.rows
    for key, v in s.items():
        if key == "diverged":
            continue
        label, scale = key
        color = _color(label if scale == "trained" else scale)
        style = "-" if scale == "trained" else "--"
        name = _name(label) if scale == "trained" else f"{_name(label)} trained, {scale} at test only"
        ax.errorbar(v["lengths"], 100 * v["accuracy"], yerr=100 * np.nan_to_num(se(v["accuracy_std"], v["accuracy_n"])),
                    fmt=style,
                    marker="o", ms=4, capsize=3, color=color, label=f"{name} ({v['seeds']} seeds)")
        m = (r["kind"] == "test") & (r["scheme"] == label) & (r["scale"] == scale) & (r["status"] == "ok")
        ax.plot(r["x"][m], 100 * r["accuracy"][m], ".", color=color, alpha=0.35, ms=4)
    base = table.header.get("baseline", "")
    pairs = [p.split(":") for p in base.split("accuracy", 1)[-1].split(",") if ":" in p]
    if pairs:
        ax.plot([int(a) for a, _ in pairs], [100 * float(b) for _, b in pairs], ":", color="0.4",
                label="most frequent byte (baseline)")
    c = _config(table)
    for a, L in ((ax, c.get("train_length", "?")), (ax_p, 64)):
        a.set_xscale("log", base=2)
        a.set_xlabel(f"test length n (trained at {L})")
        a.set_ylabel("masked-token accuracy (%)")
    ax.set_title(f"(a) this toolkit: byte-level MLM, {c.get('layers')} layers, d_model {c.get('d_model')},\n"
                 f"{c.get('steps')} steps (mean ± standard error over seeds, each seed a dot)", fontsize=9)
    ax.set_ylim(0, None)
    ax.legend(fontsize=7, loc="lower left")
    for name, scheme in zip(list(PUBLISHED)[1:], (STANDARD, ENTROPY_INVARIANT)):  # Attention-O and -E
        color = SCHEMES[scheme].style.train_color
        ax_p.plot(PUBLISHED["lengths"], PUBLISHED[name], "-s", color=color, ms=4, label=name)
    ax_p.set_title("(b) published numbers from a larger model\n(RoFormer-small on Chinese text, kexue.fm 8823)", fontsize=9)
    ax_p.set_ylim(0, None)
    ax_p.legend(fontsize=7)
    curve = (r["kind"] == "curve") & (r["status"] == "ok")
    late = []  # the curves overlap at the start: the panel shows them from a fifth of the run on
    for label in sorted(set(r["scheme"][curve])):
        m = curve & (r["scheme"] == label)
        steps = np.unique(r["x"][m])
        loss = np.array([r["loss"][m & (r["x"] == x)].mean() for x in steps])
        ax_c.plot(steps, loss, color=_color(label), label=_name(label))
        late.append(loss[steps >= steps.max() / 5])
    if late:
        lo, hi = min(x.min() for x in late), max(x.max() for x in late)
        ax_c.set_xlim(max(1, int(r["x"][curve].max()) // 5), None)
        ax_c.set_ylim(lo - 0.03 * (hi - lo), hi + 0.03 * (hi - lo))
    ax_c.set_xlabel("training step")
    ax_c.set_ylabel("training loss (nats per masked byte, mean over seeds)")
    ax_c.set_title("(c) training curves", fontsize=9)
    ax_c.legend(fontsize=7)
    return fig


def train_alpha_figure(table=None, csv=None):
    """Experiment 2: loss against the constant ``alpha``, and each head's ``sigma`` before and after.

    The training loss after a short budget and at the end and the held-out loss (mean ± standard
    error over seeds, each seed a dot), with ``optimal_alpha(L)`` (mean-field and geometric) marked; each head's ``sigma`` at the end
    against its value at initialisation.
    """
    from ..experiments._training import se, std
    from ..experiments.alpha import EXPERIMENT, alpha_summary
    from ..optimize import optimal_alpha

    table = committed_table(EXPERIMENT, table, csv)
    s = alpha_summary(table)
    L = int(float(table.header.get("lengths", "64").split()[0]))
    fig, (ax, ax_s) = new_figure(2, 1, width=12.0, height=4.6)
    labels = [k for k in s if k not in ("short_budget", "diverged")]
    grid = sorted((k for k in labels if np.isfinite(s[k]["alpha"])), key=lambda k: s[k]["alpha"])
    a = np.array([s[k]["alpha"] for k in grid])
    for what, color, name in (("short", "C0", f"training loss at {s['short_budget']} steps"),
                              ("final", "C3", "final training loss"), ("test_loss", "C2", f"held-out loss at {L}")):
        y = np.array([np.mean(s[k][what]) for k in grid])
        e = np.nan_to_num([se(std(np.asarray(s[k][what])), len(s[k][what])) for k in grid])
        ax.errorbar(a, y, yerr=e, fmt="-o", ms=4, capsize=3, color=color, label=name)
        for k in grid:
            ax.plot(np.full(len(s[k][what]), s[k]["alpha"]), s[k][what], ".", color=color, alpha=0.35)
        if "alpha_star" in s:
            ax.axhline(np.mean(s["alpha_star"][what]), color=color, ls=":", lw=1)
    for objective, ls, extra in (("mean_field", "--", {}), ("geometric", "-.", {"rng": 0})):
        x = float(optimal_alpha(L, objective=objective, **extra))  # geometric: Monte Carlo, seeded for a stable figure
        ax.axvline(x, color="k", ls=ls, lw=1, label=f"optimal_alpha({L}, {objective}) = {x:.2f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("constant factor alpha on unit-variance scores")
    ax.set_ylabel("loss (nats per masked byte)")
    ax.set_title("(a) loss against alpha, mean ± standard error over seeds (dotted: alpha_star per query)", fontsize=9)
    ax.legend(fontsize=7)
    values = []
    for i, k in enumerate(grid + (["alpha_star"] if "alpha_star" in s else [])):
        v = s[k]
        ax_s.scatter(v["sigma_init"].ravel(), v["sigma_end"].ravel(), s=10, color=f"C{i}", alpha=0.7, label=k)
        values += [v["sigma_init"].ravel(), v["sigma_end"].ravel()]
    both = np.concatenate(values) if values else np.array([1.0])
    both = both[np.isfinite(both) & (both > 0)]
    lim = [both.min() / 1.5, both.max() * 1.5] if both.size else [0.1, 10.0]
    ax_s.plot(lim, lim, "k-", lw=0.6)
    ax_s.set_xscale("log")
    ax_s.set_yscale("log")
    ax_s.set_xlabel("head sigma at initialisation (std of a query's logits)")
    ax_s.set_ylabel("head sigma at the end of training")
    ax_s.set_title("(b) each head's scale, before and after training", fontsize=9)
    ax_s.legend(fontsize=7)
    return fig


#: The figure runner redraws both from the committed CSVs (quick or not: it trains nothing).
FIGURES = [("train_mlm", train_mlm_figure, {}, {}), ("train_alpha", train_alpha_figure, {}, {})]


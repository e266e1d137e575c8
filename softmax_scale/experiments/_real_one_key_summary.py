"""The markdown tables of the real-decoder one-key experiments (:mod:`.real_passkey`, :mod:`.real_copy`)."""

from __future__ import annotations

import numpy as np

from . import _training as tr

__all__ = ["score_markdown", "share_markdown"]


def _cells(r, m) -> list:
    """The distinct ``(task, length, RoPE, scale)`` of the rows ``m``: by task as they come, then by length, then as they come."""
    cells = list(dict.fromkeys(zip(r["task"][m], r["length"][m], r["rope"][m], r["scale"][m])))
    tasks = list(dict.fromkeys(c[0] for c in cells))
    return sorted(cells, key=lambda c: (tasks.index(c[0]), int(c[1])))


def score_markdown(table, caption: str) -> str:
    """Accuracy (mean over sequences) and loss (mean ± standard error over sequences) of each cell, under ``caption``.

    A cell is one (task, length, RoPE, scale).
    """
    r = table.rows
    sc = r["kind"] == "score"
    lines = [caption + ".", "", "| task | length | RoPE | scale | sequences | accuracy | loss (± standard error) |",
             "|---|---:|---|---|---:|---:|---:|"]
    for task, n, rope, scale in _cells(r, sc):
        m = sc & (r["task"] == task) & (r["length"] == n) & (r["rope"] == rope) & (r["scale"] == scale)
        acc, loss = r["accuracy"][m], r["loss"][m]
        lines.append(f"| {task} | {n} | {rope} | {scale} | {m.sum()} | {np.mean(acc):.3f} | {tr.pm_of(loss, digits=3)} |")
    return "\n".join(lines)


def share_markdown(table) -> str:
    """The retrieving heads' share on the source keys per (length, RoPE, scale): measured / predicted from ``L``, means over sequences."""
    r = table.rows
    sh = r["kind"] == "share"
    heads = list(dict.fromkeys(zip(r["layer"][sh], r["head"][sh])))
    lines = ["The retrieving heads' share of attention on the source keys, measured / predicted from the reference "
             "at L (means over the sequences).", "",
             "| task | length | RoPE | scale | " + " | ".join(f"L{la}H{he}" for la, he in heads) + " |",
             "|---|---:|---|---|" + "---:|" * len(heads)]
    for task, n, rope, scale in _cells(r, sh):
        m = sh & (r["task"] == task) & (r["length"] == n) & (r["rope"] == rope) & (r["scale"] == scale)
        if not np.isfinite(r["share"][m]).any():
            continue  # no source key (the control)
        cells = []
        for la, he in heads:
            mh = m & (r["layer"] == la) & (r["head"] == he)
            pred = r["share_predicted"][mh]
            p = f"{np.nanmean(pred):.3f}" if np.isfinite(pred).any() else "nan"
            v = r["share"][mh]
            cells.append(f"{np.nanmean(v):.3f} / {p}" if np.isfinite(v).any() else f"nan / {p}")
        lines.append(f"| {task} | {n} | {rope} | {scale} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

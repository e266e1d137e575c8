"""The markdown tables of the real-decoder one-key experiments (:mod:`.real_passkey`, :mod:`.real_copy`)."""

from __future__ import annotations

import numpy as np

__all__ = ["score_markdown", "share_markdown"]


def _sd(x) -> float:
    return float(np.std(x, ddof=1)) if len(x) > 1 else float("nan")


def _cells(r, m) -> list:
    """The distinct ``(task, length, RoPE, scale)`` of the rows ``m``: by task as they come, then by length, then as they come."""
    cells = list(dict.fromkeys(zip(r["task"][m], r["length"][m], r["rope"][m], r["scale"][m])))
    tasks = list(dict.fromkeys(c[0] for c in cells))
    return sorted(cells, key=lambda c: (tasks.index(c[0]), int(c[1])))


def score_markdown(table, caption: str) -> str:
    """Accuracy (mean over sequences) and loss (mean ± sd) of each (task, length, RoPE, scale), under ``caption``."""
    r = table.rows
    sc = r["kind"] == "score"
    lines = [caption + ".", "", "| task | length | RoPE | scale | sequences | accuracy | loss |", "|---|---:|---|---|---:|---:|---:|"]
    for task, n, rope, scale in _cells(r, sc):
        m = sc & (r["task"] == task) & (r["length"] == n) & (r["rope"] == rope) & (r["scale"] == scale)
        acc, loss = r["accuracy"][m], r["loss"][m]
        sd = _sd(loss)
        spread = "" if not np.isfinite(sd) else f" ± {sd:.3f}"
        lines.append(f"| {task} | {n} | {rope} | {scale} | {m.sum()} | {np.mean(acc):.3f} | {np.mean(loss):.3f}{spread} |")
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

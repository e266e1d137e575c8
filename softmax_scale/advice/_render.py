"""The advice as text (what ``softmax-scale advise`` prints) and as Markdown (the guide's copy), from one outline.

:func:`outline` lays the advice out as blocks (headings, paragraphs, lists, tables); :func:`text`
wraps them at :data:`WIDTH` columns with aligned tables, :func:`markdown` writes them as Markdown.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from ..experiments import RESULTS
from ..schemes.rope import ROPE_CHANGES
from ._evidence import TASKS, times

__all__ = ["DOCS_CALL", "WIDTH", "docs_block", "headline", "markdown", "outline", "text", "write_docs"]

#: Columns of the text output.
WIDTH = 100

def _num(x: float, spread: float | None = None) -> str:
    if not math.isfinite(x):
        return "-"
    nb = "\u00a0"  # a number and its spread stay on one line
    if spread is None:
        return f"{x:+.4f}"
    return f"{x:+.4f}{nb}±{nb}{spread:.4f}" if math.isfinite(spread) else f"{x:+.4f} (one seed)"


def _se(c, metric) -> str:
    diff, spread = (c.loss, c.loss_spread) if metric == "loss" else (c.accuracy, c.accuracy_spread)
    return _num(diff, spread / math.sqrt(len(c.seeds)) if math.isfinite(spread) else spread)


def _drift(x: float) -> str:
    """A drift in nats to 3 decimals, signed; one that rounds to zero is ``0.000``."""
    t = f"{x:+.3f}"
    return "0.000" if float(t) == 0 else t


def _factor(x: float) -> str:
    return "?" if not math.isfinite(x) else f"{x:.4g}"


def _line(r, a) -> str:
    """One recommendation as a sentence: the factor, its formula, the effect, the reach."""
    if a.n == a.train_length:
        return f"multiply the logits by 1 at n = L = {a.n} ({r.formula}): {r.reason.removeprefix('n = L: ')}"
    reach = f"; the evidence reaches n/L = {r.reaches:.3g}" if math.isfinite(r.reaches) else ""
    what = f"`{r.scheme}`: {r.formula}"
    if r.scheme == "standard":
        where = f" on {r.task} in {r.models}" if r.models else ""
        return f"multiply the logits by 1 at n = {a.n} ({what}): no scale passes the rule{where}{reach}"
    return (f"multiply the logits by {_factor(r.factor)} at n = {a.n} ({what}), expected effect "
            f"{_num(r.effect, r.effect_se)} {r.unit} on {r.task} in {r.models}{reach}")


def headline(a) -> str:
    """The first line: the recommendation for a model trained with ``1/sqrt(d)`` (one per RoPE variant if none asked)."""
    recs = [r for r in a.recommendations if r.at_test]
    if not recs:
        return "multiply the logits by 1 (`standard`, 1/sqrt(d)): no measured comparison speaks to this situation"
    if a.rope is not None:
        return _line(recs[0], a)
    return "\n".join(f"RoPE {r.rope}: {_line(r, a)}" for r in recs)


def _results_label(a) -> str:
    return "the committed figures/" if Path(a.results) == RESULTS.resolve() else a.results


def outline(a, markdown: bool) -> list:
    """The advice as blocks: ``("h", text)``, ``("p", text)``, ``("ul", items)``, ``("table", header, rows)``."""
    rope = f"RoPE {a.rope} ({ROPE_CHANGES[a.rope]})" if a.rope is not None else "every RoPE variant measured"
    out: list = [("p", headline(a)),
                 ("p", f"d = {a.d}, L = {a.train_length}, n = {a.n} ({times(a.multiple)}), {TASKS[a.task]}, {rope}.")]
    out += [("h", "Scope"), ("ul", list(a.scope)), ("h", "Recommendation")]
    items = []
    for r in a.recommendations:
        who = "a model trained with 1/sqrt(d), run at n" if r.at_test else "training a new model"
        items.append(f"RoPE {r.rope}, {who}: {_line(r, a)}. {r.reason[0].upper()}{r.reason[1:]}.")
    out += [("ul", items or ["`standard`, 1/sqrt(d): no measured comparison speaks to this situation."]),
            ("p", f"The rule: {a.rule}"),
            ("h", f"The published scales at n = {a.n}, pinned at L = {a.train_length}"),
            ("p", f"The factor multiplies 1/sqrt(d); the scale multiplies q·k. The i.i.d. theory "
                  f"(ss.extrapolation_table: {a.score_model} scores, d = {a.d}, one matching key of cosine {a.match:g} "
                  f"in the signal columns): the entropy drift from L to n in nats, and that key's share of the "
                  f"attention." + ("" if markdown else " Sources: softmax-scale scale --list."))]
    header = ["scheme", "factor", "scale", "pinned by", "drift iid", "drift 1 key", "share at L", "at n"]
    rows = [[s.scheme, f"{s.factor:.4f}", f"{s.scale:.5f}", s.pin_rule or "-", _drift(s.drift_isotropic),
             _drift(s.drift_signal), f"{s.share_at_l:.3f}", f"{s.share:.3f}"] + ([s.source] if markdown else [])
            for s in a.schemes]
    out.append(("table", header + (["source"] if markdown else []), rows))
    out.append(("h", "Measured: each scale against standard in the same model, under the same RoPE"))
    if not a.comparisons:
        out.append(("p", "No measured comparison speaks to this situation."))
    else:
        out.append(("p", "Differences are the scale's minus standard's, paired by seed (or document): mean ± standard "
                         "error (loss in nats per position, lower is better; accuracy a fraction, higher is better); "
                         "t is the paired t of the metric the rule reads (marked *), against the critical value. "
                         "\"at test\": applied at test time only to a model trained with standard."))
    for rope_ in sorted({c.rope for c in a.comparisons}):
        out.append(("h", f"RoPE {rope_}"))
        mine = [c for c in a.comparisons if c.rope == rope_]
        for sit in sorted({c.situation for c in mine}, key=lambda s: (s[0], s[2], s[4])):
            cs = [c for c in mine if c.situation == sit]
            c0 = cs[0]
            out.append(("p", f"{c0.experiment}: {c0.model} ({c0.size:,} {c0.size_unit}), {c0.task}, at "
                             f"{times(c0.multiple)}, {len(c0.seeds)} {c0.replicates}:"))
            out.append(("table", ["scale", "loss", "accuracy", "t", "needs", "verdict"],
                        [[c.scale, _se(c, "loss") + ("*" if c.metric == "loss" else ""),
                          _se(c, "accuracy") + ("*" if c.metric == "accuracy" else ""),
                          "-" if not math.isfinite(c.t) else f"{c.t:.2f}", f"{c.critical:.2f}", c.verdict]
                         for c in cs]))
        base = [c for c in a.baselines if c.rope == rope_]
        if base:
            out.append(("ul", [f"standard against \u201c{c.reference}\u201d ({c.experiment}, {c.model}, at "
                               f"{times(c.multiple)}): loss {_se(c, 'loss')}"
                               + (f", accuracy {_se(c, 'accuracy')}" if math.isfinite(c.accuracy) else "")
                               + f", {len(c.seeds)} {c.replicates}." for c in base]))
    return out


def _text_table(header: list, rows: list) -> list:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda cells: "  ".join(str(x).ljust(w) for x, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def text(a) -> str:
    """The advice as plain text: paragraphs and lists wrapped at :data:`WIDTH`, tables aligned."""
    lines: list = []
    for block in outline(a, markdown=False):
        kind = block[0]
        if kind == "h":
            lines += ["", block[1], "=" * min(len(block[1]), WIDTH)]
        elif kind == "p":
            lines += [""] + [w for part in block[1].split("\n") for w in textwrap.wrap(part, WIDTH)]
        elif kind == "ul":
            lines.append("")
            for item in block[1]:
                lines += textwrap.wrap(item, WIDTH, initial_indent="- ", subsequent_indent="  ")
        else:
            lines += [""] + _text_table(block[1], block[2])
    return "\n".join(lines).strip("\n").replace("\u00a0", " ")


def markdown(a) -> str:
    """The advice as Markdown (the guide's copy)."""
    lines: list = []
    for block in outline(a, markdown=True):
        kind = block[0]
        if kind == "h":
            lines += ["", f"### {block[1]}"]
        elif kind == "p":
            lines += ["", block[1].replace("\n", "  \n")]
        elif kind == "ul":
            lines += [""] + [f"- {item}" for item in block[1]]
        else:
            lines += ["", "| " + " | ".join(block[1]) + " |", "|" + "---|" * len(block[1])]
            lines += ["| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |" for row in block[2]]
    return "\n".join(lines).strip("\n")


# ---------------------------------------------------------------------------------------------
# the guide's copy

#: The situation the guide shows (the question of the README: d = 128, trained at 4096, run at 32768).
DOCS_CALL = {"d": 128, "train_length": 4096, "n": 32768}
_DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "choosing_a_scale.md"
_START, _END = "<!-- advise:start -->\n", "\n<!-- advise:end -->"


def docs_block() -> str:
    """The guide's block between its ``advise`` markers: the command and what it prints now."""
    from . import advise

    cmd = "softmax-scale advise " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in DOCS_CALL.items())
    return f"```bash\n{cmd}\n```\n\n{advise(**DOCS_CALL).markdown()}"


def _page_block(page_text: str) -> str:
    """The block between the ``advise`` markers of the guide's text."""
    return page_text[page_text.index(_START) + len(_START):page_text.index(_END)]


def write_docs(page=_DOCS_PAGE) -> Path:
    """Write :func:`docs_block` between the markers of the guide; the page written."""
    page = Path(page)
    old = page.read_text(encoding="utf-8")
    page.write_text(old.replace(_START + _page_block(old) + _END, _START + docs_block() + _END), encoding="utf-8")
    return page

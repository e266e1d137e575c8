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

__all__ = ["DOCS_CALL", "WIDTH", "docs_block", "headline", "markdown", "outline", "page_block", "short_answers",
           "text", "write_docs"]

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
        if not r.models:
            return f"multiply the logits by 1 at n = {a.n} ({what}): no measured comparison speaks to this situation"
        return f"multiply the logits by 1 at n = {a.n} ({what}): no scale passes the rule on {r.task} in {r.models}{reach}"
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
    if a.rope is None:
        out += [("p", "The RoPE variants change the rotation frequencies only; the scale is chosen apart:"),
                ("ul", [f"{k}: {v}." for k, v in ROPE_CHANGES.items()])]
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
            out.append(("ul", [f"standard against \u201c{c.reference}\u201d ({c.experiment}, {c.model} "
                               f"({c.size:,} {c.size_unit}), at "
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
# the short answers and the guide's copy

#: The situation the guide and the README show (the README's question: d = 128, trained at 4096, run at 32768).
DOCS_CALL = {"d": 128, "train_length": 4096, "n": 32768}
_ROOT = Path(__file__).resolve().parents[2]
_DOCS_PAGE = _ROOT / "docs" / "choosing_a_scale.md"
_README = _ROOT / "README.md"


def _ropes(rs) -> str:
    names = [r.rope for r in rs]
    return "RoPE " + (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1])


def _way(recs, a) -> str:
    """One sentence per recommended scale over the RoPE variants, those keeping ``1/sqrt(d)`` last."""
    groups: dict = {}
    for r in recs:
        groups.setdefault(r.scale, []).append(r)
    parts = []
    for scale, rs in sorted(groups.items(), key=lambda kv: kv[0] == "standard"):
        if scale == "standard":
            parts.append(f"under {_ropes(rs)} keep 1/sqrt(d): no scale passes the rule")
        else:
            parts.append(f"under {_ropes(rs)} {_line(rs[0], a)}")
    return "; ".join(parts) + "."


def _window(a) -> str:
    """How far ``standard`` still is from a sliding window of ``L``: a range over RoPE variants, per model and unit."""
    by: dict = {}
    for c in a.baselines:
        if c.reference == "sliding window of L" and math.isfinite(c.loss):
            by.setdefault((c.model, c.size, c.length_unit, c.multiple), []).append(c)
    parts = []
    for (model, size, unit, m), cs in sorted(by.items(), key=lambda kv: kv[0][1]):
        lo, hi = min(cs, key=lambda c: c.loss), max(cs, key=lambda c: c.loss)
        span = f"{lo.loss:+.3f} ({lo.rope})" + (f" to {hi.loss:+.3f} ({hi.rope})" if hi is not lo else "")
        parts.append(f"{span} nats per {unit.removesuffix('s')} in {model} ({size:,} parameters) at {times(m)}")
    return ("The positions weigh more than the scale: the loss with 1/sqrt(d) minus a sliding window of L's is "
            + "; ".join(parts) + ".") if parts else ""


def _brief(recs) -> str:
    """The README's one sentence per task: each scale recommended at test time, its effect, how far it was measured."""
    groups: dict = {}
    for r in recs:
        groups.setdefault(r.scale, []).append(r)
    parts = []
    for scale, rs in sorted(groups.items(), key=lambda kv: kv[0] == "standard"):
        r = rs[0]
        if scale == "standard":
            parts.append(f"under {_ropes(rs)} keep 1/sqrt(d)")
        else:
            parts.append(f"under {_ropes(rs)} multiply the logits by {_factor(r.factor)} (`{r.scheme}`), "
                         f"{_num(r.effect, r.effect_se)} {r.unit} in {r.models.split(' (')[0]}, measured to "
                         f"n/L = {r.reaches:.3g}")
    return "; ".join(parts)


def short_answers(brief: bool = False) -> str:
    """The short answers by task, each sentence generated from :func:`advise` at :data:`DOCS_CALL` and at ``n = L``.

    ``brief``: one sentence per task for a model trained with ``1/sqrt(d)`` (the README's copy).
    """
    from . import advise

    d, L, n = DOCS_CALL["d"], DOCS_CALL["train_length"], DOCS_CALL["n"]
    cmd = "softmax-scale advise " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in DOCS_CALL.items())
    out = [f"For head dimension {d}, trained at L = {L} and run at n = {n} ({times(n / L)}), as `{cmd} --task TASK` "
           f"prints it for each RoPE variant measured (`--rope` picks one):"]
    if brief:
        out[0] = out[0].replace("):", "), for a model trained with 1/sqrt(d):") + "\n"
    for task, name in TASKS.items():
        a = advise(**DOCS_CALL, task=task)
        at_test = [r for r in a.recommendations if r.at_test]
        b = advise(d, L, L, task=task)
        if brief:
            same = all(r.scale == "standard" for r in b.recommendations)
            out.append(f"- **{name[0].upper()}{name[1:]}**: {_brief(at_test)}."
                       + (" At n = L nothing changes." if same else ""))
            continue
        items = [f"At n = L: {_line(next(r for r in b.recommendations if r.at_test), b)}.",
                 f"Past L, a model trained with 1/sqrt(d): {_way(at_test, a)}",
                 f"Training a new model: {_way([r for r in a.recommendations if not r.at_test], a)}"]
        window = _window(a)
        items += [window] if window else []
        out += ["", f"**{name[0].upper()}{name[1:]}** (`--task {task}`)", ""] + [f"- {i}" for i in items]
    return "\n".join(out).replace("\u00a0", " ")


def docs_block() -> str:
    """The guide's block between its ``advise`` markers: the command and what it prints now."""
    from . import advise

    cmd = "softmax-scale advise " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in DOCS_CALL.items())
    return f"```bash\n{cmd}\n```\n\n{advise(**DOCS_CALL).markdown()}"


def _markers(name: str) -> tuple:
    return f"<!-- {name}:start -->\n", f"\n<!-- {name}:end -->"


def page_block(page_text: str, name: str) -> str:
    """The block between the ``name`` markers of a page's text."""
    start, end = _markers(name)
    return page_text[page_text.index(start) + len(start):page_text.index(end)]


def _write(page: Path, blocks: dict) -> None:
    text_ = page.read_text(encoding="utf-8")
    for name, block in blocks.items():
        start, end = _markers(name)
        text_ = text_.replace(start + page_block(text_, name) + end, start + block + end)
    page.write_text(text_, encoding="utf-8")


def write_docs(page=_DOCS_PAGE, readme=_README) -> Path:
    """Write the generated blocks: the guide's short answers and evidence block, the README's short answers."""
    page = Path(page)
    _write(page, {"short-answer": short_answers(), "advise": docs_block()})
    _write(Path(readme), {"short-answer": short_answers(brief=True)})
    return page

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

__all__ = ["DOCS_CALL", "WIDTH", "docs_block", "headline", "markdown", "outline", "page_block", "short",
           "short_answers", "text", "write_docs"]

#: Columns of the text output.
WIDTH = 100

def _num(x: float, spread: float | None = None) -> str:
    if not math.isfinite(x):
        return "-"
    nb = "\u00a0"  # a number and its spread stay on one line
    if spread is None:
        return f"{x:+.4f}"
    return f"{x:+.4f}{nb}±{nb}{spread:.4f}" if math.isfinite(spread) else f"{x:+.4f} (one seed)"


def _se(c) -> str:
    return _num(c.effect, c.effect_se)


def _drift(x: float) -> str:
    """A drift in nats to 3 decimals, signed; one that rounds to zero is ``0.000``."""
    t = f"{x:+.3f}"
    return "0.000" if float(t) == 0 else t


def _factor(x: float) -> str:
    return "?" if not math.isfinite(x) else f"{x:.5g}"


def _theory(r, a) -> str:
    """The i.i.d. theory at ``n`` under the kept factor, labelled as theory."""
    s = next((s for s in a.schemes if s.scheme == "standard"), None)
    if s is None or a.n <= a.train_length:
        return ""
    return (f"; theory at n (i.i.d. cosine scores, not measured): with 1/sqrt(d) the entropy drifts {_drift(s.drift_isotropic)} "
            f"nats from L to n and one matching key's share falls from {s.share_at_l:.3f} to {s.share:.3f}")


def _line(r, a) -> str:
    """One recommendation as a sentence: the whole multiplier, the change, the effect or why the baseline is kept."""
    if r.scale == "standard":
        measured = f" (measured: {r.models})" if r.models and math.isfinite(r.reaches) and a.n > a.train_length else ""
        theory = _theory(r, a) if "not measured past" in r.reason or not r.models else ""
        return f"{r.change} ({r.formula}{_on_qk(r.factor, a.d)}): {r.reason}{measured}{theory}"
    tier = f"; equivalent within the uncertainty (the top tier): {', '.join(r.equivalent)}" if r.equivalent else ""
    return (f"{r.change} at n = {a.n:,} (`{r.scheme}`: {r.formula}{_on_qk(r.factor, a.d)}), expected effect "
            f"{_num(r.effect, r.effect_se)} {r.unit} (± standard error) on {r.task} in {r.models}; the evidence "
            f"reaches n/L = {r.reaches:.3g}{tier}{_minimiser(a) if r.at_test else ''}")


def _on_qk(factor: float, d: int) -> str:
    """``; 1/sqrt(64) = 0.125 on q.k``: the scale itself, the factor over ``1/sqrt(d)`` divided by ``sqrt(d)``."""
    if not math.isfinite(factor):
        return ""
    top = "1" if factor == 1 else f"{factor:.5g}"
    return f"; {top}/sqrt({d}) = {factor / math.sqrt(d):.4g} on q·k"


def _minimiser(a) -> str:
    """Your measurement's fitted minimiser at the length that decides, with its interval (empty without one)."""
    if not a.minimiser:
        return ""
    length, x, lo, hi, docs, edge = a.minimiser
    if not math.isfinite(x):
        return ""
    interval = f" [{lo:.4g}, {hi:.4g}] (95% bootstrap interval over {docs} documents)" if math.isfinite(lo) else \
        " (one document: no interval)"
    at_edge = ", at the grid's edge: the minimum may lie beyond it" if edge else ""
    return (f"; your measurement's loss against a constant multiplier past L is lowest at x{x:.4g}{interval} "
            f"at n = {length:,}{at_edge}")


def headline(a) -> str:
    """The first line: the whole multiplier to run with at ``n`` (one per RoPE variant if none asked), and the engines.

    With a config, :attr:`~softmax_scale.advice.Advice.coverage` comes before it where it is not empty.
    """
    recs = [r for r in a.recommendations if r.at_test]
    assumed = " Assumed: a model trained without a temperature (1/sqrt(d)); pass --config for a model's own recipe." \
        if a.baseline.assumed else ""
    engines = f" Engines: {a.engines}." if a.engines else ""
    if a.evidence_note:
        assumed = f" {a.evidence_note.partition(', so ')[0]}: it does not decide this question (see Scope).{assumed}"
    first = f"{a.coverage}\n" if a.coverage else ""
    if not recs:
        return first + "keep x1 (1/sqrt(d)): no measured comparison speaks to this situation." + assumed
    if a.rope is not None or len(recs) == 1:
        return first + _line(recs[0], a) + "." + engines + assumed
    return first + "\n".join(f"RoPE {r.rope}: {_line(r, a)}." for r in recs) + engines + assumed


def _results_label(a) -> str:
    return "the committed figures/" if Path(a.results) == RESULTS.resolve() else a.results


#: How the short answer's Scope keeps the config's own lines (:func:`~._config.config_lines`) and drops the evidence's.
_CONFIG_SCOPE = ("Your config (", "It asks for a temperature rule", "At n = ", "Config: ")


def short(a) -> bool:
    """Whether the answer is printed short by default: ``n`` inside the length the model covers (``n <= L``).

    There the answer is the baseline whatever the evidence says, so the evidence tables, the rule and
    the published scales are left to ``--full`` (and ``--json``).
    """
    return a.n <= a.train_length


def outline(a, markdown: bool, full: bool = True) -> list:
    """The advice as blocks: ``("h", text)``, ``("p", text)``, ``("ul", items)``, ``("table", header, rows)``.

    ``full=False`` where :func:`short` holds: the headline, the situation, the config's scope lines and the
    recommendations, with a pointer to ``--full``.
    """
    rope = f"RoPE {a.rope} ({ROPE_CHANGES[a.rope]})" if a.rope in ROPE_CHANGES else \
        f"RoPE {a.rope} (the config's frequencies, which no experiment measured)" if a.rope is not None else \
        "every RoPE variant measured"
    out: list = [("p", headline(a)),
                 ("p", f"d = {a.d}, L = {a.train_length:,}, n = {a.n:,} ({times(a.multiple)}), {TASKS[a.task]}, {rope}. "
                       f"Baseline: {a.baseline.label}.")]
    brief = not full and short(a)
    if a.rope is None and not brief:
        out += [("p", "The RoPE variants change the rotation frequencies only; the scale is chosen apart:"),
                ("ul", [f"{k}: {v}." for k, v in ROPE_CHANGES.items()])]
    scope = [s for s in a.scope if s.startswith(_CONFIG_SCOPE)] if brief else list(a.scope)
    out += [("h", "Scope"), ("ul", scope)] if scope else []
    out.append(("h", "Recommendation" + (" for training a new model (the model as it is: the first lines)" if brief
                                         else "")))
    items = []
    for r in (r for r in a.recommendations if not (brief and r.at_test)):
        who = "the model as it is, run at n" if r.at_test else "training a new model"
        text_ = f"RoPE {r.rope}, {who}: {_line(r, a)}."
        if r.scale != "standard":
            text_ += f" {r.reason[0].upper()}{r.reason[1:]}."
        items.append(text_)
        items += [f"Side by side: {s}." for s in r.side_by_side]
    items += [] if brief else [f"The recipe's own rule, measured applied at test to a model trained without it "
                               f"(context: it does not overrule the recipe): {s}." for s in a.recipe_evidence]
    out.append(("ul", items or ["keep x1 (1/sqrt(d)): no measured comparison speaks to this situation."]))
    if brief:
        return out + [("p", f"n is inside L = {a.train_length:,}: the answer is the baseline whatever the evidence "
                            "says. The rule, the evidence read, the published scales and the measured comparisons: "
                            "add --full (or --json).")]
    out += [("p", f"The rule: {a.rule}"),
            ("h", f"The published scales at n = {a.n:,}, pinned at L = {a.train_length:,} (theory)"),
            ("p", f"The factor multiplies 1/sqrt(d); the scale multiplies q·k. The i.i.d. theory "
                  f"(ss.extrapolation_table: {a.score_model} scores, d = {a.d}, one matching key of cosine {a.match:g} "
                  f"in the signal columns), not a measurement: the entropy drift from L to n in nats, and that key's "
                  f"share of the attention." + ("" if markdown else " Sources: softmax-scale scale --list."))]
    header = ["scheme", "factor", "scale", "pinned by", "drift iid", "drift 1 key", "share at L", "at n"]
    rows = [[s.scheme, f"{s.factor:.4f}", f"{s.scale:.5f}", s.pin_rule or "-", _drift(s.drift_isotropic),
             _drift(s.drift_signal), f"{s.share_at_l:.3f}", f"{s.share:.3f}"] + ([s.source] if markdown else [])
            for s in a.schemes]
    out.append(("table", header + (["source"] if markdown else []), rows))
    out.append(("h", "Measured: each scale against standard in the same model, under the same RoPE"))
    if not a.comparisons:
        out.append(("p", "No measured comparison speaks to this situation."))
    else:
        out.append(("p", "Differences are the scale's minus standard's, paired by seed (or document, or prompt) and "
                         "pooled replicate by replicate over the multiples shown: mean ± standard error (loss in nats "
                         "per position, lower is better; accuracy and keys retrieved a fraction, higher is better). p is "
                         "two-sided (paired t, or the exact sign test on keys retrieved); Holm's adjustment runs over "
                         "every row below. \"at test\": applied at test time only to a model "
                         "trained with standard; \"reaches\": measured at n/L or beyond."))
    for rope_ in sorted({c.rope for c in a.comparisons}):
        out.append(("h", f"RoPE {rope_}"))
        mine = [c for c in a.comparisons if c.rope == rope_]
        for sit in sorted({c.situation for c in mine}, key=lambda s: (s[0], s[2])):
            cs = [c for c in mine if c.situation == sit]
            c0 = cs[0]
            span = ", ".join(times(m) for m in c0.multiples)
            size = f"{c0.size:,} {c0.size_unit}; " if c0.size else ""
            out.append(("p", f"{c0.experiment}: {c0.model} ({size}{c0.closeness}"
                             f"{'' if c0.reaches else ', short of n/L'}), {c0.task}, {c0.metric}, pooled over {span}, "
                             f"{len(c0.seeds)} {c0.replicates}:"))
            out.append(("table", ["scale", c0.metric, "test", "p", "Holm", "verdict"],
                        [[c.scale, _se(c), c.test, "-" if not math.isfinite(c.p) else f"{c.p:.3g}",
                          "-" if not math.isfinite(c.p_adjusted) else f"{c.p_adjusted:.3g}", c.verdict]
                         for c in cs]))
        base = [c for c in a.baselines if c.rope == rope_]
        if base:
            out.append(("ul", [f"standard against \u201c{c.reference}\u201d ({c.experiment}, {c.model} "
                               f"({c.size:,} {c.size_unit}), to {times(c.multiple)}): {c.metric} {_se(c)}, "
                               f"{len(c.seeds)} {c.replicates}." for c in base]))
    return out


def _text_table(header: list, rows: list) -> list:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda cells: "  ".join(str(x).ljust(w) for x, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def _wrap(part: str, **indents) -> list:
    """``part`` in lines of :data:`WIDTH`, broken at spaces only: a command or a path stays whole, to be pasted."""
    return textwrap.wrap(part, WIDTH, break_on_hyphens=False, break_long_words=False, **indents)


def text(a, full: bool = False) -> str:
    """The advice as plain text: paragraphs and lists wrapped at :data:`WIDTH`, tables aligned.

    Short where :func:`short` holds, unless ``full``.
    """
    lines: list = []
    for block in outline(a, markdown=False, full=full):
        kind = block[0]
        if kind == "h":
            lines += ["", block[1], "=" * min(len(block[1]), WIDTH)]
        elif kind == "p":
            lines += [""] + [w for part in block[1].split("\n") for w in _wrap(part)]
        elif kind == "ul":
            lines.append("")
            for item in block[1]:
                lines += _wrap(item, initial_indent="- ", subsequent_indent="  ")
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
    """One sentence per recommended scale over the RoPE variants, those keeping the baseline last."""
    groups: dict = {}
    for r in recs:
        groups.setdefault(r.scale, []).append(r)
    parts = []
    for scale, rs in sorted(groups.items(), key=lambda kv: kv[0] == "standard"):
        if scale == "standard":
            parts.append(f"under {_ropes(rs)} keep 1/sqrt(d): no change passes the rule{_evidence_scope(rs)}")
        else:
            parts.append(f"under {_ropes(rs)} {_line(rs[0], a)}")
    return "; ".join(parts) + "."


def _evidence_scope(recs) -> str:
    """`` (evidence ...: model to kL, ...)`` of kept recommendations: how far each model they rest on reaches."""
    reach: dict = {}
    for r in recs:
        for model, x in r.reach_by_model:
            name = model.split(" (")[0]
            reach[name] = max(reach.get(name, 0.0), x)
    models = [f"{m} to {x:.3g}L" for m, x in sorted(reach.items())]
    return f" (evidence: {', '.join(models)})" if models else ""


def _window(a) -> str:
    """How far ``standard`` still is from a sliding window of ``L``: a range over RoPE variants, per model and unit."""
    by: dict = {}
    for c in a.baselines:
        if c.reference == "sliding window of L" and c.metric == "loss" and math.isfinite(c.effect):
            by.setdefault((c.model, c.size, c.length_unit, c.multiple), []).append(c)
    parts = []
    for (model, size, unit, m), cs in sorted(by.items(), key=lambda kv: kv[0][1]):
        lo, hi = min(cs, key=lambda c: c.effect), max(cs, key=lambda c: c.effect)
        span = f"{lo.effect:+.3f} ({lo.rope})" + (f" to {hi.effect:+.3f} ({hi.rope})" if hi is not lo else "")
        parts.append(f"{span} nats per {unit.removesuffix('s')} in {model} ({size:,} parameters) to {times(m)}")
    return ("The positions weigh more than the scale: the loss with 1/sqrt(d) minus a sliding window of L's is "
            + "; ".join(parts) + ".") if parts else ""


def _brief(recs, a) -> str:
    """The README's one sentence per task: the change or the kept baseline, with its scope."""
    changes = [r for r in recs if r.scale != "standard"]
    keep = [r for r in recs if r.scale == "standard"]
    parts = []
    for r in changes:
        parts.append(f"under {_ropes([r])} {r.change} (`{r.scheme}`), {_num(r.effect, r.effect_se)} {r.unit} (± standard "
                     f"error) in {r.models.split(' (')[0]}, measured to n/L = {r.reaches:.3g}")
    if keep:
        parts.append(f"under {_ropes(keep)} keep 1/sqrt(d): no change passes the rule{_evidence_scope(keep)}")
    return "; ".join(parts)


def short_answers(brief: bool = False) -> str:
    """The short answers by task, each sentence generated from :func:`advise` at :data:`DOCS_CALL` and at ``n = L``.

    ``brief``: one sentence per task for a model trained without a temperature (the README's copy).
    """
    from . import advise

    d, L, n = DOCS_CALL["d"], DOCS_CALL["train_length"], DOCS_CALL["n"]
    cmd = "softmax-scale advise " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in DOCS_CALL.items())
    out = [f"For head dimension {d}, trained at L = {L} and run at n = {n} ({times(n / L)}), as `{cmd} --task TASK` "
           f"prints it for each RoPE variant measured (`--rope` picks one):"]
    if brief:
        out[0] = out[0].replace("):", "), for a model trained without a temperature:") + "\n"
    for task, name in TASKS.items():
        a = advise(**DOCS_CALL, task=task)
        at_test = [r for r in a.recommendations if r.at_test]
        b = advise(d, L, L, task=task)
        if brief:
            same = all(r.scale == "standard" for r in b.recommendations)
            out.append(f"- **{name[0].upper()}{name[1:]}**: {_brief(at_test, a)}."
                       + (" At n = L nothing changes." if same else ""))
            continue
        items = [f"At n = L: {_line(next(r for r in b.recommendations if r.at_test), b)}.",
                 f"Past L, a model trained without a temperature: {_way(at_test, a)}",
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

"""exllamav3: the multiplier on ``q.k`` as its ``RoPE`` class builds the cos/sin tables.

``util/rope.py`` follows transformers' ``modeling_rope_utils`` with two departures: YaRN's ``s``
is ``max_position_embeddings / original_max_position_embeddings`` whenever the latter is set
(``factor`` is read only without it), and ``mscale``/``mscale_all_dim`` are not read; LongRoPE's
factor is ``sqrt(1 + ln s / ln L)`` whatever ``attention_factor`` says.  The model files (DeepSeek,
Gemma, Llama 4, Qwen) were not read: a config with an MLA head, a base-scale key or a temperature
rule gets no value.
"""

from __future__ import annotations

from ._rules import Rule, compose, longrope_sq, mscale_sq

__all__ = ["NAME", "RULES", "scale"]

NAME = "exllamav3"
_SRC = ("turboderp-org/exllamav3", "exllamav3/util/rope.py", "da3ea0013c1b8e35c7cf1d9d87856b4e0d1c41b5")

RULES = {
    "yarn": Rule("yarn", "cos/sin x `attention_factor`, default 0.1 ln s + 1; s = max_position_embeddings / "
                 "`original_max_position_embeddings` when that is set, else `factor`; `mscale`, `mscale_all_dim` "
                 "not read", *_SRC, scheme="deepseek_yarn", squared=True),
    "longrope": Rule("longrope", "cos/sin x sqrt(1 + ln(a/b) / ln b), a = max_position_embeddings, b = "
                     "`original_max_position_embeddings`; `attention_factor` not read", *_SRC, scheme="longrope",
                     squared=True),
}


def scale(ms, n):
    """The multiplier exllamav3 puts on ``q.k`` at ``n`` keys (``None`` where its model file was not read)."""
    if ms.is_mla or ms.base_key != "head_dim" or ms.temperatures:
        return compose(NAME, ms, n, base=ms.base_scale, rope_sq=None,
                       notes=["its model files were not read here (MLA, base-scale key or temperature rule)"])
    r, notes, rules, rope_sq = ms.rope, [], [], 1.0
    if r.rope_type == "yarn":
        orig, max_pos = r.original_max_position_embeddings, ms.max_position_embeddings
        s = max_pos / orig if orig and max_pos else r.factor
        if orig and max_pos and r.factor is not None and s != r.factor:
            notes.append(f"takes s = max_position_embeddings / original_max_position_embeddings = {s:g}, not `factor`")
        rope_sq = r.attention_factor ** 2 if r.attention_factor is not None else mscale_sq(s, 1.0)
        ignored = [k for k in ("mscale", "mscale_all_dim") if getattr(r, k) is not None]
        if ignored:
            notes.append("ignores " + " and ".join(f"`{k}`" for k in ignored))
        rules = ["yarn"]
    elif r.rope_type == "longrope":
        L = r.original_max_position_embeddings or ms.max_position_embeddings
        rope_sq = longrope_sq(ms.max_position_embeddings / L, L)
        if r.attention_factor is not None:
            notes.append("drops `attention_factor`")
        rules = ["longrope"]
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, notes=notes, rules=rules)

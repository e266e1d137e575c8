"""onnxruntime-genai: the multiplier on ``q.k`` as its model builder bakes the cos/sin caches into the ONNX graph.

``builders/base.py``'s ``make_rope_init`` treats a RoPE dict as YaRN only when it has
``beta_fast``; the cache is then multiplied by ``mscale``.  Before PR #2076 (first in v0.14.0)
``mscale`` was ``0.1 ln factor + 1`` whatever the config said; from it, the
``mscale``/``mscale_all_dim`` ratio when both are set, else ``mscale`` itself when set, else
``0.1 ln factor + 1``.  ``attention_factor`` is not read.  Phi-3's LongRoPE
(``Phi3ForCausalLM`` with ``max_position_embeddings != original_max_position_embeddings``) multiplies
both caches by ``long_mscale``/``short_mscale`` when set, else ``make_mscale_su(s) = sqrt(1 + ln s /
ln L)``, ``s = max_position_embeddings / L``.  Its other model-specific scales and temperature rules
were not read.
"""

from __future__ import annotations

from ._rules import NEWEST, Rule, compose, longrope_sq, mscale_sq, pick, unknown

__all__ = ["NAME", "RULES", "scale"]

NAME = "onnxruntime-genai"
_REPO = "microsoft/onnxruntime-genai"
_BASE = "src/python/py/models/builders/base.py"
#: The snapshot read for Phi-3's LongRoPE.
_AT = "a0c04eb1313b886c963e415bbd974748cb89a4eb"

RULES = {
    "beta_fast": Rule("beta_fast", "make_rope_init builds YaRN only when the RoPE dict has `beta_fast`: without it a "
                      "`yarn` config gets plain RoPE, no factor", _REPO, _BASE,
                      "e3e977ffb2e7b537cd047968627a82b33f4729a7"),
    "yarn": Rule("yarn", "cos/sin x `mscale` = 0.1 ln `factor` + 1 (make_mscale, policy yarn); `mscale`, "
                 "`mscale_all_dim` and `attention_factor` are not read", _REPO, _BASE,
                 "ca91280b6940b81e9e9b504eb238479a2b448b28", scheme="deepseek_yarn", squared=True,
                 versions="<0.14.0", source="ended by PR #2076 (b29756290e165e1f3e4414310b6869f0e26f6f50)"),
    "yarn_mscale": Rule("yarn_mscale", "cos/sin x get_mscale(`factor`, `mscale`) / get_mscale(`factor`, "
                        "`mscale_all_dim`) when both are > 0, else `mscale` itself when > 0, else 0.1 ln `factor` + 1; "
                        "`attention_factor` is not read", _REPO, _BASE, "b29756290e165e1f3e4414310b6869f0e26f6f50",
                        scheme="deepseek_yarn", squared=True, versions=">=0.14.0",
                        source="PR #2076 (four YaRN bugs), first in v0.14.0", family="yarn"),
    "phi3_longrope": Rule("phi3_longrope", "builder.py: `config.architectures[0] == \"Phi3ForCausalLM\" and "
                          "config.max_position_embeddings != config.original_max_position_embeddings` -> "
                          "Phi3MiniLongRoPEModel, whose make_rope_init sets `mscale_policy = rope_params[\"type\"]` "
                          "and `long_mscale if long_mscale > 0 else self.make_mscale(self.context_length / "
                          "self.original_context_length)` (short_mscale alike); make_mscale under policy su/longrope "
                          "is make_mscale_su: `np.sqrt(1 + np.log(mscale) / np.log(self.original_context_length))`",
                          _REPO, "src/python/py/models/builders/phi.py", _AT, scheme="longrope", squared=True),
}

#: The architectures whose builder reads Phi-3's LongRoPE (:data:`RULES` ``"phi3_longrope"``).
PHI3_LONGROPE = frozenset({"Phi3ForCausalLM"})


def scale(ms, n, version=None):
    """The multiplier onnxruntime-genai's builder puts on ``q.k`` at ``n`` keys (``version``: a Version or None)."""
    label = NEWEST if version is None else str(version)
    r, notes, rules, rope_sq = ms.rope, [], [], 1.0
    if r.rope_type == "longrope":
        return _phi3_longrope(ms, n, label)
    if ms.has_mla_head or ms.base_key != "head_dim" or r.rope_type not in ("default", "yarn") or \
            any(t.layers is not None for t in ms.temperatures):
        return compose(NAME, ms, n, base=ms.base_scale, rope_sq=None, version=label,
                       notes=["its builder for this config (MLA, a base-scale key, LongRoPE or another RoPE type, "
                              "a per-layer temperature) was not read"])
    if r.rope_type == "yarn" and "beta_fast" not in r.values:
        notes.append("no `beta_fast`: builds plain RoPE, without YaRN's frequencies or factor")
        rules.append("beta_fast")
    elif r.rope_type == "yarn":
        row = pick(RULES, "yarn", version)
        if row is None:
            return unknown(NAME, n, label, "yarn")
        m, mad = r.mscale or 0.0, r.mscale_all_dim or 0.0
        if row.name == "yarn_mscale" and m > 0 and mad > 0:
            rope_sq = mscale_sq(r.factor, m) / mscale_sq(r.factor, mad)
        elif row.name == "yarn_mscale" and m > 0:
            rope_sq = m ** 2
        else:
            rope_sq = mscale_sq(r.factor, 1.0)
            ignored = [f"`{k}`" for k in ("mscale", "mscale_all_dim") if getattr(r, k) is not None]
            notes += ["ignores " + " and ".join(ignored)] if ignored else []
        notes += [f"drops `{k}`" for k in ("attention_factor", "attn_factor") if getattr(r, k) is not None]
        rules.append(row.name)
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, notes=notes, rules=rules, version=label,
                   reads_layer_types=False, unread_temps=ms.temperatures)


def _phi3_longrope(ms, n, label):
    """Phi-3's LongRoPE as the builder bakes it (:data:`RULES` ``"phi3_longrope"``); no value for any other model."""
    r = ms.rope
    arch = ms.architectures[0] if ms.architectures else ("Phi3ForCausalLM" if ms.model_type == "phi3" else "")
    L, max_pos = r.original_max_position_embeddings, ms.max_position_embeddings
    why = None
    if arch not in PHI3_LONGROPE or ms.base_key != "head_dim" or ms.temperatures:
        why = "its builder for LongRoPE other than Phi3ForCausalLM's was not read"
    elif L is None or max_pos is None or L == max_pos or "short_factor" not in r.values:
        why = "its LongRoPE builder is chosen only when max_position_embeddings != original_max_position_embeddings " \
              "and the RoPE dict has `short_factor`"
    elif "type" not in r.values:
        why = "refuses the config: make_rope_init reads `rope_params[\"type\"]`, which this RoPE dict lacks"
    elif any(r.values.get(k) for k in ("short_mscale", "long_mscale")):
        why = "`short_mscale`/`long_mscale` set: which cache a position gets was not read"
    if why is not None:
        return compose(NAME, ms, n, base=ms.base_scale, rope_sq=None, version=label, notes=[why])
    notes = ["drops `attention_factor`"] if r.attention_factor is not None else []
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=longrope_sq(max_pos / L, L), notes=notes,
                   rules=["phi3_longrope"], version=label, reads_layer_types=False, unread_temps=ms.temperatures)

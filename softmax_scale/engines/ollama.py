"""Ollama: the multiplier on ``q.k`` as its own engine (before 0.30.0) and llama-server (from it) compute it.

Ollama ran GGUF models in its own Go engine (``model/models/``) until PR #16031 (first in v0.30.0), which
removed it: from then on GGML models run in llama-server, the llama.cpp build named in
``LLAMA_CPP_VERSION``, so llama.cpp's rules hold (:mod:`.llama_cpp`).  Of the own engine, Mistral 3's text
model (``model/models/mistral3``, Ministral 3 and Devstral) is transcribed, as PR #13432 left it (first in
v0.13.3): with YaRN and both ``mscale`` and ``mscale_all_dim`` set, the attention factor is ``1 / (0.1 ln s
+ 1)``, which cancels ggml's own ``1 + 0.1 ln s`` (a factor 1 on cos/sin whatever the two keys say), else
ggml's ``1 + 0.1 ln s``; the query times ``1 + beta ln(1 + floor(p / original_max_position_embeddings))``.
Its other model files were not read.  Its MLX runner (``x/``, Apple silicon) is not covered.
"""

from __future__ import annotations

import dataclasses

from . import llama_cpp
from ._rules import NEWEST, Rule, compose, mscale_sq, pick, unknown

__all__ = ["NAME", "RULES", "scale"]

NAME = "ollama"
_REPO = "ollama/ollama"
#: The commit before PR #16031 (the own engine's last state) and the snapshot read for the rest.
_OWN = "f63eea3d273816ffc27fbeb0662ab44d236abc45"
_AT = "fb30760996871fa9460115c753afd2c60d4ab0f7"

RULES = {
    "llama_server": Rule("llama_server", "PR #16031 (\"runner: Remove CGO engines, use llama-server exclusively for GGML "
                         "models\", 9db4bdbad6a4981ad761aa2b603e69e8fb83212c, first in v0.30.0): a GGUF runs in "
                         "llama-server, llama.cpp at the build of LLAMA_CPP_VERSION (b10488 at this snapshot), so "
                         "llama.cpp's newest rules", _REPO, "LLAMA_CPP_VERSION", _AT, versions=">=0.30.0",
                         source="PR #16031 (v0.30.0)", family="engine"),
    "mistral3_yarn": Rule("mistral3_yarn", "model/models/mistral3: `if o.ropeMscale != 0 && o.ropeMscaleAllDim != 0 "
                          "{ ropeOpts = append(ropeOpts, rope.WithAttentionFactor(1.0/float32(0.1*math.Log(float64("
                          "o.ropeScale))+1.0))) }`, cancelling ggml's 1 + 0.1 ln s (cos/sin x 1); without the pair "
                          "ggml's 1 + 0.1 ln s", _REPO, "model/models/mistral3/model_text.go", _OWN,
                          scheme="deepseek_yarn", squared=True, versions=">=0.13.3,<0.30.0",
                          source="PR #13432 (2dfb74410, first in v0.13.3); ended by PR #16031 (v0.30.0)",
                          family="engine"),
    "mistral3_beta": Rule("mistral3_beta", "`posScale[n] = float32(1.0 + float64(m.ropeScalingBeta)*math.Log(1.0+"
                          "interval))`, interval = floor(pos / ropeOrigPosEmbeddings), `q = q.Mul(ctx, "
                          "positionsScale)` when ropeOrigPosEmbeddings > 0 (`rope.scaling_beta`, default 0.1)", _REPO,
                          "model/models/mistral3/model_text.go", _OWN,
                          positions="pos 0-based: floor(p / L) = floor((n - 1) / L)", scheme="llama4",
                          versions=">=0.13.3,<0.30.0", source="PR #13292 (v0.13.1); read as PR #13432 left it"),
}

#: The text model types Ollama's own engine ran through ``model/models/mistral3``.
MISTRAL3_TYPES = frozenset({"ministral3", "mistral3"})


def scale(ms, n, version=None):
    """The multiplier Ollama puts on ``q.k`` at ``n`` keys (``version``: a :class:`packaging.version.Version` or None)."""
    label = NEWEST if version is None else str(version)
    row = pick(RULES, "engine", version)
    if row is None:
        return unknown(NAME, n, label, "engine", ("its own engine before PR #13432 (v0.13.3) was not read",))
    if row.name == "llama_server":
        e = llama_cpp.scale(ms, n)
        return dataclasses.replace(e, engine=NAME, version=label, rules=("llama_server", *e.rules),
                                   notes=(*e.notes, "runs llama-server (llama.cpp b10488)"))
    if ms.model_type not in MISTRAL3_TYPES:
        return compose(NAME, ms, n, base=ms.base_scale, rope_sq=None, version=label,
                       notes=["its own engine's model file for this config was not read"])
    r, rules, notes = ms.rope, ["mistral3_yarn"], []
    rope_sq = 1.0
    if r.rope_type == "yarn" and not (r.mscale and r.mscale_all_dim):
        rope_sq = mscale_sq(r.factor, 1.0)
    elif r.rope_type == "yarn" and r.mscale != r.mscale_all_dim:
        notes.append("ignores the values of `mscale` and `mscale_all_dim` (takes their ratio to be 1)")
    beta = [t for t in ms.temperatures if t.name == "llama_4_scaling_beta"]
    rules += ["mistral3_beta"] * bool(beta)
    return compose(NAME, ms, n, base=ms.base_scale, rope_sq=rope_sq, temps=beta, notes=notes, rules=rules,
                   version=label, reads_layer_types=False)

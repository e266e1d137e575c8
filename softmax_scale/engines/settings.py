"""How to make an engine apply a wanted multiplier on ``q.k``: the setting, or why it cannot be set.

:func:`engine_setting` answers, for one engine at one version and one config, with a
:class:`Setting`: the option or config key to set and its value, found by applying the key to the
config and running the engine's own rule (:data:`~.table.ENGINES`) again.  The knob of every
engine is a factor ``c`` on RoPE's cos/sin: it multiplies ``q.k`` by ``c^2``, on the rotated
dimensions only, at every position, on the layers the RoPE scaling reaches.  So a wanted
multiplier that changes with the position, reaches MLA's unrotated (nope) dimensions or layers
without RoPE scaling, cannot be set that way; the one per-position route read is vLLM's top-level
``llama_4_scaling``.  Each route names where it was read (:data:`ROUTES`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from packaging.version import Version

from ._rules import BUILD_TAGGED, NEWEST, parse_version, position_factor

__all__ = ["ROUTES", "Setting", "engine_setting", "layer_rows"]

#: Relative difference under which a setting is taken to give the wanted multiplier.
RTOL = 1e-9

#: Engine -> ``(route, source)``: what is set, and the line it was read from (repository, path, commit).
ROUTES = {
    "transformers": ("the config's RoPE dict: `attention_factor` (the factor on cos/sin, YaRN and LongRoPE)",
                     "huggingface/transformers src/transformers/modeling_rope_utils.py: the `yarn` and `longrope` "
                     "rules of softmax_scale.engines.transformers"),
    "vllm": ("`--hf-overrides '{\"rope_parameters\": {...}}'` (`rope_scaling` in 0.10.2 and before; `--rope-scaling` "
             "is gone): before PR #56446 `attn_factor`, times yarn_get_mscale(s) unless `apply_yarn_scaling` is false; "
             "from it `attention_factor`",
             "vllm-project/vllm vllm/model_executor/layers/rotary_embedding/yarn_scaling_rope.py@ffdc985737c9: "
             "\"float(yarn_get_mscale(self.scaling_factor) * attn_factor) if apply_yarn_scaling else "
             "float(attn_factor)\"; @0cd5784803d8: \"if attention_factor is not None: self.mscale = "
             "float(attention_factor)\""),
    "sglang": ("`--json-model-override-args '{\"rope_scaling\": {...}}'` with `attn_factor` (times "
               "yarn_get_mscale(s); `attention_factor` is not forwarded); under transformers 5 the override drops "
               "`rope_theta` unless restated (sglang issue #41227)",
               "sgl-project/sglang python/sglang/srt/layers/rotary_embedding/yarn.py@8448045c5b58 (the `yarn` rule "
               "of softmax_scale.engines.sglang)"),
    "llama.cpp": ("`--override-kv <arch>.rope.scaling.attn_factor=float:A` (llama-cpp-python: `kv_overrides`): "
                  "multiplies cos/sin by A after the YaRN factor is set; `--yarn-attn-factor` is overwritten under "
                  "YaRN",
                  "ggml-org/llama.cpp src/llama-model.cpp@00342301d01a: \"ml.get_key(LLM_KV_ROPE_SCALING_ATTN_FACTOR, "
                  "hparams.rope_attn_factor, false);\" (every architecture); src/llama-context.cpp@001d906a6d86: "
                  "\"cparams.yarn_attn_factor *= hparams.rope_attn_factor;\" after \"cparams.yarn_attn_factor = "
                  "get_mscale(factor, 1.0f);\""),
    "ollama": ("from v0.30.0, where a GGUF runs in llama-server: llama.cpp's GGUF key "
               "`<arch>.rope.scaling.attn_factor`, written into the model file before `ollama create` (Ollama passes "
               "no --override-kv); its own engine before v0.30.0 reads no factor transcribed here",
               "ollama/ollama PR #16031 (9db4bdbad6a4, first in v0.30.0: GGML models run in llama-server); "
               "ggml-org/llama.cpp src/llama-model.cpp@00342301d01a: \"ml.get_key(LLM_KV_ROPE_SCALING_ATTN_FACTOR, "
               "hparams.rope_attn_factor, false);\" (every architecture)"),
    "exllamav3": ("the config's RoPE dict: `attention_factor` (YaRN)",
                  "turboderp-org/exllamav3 exllamav3/util/rope.py (the `yarn` rules of softmax_scale.engines.exllamav3)"),
    "mlx-lm": ("the config's RoPE dict: `mscale` (cos/sin x get_mscale(s, mscale) / get_mscale(s, mscale_all_dim))",
               "ml-explore/mlx-lm mlx_lm/models/rope_utils.py@13425df69fdf (the `yarn` rule of "
               "softmax_scale.engines.mlx_lm)"),
    "tensorrt-llm": ("the config's RoPE dict: `mscale` (cos/sin x get_mscale(s, mscale) / get_mscale(s, "
                     "mscale_all_dim))", "NVIDIA/TensorRT-LLM tensorrt_llm/functional.py@0071496dc625 (the `yarn` "
                     "rule of softmax_scale.engines.tensorrt_llm)"),
    "onnxruntime-genai": ("the config's RoPE dict, before the model is built: `mscale` (from v0.14.0 the factor on "
                          "cos/sin itself when `mscale_all_dim` is unset)",
                          "microsoft/onnxruntime-genai src/python/py/models/builders/base.py@b29756290e16 (the "
                          "`yarn_mscale` rule of softmax_scale.engines.onnxruntime_genai)"),
}

#: The first vLLM release with PR #56446 (``attention_factor`` forwarded, ``attn_factor`` no longer).
_VLLM_ALIGNED = Version("0.29.1rc0")
#: The last vLLM release whose ``--hf-overrides`` RoPE key is ``rope_scaling`` (an outside review of vLLM's
#: releases; not read here at a commit).
_VLLM_ROPE_SCALING = Version("0.10.2")
#: The first onnxruntime-genai release that reads ``mscale`` (PR #2076).
_ORT_MSCALE = Version("0.14.0")
#: The first Ollama release that runs a GGUF in llama-server (PR #16031).
_OLLAMA_SERVER = Version("0.30.0")
#: HF ``model_type`` -> the GGUF architecture ``convert_hf_to_gguf.py`` writes (the others: ``<arch>``).
_GGUF_ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3_moe": "qwen3moe",
              "qwen2_moe": "qwen2moe", "phi3": "phi3", "gemma2": "gemma2", "gemma3": "gemma3",
              "gemma3_text": "gemma3", "smollm3": "smollm3", "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2",
              "kimi_k2": "deepseek2"}
_ROPE_FIELDS = ("attention_factor", "attn_factor", "mscale", "mscale_all_dim")


@dataclass(frozen=True)
class Setting:
    """What to set in one engine for a wanted multiplier on ``q.k``.

    Attributes
    ----------
    engine, version : str
    text : str
        One line: the option or key with its value, or ``"cannot be set: ..."`` with the reason.
    how : str
        ``"cos/sin"`` (a factor on RoPE's cos/sin), ``"per position"`` (a per-position rule),
        ``"nothing"`` (the engine applies it already) or ``"none"`` (cannot be set).
    exact : bool
        Whether the engine's rule, run again with the setting, gives the wanted multiplier at every
        position asked, on every layer and dimension.
    source : str
        Where the route was read (repository, path, commit and the line).
    """

    engine: str
    version: str
    text: str
    how: str
    exact: bool
    source: str = ""


def layer_rows(row, model) -> tuple:
    """One engine's row layer by layer: ``(rotated, nope)``, each ``[layers, len(n)]``.

    Parameters
    ----------
    row : EngineScale
        A row of :func:`~.table.engine_scales` (``scale`` not ``None``).
    model : ModelScaling
        Its config (``n_layers``; a config without it counts as one layer).

    Returns
    -------
    tuple of ndarray
        The multiplier on ``q.k`` on the dimensions RoPE rotates and on the others (equal where
        the config rotates every dimension), at each layer and ``n``.
    """
    nn = np.asarray(row.n)
    n_layers = model.n_layers or (max(row.layers) + 1 if row.layers else 1)
    rot, nope = np.empty((n_layers, nn.size)), np.empty((n_layers, nn.size))
    nope_row = row.scale if row.nope_scale is None else row.nope_scale
    for i in range(n_layers):
        inside = row.layers is None or i in row.layers
        rot[i] = row.scale if inside else row.other_scale
        nope[i] = nope_row if inside else row.other_scale
    return rot, nope


def _close(a, b) -> bool:
    return bool(np.all(np.isfinite(a) & np.isfinite(b)) and np.allclose(a, b, rtol=RTOL, atol=0.0))


def _with(ms, **keys):
    """``ms`` with RoPE keys set (``None``: removed), in the typed fields and in ``values`` alike."""
    values = dict(ms.rope.values)
    for k, v in keys.items():
        if v is None:
            values.pop(k, None)
        else:
            values[k] = v
    typed = {k: (None if v is None else float(v)) for k, v in keys.items() if k in _ROPE_FIELDS}
    return dataclasses.replace(ms, rope=dataclasses.replace(ms.rope, values=MappingProxyType(values), **typed))


def _why_not(rot_k, nope_k, ms) -> str:
    """Why no factor on cos/sin gives it: the ratio wanted / engine on each part."""
    if ms.is_mla and not _close(nope_k, np.ones_like(nope_k)):
        return "it differs on the dimensions RoPE does not rotate, which no factor on cos/sin reaches"
    if not np.all(np.isfinite(rot_k)):
        return "the engine's value is unknown at some positions"
    per_layer = [np.unique(np.round(r, 12)) for r in rot_k]
    if any(u.size > 1 for u in per_layer):
        return "the factor it lacks changes with the position, and a factor on cos/sin is the same at every position"
    return "it differs between layers, and the factor on cos/sin is the same on every layer RoPE scaling reaches"


def _rope_json(ms, extra: dict, drop=(), top: str | None = None) -> str:
    """The config's RoPE dict with ``extra`` set, as the JSON an override passes (nested under its layer type)."""
    prefix = next((k.rsplit(".", 1)[0] for k in ms.set_keys if k.startswith(("rope_parameters.", "rope_scaling."))),
                  "rope_scaling")
    parts = prefix.split(".")
    values = {k: v for k, v in ms.rope.values.items() if k not in drop}
    values.update({k: float(v) for k, v in extra.items()})
    inner = {(top or parts[0]): values if len(parts) == 1 else {parts[1]: values}}
    return json.dumps(inner, separators=(", ", ": "))


def _cos_sin_route(engine, version, ms):
    """``(key, to_value, probe, drop)`` of an engine's factor on cos/sin for this config, or ``(None, why)``.

    ``to_value(g)`` is the key's value that makes the factor on cos/sin ``g`` times what ``probe`` (the
    key set to the value of a factor 1) gives.
    """
    r, kind = ms.rope, ms.rope.rope_type
    s = r.factor
    if engine == "transformers":
        if kind not in ("yarn", "longrope"):
            return None, f"transformers reads no factor on cos/sin for RoPE type {kind!r}"
        return "attention_factor", (lambda g: g), 1.0, ()
    if engine in ("vllm", "sglang"):
        if kind != "yarn":
            return None, f"{engine} reads no factor on cos/sin for RoPE type {kind!r} (its YaRN keys only)"
        if engine == "vllm" and (version is None or version >= _VLLM_ALIGNED):
            return "attention_factor", (lambda g: g), 1.0, ()
        return "attn_factor", (lambda g: g), 1.0, ()
    if engine == "exllamav3":
        if kind != "yarn":
            return None, f"exllamav3 reads `attention_factor` for YaRN only, not for RoPE type {kind!r}"
        return "attention_factor", (lambda g: g), 1.0, ()
    if engine in ("mlx-lm", "tensorrt-llm"):
        if kind not in ("yarn", "deepseek_yarn") or s is None or s <= 1.0:
            return None, f"{engine}'s factor on cos/sin is YaRN's get_mscale(s, `mscale`), which needs YaRN with s > 1"
        mad = r.mscale_all_dim or 0.0
        base = 0.1 * mad * math.log(s) + 1.0
        return "mscale", (lambda g: (g * base - 1.0) / (0.1 * math.log(s))), mad, ()
    if engine == "onnxruntime-genai":
        if kind != "yarn" or "beta_fast" not in r.values:
            return None, "onnxruntime-genai builds a factor on cos/sin only for YaRN with `beta_fast`"
        if version is not None and version < _ORT_MSCALE:
            return None, "onnxruntime-genai before v0.14.0 takes the factor from `factor` alone"
        return "mscale", (lambda g: g), 1.0, ("mscale_all_dim",)
    return None, f"no setting of {engine} was read"


def _llama_cpp(ms, rot_k, nope_k, others, in_file=False):
    """llama.cpp's GGUF key ``rope.scaling.attn_factor`` times ``sqrt(k)``, where the factor ``k`` is one number.

    ``in_file``: the key written into the GGUF (Ollama), not overridden on the command line.
    """
    arch = ms.model_type if ms.format == "gguf" else _GGUF_ARCH.get(ms.model_type, "<arch>")
    if arch == "deepseek2":
        return "cannot be set: DEEPSEEK2 also puts the context's attn_factor into kq_scale (not read here)", False
    if not (others and _close(rot_k, np.full_like(rot_k, rot_k.flat[0]))):
        return f"cannot be set: {_why_not(rot_k, nope_k, ms)}", False
    a0 = (ms.rope.attn_factor or 1.0) if ms.format == "gguf" else 1.0
    a = a0 * math.sqrt(float(rot_k.flat[0]))
    key = f"{arch}.rope.scaling.attn_factor"
    was = f" (the file's is {a0:.6g})" if ms.format == "gguf" and ms.rope.attn_factor else ""
    if in_file:
        return (f"write {key} = {a:.6g} (float32) into the GGUF{was} and `ollama create` from it (gguf-py's "
                "GGUFWriter adds the key; gguf-set-metadata changes it where the file has it)"), True
    return f"--override-kv {key}=float:{a:.6g}{was}; llama-cpp-python: kv_overrides={{{key!r}: {a:.6g}}}", True


def engine_setting(engine, model, wanted, *, version=None, n=None) -> Setting:
    """The setting that makes ``engine`` apply ``wanted`` on ``q.k``, or why it cannot be set.

    Parameters
    ----------
    engine : str
        An engine of :data:`~.table.ENGINES` other than ``"reference"``.
    model : ModelScaling, str, os.PathLike or Mapping
        The config (what :func:`~.config.read_config` reads).
    wanted : float, array_like or EngineScale
        The multiplier on ``q.k`` wanted (``1/sqrt(d)`` included) on every layer and dimension, one
        number or one per ``n``; or a row of :func:`~.table.engine_scales` (the reference's) to match
        layer by layer and on the rotated and unrotated dimensions apart.
    version : str or packaging.version.Version, optional
        The engine's version; default its newest known rules.
    n : int or sequence of int, optional
        The positions (1-based numbers of keys) a number ``wanted`` must hold at (default
        :data:`~.table.DEFAULT_N`); a row holds at its own.

    Returns
    -------
    Setting

    Raises
    ------
    ValueError
        Naming ``engine``, ``wanted`` or ``version``.

    Examples
    --------
    >>> from softmax_scale.engines import engine_setting
    >>> cfg = {"model_type": "llama", "head_dim": 64, "max_position_embeddings": 2048}
    >>> print(engine_setting("llama.cpp", cfg, 1.21 / 8).text)  # x1.21 on q.k: 1.1 on cos/sin
    --override-kv llama.rope.scaling.attn_factor=float:1.1; llama-cpp-python: kv_overrides={'llama.rope.scaling.attn_factor': 1.1}
    """
    from .._util.validation import check_n_array
    from .config import ModelScaling, read_config
    from .table import DEFAULT_N, ENGINES

    if engine not in ENGINES or engine == "reference":
        raise ValueError(f"`engine` must be one of {', '.join(e for e in ENGINES if e != 'reference')}, got {engine!r}")
    ms = model if isinstance(model, ModelScaling) else read_config(model)
    v = parse_version(version, "version", engine)
    label = NEWEST if v is None else f"b{v}" if engine in BUILD_TAGGED else str(v)
    if hasattr(wanted, "scale") and hasattr(wanted, "layers"):
        if wanted.scale is None:
            return Setting(engine, label, "cannot say: the wanted multiplier is unknown for this config", "none", False)
        nn = np.asarray(wanted.n)
        want_rot, want_nope = layer_rows(wanted, ms)
    else:
        nn, _ = check_n_array(DEFAULT_N if n is None else n, "n", minimum=1)
        nn = np.atleast_1d(nn)
        w = np.broadcast_to(np.asarray(wanted, dtype=np.float64), nn.shape)
        if not np.all(np.isfinite(w) & (w > 0)):
            raise ValueError(f"`wanted` must be finite numbers > 0 (one, or one per n), got {wanted!r}")
        n_layers = ms.n_layers or 1
        want_rot = want_nope = np.broadcast_to(w, (n_layers, nn.size))
    mod = ENGINES[engine]
    row = mod.scale(ms, nn, v)
    if row.scale is None:
        return Setting(engine, label, "cannot say: its multiplier for this config is unknown", "none", False)
    got_rot, got_nope = layer_rows(row, ms)
    if want_rot.shape != got_rot.shape:
        n_layers = max(want_rot.shape[0], got_rot.shape[0])
        want_rot, want_nope, got_rot, got_nope = (np.broadcast_to(x, (n_layers, nn.size)) if x.shape[0] == 1 else x
                                                  for x in (want_rot, want_nope, got_rot, got_nope))
    if _close(want_rot, got_rot) and (not ms.is_mla or _close(want_nope, got_nope)):
        return Setting(engine, label, "nothing to set: it applies the wanted multiplier", "nothing", True)
    rot_k, nope_k = want_rot / got_rot, want_nope / got_nope
    _, source = ROUTES[engine]
    reach = row.layers if row.layers is not None and row.layers == ms.rope_layers else None
    inside = np.array([reach is None or i in reach for i in range(rot_k.shape[0])])

    def untouched(rot_k, nope_k):  # the factor is 1 where no factor on cos/sin reaches
        return _close(rot_k[~inside], np.ones_like(rot_k[~inside])) and (
            not ms.is_mla or _close(nope_k, np.ones_like(nope_k)))

    others = untouched(rot_k, nope_k)
    if engine == "ollama" and v is not None and v < _OLLAMA_SERVER:
        return Setting(engine, label, "cannot be set: Ollama's own engine (before v0.30.0) reads no factor on cos/sin "
                       "transcribed here", "none", False, source)
    if engine in ("llama.cpp", "ollama"):
        text, exact = _llama_cpp(ms, rot_k[inside], nope_k, others, in_file=engine == "ollama")
        return Setting(engine, label, text, "cos/sin" if exact else "none", exact, source)
    beta = _per_position(engine, ms, nn, row)
    if beta is not None:  # vLLM's top-level llama_4_scaling gives the per-position part; cos/sin the rest
        f, arg = beta
        want_rot, want_nope = want_rot / f, want_nope / f
        rot_k, nope_k = want_rot / got_rot, want_nope / got_nope
        if _close(rot_k, np.ones_like(rot_k)) and (not ms.is_mla or _close(nope_k, np.ones_like(nope_k))):
            return Setting(engine, label, f"--hf-overrides '{json.dumps(arg, separators=(', ', ': '))}'{_BETA_NOTE}",
                           "per position", False, _BETA_SOURCE)
        others = untouched(rot_k, nope_k)
    varies = not _close(rot_k[inside], np.full_like(rot_k[inside], rot_k[inside].flat[0]))
    if varies or not others:
        return Setting(engine, label, f"cannot be set: {_why_not(rot_k, nope_k, ms)}", "none", False, source)
    added = {}
    if engine == "onnxruntime-genai" and ms.rope.rope_type == "yarn" and "beta_fast" not in ms.rope.values:
        added = {"beta_fast": 32.0, "beta_slow": ms.rope.values.get("beta_slow", 1.0)}  # transformers' defaults
        ms = _with(ms, **added)
        row = mod.scale(ms, nn, v)
        if row.scale is not None:
            got_rot, got_nope = layer_rows(row, ms)
            if _close(want_rot, got_rot) and (not ms.is_mla or _close(want_nope, got_nope)):
                return Setting(engine, label, _option(engine, v, ms, added, ()) + " (with them the builder "
                               "builds YaRN, its frequencies and its factor)", "cos/sin", True, source)
    key, *rest = _cos_sin_route(engine, v, ms)
    if key is None:
        return Setting(engine, label, f"cannot be set: {rest[0]}", "none", False, source)
    to_value, probe_value, drop = rest
    probe = mod.scale(_with(ms, **{key: probe_value}, **{k: None for k in drop}), nn, v)
    if probe.scale is None:
        return Setting(engine, label, f"cannot be set: its multiplier with `{key}` set is unknown", "none", False, source)
    p_rot, _ = layer_rows(probe, ms)
    g2 = (want_rot / p_rot)[inside]
    if not (others and _close(g2, np.full_like(g2, g2.flat[0])) and g2.flat[0] > 0):
        return Setting(engine, label, f"cannot be set: {_why_not(rot_k, nope_k, ms)}", "none", False, source)
    value = to_value(math.sqrt(float(g2.flat[0])))
    set_row = mod.scale(_with(ms, **{key: value}, **{k: None for k in drop}), nn, v)
    s_rot, s_nope = layer_rows(set_row, ms) if set_row.scale is not None else (p_rot * np.nan, p_rot * np.nan)
    exact = _close(s_rot, want_rot) and (not ms.is_mla or _close(s_nope, want_nope))
    text = _option(engine, v, ms, {**added, key: value}, drop)
    if not exact:
        text += " (approximate: the rule run again with it does not give the wanted multiplier everywhere)"
    if beta is not None:
        both = {**beta[1], **json.loads(text[len("--hf-overrides '"):text.index("'", len("--hf-overrides '"))])}
        return Setting(engine, label, f"--hf-overrides '{json.dumps(both, separators=(', ', ': '))}'{_BETA_NOTE}",
                       "per position", False, f"{source}; {_BETA_SOURCE}")
    return Setting(engine, label, text, "cos/sin", exact, source)


def _option(engine, version, ms, extra, drop) -> str:
    """The command-line option or config edit that sets ``extra`` in the config's RoPE dict."""
    if engine == "vllm":
        top = "rope_scaling" if version is not None and version <= _VLLM_ROPE_SCALING else "rope_parameters"
        return f"--hf-overrides '{_rope_json(ms, extra, drop, top)}'"
    if engine == "sglang":
        restate = "" if "rope_theta" in ms.rope.values else " (restate `rope_theta` in it under transformers 5)"
        return f"--json-model-override-args '{_rope_json(ms, extra, drop, 'rope_scaling')}'{restate}"
    keys = ", ".join(f"`{k}`: {v:.6g}" for k, v in extra.items())
    removed = "".join(f", remove `{k}`" for k in drop if k in ms.rope.values)
    return f"in config.json's RoPE dict set {keys}{removed}"


_BETA_NOTE = " (per position; read by vLLM's deepseek_v2.py by an outside review, not read or run here)"
_BETA_SOURCE = "vllm-project/vllm vllm/model_executor/models/deepseek_v2.py (an outside review; not read here)"


def _per_position(engine, ms, nn, row):
    """The per-position route: vLLM's top-level ``llama_4_scaling`` for a ``llama_4_scaling_beta`` it ignores.

    Returns ``(factor per n, override)``, or ``None``.
    """
    if engine != "vllm":
        return None
    beta = [t for t in ms.temperatures if t.name == "llama_4_scaling_beta" and t.key.startswith("rope_")]
    if len(beta) != 1 or not any("top-level `llama_4_scaling`" in note for note in row.notes):
        return None
    params = dict(beta[0].params)
    arg = {"llama_4_scaling": {"beta": params["attn_scale"], "original_max_position_embeddings": params["floor_scale"]}}
    return position_factor(beta[0], nn), arg

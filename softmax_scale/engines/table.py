"""Every engine's multiplier for one config, beside the authors' reference: :func:`engine_scales`."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .._util.validation import check_n_array
from . import exllamav3, llama_cpp, mlx_lm, ollama, onnxruntime_genai, reference, sglang, tensorrt_llm, transformers, vllm
from ._rules import parse_version
from .config import ModelScaling, read_config

__all__ = ["ENGINES", "EngineTable", "engine_rules", "engine_scales", "parse_engine_pins", "rules_markdown"]

#: Engine name -> its module (one per engine, each with ``RULES`` and ``scale``), the reference last.
ENGINES = {m.NAME: m for m in (transformers, vllm, llama_cpp, sglang, exllamav3, mlx_lm, tensorrt_llm, onnxruntime_genai,
                                ollama, reference)}
_BY_CANONICAL = {canonicalize_name(name): name for name in ENGINES if name != "reference"}
#: ``NAME==bNNNN`` for an engine of :data:`~._rules.BUILD_TAGGED`.
_BUILD_PIN = re.compile(r"(llama[._-]cpp)==b(\d+)", re.IGNORECASE)
#: Relative difference under which two engines' numbers are the same.
RTOL = 1e-9


def engine_rules() -> list:
    """Every engine's rules: ``(engine, Rule)`` pairs in table order (the docs page's table)."""
    return [(name, rule) for name, mod in ENGINES.items() for rule in mod.RULES.values()]


def rules_markdown() -> str:
    """Every engine rule as a Markdown table: what it does, its position convention, where it was read.

    The table of the docs page "What each engine applies" (``docs/engines.md``), written from the
    engines' ``RULES``.
    """
    lines = ["| engine | rule | versions | what it does, with the keys it reads | positions | "
             "read from (repository, path, commit) |",
             "|---|---|---|---|---|---|"]
    for engine, r in engine_rules():
        text = r.text.replace("|", "\\|")
        squared = " **Squared on the logits** (a factor on cos/sin)." if r.squared else ""
        scheme = f" Registry: `{r.scheme}`." if r.scheme else ""
        source = ", ".join(x for x in (r.repo, f"`{r.path}`" if r.path else "",
                                       f"`{r.commit}`" if r.commit else "commit not recorded") if x)
        versions = f"`{r.versions}`" if r.versions else "range not read"
        if r.source:
            versions += f" ({r.source})"
        lines.append(f"| {engine} | `{r.name}` | {versions} | {text}.{squared}{scheme} | {r.positions or '-'} | "
                     f"{source} |")
    return "\n".join(lines) + "\n"


def _same(a, b) -> bool:
    """Whether two rows agree wherever both are known (NaN: unknown at that position)."""
    if a is None or b is None:
        return a is None and b is None
    known = ~(np.isnan(a) | np.isnan(b))
    return bool(np.allclose(a[known], b[known], rtol=RTOL, atol=0.0))


@dataclass(frozen=True)
class EngineTable:
    """The multiplier on ``q.k`` each engine applies to one config.

    Attributes
    ----------
    model : ModelScaling
        What the config says.
    n : ndarray
        The positions asked, as 1-based numbers of keys.
    engines : dict
        Engine name -> :class:`~._rules.EngineScale`, ``"reference"`` last.
    notes : tuple of str
        Keys the config sets that no engine rule here reads (the reader does not know them).
    """

    model: ModelScaling
    n: np.ndarray
    engines: dict
    notes: tuple

    def disagreements(self, engine: str) -> bool:
        """Whether ``engine`` differs from the reference anywhere both are known."""
        e, ref = self.engines[engine], self.engines["reference"]
        return not (_same(e.scale, ref.scale) and _same(e.other_scale, ref.other_scale) and e.layers == ref.layers)

    def to_json(self) -> dict:
        """``{"n": [...], "engines": {name: {"scale", "layers", "notes", ...}}, ...}``."""
        out = {}
        for name, e in self.engines.items():
            entry = {"scale": None if e.scale is None else e.scale.tolist()}
            if e.layers is not None:
                entry["layers"] = list(e.layers)
                entry["other_layers_scale"] = e.other_scale.tolist()
            if e.nope_scale is not None:
                entry["nope_scale"] = e.nope_scale.tolist()
            entry["notes"] = list(e.notes)
            entry["rules"] = list(e.rules)
            entry["version"] = e.version
            entry["version_range"] = self.version_range(name)
            entry["cost"] = self.cost(name)
            entry["agrees_with_reference"] = name == "reference" or not self.disagreements(name)
            entry["unknown_n"] = [] if e.scale is None else self.n[np.isnan(e.scale)].astype(int).tolist()
            out[name] = entry
        m = self.model
        return {"config": m.source, "n": self.n.astype(int).tolist(), "head_dim": m.head_dim,
                "base_scale": m.base_scale, "base_key": m.base_key, "train_length": m.train_length,
                "rope_type": m.rope.rope_type, "rope_variant": m.rope_variant, "engines": out, "unknown_keys": list(m.unknown_keys),
                "notes": list(self.notes)}

    def cost(self, engine: str, csv=None):
        """The measured cost of ``engine``'s disagreement with the reference, with its scope; ``None`` where it agrees.

        A factor constant in ``n`` on every layer (or on the layers ``(i + 1) % 4 == 0``) and on every
        dimension of ``q.k`` (or, on every layer, on the rotated half of a ``partial_rotary_factor`` of 0.5)
        is looked up in the committed result of the experiment ``engine_cost``
        (:func:`softmax_scale.experiments.engine_cost.measured_cost`), at the measured length
        nearest the largest ``n`` asked, taken as a multiple of the training length where the
        config gives one (the measured model's own is 8192); any other shape is said to be unmeasured.

        Parameters
        ----------
        engine : str
        csv : str or PathLike, optional
            The result file (default: the committed ``figures/engine_cost.csv``).

        Returns
        -------
        str or None
        """
        e, ref = self.engines[engine], self.engines["reference"]
        if engine == "reference" or e.scale is None or ref.scale is None or not self.disagreements(engine):
            return None
        known = ~(np.isnan(e.scale) | np.isnan(ref.scale))
        ratio = (e.scale / ref.scale)[known]
        if ratio.size == 0 or not np.allclose(ratio, ratio[0], rtol=1e-9, atol=0.0) or ref.layers is not None:
            return "no measured cost: the factor against the reference changes with n or its layers differ"
        r = float(ratio[0])
        every_fourth = tuple(i for i in range(self.model.n_layers or 0) if (i + 1) % 4 == 0)
        if e.layers is None:
            shape, where = "all", "on every layer"
        elif e.layers == every_fourth and _same(e.other_scale, ref.scale):
            shape, where = "every_fourth", f"on {len(e.layers)} of {self.model.n_layers} layers"
        else:
            return f"no measured cost for x{r:.4g} on layers {_ranges(e.layers)}"
        if e.nope_scale is not None and _same(e.nope_scale, ref.scale if ref.nope_scale is None else ref.nope_scale):
            if shape != "all" or self.model.partial_rotary_factor != 0.5:
                return (f"x{r:.4g} {where} on the rotated dimensions only: not measured (measured: every dimension, "
                        "or half of them on every layer)")
            shape, where = "half", "on every layer, on the rotated half of the dimensions"
        import os

        from ..experiments.engine_cost import MEASURED_TRAIN_LENGTH, committed_file, measured_cost

        if not os.path.exists(committed_file() if csv is None else csv):
            return f"x{r:.4g} {where}: no measured cost here (the result file of engine_cost is not in this installation)"
        L = self.model.train_length
        m = measured_cost(r, shape, int(self.n.max()), train_length=L, csv=csv)
        if m is None:
            return f"no measured cost for x{r:.4g} {where} (engine_cost has not measured this factor)"
        at = f"n = {m['length']}"
        if L:
            at += (f" = {m['length'] / MEASURED_TRAIN_LENGTH:.3g} L (n = {int(self.n.max())} is "
                   f"{self.n.max() / L:.3g} L here)")
        return (f"x{r:.4g} {where}: loss {m['delta_loss']:+.4f} ± {m['delta_se']:.4f} nats/token, next-token KL "
                f"{m['kl']:.4f} ± {m['kl_se']:.4f} nats at {at} on {m['model']} (measured, ± standard "
                f"error over positions; i.i.d. KL per head {m['iid_kl']:.3g}, theory)")

    def version_range(self, engine: str) -> str:
        """The ranges of the rules that gave ``engine``'s row (``""`` when none of them has a recorded range)."""
        table = ENGINES[engine].RULES
        return ", ".join(sorted({table[r].versions for r in self.engines[engine].rules if r in table and
                                 table[r].versions}))

    def to_text(self) -> str:
        """A table engine x position, the reference beside it, each disagreement marked with its cause."""
        m = self.model
        head = (f"{m.source}: {m.model_type or 'model'} ({m.format}), head dimension {m.head_dim}, base scale "
                f"{m.base_scale:.6g} ({m.base_key}), training length {m.train_length} ({m.train_length_key or '-'}), "
                f"RoPE {m.rope.rope_type}")
        cols = [f"n={int(x)}" for x in self.n]
        lines = [head, "multiplier on q.k (x sqrt(d) in brackets: relative to 1/sqrt(d)); * differs from the reference, "
                 "? agrees where known",
                 f"{'engine':<14}{'version':<24}" + "".join(f"{c:>20}" for c in cols)]
        rd = np.sqrt(m.head_dim)
        for name, e in self.engines.items():
            rng = self.version_range(name)
            version = f"{e.version} ({rng})" if rng else e.version
            if e.scale is None:
                lines.append(f"{name:<14}{version:<24}{'unknown':>20}   " + "; ".join(e.notes))
                continue
            mark = "*" if name != "reference" and self.disagreements(name) else "?" if np.isnan(e.scale).any() else " "
            cells = "".join(f"{'unknown' if np.isnan(v) else f'{v:.6g} [{v * rd:.4f}]':>20}" for v in e.scale)
            where = "" if e.layers is None else f"  layers {_ranges(e.layers)}; other layers {e.other_scale[0]:.6g}"
            cause = ("  " + "; ".join(e.notes)) if e.notes else ""
            lines.append(f"{name + mark:<14}{version:<24}{cells}{where}{cause}")
        costs = [(name, self.cost(name)) for name in self.engines]
        lines += [f"cost of {name}'s disagreement: {c}" for name, c in costs if c is not None]
        if m.unknown_keys:
            lines.append("keys the reader does not know: " + ", ".join(f"`{k}`" for k in m.unknown_keys))
        lines += list(self.notes)
        return "\n".join(lines)


def _ranges(layers) -> str:
    return ", ".join(str(i) for i in layers) if len(layers) <= 8 else f"{layers[0]}, {layers[1]}, ... {layers[-1]}"


def _unread(ms) -> tuple:
    """Notes for the keys the config sets that no engine rule here reads."""
    if not ms.unknown_keys:
        return ()
    return tuple(f"no engine rule here reads `{k}`" for k in ms.unknown_keys)


#: The positions :func:`engine_scales` reports by default.
DEFAULT_N = (1, 2048, 4096, 8192, 32768)


def parse_engine_pins(specs) -> dict:
    """Engine versions from pins as pip spells them: ``["vllm==0.11.0", "transformers==4.51.0"]``.

    Parameters
    ----------
    specs : sequence of str
        ``NAME==VERSION`` each, ``NAME`` an engine of :data:`ENGINES` other than the reference
        (``llama.cpp``, ``llama-cpp``, ``mlx_lm`` and ``mlx-lm`` alike).

    Returns
    -------
    dict
        Engine name -> :class:`packaging.version.Version`.

    Raises
    ------
    ValueError
        Naming ``engine``: not ``NAME==VERSION``, an unknown name, an engine pinned twice.
    """
    pins = {}
    names = ", ".join(_BY_CANONICAL.values())
    for spec in specs:
        build = _BUILD_PIN.fullmatch(str(spec))  # a build tag is no PEP 440 version: read it as its number
        spec = f"{build.group(1)}=={build.group(2)}" if build else spec
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            req = None
        exact = [] if req is None else list(req.specifier)
        if req is None or len(exact) != 1 or exact[0].operator != "==" or "*" in exact[0].version:
            raise ValueError(f"`engine` must be NAME==VERSION (e.g. vllm==0.11.0), got {spec!r}")
        name = _BY_CANONICAL.get(canonicalize_name(req.name))
        if name is None:
            raise ValueError(f"`engine` must name one of {names}, got {req.name!r}")
        if name in pins:
            raise ValueError(f"`engine`: {name} is pinned twice")
        pins[name] = parse_version(exact[0].version, "engine", name)
    return pins


def engine_scales(config, n=None, versions=None) -> EngineTable:
    """The multiplier on ``q.k`` each inference engine applies to a model's config, and the authors' reference.

    Parameters
    ----------
    config : str, os.PathLike, Mapping or ModelScaling
        A HF ``config.json`` (path or dict), a GGUF file, or what :func:`read_config` returned.
    n : int or sequence of int, optional
        Positions, as 1-based numbers of keys (``>= 1``); default :data:`DEFAULT_N`.
    versions : Mapping, optional
        Engine name -> version (a string or :class:`packaging.version.Version`) to read that
        engine's rules at; the others get their newest known rules.  A rule known to have
        changed whose ranges do not cover the version gives no value ("unknown"); a rule with no
        recorded range is taken as read at its commit.

    Returns
    -------
    EngineTable

    Examples
    --------
    >>> import math
    >>> from softmax_scale.engines import engine_scales
    >>> t = engine_scales({"head_dim": 128, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
    ...                    "original_max_position_embeddings": 32768, "attention_factor": 1.0}}, n=[1])
    >>> round(float(t.engines["vllm"].scale[0] * math.sqrt(128)), 4)  # drops attention_factor
    1.2965
    """
    pins = {}
    for name, v in dict(versions or {}).items():
        if name not in _BY_CANONICAL.values():
            raise ValueError(f"`versions` must name engines of {', '.join(_BY_CANONICAL.values())}, got {name!r}")
        pins[name] = parse_version(v, "versions", name)
    ms = config if isinstance(config, ModelScaling) else read_config(config)
    nn, _ = check_n_array(DEFAULT_N if n is None else n, "n", minimum=1)
    nn = np.atleast_1d(nn)
    engines = {name: mod.scale(ms, nn, pins.get(name)) for name, mod in ENGINES.items()}
    return EngineTable(ms, nn, engines, _unread(ms))

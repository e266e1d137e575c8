"""Every engine's multiplier for one config, beside the authors' reference: :func:`engine_scales`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.validation import check_n_array
from . import exllamav3, llama_cpp, reference, sglang, transformers, vllm
from .config import ModelScaling, read_config

__all__ = ["ENGINES", "EngineTable", "engine_rules", "engine_scales", "rules_markdown"]

#: Engine name -> its module (one per engine, each with ``RULES`` and ``scale``), the reference last.
ENGINES = {m.NAME: m for m in (transformers, vllm, llama_cpp, sglang, exllamav3, reference)}
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
    lines = ["| engine | rule | what it does, with the keys it reads | positions | read from (repository, path, commit) |",
             "|---|---|---|---|---|"]
    for engine, r in engine_rules():
        text = r.text.replace("|", "\\|")
        squared = " **Squared on the logits** (a factor on cos/sin)." if r.squared else ""
        scheme = f" Registry: `{r.scheme}`." if r.scheme else ""
        source = ", ".join(x for x in (r.repo, f"`{r.path}`" if r.path else "",
                                       f"`{r.commit}`" if r.commit else "commit not recorded") if x)
        lines.append(f"| {engine} | `{r.name}` | {text}.{squared}{scheme} | {r.positions or '-'} | {source} |")
    return "\n".join(lines) + "\n"


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(np.allclose(a, b, rtol=RTOL, atol=0.0))


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
        """Whether ``engine`` differs from the reference anywhere."""
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
            entry["agrees_with_reference"] = name == "reference" or not self.disagreements(name)
            out[name] = entry
        m = self.model
        return {"config": m.source, "n": self.n.astype(int).tolist(), "head_dim": m.head_dim,
                "base_scale": m.base_scale, "base_key": m.base_key, "train_length": m.train_length,
                "rope_type": m.rope.rope_type, "rope_variant": m.rope_variant, "engines": out, "unknown_keys": list(m.unknown_keys),
                "notes": list(self.notes)}

    def to_text(self) -> str:
        """A table engine x position, the reference beside it, each disagreement marked with its cause."""
        m = self.model
        head = (f"{m.source}: {m.model_type or 'model'} ({m.format}), head dimension {m.head_dim}, base scale "
                f"{m.base_scale:.6g} ({m.base_key}), training length {m.train_length} ({m.train_length_key or '-'}), "
                f"RoPE {m.rope.rope_type}")
        cols = [f"n={int(x)}" for x in self.n]
        lines = [head, "multiplier on q.k (x sqrt(d) in brackets: relative to 1/sqrt(d)); * differs from the reference",
                 f"{'engine':<13}" + "".join(f"{c:>20}" for c in cols)]
        rd = np.sqrt(m.head_dim)
        for name, e in self.engines.items():
            if e.scale is None:
                lines.append(f"{name:<13}{'not transcribed':>20}   " + "; ".join(e.notes))
                continue
            mark = "*" if name != "reference" and self.disagreements(name) else " "
            cells = "".join(f"{f'{v:.6g} [{v * rd:.4f}]':>20}" for v in e.scale)
            where = "" if e.layers is None else f"  layers {_ranges(e.layers)}; other layers {e.other_scale[0]:.6g}"
            cause = ("  " + "; ".join(e.notes)) if e.notes else ""
            lines.append(f"{name + mark:<13}{cells}{where}{cause}")
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


def engine_scales(config, n=None) -> EngineTable:
    """The multiplier on ``q.k`` each inference engine applies to a model's config, and the authors' reference.

    Parameters
    ----------
    config : str, os.PathLike, Mapping or ModelScaling
        A HF ``config.json`` (path or dict), a GGUF file, or what :func:`read_config` returned.
    n : int or sequence of int, optional
        Positions, as 1-based numbers of keys (``>= 1``); default :data:`DEFAULT_N`.

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
    ms = config if isinstance(config, ModelScaling) else read_config(config)
    nn, _ = check_n_array(DEFAULT_N if n is None else n, "n", minimum=1)
    nn = np.atleast_1d(nn)
    engines = {name: mod.scale(ms, nn) for name, mod in ENGINES.items()}
    return EngineTable(ms, nn, engines, _unread(ms))

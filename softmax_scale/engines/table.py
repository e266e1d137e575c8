"""Every engine's multiplier for one config, beside the authors' reference: :func:`engine_scales`."""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass

import numpy as np
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .._util.validation import check_n_array
from . import exllamav3, llama_cpp, mlx_lm, ollama, onnxruntime_genai, reference, sglang, tensorrt_llm, transformers, vllm
from ._rules import NEWEST, parse_version
from .config import ModelScaling, read_config
from .cost import MEASURED_TRAIN_LENGTH, committed_file, measured_cost
from .settings import engine_setting, layer_rows

__all__ = ["ENGINES", "EngineTable", "engine_rules", "engine_scales", "parse_engine_pins", "rules_markdown"]

#: Engine name -> its module (one per engine, each with ``RULES`` and ``scale``), the reference last.
ENGINES = {m.NAME: m for m in (transformers, vllm, llama_cpp, sglang, exllamav3, mlx_lm, tensorrt_llm, onnxruntime_genai,
                                ollama, reference)}
_BY_CANONICAL = {canonicalize_name(name): name for name in ENGINES if name != "reference"}
#: ``NAME==bNNNN`` for an engine of :data:`~._rules.BUILD_TAGGED`.
_BUILD_PIN = re.compile(r"(llama[._-]cpp)==b(\d+)", re.IGNORECASE)
#: Relative difference under which two engines' numbers are the same.
RTOL = 1e-9
#: The width the text wraps the notes, settings and costs to.
WIDTH = 100


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
        """``{"n": [...], "engines": {name: {"scale", "layers", "nope_scale", "notes", "cost", "setting", ...}}, ...}``.

        ``"setting"``: how to make a disagreeing engine apply the reference's multiplier (``text``,
        ``how``, ``exact``, ``source`` of :class:`~.settings.Setting`), ``null`` where it agrees.
        """
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
            setting = self.setting(name)
            entry["setting"] = None if setting is None else {"text": setting.text, "how": setting.how,
                                                             "exact": setting.exact, "source": setting.source}
            entry["agrees_with_reference"] = name == "reference" or not self.disagreements(name)
            entry["unknown_n"] = [] if e.scale is None else self.n[np.isnan(e.scale)].astype(int).tolist()
            out[name] = entry
        m = self.model
        return {"config": m.source, "n": self.n.astype(int).tolist(), "head_dim": m.head_dim,
                "base_scale": m.base_scale, "base_key": m.base_key, "train_length": m.train_length,
                "covered_length": m.covered_length,
                "rope_type": m.rope.rope_type, "rope_variant": m.rope_variant, "engines": out, "unknown_keys": list(m.unknown_keys),
                "notes": list(self.notes)}

    def cost(self, engine: str, csv=None):
        """The measured cost of ``engine``'s disagreement with the reference, from the same regime; ``None`` where it agrees.

        A factor ``r`` against the reference, one number wherever it differs, on every layer or on one
        layer in four, on every dimension of ``q.k`` or on the rotated half of it, is looked up in the
        committed result of the experiment ``engine_cost`` (:func:`~.cost.measured_cost`): at the
        largest ``n`` asked taken as the same multiple of the covered length (``advise``'s ``L``,
        :attr:`~.config.ModelScaling.covered_length`) on the measured model, inside its own covered
        length where ``n`` is inside this model's and past it where past.  Any other shape (a factor
        changing with ``n``, on another fraction of the dimensions or of the layers) is said to be
        unmeasured; a factor on cos/sin where no dimension is rotated costs nothing.

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
        m = self.model
        (e_rot, e_nope), (r_rot, r_nope) = layer_rows(e, m), layer_rows(ref, m)
        known = np.all(np.isfinite(e_rot) & np.isfinite(r_rot) & np.isfinite(e_nope) & np.isfinite(r_nope), axis=0)
        k_rot, k_nope = (e_rot / r_rot)[:, known], (e_nope / r_nope)[:, known]
        off_rot, off_nope = ~np.isclose(k_rot, 1.0, rtol=RTOL, atol=0.0), ~np.isclose(k_nope, 1.0, rtol=RTOL, atol=0.0)
        if m.rope_dim == 0:
            off_rot[:] = False
        if not (off_rot.any() or off_nope.any()):
            return (f"no cost: the factor goes on cos/sin, and `partial_rotary_factor` "
                    f"({m.partial_rotary_factor:g}) rotates no dimension of the {m.head_dim}")
        values = np.concatenate([k_rot[off_rot], k_nope[off_nope]])
        r = float(values[0])
        if not np.allclose(values, r, rtol=RTOL, atol=0.0):
            return "no measured cost: the factor against the reference changes with n or between layers"
        layers = np.flatnonzero(off_rot.any(axis=1) | off_nope.any(axis=1))
        total = k_rot.shape[0]
        if (off_rot.any(axis=1) != off_rot.all(axis=1)).any() or (off_nope.any(axis=1) != off_nope.all(axis=1)).any():
            return "no measured cost: the factor against the reference changes with n"
        whole = not m.is_mla or bool(off_nope[layers].all())
        if not whole and off_nope.any():
            return f"no measured cost for x{r:.4g}: it reaches the unrotated dimensions of some layers only"
        fraction = 1.0 if whole else m.rope_dim / m.head_dim
        if layers.size == total:
            shape, where = "all", "on every layer"
        elif 4 * layers.size == total:
            shape, where = "every_fourth", (f"on {layers.size} of {total} layers (measured on the layers i with "
                                            "(i + 1) % 4 == 0)")
        else:
            return f"no measured cost for x{r:.4g} on {layers.size} of {total} layers (measured: all, or one in four)"
        if fraction != 1.0:
            if fraction != 0.5:
                return (f"no measured cost for x{r:.4g} {where} on the rotated {fraction:.3g} of the dimensions "
                        "(measured: every dimension, or half of them)")
            shape, where = ("half" if shape == "all" else "half_every_fourth"), where + ", on the rotated half"
        if not os.path.exists(committed_file() if csv is None else csv):
            return f"x{r:.4g} {where}: no measured cost here (the result file of engine_cost is not in this installation)"
        C, n = m.covered_length, int(self.n.max())
        row = measured_cost(r, shape, n, covered_length=C, csv=csv)
        regime = "past" if (n > C if C else n > MEASURED_TRAIN_LENGTH) else "inside"
        if row is None:
            return (f"no measured cost for x{r:.4g} {where} (engine_cost has not measured this factor and shape "
                    f"{regime} the measured model's covered length)")
        L0 = MEASURED_TRAIN_LENGTH
        at = f"n = {row['length']} = {row['length'] / L0:.3g} x its L = {L0}"
        if C:
            at += f" (n = {n} is {n / C:.3g} x this model's L = {C}, `{m.covered_length_key}`)"
        return (f"x{r:.4g} {where}: loss {row['delta_loss']:+.4f} ± {row['delta_se']:.4f} nats/token, next-token KL "
                f"{row['kl']:.4f} ± {row['kl_se']:.4f} nats on {row['model']} at {at} (measured, ± standard "
                f"error over positions)")

    def version_range(self, engine: str) -> str:
        """The ranges of the rules that gave ``engine``'s row (``""`` when none of them has a recorded range)."""
        table = ENGINES[engine].RULES
        return ", ".join(sorted({table[r].versions for r in self.engines[engine].rules if r in table and
                                 table[r].versions}))

    def setting(self, engine: str):
        """How to make ``engine`` apply the reference's multiplier (:func:`~.settings.engine_setting`); ``None`` where it agrees."""
        e = self.engines[engine]
        if engine == "reference" or e.scale is None or not self.disagreements(engine):
            return None
        return engine_setting(engine, self.model, self.engines["reference"],
                              version=None if e.version == NEWEST else e.version)

    def to_text(self) -> str:
        """A table engine x position, the reference beside it; under each disagreement its cause and how to set it."""
        m = self.model
        head = (f"{m.source}: {m.model_type or 'model'} ({m.format}), head dimension {m.head_dim}, base scale "
                f"{m.base_scale:.6g} ({m.base_key}), pretrained to {m.train_length} ({m.train_length_key or '-'})"
                + (f", covers L = {m.covered_length} ({m.covered_length_key}, advise's L)"
                   if m.covered_length not in (None, m.train_length) else "")
                + f", RoPE {m.rope.rope_type}")
        rd = np.sqrt(m.head_dim)
        rows = []  # (engine, version, cells, after, lines below)
        for name, e in self.engines.items():
            rng = self.version_range(name)
            version = f"{e.version} ({rng})" if rng else e.version
            if e.scale is None:
                rows.append((name, version, ["unknown"], "", ["; ".join(e.notes)] if e.notes else []))
                continue
            mark = "*" if name != "reference" and self.disagreements(name) else "?" if np.isnan(e.scale).any() else ""
            cells = [_cell(v, rd) for v in e.scale]
            where = "" if e.layers is None else f"layers {_ranges(e.layers)}; other layers {e.other_scale[0]:.6g}"
            below = ["; ".join(e.notes)] if e.notes else []
            setting = self.setting(name)
            if setting is not None:
                below.append(("set: " if setting.how != "none" else "") + setting.text)
            rows.append((name + mark, version, cells, where, below))
            if e.nope_scale is not None:
                rows.append(("  nope dims" if m.has_mla_head else "  unrotated", "",
                             [_cell(v, rd) for v in e.nope_scale], "the dimensions RoPE does not rotate", []))
        cols = [f"n={int(x)}" for x in self.n]
        w_name = max(len("engine"), *(len(r[0]) for r in rows)) + 2
        w_version = max(len("version"), *(len(r[1]) for r in rows)) + 2
        w_cell = max(*(len(c) for c in cols), *(len(c) for r in rows for c in r[2])) + 2
        lines = [*textwrap.wrap(head, WIDTH, subsequent_indent="  ", break_on_hyphens=False),
                 "multiplier on q.k (x sqrt(d) in brackets: relative to 1/sqrt(d));",
                 "* differs from the reference (its cause and how to set it below), ? agrees where known",
                 f"{'engine':<{w_name}}{'version':<{w_version}}" + "".join(f"{c:>{w_cell}}" for c in cols)]
        for name, version, cells, where, below in rows:
            lines.append((f"{name:<{w_name}}{version:<{w_version}}" + "".join(f"{c:>{w_cell}}" for c in cells) +
                          (f"  {where}" if where else "")).rstrip())
            lines += [textwrap.fill(line, WIDTH, initial_indent=" " * w_name, subsequent_indent=" " * (w_name + 2),
                                    break_on_hyphens=False, break_long_words=False) for line in below]
        costs = [(name, self.cost(name)) for name in self.engines]
        lines += [textwrap.fill(f"cost of {name}'s disagreement: {c}", WIDTH, subsequent_indent="  ",
                                break_on_hyphens=False, break_long_words=False) for name, c in costs if c is not None]
        if m.unknown_keys:
            lines.append("keys the reader does not know: " + ", ".join(f"`{k}`" for k in m.unknown_keys))
        lines += list(self.notes)
        return "\n".join(lines)


def _cell(v, rd) -> str:
    return "unknown" if np.isnan(v) else f"{v:.6g} [{v * rd:.4f}]"


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
    ...                    "original_max_position_embeddings": 32768, "attention_factor": 1.0}}, n=[1],
    ...                   versions={"vllm": "0.29.0"})
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

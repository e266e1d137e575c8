"""Published softmax scales, side by side: one :class:`Scheme` object per scale, in one registry.

:func:`attention_scale` returns the multiplier ``m`` a scheme puts in front of
``q.k`` (``applies_to="qk"``) or in front of a cosine (``applies_to="cosine"``),
vectorised over the number of keys ``n``.  In a causal model ``n`` is the query's
1-indexed position: the position-dependent schemes (``qwen_logn``, ``llama4``) are
implemented in that position form.

:func:`scheme_alpha` turns ``m`` into the softmax scale ``alpha`` on unit
scores under a score model:

* ``"normal"``: q, k with i.i.d. unit-variance entries, so
  ``q.k = sqrt(d) z`` with ``z ~ N(0, 1)`` and ``alpha = m sqrt(d)``;
* ``"cosine"``: q, k of norm ``sqrt(d)``, so ``q.k = d cos`` and
  ``alpha = m d`` on cosine(d) scores.

A cosine scale multiplies the cosine itself: ``alpha = m`` on cosine
scores and ``alpha = m / sqrt(d)`` on normal scores (``cos ~ z / sqrt(d)``).

Choices made where the public code is ambiguous (each also in the scheme's
:attr:`Scheme.note`):

* ``qwen_logn``: Qwen v1 precomputes ``log_L(i)`` for ``i = 1..32767`` only,
  so its released code cannot run past 32,767 positions.  By default the
  formula is continued (``max_position=None``); pass ``max_position=32767``
  to get the released behaviour, which raises ``ValueError`` beyond it.
* ``llama4``: ``floor((pos + 1) / 8192)`` with ``pos = n - 1``, i.e.
  ``floor(n / 8192)``; the first step is at ``n = 8192`` (position 8191),
  not at 8193 as ``floor(pos / 8192)`` would put it.
* ``yarn``/``longrope``: the factor is the extension factor ``s``, never the
  length; with ``factor=None`` the dynamic form ``s = max(1, n / L)`` is used.
* ``ssmax``: a multiplication of the logits by ``s log n``; written as a
  shift ``exp(x - s log n)`` it cancels in the softmax and does nothing.

A contributor adds a scale by writing one :class:`Scheme` and passing it to
:func:`register_scheme`: its formula, defaults, checks, pinning rule, training names,
default lists and plot style are read from it by every caller (the command line, the
entropy curves and figures, the models and the training harness).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .._util.validation import check_choice, check_int, check_n_array, check_positive_float

__all__ = [
    "COSINE_SCHEMES",
    "CRITICAL",
    "DEFAULT_LISTS",
    "ENTROPY_INVARIANT",
    "QK_SCHEMES",
    "QWEN_LOGN",
    "SCHEMES",
    "SCORE_MODELS",
    "SSMAX",
    "STANDARD",
    "TRAIN_NAMES",
    "YARN",
    "PinnedScheme",
    "Scheme",
    "SchemeKeys",
    "Style",
    "attention_scale",
    "default_list",
    "list_schemes",
    "pinned",
    "register_scheme",
    "registered",
    "scheme_alpha",
    "scheme_factor",
    "train_scheme",
    "unregister_scheme",
]

SCORE_MODELS = ("normal", "cosine")

#: The registry's names of the schemes other modules refer to.
STANDARD = "standard"
ENTROPY_INVARIANT = "entropy_invariant"
QWEN_LOGN = "qwen_logn"
YARN = "yarn"
SSMAX = "ssmax"
CRITICAL = "critical"

#: The default lists a scheme can belong to (:attr:`Scheme.default_in`), with what each is.
DEFAULT_LISTS = MappingProxyType({
    "entropy_curves": "compared by default in entropy_curves and extrapolation_table",
    "entropy_figures": "drawn by default in the entropy figures (softmax_scale.plotting.entropy)",
    "contrastive": "the fixed published temperatures beside the optimum in temperature_table",
})


@dataclass(frozen=True)
class Style:
    """How a scheme is drawn: one look per figure family, read by every figure that draws schemes.

    Attributes
    ----------
    color : str
        Colour in the figures of the formulas (entropy against ``n``, the phase diagram).
    linestyle : str or tuple
        Matplotlib line style there.
    linewidth : float
        Line width there.
    marker : str
        Marker where a figure marks points (the extrapolation drift, the decoder's losses).
    label : str
        Legend text; ``""`` gives the scheme's key.
    decoder_color : str or None
        Colour in the real decoder's figures; ``None`` gives ``color``.
    train_color : str or None
        Colour in the training runs' figures; ``None`` gives ``decoder_color``.
    """

    color: str = "0.3"
    linestyle: str | tuple = "-"
    linewidth: float = 1.5
    marker: str = "o"
    label: str = ""
    decoder_color: str | None = None
    train_color: str | None = None

    def __post_init__(self):
        if self.decoder_color is None:
            object.__setattr__(self, "decoder_color", self.color)
        if self.train_color is None:
            object.__setattr__(self, "train_color", self.decoder_color)

    def line(self) -> dict:
        """``plot`` keywords of the formulas' figures: ``color``, ``ls``, ``lw``."""
        return {"color": self.color, "ls": self.linestyle, "lw": self.linewidth}


@dataclass(frozen=True)
class Scheme:
    """One published scale: what it is, how it is computed, checked, pinned, trained and drawn.

    Attributes
    ----------
    key : str
        Name passed as ``scheme``.
    applies_to : str
        ``"qk"`` (multiplies ``q.k``) or ``"cosine"`` (multiplies a cosine).
    formula : str
        The multiplier ``m`` as text.
    multiplier : callable
        The formula itself: ``(n, d, params) -> m``, ``n`` a 1-D float64 array of numbers of
        keys (``>= 1``), ``d`` the head dimension, ``params`` every parameter, checked.
    defaults : dict
        Published defaults of the parameters (keyword arguments of :func:`attention_scale`).
    source : str
        Where it comes from.
    note : str
        Position form, traps, and the choice made here.
    check : callable or None
        ``params -> params``: checks every parameter (an error naming it) and returns the
        values the formula is given; ``None`` for a scheme without parameters.
    pin : callable or None
        The rule that pins the scheme to ``standard`` at a training length:
        ``L -> {parameter: value}`` (see :func:`pinned`); ``None`` for a scheme
        with no training length (it is the same at every ``L``).
    pin_rule : str
        The pinning rule as text, e.g. ``"train_length = L"``; ``""`` when there is none.
    train_names : dict
        The names under which the training harness trains this scale, each with the
        parameter the run's ``alpha`` sets (``None``: none); ``{}``: not trained.
    learned : str or None
        The parameter learned per head when the scale is trained (initialised by the pinning rule).
    default_in : frozenset of str
        The default lists (:data:`DEFAULT_LISTS`) the scheme belongs to.
    style : Style
        How figures draw it.
    """

    key: str
    applies_to: str
    formula: str
    multiplier: Callable[[np.ndarray, int, dict], np.ndarray]
    defaults: dict
    source: str
    note: str = ""
    check: Callable[[dict], dict] | None = None
    pin: Callable[[int], dict] | None = None
    pin_rule: str = ""
    train_names: Mapping = field(default_factory=dict)
    learned: str | None = None
    default_in: frozenset = frozenset()
    style: Style = Style()

    def __post_init__(self):
        if not isinstance(self.key, str) or not self.key.isidentifier():
            raise ValueError(f"`key` must be a name (letters, digits, underscores), got {self.key!r}")
        check_choice(self.applies_to, "applies_to", ("qk", "cosine"))
        if not callable(self.multiplier):
            raise TypeError(f"`multiplier` must be a function (n, d, params) -> m, got {self.multiplier!r}")
        if not isinstance(self.defaults, Mapping):
            raise TypeError(f"`defaults` must be a dict of parameter -> value, got {self.defaults!r}")
        if self.check is not None and not callable(self.check):
            raise TypeError(f"`check` must be a function params -> params or None, got {self.check!r}")
        if (self.pin is None) != (self.pin_rule == ""):
            raise ValueError(f"`pin_rule` must describe `pin` (both given or neither), got pin={self.pin!r}, "
                             f"pin_rule={self.pin_rule!r}")
        if self.pin is not None and not set(self.pin(2)) <= set(self.defaults):
            raise ValueError(f"`pin` must set parameters of the scheme {sorted(self.defaults)}, got {sorted(self.pin(2))}")
        for name, param in dict(self.train_names).items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"`train_names` must map names to parameters, got the name {name!r}")
            if param is not None and param not in self.defaults:
                raise ValueError(f"`train_names`: {name!r} sets {param!r}, not a parameter of {sorted(self.defaults)}")
        if self.learned is not None and self.learned not in self.defaults:
            raise ValueError(f"`learned` must be a parameter of {sorted(self.defaults)}, got {self.learned!r}")
        if self.applies_to != "qk" and (self.train_names or self.learned is not None):
            raise ValueError("`train_names` and `learned` are for schemes that scale q.k")
        if not isinstance(self.default_in, frozenset) or not self.default_in <= set(DEFAULT_LISTS):
            raise ValueError(f"`default_in` must be a frozenset of {sorted(DEFAULT_LISTS)}, got {self.default_in!r}")
        if not isinstance(self.style, Style):
            raise TypeError(f"`style` must be a Style, got {self.style!r}")
        object.__setattr__(self, "train_names", MappingProxyType(dict(self.train_names)))
        if not self.style.label:
            object.__setattr__(self, "style", dataclasses.replace(self.style, label=self.key))


# ---------------------------------------------------------------------------------------------
# The registry


_REGISTRY: dict[str, Scheme] = {}

#: key -> Scheme, in the order of registration (the published ones first); read-only, follows
#: :func:`register_scheme`.
SCHEMES = MappingProxyType(_REGISTRY)


class SchemeKeys(Sequence):
    """Names read from the registry at every use, in registry order: a view that follows registrations.

    Parameters
    ----------
    names : callable
        ``Scheme -> iterable of str``: the names one scheme contributes.
    """

    def __init__(self, names: Callable[[Scheme], Iterable[str]]):
        self._names = names

    def _current(self) -> tuple:
        return tuple(name for s in _REGISTRY.values() for name in self._names(s))

    def __getitem__(self, i):
        return self._current()[i]

    def __len__(self) -> int:
        return len(self._current())

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __contains__(self, name) -> bool:
        return name in self._current()

    def __eq__(self, other):
        if isinstance(other, (SchemeKeys, tuple, list)):
            return self._current() == tuple(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._current())


#: Keys of the schemes that scale ``q.k`` / a cosine.
QK_SCHEMES = SchemeKeys(lambda s: (s.key,) if s.applies_to == "qk" else ())
COSINE_SCHEMES = SchemeKeys(lambda s: (s.key,) if s.applies_to == "cosine" else ())
#: Every training name (:attr:`Scheme.train_names`).
TRAIN_NAMES = SchemeKeys(lambda s: tuple(s.train_names))


def default_list(name: str) -> SchemeKeys:
    """The keys of the schemes in the default list ``name`` (:data:`DEFAULT_LISTS`), following registrations.

    Parameters
    ----------
    name : str
        A key of :data:`DEFAULT_LISTS`.

    Returns
    -------
    SchemeKeys
    """
    check_choice(name, "name", DEFAULT_LISTS)
    return SchemeKeys(lambda s: (s.key,) if name in s.default_in else ())


def register_scheme(scheme: Scheme) -> Scheme:
    """Add a scheme to the registry: every caller of the registry then knows it.

    Parameters
    ----------
    scheme : Scheme
        A key not yet registered, training names that are neither another scheme's key nor
        another scheme's training names.

    Returns
    -------
    Scheme
        ``scheme``.
    """
    if not isinstance(scheme, Scheme):
        raise TypeError(f"`scheme` must be a Scheme, got {scheme!r}")
    if scheme.key in _REGISTRY:
        raise ValueError(f"`scheme`: the key {scheme.key!r} is registered already")
    for name in scheme.train_names:
        if name != scheme.key and name in _REGISTRY:
            raise ValueError(f"`scheme`: the training name {name!r} is the key of another scheme")
        if name in TRAIN_NAMES:
            raise ValueError(f"`scheme`: the training name {name!r} is registered already")
    if scheme.key in TRAIN_NAMES:
        raise ValueError(f"`scheme`: the key {scheme.key!r} is a training name of another scheme")
    _REGISTRY[scheme.key] = scheme
    return scheme


def unregister_scheme(key: str) -> Scheme:
    """Remove a scheme added by :func:`register_scheme` (the published ones stay).

    Parameters
    ----------
    key : str
        The key of a scheme added by :func:`register_scheme`.

    Returns
    -------
    Scheme
        The scheme removed.
    """
    check_choice(key, "key", _REGISTRY)
    if key in _PUBLISHED_KEYS:
        raise ValueError(f"`key`: {key!r} is a published scheme; only added ones can be removed")
    return _REGISTRY.pop(key)


@contextlib.contextmanager
def registered(scheme: Scheme):
    """Register ``scheme`` for the duration of a ``with`` block, then remove it.

    Parameters
    ----------
    scheme : Scheme
        As in :func:`register_scheme`.

    Yields
    ------
    Scheme
        ``scheme``.
    """
    register_scheme(scheme)
    try:
        yield scheme
    finally:
        unregister_scheme(scheme.key)


def list_schemes() -> list[Scheme]:
    """Every scheme with its formula, defaults and source, in registry order.

    Returns
    -------
    list of Scheme
    """
    return list(_REGISTRY.values())


def train_scheme(name: str, alpha: float | None = None) -> tuple[Scheme, dict]:
    """The scheme a training name stands for, and the parameters the run's ``alpha`` sets.

    Parameters
    ----------
    name : str
        One of :data:`TRAIN_NAMES` (e.g. ``alpha_star``, ``alpha``).
    alpha : float, optional
        The run's constant, given to the parameter the name sets (``alpha`` sets ``value``).

    Returns
    -------
    (Scheme, dict)
    """
    check_choice(name, "scheme", TRAIN_NAMES)
    scheme = next(s for s in _REGISTRY.values() if name in s.train_names)
    param = scheme.train_names[name]
    return scheme, ({} if param is None else {param: alpha})


# ---------------------------------------------------------------------------------------------
# The published schemes: checks and formulas


def _factor(value, name, *, optional=True):
    """An extension factor ``s >= 1`` (``None`` when ``optional``: the dynamic form)."""
    if value is None and optional:
        return None
    v = check_positive_float(value, name)
    if v < 1:
        raise ValueError(f"`{name}` must be an extension factor >= 1 (not a length), got {v!r}")
    return v


def _optional(value, check, name, **kw):
    return None if value is None else check(value, name, **kw)


def _check_entropy_invariant(p):
    return {"train_length": check_int(p["train_length"], "train_length", minimum=2),
            "kappa": _optional(p["kappa"], check_positive_float, "kappa"),
            "min_n": _optional(p["min_n"], check_int, "min_n", minimum=1)}


def _check_qwen(p):
    return {"train_length": check_int(p["train_length"], "train_length", minimum=2),
            "max_position": _optional(p["max_position"], check_int, "max_position", minimum=1)}


def _check_extension(p):
    return {"train_length": check_int(p["train_length"], "train_length", minimum=2),
            "factor": _factor(p["factor"], "factor")}


def _check_deepseek(p):
    return {"factor": _factor(p["factor"], "factor", optional=False),
            "mscale_all_dim": check_positive_float(p["mscale_all_dim"], "mscale_all_dim", allow_zero=True),
            "d_qk": _optional(p["d_qk"], check_int, "d_qk", minimum=1)}


def _check_llama4(p):
    return {"floor_scale": check_int(p["floor_scale"], "floor_scale", minimum=1),
            "attn_scale": check_positive_float(p["attn_scale"], "attn_scale", allow_zero=True)}


def _check_positive(*names):
    def check(p):
        return {k: check_positive_float(p[k], k) for k in names}

    return check


def _check_value(p):
    return {"value": _optional(p["value"], check_positive_float, "value")}


def _standard(n, d, p):
    return np.full_like(n, 1.0 / math.sqrt(d))


def _chiang_cholak(n, d, p):
    return np.log(n) / math.sqrt(d)


def _entropy_invariant(n, d, p):
    if p["kappa"] is not None:
        return p["kappa"] * np.log(n) / d
    logn = np.log(n) if p["min_n"] is None else np.log(np.maximum(n, p["min_n"]))
    return logn / (math.log(p["train_length"]) * math.sqrt(d))


def _qwen_logn(n, d, p):
    L, cap = p["train_length"], p["max_position"]
    if cap is not None and np.any(n > cap):
        raise ValueError(f"`n` must be <= max_position={cap} (Qwen's released logn table stops there), got {n.max():.0f}")
    return np.where(n > L, np.log(n) / math.log(L), 1.0) / math.sqrt(d)


def _extension(n, p):
    """YaRN's and LongRoPE's extension factor: fixed, or dynamic ``max(1, n / L)``."""
    s = p["factor"]
    return np.maximum(1.0, n / p["train_length"]) if s is None else np.full_like(n, s)


def _yarn(n, d, p):
    return (0.1 * np.log(_extension(n, p)) + 1.0) ** 2 / math.sqrt(d)


def _longrope(n, d, p):
    return (1.0 + np.log(_extension(n, p)) / math.log(p["train_length"])) / math.sqrt(d)


def _deepseek_yarn(n, d, p):
    dqk = d if p["d_qk"] is None else p["d_qk"]
    return np.full_like(n, (0.1 * p["mscale_all_dim"] * math.log(p["factor"]) + 1.0) ** 2 / math.sqrt(dqk))


def _llama4(n, d, p):
    return (1.0 + p["attn_scale"] * np.log1p(np.floor(n / p["floor_scale"]))) / math.sqrt(d)  # (pos + 1) = n


def _ssmax(n, d, p):
    return p["s"] * np.log(n) / math.sqrt(d)


def _gradient_optimal(n, d, p):
    rd = math.sqrt(d)
    if p["value"] is not None:
        return np.full_like(n, p["value"] / rd)
    from ..optimize import optimal_alpha

    out = np.full_like(n, np.nan)
    ok = n >= 2
    if ok.any():  # optimal_alpha refuses an empty array
        out[ok] = np.asarray(optimal_alpha(n[ok])) / rd
    out[~ok] = 0.0  # one key: every scale gives the same (one-hot) softmax
    return out


def _critical(n, d, p):
    return np.sqrt(2.0 * np.log(n)) / math.sqrt(d)


def _clamped_scale(n, d, p):
    return np.full_like(n, min(p["scale"], 100.0))


def _scale(n, d, p):
    return np.full_like(n, p["scale"])


def _inverse_temperature(n, d, p):
    return np.full_like(n, 1.0 / p["temperature"])


def _cosine_gradient_optimal(n, d, p):
    from ..optimize import optimal_alpha

    out = np.zeros_like(n)
    ok = n >= 2
    if ok.any():
        out[ok] = np.asarray(optimal_alpha(n[ok], dist="cosine", d=max(d, 2)))
    return out


def _pin_train_length(L):
    return {"train_length": L}


def _pin_floor_scale(L):
    # Llama 4's first temperature step at n = floor_scale: put it at the training length
    return {"floor_scale": L}


def _pin_ssmax(L):
    # s log n = 1 at n = L: equal to standard at the training length, like entropy_invariant
    return {"s": 1.0 / math.log(L)}


_ENTROPY = frozenset({"entropy_curves", "entropy_figures"})

#: The published scales, in the order they are listed (q.k first, then cosines).
_PUBLISHED = (
    Scheme(STANDARD, "qk", "1/sqrt(d)", _standard, {}, "Vaswani et al. 2017, arXiv 1706.03762",
           train_names={STANDARD: None}, default_in=_ENTROPY,
           style=Style("tab:blue", "-", 1.8, decoder_color="C0")),
    Scheme("chiang_cholak", "qk", "log(n)/sqrt(d)", _chiang_cholak, {}, "Chiang & Cholak, arXiv 2202.12172",
           "logits multiplied by log n on top of the usual 1/sqrt(d)", default_in=_ENTROPY,
           style=Style("tab:orange", "-", 1.8)),
    Scheme(ENTROPY_INVARIANT, "qk", "log_L(n)/sqrt(d) = log(n)/(log(L) sqrt(d)); or kappa log(n)/d",
           _entropy_invariant, {"train_length": 512, "kappa": None, "min_n": None},
           "Su, kexue.fm/archives/8823 and 9034",
           "pinned to standard at n = L, no clamp at 1 (below L it is smaller than standard); "
           "min_n=16 gives the reference code's log(max(n, 16))/log(512)",
           check=_check_entropy_invariant, pin=_pin_train_length, pin_rule="train_length = L",
           train_names={ENTROPY_INVARIANT: None}, default_in=_ENTROPY,
           # wide and solid: entropy_invariant, qwen_logn, longrope and ssmax coincide past L once
           # pinned, so the others are drawn dashed over it and each stays visible
           style=Style("tab:green", "-", 3.2, decoder_color="C3")),
    Scheme(QWEN_LOGN, "qk", "max(1, log_L(i))/sqrt(d), i the 1-indexed position", _qwen_logn,
           {"train_length": 8192, "max_position": None}, "Qwen (v1) modeling_qwen.py, use_logn_attn",
           "position form; inference only; released table stops at 32,767 positions: "
           "max_position=None continues the formula, max_position=32767 raises beyond it",
           check=_check_qwen, pin=_pin_train_length, pin_rule="train_length = L", default_in=_ENTROPY,
           style=Style("tab:red", (0, (5, 2.5)), 1.6, decoder_color="C1")),
    Scheme(YARN, "qk", "(0.1 ln(s) + 1)^2/sqrt(d) for s > 1, else 1/sqrt(d); dynamic s = max(1, n/L)", _yarn,
           {"train_length": 4096, "factor": None}, "Peng et al., arXiv 2309.00071",
           "mscale applied to q and k, hence the square; s is the extension factor, never n; "
           "factor=None is the dynamic form, L defaults to Llama 2's 4096",
           check=_check_extension, pin=_pin_train_length, pin_rule="train_length = L", default_in=_ENTROPY,
           style=Style("tab:purple", "-", 1.8, decoder_color="C2")),
    Scheme("deepseek_yarn", "qk", "(0.1 mscale_all_dim ln(s) + 1)^2/sqrt(d_qk)", _deepseek_yarn,
           {"factor": 40.0, "mscale_all_dim": 1.0, "d_qk": None}, "DeepSeek-V3 config and modeling code",
           "constant in n; DeepSeek-V3 has d_qk = 192 (d_qk=None uses d)", check=_check_deepseek),
    Scheme("longrope", "qk", "(1 + ln(s)/ln(L))/sqrt(d) = log_L(sL)/sqrt(d); dynamic s = max(1, n/L)", _longrope,
           {"train_length": 4096, "factor": None}, "LongRoPE / Phi-3",
           "sqrt(1 + ln s/ln L) on q and k; Phi-3-mini-128k fixes s = 32, L = 4096; factor=None is dynamic",
           check=_check_extension, pin=_pin_train_length, pin_rule="train_length = L",
           default_in=frozenset({"entropy_curves"}), style=Style("tab:cyan", (0, (2, 2)), 1.6)),
    Scheme("llama4", "qk", "(1 + 0.1 ln(1 + floor((pos+1)/8192)))/sqrt(d), pos = n - 1", _llama4,
           {"floor_scale": 8192, "attn_scale": 0.1}, "Llama 4 modeling code, attn_temperature_tuning",
           "position form, NoPE layers only; floor((pos+1)/8192) = floor(n/8192), first step at n = 8192",
           check=_check_llama4, pin=_pin_floor_scale, pin_rule="floor_scale = L", default_in=_ENTROPY,
           style=Style("tab:brown", "-", 1.8, decoder_color="C4")),
    Scheme(SSMAX, "qk", "s log(n)/sqrt(d)", _ssmax, {"s": 0.43}, "Nakanishi, arXiv 2501.19399",
           "s learned per head; a multiplication, not the no-op shift exp(x - s log n)",
           check=_check_positive("s"), pin=_pin_ssmax, pin_rule="s = 1/ln L", train_names={SSMAX: None},
           learned="s", default_in=_ENTROPY,
           style=Style("magenta", (0, (6, 2, 1, 2)), 1.3, decoder_color="C5", train_color="C2")),
    Scheme("gradient_optimal", "qk", "alpha*(n)/sqrt(d), alpha* the mean-field maximiser for normal scores",
           _gradient_optimal, {"value": None}, "Su, kexue.fm/archives/9812",
           "about 0.84 sqrt(log n); value=2.5 gives the note's fixed compromise 2.5/sqrt(d)",
           check=_check_value, train_names={"alpha_star": None, "alpha": "value"}, default_in=_ENTROPY,
           style=Style("tab:gray", "-", 1.8, train_color="C1")),
    Scheme(CRITICAL, "qk", "sqrt(2 log n)/sqrt(d)", _critical, {},
           "random-energy-model freezing; cf. Chen, Lin, Polyanskiy & Rigollet, arXiv 2510.05554",
           default_in=_ENTROPY, style=Style("tab:olive", "-", 1.8)),
    Scheme("clip", "cosine", "min(scale, 100), learned, initial 1/0.07", _clamped_scale, {"scale": 1 / 0.07},
           "CLIP / open_clip", check=_check_positive("scale"), default_in=frozenset({"contrastive"})),
    Scheme("swin_v2", "cosine", "min(scale, 100), learned per head, initial 10", _clamped_scale, {"scale": 10.0},
           "Swin Transformer V2", check=_check_positive("scale"), default_in=frozenset({"contrastive"})),
    Scheme("am_softmax", "cosine", "30 (margin 0.35 on the target, not modelled)", _scale, {"scale": 30.0},
           "Wang et al., arXiv 1801.05599", check=_check_positive("scale"), default_in=frozenset({"contrastive"})),
    Scheme("simcse", "cosine", "1/tau, tau = 0.05", _inverse_temperature, {"temperature": 0.05},
           "Gao et al., SimCSE", check=_check_positive("temperature"), default_in=frozenset({"contrastive"})),
    Scheme("simclr", "cosine", "1/tau, tau = 0.1 (batch 4096); 0.5 on CIFAR-10", _inverse_temperature,
           {"temperature": 0.1}, "Chen et al., SimCLR", check=_check_positive("temperature"),
           default_in=frozenset({"contrastive"})),
    Scheme("cosine_gradient_optimal", "cosine", "alpha*(n; d), mean-field maximiser for cosine(d) scores",
           _cosine_gradient_optimal, {}, "Su, kexue.fm/archives/9812", "about 3.5 log n at d = 128"),
)
_PUBLISHED_KEYS = frozenset(s.key for s in _PUBLISHED)
for _s in _PUBLISHED:
    register_scheme(_s)
del _s


# ---------------------------------------------------------------------------------------------
# Evaluation


def _check_positions(n) -> tuple[np.ndarray, bool]:
    """Numbers of keys / 1-indexed positions: integers >= 1 (a query at position 1 sees one key)."""
    return check_n_array(n, "n", minimum=1)


def _params(scheme, params):
    """The scheme and its parameters (defaults, then ``params``), checked."""
    check_choice(scheme, "scheme", _REGISTRY)
    info = _REGISTRY[scheme]
    unknown = set(params) - set(info.defaults)
    if unknown:
        allowed = sorted(info.defaults) or "none"
        raise ValueError(f"scheme {scheme!r} has no parameter(s) {sorted(unknown)}; its parameters: {allowed}")
    full = {**info.defaults, **params}
    return info, full, (full if info.check is None else info.check(full))


def attention_scale(n, d, scheme=STANDARD, **params):
    """The multiplier a published scheme puts in front of ``q.k`` (or of a cosine).

    Parameters
    ----------
    n : int or array_like
        Number of keys the query sees; in a causal model its 1-indexed
        position (``>= 1``).  Vectorised.
    d : int
        Head dimension (``>= 1``; ``>= 2`` for ``cosine_gradient_optimal``).
    scheme : str
        A key of :func:`list_schemes`.
    **params
        The scheme's parameters; published defaults in ``SCHEMES[scheme].defaults``
        (e.g. ``train_length=512`` for ``entropy_invariant``).

    Returns
    -------
    float or ndarray
        ``m``; a float for scalar ``n``.

    Examples
    --------
    >>> import softmax_scale.schemes as sc
    >>> round(sc.attention_scale(4096, 64, "entropy_invariant"), 6)  # log_512(4096)/8
    0.166667
    """
    info, _, checked = _params(scheme, params)
    nn, scalar = _check_positions(n)
    d = check_int(d, "d", minimum=1)
    out = info.multiplier(nn, d, checked)
    return float(out[0]) if scalar else out


def scheme_alpha(n, d, scheme=STANDARD, score_model="normal", **params):
    """The softmax scale ``alpha`` on unit scores that a scheme implies under a score model.

    Parameters
    ----------
    n, d, scheme, **params
        As in :func:`attention_scale`.
    score_model : {"normal", "cosine"}
        ``"normal"``: i.i.d. unit-variance entries, ``alpha = m sqrt(d)``;
        ``"cosine"``: q, k of norm ``sqrt(d)``, ``alpha = m d``.  For a
        cosine scheme ``alpha = m`` (cosine) or ``m / sqrt(d)`` (normal).

    Returns
    -------
    float or ndarray
    """
    check_choice(score_model, "score_model", SCORE_MODELS)
    m = attention_scale(n, d, scheme, **params)
    d = int(d)
    if _REGISTRY[scheme].applies_to == "qk":
        return m * (math.sqrt(d) if score_model == "normal" else float(d))
    return m / math.sqrt(d) if score_model == "normal" else m


@dataclass(frozen=True)
class PinnedScheme:
    """A scheme with every parameter fixed, pinned at a training length (see :func:`pinned`).

    Attributes
    ----------
    scheme : str
        The scheme's key.
    pin_length : int or None
        ``L`` the scheme is pinned at; ``None`` when it was not pinned.
    params : Mapping
        Every parameter of the scheme: published defaults, then the pinning rule's values,
        then the caller's overrides (read-only).
    """

    scheme: str
    pin_length: int | None
    params: Mapping = field(default_factory=dict)

    def scale(self, n, d):
        """The multiplier ``m`` on ``q.k`` (or on a cosine): :func:`attention_scale` with :attr:`params`."""
        return attention_scale(n, d, self.scheme, **self.params)

    def factor(self, n, d):
        """``m(n) / standard(n)``: the factor on ``q.k / sqrt(d)``; exactly 1 for ``standard``.

        Only for schemes that scale ``q.k``.
        """
        if _REGISTRY[self.scheme].applies_to != "qk":
            raise ValueError(f"`scheme` must scale q.k (not a cosine scheme) to give a factor on q.k/sqrt(d), "
                             f"got {self.scheme!r}")
        return self.scale(n, d) / attention_scale(n, d, STANDARD)

    def alpha(self, n, d, score_model="normal"):
        """The softmax scale on unit scores under ``score_model`` (:func:`scheme_alpha`)."""
        return scheme_alpha(n, d, self.scheme, score_model, **self.params)


def pinned(scheme: str, pin_length: int | None = None, **params) -> PinnedScheme:
    """A scheme pinned to ``standard`` at the length ``L`` (a model's training length): the one rule used everywhere.

    Each scheme's rule is written once, in its registry entry (:attr:`Scheme.pin`):

    - ``entropy_invariant``, ``qwen_logn``, ``yarn``, ``longrope``: ``train_length = L``;
    - ``llama4``: ``floor_scale = L`` (its first temperature step at ``n = L``);
    - ``ssmax``: ``s = 1 / ln L``, so ``s log n = 1`` at ``n = L`` (its published ``s`` is
      learned with the model; applied to a model trained without it, ``s = 0.43`` would
      multiply the logits by ``0.43 ln L``);
    - every other scheme has no training length and is returned with its published defaults.

    Parameters
    ----------
    scheme : str
        A key of :func:`list_schemes`.
    pin_length : int, optional
        ``L >= 2``; ``None`` keeps the published defaults (no pinning).
    **params
        Overrides applied after the pinning rule (e.g. ``min_n=16``).

    Returns
    -------
    PinnedScheme

    Examples
    --------
    >>> import softmax_scale.schemes as sc
    >>> sc.pinned("qwen_logn", 512).params["train_length"]
    512
    >>> float(sc.pinned("ssmax", 64).factor(64, 32))
    1.0
    """
    check_choice(scheme, "scheme", _REGISTRY)
    info = _REGISTRY[scheme]
    L = None if pin_length is None else check_int(pin_length, "pin_length", minimum=2)
    pin = info.pin(L) if (info.pin is not None and L is not None) else {}
    _, full, _ = _params(scheme, {**pin, **params})
    return PinnedScheme(scheme, L, MappingProxyType(full))


def scheme_factor(n, d, scheme=STANDARD, pin_length=None, **params) -> np.ndarray:
    """The per-query factor ``m(n) / standard(n)`` of a scheme pinned at ``pin_length``, as float64.

    The one factor on ``q.k / sqrt(d)`` the real decoders and the training harness apply:
    ``pinned(scheme, pin_length, **params).factor(n, d)``.

    Parameters
    ----------
    n : int or array_like
        Number of keys each query sees (``>= 1``).
    d : int
        Head dimension.
    scheme : str
        A key of :data:`QK_SCHEMES`.
    pin_length : int, optional
        ``L`` the scheme is pinned at (:func:`pinned`).
    **params
        Overrides after the pinning rule.

    Returns
    -------
    ndarray
    """
    return np.asarray(pinned(scheme, pin_length, **params).factor(n, d), dtype=np.float64)

"""Published softmax scales, side by side (the rows of ``SCHEMES.md``).

:func:`attention_scale` returns the multiplier ``m`` a scheme puts in front of
``q.k`` (first table) or in front of a cosine (second table), vectorised over
the number of keys ``n``.  In a causal model ``n`` is the query's 1-indexed
position: the position-dependent schemes (``qwen_logn``, ``llama4``) are
implemented in that position form.

:func:`scheme_alpha` turns ``m`` into the softmax scale ``alpha`` on unit
scores under a score model:

* ``"normal"``: q, k with i.i.d. unit-variance entries, so
  ``q.k = sqrt(d) z`` with ``z ~ N(0, 1)`` and ``alpha = m sqrt(d)``;
* ``"cosine"``: q, k of norm ``sqrt(d)``, so ``q.k = d cos`` and
  ``alpha = m d`` on cosine(d) scores.

A cosine-table scale multiplies the cosine itself: ``alpha = m`` on cosine
scores and ``alpha = m / sqrt(d)`` on normal scores (``cos ~ z / sqrt(d)``).

Choices made where the public code is ambiguous (each also in the scheme's
row of :func:`list_schemes`):

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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .._util.validation import check_choice, check_int, check_n_array, check_positive_float

__all__ = [
    "COSINE_SCHEMES",
    "QK_SCHEMES",
    "SCHEMES",
    "SCORE_MODELS",
    "PinnedScheme",
    "SchemeInfo",
    "attention_scale",
    "list_schemes",
    "pinned",
    "scheme_alpha",
]

SCORE_MODELS = ("normal", "cosine")


@dataclass(frozen=True)
class SchemeInfo:
    """One published scale.

    Attributes
    ----------
    key : str
        Name passed as ``scheme``.
    applies_to : str
        ``"qk"`` (multiplies ``q.k``) or ``"cosine"`` (multiplies a cosine).
    formula : str
        The multiplier ``m`` as text.
    defaults : dict
        Published defaults of the parameters (keyword arguments of
        :func:`attention_scale`).
    source : str
        Where it comes from.
    note : str
        Position form, traps, and the choice made here.
    pin : callable or None
        The rule that pins the scheme to ``standard`` at a training length:
        ``L -> {parameter: value}`` (see :func:`pinned`); ``None`` for a scheme
        with no training length (it is the same at every ``L``).
    """

    key: str
    applies_to: str
    formula: str
    defaults: dict
    source: str
    note: str = ""
    pin: Callable[[int], dict] | None = None

    @property
    def pin_rule(self) -> str:
        """The pinning rule as text, e.g. ``"train_length = L"``; ``""`` when there is none."""
        if self.pin is None:
            return ""
        return ", ".join(f"{k} = {_PIN_TEXT.get((self.key, k), 'L')}" for k in self.pin(2))


def _pin_train_length(L):
    return {"train_length": L}


def _pin_floor_scale(L):
    # Llama 4's first temperature step at n = floor_scale: put it at the training length
    return {"floor_scale": L}


def _pin_ssmax(L):
    # s log n = 1 at n = L: equal to standard at the training length, like entropy_invariant
    return {"s": 1.0 / math.log(L)}


#: How each pinned parameter depends on L, as text (``L`` when it is L itself).
_PIN_TEXT = {("ssmax", "s"): "1/ln L"}

_ROWS = (
    SchemeInfo("standard", "qk", "1/sqrt(d)", {}, "Vaswani et al. 2017, arXiv 1706.03762"),
    SchemeInfo("chiang_cholak", "qk", "log(n)/sqrt(d)", {}, "Chiang & Cholak, arXiv 2202.12172",
               "logits multiplied by log n on top of the usual 1/sqrt(d)"),
    SchemeInfo("entropy_invariant", "qk", "log_L(n)/sqrt(d) = log(n)/(log(L) sqrt(d)); or kappa log(n)/d",
               {"train_length": 512, "kappa": None, "min_n": None},
               "Su, kexue.fm/archives/8823 and 9034",
               "pinned to standard at n = L, no clamp at 1 (below L it is smaller than standard); "
               "min_n=16 gives the reference code's log(max(n, 16))/log(512)",
               pin=_pin_train_length),
    SchemeInfo("qwen_logn", "qk", "max(1, log_L(i))/sqrt(d), i the 1-indexed position",
               {"train_length": 8192, "max_position": None},
               "Qwen (v1) modeling_qwen.py, use_logn_attn",
               "position form; inference only; released table stops at 32,767 positions: "
               "max_position=None continues the formula, max_position=32767 raises beyond it",
               pin=_pin_train_length),
    SchemeInfo("yarn", "qk", "(0.1 ln(s) + 1)^2/sqrt(d) for s > 1, else 1/sqrt(d); dynamic s = max(1, n/L)",
               {"train_length": 4096, "factor": None},
               "Peng et al., arXiv 2309.00071",
               "mscale applied to q and k, hence the square; s is the extension factor, never n; "
               "factor=None is the dynamic form, L defaults to Llama 2's 4096",
               pin=_pin_train_length),
    SchemeInfo("deepseek_yarn", "qk", "(0.1 mscale_all_dim ln(s) + 1)^2/sqrt(d_qk)",
               {"factor": 40.0, "mscale_all_dim": 1.0, "d_qk": None},
               "DeepSeek-V3 config and modeling code",
               "constant in n; DeepSeek-V3 has d_qk = 192 (d_qk=None uses d)"),
    SchemeInfo("longrope", "qk", "(1 + ln(s)/ln(L))/sqrt(d) = log_L(sL)/sqrt(d); dynamic s = max(1, n/L)",
               {"train_length": 4096, "factor": None},
               "LongRoPE / Phi-3",
               "sqrt(1 + ln s/ln L) on q and k; Phi-3-mini-128k fixes s = 32, L = 4096; factor=None is dynamic",
               pin=_pin_train_length),
    SchemeInfo("llama4", "qk", "(1 + 0.1 ln(1 + floor((pos+1)/8192)))/sqrt(d), pos = n - 1",
               {"floor_scale": 8192, "attn_scale": 0.1},
               "Llama 4 modeling code, attn_temperature_tuning",
               "position form, NoPE layers only; floor((pos+1)/8192) = floor(n/8192), first step at n = 8192",
               pin=_pin_floor_scale),
    SchemeInfo("ssmax", "qk", "s log(n)/sqrt(d)", {"s": 0.43}, "Nakanishi, arXiv 2501.19399",
               "s learned per head; a multiplication, not the no-op shift exp(x - s log n)",
               pin=_pin_ssmax),
    SchemeInfo("gradient_optimal", "qk", "alpha*(n)/sqrt(d), alpha* the mean-field maximiser for normal scores",
               {"value": None}, "Su, kexue.fm/archives/9812",
               "about 0.84 sqrt(log n); value=2.5 gives the note's fixed compromise 2.5/sqrt(d)"),
    SchemeInfo("critical", "qk", "sqrt(2 log n)/sqrt(d)", {},
               "random-energy-model freezing; cf. Chen, Lin, Polyanskiy & Rigollet, arXiv 2510.05554"),
    SchemeInfo("clip", "cosine", "min(scale, 100), learned, initial 1/0.07", {"scale": 1 / 0.07}, "CLIP / open_clip"),
    SchemeInfo("swin_v2", "cosine", "min(scale, 100), learned per head, initial 10", {"scale": 10.0},
               "Swin Transformer V2"),
    SchemeInfo("am_softmax", "cosine", "30 (margin 0.35 on the target, not modelled)", {"scale": 30.0},
               "Wang et al., arXiv 1801.05599"),
    SchemeInfo("simcse", "cosine", "1/tau, tau = 0.05", {"temperature": 0.05}, "Gao et al., SimCSE"),
    SchemeInfo("simclr", "cosine", "1/tau, tau = 0.1 (batch 4096); 0.5 on CIFAR-10", {"temperature": 0.1},
               "Chen et al., SimCLR"),
    SchemeInfo("cosine_gradient_optimal", "cosine", "alpha*(n; d), mean-field maximiser for cosine(d) scores", {},
               "Su, kexue.fm/archives/9812", "about 3.5 log n at d = 128"),
)

#: key -> SchemeInfo, in the order of SCHEMES.md.
SCHEMES = {row.key: row for row in _ROWS}
QK_SCHEMES = tuple(k for k, r in SCHEMES.items() if r.applies_to == "qk")
COSINE_SCHEMES = tuple(k for k, r in SCHEMES.items() if r.applies_to == "cosine")


def list_schemes() -> list[SchemeInfo]:
    """Every scheme with its formula, defaults and source, in the order of ``SCHEMES.md``.

    Returns
    -------
    list of SchemeInfo
    """
    return list(_ROWS)


def _check_positions(n) -> tuple[np.ndarray, bool]:
    """Numbers of keys / 1-indexed positions: integers >= 1 (a query at position 1 sees one key)."""
    return check_n_array(n, "n", minimum=1)


def _factor(value, name):
    if value is None:
        return None
    v = check_positive_float(value, name)
    if v < 1:
        raise ValueError(f"`{name}` must be an extension factor >= 1 (not a length), got {v!r}")
    return v


def _qk(key, n, d, p):
    """Multiplier on q.k for the first table; ``n`` a float array."""
    rd = math.sqrt(d)
    logn = np.log(n)
    if key == "standard":
        return np.full_like(n, 1.0 / rd)
    if key == "chiang_cholak":
        return logn / rd
    if key == "entropy_invariant":
        if p["kappa"] is not None:
            return check_positive_float(p["kappa"], "kappa") * logn / d
        L = check_int(p["train_length"], "train_length", minimum=2)
        if p["min_n"] is not None:
            logn = np.log(np.maximum(n, check_int(p["min_n"], "min_n", minimum=1)))
        return logn / (math.log(L) * rd)
    if key == "qwen_logn":
        L = check_int(p["train_length"], "train_length", minimum=2)
        if p["max_position"] is not None:
            cap = check_int(p["max_position"], "max_position", minimum=1)
            if np.any(n > cap):
                raise ValueError(
                    f"`n` must be <= max_position={cap} (Qwen's released logn table stops there), got {n.max():.0f}")
        return np.where(n > L, logn / math.log(L), 1.0) / rd
    if key in ("yarn", "longrope"):
        L = check_int(p["train_length"], "train_length", minimum=2)
        s = _factor(p["factor"], "factor")
        s = np.maximum(1.0, n / L) if s is None else np.full_like(n, s)
        if key == "yarn":
            return (0.1 * np.log(s) + 1.0) ** 2 / rd
        return (1.0 + np.log(s) / math.log(L)) / rd
    if key == "deepseek_yarn":
        s = _factor(p["factor"], "factor")
        ms = check_positive_float(p["mscale_all_dim"], "mscale_all_dim", allow_zero=True)
        dqk = d if p["d_qk"] is None else check_int(p["d_qk"], "d_qk", minimum=1)
        return np.full_like(n, (0.1 * ms * math.log(s) + 1.0) ** 2 / math.sqrt(dqk))
    if key == "llama4":
        fs = check_int(p["floor_scale"], "floor_scale", minimum=1)
        a = check_positive_float(p["attn_scale"], "attn_scale", allow_zero=True)
        return (1.0 + a * np.log1p(np.floor(n / fs))) / rd  # (pos + 1) = n
    if key == "ssmax":
        return check_positive_float(p["s"], "s") * logn / rd
    if key == "gradient_optimal":
        if p["value"] is not None:
            return np.full_like(n, check_positive_float(p["value"], "value") / rd)
        from ..optimize import optimal_alpha

        out = np.full_like(n, np.nan)
        ok = n >= 2
        if ok.any():  # optimal_alpha refuses an empty array
            out[ok] = np.asarray(optimal_alpha(n[ok])) / rd
        out[~ok] = 0.0  # one key: every scale gives the same (one-hot) softmax
        return out
    if key == "critical":
        return np.sqrt(2.0 * logn) / rd
    raise AssertionError(key)  # pragma: no cover


def _cos(key, n, d, p):
    """Multiplier on a cosine for the second table."""
    if key in ("clip", "swin_v2"):
        return np.full_like(n, min(check_positive_float(p["scale"], "scale"), 100.0))
    if key == "am_softmax":
        return np.full_like(n, check_positive_float(p["scale"], "scale"))
    if key in ("simcse", "simclr"):
        return np.full_like(n, 1.0 / check_positive_float(p["temperature"], "temperature"))
    if key == "cosine_gradient_optimal":
        from ..optimize import optimal_alpha

        out = np.zeros_like(n)
        ok = n >= 2
        if ok.any():
            out[ok] = np.asarray(optimal_alpha(n[ok], dist="cosine", d=max(d, 2)))
        return out
    raise AssertionError(key)  # pragma: no cover


def _params(scheme, params):
    check_choice(scheme, "scheme", SCHEMES)
    info = SCHEMES[scheme]
    unknown = set(params) - set(info.defaults)
    if unknown:
        allowed = sorted(info.defaults) or "none"
        raise ValueError(f"scheme {scheme!r} has no parameter(s) {sorted(unknown)}; its parameters: {allowed}")
    return info, {**info.defaults, **params}


def attention_scale(n, d, scheme="standard", **params):
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
    info, p = _params(scheme, params)
    nn, scalar = _check_positions(n)
    d = check_int(d, "d", minimum=1)
    out = _qk(scheme, nn, d, p) if info.applies_to == "qk" else _cos(scheme, nn, d, p)
    return float(out[0]) if scalar else out


def scheme_alpha(n, d, scheme="standard", score_model="normal", **params):
    """The softmax scale ``alpha`` on unit scores that a scheme implies under a score model.

    Parameters
    ----------
    n, d, scheme, **params
        As in :func:`attention_scale`.
    score_model : {"normal", "cosine"}
        ``"normal"``: i.i.d. unit-variance entries, ``alpha = m sqrt(d)``;
        ``"cosine"``: q, k of norm ``sqrt(d)``, ``alpha = m d``.  For a
        cosine-table scheme ``alpha = m`` (cosine) or ``m / sqrt(d)`` (normal).

    Returns
    -------
    float or ndarray
    """
    check_choice(score_model, "score_model", SCORE_MODELS)
    m = attention_scale(n, d, scheme, **params)
    d = int(d)
    if SCHEMES[scheme].applies_to == "qk":
        return m * (math.sqrt(d) if score_model == "normal" else float(d))
    return m / math.sqrt(d) if score_model == "normal" else m


@dataclass(frozen=True)
class PinnedScheme:
    """A scheme with every parameter fixed, pinned at a training length (see :func:`pinned`).

    Attributes
    ----------
    scheme : str
        The scheme's key.
    train_length : int or None
        ``L`` the scheme is pinned at; ``None`` when it was not pinned.
    params : Mapping
        Every parameter of the scheme: published defaults, then the pinning rule's values,
        then the caller's overrides (read-only).
    """

    scheme: str
    train_length: int | None
    params: Mapping = field(default_factory=dict)

    def scale(self, n, d):
        """The multiplier ``m`` on ``q.k`` (or on a cosine): :func:`attention_scale` with :attr:`params`."""
        return attention_scale(n, d, self.scheme, **self.params)

    def factor(self, n, d):
        """``m(n) / standard(n)``: the factor on ``q.k / sqrt(d)``; exactly 1 for ``standard``.

        Only for schemes that scale ``q.k``.
        """
        if SCHEMES[self.scheme].applies_to != "qk":
            raise ValueError(f"`scheme` must scale q.k (not a cosine scheme) to give a factor on q.k/sqrt(d), "
                             f"got {self.scheme!r}")
        return self.scale(n, d) / attention_scale(n, d, "standard")

    def alpha(self, n, d, score_model="normal"):
        """The softmax scale on unit scores under ``score_model`` (:func:`scheme_alpha`)."""
        return scheme_alpha(n, d, self.scheme, score_model, **self.params)


def pinned(scheme: str, train_length: int | None = None, **params) -> PinnedScheme:
    """A scheme pinned to ``standard`` at the training length ``L``: the one rule used everywhere.

    Each scheme's rule is written once, in its registry row (:attr:`SchemeInfo.pin`):

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
    train_length : int, optional
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
    check_choice(scheme, "scheme", SCHEMES)
    info = SCHEMES[scheme]
    L = None if train_length is None else check_int(train_length, "train_length", minimum=2)
    pin = info.pin(L) if (info.pin is not None and L is not None) else {}
    _, full = _params(scheme, {**pin, **params})
    return PinnedScheme(scheme, L, MappingProxyType(full))

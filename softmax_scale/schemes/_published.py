"""The catalogue of published scales: one :class:`~._scheme.Scheme` each, with its formula, checks and pinning rule.

:data:`PUBLISHED` lists them in the order they are listed (``q.k`` scales first, then cosines);
:mod:`._registry` registers them in that order and evaluates them.

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
"""

from __future__ import annotations

import math

import numpy as np

from .._util.validation import check_int, check_positive_float
from ._scheme import Scheme, Style

__all__ = ["CRITICAL", "ENTROPY_INVARIANT", "PUBLISHED", "QWEN_LOGN", "SSMAX", "STANDARD", "YARN"]

#: The registry's names of the schemes other modules refer to.
STANDARD = "standard"
ENTROPY_INVARIANT = "entropy_invariant"
QWEN_LOGN = "qwen_logn"
YARN = "yarn"
SSMAX = "ssmax"
CRITICAL = "critical"


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

    d = check_int(d, "d", minimum=2)  # cosine(d) scores: a direction in R^1 has cosines +-1 only
    out = np.zeros_like(n)
    ok = n >= 2
    if ok.any():
        out[ok] = np.asarray(optimal_alpha(n[ok], dist="cosine", d=d))
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
PUBLISHED = (
    Scheme(STANDARD, "qk", "1/sqrt(d)", _standard, {}, "Vaswani et al. 2017, arXiv 1706.03762",
           train_names={STANDARD: None}, default_in=_ENTROPY,
           style=Style("tab:blue", "-", 1.8, decoder_color="C0")),
    Scheme("chiang_cholak", "qk", "log(n)/sqrt(d)", _chiang_cholak, {}, "Chiang & Cholak, arXiv 2202.12172",
           "logits multiplied by log n on top of the usual 1/sqrt(d)", default_in=_ENTROPY,
           style=Style("tab:orange", "-", 1.8, train_color="C9")),
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
           style=Style("magenta", (0, (6, 2, 1, 2)), 1.3, decoder_color="C5", train_color="C8")),
    Scheme("gradient_optimal", "qk", "alpha*(n)/sqrt(d), alpha* the mean-field maximiser for normal scores",
           _gradient_optimal, {"value": None}, "Su, kexue.fm/archives/9812",
           "about 0.84 sqrt(log n); value=2.5 gives the note's fixed compromise 2.5/sqrt(d)",
           check=_check_value, train_names={"alpha_star": None, "alpha": "value"}, default_in=_ENTROPY,
           style=Style("tab:gray", "-", 1.8, train_color="C6")),
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


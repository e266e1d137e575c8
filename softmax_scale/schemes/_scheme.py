"""What a scale is: :class:`Scheme` (its formula, checks, pinning rule, training names) and :class:`Style`.

Each is checked when made; :class:`Style` is how figures draw a scheme.

The registry that holds them and evaluates them is :mod:`._registry`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .._util.validation import check_choice

__all__ = ["DEFAULT_LISTS", "Scheme", "Style"]

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

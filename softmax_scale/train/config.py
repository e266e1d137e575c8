"""The configuration of one training run: sizes, optimiser, scale and objective in one frozen dataclass.

Every field is checked when the object is made, with an error that names the field, so a bad
value fails before anything is trained or written.  :meth:`TrainConfig.describe` is the one-line
form written into the result files' headers and into checkpoints (a checkpoint of another
configuration is refused).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import ClassVar

from .._util.validation import check_choice, check_int, check_positive_float
from ..schemes import ENTROPY_INVARIANT
from ..schemes.rope import ROPES
from .scales import TRAIN_SCALES, learned_parameter

__all__ = ["FFNS", "QUICK", "TRAINING_OBJECTIVES", "TrainConfig"]

#: ``"mlm"``: bidirectional masked-byte prediction (15% of positions, 80/10/10 as in BERT);
#: ``"causal"``: next-byte prediction, each query sees itself and the positions before it.
TRAINING_OBJECTIVES = ("mlm", "causal")
#: ``"relu"``: ``relu(x W1) W2`` (the default, fast on XLA's CPU backend); ``"swiglu"``:
#: ``(silu(x W1) * x W3) W2``, LLaMA's feed-forward (a model that can be exported to GGUF).
FFNS = ("relu", "swiglu")
#: Options that :meth:`TrainConfig.describe` names only when they differ from these values: a
#: description lists the plain model's fields and what sets a variant apart from it.
_PLAIN = {"ffn": "relu", "compute_dtype": "float32", "copy_share": 0.0, "passkey_share": 0.0}


@dataclass(frozen=True)
class TrainConfig:
    """Sizes, optimiser, softmax scale and objective of one run.

    Attributes
    ----------
    objective : {"mlm", "causal"}
        Masked (bidirectional) or next-byte (causal) language modelling.
    scheme : str
        The softmax scale trained in (see :data:`softmax_scale.train.scales.TRAIN_SCALES`):
        ``"standard"``, ``"entropy_invariant"`` (pinned at ``pin_length``), ``"ssmax"``
        (``s log n`` with ``s`` learned per head, initialised to ``1/ln pin_length``),
        ``"alpha_star"`` (the mean-field ``alpha*(n)`` on unit-variance scores) or ``"alpha"``
        (the constant factor ``alpha``).
    alpha : float or None
        The constant factor of ``scheme="alpha"`` (required there, refused elsewhere).
    pin_length : int or None
        The length the scheme is pinned at (equal to ``standard`` there); ``None``: the
        training length.  The note pins ``entropy_invariant`` at 512.
    train_length : int
        Bytes per training sequence, ``4 <= train_length <= max_length``.
    layers, d_model, heads, d_ff : int
        Transformer sizes (``d_model`` a multiple of ``heads``, an even head dimension for RoPE).
    ffn : {"relu", "swiglu"}
        The feed-forward: ReLU (two matrices ``D x d_ff``) or LLaMA's SwiGLU (three).
    rope : str
        RoPE variant used at every length (``"none"``: the trained frequencies).
    rope_base : float
        RoPE base.
    batch : int
        Sequences per step (a multiple of the number of devices the step is sharded over).
    steps, warmup : int
        Optimiser steps, and linear warm-up steps before the cosine decay.
    lr, min_lr_ratio : float
        Peak learning rate; the cosine decays to ``lr * min_lr_ratio``.
    weight_decay : float
        AdamW's decoupled weight decay (on matrices only, not on gains or ``s``).
    b1, b2 : float
        Adam's moment decay rates.
    clip : float
        Global gradient-norm clipping.
    mask_rate : float
        Fraction of positions predicted in masked LM.
    checkpoint_every : int
        Steps between two checkpoints (when a checkpoint file is given).
    max_length : int
        The longest sequence the model is built for (training and test lengths above it are refused).
    compute_dtype : {"float32", "bfloat16"}
        The input type of the matrix products (projections, feed-forward, query-key and
        probability-value products, output logits), always accumulated in float32; parameters,
        optimiser state, softmax, norms and the loss are float32 either way.
    copy_share, passkey_share : float
        Causal only: the fraction of each batch's sequences made into copies (a training segment
        repeated, :func:`~softmax_scale.train.tasks.copy_batch`) and into passkey prompts
        (:func:`~softmax_scale.train.tasks.passkey_batch`), the rest natural text
        (:func:`~softmax_scale.train.tasks.training_mix`).
    """

    #: The values of ``compute_dtype``.
    COMPUTE_DTYPES: ClassVar[tuple] = ("float32", "bfloat16")

    objective: str = "mlm"
    scheme: str = "standard"
    alpha: float | None = None
    pin_length: int | None = None
    train_length: int = 64
    layers: int = 4
    d_model: int = 128
    heads: int = 4
    d_ff: int = 512
    rope: str = "none"
    rope_base: float = 10000.0
    batch: int = 32
    steps: int = 1400
    warmup: int = 140
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    b1: float = 0.9
    b2: float = 0.98
    clip: float = 1.0
    mask_rate: float = 0.15
    checkpoint_every: int = 200
    max_length: int = 16384
    ffn: str = "relu"
    compute_dtype: str = "float32"
    copy_share: float = 0.0
    passkey_share: float = 0.0

    def __post_init__(self):
        check_choice(self.objective, "objective", TRAINING_OBJECTIVES)
        check_choice(self.ffn, "ffn", FFNS)
        check_choice(self.compute_dtype, "compute_dtype", self.COMPUTE_DTYPES)
        check_choice(self.scheme, "scheme", TRAIN_SCALES)
        check_choice(self.rope, "rope", ROPES)
        if self.rope == "rerope":
            raise ValueError("`rope`: 'rerope' changes the attention at test time only (evaluate(rope='rerope')); "
                             "a model trained at its training length has the trained RoPE ('none')")
        check_int(self.max_length, "max_length", minimum=4, maximum=1 << 20)
        check_int(self.train_length, "train_length", minimum=4, maximum=self.max_length)
        if self.pin_length is not None:
            check_int(self.pin_length, "pin_length", minimum=2)
        if self.scheme == "alpha":
            if self.alpha is None:
                raise ValueError("`alpha` must be given (a number > 0) with scheme='alpha'")
            check_positive_float(self.alpha, "alpha")
        elif self.alpha is not None:
            raise ValueError(f"`alpha` must be None unless scheme='alpha', got {self.alpha!r} with scheme={self.scheme!r}")
        for name in ("layers", "d_model", "heads", "d_ff", "batch", "steps", "checkpoint_every"):
            check_int(getattr(self, name), name, minimum=1, maximum=1 << 24)
        check_int(self.warmup, "warmup", minimum=0, maximum=self.steps)
        if self.d_model % self.heads or (self.d_model // self.heads) % 2:
            raise ValueError(f"`d_model` must be a multiple of `heads` with an even head dimension (RoPE pairs), "
                             f"got d_model={self.d_model}, heads={self.heads}")
        for name in ("rope_base", "lr", "clip"):
            check_positive_float(getattr(self, name), name)
        check_positive_float(self.weight_decay, "weight_decay", allow_zero=True)
        for name in ("min_lr_ratio", "b1", "b2", "mask_rate"):
            v = check_positive_float(getattr(self, name), name, allow_zero=name == "min_lr_ratio")
            if v > 1 or (v == 1 and name != "min_lr_ratio"):
                raise ValueError(f"`{name}` must be in {'[0, 1]' if name == 'min_lr_ratio' else '(0, 1)'}, got {v!r}")
        for name in ("copy_share", "passkey_share"):
            v = check_positive_float(getattr(self, name), name, allow_zero=True)
            if v > 1:
                raise ValueError(f"`{name}` must be a fraction in [0, 1], got {v!r}")
            if v and self.objective != "causal":
                raise ValueError(f"`{name}` applies to objective='causal' only, got {v!r} with objective={self.objective!r}")
        if self.copy_share + self.passkey_share > 1:
            raise ValueError(f"`copy_share` + `passkey_share` must be at most 1, got {self.copy_share} + {self.passkey_share}")
        if self.passkey_share:
            from .tasks import passkey_min_length

            if self.train_length < passkey_min_length():
                raise ValueError(f"`train_length` must be at least {passkey_min_length()} to hold a passkey prompt "
                                 f"(passkey_share > 0), got {self.train_length}")
        if self.objective == "mlm" and round(self.mask_rate * self.train_length) < 1:
            raise ValueError(f"`train_length` {self.train_length} with mask_rate {self.mask_rate} masks no position")

    @property
    def d_head(self) -> int:
        """Dimension of one head."""
        return self.d_model // self.heads

    @property
    def _ffn_matrices(self) -> int:
        return 3 if self.ffn == "swiglu" else 2

    @property
    def causal(self) -> bool:
        """Whether attention is causal (next-byte objective)."""
        return self.objective == "causal"

    @property
    def pin(self) -> int:
        """The length the scheme is pinned at (``pin_length``, or the training length)."""
        return self.train_length if self.pin_length is None else self.pin_length

    @property
    def n_params(self) -> int:
        """Number of trained parameters (embedding tied with the output layer)."""
        from .data import VOCAB

        D, F = self.d_model, self.d_ff
        per_layer = 4 * D * D + self._ffn_matrices * D * F + 2 * D + (self.heads if learned_parameter(self.scheme) else 0)
        return VOCAB * D + self.layers * per_layer + D

    def step_flops(self) -> float:
        """Floating-point operations of one training step (forward and backward, 3x the forward's matrix products)."""
        from .data import VOCAB

        T, D, F, L = self.train_length, self.d_model, self.d_ff, self.layers
        tokens = self.batch * T
        dense = 2 * tokens * L * (4 * D * D + self._ffn_matrices * D * F) + 2 * tokens * D * VOCAB
        attention = 2 * 2 * L * self.batch * T * T * D
        return 3.0 * (dense + attention)

    def replace(self, **changes) -> TrainConfig:
        """A copy with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Every field, as plain Python values."""
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line of JSON with every field, sorted: the form in headers and checkpoints.

        The variant options (``ffn``, ``compute_dtype``) appear only when they differ from the
        plain model's, so a description is the same whichever other variants exist; result files
        and checkpoints are matched on it.
        """
        d = {k: v for k, v in self.to_dict().items() if _PLAIN.get(k, object()) != v}
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        """The inverse of :meth:`describe`."""
        return cls(**json.loads(text))

    def label(self) -> str:
        """Short name of the trained scale: ``standard``, ``entropy_invariant@512``, ``alpha=1.5``, ..."""
        if self.scheme == "alpha":
            return f"alpha={self.alpha:.4g}"
        if self.scheme == ENTROPY_INVARIANT:
            return f"{ENTROPY_INVARIANT}@{self.pin}"
        return self.scheme

    def tokens_per_step(self) -> int:
        """Bytes fed to the model per step."""
        return self.batch * self.train_length


#: The ``--quick`` model: a tiny transformer trained for a few dozen steps (checks the machinery, not the science).
QUICK = TrainConfig(train_length=16, layers=1, d_model=32, heads=2, d_ff=64, batch=8, steps=30, warmup=5, lr=3e-3,
                    checkpoint_every=10)

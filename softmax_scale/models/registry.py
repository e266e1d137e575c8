"""The loader registry of the real models: a name, its kind, the module and function that load it, a description.

Loaders are imported on first use, so a model whose module or weights are missing fails only when
it is loaded; each (name, path) is loaded once per process.  The kind (``"encoder"`` or
``"decoder"``) is known without loading anything, so a function that needs one kind can refuse
the other by name (:func:`check_kind`) before reading any weights or text.
"""

from __future__ import annotations

import importlib

from ._files import check_path

__all__ = ["KINDS", "check_kind", "clear_cache", "list_models", "load", "model_kind"]

#: The kinds of model: a bidirectional encoder (BERT) or a causal decoder (LLaMA).
KINDS = ("encoder", "decoder")

#: name -> (kind, module, loader function, description, what ``path`` must name: its form and in words);
#: the loader takes ``path=None``.
_REGISTRY = {
    "minilm": ("encoder", "softmax_scale.models.bert", "load_minilm",
               "all-MiniLM-L6-v2 sentence encoder (BERT, 6 layers, 12 heads of 32)",
               "directory", "a directory holding a BERT checkpoint"),
    "smollm2": ("decoder", "softmax_scale.models.llama", "load_smollm2", "SmolLM2-135M-Instruct decoder (LLaMA, GGUF Q4_1)",
                "file", "a GGUF file"),
}

_CACHE: dict = {}


def list_models() -> dict[str, str]:
    """Registered model names with a one-line description."""
    return {name: row[3] for name, row in _REGISTRY.items()}


def model_kind(name: str) -> str:
    """``"encoder"`` or ``"decoder"``: the kind of the registered model ``name``, without loading it."""
    if name not in _REGISTRY:
        raise ValueError(f"`model` must be a registered model ({', '.join(_REGISTRY)}), got {name!r}")
    return _REGISTRY[name][0]


def check_kind(name: str, kind: str, what: str) -> None:
    """Raise a ValueError naming ``model`` unless ``name`` is a registered model of ``kind``.

    ``what`` says what needs that kind, e.g. ``"length extrapolation reads decoders"``.
    """
    have = model_kind(name)
    if have != kind:
        fits = ", ".join(n for n, row in _REGISTRY.items() if row[0] == kind)
        raise ValueError(f"`model`: {name!r} is not {_article(kind)} {kind} but {_article(have)} {have}, "
                         f"{_REGISTRY[name][3]}; {what}: {fits}")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def load(name: str, *, path=None):
    """Load the model ``name``, once per process for each (name, path).

    Parameters
    ----------
    name : str
        A name from :func:`list_models`.
    path : str or path-like, optional
        A checkpoint of the same family in place of the packaged weights: a directory holding
        ``config.json``, ``model.safetensors`` and ``tokenizer.json`` for ``"minilm"``, a GGUF file
        for ``"smollm2"``.

    Raises
    ------
    ValueError
        For an unknown name, or a ``path`` of the wrong form (a directory for a file, or the
        reverse) or whose files cannot be read (empty, truncated, not of their format); the
        message names ``path`` and the file.
    TypeError
        If ``path`` is not a str or path-like.
    MissingWeightsError
        If the weights are missing (the message names the install command) or nothing exists
        at ``path``.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(_REGISTRY)}")
    _, module, func, _, form, what = _REGISTRY[name]
    key = (name, None if path is None else check_path(path, form, what))
    if key not in _CACHE:
        loader = getattr(importlib.import_module(module), func)
        _CACHE[key] = loader(path=key[1])
    return _CACHE[key]


def clear_cache() -> None:
    """Forget the loaded models (their memory is freed once no one else holds them)."""
    _CACHE.clear()

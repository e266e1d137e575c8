"""The training and evaluation bytes, their hashes, seeded batches and BERT-style masking.

- **Training text**: every ``.py`` file of this Python's standard library (sorted by path, joined
  by a newline), leaving out the test suites (``test/``, ``tests/``, ``idle_test/``), installed
  packages (``site-packages``) and the held-out documents.  About 12 MB on CPython 3.11.
- **Held-out text**: documents never seen in training: the language reference bundled for
  ``help()`` (``pydoc_data.topics``, prose with code) and the modules in :data:`HELDOUT_MODULES`
  (code with docstrings), read through :func:`softmax_scale.models.corpus`.
- **Vocabulary**: the 256 byte values and one ``[MASK]`` token (:data:`MASK`).
- **Batches**: the batch of step ``t`` is drawn from its own generator, seeded by the run's data
  seed and ``t`` (a counter-based stream): the data order depends on the seed alone, the same
  for every scale trained with that seed, and a resumed run draws exactly the batches an
  uninterrupted one would (the generator's state *is* the step number).
- **Masking** (masked LM, as in BERT): ``round(rate * T)`` positions per sequence are predicted;
  of those 80% are replaced by ``[MASK]``, 10% by a random byte, 10% left as they are.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._util.validation import check_choice, check_int, check_positive_float

__all__ = [
    "EVAL_SEED",
    "HELDOUT_DOCS",
    "HELDOUT_MODULES",
    "MASK",
    "VOCAB",
    "Batch",
    "corpus_hashes",
    "eval_batch",
    "heldout_bytes",
    "mask_positions",
    "most_frequent_byte",
    "text_batch",
    "training_bytes",
    "training_files",
]

#: The ``[MASK]`` token (after the 256 byte values).
MASK = 256
#: Vocabulary size: 256 bytes and ``[MASK]``.
VOCAB = 257
#: Standard-library modules held out of training (evaluation text beside ``pydoc_data.topics``).
HELDOUT_MODULES = ("_pydecimal", "argparse", "tarfile", "doctest")
#: The held-out documents, as names of :func:`softmax_scale.models.corpus`.
HELDOUT_DOCS = ("pydoc_topics", *(f"stdlib/{m}" for m in HELDOUT_MODULES))
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
_SEPARATOR = b"\n"


@dataclass(frozen=True)
class Batch:
    """Inputs, targets and the weights of the predicted positions, each ``[batch, length]``.

    Attributes
    ----------
    inputs : ndarray of int32
        Token ids fed to the model (masked-LM: with the 80/10/10 corruption).
    targets : ndarray of int32
        The bytes to predict at each position.
    weights : ndarray of float32
        1 where a position is predicted, 0 elsewhere.
    """

    inputs: np.ndarray
    targets: np.ndarray
    weights: np.ndarray


def _stdlib_root() -> Path:
    return Path(sysconfig.get_path("stdlib"))


@functools.lru_cache(maxsize=1)
def training_files() -> tuple[Path, ...]:
    """The standard-library ``.py`` files trained on, sorted by their path under the stdlib directory."""
    root = _stdlib_root()
    held = {root / "pydoc_data" / "topics.py"} | {root / f"{m}.py" for m in HELDOUT_MODULES}
    files = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        if _SKIP_DIRS.intersection(rel.parts[:-1]) or p in held or not p.is_file():
            continue
        files.append(p)
    if not files:
        raise FileNotFoundError(f"no standard-library .py sources under {root}: this Python ships without them")
    return tuple(sorted(files, key=lambda p: p.relative_to(root).as_posix()))


@functools.lru_cache(maxsize=1)
def training_bytes() -> np.ndarray:
    """The training text: the files of :func:`training_files` joined by newlines, as uint8 (cached)."""
    data = _SEPARATOR.join(p.read_bytes() for p in training_files())
    return np.frombuffer(data, dtype=np.uint8)


@functools.lru_cache(maxsize=1)
def heldout_bytes() -> np.ndarray:
    """The held-out text: the documents of :data:`HELDOUT_DOCS` in UTF-8, joined by newlines, as uint8."""
    from ..models.corpus import corpus

    data = _SEPARATOR.join(corpus(name).encode("utf-8") for name in HELDOUT_DOCS)
    return np.frombuffer(data, dtype=np.uint8)


@functools.lru_cache(maxsize=1)
def corpus_hashes() -> dict:
    """SHA-256 of the training text and of each held-out document, with the Python that shipped them."""
    from ..models.corpus import corpus

    out = {"python": sys.version.split()[0],
           "train": f"{hashlib.sha256(training_bytes().tobytes()).hexdigest()} ({len(training_files())} files, "
                    f"{training_bytes().size} bytes)"}
    for name in HELDOUT_DOCS:
        text = corpus(name).encode("utf-8")
        out[name] = f"{hashlib.sha256(text).hexdigest()} ({len(text)} bytes)"
    return out


@functools.lru_cache(maxsize=1)
def most_frequent_byte() -> int:
    """The most frequent byte of the training text (the baseline predicts it everywhere)."""
    return int(np.argmax(np.bincount(training_bytes(), minlength=256)))


def _generator(seed: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """An independent generator for ``key`` under ``seed`` (a counter-based stream)."""
    child = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, *key), pool_size=seed.pool_size)
    return np.random.default_rng(child)


def mask_positions(windows: np.ndarray, rate: float, gen: np.random.Generator) -> Batch:
    """BERT's masking of ``windows`` (``[batch, length]`` bytes): ``round(rate * length)`` positions per row.

    Of the chosen positions 80% become ``[MASK]``, 10% a uniformly random byte, 10% stay.
    """
    rate = check_positive_float(rate, "mask_rate")
    b, t = windows.shape
    k = int(round(rate * t))
    if k < 1:
        raise ValueError(f"`length` {t} with mask_rate {rate} masks no position")
    chosen = np.argsort(gen.random((b, t)), axis=1)[:, :k]
    weights = np.zeros((b, t), dtype=np.float32)
    np.put_along_axis(weights, chosen, 1.0, axis=1)
    u = gen.random((b, k))
    random_bytes = gen.integers(0, 256, size=(b, k))
    inputs = windows.astype(np.int32)
    old = np.take_along_axis(inputs, chosen, axis=1)
    new = np.where(u < 0.8, MASK, np.where(u < 0.9, random_bytes, old)).astype(np.int32)
    np.put_along_axis(inputs, chosen, new, axis=1)
    return Batch(inputs, windows.astype(np.int32), weights)


def _windows(text: np.ndarray, length: int, count: int, gen: np.random.Generator) -> np.ndarray:
    if length > text.size:
        raise ValueError(f"`length` must be at most the text's {text.size} bytes, got {length}")
    starts = gen.integers(0, text.size - length + 1, size=count)
    return text[starts[:, None] + np.arange(length)]


def _batch(text, objective, length, count, rate, gen) -> Batch:
    check_choice(objective, "objective", ("mlm", "causal"))
    if objective == "mlm":
        return mask_positions(_windows(text, length, count, gen), rate, gen)
    w = _windows(text, length + 1, count, gen).astype(np.int32)
    return Batch(w[:, :-1], w[:, 1:], np.ones((count, length), dtype=np.float32))


def text_batch(config, data_seed: np.random.SeedSequence, step: int) -> tuple[Batch, np.random.Generator]:
    """The training text's batch of step ``step`` (0-based) of a run whose data seed is ``data_seed``, and the step's generator.

    The step's other draws continue that generator (the training mix of
    :func:`softmax_scale.train.tasks.train_batch`, which gives the batch a run trains on).
    """
    gen = _generator(data_seed, check_int(step, "step", minimum=0))
    return _batch(training_bytes(), config.objective, config.train_length, config.batch, config.mask_rate, gen), gen


#: Seed of the evaluation windows and masks: the same for every model.
EVAL_SEED = 20260815


def eval_batch(objective: str, length: int, count: int, mask_rate: float = 0.15, seed: int = EVAL_SEED) -> Batch:
    """``count`` held-out windows of ``length`` bytes with their masks, the same for every model.

    Windows and masks depend only on ``(seed, length, count, objective, mask_rate)``.
    """
    length = check_int(length, "length", minimum=1)
    count = check_int(count, "count", minimum=1)
    gen = _generator(np.random.SeedSequence(seed), length, count)
    return _batch(heldout_bytes(), objective, length, count, mask_rate, gen)

"""A pass key among ``n`` tokens on a real decoder (SmolLM2-135M) inside and past its training length.

The prompt is the byte experiment's (:func:`softmax_scale.train.tasks.passkey_batch`) in tokens:
the filler (:data:`~softmax_scale.train.tasks.FILLER`) repeated, the key's line
(:data:`~softmax_scale.train.tasks.PASSKEY_LINE`) at a depth of the filler, and the question
(:data:`~softmax_scale.train.tasks.QUESTION`) followed by the five digits, each its own token
(:func:`passkey_sequence`).  The digits are scored: a prompt is retrieved when the greedy choice
is right at all five (teacher-forced, which is what greedy decoding of the five digits reduces
to), and its loss is the digits' mean.  Every cell reads the same prompts; inside ``L`` every
clamped scale is 1, so a prompt there is read once (trained RoPE, ``standard``).  The retrieving
heads and their prediction are those of :mod:`._real_one_key`: chosen on prompts with other
keys (``s`` prompts) at ``L``, the reference set by the ``k < reference_keys`` prompts at ``L``;
the toolkit's rule :data:`~._real_one_key.SHARE_MAX` scales those heads alone.  It is the experiment ``real_passkey`` (:data:`EXPERIMENT`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.validation import check_int
from ..train.tasks import FILLER, PASSKEY_LINE, QUESTION
from . import _real_one_key as rk
from . import _real_one_key_summary as rk_summary
from ._real_one_key_experiment import RealOneKeyExperiment

__all__ = ["CELLS", "EXPERIMENT", "HAYSTACK_LINE", "HAYSTACK_QUESTION", "HAYSTACK_WORDS", "QUICK_CONFIG", "Haystack", "RealPasskeyConfig",
           "RealPasskeyExperiment", "haystack_depths", "haystack_min_tokens", "passkey_haystack", "passkey_min_tokens",
           "passkey_sequence"]

#: ``(RoPE, scale)`` past ``L``, in the order they run (YaRN's frequencies first).
CELLS = (("yarn", "standard"), ("yarn", "qwen_logn"), ("yarn", "yarn"), ("yarn", rk.SHARE_MAX), ("yarn", "llama4"),
         ("ntk", "standard"), ("ntk", "qwen_logn"), ("none", "standard"))
DIGITS = 5
#: Seeds the keys: key ``k`` of the grid is the same five digits at every length and depth.
SEED = 32
#: The multi-key haystack's line and question (:func:`passkey_haystack`): key ``j``'s digits glued to its word
#: ``HAYSTACK_WORDS[j]``, which occurs nowhere else in the haystack and ends the question, so the token before
#: each key's digits is that key's own (SmolLM2-135M copies the digits after the question's last token; under a
#: line that names the key by a number it copies the first digits of the latest key).
HAYSTACK_LINE = "The pass key is {word}{key}. Remember it. {word}{key} is the pass key. "
HAYSTACK_QUESTION = "What is the pass key? The pass key is {word}"
HAYSTACK_WORDS = ("apple", "river", "tiger", "piano", "cloud", "candle", "horse", "lemon", "window", "garden",
                  "rocket", "silver")


@dataclass(frozen=True)
class RealPasskeyConfig:
    """The real_passkey experiment.

    Attributes
    ----------
    quick : bool
    model : str or LlamaDecoder
    path : str or None
        GGUF file for ``model``.
    train_length : int or None
        ``L`` the scales and RoPE variants are pinned at (the file's context length where None).
    past : tuple of (int, int)
        ``(length, keys)`` past ``L``, in the order they run.
    inside : tuple of (int, int)
        ``(length, keys)`` at or below ``L`` (one pass per prompt).
    depths : tuple of float
    cells : tuple of (str, str)
        ``(RoPE, scale)`` past ``L``.
    reference_keys : int
        The prompts ``k < reference_keys`` at ``L`` set the prediction's reference.
    query_block : int
    backend : str
        ``numpy`` or ``jax``: the read-out's implementation (:data:`softmax_scale.models.readout.BACKENDS`).
    """

    quick: bool = False
    model: object = "smollm2"
    path: str | None = None
    train_length: int | None = None
    past: tuple = ((16384, 4), (32768, 2))
    inside: tuple = ((4096, 4), (8192, 4))
    depths: tuple = (0.1, 0.5, 0.9)
    cells: tuple = CELLS
    reference_keys: int = 2
    query_block: int = 256
    backend: str = "numpy"


#: The quick form: the pipeline with a pretend ``L`` of 256 tokens.
QUICK_CONFIG = RealPasskeyConfig(quick=True, train_length=256, past=((512, 1),), inside=((256, 1),), depths=(0.5,),
                                 cells=(("yarn", "standard"), ("yarn", "qwen_logn"), ("yarn", rk.SHARE_MAX),
                                        ("none", "standard")), reference_keys=1)


def _key(index: int, selection: bool) -> str:
    rng = np.random.default_rng([SEED, int(index), int(selection)])
    return "".join(str(int(x)) for x in rng.integers(0, 10, size=DIGITS))


def _parse(prompt: str):
    """``"d0.5-k3"`` -> ``(0.5, 3, False)``; ``"d0.5-s0"`` -> ``(0.5, 0, True)``."""
    d, k = prompt.split("-")
    return float(d[1:]), int(k[1:]), k[0] == "s"


def _pieces(model, key):
    line = model.tokenize(PASSKEY_LINE.format(key=key))
    question = model.tokenize(QUESTION + key)
    digits = question[-DIGITS:]  # read in place: a SentencePiece tokenizer would prefix the key alone with a space
    if digits.size != DIGITS or model.detokenize(digits) != key:
        raise ValueError(f"the tokenizer does not give the key {key!r} as {DIGITS} tokens ending the question")
    first = next((i for i in range(line.size - DIGITS + 1) if np.array_equal(line[i:i + DIGITS], digits)), None)
    if first is None:
        raise ValueError(f"the tokenizer splits the key {key!r} otherwise in its line")
    return line, question, first


def passkey_min_tokens(model) -> int:
    """The shortest prompt in tokens (no filler)."""
    line, question, _ = _pieces(model, "0" * DIGITS)
    return model.bos_first().size + line.size + question.size


def passkey_sequence(model, length: int, depth: float, key: str) -> rk.OneKeySequence:
    """The prompt of ``length`` tokens with the key's line at ``depth`` of the filler; its five digits scored.

    A BOS comes first when the model's file asks for one (``config.add_bos``).
    """
    line, question, first = _pieces(model, key)
    bos = model.bos_first()
    room = length - bos.size - line.size - question.size
    if room < 0:
        raise ValueError(f"`length` must be at least {bos.size + line.size + question.size} tokens (the key's "
                         f"line and the question), got {length}")
    unit = model.tokenize(FILLER).size
    filler = model.tokenize(FILLER * (room // max(1, unit - 2) + 2))[:room]
    at = int(round(depth * room))
    ids = np.concatenate([bos, filler[:at], line, filler[at:], question])
    scored = np.arange(length - DIGITS - 1, length - 1)
    return rk.OneKeySequence(ids, scored, scored, bos.size + at + first + np.arange(DIGITS), float(depth),
                             all_of=True)


def haystack_depths(keys: int) -> tuple:
    """Where the ``keys`` lines of a haystack sit, as fractions of its filler: evenly from 0.1 to 0.9."""
    keys = check_int(keys, "keys", minimum=2)
    return tuple(float(d) for d in np.linspace(0.1, 0.9, keys))


@dataclass(frozen=True)
class Haystack:
    """Several pass keys in one haystack, each asked by its own question continued from the haystack.

    Attributes
    ----------
    ids : ndarray of int64
        The haystack: a BOS where the file asks for one, the filler with key ``j``'s line at ``depths[j]``.
    questions : tuple of ndarray of int64
        Question ``j`` (ending in key ``j``'s word), its five digits last.
    keys : tuple of str
    depths : tuple of float
    """

    ids: np.ndarray
    questions: tuple
    keys: tuple
    depths: tuple

    def question(self, j: int) -> rk.OneKeySequence:
        """The haystack and question ``j`` as one sequence, its five digits scored (the key's digits its source)."""
        j = check_int(j, "j", minimum=0, maximum=len(self.keys) - 1)
        ids = np.concatenate([self.ids, self.questions[j]])
        scored = np.arange(ids.size - DIGITS - 1, ids.size - 1)
        digits = ids[-DIGITS:]
        lines = [i for i in range(self.ids.size - DIGITS + 1) if np.array_equal(self.ids[i:i + DIGITS], digits)]
        return rk.OneKeySequence(ids, scored, scored, lines[0] + np.arange(DIGITS), self.depths[j], all_of=True)


def _haystack_pieces(model, keys):
    if len(keys) > len(HAYSTACK_WORDS):
        raise ValueError(f"`keys` must be at most {len(HAYSTACK_WORDS)} (a word each), got {len(keys)}")
    out = []
    for key, word in zip(keys, HAYSTACK_WORDS):
        line = model.tokenize(HAYSTACK_LINE.format(word=word, key=key))
        question = model.tokenize(HAYSTACK_QUESTION.format(word=word) + key)
        digits = question[-DIGITS:]
        if digits.size != DIGITS or model.detokenize(digits) != key:
            raise ValueError(f"the tokenizer does not give the key {key!r} as {DIGITS} tokens ending the question")
        if not any(np.array_equal(line[i:i + DIGITS], digits) for i in range(line.size - DIGITS + 1)):
            raise ValueError(f"the tokenizer splits the key {key!r} otherwise in its line")
        out.append((line, question))
    return out


def haystack_min_tokens(model, keys: int) -> int:
    """The shortest haystack with ``keys`` keys and its longest question, in tokens (no filler)."""
    pieces = _haystack_pieces(model, ["0" * DIGITS] * check_int(keys, "keys", minimum=2))
    return model.bos_first().size + sum(line.size for line, _ in pieces) + max(q.size for _, q in pieces)


def passkey_haystack(model, length: int, keys) -> Haystack:
    """``len(keys)`` (two or more, distinct) keys at :func:`haystack_depths` of one filler; a question for each.

    The filler is :func:`passkey_sequence`'s, key ``j``'s line :data:`HAYSTACK_LINE` with the word
    ``HAYSTACK_WORDS[j]``; the haystack fills ``length`` tokens less the longest question, so every question
    continued from it ends at or before ``length``.
    """
    keys = tuple(str(k) for k in keys)
    if len(set(keys)) != len(keys) or len(keys) < 2:
        raise ValueError(f"`keys` must be two or more distinct keys, got {keys!r}")
    depths = haystack_depths(len(keys))
    pieces = _haystack_pieces(model, keys)
    bos = model.bos_first()
    longest = max(q.size for _, q in pieces)
    room = length - bos.size - sum(line.size for line, _ in pieces) - longest
    if room < 0:
        raise ValueError(f"`length` must be at least {length - room} tokens (the keys' lines and the longest "
                         f"question), got {length}")
    unit = model.tokenize(FILLER).size
    filler = model.tokenize(FILLER * (room // max(1, unit - 2) + 2))[:room]
    cuts = [int(round(d * room)) for d in depths] + [room]
    parts = [bos, filler[:cuts[0]]]
    for j, (line, _) in enumerate(pieces):
        parts += [line, filler[cuts[j]:cuts[j + 1]]]
    return Haystack(np.concatenate(parts), tuple(q for _, q in pieces), keys, depths)


class RealPasskeyExperiment(RealOneKeyExperiment):
    """A pass key among ``n`` tokens on SmolLM2-135M (see the module docstring)."""

    name = "real_passkey"
    description = "SmolLM2-135M retrieving a pass key at 0.5L to 4L: RoPE variants and scales, the retrieving heads"
    file_stem = "real_passkey"
    figure_names = ("real_passkey",)
    evidence_task = "passkey retrieval"
    replicates = "prompts"
    binary_accuracy = True

    def config(self, quick: bool = False) -> RealPasskeyConfig:
        """:class:`RealPasskeyConfig` or its quick form."""
        return QUICK_CONFIG if quick else RealPasskeyConfig()

    def selection(self, config, L) -> tuple:
        """One prompt per depth at ``L`` with its own key (``s0``)."""
        return tuple(("passkey", L, f"d{d:g}-s0") for d in config.depths)

    def references(self, config, L) -> tuple:
        """The grid's prompts ``k < reference_keys`` at ``L``."""
        return tuple(("passkey", L, f"d{d:g}-k{k}") for k in range(config.reference_keys) for d in config.depths)

    def cells(self, config, model, L) -> list:
        """``heads``; past ``L`` per length, per prompt, per RoPE its scales; inside ``L`` one cell per prompt."""
        c = model.config
        rk.check_cells({r for r, _ in config.cells}, [s for _, s in config.cells] + [rk.REFERENCE], c.head_dim, L)
        for d in config.depths:
            if not 0.0 <= float(d) <= 1.0:
                raise ValueError(f"`depths` must be in [0, 1] (a fraction of the filler), got {d!r}")
        past = [(rk.check_lengths(model, [n], L + 1, config.query_block, "past")[0], int(k)) for n, k in config.past]
        inside = [(check_int(n, "inside", minimum=1, maximum=L), int(k)) for n, k in config.inside]
        minimum = passkey_min_tokens(model)
        for name, cells in (("past", past), ("inside", inside)):
            for n, _ in cells:
                if n < minimum:
                    raise ValueError(f"`{name}`: {n} tokens is below the prompt's minimum of {minimum} tokens")
        if check_int(config.reference_keys, "reference_keys", minimum=1) > max([k for n, k in inside if n == L],
                                                                                  default=0):
            raise ValueError(f"`reference_keys` must not exceed the keys of `inside` at L = {L}")
        prompts = [f"d{d:g}-k{k}" for k in range(max(k for _, k in past + inside)) for d in config.depths]
        out = [("heads", L, "selection", rk.TRAINED_ROPE, rk.REFERENCE)]
        ropes = list(dict.fromkeys(r for r, _ in config.cells))

        def block(n, keys):  # RoPE by RoPE, then prompt by prompt: a run stopped part-way holds the first RoPE's pairs
            for rope in ropes:
                for p in prompts[:keys * len(config.depths)]:
                    out.extend(("passkey", n, p, rope, s) for r, s in config.cells if r == rope)

        block(*past[0])
        for n, keys in inside:
            out.extend(("passkey", n, p, rk.TRAINED_ROPE, rk.REFERENCE) for p in prompts[:keys * len(config.depths)])
        for n, keys in past[1:]:
            block(n, keys)
        return out

    def sequence(self, run, task, length, prompt) -> rk.OneKeySequence:
        """:func:`passkey_sequence` of the prompt's depth and key."""
        depth, k, sel = _parse(prompt)
        return passkey_sequence(run.model, length, depth, _key(k, sel))

    def extra_header(self, run) -> dict:
        """The prompt's construction and the keys."""
        return {"sequences": f"filler {FILLER.strip()!r} repeated; line {PASSKEY_LINE.strip()!r} at a depth of the "
                             f"filler; question {QUESTION.strip()!r} then the {DIGITS} digits (one token each), "
                             f"scored; key k: numpy default_rng([{SEED}, k, 0]) digits, selection keys [.., 1]"}

    def summaries(self, table) -> list:
        """Retrieval and the digits' loss per (length, RoPE, scale); the retrieving heads' share measured and predicted."""
        return [rk_summary.score_markdown(table, "Pass keys retrieved (all five digits by greedy choice) and the "
                                                 "digits' mean loss (nats), means over the prompts, the loss ± its "
                                                 "standard error over the prompts"),
                rk_summary.share_markdown(table)]

EXPERIMENT = RealPasskeyExperiment()

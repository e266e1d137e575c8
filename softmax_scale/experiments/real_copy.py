"""Su's repeated text on a real decoder (SmolLM2-135M): ``m`` tokens followed by themselves, inside and past ``L``.

A document's first ``m`` tokens ``X`` are read as ``X X`` (``task = copy``, length ``2m``); the
second copy is scored (:func:`copy_sequence`): the greedy choice at each of its tokens given the
true ones before it (the accuracy is the fraction right) and the mean loss, beside the same
tokens without the first copy (``task = control``, ``X`` alone, length ``m``).  The source key of
the query that predicts ``X[j]`` in the second copy is ``X[j]`` in the first; the retrieving
heads (:mod:`._real_one_key`) are chosen on another document's copy at ``L`` (``m = L/2``) and
their reference set by the grid documents' copies at ``L``.  It is the experiment ``real_copy``
(:data:`EXPERIMENT`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .._util.validation import check_int
from ..models.corpus import corpus
from . import _real_one_key as rk
from . import _real_one_key_summary as rk_summary
from ._real_one_key_experiment import RealOneKeyExperiment
from .real_passkey import CELLS

__all__ = ["DOCS", "EXPERIMENT", "QUICK_CONFIG", "SELECTION_DOC", "RealCopyConfig", "RealCopyExperiment",
           "copy_sequence"]

#: The documents copied, in the order ``docs = k`` takes them (texts that ship with Python).
DOCS = ("stdlib/argparse", "stdlib/tarfile", "stdlib/doctest")
#: The document the retrieving heads are chosen on.
SELECTION_DOC = "stdlib/_pyio"
#: Queries of the second copy where the heads are measured, evenly spaced.
PROBES = 16


@dataclass(frozen=True)
class RealCopyConfig:
    """The real_copy experiment.

    Attributes
    ----------
    quick : bool
    model : str or LlamaDecoder
    path : str or None
    train_length : int or None
        ``L`` (the file's context length where None).
    past : tuple of int
        Copy lengths ``m`` with ``2m > L`` (each scale of ``cells``).
    inside : tuple of int
        Copy lengths ``m`` with ``2m <= L`` (one pass); ``L / 2`` among them sets the reference.
    docs : int
        The first ``docs`` of :data:`DOCS`.
    cells : tuple of (str, str)
        ``(RoPE, scale)`` past ``L``.
    query_block : int
    backend : str
        ``numpy`` or ``jax``: the read-out's implementation (:data:`softmax_scale.models.readout.BACKENDS`).
    """

    quick: bool = False
    model: object = "smollm2"
    path: str | None = None
    train_length: int | None = None
    past: tuple = (8192,)
    inside: tuple = (4096,)
    docs: int = 3
    cells: tuple = CELLS
    query_block: int = 256
    backend: str = "numpy"


#: The quick form: a pretend ``L`` of 256 tokens.
QUICK_CONFIG = RealCopyConfig(quick=True, train_length=256, past=(256,), inside=(128,), docs=1,
                              cells=(("yarn", "standard"), ("yarn", "qwen_logn"), ("yarn", rk.SHARE_MAX),
                                     ("none", "standard")))


def copy_sequence(tokens, m: int, copied: bool = True) -> rk.OneKeySequence:
    """``X X`` (``copied``) or ``X`` alone, ``X = tokens[:m]``; the tokens ``X[1:]`` of the last copy scored."""
    x = np.asarray(tokens[:m], dtype=np.int64)
    if x.size < m:
        raise ValueError(f"`m`: the document has {x.size} tokens, fewer than {m}")
    off = m if copied else 0
    ids = np.concatenate([x, x]) if copied else x
    scored = np.arange(off, off + m - 1)  # predicts X[1..m-1]
    probe = scored[np.unique(np.linspace(0, scored.size - 1, min(PROBES, scored.size)).round().astype(int))]
    source = probe + 1 - m if copied else np.full(probe.size, -1)
    return rk.OneKeySequence(ids, scored, probe, source)


class RealCopyExperiment(RealOneKeyExperiment):
    """Repeated text on SmolLM2-135M (see the module docstring)."""

    name = "real_copy"
    description = "SmolLM2-135M copying m tokens back (Su's repeated text) inside and past L: RoPE variants and scales"
    file_stem = "real_copy"
    figure_names = ("real_copy",)
    evidence_task = "copy a segment m tokens back"
    replicates = "documents"

    def config(self, quick: bool = False) -> RealCopyConfig:
        """:class:`RealCopyConfig` or its quick form."""
        return QUICK_CONFIG if quick else RealCopyConfig()

    def _docs(self, config):
        return DOCS[:check_int(config.docs, "docs", minimum=1, maximum=len(DOCS))]

    def selection(self, config, L) -> tuple:
        """:data:`SELECTION_DOC` copied at ``L``."""
        return (("copy", L, SELECTION_DOC),)

    def references(self, config, L) -> tuple:
        """The grid documents copied at ``L``."""
        return tuple(("copy", L, d) for d in self._docs(config))

    def cells(self, config, model, L) -> list:
        """``heads``; past ``L`` per document, per RoPE its scales; the copies inside ``L``; the controls."""
        c = model.config
        rk.check_cells({r for r, _ in config.cells}, [s for _, s in config.cells] + [rk.REFERENCE], c.head_dim, L)
        past = [check_int(m, "past", minimum=L // 2 + 1) for m in config.past]
        inside = [check_int(m, "inside", minimum=2, maximum=L // 2) for m in config.inside]
        if L // 2 not in inside:
            raise ValueError(f"`inside` must hold L / 2 = {L // 2} (the copies at L set the reference)")
        docs = self._docs(config)
        longest = max(past + inside)
        self._tokens = {}
        for d in (*docs, SELECTION_DOC):
            text = corpus(d)
            ids = model.tokenize(text)
            if ids.size < longest:
                raise ValueError(f"`past`: {d!r} has {ids.size} tokens, fewer than m = {longest}")
            self._tokens[d] = (ids[:longest], hashlib.sha256(text.encode()).hexdigest()[:16])
        rk.check_lengths(model, [2 * m for m in past], 2, config.query_block, "past")
        out = [("heads", L, "selection", rk.TRAINED_ROPE, rk.REFERENCE)]
        ropes = list(dict.fromkeys(r for r, _ in config.cells))
        for m in past:
            for rope in ropes:
                for d in docs:
                    out.extend(("copy", 2 * m, d, rope, s) for r, s in config.cells if r == rope)
        for m in inside:
            out.extend(("copy", 2 * m, d, rk.TRAINED_ROPE, rk.REFERENCE) for d in docs)
        for m in sorted(set(past + inside)):
            if m <= L:
                out.extend(("control", m, d, rk.TRAINED_ROPE, rk.REFERENCE) for d in docs)
        return out

    def sequence(self, run, task, length, prompt) -> rk.OneKeySequence:
        """:func:`copy_sequence` of the document's first tokens."""
        ids = self._tokens[prompt][0]
        return copy_sequence(ids, length // 2 if task == "copy" else length, copied=task == "copy")

    def extra_header(self, run) -> dict:
        """The documents and their hashes."""
        return {"sequences": f"the first m tokens X of each document, read as X X, the second copy's X[1:] scored; "
                             f"control X alone; heads probed at {PROBES} queries of the last copy; documents "
                             + "; ".join(f"{d} (text sha256 {h}...)" for d, (_, h) in self._tokens.items())}

    def summaries(self, table) -> list:
        """Accuracy and loss per (task, length, RoPE, scale); the retrieving heads' share measured and predicted."""
        return [rk_summary.score_markdown(table, "Tokens of the second copy given by greedy choice (accuracy) and "
                                                 "their mean loss (nats), means over the documents, the loss ± its "
                                                 "standard error over the documents; control: the same "
                                                 "tokens without the first copy"),
                rk_summary.share_markdown(table)]


EXPERIMENT = RealCopyExperiment()

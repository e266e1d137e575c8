"""What the real-decoder one-key experiments (:mod:`.real_passkey`, :mod:`.real_copy`) share.

A real decoder (SmolLM2-135M, trained to ``L = 8192``) reads sequences whose answer sits at known
*scored* positions (the five digits of a pass key; the second copy of a text), under a RoPE
variant and a softmax scale applied at test time.  Each task is one cell: a (sequence, RoPE,
scale); its rows are the greedy accuracy and mean loss on the scored tokens (teacher-forced: the
greedy choice at each scored position given the true tokens before it) and the retrieving heads'
share on their source keys beside :func:`softmax_scale.heads.predict_share`.  The experiment's interface
(:class:`~._real_one_key_experiment.RealOneKeyExperiment`) is in :mod:`._real_one_key_experiment`.

**Cost.** A scale that is 1 at every position below ``L`` (``standard``, ``qwen_logn``, ``yarn``)
leaves the first ``L`` positions unchanged, so per (sequence, RoPE variant) one pass over them
(:func:`~softmax_scale.models.readout.read_out` with ``stop = L``) is kept, and each such scale
continues from its keys and values; the tasks are ordered so that consecutive ones share it.

**The retrieving heads** (the first task, ``task = heads``).  Every head's share on the source
keys is measured at ``L`` on *selection* sequences, and the :data:`HEADS` heads with the largest
share are the retrieving heads.  Their gap groups, scales and pooled scores are then measured at
``L`` on other, *reference* sequences (kept beside the result file,
``.<stem>-reference.npz``, and measured again where it is missing); at every other cell their
measured share stands beside the share :func:`~softmax_scale.heads.predict_share` gives from the
reference alone, the scores grown by the cell's scale factor.

**Backend.** ``backend = "jax"`` (``softmax-scale run real_passkey --backend jax``) reads every
cell with the same pass compiled by XLA (``read_out(..., backend="jax")``,
:mod:`softmax_scale.models.readout_jax`): with ``jax[cuda]`` installed (the user's install, beside
the ``train`` extra), ``JAX_PLATFORMS=cuda softmax-scale run real_passkey --backend jax`` runs the
grid on a GPU.  Its numbers equal the numpy pass's to float32 rounding, not in the last digits,
so the backend is part of the ``scoring`` header line that a resume must match: the rows of the
two backends never mix in one file.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._util.validation import check_choice, check_int
from ..models.llama import scale_factors
from ..models.readout import read_out
from ..schemes.rope import ROPES, rope_frequencies

__all__ = ["COLUMNS", "HEADS", "INTS", "MODEL", "READ_ROPES", "REFERENCE", "TEXT", "TRAINED_ROPE", "OneKeySequence",
           "RealRun", "memory_needed"]

#: The model named in the evidence rows.
MODEL = "SmolLM2-135M"
#: Its size in parameters, as its name gives it (and :mod:`.real_extrapolation`'s rows).
PARAMETERS = 135_000_000
#: Columns: ``task`` (``passkey``, ``copy``, ``control``: the copied text alone, ``heads``), the
#: sequence ``length`` in tokens, the ``prompt`` (sequence) name, ``rope``, ``scale``, then the row
#: ``kind``: ``score`` (``accuracy``, ``loss`` over ``count`` scored tokens, ``seconds``), ``share``
#: (a retrieving head: measured ``share`` on the source keys, ``share_predicted`` from the
#: reference, ``sigma``, ``gap``, ``value`` = mean keys, ``count`` = queries), ``head_L`` (every head
#: on the selection sequences, ``note`` ``retrieving`` for the chosen ones) and ``reference``.
COLUMNS = ("task", "length", "prompt", "rope", "scale", "kind", "layer", "head", "depth", "accuracy", "loss", "share",
           "share_predicted", "sigma", "gap", "value", "count", "seconds", "note")
TEXT = ("task", "prompt", "rope", "scale", "kind", "note")
INTS = ("length", "layer", "head", "count")
#: The scale the model was trained with: every other is compared with it.
REFERENCE = "standard"
#: The trained frequencies (the floor of every comparison past ``L``).
TRAINED_ROPE = "none"
#: RoPE variants the read-out measures (ReRoPE's far logits are not the products of the kept keys).
READ_ROPES = tuple(r for r in ROPES if r != "rerope")
#: Retrieving heads followed at every length.
HEADS = 4
#: Points of a retrieving head's compressed pool of scores.
SAMPLE_SIZE = 2048
#: The toolkit's per-head rule tested on the real model: at each ``n > L`` the factor that maximises the
#: retrieving heads' predicted share (:func:`softmax_scale.heads.share_max`), the other heads as trained.
SHARE_MAX = "toolkit_share_max"
TOOLKIT_SCALES = (SHARE_MAX,)
#: Lengths (log-spaced from ``L + 1``) where the rule is solved; between them ``ln f`` is linear in ``ln n``.
RULE_POINTS = 9


def memory_needed(config, n: int, query_block: int) -> int:
    """Bytes a read-out of ``n`` tokens holds at its peak, about.

    Two copies of every layer's keys and values (the prefix's and the continuation's), the
    activations of the computed positions and one block of attention rows, float32.
    """
    c = config
    kv = 2 * 2 * c.n_layers * c.n_kv_heads * n * c.head_dim
    act = n * (4 * c.d_model + 3 * c.d_ff + 2 * c.n_heads * c.head_dim)
    att = 3 * query_block * n * c.n_heads
    return 4 * (kv + act + att)


def check_lengths(model, lengths, minimum: int, query_block: int, name: str) -> tuple:
    """``lengths`` (the parameter ``name``) as ints, each at least ``minimum`` and within the machine's memory."""
    out = tuple(check_int(n, name, minimum=minimum) for n in lengths)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for n in out:
        need = memory_needed(model.config, n, query_block)
        if need > total:
            raise ValueError(f"`{name}`: {n} tokens need about {need / 2**30:.1f} GiB, more than the machine's "
                             f"{total / 2**30:.1f} GiB")
    return out


def scoring_line(backend: str) -> str:
    """The ``scoring`` header line (matched on resume): how the rows are computed, the backend among it."""
    on = "" if backend == "numpy" else " on JAX (XLA, float32 matrix products at highest precision)"
    return f"teacher-forced greedy choice (argmax) and loss at each scored token; float32 activations{on}, float64 shares"


def check_cells(ropes, scales, head_dim, L) -> None:
    """RoPE variants among :data:`READ_ROPES` and scales the registry or :data:`TOOLKIT_SCALES` know (:data:`REFERENCE` among them)."""
    for r in ropes:
        check_choice(r, "ropes", READ_ROPES)
    for sc in scales:
        if sc not in TOOLKIT_SCALES:
            scale_factors(sc, [1.0], head_dim, L)  # raises on an unknown name
    if REFERENCE not in scales:
        raise ValueError(f"`scales` must include {REFERENCE!r} (the reference of every other scale)")


@dataclass(frozen=True)
class OneKeySequence:
    """One scored sequence.

    Attributes
    ----------
    ids : ndarray of int64
    scored : ndarray of int64
        Query positions ``t`` scored on ``ids[t + 1]``.
    probe : ndarray of int64
        The scored positions where the heads are measured.
    source : ndarray of int64
        The source key of each probe position (the token the answer repeats).
    depth : float
        Where the key sits, as a fraction of the filler (NaN for a copy).
    all_of : bool
        The cell's accuracy is 1 where every scored token is the greedy choice (a pass key), else the
        fraction that are (a copy).
    """

    ids: np.ndarray
    scored: np.ndarray
    probe: np.ndarray
    source: np.ndarray
    depth: float = float("nan")
    all_of: bool = False


def _logits(readout, seq, heads=None):
    """``[layers, heads, probes, n]`` float32 logits of every head (or ``{(layer, head): [probes, n]}``) and the mask."""
    layers = len(readout.queries)
    if heads is None:
        s = [readout.scores(la)[0].astype(np.float32) for la in range(layers)]
        return np.stack(s), readout.scores(0)[1]
    out = {}
    for la in sorted({la for la, _ in heads}):
        s, mask = readout.scores(la)
        for he in [he for x, he in heads if x == la]:
            out[(la, he)] = s[he]
    return out, readout.scores(0)[1] if heads else None


def _shares(logits, mask, source):
    """:func:`~softmax_scale.heads.key_share`, each logit raised to at least its row's largest less 700.

    A head scaled far up (the share maximiser's ``e^4``) puts keys more than 745 below the top,
    which ``key_share`` takes for mask fills; their probability is 0 either way (``e^-700`` beside 1).
    """
    from ..heads import key_share

    lg = np.asarray(logits, dtype=np.float64)
    mask = np.asarray(mask)[(None,) * (lg.ndim - np.ndim(mask))]  # (queries, keys) for every head
    top = np.where(mask, lg, -np.inf).max(axis=-1, keepdims=True)
    return key_share(np.maximum(lg, top - 700.0), source, mask=mask, sample_size=SAMPLE_SIZE)


@dataclass
class RealRun:
    """What the tasks of one run share in this process: the model, its sequences, the kept prefix pass, the reference."""

    experiment: object
    model: object
    L: int
    config: object
    reference_path: Path | None
    query_block: int
    backend: str = "numpy"
    prefix_key: tuple | None = None
    prefix: object = None
    reference: dict | None = None
    sequences: dict = field(default_factory=dict)
    rules: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)

    def sequence(self, task: str, length: int, prompt: str) -> OneKeySequence:
        """The sequence of a cell (built once)."""
        k = (task, length, prompt)
        if k not in self.sequences:
            self.sequences[k] = self.experiment.sequence(self, task, length, prompt)
        return self.sequences[k]

    def read(self, seq: OneKeySequence, rope: str, scale: str, key: tuple):
        """The read-out of ``seq`` under ``rope`` and ``scale``: continued from the kept prefix pass where the scale is 1 below ``L``."""
        c = self.model.config
        n = seq.ids.size
        f = self.factors(scale, n)
        inv = rope_frequencies(rope, c.head_dim, c.rope_base, self.L, n)
        kw = dict(probe=seq.probe, factors=f, inv_freq=inv, query_block=self.query_block, backend=self.backend)
        if n <= self.L or seq.scored.min() < self.L or not np.all(f[..., :self.L] == 1.0):
            return read_out(self.model, seq.ids, seq.scored, **kw)
        if self.prefix_key != (key, rope):
            self.prefix_key, self.prefix = None, None  # free the last one first
            self.prefix = read_out(self.model, seq.ids, [], stop=self.L, inv_freq=inv, query_block=self.query_block,
                                   backend=self.backend)
            self.prefix_key = (key, rope)
        return read_out(self.model, seq.ids, seq.scored, start=self.L, cache=self.prefix.cache, **kw)

    def factors(self, scale: str, n: int) -> np.ndarray:
        """The factor of each query position ``[n]`` (a registered scale) or ``[layers, heads, n]`` (:data:`TOOLKIT_SCALES`)."""
        c = self.model.config
        if scale not in TOOLKIT_SCALES:
            return scale_factors(scale, np.arange(1, n + 1), c.head_dim, self.L)
        if (scale, n) not in self.rules:
            self.rules[(scale, n)] = self._share_max(n)
        return self.rules[(scale, n)]

    def _share_max(self, n):
        """:data:`SHARE_MAX` past ``L``, ``[layers, heads, n]``.

        Each retrieving head's maximiser (``e^4``, the searched range's end, where the supremum is
        at infinite factor); 1 below ``L``, on the other heads and where the evaluator cannot answer.
        """
        from ..distributions import WeightedSample
        from ..heads import share_max

        c = self.model.config
        out = np.ones((c.n_layers, c.n_heads, n))
        if n <= self.L:
            return out
        ref = self.heads()
        ns = np.unique(np.geomspace(self.L + 1, n, RULE_POINTS).round().astype(np.int64))
        keys = np.arange(self.L + 1, n + 1)  # the keys the queries at positions L .. n-1 see
        for h in ref["heads"]:
            r = ref[h]
            if r["x"] is None or not r["gap"] > 0:
                continue
            sm = share_max(r["alpha_bins"], WeightedSample(r["x"], r["w"]), r["gap_bins"], ns)
            f = np.where(np.isinf(sm.factor), np.exp(4.0), sm.factor)
            f = np.where(np.isfinite(f) & (f > 0), f, 1.0)
            out[h][self.L:] = np.exp(np.interp(np.log(keys), np.log(ns), np.log(f)))
        return out

    def heads(self) -> dict:
        """The retrieving heads and their reference (read from the kept file, or measured)."""
        if self.reference is None:
            self.reference = _load_reference(self.reference_path, self.tag) or self.measure_heads()[0]
        return self.reference

    @property
    def tag(self) -> str:
        """What the reference depends on, hashed (the model, ``L``, the selection and reference sequences)."""
        names = self.experiment.selection(self.config, self.L), self.experiment.references(self.config, self.L)
        return hashlib.sha256(repr((self.model.sha256 if self.model.path else "?", self.L, names, HEADS,
                                    SAMPLE_SIZE)).encode()).hexdigest()[:16]

    def measure_heads(self):
        """Choose the retrieving heads on the selection sequences and measure them on the reference ones (both at ``L``)."""
        exp, cfg = self.experiment, self.config

        passes = {}

        def pooled(cells):
            logits, masks, sources = [], [], []
            for task, length, prompt in cells:
                t0 = time.perf_counter()
                seq = self.sequence(task, length, prompt)
                r = self.read(seq, TRAINED_ROPE, REFERENCE, (task, length, prompt))
                lg, mask = _logits(r, seq)
                passes[(task, length, prompt)] = (r.argmax, r.nll, lg, time.perf_counter() - t0)
                logits.append(lg)
                masks.append(mask)
                sources.append(seq.source)
            return np.concatenate(logits, axis=2), np.concatenate(masks), np.concatenate(sources)

        lg, mask, src = pooled(exp.selection(cfg, self.L))
        sel = _shares(lg, mask, src)
        del lg
        order = np.argsort(np.where(np.isfinite(sel.share), sel.share, -1.0), axis=None, kind="stable")[::-1]
        heads = [tuple(int(i) for i in np.unravel_index(j, sel.share.shape)) for j in order[:HEADS]]
        lg, mask, src = pooled(exp.references(cfg, self.L))
        ks = _shares(lg, mask, src)
        del lg
        for cell, (argmax, nll, lg, seconds) in passes.items():  # the cells these passes are, read once
            self.measured[cell] = (argmax, nll, {h: lg[h] for h in heads}, seconds)
        passes.clear()
        measured = [tuple(int(i) for i in h) for h in np.ndindex(*ks.share.shape)]
        ref = {"heads": heads, "measured": measured, "tag": self.tag}
        for j, h in enumerate(measured):
            pool = ks.pools[j]
            ref[h] = {"share": float(ks.share[h]), "gap": float(ks.gap[h]), "alpha": float(ks.alpha[h]),
                      "n": float(ks.n[h]), "queries": int(ks.queries[h]), "alpha_bins": ks.alpha_bins[h],
                      "gap_bins": ks.gap_bins[h], "x": None if pool is None else pool.x,
                      "w": None if pool is None else pool.w}
        _save_reference(self.reference_path, ref)
        self.reference = ref
        return ref, sel

    def predicted(self, h, n_test: float, scale: str, n: int) -> float:
        """:func:`~softmax_scale.heads.predict_share` of head ``h`` at ``n_test`` keys from the reference, grown by ``scale``."""
        from ..distributions import WeightedSample
        from ..heads import predict_share

        r = self.heads()[h]
        if not np.isfinite(n_test) or r["x"] is None or not np.isfinite(r["gap"]) or not r["alpha"] > 0:
            return float("nan")
        f = self.factors(scale, max(n, round(r["n"])))
        f = f if f.ndim == 1 else f[h]
        growth = f[round(n_test) - 1] / f[round(r["n"]) - 1]  # the query that sees k keys sits at position k - 1
        pool = WeightedSample(r["x"], r["w"])
        return float(predict_share(r["alpha_bins"], pool, r["gap_bins"], [round(n_test)], growth=[growth])[0])


def _save_reference(path, ref):
    """The retrieving heads' reference (all that the later cells read: about 130 kB, against 9 MB for every head)."""
    if path is None:
        return
    arrays = {"tag": np.array(ref["tag"]), "heads": np.array(ref["heads"], dtype=np.int64),
              "measured": np.array(ref["heads"], dtype=np.int64)}
    for i, h in enumerate(ref["heads"]):
        for k, v in ref[h].items():
            arrays[f"{i}_{k}"] = np.array(np.nan if v is None else v)
    from .._util.files import atomic_write

    atomic_write(path, lambda p: np.savez(p, **arrays))


def _load_reference(path, tag):
    if path is None or not Path(path).is_file():
        return None
    with np.load(path) as z:
        if str(z["tag"]) != tag:
            return None
        ref = {"heads": [tuple(int(x) for x in h) for h in z["heads"]],
               "measured": [tuple(int(x) for x in h) for h in z["measured"]], "tag": tag}
        for i, h in enumerate(ref["measured"]):
            d = {k: z[f"{i}_{k}"] for k in ("share", "gap", "alpha", "n", "queries", "alpha_bins", "gap_bins", "x", "w")}
            ref[h] = {k: (float(v) if v.ndim == 0 and k not in ("x", "w") else v) for k, v in d.items()}
            ref[h]["queries"] = int(ref[h]["queries"])
            if ref[h]["x"].ndim == 0:
                ref[h]["x"] = ref[h]["w"] = None
    return ref

"""What real heads do: :func:`real_head_table` runs a BERT encoder on real text at several lengths.

For each length ``n`` in ``ns``, ``chunks`` windows of the text are drawn at seeded offsets
(:func:`~softmax_scale.models.token_chunks`), each ``n - 2`` word pieces long and wrapped as
``[CLS] pieces [SEP]``: **``n`` counts the two special tokens**, so every query row of every
head has exactly ``n`` keys and ``n = 512`` is the model's whole context.  The encoder is
bidirectional: no mask.  The windows of one ``n`` go through the model as one batch; a hook takes
each layer's pre-softmax scores ``q·k / sqrt(d)`` and, per head, stacks the query rows of all
windows into one ``(chunks * n, n)`` matrix for :func:`softmax_scale.head_stats`.  So a head's
statistic is the average over all its rows in all windows (equal row counts per window: the same
as averaging the per-window statistics), and its empirical score distribution pools every window.

The same logits are also read after the ``entropy_invariant`` rescaling pinned at
``train_length``: multiplied by ``pinned("entropy_invariant", L).factor(n, d) = log n / log L``
(:func:`softmax_scale.schemes.pinned`).  The rescaling is applied
to the measured logits of each layer only, as a read-out (the model's own forward pass, and so the
later layers' inputs, are unchanged); at ``n = L`` the factor is exactly 1 and the rescaled
statistics are the unrescaled ones.

Per head, the slope of ``H`` against ``log n`` is the least-squares slope over ``ns`` of the
measured entropy (``slope``), of the i.i.d. normal prediction at each ``n`` with that head's
``sigma`` at that ``n`` (``slope_iid``), and of the rescaled entropy (``slope_rescaled``).

Weights are read once per process (:func:`softmax_scale.models.load`).  The experiment
``real_heads`` (:data:`EXPERIMENT`, ``softmax-scale run real_heads``) writes the table's rows
(:meth:`RealHeadTable.to_rows`) as a result file and reads them back as a :class:`RealHeadTable`;
``softmax-scale heads`` prints one length of it.
"""

from __future__ import annotations

import datetime
import numbers
import os
import sys
from dataclasses import dataclass

import numpy as np

from .._util.progress import progress_bar
from .._util.rng import seed_sequence
from .._util.validation import check_bool, check_int
from ..heads import head_stats
from ..schemes import pinned
from .base import Experiment

__all__ = ["DEFAULT_NS", "EXPERIMENT", "RealHeadTable", "RealHeadsConfig", "RealHeadsExperiment", "real_head_table",
           "table_from_rows"]

#: The lengths of the table.
DEFAULT_NS = (32, 64, 128, 256, 512)
#: The scheme whose rescaling is read out beside the measurement.
RESCALING = "entropy_invariant"
#: The mean-field and geometric alpha* laws for unit-variance normal scores, ``c sqrt(log n)``.
MEAN_FIELD_C = 0.84
GEOMETRIC_C = 1.45

_PER_N = ("sigma", "entropy", "entropy_ratio", "sum_p2", "top1", "sink", "sep", "previous", "next", "kurtosis",
          "predicted_entropy", "predicted_entropy_empirical", "alpha_star", "entropy_rescaled", "entropy_ratio_rescaled")


def _slope(log_n, y):
    """Least-squares slope of ``y`` (axis 0 over ``ns``) against ``log_n``."""
    x = log_n - log_n.mean()
    yc = y - y.mean(axis=0)
    return np.tensordot(x, yc, axes=(0, 0)) / np.dot(x, x)


@dataclass(frozen=True)
class RealHeadTable:
    """Per-head softmax statistics of a real encoder on real text, at several lengths.

    Arrays shaped ``(len(ns), layers, heads)`` unless stated; see
    :mod:`softmax_scale.experiments.real_heads` for how they are measured and
    :class:`softmax_scale.HeadStats` for the definitions.

    Attributes
    ----------
    model, text : str
        Model name and corpus name.
    ns : ndarray of int
        Lengths, counting [CLS] and [SEP] (keys per query row).
    chunks : int
        Windows per length.
    layer_index : ndarray of int
        The layers tabulated (axis 1).
    head_dim : int
        ``d`` of the heads.
    train_length : int
        Length at which the ``entropy_invariant`` rescaling is 1.
    scale_factor : ndarray, shape (len(ns),)
        The rescaling factor ``log n / log train_length`` applied to the logits.
    sigma, entropy, entropy_ratio, sum_p2, top1, sink, kurtosis : ndarray
        Measured (``entropy`` in nats, ``entropy_ratio = H / log n``); ``sink`` is the mean
        probability on key 0, the [CLS] token.
    sep, previous, next : ndarray
        Mean probability on the last key (the [SEP] token, BERT's other sink), on the previous
        token (key ``i - 1`` for query ``i``) and on the next one (key ``i + 1``), averaged over
        all ``n`` queries (the first query has no previous token, the last no next one: they
        count 0). A head with ``previous`` or ``next`` near 1 is positional: it attends to a
        relative position, whatever the text.
    predicted_entropy, predicted_entropy_empirical : ndarray
        i.i.d. predictions (NaN with ``predict=False``).
    alpha_star : ndarray
        Mean-field ``alpha*`` of the head's empirical score distribution.
    entropy_rescaled, entropy_ratio_rescaled : ndarray
        The same after the rescaling.
    slope, slope_iid, slope_rescaled : ndarray, shape (layers, heads)
        Least-squares slopes of ``H`` against ``log n`` (nats per nat).
    """

    model: str
    text: str
    ns: np.ndarray
    chunks: int
    layer_index: np.ndarray
    head_dim: int
    train_length: int
    scale_factor: np.ndarray
    sigma: np.ndarray
    entropy: np.ndarray
    entropy_ratio: np.ndarray
    sum_p2: np.ndarray
    top1: np.ndarray
    sink: np.ndarray
    sep: np.ndarray
    previous: np.ndarray
    next: np.ndarray
    kurtosis: np.ndarray
    predicted_entropy: np.ndarray
    predicted_entropy_empirical: np.ndarray
    alpha_star: np.ndarray
    entropy_rescaled: np.ndarray
    entropy_ratio_rescaled: np.ndarray
    slope: np.ndarray
    slope_iid: np.ndarray
    slope_rescaled: np.ndarray

    @property
    def log_n(self) -> np.ndarray:
        """``log ns``."""
        return np.log(self.ns.astype(np.float64))

    @property
    def predicted_ratio(self) -> np.ndarray:
        """``predicted_entropy / log n`` (normal scores)."""
        return self.predicted_entropy / self.log_n[:, None, None]

    @property
    def predicted_ratio_empirical(self) -> np.ndarray:
        """``predicted_entropy_empirical / log n``."""
        return self.predicted_entropy_empirical / self.log_n[:, None, None]

    def laws(self) -> dict:
        """``alpha*`` laws and the freezing scale at each ``n``: name -> array over ``ns``."""
        root = np.sqrt(self.log_n)
        return {"mean_field 0.84 sqrt(log n)": MEAN_FIELD_C * root, "geometric 1.45 sqrt(log n)": GEOMETRIC_C * root,
                "freezing sqrt(2 log n)": np.sqrt(2.0) * root}

    def to_rows(self) -> list[dict]:
        """One dict per (n, layer, head), with every per-n field and the head's slopes."""
        rows = []
        for i, n in enumerate(self.ns):
            for a, layer in enumerate(self.layer_index):
                for h in range(self.sigma.shape[2]):
                    row = {"n": int(n), "layer": int(layer), "head": h}
                    row.update({k: float(getattr(self, k)[i, a, h]) for k in _PER_N})
                    row.update({k: float(getattr(self, k)[a, h]) for k in ("slope", "slope_iid", "slope_rescaled")})
                    rows.append(row)
        return rows

    def to_csv(self) -> str:
        """The rows of :meth:`to_rows` as CSV text (6 significant digits)."""
        rows = self.to_rows()
        keys = list(rows[0])
        lines = [",".join(keys)]
        lines += [",".join(f"{r[k]:.6g}" if isinstance(r[k], float) else str(r[k]) for k in keys) for r in rows]
        return "\n".join(lines) + "\n"

    def head_table(self, n: int) -> str:
        """Markdown table of every head at length ``n`` (one of ``ns``)."""
        i = self._index(n)
        lines = [f"heads of {self.model} at n = {int(n)} ({self.chunks} windows of `{self.text}`)", "",
                 "| layer | head | sigma | alpha* | H/log n | normal | empirical | [CLS] | [SEP] | prev | next | top1 "
                 "| kurtosis | slope | iid slope | rescaled slope |",
                 "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        pr, pe = self.predicted_ratio[i], self.predicted_ratio_empirical[i]
        for a, layer in enumerate(self.layer_index):
            for h in range(self.sigma.shape[2]):
                lines.append(
                    f"| {layer} | {h} | {self.sigma[i, a, h]:.3f} | {self.alpha_star[i, a, h]:.3f} | "
                    f"{self.entropy_ratio[i, a, h]:.3f} | {pr[a, h]:.3f} | {pe[a, h]:.3f} | {self.sink[i, a, h]:.3f} | "
                    f"{self.sep[i, a, h]:.3f} | {self.previous[i, a, h]:.3f} | {self.next[i, a, h]:.3f} | "
                    f"{self.top1[i, a, h]:.3f} | {self.kurtosis[i, a, h]:.2f} | {self.slope[a, h]:.3f} | "
                    f"{self.slope_iid[a, h]:.3f} | {self.slope_rescaled[a, h]:.3f} |"
                )
        return "\n".join(lines)

    def summary_markdown(self) -> str:
        """Summaries over the heads at each ``n`` (the README's table), then the slopes."""
        q = (0.1, 0.5, 0.9)
        laws = self.laws()
        lines = ["| n | sigma p10 / p50 / p90 | 0.84 sqrt(log n) | 1.45 sqrt(log n) | sqrt(2 log n) | heads sigma > sqrt(2 log n) "
                 "| H/log n median | normal pred. median | empirical pred. median | median abs error normal / empirical |",
                 "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for i, n in enumerate(self.ns):
            s = self.sigma[i].ravel()
            qs = " / ".join(f"{v:.2f}" for v in np.quantile(s, q))
            frz = laws["freezing sqrt(2 log n)"][i]
            m, pn, pe = self.entropy_ratio[i].ravel(), self.predicted_ratio[i].ravel(), self.predicted_ratio_empirical[i].ravel()
            lines.append(
                f"| {int(n)} | {qs} | {laws['mean_field 0.84 sqrt(log n)'][i]:.2f} | {laws['geometric 1.45 sqrt(log n)'][i]:.2f} "
                f"| {frz:.2f} | {int(np.sum(s > frz))} / {s.size} | {np.median(m):.3f} | {np.nanmedian(pn):.3f} | "
                f"{np.nanmedian(pe):.3f} | {np.nanmedian(np.abs(m - pn)):.3f} / {np.nanmedian(np.abs(m - pe)):.3f} |"
            )
        lines += ["", "| slope of H against log n | p10 | median | p90 |", "|---|---:|---:|---:|"]
        for name, v in (("measured", self.slope), ("i.i.d. normal, head's own sigma(n)", self.slope_iid),
                        (f"measured, entropy_invariant rescaling pinned at n = {self.train_length}", self.slope_rescaled)):
            p = np.quantile(v.ravel(), q)
            lines.append(f"| {name} | {p[0]:.3f} | {p[1]:.3f} | {p[2]:.3f} |")
        return "\n".join(lines)

    def _index(self, n) -> int:
        hits = np.flatnonzero(self.ns == n)
        if not hits.size:
            raise ValueError(f"`n` must be one of the table's ns {self.ns.tolist()}, got {n!r}")
        return int(hits[0])

    def __repr__(self):
        return (f"RealHeadTable({self.model}, text={self.text!r}, ns={self.ns.tolist()}, chunks={self.chunks}, "
                f"layers={self.layer_index.tolist()}, heads={self.sigma.shape[2]})")


def _check_ns(ns, limit) -> np.ndarray:
    vals = np.atleast_1d(np.asarray(ns))
    if vals.ndim != 1 or vals.size == 0 or vals.dtype.kind not in "iu" and not all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in vals.tolist()
    ):
        raise ValueError(f"`ns` must be integers between 4 and {limit}, got {ns!r}")
    vals = vals.astype(np.int64)
    if vals.min() < 4 or vals.max() > limit:
        raise ValueError(f"`ns` must be integers between 4 and {limit} (the model's positions, [CLS] and [SEP] included), got {ns!r}")
    if np.unique(vals).size != vals.size:
        raise ValueError(f"`ns` must not repeat a value, got {ns!r}")
    return np.sort(vals)


def real_head_table(
    model="minilm",
    *,
    ns=DEFAULT_NS,
    chunks: int = 8,
    rng=0,
    text: str = "pydoc_topics",
    layers=None,
    train_length: int = 128,
    predict: bool = True,
    sample_size: int = 512,
    progress: bool = False,
) -> RealHeadTable:
    """Run a BERT encoder on real text at each length in ``ns`` and tabulate every head.

    Parameters
    ----------
    model : str or BertEncoder
        A registered encoder name (``"minilm"``) or a loaded :class:`~softmax_scale.models.bert.BertEncoder`.
    ns : sequence of int
        Lengths, counting [CLS] and [SEP] (each between 4 and the model's positions, 512).
        One value gives no slopes (NaN).
    chunks : int
        Windows per length, drawn at seeded offsets of the text.
    rng : None, int or SeedSequence
        Seed of the offsets; the windows at a given ``n`` depend only on ``rng``, ``n`` and
        ``chunks``, not on the other lengths requested.
    text : str
        A corpus name (:func:`~softmax_scale.models.corpus_names`).
    layers : sequence of int, optional
        Only these layers (default: all). The forward pass is the same.
    train_length : int
        Length at which the ``entropy_invariant`` rescaling is pinned (factor 1).
    predict : bool
        Compute the i.i.d. predictions and ``alpha_star`` (the costly part).
    sample_size : int
        Passed to :func:`~softmax_scale.head_stats`: the empirical sample of a head is
        compressed to ``max(sample_size, 4 n)`` points.
    progress : bool
        A progress bar over (length, layer) steps on standard error (plain lines when it is
        not a terminal).

    Returns
    -------
    RealHeadTable
    """
    from ..models import registry
    from ..models.bert import BertEncoder, bert
    from ..models.corpus import corpus, corpus_names, token_chunks

    if isinstance(model, str):
        name = model
        registry.check_kind(name, "encoder", "real_head_table reads encoders")
        enc = registry.load(name)
    elif isinstance(model, BertEncoder):
        enc, name = model, model.path.name
    else:
        raise TypeError(f"`model` must be 'minilm' or a BertEncoder, got {type(model).__name__}")
    if text not in corpus_names():
        raise ValueError(f"`text` must be one of {corpus_names()}, got {text!r}")
    cfg = enc.config
    ns = _check_ns(ns, cfg.max_positions)
    chunks = check_int(chunks, "chunks", minimum=1, maximum=4096)
    train_length = check_int(train_length, "train_length", minimum=2)
    predict = check_bool(predict, "predict")
    progress = check_bool(progress, "progress")
    if layers is None:
        layer_index = np.arange(cfg.layers)
    else:
        layer_index = np.atleast_1d(np.asarray(layers))
        if layer_index.dtype.kind not in "iu" or layer_index.ndim != 1 or layer_index.size == 0 or \
                layer_index.min() < 0 or layer_index.max() >= cfg.layers or np.unique(layer_index).size != layer_index.size:
            raise ValueError(f"`layers` must be distinct integers in [0, {cfg.layers}), got {layers!r}")
        layer_index = np.sort(layer_index.astype(np.int64))
    base = seed_sequence(rng)
    pieces = enc.word_pieces(corpus(text))
    d = cfg.head_dim
    factors = np.array([float(pinned(RESCALING, train_length).factor(int(n), d)) for n in ns])

    shape = (ns.size, layer_index.size, cfg.heads)
    out = {k: np.full(shape, np.nan) for k in _PER_N}
    pos = {int(layer): a for a, layer in enumerate(layer_index)}
    last = int(layer_index.max())

    bar = progress_bar(total=ns.size * layer_index.size, desc=f"{name} heads", unit="layer", disable=not progress)
    for i, n in enumerate(ns):
        n = int(n)
        bar.set_postfix_str(f"n = {n}", refresh=False)
        seed = np.random.SeedSequence(base.entropy, spawn_key=(*base.spawn_key, n))
        windows = token_chunks(pieces, n - 2, chunks, rng=seed)
        ids = np.stack([enc.wrap(w) for w in windows])  # (chunks, n)

        def hook(layer, scores, i=i, n=n):
            if layer not in pos:
                return None
            a = pos[layer]
            # (chunks, heads, n, n) -> (heads, chunks * n, n): every query row of every window
            rows = np.ascontiguousarray(scores.transpose(1, 0, 2, 3)).reshape(cfg.heads, chunks * n, n)
            hs = head_stats(rows, predict=bool(predict), sample_size=sample_size)
            for k in ("sigma", "entropy", "entropy_ratio", "sum_p2", "top1", "sink", "kurtosis", "predicted_entropy",
                      "predicted_entropy_empirical", "alpha_star"):
                out[k][i, a] = getattr(hs, k)
            p = np.exp(rows - rows.max(axis=-1, keepdims=True), dtype=np.float64)
            p /= p.sum(axis=-1, keepdims=True)
            p = p.reshape(cfg.heads, chunks, n, n)
            out["sep"][i, a] = p[..., -1].mean(axis=(1, 2))
            out["previous"][i, a] = np.diagonal(p, offset=-1, axis1=2, axis2=3).sum(axis=(1, 2)) / (chunks * n)
            out["next"][i, a] = np.diagonal(p, offset=1, axis1=2, axis2=3).sum(axis=(1, 2)) / (chunks * n)
            if factors[i] == 1.0:
                out["entropy_rescaled"][i, a] = hs.entropy
                out["entropy_ratio_rescaled"][i, a] = hs.entropy_ratio
            else:
                rs = head_stats(rows * np.float32(factors[i]), predict=False)
                out["entropy_rescaled"][i, a] = rs.entropy
                out["entropy_ratio_rescaled"][i, a] = rs.entropy_ratio
            bar.update()
            return None

        bert(ids, enc.params, cfg, hook=hook, layers=last + 1)  # the layers after the last tabulated one are not needed
    bar.close()

    log_n = np.log(ns.astype(np.float64))
    if ns.size >= 2:
        slopes = {k: _slope(log_n, out[v]) for k, v in
                  (("slope", "entropy"), ("slope_iid", "predicted_entropy"), ("slope_rescaled", "entropy_rescaled"))}
    else:
        slopes = {k: np.full(shape[1:], np.nan) for k in ("slope", "slope_iid", "slope_rescaled")}
    return RealHeadTable(model=name, text=text, ns=ns, chunks=chunks, layer_index=layer_index, head_dim=d,
                         train_length=train_length, scale_factor=factors, **out, **slopes)


#: The per-head slopes (one value per layer and head, repeated on every length's row).
_SLOPES = ("slope", "slope_iid", "slope_rescaled")
#: The columns of :meth:`RealHeadTable.to_rows` (and of the result file).
COLUMNS = ("n", "layer", "head", *_PER_N, *_SLOPES)


def table_from_rows(rows, *, model: str, text: str, chunks: int, head_dim: int, train_length: int) -> RealHeadTable:
    """The :class:`RealHeadTable` whose :meth:`~RealHeadTable.to_rows` are ``rows`` (a dict of column arrays)."""
    ns = np.unique(rows["n"]).astype(np.int64)
    layers = np.unique(rows["layer"]).astype(np.int64)
    heads = int(np.max(rows["head"])) + 1 if len(rows["head"]) else 0
    ni = {int(n): i for i, n in enumerate(ns)}
    li = {int(x): a for a, x in enumerate(layers)}
    per_n = {k: np.full((ns.size, layers.size, heads), np.nan) for k in _PER_N}
    slopes = {k: np.full((layers.size, heads), np.nan) for k in _SLOPES}
    for j in range(len(rows["n"])):
        i, a, h = ni[int(rows["n"][j])], li[int(rows["layer"][j])], int(rows["head"][j])
        for k in _PER_N:
            per_n[k][i, a, h] = rows[k][j]
        for k in _SLOPES:
            slopes[k][a, h] = rows[k][j]
    factors = np.array([float(pinned(RESCALING, train_length).factor(int(n), head_dim)) for n in ns])
    return RealHeadTable(model=model, text=text, ns=ns, chunks=chunks, layer_index=layers, head_dim=head_dim,
                         train_length=train_length, scale_factor=factors, **per_n, **slopes)


@dataclass(frozen=True)
class RealHeadsConfig:
    """The real_heads experiment: the arguments of :func:`real_head_table`."""

    quick: bool = False
    model: str = "minilm"
    ns: tuple = DEFAULT_NS
    chunks: int = 8
    rng: int = 0
    text: str = "pydoc_topics"
    layers: tuple | None = None
    train_length: int = 128


@dataclass(frozen=True)
class HeadsTask:
    """The whole table (its slopes need every length): one task."""

    config: RealHeadsConfig
    progress: bool = False


class RealHeadsExperiment(Experiment):
    """Every head of a real encoder on real text at several lengths (:func:`real_head_table`)."""

    name = "real_heads"
    description = "every head of a real encoder (all-MiniLM-L6-v2) on real text at several lengths"
    file_stem = "real_heads"
    columns = COLUMNS
    ints = ("n", "layer", "head")
    key = task_columns = ()  # one task, one block: the whole file
    match = ("model", "text", "chunks", "rng", "layers", "train_length")
    in_process = True
    figure_names = ("real_heads_sigma", "real_heads_entropy")
    float_format = ".17g"  # exact: the figures drawn from the file are those drawn from the table

    def config(self, quick: bool = False) -> RealHeadsConfig:
        """The figures' settings: every length and layer on 8 windows, or (``quick``) two lengths, one window, layer 0."""
        return RealHeadsConfig(quick=True, ns=(32, 128), chunks=1, layers=(0,)) if quick else RealHeadsConfig()

    def tasks(self, config: RealHeadsConfig, *, out=None, progress: bool = False) -> list:
        """One task."""
        return [HeadsTask(config, progress)]

    def task_cells(self, task) -> tuple:
        """No cells: one task writes every row."""
        return ()

    def _heads(self, config) -> tuple:
        from ..models import registry

        c = registry.load(config.model).config
        return (c.layers if config.layers is None else len(config.layers)), c.heads

    def expected_rows(self, task) -> int:
        """A row per length, layer and head."""
        layers, heads = self._heads(task.config)
        return len(task.config.ns) * layers * heads

    def run_task(self, task) -> list:
        """:func:`real_head_table` with the configuration's arguments; its rows."""
        c = task.config
        t = real_head_table(c.model, ns=c.ns, chunks=c.chunks, rng=c.rng, text=c.text, layers=c.layers,
                            train_length=c.train_length, progress=task.progress)
        return [tuple(row[k] for k in COLUMNS) for row in t.to_rows()]

    def header(self, config, tasks, command) -> dict:
        """The command and the arguments; :attr:`match` the ones that define the table."""
        from ..models import registry

        enc = registry.load(config.model)
        return {"command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                "model": config.model, "file": enc.path.name, "text": config.text, "chunks": str(config.chunks),
                "rng": str(config.rng), "layers": "all" if config.layers is None else " ".join(map(str, config.layers)),
                "train_length": str(config.train_length), "head_dim": str(enc.config.head_dim),
                "date": datetime.date.today().isoformat()}

    def read(self, path) -> RealHeadTable:
        """The result file read back as a :class:`RealHeadTable`."""
        from .._util.store import read_table

        t = read_table(path, COLUMNS, ints=self.ints)
        h = t.header
        try:
            return table_from_rows(t.rows, model=h["model"], text=h["text"], chunks=int(h["chunks"]),
                                   head_dim=int(h["head_dim"]), train_length=int(h["train_length"]))
        except KeyError as err:
            raise ValueError(f"`path`: {path} has no header line {err} (not a file of `softmax-scale run real_heads`)") from None

    def summaries(self, table) -> list:
        """The summary over the heads, then every head at the longest length."""
        return [table.summary_markdown(), table.head_table(int(table.ns[-1]))]


EXPERIMENT = RealHeadsExperiment()

"""What :func:`~softmax_scale.experiments.real_extrapolation.length_extrapolation` writes, read back: a typed result with named accessors.

The CSV (:mod:`softmax_scale._util.store`) has one block of rows per (document, kind, RoPE, scale):

- ``kind = "model"``: the decoder itself under that RoPE variant and scale: per bucket one loss
  row (``layer = head = -1``) and one row per head (entropy, ``sigma``, sink);
- ``kind = "window"``: the sliding-window baseline (loss rows only; RoPE ``none``, scale
  ``standard``, as trained);
- ``kind = "iid"``: the i.i.d. predictions per head for that scale (``pred_normal``,
  ``pred_empirical``, ``invariant_factor``), from the heads measured under RoPE ``none``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .._util.store import read_table

__all__ = ["COLUMNS", "KINDS", "ExtrapolationResult", "loss_markdown", "read_extrapolation_csv"]

#: Row kinds: the model under a RoPE variant and scale, the sliding-window baseline, the i.i.d. prediction.
KINDS = ("model", "window", "iid")
COLUMNS = ("doc", "kind", "rope", "scheme", "lo", "hi", "layer", "head", "count", "loss", "entropy", "sigma", "sink",
           "pred_normal", "pred_empirical", "invariant_factor")
#: The per-head columns of each kind.
HEAD_COLUMNS = {"model": ("entropy", "sigma", "sink"), "iid": ("pred_normal", "pred_empirical", "invariant_factor"),
                "window": ()}


@dataclass(frozen=True)
class ExtrapolationResult:
    """A length-extrapolation CSV read back (see the module docstring for its rows).

    Attributes
    ----------
    path : str
    header : mapping of str -> str
        The provenance lines (command, model file and SHA-256, corpus, date, ...), read-only.
    train_length, length : int
        ``L`` and the evaluation length ``n``.
    head_dim : int
        Head dimension of the model (scale factors are functions of ``n`` and ``d``).
    edges : ndarray [B + 1]
        Bucket edges: bucket ``b`` holds the targets at positions ``edges[b] <= t < edges[b+1]``.
    docs : tuple of str
        Documents present.
    runs : tuple of (kind, rope, scheme)
        The blocks present (over all documents), sorted.
    """

    path: str
    header: MappingProxyType
    train_length: int
    length: int
    head_dim: int
    edges: np.ndarray
    docs: tuple
    runs: tuple
    _rows: dict = field(repr=False, compare=False)

    @property
    def rows(self) -> dict:
        """The file's columns, one array each (as :func:`softmax_scale._util.store.read_table` reads them)."""
        return self._rows

    @property
    def buckets(self) -> np.ndarray:
        """``[B, 2]`` pairs ``(lo, hi)`` of the bucket edges."""
        return np.stack([self.edges[:-1], self.edges[1:]], axis=1)

    def has(self, rope, scheme, kind="model") -> bool:
        """Whether any document has a block of this (kind, rope, scheme)."""
        return (kind, rope, scheme) in self.runs

    def _select(self, kind, rope, scheme):
        r = self._rows
        return (r["kind"] == kind) & (r["rope"] == rope) & (r["scheme"] == scheme)

    def loss(self, rope, scheme, kind="model") -> np.ndarray:
        """Loss per bucket (nats per token), the token-weighted mean over documents; NaN where a bucket has none."""
        r = self._rows
        m = self._select(kind, rope, scheme) & (r["layer"] == -1)
        out = np.full(len(self.edges) - 1, np.nan)
        for b, lo in enumerate(self.edges[:-1]):
            mm = m & (r["lo"] == lo)
            if mm.any():
                c = r["count"][mm]
                out[b] = np.sum(r["loss"][mm] * c) / np.sum(c)
        return out

    def baseline_loss(self) -> np.ndarray:
        """The sliding-window baseline's loss per bucket (NaN below ``L``, where it is the model itself)."""
        return self.loss("none", "standard", kind="window")

    def loss_table(self) -> dict:
        """``{(rope, scheme): (buckets, loss)}`` for the model runs, and the baseline under ``("window", "standard")``.

        The layout of :func:`loss_markdown` and the figure's panel (a): each loss over the buckets
        its rows cover (``buckets`` as in :attr:`buckets`).
        """
        out = {}
        keys = [((k, ro, s), (ro, s)) for k, ro, s in self.runs if k == "model"]
        if self.has("none", "standard", "window"):
            keys.append((("window", "none", "standard"), ("window", "standard")))
        for (kind, rope, scheme), name in sorted(keys, key=lambda x: x[1]):
            r = self._rows
            m = self._select(kind, rope, scheme) & (r["layer"] == -1)
            los = np.unique(r["lo"][m])
            loss = self.loss(rope, scheme, kind)
            keep = np.isin(self.edges[:-1], los)
            out[name] = (self.buckets[keep], loss[keep])
        return out

    def head_stat(self, column, rope, scheme, kind="model"):
        """``[docs, layers, heads, buckets]`` array of a per-head column, and the ``[B, 2]`` buckets it covers.

        ``kind="iid"`` reads the predictions (``rope`` is then the RoPE the heads were measured
        under, ``"none"``); see :meth:`prediction`.
        """
        if column not in HEAD_COLUMNS.get(kind, ()):
            raise ValueError(f"`column` must be one of {HEAD_COLUMNS.get(kind, ())} for kind {kind!r}, got {column!r}")
        r = self._rows
        m = self._select(kind, rope, scheme) & (r["layer"] >= 0)
        if not m.any():
            raise ValueError(f"no per-head rows of kind {kind!r}, rope {rope!r}, scheme {scheme!r} in {self.path}")
        los = np.unique(r["lo"][m])
        L = int(r["layer"][m].max()) + 1
        H = int(r["head"][m].max()) + 1
        out = np.full((len(self.docs), L, H, len(los)), np.nan)
        di = {d: i for i, d in enumerate(self.docs)}
        bi = {b: i for i, b in enumerate(los)}
        for doc, lay, hd, lo, v in zip(r["doc"][m], r["layer"][m], r["head"][m], r["lo"][m], r[column][m]):
            out[di[doc], int(lay), int(hd), bi[lo]] = v
        his = np.asarray([r["hi"][m & (r["lo"] == lo)][0] for lo in los])
        return out, np.stack([los, his], axis=1)

    def prediction(self, column, scheme):
        """The i.i.d. prediction ``column`` (``pred_normal``, ``pred_empirical``, ``invariant_factor``) for ``scheme``."""
        return self.head_stat(column, "none", scheme, kind="iid")


def read_extrapolation_csv(path) -> ExtrapolationResult:
    """Read a CSV written by :func:`~softmax_scale.experiments.real_extrapolation.length_extrapolation` (header lines start with ``#``)."""
    text, ints = ("doc", "kind", "rope", "scheme"), ("lo", "hi", "layer", "head", "count")
    try:
        t = read_table(path, COLUMNS, text=text, ints=ints)
        rows, h = t.rows, t.header
        edges = np.asarray([int(x) for x in h["buckets"].split()], dtype=np.int64)
        train_length, length = int(h["train_length"]), int(h["length"])
        head_dim = int(h["head_dim"])
    except (KeyError, ValueError) as err:
        raise ValueError(f"`path`: {path} is not a length_extrapolation CSV ({err})") from None
    runs = tuple(sorted(set(zip(rows["kind"], rows["rope"], rows["scheme"]))))
    return ExtrapolationResult(t.path, MappingProxyType(dict(h)), train_length, length, head_dim, edges,
                               tuple(sorted(set(rows["doc"]))), runs, rows)


def loss_markdown(res: ExtrapolationResult) -> str:
    """Loss per bucket (nats per token, mean over documents) for every (RoPE, scale) pair, as markdown.

    The window baseline comes first; past ``L`` each cell also shows its difference from the
    baseline of the same bucket.
    """
    table = res.loss_table()
    base_key = ("window", "standard")
    edges = res.buckets
    L = res.train_length
    base = res.baseline_loss()

    def lab(lo, hi):
        def k(x):
            return f"{x / 1024:g}k" if x >= 1024 else str(x)
        return f"[{k(lo)}, {k(hi)})"

    head = "| rope | scale | " + " | ".join(lab(lo, hi) for lo, hi in edges) + " |"
    lines = [head, "|---|---|" + "---:|" * len(edges)]
    keys = [base_key] + sorted(k for k in table if k != base_key)
    for key in keys:
        if key not in table:
            continue
        kind, rope = ("window", "none") if key == base_key else ("model", key[0])
        loss = res.loss(rope, key[1], kind)
        cells = []
        for b, (lo, hi) in enumerate(edges):
            if not np.isfinite(loss[b]):
                cells.append("")
            elif key != base_key and lo >= L and np.isfinite(base[b]):
                cells.append(f"{loss[b]:.3f} ({loss[b] - base[b]:+.3f})")
            else:
                cells.append(f"{loss[b]:.3f}")
        name = "sliding window (baseline)" if key == base_key else key[0]
        lines.append(f"| {name} | {key[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

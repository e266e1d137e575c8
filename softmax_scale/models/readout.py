"""What a one-key task reads from a pass of a :class:`~softmax_scale.models.llama.LlamaDecoder` at a few positions.

:func:`read_out` runs positions ``start .. stop-1`` (after a :class:`~softmax_scale.models.llama.KVCache`
of the earlier ones, as :meth:`~softmax_scale.models.llama.LlamaDecoder.positions` does) and keeps,
at the scored positions only, the greedy next token, its loss, and each layer's queries; with the
keys of every position, :meth:`Readout.scores` gives each head's logits there.  The attention
statistics are not gathered, and the queries of the other positions are dropped layer by layer,
so a 32k-token pass holds its keys and values and little else.  ``backend="jax"`` runs the same pass
compiled by XLA on a JAX device (:mod:`.readout_jax`), the numbers equal to float32 rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.validation import check_choice, check_int
from .attention import MIN_SPLIT_ROWS, blas_on_one_thread, chunks, split_rows
from .llama import KVCache

__all__ = ["BACKENDS", "Readout", "read_out"]

#: The implementations of :func:`read_out`, the default first: this package's numpy pass, or :mod:`.readout_jax`.
BACKENDS = ("numpy", "jax")


@dataclass(frozen=True)
class Readout:
    """The scored positions of one pass.

    Attributes
    ----------
    positions : ndarray of int64
        The scored query positions ``t`` (each predicts ``ids[t + 1]``).
    probe : ndarray of int64
        The positions whose queries are kept (among ``positions``).
    argmax : ndarray of int64
        The greedy next token at each.
    nll : ndarray
        ``-log p(ids[t + 1] | ids[:t + 1])`` at each, float64.
    queries : tuple
        Per layer the scaled, rotated queries ``[heads, len(probe), head_dim]``.
    cache : KVCache
        The rotated keys and values of positions ``0 .. stop-1``.
    """

    positions: np.ndarray
    probe: np.ndarray
    argmax: np.ndarray
    nll: np.ndarray
    queries: tuple
    cache: KVCache

    def scores(self, layer: int) -> tuple:
        """Logits ``[heads, len(probe), stop]`` (float64) of ``layer``'s heads and the causal mask ``[len(probe), stop]``.

        A head reads the keys of its group (grouped-query attention); key ``j`` is allowed to the
        query at ``t`` where ``j <= t``.
        """
        q = self.queries[layer]
        k = self.cache.keys[layer]
        group = q.shape[0] // k.shape[0]
        s = np.stack([q[h].astype(np.float64) @ k[h // group].T.astype(np.float64) for h in range(q.shape[0])])
        return s, np.arange(k.shape[1])[None, :] <= self.probe[:, None]


def read_out(model, ids, positions, *, probe=None, start=0, stop=None, cache=None, factors=None, inv_freq=None,
             query_block=256, kernel="numpy", backend="numpy") -> Readout:
    """One pass over positions ``start .. stop-1`` of ``ids``, read at ``positions``.

    Parameters
    ----------
    model : LlamaDecoder
    ids : 1-D int array
    positions : array_like of int
        Scored positions in ``[start, stop)``, each below ``len(ids) - 1`` (possibly none).
    probe : array_like of int, optional
        Positions whose queries are kept, among ``positions`` (default: all of them).
    start : int
        First position computed; ``cache`` holds ``0 .. start-1``.
    stop : int, optional
        One past the last position computed (default: one past the last scored position).
    cache : KVCache, optional
    factors : array [len(ids)], optional
        Scale factor per query position (1 where omitted).
    inv_freq : array [head_dim/2], optional
        RoPE inverse frequencies (the trained ones where omitted).
    query_block : int
    kernel : {"numba", "numpy"}
        The numpy pass's attention (:data:`softmax_scale.models.attention.KERNELS`).
    backend : {"numpy", "jax"}
        :data:`BACKENDS`: the numpy pass, or the same pass on a JAX device (:mod:`.readout_jax`).

    Returns
    -------
    Readout
    """
    ids = model._check_ids(ids)
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    start = check_int(start, "start", minimum=0, maximum=len(ids) - 1)
    if stop is None:
        if not pos.size:
            raise ValueError("`stop` must be given where `positions` is empty")
        stop = int(pos.max()) + 1
    stop = check_int(stop, "stop", minimum=start + 1, maximum=len(ids))
    if pos.size and (pos.min() < start or pos.max() >= min(stop, len(ids) - 1)):
        raise ValueError(f"`positions` must lie in [{start}, {min(stop, len(ids) - 1)}) (each has a target), got "
                         f"{pos.min()}..{pos.max()}")
    keep = pos if probe is None else np.asarray(probe, dtype=np.int64).reshape(-1)
    if not np.isin(keep, pos).all():
        raise ValueError("`probe` must hold scored positions (among `positions`)")
    check_choice(backend, "backend", BACKENDS)
    if backend == "jax":
        from .readout_jax import forward_jax

        argmax, nll, queries, cache_out = forward_jax(model, ids, pos, keep, start=start, stop=stop, cache=cache,
                                                      factors=factors, inv_freq=inv_freq, query_block=query_block)
        return Readout(pos, keep, argmax, nll, queries, cache_out)
    p = model._forward(ids, start=start, stop=stop, cache=cache, factors=factors, inv_freq=inv_freq,
                       query_block=query_block, stats=False, kernel=kernel, keep=keep)
    argmax, nll = _score(p.x[pos - start], model.weights["output.weight"], ids[pos + 1])
    cache_out = KVCache(tuple(o.k for o in p.layers), tuple(o.v for o in p.layers))
    return Readout(pos, keep, argmax, nll, tuple(o.q for o in p.layers), cache_out)


#: Rows of logits per product with the output matrix on one thread, and per elementwise step within it.
_SCORE_ROWS, _SCORE_STEP = 256, 4


def _score(x, out_w, targets):
    """``(argmax, nll)`` of the rows of the final hidden states ``x [r, D]``: the greedy token and ``-log p(target)``.

    Each attention thread takes a share of the rows (:func:`~.attention.split_rows`) and, a block of
    up to :data:`_SCORE_ROWS` at a time, the logits ``x @ out_w.T`` (BLAS on one thread), then the
    log-normaliser ``max + log sum exp(l - max)``, the sum in float64, a few rows at a time; shares
    and blocks as :func:`~.attention.matmul_rows` cuts them, so the bits are those of one product.
    """
    argmax = np.empty(x.shape[0], dtype=np.int64)
    nll = np.empty(x.shape[0])

    def rows(a, b):
        lg = np.empty((min(_SCORE_ROWS, b - a), out_w.shape[0]), dtype=np.float32)
        for r0, r1 in chunks(a, b, _SCORE_ROWS):
            np.matmul(x[r0:r1], out_w.T, out=lg[:r1 - r0])
            for i in range(r0, r1, _SCORE_STEP):
                j = min(r1, i + _SCORE_STEP)
                blk = lg[i - r0:j - r0]
                top = blk.max(axis=1, keepdims=True)
                lse = np.log(np.exp(blk - top).sum(axis=1, dtype=np.float64)) + top[:, 0]
                argmax[i:j] = np.argmax(blk, axis=1)
                nll[i:j] = lse - blk[np.arange(j - i), targets[i:j]]

    with blas_on_one_thread():
        split_rows(rows, x.shape[0], MIN_SPLIT_ROWS)
    return argmax, nll

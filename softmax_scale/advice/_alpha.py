"""The note's ``alpha*`` for a head of dimension ``d``: the multiplier on ``q.k``, the causal value, what training found.

``alpha*`` (:func:`softmax_scale.optimal_alpha`, normal scores) is a factor on the standard
``1/sqrt(d)``: scores ``q.k/sqrt(d)`` of unit variance.  :func:`attention_alpha` puts it on ``q.k``
(the ``gradient_optimal`` scheme), beside the constant a decoder would use
(:func:`softmax_scale.optimal_alpha_causal`) and the caveat the training experiments give
(:func:`trained_alpha`, read from their result files).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._util.validation import check_int, check_n_array
from ..experiments import EXPERIMENTS, RESULTS
from ..objectives.causal import optimal_alpha_causal
from ..optimize import optimal_alpha
from ..schemes import attention_scale

__all__ = ["CAUSAL_MAX_N", "TRAINING_PAGE", "AttentionAlpha", "TrainedAlpha", "attention_alpha", "trained_alpha"]

#: The largest ``n`` whose causal constant is computed (its cost grows like ``n``: about 5 s here).
CAUSAL_MAX_N = 2**20
#: The findings page that holds the training experiments.
TRAINING_PAGE = "docs/findings/training.md"
#: The trained scale that is ``alpha*(n)`` per query, and the constant factors' label prefix, in the result files.
_PER_QUERY, _CONSTANT, _STANDARD = "alpha_star", "alpha=", "standard"


@dataclass(frozen=True)
class TrainedAlpha:
    """What the masked-LM training experiments found for ``alpha*`` as a training scale.

    Attributes
    ----------
    train_length, head_dim : int
        The models' training length ``L`` and head dimension.
    alpha_at_length : float
        ``optimal_alpha(L)``: the mean-field ``alpha*`` at the training length.
    best_alpha : float
        The constant factor with the lowest held-out loss at ``L`` (mean over seeds).
    best_loss, alpha_star_loss : float
        Held-out loss (nats per masked byte) of that constant and of ``alpha*(n)`` per query, mean over seeds.
    loss_gap, loss_gap_se : float
        ``alpha*(n)``'s held-out loss minus the best constant's, paired by seed: mean and standard error.
    loss_seeds : int
        Seeds in that pairing.
    accuracy, standard_accuracy : float
        Masked-byte accuracy (%) at ``L`` of ``alpha*(n)`` per query and of ``1/sqrt(d)``, mean over seeds.
    accuracy_rank, trained_scales, accuracy_seeds : int
        ``alpha*(n)``'s place by accuracy at ``L`` (1: best) among the scales trained in, their number,
        and the seeds.
    files : tuple of str
        The result files read.
    """

    train_length: int
    head_dim: int
    alpha_at_length: float
    best_alpha: float
    best_loss: float
    alpha_star_loss: float
    loss_gap: float
    loss_gap_se: float
    loss_seeds: int
    accuracy: float
    standard_accuracy: float
    accuracy_rank: int
    trained_scales: int
    accuracy_seeds: int
    files: tuple

    def text(self) -> str:
        """The caveat in two sentences, with the page that holds the evidence."""
        place = ("the lowest" if self.accuracy_rank == self.trained_scales
                 else f"number {self.accuracy_rank} from the top")
        return (f"caveat: trained in, this alpha* did worse than a smaller constant ({TRAINING_PAGE}; byte-level "
                f"masked LMs, L = {self.train_length}, head dimension {self.head_dim}). Held-out loss at L was lowest "
                f"with the constant alpha = {self.best_alpha:g} ({self.best_loss:.3f} nats per masked byte; "
                f"alpha*(L) = {self.alpha_at_length:.2f}); alpha*(n) per query was {self.loss_gap:+.3f} ± "
                f"{self.loss_gap_se:.3f} behind it ({self.loss_seeds} seeds, paired; {self.files[0]}), and its "
                f"accuracy at L, {self.accuracy:.2f}%, was {place} of the {self.trained_scales} scales trained in "
                f"(1/sqrt(d): {self.standard_accuracy:.2f}%; {self.accuracy_seeds} seeds; {self.files[1]}).")


def _config(table) -> dict:
    return json.loads(table.header.get("config", "{}"))


def _se(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1) / math.sqrt(x.size)) if x.size > 1 else float("nan")


def trained_alpha(results=None) -> TrainedAlpha | None:
    """The caveat the training experiments give about ``alpha*`` as a training scale, read from their result files.

    Parameters
    ----------
    results : str or PathLike, optional
        The folder of the experiments' result files (default: the committed ``figures/``).

    Returns
    -------
    TrainedAlpha or None
        None where the folder lacks ``alpha``'s or ``mlm``'s result file.
    """
    from ..experiments.alpha import alpha_summary
    from ..experiments.mlm import mlm_summary

    folder = RESULTS if results is None else Path(results)
    paths = {k: EXPERIMENTS[k].result_path(EXPERIMENTS[k].config(), folder) for k in ("alpha", "mlm")}
    if not all(p.exists() for p in paths.values()):
        return None
    tab = EXPERIMENTS["alpha"].read(paths["alpha"])
    cfg = _config(tab)
    L, head_dim = int(cfg["train_length"]), int(cfg["d_model"]) // int(cfg["heads"])
    s = alpha_summary(tab)
    constants = {k: v for k, v in s.items() if k.startswith(_CONSTANT)}
    best = min(constants, key=lambda k: float(np.mean(constants[k]["test_loss"])))
    star = s[_PER_QUERY]
    seeds = sorted(set(constants[best]["seeds"].tolist()) & set(star["seeds"].tolist()))
    loss_of = {k: dict(zip(v["seeds"].tolist(), v["test_loss"])) for k, v in ((best, constants[best]), (_PER_QUERY, star))}
    gap = np.array([loss_of[_PER_QUERY][x] - loss_of[best][x] for x in seeds])

    m = mlm_summary(EXPERIMENTS["mlm"].read(paths["mlm"]))
    trained = {k[0]: v for k, v in m.items() if k != "diverged" and k[1] == "trained"}
    acc = {k: float(v["accuracy"][np.flatnonzero(v["lengths"] == L)[0]]) * 100 for k, v in trained.items()}
    order = sorted(acc, key=lambda k: -acc[k])
    return TrainedAlpha(train_length=L, head_dim=head_dim, alpha_at_length=float(optimal_alpha(L)),
                        best_alpha=float(constants[best]["alpha"]), best_loss=float(np.mean(constants[best]["test_loss"])),
                        alpha_star_loss=float(np.mean(star["test_loss"])), loss_gap=float(np.mean(gap)),
                        loss_gap_se=_se(gap), loss_seeds=len(seeds), accuracy=acc[_PER_QUERY],
                        standard_accuracy=acc[_STANDARD], accuracy_rank=order.index(_PER_QUERY) + 1,
                        trained_scales=len(order), accuracy_seeds=int(trained[_PER_QUERY]["seeds"]),
                        files=tuple(f"figures/{p.name}" if folder.resolve() == RESULTS.resolve() else str(p)
                                    for p in paths.values()))


@dataclass(frozen=True)
class AttentionAlpha:
    """The note's ``alpha*`` for ``n`` keys and head dimension ``d``, on ``q.k``, with the causal value and the caveat.

    Attributes
    ----------
    n : int or ndarray
        Number(s) of keys (an int where one was given; so for every field below, a float).
    d : int
        Head dimension.
    alpha : float or ndarray
        Mean-field ``alpha*(n)`` for normal scores: the factor on ``1/sqrt(d)``.
    scale : float or ndarray
        ``alpha / sqrt(d)``: the multiplier on ``q.k`` (the ``gradient_optimal`` scheme).
    causal_alpha, causal_scale : float or ndarray
        The constant maximising the mean-field objective averaged over the positions ``2..n`` of a causal
        sequence (a decoder trained at ``L = n``), and it over ``sqrt(d)``; NaN where ``n < 4`` or
        ``n > CAUSAL_MAX_N``.
    training : TrainedAlpha or None
        What training with it found (None: the result files are not there).
    """

    n: int | np.ndarray
    d: int
    alpha: float | np.ndarray
    scale: float | np.ndarray
    causal_alpha: float | np.ndarray
    causal_scale: float | np.ndarray
    training: TrainedAlpha | None

    def to_dict(self) -> dict:
        """Plain values: every field, the caveat's numbers under ``training`` and its text under ``caveat``."""
        out = {k: getattr(self, k) for k in ("n", "d", "alpha", "scale", "causal_alpha", "causal_scale")}
        out["standard"] = 1.0 / math.sqrt(self.d)
        out["training"] = None if self.training is None else dict(self.training.__dict__)
        out["caveat"] = self._caveat()
        return out

    def _caveat(self) -> str:
        if self.training is not None:
            return self.training.text()
        return f"caveat: trained in, this alpha* did worse than a smaller constant ({TRAINING_PAGE})."

    def text(self) -> str:
        """The answer as ``softmax-scale alpha N --d D`` prints it."""
        rd = math.sqrt(self.d)
        lines = [f"alpha* (mean_field, normal scores), head dimension d = {self.d}: alpha* is a factor on the "
                 f"standard 1/sqrt(d) = {1 / rd:.6g}; the multiplier on q.k is alpha*/sqrt(d)",
                 f"{'n':>14} {'alpha*':>10} {'on q.k':>10} {'causal alpha*':>14} {'on q.k':>10}",
                 f"{'':>14} {'x1/sqrt(d)':>10} {'':>10} {'x1/sqrt(d)':>14}"]
        rows = (np.atleast_1d(x) for x in (self.n, self.alpha, self.scale, self.causal_alpha, self.causal_scale))
        for n, a, s, ca, cs in zip(*rows):
            causal = f"{ca:>14.6g} {cs:>10.6g}" if np.isfinite(ca) else f"{'-':>14} {'-':>10}"
            lines.append(f"{int(n):>14d} {a:>10.6g} {s:>10.6g} {causal}")
        lines.append("causal: the constant that maximises the mean-field objective averaged over the positions "
                     "2..n of a decoder trained at L = n (optimal_alpha_causal)"
                     + (f"; not computed below n = 4 or above n = {CAUSAL_MAX_N}"
                        if not np.all(np.isfinite(np.atleast_1d(self.causal_alpha))) else ""))
        lines.append(self._caveat())
        return "\n".join(lines)


def attention_alpha(n, d, *, results=None) -> AttentionAlpha:
    """The note's mean-field ``alpha*`` for ``n`` keys put on ``q.k`` for head dimension ``d``, with its caveat.

    Parameters
    ----------
    n : int or array_like
        Number(s) of keys, ``>= 2``.
    d : int
        Head dimension, ``>= 1``.
    results : str or PathLike, optional
        The folder of the training experiments' result files (default: the committed ``figures/``).

    Returns
    -------
    AttentionAlpha
    """
    nn, scalar = check_n_array(n)
    d = check_int(d, "d", minimum=1)
    alpha = np.atleast_1d(np.asarray(optimal_alpha(nn), dtype=float))
    scale = np.atleast_1d(np.asarray(attention_scale(nn, d, "gradient_optimal"), dtype=float))
    causal = np.array([optimal_alpha_causal(int(x)).alpha if 4 <= x <= CAUSAL_MAX_N else np.nan for x in nn])
    shape = (lambda x: x[0].item()) if scalar else (lambda x: x)
    return AttentionAlpha(n=shape(nn.astype(np.int64)), d=d, alpha=shape(alpha), scale=shape(scale),
                          causal_alpha=shape(causal), causal_scale=shape(causal / math.sqrt(d)),
                          training=trained_alpha(results))

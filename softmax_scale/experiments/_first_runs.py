"""FIRST's configuration, tasks and runs: train one model, test it at every length, measure its heads.

:mod:`softmax_scale.experiments.first` is the experiment (its result file, tables and evidence);
this module is what one task does (:func:`run_first_task`) and what it writes (:func:`expected_first_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._util.validation import check_int

__all__ = ["EVAL_SEED", "QUICK_FIRST", "TEST_LENGTHS", "TEST_SCALES", "TRAIN_LENGTHS", "FirstConfig",
           "FirstTask", "expected_first_rows", "first_accuracy", "first_shares", "run_first_task"]

#: Training lengths (bits), as in the paper's table.
TRAIN_LENGTHS = (10, 30, 100)
#: Test lengths (bits); each model is tested at those ``>= L``.
TEST_LENGTHS = (10, 30, 100, 300, 1000)
#: Test-time scales on the ``standard`` models: Qwen's ``max(1, log_P n)`` and the toolkit's share-holding factor.
TEST_SCALES = ("qwen_logn", "toolkit_share")
#: The seed of the test sequences (the same for every model): one stream per test length.
EVAL_SEED = 20260923


@dataclass(frozen=True)
class FirstTask:
    """One training run of FIRST's model and its tests.

    Attributes
    ----------
    model : FirstModel
    seed : int
    lengths : tuple of int
        Test lengths, the training length first (the share is measured there).
    count : int
        Test sequences per length.
    test_scales : tuple of str
        Test-time scales (``standard`` models).
    curve_every : int
    """

    model: object
    seed: int
    lengths: tuple
    count: int
    test_scales: tuple = ()
    curve_every: int = 1000

    def __post_init__(self):
        L = self.model.train_length
        if not self.lengths or self.lengths[0] != L:
            raise ValueError(f"`lengths` must start with the training length {L} (the share is measured there), "
                             f"got {self.lengths}")
        if any(n < L for n in self.lengths):
            raise ValueError(f"`lengths` must be >= the training length {L}, got {self.lengths}")

    @property
    def label(self) -> str:
        """The trained scale in the ``scheme`` column."""
        return self.model.label()

    @property
    def scales(self) -> tuple:
        """The test-time scales, as written in the ``scale`` column."""
        return ("trained", *self.test_scales)


@dataclass(frozen=True)
class FirstConfig:
    """The FIRST experiment.

    Attributes
    ----------
    quick : bool
    seeds : int
        Seeds per (training length, trained scale).
    train_lengths, test_lengths : tuple of int
        Bits after ``$``; every training length is a test length.
    scales : tuple of str
        Trained scales (:data:`~softmax_scale.train.scales.FIRST_SCALES`).
    test_scales : tuple of str
        Test-time scales on the ``standard`` models.
    steps : int
        Training steps (one sequence each).
    count : int
        Test sequences per length.
    curve_every : int
        Steps per point of the training curve.
    """

    quick: bool = False
    seeds: int = 4
    train_lengths: tuple = TRAIN_LENGTHS
    test_lengths: tuple = TEST_LENGTHS
    scales: tuple = ("standard", "chiang_cholak", "entropy_invariant", "ssmax")
    test_scales: tuple = TEST_SCALES
    steps: int = 10_000
    count: int = 1000
    curve_every: int = 1000

    def __post_init__(self):
        from .._util.validation import check_choices
        from ..train.scales import FIRST_SCALES

        check_int(self.seeds, "seeds", minimum=1, maximum=1000)
        for name in ("train_lengths", "test_lengths"):
            v = getattr(self, name)
            if not isinstance(v, tuple) or not v:
                raise TypeError(f"`{name}` must be a non-empty tuple of ints, got {v!r}")
            for n in v:
                check_int(n, name, minimum=1)
            if list(v) != sorted(set(v)):
                raise ValueError(f"`{name}` must be increasing, got {v}")
        missing = sorted(set(self.train_lengths) - set(self.test_lengths))
        if missing:
            raise ValueError(f"`test_lengths` must hold every training length (the share is measured there), "
                             f"missing {missing}")
        check_choices(self.scales, "scales", FIRST_SCALES)
        if self.test_scales:
            check_choices(self.test_scales, "test_scales", TEST_SCALES)
        for name, minimum in (("steps", 1), ("count", 2), ("curve_every", 1)):
            check_int(getattr(self, name), name, minimum=minimum)


#: The quick form: one short training length, two seeds, 300 steps, 64 sequences per length.
QUICK_FIRST = FirstConfig(quick=True, seeds=2, train_lengths=(8,), test_lengths=(8, 32), steps=300, count=64,
                          curve_every=100)


def first_accuracy(logits, labels) -> tuple[float, float]:
    """Accuracy of ``logit > 0`` as "the first bit is 1", and the mean ``-log sigmoid`` of the signed logit (nats)."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels)
    if z.shape != y.shape or z.ndim != 1 or z.size == 0:
        raise ValueError(f"`logits` and `labels` must be 1-D of one length, got shapes {z.shape} and {y.shape}")
    signed = np.where(y == 1, z, -z)
    return float(np.mean(signed > 0)), float(np.mean(np.logaddexp(0.0, -signed)))


def _test_batch(n: int, count: int):
    from ..train.tasks import first_batch

    return first_batch(n, count, np.random.default_rng([EVAL_SEED, n]))


def first_shares(params, model, inputs, factors=None):
    """The logits on ``inputs`` and each head's share from ``$`` on the first bit.

    Parameters
    ----------
    params : dict
        The model's parameters.
    model : FirstModel
    inputs : array_like of int, shape (count, n + 1)
        FIRST sequences.
    factors : array_like, optional
        ``[n + 1]`` or ``[layers, H, n + 1]`` (default: the trained scale's).

    Returns
    -------
    logits : ndarray, shape (count,)
    shares : KeyShare
        :func:`softmax_scale.heads.key_share` of the query ``$`` (one per sequence) on the key
        at position 1, over the leading axes ``(layers, H)``.
    """
    from ..heads import key_share
    from ..train.first import first_logits

    z, scores = first_logits(params, model, inputs, factors)  # scores [layers, B, H, T]
    return z, key_share(np.moveaxis(scores, 1, 2), np.ones((), dtype=np.int64))


def run_first_task(experiment, task: FirstTask) -> list[tuple]:
    """Train FIRST's model, test it at each length under each scale and measure its heads; its rows.  Runs in a worker."""
    from .sweep import limit_threads

    limit_threads()
    from ..heads import predict_share, share_factors
    from ..train.first import first_factors, train_first

    m = task.model
    row = experiment.row
    res = train_first(m, task.seed)
    L, steps = m.train_length, m.steps
    if not np.all(np.isfinite(res.loss)):
        return [row(task, "diverged", "diverged", length=int(np.argmax(~np.isfinite(res.loss))), seconds=res.seconds,
                    note="training loss not finite")]
    tail = max(1, steps // 20)
    rows = [row(task, "ok", "run", length=L, loss=float(np.mean(res.loss[-tail:])),
                accuracy=float(np.mean(res.correct[-tail:])), count=steps, seconds=res.seconds)]
    for end in range(task.curve_every, steps + 1, task.curve_every):
        sl = slice(end - task.curve_every, end)
        rows.append(row(task, "ok", "curve", length=end, loss=float(np.mean(res.loss[sl])),
                        accuracy=float(np.mean(res.correct[sl])), count=task.curve_every))
    layers, heads = m.layers, m.heads
    trained_at_L = float(first_factors(m, L)[0])
    probe = None  # what is measured at L under the trained scale
    toolkit = None  # [layers, H, len(lengths)]: the share-holding factor per head
    for n in task.lengths:
        batch = _test_batch(n, task.count)
        base = first_factors(m, n)
        for scale in task.scales:
            if scale == "trained":
                factors, growth = base, np.full((layers, heads), float(base[0]) / trained_at_L)
            elif scale == "toolkit_share":
                j = task.lengths.index(n)
                factors = (toolkit[..., j:j + 1] * base[None, None, :]).astype(np.float32)
                growth = toolkit[..., j] * float(base[0]) / trained_at_L
            else:
                factors = first_factors(m, n, scheme=scale)
                growth = np.full((layers, heads), float(factors[0]) / trained_at_L)
            z, ks = first_shares(res.params, m, batch.inputs, factors)
            acc, loss = first_accuracy(z, batch.labels)
            rows.append(row(task, "ok", "test", scale=scale, length=n, accuracy=acc, loss=loss, count=task.count))
            if probe is None:
                probe = ks
                if "toolkit_share" in task.scales:
                    toolkit = np.ones((layers, heads, len(task.lengths)))
                    for h, (layer, head) in enumerate(np.ndindex(layers, heads)):
                        pool, a, g = probe.pools[h], probe.alpha[layer, head], probe.gap[layer, head]
                        if pool is not None and np.isfinite(a) and a > 0 and np.isfinite(g) and g > 0:
                            f = share_factors(float(a), pool, float(g), L + 1, [k + 1 for k in task.lengths])
                            toolkit[layer, head] = np.where(np.isfinite(f), f, 1.0)
            for h, (layer, head) in enumerate(np.ndindex(layers, heads)):
                pool, a, g = probe.pools[h], probe.alpha[layer, head], probe.gap[layer, head]
                pred = np.nan
                if pool is not None and np.isfinite(a) and a > 0 and np.isfinite(g):  # the gap's spread over queries kept
                    pred = float(predict_share(probe.alpha_bins[layer, head], pool, probe.gap_bins[layer, head], [n + 1],
                                               growth=[growth[layer, head]])[0])
                rows.append(row(task, "ok", "share", scale=scale, length=n, layer=layer, head=head,
                                share=float(ks.share[layer, head]), share_predicted=pred, gap=float(ks.gap[layer, head]),
                                sigma=float(ks.alpha[layer, head]), count=int(ks.queries[layer, head])))
    if toolkit is not None:
        for layer, head in np.ndindex(layers, heads):
            for j, n in enumerate(task.lengths):
                rows.append(row(task, "ok", "factor", scale="toolkit_share", length=n, layer=layer, head=head,
                                value=float(toolkit[layer, head, j])))
    return rows


def expected_first_rows(task: FirstTask) -> int:
    """Rows a finished (not diverged) task writes."""
    m = task.model
    heads = m.layers * m.heads
    rows = 1 + m.steps // task.curve_every + len(task.lengths) * len(task.scales) * (1 + heads)
    if "toolkit_share" in task.scales:
        rows += heads * len(task.lengths)
    return rows


# ---------------------------------------------------------------------------------------------
# Reading the results

"""Monte Carlo estimators of softmax statistics, with standard errors.

A thin validated layer over the numba kernels of :mod:`softmax_scale._kernels`:
one trial streams its ``n`` scores (never a trials x n matrix), every scale of
a grid sees the same draws, blocks of trials run in parallel and each block is
seeded from ``(seed, block index)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _kernels
from ._stats_result import SoftmaxStats, as_output
from ._util.progress import progress_bar
from ._util.rng import mean_stderr, seed_sequence
from ._util.validation import N_MAX, check_alpha_array, check_bool, check_int
from .distributions import get_distribution

__all__ = ["MAX_SCORES", "MCTrials", "mc_stats", "mc_trials"]

#: Largest ``trials * n`` accepted in one call (about an hour on two cores).
MAX_SCORES = 2 * 10**11
#: Above this many score-scale evaluations a progress bar is shown (``progress=None``).
_PROGRESS_WORK = 3 * 10**9


@dataclass(frozen=True)
class MCTrials:
    """Per-trial values from the Monte Carlo kernel, shape ``(trials, len(alpha))``.

    Attributes
    ----------
    alpha : ndarray
        The scales (1-D).
    n : int
        Number of scores per trial.
    dist : str
        Score distribution label.
    sum_p2, entropy, grad, log_z : ndarray
        ``sum p^2``, Shannon entropy ``H``, ``G = alpha (1 - sum p^2)`` and
        ``log Z`` of each trial (rows) at each scale (columns).
    """

    alpha: np.ndarray
    n: int
    dist: str
    sum_p2: np.ndarray
    entropy: np.ndarray
    grad: np.ndarray
    log_z: np.ndarray

    @property
    def trials(self) -> int:
        """Number of trials."""
        return self.sum_p2.shape[0]


def _check_trials(trials, n) -> int:
    trials = check_int(trials, "trials", minimum=2)
    if trials * n > MAX_SCORES:
        raise ValueError(
            f"`trials` * `n` must be <= {MAX_SCORES:.0e} scores for Monte Carlo, got {trials} * {n}; "
            "use method='exact' for large n"
        )
    return trials


def mc_trials(alpha, n, dist="normal", *, d=None, trials=10_000, rng=None, parallel=True, progress=None) -> MCTrials:
    """Per-trial ``sum p^2``, ``H``, ``G`` and ``log Z`` on common draws for every scale.

    Parameters
    ----------
    alpha : float or array_like
        Scale(s) ``>= 0``; all share the same draws (common random numbers).
    n : int
        Number of i.i.d. scores per trial, ``>= 2``.
    dist, d
        Score distribution (see :func:`softmax_scale.distributions.get_distribution`).
    trials : int
        Number of independent trials, ``>= 2``.
    rng : None, int, SeedSequence or Generator
        Seed; results are bit-identical for any thread count.
    parallel : bool
        Run blocks of trials on all numba threads (``False``: the serial kernel,
        which gives the same bits).
    progress : bool, optional
        Show a progress bar; by default only for long runs.

    Returns
    -------
    MCTrials
    """
    alphas, _ = check_alpha_array(alpha)
    n = check_int(n, "n", minimum=2, maximum=N_MAX)
    trials = _check_trials(trials, n)
    parallel = check_bool(parallel, "parallel")
    dist_obj = get_distribution(dist, d)
    kind, param, sample = dist_obj.kernel_spec
    block, nblocks = _kernels.block_layout(trials)
    states = _kernels.block_states(seed_sequence(rng), nblocks)
    out = [np.empty((trials, alphas.size)) for _ in range(4)]
    grid = _kernels.grid_step(alphas)
    kernel = _kernels.mc_blocks_parallel if parallel else _kernels.mc_blocks_serial
    work = trials * n * alphas.size
    if progress is None:
        progress = work > _PROGRESS_WORK
    step = nblocks if not progress else max(1, nblocks // 32)
    with progress_bar(total=trials, desc=f"Monte Carlo n={n}", unit="trial", disable=not progress, leave=False) as bar:
        for first in range(0, nblocks, step):
            sub = np.ascontiguousarray(states[first : first + step])
            kernel(alphas, grid, n, trials, block, sub, kind, param, sample, first, *out)
            bar.update(min(trials, (first + sub.shape[0]) * block) - min(trials, first * block))
    return MCTrials(alphas, n, dist_obj.label, *out)



def mc_stats(alpha, n, dist="normal", *, d=None, trials=10_000, rng=None, parallel=True, progress=None) -> SoftmaxStats:
    """Monte Carlo estimates of ``E[sum p^2]``, ``E[H]``, ``E[G]``, ``E[log Z]`` with standard errors.

    Same parameters as :func:`mc_trials`; see :func:`softmax_scale.softmax_stats`.
    """
    _, scalar = check_alpha_array(alpha)
    tr = mc_trials(alpha, n, dist, d=d, trials=trials, rng=rng, parallel=parallel, progress=progress)
    fields = {}
    for name in ("sum_p2", "entropy", "grad", "log_z"):
        mean, se = mean_stderr(getattr(tr, name))
        fields[name] = as_output(mean, scalar)
        fields[name + "_se"] = as_output(se, scalar)
    return SoftmaxStats(
        alpha=as_output(tr.alpha, scalar), n=tr.n, dist=tr.dist, method="mc", trials=tr.trials, quad_error=0.0, **fields
    )

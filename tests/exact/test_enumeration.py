"""The exact evaluator against full enumeration: every draw of ``n`` scores from a 4-point distribution.

With scores drawn i.i.d. from a discrete distribution of four points, the expectations are finite
sums over the ``4^n`` draws (each with its probability): exact up to rounding, an answer reached
without any quadrature.  The Laplace-transform quadrature over the same distribution (an
:class:`~softmax_scale.Empirical` sample of the four points, or a :class:`~softmax_scale.WeightedSample`
of unequal weights) must agree to about 1e-13 (5e-13 at the default step for ``n`` i.i.d. keys, 5e-14 at half of
it; 2e-13 for one key of fixed score among ``n - 1``), for :func:`softmax_scale.exact_stats` and
:func:`softmax_scale.signal_stats`.
"""

import itertools

import numpy as np
import pytest

import softmax_scale as ss

POINTS = np.array([-1.3, -0.2, 0.4, 1.1])
WEIGHTS = np.array([0.1, 0.4, 0.3, 0.2])
ALPHAS = np.array([0.3, 1.0, 2.5, 6.0])


def _enumerate(alpha, n, w, s0=None):
    """Expectations over every draw: ``[E[p_0], E[sum p^2], E[H], E[G], E[log Z]]`` (``p_0`` the signal's, with ``s0``)."""
    k = n if s0 is None else n - 1
    acc = np.zeros(5)
    for idx in itertools.product(range(POINTS.size), repeat=k):
        s = POINTS[list(idx)]
        if s0 is not None:
            s = np.concatenate([[s0], s])
        prob = np.prod(w[list(idx)])
        z = alpha * s
        top = z.max()
        e = np.exp(z - top)
        total = e.sum()
        p = e / total
        log_z = top + np.log(total)
        h = log_z - np.dot(p, z)
        sp2 = np.dot(p, p)
        acc += prob * np.array([p[0], sp2, h, alpha * (1.0 - sp2), log_z])
    return acc


@pytest.mark.parametrize("weighted", [False, True], ids=["equal", "weighted"])
@pytest.mark.parametrize("n", [3, 4, 5])
def test_iid_scores_match_full_enumeration(n, weighted):
    w = WEIGHTS if weighted else np.full(4, 0.25)
    dist = ss.WeightedSample(POINTS, w) if weighted else ss.Empirical(POINTS)
    r = ss.exact_stats(ALPHAS, n, dist, error_estimate=True)
    fine = ss.exact_stats(ALPHAS, n, dist, refine=2.0)
    for k, a in enumerate(ALPHAS):
        ref = _enumerate(a, n, w)
        scale = np.array([1.0, 1.0, a, 1.0])  # E[G] = alpha E[1 - sum p^2]: its error grows with alpha
        for res, tol in ((r, 5e-13), (fine, 5e-14)):
            got = np.array([res.sum_p2[k], res.entropy[k], res.grad[k], res.log_z[k]])
            np.testing.assert_array_less(np.abs(got - ref[1:]) / scale, tol, err_msg=f"alpha {a}")
        # the error estimate of the default step covers its error
        assert np.max(np.abs(np.array([r.sum_p2[k], r.entropy[k], r.log_z[k]]) - ref[[1, 2, 4]])) <= max(r.quad_error, 1e-13)


@pytest.mark.parametrize("weighted", [False, True], ids=["equal", "weighted"])
@pytest.mark.parametrize("n", [3, 4, 5])
@pytest.mark.parametrize("s0", [0.4, 2.0])
def test_one_signal_key_matches_full_enumeration(n, weighted, s0):
    w = WEIGHTS if weighted else np.full(4, 0.25)
    dist = ss.WeightedSample(POINTS, w) if weighted else ss.Empirical(POINTS)
    r = ss.signal_stats(ALPHAS, n, s0, dist)
    for k, a in enumerate(ALPHAS):
        ref = _enumerate(a, n, w, s0)
        got = [r.share[k], r.sum_p2[k], r.entropy[k], r.grad[k], r.log_z[k]]
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-13, err_msg=f"alpha {a}")


def test_enumeration_tells_a_different_distribution_apart():
    """A negative control: the quadrature on the equal-weight sample is far from the weighted enumeration."""
    r = ss.exact_stats(2.5, 4, ss.Empirical(POINTS))
    assert abs(r.entropy - _enumerate(2.5, 4, WEIGHTS)[2]) > 1e-3

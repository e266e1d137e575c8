"""Bad input, everywhere: every public function of ``softmax_scale.__all__``.

For each function and each of its parameters, a list of bad values (NaN, inf,
negative, zero, empty, wrong type, huge) is passed in place of a valid one.
The call must either raise ``ValueError``/``TypeError`` whose message names the
parameter, or return a valid result whose numbers are all finite; never crash
otherwise, warn (warnings are errors in this suite) or return NaN.  Inputs are
kept small so that nothing can run long.  The CLI is tested by its own suite.
"""

from __future__ import annotations

import dataclasses
import inspect
import math

import numpy as np
import pytest

import softmax_scale as ss

NAN, INF = float("nan"), float("inf")
NUMBER_BAD = [
    NAN,
    INF,
    -INF,
    -1,
    -1e-300,
    0,
    0.5,
    "3",
    None,
    True,
    1 + 2j,
    [],
    [[1.0, 2.0]],
    np.array([NAN]),
]
INT_BAD = [
    NAN,
    INF,
    -1,
    0,
    1,
    2.5,
    "10",
    None,
    True,
    1e15,
    10**30,
    [],
    np.array([3, 4]),
]
ARRAY_BAD = [[], [NAN], [1.0, INF], [[1.0, 2.0]], "abc", None, [True, False], 5.0]
STRING_BAD = ["", "nonsense", None, 3, ["normal"]]
BOOL_BAD = ["yes", None, 2.5]
RNG_BAD = [-1, "seed", 1.5, [1.5], object()]

SMALL = {"trials": 8}  # keeps Monte Carlo calls short
#: Two measurements of two heads inside L = 64 (the input of head_factors).
_HEAD_STATS = [ss.head_stats(np.random.default_rng(n).standard_normal((2, 8, n)), predict=False) for n in (32, 64)]

#: Framework-shaped input: logits [batch, heads, queries, keys], and a causal model's probabilities (0 above the diagonal).
_FRAMEWORK = np.random.default_rng(3).standard_normal((2, 2, 4, 4))
_CAUSAL_PROBS = np.where(np.tril(np.ones((4, 4), dtype=bool)), np.exp(_FRAMEWORK), 0.0)
_CAUSAL_PROBS = _CAUSAL_PROBS / _CAUSAL_PROBS.sum(-1, keepdims=True)

# (function, valid keyword arguments, {parameter: bad values})
CASES = {
    "softmax_stats": (
        ss.softmax_stats,
        {"alpha": 1.0, "n": 64, "method": "mc", "trials": 16, "rng": 0},
        {
            "alpha": NUMBER_BAD[:5] + ["1", None, [1.0, NAN], [[1.0]], [], 1e10],
            "n": INT_BAD,
            "dist": STRING_BAD + [[NAN, 1.0], []],
            "method": STRING_BAD,
            "trials": [0, 1, -5, 2.5, NAN, "10", None, 10**13],
            "rng": RNG_BAD,
            "d": [1, 0, -3, 2.5, "8", NAN],
        },
    ),
    "softmax_stats exact": (
        ss.softmax_stats,
        {"alpha": 1.0, "n": 64, "method": "exact"},
        {"alpha": [NAN, INF, -1.0, "1", None, [1.0, NAN], 1e9, 0.0], "n": INT_BAD},
    ),
    "mc_trials": (
        ss.mc_trials,
        {"alpha": [0.5, 2.0], "n": 32, "trials": 8, "rng": 1},
        {
            "alpha": [NAN, INF, -1.0, "1", None, [], [[1.0]], 1e9],
            "n": INT_BAD,
            "trials": [0, 1, -1, 2.5, NAN, None, "5"],
            "rng": RNG_BAD,
            "dist": STRING_BAD + [[INF]],
            "d": [1, 0, 2.5, NAN],
            "parallel": BOOL_BAD,
            "progress": BOOL_BAD,
        },
    ),
    "gradient_objective": (
        ss.gradient_objective,
        {"alpha": 1.0, "n": 512},
        {
            "alpha": NUMBER_BAD[:5] + ["1", None, [1.0, NAN], 1e9, 1e10],
            "n": INT_BAD,
            "dist": STRING_BAD,
            "objective": STRING_BAD,
            "d": [1, NAN, "8"],
        },
    ),
    "optimal_alpha": (
        ss.optimal_alpha,
        {"n": 512},
        {
            "n": INT_BAD + [[2, NAN], [], [[4, 8]]],
            "dist": STRING_BAD + [[NAN]],
            "objective": STRING_BAD,
            "d": [1, NAN, "8"],
        },
    ),
    "optimize_alpha": (
        ss.optimize_alpha,
        {"n": 512},
        {"n": INT_BAD, "dist": STRING_BAD, "objective": STRING_BAD},
    ),
    "fit_alpha_law": (
        ss.fit_alpha_law,
        {"ns": [10, 100, 1000], "alphas": [1.0, 1.3, 1.6]},
        {
            "ns": ARRAY_BAD + [[1, 10, 100], [10, 10.5, 100]],
            "alphas": ARRAY_BAD + [[1.0, -1.0, 2.0], [0.0, 1.0, 2.0]],
            "form": STRING_BAD,
        },
    ),
    "compare_alpha_laws": (
        ss.compare_alpha_laws,
        {"ns": [10, 100, 1000], "alphas": [1.0, 1.3, 1.6]},
        {
            "ns": ARRAY_BAD,
            "alphas": ARRAY_BAD,
            "forms": [["nonsense"], "sqrt_log_x", None, 3],
        },
    ),
    "get_distribution": (
        ss.get_distribution,
        {"dist": "cosine", "d": 16},
        {
            "dist": STRING_BAD + [[NAN], [], 3.0],
            "d": [1, 0, -2, 2.5, NAN, INF, "16", None, 10**30],
        },
    ),
    "Cosine": (
        ss.Cosine,
        {"d": 16},
        {"d": [1, 0, -2, 2.5, NAN, INF, "16", None, True]},
    ),
    "Empirical": (
        ss.Empirical,
        {"sample": [0.1, 0.5, -0.3]},
        {"sample": ARRAY_BAD + [np.zeros((2, 2))]},
    ),
    "WeightedSample": (
        ss.WeightedSample,
        {"x": [-1.0, 0.5, 2.0], "w": [0.25, 0.5, 0.25]},
        {"x": ARRAY_BAD + [[2.0, 1.0, 0.0]], "w": ARRAY_BAD + [[0.5, 0.5, 0.5], [1.0, 0.0, 0.0], [0.5, 0.5]]},
    ),
    "layer_norm": (
        ss.layer_norm,
        {"x": [[1.0, 2.0, 4.0]]},
        {
            "x": [[NAN, 1.0], [INF, 1.0], "abc", None, []],
            "eps": [-1.0, NAN, INF, "0", None],
            "axis": [5, 2.5, "0", None],
        },
    ),
    "rms_norm": (
        ss.rms_norm,
        {"x": [[1.0, 2.0, 4.0]]},
        {
            "x": [[NAN, 1.0], [INF, 1.0], "abc", None, []],
            "eps": [-1.0, NAN, INF, "0", None],
            "axis": [5, 2.5, "0", None],
        },
    ),
    "dot_product_variance": (
        ss.dot_product_variance,
        {"d": 16, "trials": 200, "rng": 0},
        {
            "d": INT_BAD[:9],
            "dist": STRING_BAD,
            "trials": [0, 1, -1, 2.5, NAN, None],
            "rng": RNG_BAD,
            "scaled": BOOL_BAD,
            "correct_truncation": BOOL_BAD,
        },
    ),
    "depth_second_moments": (
        ss.depth_second_moments,
        {"depth": 3, "width": 8, "trials": 2, "inputs": 2, "rng": 0},
        {
            "depth": INT_BAD[:9],
            "activation": STRING_BAD,
            "init": STRING_BAD,
            "width": INT_BAD[:9],
            "trials": [0, -1, 2.5, NAN],
            "inputs": [0, -1, 2.5, NAN],
            "rng": RNG_BAD,
        },
    ),
    "residual_second_moments": (
        ss.residual_second_moments,
        {"depth": 3, "width": 8, "trials": 2, "inputs": 2, "rng": 0},
        {
            "depth": INT_BAD[:9],
            "scheme": STRING_BAD,
            "width": INT_BAD[:9],
            "branch": STRING_BAD,
            "norm": STRING_BAD,
            "alpha": [NAN, INF, "1", None],
            "step": [-1, 2.5, NAN, "1"],
            "warmup_steps": [0, -1, 2.5, NAN],
            "trials": [0, -1, 2.5, NAN],
            "inputs": [0, -1, NAN],
            "rng": RNG_BAD,
        },
    ),
    "rescale_activation": (
        ss.rescale_activation,
        {"name": "sigmoid"},
        {"name": STRING_BAD, "center": BOOL_BAD},
    ),
    "t5_score_variance": (
        ss.t5_score_variance,
        {"d_model": 16, "d_kv": 4, "trials": 20, "pairs": 2, "rng": 0},
        {
            "d_model": INT_BAD[:9],
            "d_kv": INT_BAD[:9],
            "init": STRING_BAD,
            "trials": [0, -1, 2.5, NAN],
            "pairs": [0, -1, NAN],
            "rng": RNG_BAD,
        },
    ),
    "attention_scale": (
        ss.attention_scale,
        {"n": 512, "d": 64},
        {"n": INT_BAD[:9], "d": INT_BAD[:9], "scheme": STRING_BAD},
    ),
    "pinned": (
        ss.pinned,
        {"scheme": "entropy_invariant", "pin_length": 64},
        {"scheme": STRING_BAD, "pin_length": [1, 0, -3, 2.5, NAN, "64", 10**16]},
    ),
    "scheme_alpha": (
        ss.scheme_alpha,
        {"n": 512, "d": 64},
        {
            "n": INT_BAD[:9],
            "d": INT_BAD[:9],
            "scheme": STRING_BAD,
            "score_model": STRING_BAD,
        },
    ),
    "causal_objective": (
        ss.causal_objective,
        {"alpha": 1.0, "L": 64},
        {"alpha": [NAN, INF, -1.0, "1", None, 1e10], "L": INT_BAD[:9]},
    ),
    "optimal_alpha_causal": (
        ss.optimal_alpha_causal,
        {"L": 64},
        {"L": INT_BAD[:9], "dist": STRING_BAD},
    ),
    "gap_density_at_zero": (
        ss.gap_density_at_zero,
        {"n": 64},
        {"n": INT_BAD[:9], "dist": STRING_BAD},
    ),
    "exact_stats": (
        ss.exact_stats,
        {"alpha": 1.0, "n": 64},
        {
            "alpha": [NAN, INF, -1.0, "1", None, 1e10],
            "n": INT_BAD[:9],
            "refine": [0, -1.0, NAN, INF, "1"],
        },
    ),
    "signal_stats": (
        ss.signal_stats,
        {"alpha": 1.0, "n": 64, "s0": 0.5},  # a cosine too, so that d=... with dist="cosine" is valid
        {
            "alpha": [NAN, INF, -1.0, "1", None],
            "n": INT_BAD[:9],
            "s0": [NAN, INF, -INF, "1", None],
            "method": STRING_BAD,
        },
    ),
    "invariant_scale": (
        ss.invariant_scale,
        {"ns": [64, 512], "target_entropy": 3.0},
        {
            "ns": ARRAY_BAD[:6],
            "target_entropy": [NAN, INF, -1.0, 0.0, 1e9, "1", None],
            "xtol": [0, -1.0, NAN, "1"],
        },
    ),
    "mean_field_error": (
        ss.mean_field_error,
        {"alphas": [1.0], "ns": [64]},
        {"alphas": ARRAY_BAD[:6] + [[-1.0]], "ns": ARRAY_BAD[:6] + [[1]]},
    ),
    "mc_objective": (
        ss.mc_objective,
        {"alpha": 1.0, "n": 64, "trials": 40, "rng": 0},
        {
            "alpha": [NAN, INF, -1.0, "1", None],
            "n": INT_BAD[:9],
            "objective": STRING_BAD,
            "trials": [0, 1, -1, 2.5, NAN],
            "rng": RNG_BAD,
        },
    ),
    "entropy_curve": (
        ss.entropy_curve,
        {"ns": [64, 512]},
        {
            "ns": ARRAY_BAD[:6] + [[1, 64]],
            "scheme": STRING_BAD,
            "d": [0, -1, 2.5, NAN, "8"],
            "score_model": STRING_BAD,
            "method": STRING_BAD,
        },
    ),
    "entropy_curves": (
        ss.entropy_curves,
        {"ns": [64, 512], "schemes": ("standard",)},
        {"ns": ARRAY_BAD[:6], "schemes": [["nonsense"], "nonsense", None, 3]},
    ),
    "extrapolation_table": (
        ss.extrapolation_table,
        {"schemes": ("standard",), "factors": (1, 2)},
        {
            "train_length": INT_BAD[:9],
            "factors": [[], [0], [-1], [NAN], "x", None],
            "schemes": [["nonsense"], None],
        },
    ),
    "objective_table": (
        ss.objective_table,
        {"ns": [64, 512, 4096], "trials": 40, "resamples": 4},
        {
            "ns": ARRAY_BAD[:6],
            "trials": [0, 1, -1, 2.5, NAN],
            "resamples": [0, 1, -1, 2.5, NAN, 10**6],
            "rng": RNG_BAD,
        },
    ),
    "phase_diagram": (
        ss.phase_diagram,
        {"ns": [64, 512], "ratios": [0.5, 1.0]},
        {"ns": ARRAY_BAD[:6], "ratios": ARRAY_BAD[:6] + [[-1.0]]},
    ),
    "head_stats": (
        ss.head_stats,
        {"logits": np.arange(32.0).reshape(2, 4, 4) % 5},
        {
            "logits": [[NAN, 1.0], [[1.0]], "abc", None, [], np.full((4, 4), INF)],
            "mask": [np.zeros((4, 4), dtype=bool), np.ones((3, 4), dtype=bool), np.ones((4, 4)), "x"],
            "probs": [[[NAN, 1.0]], "abc", np.full((4, 4), 0.25)],
            "causal": BOOL_BAD,
            "mask_fill": STRING_BAD,
            "predict": BOOL_BAD,
        },
    ),
    "head_stats probs": (
        ss.head_stats,
        {"probs": np.exp(np.arange(32.0).reshape(2, 4, 4) % 5) / np.exp(np.arange(32.0).reshape(2, 4, 4) % 5).sum(-1, keepdims=True)},
        {
            "probs": [[[NAN, 1.0]], [[1.0]], "abc", [], np.full((4, 4), 0.5), -np.full((4, 4), 0.25), np.full((4, 4), INF)],
            "mask_fill": ["mask", "keep", "nonsense"],
        },
    ),
    "head_stats framework": (  # [batch, heads, queries, keys] with the (batch, keys) attention_mask
        ss.head_stats,
        {"logits": _FRAMEWORK, "mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]])},
        {
            "mask": [np.ones((4, 4), dtype=bool), np.ones((2, 1, 4), dtype=bool), np.ones(4, dtype=bool),
                     np.full((2, 4), -0.5), np.full((2, 4), NAN), np.full((2, 4), 2), np.ones((2, 4)),
                     np.ones((2, 4), dtype=complex), np.zeros((2, 1, 4, 4)) + np.eye(4, dtype=bool) * -1e9],
        },
    ),
    "head_stats framework probs": (  # output_attentions of a causal model
        ss.head_stats,
        {"probs": _CAUSAL_PROBS, "causal": True},
        {"causal": [False, None], "mask": [np.ones((4, 4), dtype=bool), np.array([[1, 1, 1, 1], [1, 1, 0, 0]])]},
    ),
    "head_factors": (
        ss.head_factors,
        {"stats": _HEAD_STATS, "train_length": 64, "n": 256},
        {
            "stats": [None, "x", [], 3, _HEAD_STATS[:1], [_HEAD_STATS[0], None]],
            "train_length": INT_BAD,
            "n": INT_BAD,
            "pools": ["x", [1], [None], [1, 2]],
        },
    ),
    "head_factor_errors": (
        ss.head_factor_errors,
        {"logits": [np.random.default_rng(n).standard_normal((1, 8, n)) for n in (32, 64)], "train_length": 64,
         "n": 128, "resamples": 2},
        {
            "logits": [None, "x", [], np.zeros((2, 8, 8)), [np.zeros(8), np.zeros(8)]],
            "train_length": INT_BAD,
            "n": INT_BAD,
            "resamples": INT_BAD,
            "rng": RNG_BAD,
        },
    ),
    "head_pools": (
        ss.head_pools,
        {"logits": np.random.default_rng(1).standard_normal((2, 8, 32)), "sample_size": 64},
        {
            "logits": [[[NAN, 1.0]], "abc", [], np.full((4, 4), INF)],
            "mask_fill": ["mask", "keep", "nonsense"],
            "sample_size": INT_BAD,
        },
    ),
    "rule_factors": (
        ss.rule_factors,
        {"rule": "toolkit_iid", "alpha": 1.5, "dist": "normal", "n_ref": 64, "ns": [128, 256]},
        {
            "rule": STRING_BAD,
            "alpha": NUMBER_BAD[:5] + ["1", None, [1.0]],
            "dist": STRING_BAD,
            "n_ref": INT_BAD[:9] + INT_BAD[10:],  # 1e15 keys is valid: a target out of reach, NaN
            "ns": ARRAY_BAD[:-1],  # 5.0 keys is valid: fewer than n_ref, out of reach, NaN
            "slope": [1.0, NAN],
        },
    ),
    "share_factors": (
        ss.share_factors,
        {"alpha": 1.5, "dist": "normal", "s0": 3.0, "n_ref": 64, "ns": [128, 256]},
        {
            "alpha": NUMBER_BAD[:5] + ["1", None, [1.0]],
            "dist": STRING_BAD,
            "s0": [NAN, INF, "x", None, True],
            "n_ref": INT_BAD[:9] + INT_BAD[10:],  # 1e15 keys is valid: a target out of reach, NaN
            "ns": ARRAY_BAD[:-1],  # 5.0 keys is valid: fewer than n_ref, out of reach, NaN
        },
    ),
    "temperature_table": (
        ss.temperature_table,
        {"ds": (128,), "ns": (256,)},
        {
            "ds": [[], [0], [-1], [NAN], "x", None],
            "ns": [[], [1], [-1], [NAN], "x", None],
        },
    ),
    "contrastive_temperature": (
        ss.contrastive_temperature,
        {"batch": 256, "d": 64},
        {
            "batch": INT_BAD,
            "d": [NAN, INF, -1, 0, 1, 2.5, "10", True, 1e15, [], [64]],
            "loss": STRING_BAD,
        },
    ),
    "signal_share_slope": (
        ss.signal_share_slope,
        {"alpha": 1.0, "ns": [64, 256], "s0": 0.5},
        {
            "alpha": [NAN, INF, -1.0, "1", None],
            "ns": ARRAY_BAD[:6],
            "s0": [NAN, INF, -INF, "1", None],
            "dist": STRING_BAD,
        },
    ),
    "share_max": (
        ss.share_max,
        {"alpha": 1.0, "dist": [0.0, 1.0, 2.0], "s0": 3.0, "ns": [8]},  # above every score: no scan
        {
            "alpha": [NAN, INF, -1.0, "1", None, [1.0, 2.0]],
            "s0": [NAN, INF, "1", None, [[1.0]]],
            "ns": ARRAY_BAD[:6],
            "dist": STRING_BAD,
        },
    ),
}

# Public names that take no input (or are types, constants, modules): nothing to validate.
NO_INPUT = {
    "AlphaOptimum": "result type",
    "LawFit": "result type",
    "MCTrials": "result type",
    "SoftmaxStats": "result type",
    "ScoreDistribution": "abstract base class",
    "Normal": "no parameters",
    "OBJECTIVES": "constant",
    "moments": "module (its functions are re-exported and tested by name)",
    "selu_constants": "no parameters",
    "list_schemes": "no parameters",
    "exact": "module (its public functions are re-exported)",
    "typical": "module (its public functions are re-exported)",
    "SCHEMES": "constant",
    "PUBLISHED_COSINE_SCALES": "constant",
}

# Found by this file and reported to the lead (files not owned by its author); strict xfail, so each
# entry fails the suite once fixed and must then be removed.  Keys: "case-parameter-index".
# Cases known to misbehave, as strict xfails: reason -> case ids. Empty: every finding so far is fixed.
_KNOWN: dict = {}
KNOWN = {key: reason for reason, keys in _KNOWN.items() for key in keys}


def _numbers(obj, depth=0):
    """Every float in a result: dataclass fields, dicts, sequences, arrays."""
    if depth > 4:
        return
    if isinstance(obj, (bool, np.bool_, str)) or obj is None:
        return
    if isinstance(obj, (int, float, np.number)):
        yield float(obj)
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fiuc":
            yield from np.asarray(
                obj, dtype=complex if obj.dtype.kind == "c" else float
            ).ravel()
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            yield from _numbers(getattr(obj, f.name), depth + 1)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _numbers(v, depth + 1)
    elif hasattr(obj, "params") or hasattr(obj, "__dict__") and not callable(obj):
        for v in vars(obj).values():
            yield from _numbers(v, depth + 1)


# Documented non-finite fields ("not applicable" NaN, "unbounded" inf), by case.
ALLOWED_NONFINITE = {
    "entropy_curve": {"match", "signal_share", "signal_share_se"},
    "entropy_curves": {"*"},  # a dict of EntropyCurve
    "objective_table": {"expected", "expected_value"},
    "optimal_alpha": {"*"},
    "optimize_alpha": {"alpha", "value"},
    "head_factors": {"factors"},  # NaN where a rule has no answer (documented)
    "share_max": {"factor"},  # inf where the key is above every score (documented)
    "rule_factors": {"*"},  # NaN where the target is out of reach (documented)
    "share_factors": {"*"},  # NaN where the share cannot be reached (documented)
}


def _nonfinite_fields(out) -> set:
    """Top-level fields (or ``*`` for a bare value) holding a non-finite number."""
    if dataclasses.is_dataclass(out):
        items = [(f.name, getattr(out, f.name)) for f in dataclasses.fields(out)]
    elif isinstance(out, dict):
        items = list(out.items())
    else:
        items = [("*", out)]
    return {
        str(name)
        for name, v in items
        if any(not math.isfinite(abs(x)) for x in _numbers(v))
    }


def _check_result(case, out):
    bad = _nonfinite_fields(out)
    allowed = ALLOWED_NONFINITE.get(case, set())
    assert "*" in allowed or bad <= allowed, (
        f"{case}: non-finite numbers in {sorted(bad - allowed)}"
    )


def _bad_cases():
    for case, (fn, valid, bads) in CASES.items():
        for param, values in bads.items():
            for k, value in enumerate(values):
                key = f"{case}-{param}-{k}"
                marks = (
                    [pytest.mark.xfail(strict=True, reason=KNOWN[key])]
                    if key in KNOWN
                    else []
                )
                yield pytest.param(
                    case, param, value, id=f"{key}-{str(value)[:12]}", marks=marks
                )


def _param_names(case) -> list[str]:
    fn = CASES[case][0]
    return list(inspect.signature(fn).parameters)


def test_every_public_name_is_covered():
    result_types = {
        n
        for n in ss.__all__
        if inspect.isclass(getattr(ss, n)) and dataclasses.is_dataclass(getattr(ss, n))
    }
    result_types -= {"Cosine", "Normal"}  # distributions: validated below / no input
    covered = {case.split()[0] for case in CASES} | set(NO_INPUT) | result_types
    missing = sorted(set(ss.__all__) - covered)
    assert not missing, (
        f"public names without bad-input cases in tests/test_bad_input.py: {missing}"
    )


@pytest.mark.parametrize("case", list(CASES))
def test_valid_calls_work(case):
    """The baseline every bad value departs from: valid, finite (a negative control for the test below)."""
    fn, valid, _ = CASES[case]
    _check_result(case, fn(**valid))


@pytest.mark.parametrize("case, param, value", list(_bad_cases()))
def test_bad_value_raises_naming_the_parameter_or_gives_a_finite_result(
    case, param, value
):
    fn, valid, _ = CASES[case]
    assert param in _param_names(case), f"{case} has no parameter {param}"
    kwargs = dict(valid)
    kwargs[param] = value
    try:
        out = fn(**kwargs)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert param in msg, (
            f"{case}({param}={value!r}) raised without naming `{param}`: {msg!r}"
        )
        return
    except NotImplementedError:
        pytest.skip(f"{case}: not available in this build")
    # accepted: then it must be a valid, finite result
    bad = [x for x in _numbers(out) if not math.isfinite(abs(x))]
    allowed_inf = case.startswith(("optimal_alpha", "optimize_alpha")) and all(
        abs(x) == INF for x in bad
    )
    assert not bad or allowed_inf, (
        f"{case}({param}={value!r}) returned non-finite numbers {bad[:4]}"
    )


def test_huge_but_valid_values_give_finite_results():
    assert math.isfinite(ss.optimal_alpha(10**15))
    assert math.isfinite(ss.gradient_objective(1e9, 10**15))
    r = ss.softmax_stats(1e9, 10**15, method="exact")
    assert all(math.isfinite(x) for x in _numbers(r))
    r = ss.softmax_stats([0.0, 1e9], 1000, method="mc", trials=8, rng=0)
    assert all(math.isfinite(x) for x in _numbers(r))
    assert r.sum_p2[1] == pytest.approx(1.0)
    assert r.grad[1] >= 0


# ---------------------------------------------------------------------------------------------
# Integer parameters, generated from the public API
# ---------------------------------------------------------------------------------------------
#
# Every callable of ``softmax_scale.__all__`` (functions and distribution classes; result types
# are built by the toolkit, not by users) is inspected; a parameter is an *integer parameter* when
#   1. its annotation is ``int`` (``int | None`` too), or
#   2. its default is an int (not a bool), or
#   3. its name is one the API uses for counts and sizes without annotating them (INT_NAMES).
# Parameters named in NOT_INT are skipped, each with its reason.  Arrays (``ns``, ``logits``, ...)
# are never classified: they have no int default, no int annotation and no such name.  Each
# integer parameter gets every value of INT_GARBAGE in place of the valid call of CASES; the call
# must work (finite result) or raise ValueError/TypeError naming the parameter.  A new public
# function with an integer parameter needs a valid call in CASES (the coverage test above asks for
# one anyway).
INT_NAMES = {"n", "d", "L", "depth", "width", "trials", "inputs", "pairs", "resamples", "d_model", "d_kv"}
NOT_INT = {"rng": "a seed (int, SeedSequence or Generator), not a count; its bad values are RNG_BAD"}
INT_GARBAGE = [1e300, 2**80, -0.0, True, "numpy", "8"]  # "numpy": a numpy integer of a valid value
#: Arguments set beside an integer parameter so that it is used: ``d`` matters for cosine scores only.
CONTEXT = {"d": {"dist": "cosine"}}


def _is_int_param(p: inspect.Parameter) -> bool:
    if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in NOT_INT:
        return False
    ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
    by_annotation = "int" in ann.replace("|", " ").split() and "float" not in ann
    by_default = type(p.default) is int
    return by_annotation or by_default or p.name in INT_NAMES


def _public_callables():
    for name in ss.__all__:
        obj = getattr(ss, name)
        if not callable(obj) or inspect.ismodule(obj):
            continue
        if inspect.isclass(obj) and not issubclass(obj, ss.ScoreDistribution):
            continue  # result types
        yield name, obj


def _valid_call(name):
    for case, (fn, valid, _) in CASES.items():
        if case.split()[0] == name:
            return fn, valid
    return None, None


def _int_cases():
    for name, obj in _public_callables():
        for p in inspect.signature(obj).parameters.values():
            if _is_int_param(p):
                for value in INT_GARBAGE:
                    yield pytest.param(name, p.name, value, id=f"{name}-{p.name}-{value!r}"[:60])


INT_CASES = list(_int_cases())


def test_integer_parameters_are_found():
    found = {(c.values[0], c.values[1]) for c in INT_CASES}
    # the classification must at least see the parameters the issue names
    for key in [("optimal_alpha", "d"), ("optimal_alpha", "n"), ("causal_objective", "L"), ("softmax_stats", "trials"),
                ("depth_second_moments", "depth"), ("depth_second_moments", "width"), ("Cosine", "d")]:
        assert key in found
    assert ("softmax_stats", "alpha") not in found
    assert ("objective_table", "rng") not in found


@pytest.mark.parametrize("name, param, value", INT_CASES)
def test_integer_garbage_raises_naming_the_parameter_or_works(name, param, value):
    fn, valid = _valid_call(name)
    assert fn is not None, f"public {name} has integer parameter `{param}`: add a valid call to CASES"
    kwargs = dict(valid)
    params = inspect.signature(fn).parameters
    kwargs.update({k: v for k, v in CONTEXT.get(param, {}).items() if k in params})
    if value == "numpy":
        default = params[param].default
        base = kwargs.get(param, default)
        value = np.int64(base if type(base) is int else 16)
    kwargs[param] = value
    try:
        out = fn(**kwargs)
    except (ValueError, TypeError) as exc:
        assert param in str(exc), f"{name}({param}={value!r}) raised without naming `{param}`: {exc!r}"
        return
    _check_result(name, out)


# ---------------------------------------------------------------------------------------------
# Messages: large numbers compact and in one format; samples the objectives cannot use
# ---------------------------------------------------------------------------------------------


SHOWN = [
    (1, "1"), (999_999, "999999"), (10**6, "1e+6"), (10**15, "1e+15"), (1e15, "1e+15"), (2e9, "2e+9"),
    (10**300, "1e+300"), (1e300, "1e+300"), (-1e300, "-1e+300"), (2**80, "1.20893e+24"),
    (10**15 + 1, "1.000000000000001e+15"), (2.5, "2.5"), (1e-5, "1e-5"), (np.float64(3.0), "3"),
    (np.int64(10**12), "1e+12"), (INF, "inf"), (True, "True"), ("10", "'10'"),
]


@pytest.mark.parametrize("value, text", SHOWN, ids=[f"{type(v).__name__}-{t}" for v, t in SHOWN])
def test_show_formats_numbers_compactly(value, text):
    from softmax_scale._util.validation import show

    assert show(value) == text


@pytest.mark.parametrize("n", [10**300, 1e300, 10**16, 2**80], ids=["10**300", "1e300", "10**16", "2**80"])
def test_huge_n_is_echoed_compactly(n):
    with pytest.raises(ValueError) as exc:
        ss.optimal_alpha(n)
    msg = str(exc.value)
    assert len(msg) < 80, msg
    assert "<= 1e+15, got " in msg


def test_limits_and_values_print_one_way():
    with pytest.raises(ValueError) as exc:
        ss.softmax_stats(2e9, 10)
    assert str(exc.value).endswith("<= 1e+9, got 2e+9")
    with pytest.raises(ValueError) as exc:
        ss.softmax_stats(1.0, 10**16)
    assert str(exc.value).endswith("<= 1e+15, got 1e+16")


@pytest.mark.parametrize("sample", [np.ones(10), np.array([3.0]), [0.5, 0.5]])
def test_sample_without_spread_is_refused_naming_dist(sample):
    with pytest.raises(ValueError, match=r"`dist`.*at least 2 distinct values"):
        ss.optimal_alpha(512, dist=sample)


def test_sample_with_two_values_is_accepted():
    assert ss.get_distribution(np.array([0.0, 1.0])).support == (0.0, 1.0)


def test_expected_objective_refuses_a_sample_with_a_value_error():
    sample = np.random.default_rng(0).standard_normal(100)
    with pytest.raises(ValueError, match=r"`objective`='expected'.*sample `dist`.*without bound"):
        ss.optimize_alpha(512, dist=sample, objective="expected")


# ---------------------------------------------------------------------------------------------
# Numpy scalars: accepted wherever a Python number is, with the same result
# ---------------------------------------------------------------------------------------------


def _python_numbers(value):
    """The Python numbers a numeric argument may be given as: itself, and its int where it is integral."""
    out = [value]
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        out.append(int(value))
    return out


def _numpy_scalars(value):
    if isinstance(value, int):
        return [np.int64(value), np.int32(value)] if abs(value) < 2**31 else [np.int64(value)]
    scalars = [np.float64(value)]
    if float(np.float32(value)) == value:
        scalars.append(np.float32(value))
    return scalars


#: Numeric arguments whose default is None, with a valid value and what makes them used.
NONE_DEFAULT_NUMBERS = {"d": (16, {"dist": "cosine"}), "match": (0.5, {})}


def _numeric_arguments(case):
    """``{param: (valid number, context kwargs)}``: the valid call's numbers, numeric defaults, and NONE_DEFAULT_NUMBERS."""
    fn, valid, _ = CASES[case]
    params = inspect.signature(fn).parameters
    out = {}
    for name, p in params.items():
        value = valid.get(name, p.default)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = (value, {})
        elif value is None and name in NONE_DEFAULT_NUMBERS:
            number, context = NONE_DEFAULT_NUMBERS[name]
            if all(k in params for k in context):
                out[name] = (number, context)
    return out


def _numeric_cases():
    for case in CASES:
        for param in _numeric_arguments(case):
            yield pytest.param(case, param, id=f"{case}-{param}")


def _same(a, b) -> bool:
    x, y = list(_numbers(a)), list(_numbers(b))
    return len(x) == len(y) and np.allclose(x, y, rtol=1e-12, atol=0, equal_nan=True)


@pytest.mark.parametrize("case, param", list(_numeric_cases()))
def test_numpy_scalars_are_accepted_where_python_numbers_are(case, param):
    fn, valid, _ = CASES[case]
    value, context = _numeric_arguments(case)[param]
    kwargs = {**valid, **context}
    checked = 0
    for py in _python_numbers(value):
        try:
            ref = fn(**{**kwargs, param: py})
        except (ValueError, TypeError):
            continue  # this Python number is refused too (an int where a float is needed is a choice)
        for scalar in _numpy_scalars(py):
            out = fn(**{**kwargs, param: scalar})
            assert _same(out, ref), f"{case}({param}={scalar!r}) differs from {param}={py!r}"
            checked += 1
    assert checked


def test_signal_stats_takes_numpy_scalars_as_s0():
    ref = ss.signal_stats(2.0, 100, s0=1.0)
    for s0 in (np.float32(1.0), np.int64(1), np.float64(1.0), np.array(1.0)):
        assert ss.signal_stats(2.0, 100, s0=s0).entropy == ref.entropy
    with pytest.raises(TypeError, match="`s0`"):
        ss.signal_stats(2.0, 100, s0=np.bool_(True))

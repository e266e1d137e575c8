"""The rule of ``advise`` (:mod:`softmax_scale.advice._rule`): each clause decides, shown by flipping evidence rows.

A toy experiment is registered whose only result is a list of :class:`Evidence` rows; each test
changes one row (or one label, or ``n``) and the recommendation changes with it.  The level of the
paired t is checked by simulation under no effect, and its critical values against printed tables.
"""

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale.advice._rule import CLAUSES, LEVEL, RULE, below_one_inside, critical_t, judge
from softmax_scale.experiments import EXPERIMENTS, Evidence, Experiment

D, L, N = 128, 4096, 32768


@dataclass(frozen=True)
class _Config:
    quick: bool = False


class _Toy(Experiment):
    name = "toy_rule"
    file_stem = "toy_rule"

    def __init__(self, rows):
        self.rows = list(rows)

    def config(self, quick=False):
        return _Config(quick)

    def read(self, path):
        return Path(path).read_text(encoding="utf-8")

    def evidence(self, table):
        return self.rows


def _row(scale, difference=-0.05, spread=0.01, *, seeds=(0, 1, 2), multiple=8.0, model="toy decoder", size=1000,
         task="next byte", metric="loss", experiment="toy_rule", unit="bytes"):
    return Evidence(experiment, model, size, "parameters", "yarn", task, multiple, scale, "standard", metric,
                    difference, spread, tuple(seeds), 32, 128, unit, "seeds")


def _advise(tmp_path, rows, **kwargs):
    (tmp_path / "toy_rule.csv").write_text("rows\n", encoding="utf-8")
    EXPERIMENTS["toy_rule"] = _Toy(rows)
    try:
        return ss.advise(**{"d": D, "train_length": L, "n": N, "rope": "yarn", "results": tmp_path, **kwargs})
    finally:
        del EXPERIMENTS["toy_rule"]


def _at_test(advice):
    return next(r for r in advice.recommendations if r.at_test)


def _trained(advice):
    return next(r for r in advice.recommendations if not r.at_test)


# ---------------------------------------------------------------------------------------------
# the paired t


def test_the_critical_values_are_the_printed_t_table():
    # one-sided 5% points of Student's t with 1, 2, 4 degrees of freedom (any statistics table)
    assert [round(critical_t(k), 3) for k in (2, 3, 5)] == [6.314, 2.920, 2.132]


def test_under_no_effect_the_test_says_better_at_its_level():
    rng = np.random.default_rng(0)
    for k in (2, 3, 5):
        d = rng.standard_normal((40_000, k))
        verdicts = [judge("loss", float(x.mean()), float(x.std(ddof=1)), k)[2] for x in d]
        rate = verdicts.count("better") / len(verdicts)
        assert abs(rate - LEVEL) < 4 * math.sqrt(LEVEL * (1 - LEVEL) / len(verdicts)), (k, rate)


def test_one_seed_is_never_separated():
    assert judge("accuracy", 0.5, float("nan"), 1)[2] == "not separated"


def test_the_t_is_the_mean_over_its_standard_error():
    t, crit, verdict = judge("loss", -0.05, 0.01, 3)
    assert t == pytest.approx(0.05 / (0.01 / math.sqrt(3)), rel=1e-12)
    assert verdict == "better"


def test_a_spread_too_wide_for_the_t_leaves_standard(tmp_path):
    assert _at_test(_advise(tmp_path, [_row("standard + qwen_logn@128 at test")])).scale == "qwen_logn at test"
    # t = 0.05 / (0.05 / sqrt 3) = 1.73 < 2.92: the same mean is no longer separated
    assert _at_test(_advise(tmp_path, [_row("standard + qwen_logn@128 at test", spread=0.05)])).scale == "standard"


def test_a_worse_situation_rules_a_scale_out(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test"),
            _row("standard + qwen_logn@128 at test", +0.05, multiple=8.0, model="toy two", size=2000)]
    rec = _at_test(_advise(tmp_path, rows))
    assert rec.scale == "standard"
    assert "worse in some situation: qwen_logn at test" in rec.reason


# ---------------------------------------------------------------------------------------------
# each situation weighed once, units never mixed


def test_the_scale_better_in_more_situations_wins_over_one_better_in_one(tmp_path):
    big_once = _row("standard + yarn@128 at test", -0.5, 0.01)
    qwen = [_row("standard + qwen_logn@128 at test", -0.05, 0.01, model=m, size=s)
            for m, s in (("toy decoder", 1000), ("toy two", 2000))]
    assert _at_test(_advise(tmp_path, [big_once, *qwen])).scale == "qwen_logn at test"
    # one of qwen_logn's two situations not separated: one each, and yarn's gain is beyond the uncertainty
    qwen[1] = replace(qwen[1], spread=1.0)
    assert _at_test(_advise(tmp_path, [big_once, *qwen])).scale == "yarn at test"


def test_the_effect_is_one_situations_difference_in_its_own_unit(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", -0.05, 0.01, unit="bytes", multiple=2.0),
            _row("standard + qwen_logn@128 at test", -0.30, 0.01, unit="tokens", model="toy lm", size=5000,
                 task="next token", multiple=8.0)]
    rec = _at_test(_advise(tmp_path, rows))
    assert (rec.effect, rec.unit) == (-0.30, "nats per token")  # the situation at n/L = 8, never the mean -0.175
    assert rec.effect_se == pytest.approx(0.01 / math.sqrt(3), rel=1e-12)


def test_retrieval_reads_accuracy_and_language_modelling_loss(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", -0.05, 0.01, task="passkey retrieval"),
            _row("standard + qwen_logn@128 at test", -0.05, 0.01, task="passkey retrieval", metric="accuracy")]
    a = _advise(tmp_path, rows, task="retrieval")
    assert {c.metric for c in a.comparisons} == {"accuracy"}
    assert _at_test(a).scale == "standard"  # accuracy fell: worse


# ---------------------------------------------------------------------------------------------
# one label per scale, duplicates merged


def test_labels_of_one_scale_are_one_scale(tmp_path):
    rows = [_row("log_L n trained in", model="toy two", size=2000), _row("entropy_invariant@128")]
    a = _advise(tmp_path, rows)
    assert {c.scale for c in a.comparisons} == {"entropy_invariant"}
    assert _trained(a).score == 2


def test_a_comparison_two_experiments_share_is_counted_once(tmp_path):
    rows = [_row("entropy_invariant@128"), _row("log_L n trained in", experiment="toy_twin")]
    a = _advise(tmp_path, rows)
    assert [c.experiment for c in a.comparisons] == ["toy_rule, toy_twin"]
    assert _trained(a).score == 1
    rows[1] = replace(rows[1], difference=-0.06)  # other numbers: two comparisons
    assert _trained(_advise(tmp_path, rows)).score == 2


# ---------------------------------------------------------------------------------------------
# never below 1 inside L at test time; a per-head rule needs the heads


def test_a_scale_below_1_inside_l_is_not_recommended_at_test_time(tmp_path):
    rec = _at_test(_advise(tmp_path, [_row("standard + entropy_invariant@128 at test")]))
    assert rec.scale == "standard"
    assert "entropy_invariant at test (below 1 inside L)" in rec.reason
    # the same numbers under qwen_logn (max(1, log_L n): 1 inside L) are recommended
    assert _at_test(_advise(tmp_path, [_row("standard + qwen_logn@128 at test")])).scale == "qwen_logn at test"


def test_trained_in_a_scale_below_1_inside_l_may_be_recommended(tmp_path):
    assert _trained(_advise(tmp_path, [_row("entropy_invariant@128")])).scale == "entropy_invariant"


@pytest.mark.parametrize(("scheme", "below"), [("entropy_invariant", True), ("ssmax", True), ("chiang_cholak", True),
                                               ("qwen_logn", False), ("yarn", False), ("standard", False)])
def test_below_one_inside_l_is_the_factor_on_every_n_up_to_l(scheme, below):
    ns = np.arange(2, 257)
    assert bool(np.min(ss.pinned(scheme, 256).factor(ns, 64)) < 1 - 1e-12) == below
    assert below_one_inside(scheme, 256, 64) == below


def _heads():
    rng = np.random.default_rng(0)
    return [ss.head_stats(2.0 * rng.standard_normal((2, 32, n)), predict=False) for n in (L // 2, L)]


def test_a_per_head_rule_is_recommended_only_with_the_heads(tmp_path):
    rows = [_row("standard + toolkit_iid at test")]
    rec = _at_test(_advise(tmp_path, rows))
    assert rec.scale == "standard" and "a per-head rule: pass head_stats" in rec.reason
    heads = _heads()
    rec = _at_test(_advise(tmp_path, rows, head_stats=heads))
    want = ss.head_factors(heads, L, N).factors["toolkit_iid"]
    assert rec.scale == "toolkit_iid at test"
    np.testing.assert_allclose(rec.head_factors, want.ravel(), rtol=0, atol=0)
    assert rec.factor == pytest.approx(float(np.median(want)), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# n = L; ties to the simpler scale


def test_at_the_training_length_nothing_changes(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", multiple=1.0), _row("ssmax", multiple=1.0)]
    a = _advise(tmp_path, rows, n=L)
    assert [(r.scale, r.factor) for r in a.recommendations] == [("standard", 1.0), ("standard", 1.0)]
    assert a.headline.startswith(f"multiply the logits by 1 at n = L = {L}")
    # every pinned scale with a training length at n = L, as advise names them: 1 but llama4's first step
    off = [k for k in ss.schemes.QK_SCHEMES if ss.schemes.SCHEMES[k].pin_rule and ss.pinned(k, L).factor(L, D) != 1]
    assert off == ["llama4"] and "all but llama4 x1.069" in a.headline
    assert _at_test(_advise(tmp_path, [_row("standard + qwen_logn@128 at test", multiple=1.0)], n=L + 1)).scale \
        == "qwen_logn at test"


def test_a_tie_within_the_uncertainty_goes_to_the_simpler_scale(tmp_path):
    rows = [_row("standard + yarn@128 at test", -0.052), _row("standard + qwen_logn@128 at test", -0.05)]
    rec = _at_test(_advise(tmp_path, rows))
    assert rec.scale == "qwen_logn at test" and "tied within the uncertainty with yarn at test" in rec.reason
    rows[0] = replace(rows[0], difference=-0.2)  # yarn's gain now beyond 2.92 x the combined standard error
    assert _at_test(_advise(tmp_path, rows)).scale == "yarn at test"


# ---------------------------------------------------------------------------------------------
# the rule printed is the rule applied


def test_the_printed_rule_is_the_clauses_texts():
    assert RULE == " ".join(c.text for c in CLAUSES)
    assert f"{critical_t(3):.2f}" in RULE and str(LEVEL) in RULE


def test_the_advice_prints_the_rule(tmp_path):
    a = _advise(tmp_path, [_row("standard + qwen_logn@128 at test")])
    assert a.rule == RULE and RULE in a.text().replace("\n", " ")


# ---------------------------------------------------------------------------------------------
# the scope's warnings


def test_the_scope_warns_of_a_model_measured_short_of_n_over_l_and_of_a_far_head_dimension(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test"), _row("standard + qwen_logn@128 at test", model="toy short",
                                                          size=2000, multiple=2.0)]
    scope = _advise(tmp_path, rows, d=64).scope  # within 2x of the models' 32: no warning on d
    assert [s for s in scope if s.startswith("Warning")] == [
        "Warning: n/L = 8 is past what was measured in toy short (to 2L): the comparisons there are read at the "
        "largest multiple measured."]
    assert any(s.startswith("Warning: d = 1024 is far from the measured models' head dimensions (32)")
               for s in _advise(tmp_path, rows, d=1024).scope)
    assert any(s.startswith("Warning: n/L = 64 is past every measured multiple")
               for s in _advise(tmp_path, rows, n=64 * L).scope)


def test_of_three_the_simplest_that_none_beats_is_taken(tmp_path):
    # qwen_logn ties yarn, yarn ties longrope, longrope beats qwen_logn (threshold 2.92 x 0.0082 = 0.024)
    rows = [_row("standard + qwen_logn@128 at test", -0.05), _row("standard + yarn@128 at test", -0.065),
            _row("standard + longrope@128 at test", -0.08)]
    assert _at_test(_advise(tmp_path, rows)).scale == "yarn at test"

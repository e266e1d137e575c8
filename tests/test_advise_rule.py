"""The rule of ``advise`` (:mod:`softmax_scale.advice._rule`): each clause decides, shown by flipping evidence rows.

A toy experiment is registered whose only result is a list of :class:`Evidence` rows; each test
changes one row (or one label, or ``n``) and the recommendation changes with it.  The tests are checked
against scipy's own tests and closed forms, their level by simulation under no effect, and advise's
rate of recommending a change by simulation in the shape of the committed evidence.
"""

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import softmax_scale as ss
from softmax_scale.advice._rule import CLAUSES, LEVEL, RULE, below_one_inside, holm, judge, paired_test
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
         task="next byte", metric="loss", experiment="toy_rule", unit="bytes", replicates="seeds", values=None,
         binary=False):
    """One Evidence row whose per-seed values have exactly the mean and sample spread given (three seeds: m - s, m, m + s)."""
    if values is None:
        k = len(seeds)
        z = np.linspace(-1.0, 1.0, k)
        z = z / z.std(ddof=1) if k > 1 else z
        values = tuple(float(difference + spread * x) for x in z)
    v = np.asarray(values, dtype=float)
    return Evidence(experiment, model, size, "parameters", "yarn", task, multiple, scale, "standard", metric,
                    float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan"), tuple(seeds), 32, 128, unit,
                    replicates, values=tuple(float(x) for x in v), binary=binary)


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
# the tests: against scipy and closed forms, and their level under no effect


def test_the_paired_t_is_scipys_two_sided_one_sample_t():
    x = np.array([-0.03, -0.05, -0.01, -0.04])
    test, t, p = paired_test(-1.0, float(x.mean()), float(x.std(ddof=1)), x.size)
    ref = stats.ttest_1samp(x, 0.0)
    assert test == "paired t"
    assert t == pytest.approx(-ref.statistic, rel=1e-12)  # signed so that positive is better (lower loss)
    assert p == pytest.approx(ref.pvalue, rel=1e-12)


@pytest.mark.parametrize(("values", "p"), [((1, 1, 1, 1, 1), 2 / 32), ((1, 0, 0, 0, 0, 0), 1.0),
                                           ((-1, -1, 1, 0), 1.0), ((1,) * 6, 2 / 64)])
def test_keys_retrieved_are_tested_by_the_exact_sign_test(values, p):
    # two-sided binomial at 1/2 on the discordant prompts: 2 x 2^-k when all k go one way
    test, _, got = paired_test(1.0, float(np.mean(values)), float(np.std(values, ddof=1)), len(values), values, True)
    assert test == "exact sign test" and got == pytest.approx(p, rel=1e-12)


def test_a_t_on_zero_one_outcomes_would_separate_what_the_sign_test_does_not():
    values = (1.0,) * 5  # five prompts, each retrieved only under the scale
    assert paired_test(1.0, 1.0, 0.0, 5, values, False)[2] == 0.0  # a t: zero spread, "certain"
    assert paired_test(1.0, 1.0, 0.0, 5, values, True)[2] == pytest.approx(0.0625, rel=1e-12)


def test_holm_adjusts_as_its_step_down_closed_form():
    # sorted 0.01, 0.03, 0.04 -> 3 x 0.01, max(0.03, 2 x 0.03), max(0.06, 1 x 0.04)
    assert holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06], rel=1e-12)
    assert math.isnan(holm([0.01, float("nan")])[1])


def test_under_no_effect_one_comparison_is_separated_at_its_two_sided_level():
    rng = np.random.default_rng(0)
    for k in (2, 3, 5):
        d = rng.standard_normal((20_000, k))
        verdicts = [judge("loss", float(x.mean()), float(x.std(ddof=1)), k)[2] for x in d]
        rate = (verdicts.count("better") + verdicts.count("worse")) / len(verdicts)
        assert abs(rate - LEVEL) < 4 * math.sqrt(LEVEL * (1 - LEVEL) / len(verdicts)), (k, rate)


def test_one_seed_is_never_separated():
    assert judge("accuracy", 0.5, float("nan"), 1)[2] == "not separated"


def _null_draws(rng):
    """The committed evidence against standard with every paired difference redrawn under no effect, shapes kept."""
    from softmax_scale.advice._evidence import read_evidence

    found, _, _ = read_evidence(ss.experiments.RESULTS)
    out = []
    for _, ev in found.values():
        for e in ev:
            if e.reference != "standard":
                continue
            k = len(e.seeds)
            if e.binary:
                v = rng.choice([-1.0, 0.0, 1.0], size=k, p=[0.25, 0.5, 0.25])
            else:
                sd = e.spread if math.isfinite(e.spread) and e.spread > 0 else 0.01
                v = rng.normal(0.0, sd, size=k)
            out.append(replace(e, experiment="toy_rule", difference=float(v.mean()),
                               spread=float(v.std(ddof=1)) if k > 1 else float("nan"),
                               values=tuple(float(x) for x in v)))
    return out


@pytest.mark.parametrize("task", ["lm", "retrieval"])
def test_under_no_effect_in_the_shape_of_the_committed_files_a_change_is_recommended_at_most_at_the_level(tmp_path, task):
    # advise's own steps (its comparisons, then its rule for each RoPE and way of applying), without the scope and theory
    from softmax_scale.advice._evidence import comparisons
    from softmax_scale.advice._rule import recommend

    rng = np.random.default_rng(1)
    draws, changed = 120, 0
    for _ in range(draws):
        found = {"toy_rule": ("toy_rule.csv", _null_draws(rng))}
        for n in (2 * L, 8 * L):
            cs = comparisons(found, task, None, n / L)
            recs = [recommend(cs, r, at, d=D, L=L, n=n) for r in sorted({c.rope for c in cs}) for at in (True, False)]
            changed += any(r.scale != "standard" for r in recs)
    trials = 2 * draws
    assert changed / trials <= LEVEL + 3 * math.sqrt(LEVEL * (1 - LEVEL) / trials), changed


# ---------------------------------------------------------------------------------------------
# each clause decides: one row flipped


def test_a_clear_gain_that_reaches_n_is_recommended_with_its_whole_multiplier(tmp_path):
    rec = _at_test(_advise(tmp_path, [_row("standard + qwen_logn@128 at test", -0.05, 0.001)]))
    assert rec.scale == "qwen_logn at test"
    assert rec.factor == pytest.approx(math.log(N) / math.log(L), rel=1e-12)
    assert rec.change == f"x1 -> x{rec.factor:.5g}"


def test_a_spread_too_wide_for_the_t_keeps_the_baseline(tmp_path):
    # t = 0.05 / (0.05 / sqrt 3) = 1.73, p = 0.23: the same mean is no longer separated
    rec = _at_test(_advise(tmp_path, [_row("standard + qwen_logn@128 at test", spread=0.05)]))
    assert rec.scale == "standard" and rec.change == "keep x1"


def test_holms_correction_decides(tmp_path):
    # alone, p = 0.0392 (t = 4.9 on 2 degrees of freedom) passes 0.05; beside three null scales Holm multiplies it by 4
    one = _row("standard + qwen_logn@128 at test", -0.05, 0.0177)
    assert paired_test(-1.0, one.difference, one.spread, 3)[2] < LEVEL
    assert _at_test(_advise(tmp_path, [one])).scale == "qwen_logn at test"
    nulls = [_row(f"standard + {s}@128 at test", 0.0, 0.01) for s in ("yarn", "longrope", "llama4")]
    assert _at_test(_advise(tmp_path, [one, *nulls])).scale == "standard"


def test_two_models_separated_in_opposite_directions_keep_the_baseline_and_are_shown_side_by_side(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", -0.05, 0.001),
            _row("standard + qwen_logn@128 at test", +0.05, 0.001, multiple=2.0, model="toy real", size=2000,
                 replicates="documents")]
    rec = _at_test(_advise(tmp_path, rows))
    assert rec.scale == "standard"
    assert "the other way elsewhere (shown side by side): qwen_logn at test" in rec.reason
    assert len(rec.side_by_side) == 2 and any("toy real" in s for s in rec.side_by_side)
    rows[1] = replace(rows[1], difference=-0.01, values=(-0.06, -0.01, 0.04))  # the same sign: the change stands
    assert _at_test(_advise(tmp_path, rows)).scale == "qwen_logn at test"


def test_a_veto_needs_a_separated_difference(tmp_path):
    # the other model points the other way (+0.01) but is not separated (spread 0.05 on 3 documents): no veto
    rows = [_row("standard + qwen_logn@128 at test", -0.05, 0.001),
            _row("standard + qwen_logn@128 at test", +0.01, 0.05, multiple=2.0, model="toy real", size=2000,
                 replicates="documents")]
    rec = _at_test(_advise(tmp_path, rows))
    assert rec.scale == "qwen_logn at test" and rec.side_by_side == ()


def test_a_situation_short_of_n_over_l_decides_nothing_and_no_effect_is_printed(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", -0.05, 0.001, multiple=2.0)]
    assert _at_test(_advise(tmp_path, rows, n=2 * L)).scale == "qwen_logn at test"
    rec = _at_test(_advise(tmp_path, rows, n=8 * L))
    assert rec.scale == "standard" and "not measured past 2L" in rec.reason and math.isnan(rec.effect)
    assert "theory at n (i.i.d. cosine scores, not measured)" in _advise(tmp_path, rows, n=8 * L).headline


def test_the_multiples_are_pooled_replicate_by_replicate_up_to_the_first_that_reaches(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", values=(-0.02, -0.03, -0.04), multiple=2.0),
            _row("standard + qwen_logn@128 at test", values=(-0.06, -0.05, -0.04), multiple=8.0),
            _row("standard + qwen_logn@128 at test", values=(+0.9, +0.9, +0.9), multiple=16.0)]
    c = _advise(tmp_path, rows).comparisons[0]
    assert c.multiples == (2.0, 8.0) and c.measured_to == 16.0
    assert c.values == pytest.approx((-0.04, -0.04, -0.04), abs=1e-15)  # each seed's mean over 2L and 8L


def test_retrieval_reads_accuracy_and_language_modelling_loss(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", -0.05, 0.001, task="passkey retrieval"),
            _row("standard + qwen_logn@128 at test", -0.05, 0.001, task="passkey retrieval", metric="accuracy")]
    a = _advise(tmp_path, rows, task="retrieval")
    assert {c.metric for c in a.comparisons} == {"accuracy"}
    assert _at_test(a).scale == "standard" and a.comparisons[0].verdict == "worse"


# ---------------------------------------------------------------------------------------------
# one label per scale only where it is one function of n/L


def test_a_pin_at_l_is_dropped_and_another_pin_kept_as_a_multiple_of_l(tmp_path):
    rows = [_row("log_L n trained in", model="toy two", size=2000), _row("entropy_invariant@128"),
            _row("entropy_invariant@1024", model="toy three", size=3000)]
    a = _advise(tmp_path, rows)
    assert {c.scale for c in a.comparisons} == {"entropy_invariant", "entropy_invariant@8L"}


def test_a_scale_trained_with_a_learned_parameter_is_not_the_fixed_scale(tmp_path):
    a = _advise(tmp_path, [_row("ssmax", -0.05, 0.001), _row("standard + ssmax at test", model="toy two", size=2000)])
    assert {c.scale for c in a.comparisons} == {"ssmax (s learned per head)", "ssmax at test"}
    rec = _trained(a)
    assert rec.scale == "ssmax (s learned per head)" and math.isnan(rec.factor) and "learned per head" in rec.formula


def test_a_comparison_two_experiments_share_is_counted_once(tmp_path):
    rows = [_row("entropy_invariant@128"), _row("log_L n trained in", experiment="toy_twin")]
    a = _advise(tmp_path, rows)
    assert [c.experiment for c in a.comparisons] == ["toy_rule, toy_twin"]
    rows[1] = replace(rows[1], difference=-0.06, values=(-0.07, -0.06, -0.05))  # other numbers: two comparisons
    assert len(_advise(tmp_path, rows).comparisons) == 2


# ---------------------------------------------------------------------------------------------
# never below 1 inside L at test time; a per-head rule needs the heads


def test_a_scale_below_1_inside_l_is_not_recommended_at_test_time(tmp_path):
    rec = _at_test(_advise(tmp_path, [_row("standard + entropy_invariant@128 at test", -0.05, 0.001)]))
    assert rec.scale == "standard"
    assert "entropy_invariant at test (below 1 inside L)" in rec.reason
    # the same numbers under qwen_logn (max(1, log_L n): 1 inside L) are recommended
    assert _at_test(_advise(tmp_path, [_row("standard + qwen_logn@128 at test", -0.05, 0.001)])).scale \
        == "qwen_logn at test"


def test_trained_in_a_scale_below_1_inside_l_may_be_recommended(tmp_path):
    assert _trained(_advise(tmp_path, [_row("entropy_invariant@128", -0.05, 0.001)])).scale == "entropy_invariant"


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
    rows = [_row("standard + toolkit_iid at test", -0.05, 0.001)]
    rec = _at_test(_advise(tmp_path, rows))
    assert rec.scale == "standard" and "a per-head rule: pass head_stats" in rec.reason
    heads = _heads()
    rec = _at_test(_advise(tmp_path, rows, head_stats=heads))
    want = ss.head_factors(heads, L, N).factors["toolkit_iid"]
    assert rec.scale == "toolkit_iid at test"
    np.testing.assert_allclose(rec.head_factors, want.ravel(), rtol=0, atol=0)
    assert rec.factor == pytest.approx(float(np.median(want)), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# inside L; ties keep the baseline


def test_inside_the_training_length_the_baseline_is_kept(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", -0.05, 0.001, multiple=2.0)]
    a = _advise(tmp_path, rows, n=L)
    assert [(r.scale, r.factor) for r in a.recommendations] == [("standard", 1.0), ("standard", 1.0)]
    assert a.headline.startswith("keep x1 (1/sqrt(d); 1/sqrt(128) = 0.08839 on q·k): n = 4,096 is inside the length the recipe covers")
    assert _at_test(_advise(tmp_path, rows, n=2 * L)).scale == "qwen_logn at test"


def test_a_tie_within_the_uncertainty_takes_the_best_estimate_and_names_the_other(tmp_path):
    # seed by seed the two differ by -0.004, -0.002, 0: paired t = 1.73 on 2 degrees of freedom, p = 0.23
    rows = [_row("standard + yarn@128 at test", values=(-0.053, -0.052, -0.051)),
            _row("standard + qwen_logn@128 at test", values=(-0.049, -0.050, -0.051))]
    rec = _at_test(_advise(tmp_path, rows))
    assert rec.scale == "yarn at test" and rec.equivalent == ("qwen_logn at test",)
    assert rec.effect == pytest.approx(-0.052, abs=1e-12)
    assert "equivalent within the uncertainty (the top tier): qwen_logn at test" in rec.reason
    rows[0] = _row("standard + yarn@128 at test", -0.2, 0.001)  # yarn's gain now far beyond qwen_logn's, seed by seed
    rec = _at_test(_advise(tmp_path, rows))
    assert rec.scale == "yarn at test" and rec.equivalent == ()
    assert "beaten within the candidates: qwen_logn at test (by yarn at test)" in rec.reason


def test_a_candidate_beaten_by_another_leaves_the_tier_and_the_answer(tmp_path):
    clear = [_row("standard + yarn@128 at test", values=(-0.060, -0.050, -0.040))]
    # qwen_logn beats the baseline too, but yarn beats it seed by seed (by 0.010 every seed): out of the tier
    beaten = _row("standard + qwen_logn@128 at test", values=(-0.050, -0.040, -0.030))
    alone, both = _at_test(_advise(tmp_path, clear)), _at_test(_advise(tmp_path, clear + [beaten]))
    assert (both.scale, both.factor, both.effect) == (alone.scale, alone.factor, alone.effect)
    assert both.equivalent == ()


# ---------------------------------------------------------------------------------------------
# the rule printed is the rule applied


def test_the_printed_rule_is_the_clauses_texts():
    assert RULE == " ".join(c.text for c in CLAUSES)
    assert f"level {LEVEL}" in RULE and "Holm" in RULE and "exact sign test" in RULE


def test_the_advice_prints_the_rule(tmp_path):
    a = _advise(tmp_path, [_row("standard + qwen_logn@128 at test")])
    assert a.rule == RULE and RULE in a.text().replace("\n", " ")


def test_the_scope_says_what_was_not_measured_past_n_over_l_and_warns_of_a_far_head_dimension(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test"), _row("standard + qwen_logn@128 at test", model="toy short",
                                                          size=2000, multiple=2.0)]
    scope = _advise(tmp_path, rows, d=64).scope  # within 2x of the models' 32: no warning on d
    assert [s for s in scope if s.startswith(("Warning", "Not measured past"))] == [
        "Not measured past n/L = 8 in toy short (to 2L): those results are shown as context and no change rests on them."]
    assert any(s.startswith("Warning: d = 1024 is far from the measured models' head dimensions (32)")
               for s in _advise(tmp_path, rows, d=1024).scope)
    assert any(s.startswith("Not measured past 8L: n/L = 64 is past every measured multiple")
               for s in _advise(tmp_path, rows, n=64 * L).scope)


# ---------------------------------------------------------------------------------------------
# the baseline: the model's own recipe


PLAIN = {"model_type": "llama", "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
         "max_position_embeddings": 4096}
TRAINED_WITH_YARN = {**PLAIN, "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 2048}}


def test_a_config_without_a_temperature_takes_the_change_and_says_how_to_set_it(tmp_path):
    a = _advise(tmp_path, [_row("standard + qwen_logn@128 at test", -0.05, 0.001)], d=None, train_length=None,
                config=PLAIN)
    rec = a.recommendations[0]
    assert rec.scale == "qwen_logn at test" and rec.baseline == 1.0 and rec.change == f"x1 -> x{rec.factor:.5g}"
    assert "its factor at each position" in a.engines
    # qwen_logn changes with the position: no engine's factor on cos/sin gives it, and each says so
    from softmax_scale.engines import ENGINES
    for name in ENGINES:
        if name != "reference":
            assert f"{name} newest: cannot be set" in a.engines, name


def test_a_config_trained_with_yarn_keeps_its_recipe_whatever_the_evidence(tmp_path):
    rows = [_row("standard + qwen_logn@128 at test", -0.05, 0.001), _row("standard + yarn@128 at test", -0.05, 0.001)]
    a = _advise(tmp_path, rows, d=None, train_length=None, config=TRAINED_WITH_YARN)
    rec = a.recommendations[0]
    yarn = (0.1 * math.log(2.0) + 1.0) ** 2  # YaRN's temperature at factor 2, on every position
    assert rec.scale == "standard" and rec.factor == pytest.approx(yarn, rel=1e-12)
    assert "no measured model was" in rec.reason
    assert any(line.startswith("yarn at test: toy_rule") for line in a.recipe_evidence)  # shown as context only

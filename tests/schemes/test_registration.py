"""A scale added as one Scheme object reaches every caller of the registry, and leaves with it.

The scheme registered here, ``test_square``, is ``(log n / log L)^2 / sqrt(d)``: pinned to
standard at ``n = L``, four times standard at ``n = L^2``.  Every reference below is that closed
form or the exact evaluator called at the closed form's ``alpha``.
"""

import json
import math

import numpy as np
import pytest

import softmax_scale.schemes as sc
from softmax_scale import cli
from softmax_scale.distributions import Normal
from softmax_scale.entropy import DEFAULT_SCHEMES, entropy_curve, entropy_curves
from softmax_scale.stats import softmax_stats

KEY = "test_square"


def _square(n, d, p):
    return (np.log(n) / math.log(p["train_length"])) ** 2 / math.sqrt(d)


def _check(p):
    L = p["train_length"]
    if not isinstance(L, int) or L < 2:
        raise ValueError(f"`train_length` must be an integer >= 2, got {L!r}")
    return p


def _pin(L):
    return {"train_length": L}


SQUARE = sc.Scheme(KEY, "qk", "(log n / log L)^2 / sqrt(d)", _square, {"train_length": 64}, "this test",
                   check=_check, pin=_pin, pin_rule="train_length = L", train_names={KEY: None},
                   default_in=frozenset({"entropy_curves", "entropy_figures"}),
                   style=sc.Style("tab:pink", "--", 2.0, label="square of log_L n"))


def closed_form(n, d, L):
    return (math.log(n) / math.log(L)) ** 2 / math.sqrt(d)


@pytest.fixture
def square():
    with sc.registered(SQUARE) as s:
        yield s


def test_the_lists_follow_the_registration(square):
    assert sc.SCHEMES[KEY] is square
    assert KEY in sc.QK_SCHEMES
    assert KEY not in sc.COSINE_SCHEMES
    assert [s.key for s in sc.list_schemes()][-1] == KEY
    assert KEY in DEFAULT_SCHEMES
    assert KEY in sc.default_list("entropy_figures")
    assert KEY in sc.TRAIN_NAMES


def test_it_leaves_with_the_block():
    with sc.registered(SQUARE):
        pass
    for names in (sc.SCHEMES, sc.QK_SCHEMES, DEFAULT_SCHEMES, sc.TRAIN_NAMES):
        assert KEY not in names
    with pytest.raises(ValueError, match="scheme"):
        sc.pinned(KEY)


def test_the_command_line_lists_and_evaluates_it(square, capsys):
    assert cli.main(["scale", "--list", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[KEY]
    assert row["formula"] == square.formula
    assert row["pinned_at_train_length"] == "train_length = L"
    assert cli.main(["scale", "4096", "128", "--scheme", KEY, "--train-length", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["multiplier"] == pytest.approx(closed_form(4096, 128, 64), rel=1e-14)
    assert out["factor_over_standard"] == pytest.approx(4.0, rel=1e-14)


def test_the_command_line_help_names_its_published_default(square, capsys):
    with pytest.raises(SystemExit):
        cli.main(["entropy", "--help"])
    assert f"{KEY} train_length=64" in " ".join(capsys.readouterr().out.split())


def test_pinned(square):
    ps = sc.pinned(KEY, 512)
    assert dict(ps.params) == {"train_length": 512}
    np.testing.assert_allclose(ps.factor([512, 512**2], 64), [1.0, 4.0], rtol=1e-14)
    np.testing.assert_allclose(sc.scheme_factor([512, 512**2], 64, KEY, 512), [1.0, 4.0], rtol=1e-14)
    with pytest.raises(ValueError, match="nope"):
        sc.pinned(KEY, nope=3)  # an unknown parameter is named
    with pytest.raises(ValueError, match="train_length"):
        sc.attention_scale(100, 64, KEY, train_length=1)  # the scheme's own check


@pytest.mark.parametrize("score_model, factor", [("normal", 1.0), ("cosine", math.sqrt(128))])
def test_entropy_curves(square, score_model, factor):
    ns = np.array([64, 512, 4096])
    c = entropy_curve(ns, KEY, d=128, score_model=score_model, pin_length=64)
    want = np.array([closed_form(n, 128, 64) * math.sqrt(128) * factor for n in ns])
    np.testing.assert_allclose(c.alpha, want, rtol=1e-14)
    if score_model == "normal":
        ref = [float(softmax_stats(a, int(n), Normal(), method="exact").entropy) for a, n in zip(want, ns)]
        np.testing.assert_allclose(c.entropy, ref, rtol=1e-12)
    assert KEY in entropy_curves(ns[:1], d=128, score_model=score_model)  # in the default list


def test_training_config_and_factors(square):
    from softmax_scale.train import TRAIN_SCALES, TrainConfig, model_factors, query_factors

    assert KEY in TRAIN_SCALES
    cfg = TrainConfig(scheme=KEY, pin_length=8, train_length=64)
    np.testing.assert_allclose(model_factors(cfg, 64), np.float32(4.0), rtol=1e-6)  # (log 64 / log 8)^2
    causal = query_factors(KEY, 64, cfg.d_head, causal=True, pin_length=8)
    np.testing.assert_allclose(causal, [(math.log(n) / math.log(8)) ** 2 for n in range(1, 65)], rtol=1e-13)


def test_a_figure_draws_it_with_its_style(square):
    from softmax_scale.plotting.entropy import plot_entropy_vs_n

    fig = plot_entropy_vs_n(ns=[64, 512], schemes=(sc.STANDARD, KEY), train_length=64)
    legend = fig.legends[0]
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts == [sc.STANDARD, "square of log_L n"]
    line = fig.axes[0].get_lines()[1]
    assert line.get_color() == "tab:pink"
    assert line.get_linestyle() == "--"
    assert line.get_linewidth() == 2.0


# --- what the registry refuses -----------------------------------------------------------------


def test_a_key_is_registered_once(square):
    with pytest.raises(ValueError, match="registered already"):
        sc.register_scheme(SQUARE)


@pytest.mark.parametrize("name, match", [("yarn", "key of another scheme"), ("alpha", "registered already")])
def test_a_training_name_is_not_taken(name, match):
    other = sc.Scheme("test_other", "qk", "1/sqrt(d)", _square, {"train_length": 64}, "this test",
                      train_names={name: None})
    with pytest.raises(ValueError, match=match):
        sc.register_scheme(other)
    assert "test_other" not in sc.SCHEMES


def test_published_schemes_stay():
    with pytest.raises(ValueError, match="published"):
        sc.unregister_scheme(sc.STANDARD)
    with pytest.raises(ValueError, match="key"):
        sc.unregister_scheme("nope")
    with pytest.raises(TypeError, match="scheme"):
        sc.register_scheme("nope")


@pytest.mark.parametrize(
    "change, name",
    [
        ({"key": "two words"}, "key"),
        ({"applies_to": "kq"}, "applies_to"),
        ({"multiplier": 3.0}, "multiplier"),
        ({"pin_rule": ""}, "pin_rule"),
        ({"pin": lambda L: {"length": L}}, "pin"),
        ({"train_names": {KEY: "nope"}}, "train_names"),
        ({"learned": "s"}, "learned"),
        ({"default_in": frozenset({"somewhere"})}, "default_in"),
        ({"style": ("tab:pink", "--")}, "style"),
    ],
)
def test_a_bad_scheme_is_refused_naming_the_field(change, name):
    import dataclasses

    with pytest.raises((ValueError, TypeError), match=name):
        dataclasses.replace(SQUARE, **change)


# --- the registry's own lists and names --------------------------------------------------------


def test_scheme_keys_is_a_read_only_view():
    assert sc.QK_SCHEMES == tuple(sc.QK_SCHEMES)
    assert sc.QK_SCHEMES[0] == sc.STANDARD
    assert len(sc.QK_SCHEMES) + len(sc.COSINE_SCHEMES) == len(sc.SCHEMES)
    assert repr(sc.COSINE_SCHEMES).startswith("('clip'")


def test_training_names():
    go, p = sc.train_scheme("alpha", 1.5)
    assert (go.key, p) == ("gradient_optimal", {"value": 1.5})
    assert sc.train_scheme("alpha_star")[1] == {}
    assert sc.train_scheme(sc.SSMAX)[0].learned == "s"
    with pytest.raises(ValueError, match="scheme"):
        sc.train_scheme("qwen_logn")  # a test-time scale, not trained
    assert tuple(sc.TRAIN_NAMES) == ("standard", "entropy_invariant", "ssmax", "alpha_star", "alpha")


def test_the_default_lists():
    assert tuple(DEFAULT_SCHEMES) == ("standard", "chiang_cholak", "entropy_invariant", "qwen_logn", "yarn",
                                      "longrope", "llama4", "ssmax", "gradient_optimal", "critical")
    assert set(sc.default_list("entropy_curves")) - set(sc.default_list("entropy_figures")) == {"longrope"}
    assert tuple(sc.default_list("contrastive")) == ("clip", "swin_v2", "am_softmax", "simcse", "simclr")
    with pytest.raises(ValueError, match="name"):
        sc.default_list("nowhere")


def test_each_drawn_scheme_has_its_own_look():
    looks = [(sc.SCHEMES[k].style.color, sc.SCHEMES[k].style.linestyle) for k in sc.default_list("entropy_figures")]
    assert len(set(looks)) == len(looks)
    colors = [sc.SCHEMES[k].style.color for k in sc.default_list("entropy_figures")]
    assert len(set(colors)) == len(colors)


def test_style_colours_fall_back_in_order():
    s = sc.Style("tab:pink")
    assert (s.decoder_color, s.train_color) == ("tab:pink", "tab:pink")
    s = sc.Style("tab:pink", decoder_color="C7")
    assert s.train_color == "C7"
    assert sc.SCHEMES[sc.SSMAX].style.train_color == "C8"
    assert sc.SCHEMES[sc.SSMAX].style.decoder_color == "C5"


def test_the_scales_a_training_figure_draws_together_have_colours_of_their_own():
    """The training figures draw trained scales beside test-time ones: each its scheme's ``train_color``, none shared.

    Every scheme a training run can name (:data:`TRAIN_NAMES`) and every scale applied at test only.
    """
    trained = {sc.train_scheme(name)[0].key for name in sc.TRAIN_NAMES}
    together = sorted(trained | {"chiang_cholak", sc.QWEN_LOGN, sc.YARN})
    colours = [sc.SCHEMES[k].style.train_color for k in together]
    assert len(set(colours)) == len(colours), dict(zip(together, colours))


def test_one_factor_rule_for_models_and_training():
    from softmax_scale.models.llama import scale_factors
    from softmax_scale.train import query_factors

    n = np.arange(1, 129, dtype=np.float64)
    for key in sc.QK_SCHEMES:
        want = sc.pinned(key, 64).factor(n, 32)
        np.testing.assert_array_equal(scale_factors(key, n, 32, 64), want)
        np.testing.assert_array_equal(query_factors(key, 128, 32, causal=True, pin_length=64), want)


def test_parameters_are_checked_when_pinned():
    with pytest.raises(ValueError, match="`s`"):
        sc.pinned(sc.SSMAX, s=-1.0)
    with pytest.raises(TypeError, match="factor"):
        sc.attention_scale(100, 64, "deepseek_yarn", factor=None)  # no dynamic form: a number is needed

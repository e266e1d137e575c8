"""What cannot be answered is refused, in words that name what the user wrote and the rule.

The API raises ``ValueError`` or ``TypeError`` naming the parameter (a config's key for a config);
the command line exits 2 with one line on stderr naming the option.  Where a right answer exists
(a head of constant rows), it is given.
"""

import json
import math
import shutil

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale.cli import main
from softmax_scale.engines import engine_scales, read_config
from softmax_scale.entropy import entropy_curve, signal_stats

BASE = {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 2}  # head dimension 128
LONGROPE = {"rope_scaling": {"type": "longrope", "long_factor": [1.0] * 64, "short_factor": [1.0] * 64}}


def cli(capsys, *argv):
    """Exit status, stdout and stderr of the command line (argparse's errors exit through SystemExit)."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv) -> str:
    """The one line a refused command prints: exit 2, nothing else on stderr, no traceback."""
    code, out, err = cli(capsys, *argv)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ---------------------------------------------------------------------------------------------
# the API refuses what it cannot answer


def test_cosine_gradient_optimal_refuses_a_dimension_below_2():
    """Cosine scores need d >= 2 (a direction in R^1 has cosine +-1): d = 1 is refused, not read as d = 2."""
    with pytest.raises(ValueError, match=r"`d` must be an integer >= 2"):
        ss.attention_scale(512, 1, "cosine_gradient_optimal")
    # the d = 2 answer stays the maximiser for cosine(2) scores
    assert ss.attention_scale(512, 2, "cosine_gradient_optimal") == ss.optimal_alpha(512, dist="cosine", d=2)


@pytest.mark.parametrize("form", ["power", "affine_log"])
def test_a_law_of_two_parameters_needs_two_distinct_n(form):
    with pytest.raises(ValueError, match=r"`ns` must have at least 2 distinct values") as exc:
        ss.fit_alpha_law([64, 64, 64], [2.0, 2.0, 2.0], form)
    assert "got 1" in str(exc.value)
    with pytest.raises(ValueError, match="distinct"):
        ss.compare_alpha_laws([64, 64, 64], [2.0, 2.0, 2.0])


def test_a_law_of_one_parameter_on_one_distinct_n_is_its_closed_form():
    fit = ss.fit_alpha_law([64, 64, 64], [2.0, 2.0, 2.0], "sqrt_log")
    assert fit.params["c"] == pytest.approx(2.0 / math.sqrt(math.log(64)), rel=1e-12)


def test_fit_on_one_distinct_n_is_refused_on_the_command_line(capsys):
    line = refused(capsys, "fit", "--ns", "64", "64", "64")
    assert "`ns`" in line and "distinct" in line


@pytest.mark.parametrize("fn", [
    lambda **kw: entropy_curve([64, 128], "standard", method="exact", **kw),
    lambda **kw: ss.entropy_curves([64, 128], ("standard",), method="exact", **kw),
    lambda **kw: signal_stats(1.0, 64, 1.0, method="exact", **kw),
    lambda **kw: ss.softmax_stats(1.0, 64, method="exact", **kw),
])
@pytest.mark.parametrize("kw, name", [({"trials": -5}, "trials"), ({"rng": "abc"}, "rng"), ({"trials": 100}, "trials"),
                                      ({"rng": 0}, "rng")])
def test_monte_carlo_options_are_refused_by_the_exact_method(fn, kw, name):
    with pytest.raises(ValueError, match=rf"`{name}`.*Monte Carlo"):
        fn(**kw)


@pytest.mark.parametrize("fn", [
    lambda **kw: entropy_curve([64], "standard", method="mc", **kw),
    lambda **kw: signal_stats(1.0, 64, 1.0, method="mc", **kw),
    lambda **kw: ss.softmax_stats(1.0, 64, method="mc", **kw),
])
def test_monte_carlo_options_are_checked_by_one_rule(fn):
    with pytest.raises(ValueError, match=r"`trials` must be an integer >= 2"):
        fn(trials=-5, rng=0)
    with pytest.raises(TypeError, match=r"`rng` must be None, a non-negative int"):
        fn(trials=10, rng="abc")
    with pytest.raises(ValueError, match=r"`rng` must be a non-negative integer seed"):
        fn(trials=10, rng=-1)


def test_monte_carlo_results_are_unchanged_by_the_check():
    """The seed reaches the draws as before: the same seed twice gives the same bits, a Generator advances once."""
    a = entropy_curve([64, 128], "standard", method="mc", trials=50, rng=3)
    b = entropy_curve([64, 128], "standard", method="mc", trials=50, rng=3)
    np.testing.assert_array_equal(a.entropy, b.entropy)
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    r1 = ss.softmax_stats(1.0, 64, method="mc", trials=20, rng=g1)
    ref = ss.softmax_stats(1.0, 64, method="mc", trials=20, rng=np.random.SeedSequence(
        g2.integers(0, 2**63, size=2, dtype=np.uint64).tolist()))
    assert r1.entropy == ref.entropy
    assert g1.integers(1 << 30) == g2.integers(1 << 30)


@pytest.mark.parametrize("kw, name", [({"error_estimate": "yes"}, "error_estimate"),
                                      ({"error_estimate": 1}, "error_estimate")])
def test_softmax_stats_refuses_a_flag_that_is_not_a_bool(kw, name):
    with pytest.raises(TypeError, match=rf"`{name}` must be True or False"):
        ss.softmax_stats(1.0, 64, **kw)


def test_monte_carlo_refuses_parallel_that_is_not_a_bool():
    with pytest.raises(TypeError, match=r"`parallel` must be True or False"):
        ss.softmax_stats(1.0, 64, method="mc", trials=10, rng=0, parallel="no")


@pytest.mark.parametrize("heads", ["abc", [1, 2], (1.0,)])
def test_advise_refuses_head_stats_that_are_not_head_stats(heads):
    with pytest.raises((TypeError, ValueError), match=r"`head_stats`"):
        ss.advise(128, 4096, 16384, head_stats=heads)


def test_advise_refuses_head_stats_measured_past_the_training_length():
    x = np.random.default_rng(0).standard_normal((1, 1, 16, 64))
    y = np.random.default_rng(1).standard_normal((1, 1, 16, 128))
    stats = [ss.head_stats(x, predict=False), ss.head_stats(y, predict=False)]
    with pytest.raises(ValueError, match=r"`head_stats` must be measured inside the training length 100"):
        ss.advise(128, 100, 1000, head_stats=stats)


def test_an_unknown_rope_type_is_an_unknown_key_said_first():
    cfg = {**BASE, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "foo", "factor": 2.0}}
    ms = read_config(cfg)
    assert ms.unknown_keys[0] == "rope_scaling.rope_type"
    text = engine_scales(cfg, [1, 8192]).to_text()
    assert "`rope_scaling.rope_type`" in text
    # a known type is not listed
    known = {**BASE, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    assert read_config(known).unknown_keys == ()


# ---------------------------------------------------------------------------------------------
# errors that name what the user wrote


@pytest.mark.parametrize("cfg", [{**BASE, **LONGROPE},
                                 {**BASE, "original_max_position_embeddings": 4096, **LONGROPE}])
def test_longrope_without_its_lengths_names_the_keys(cfg):
    with pytest.raises(ValueError, match=r"`config`: <dict>: `max_position_embeddings`.*longrope"):
        engine_scales(cfg, [1, 8192])


def test_longrope_without_its_lengths_is_one_line_on_the_command_line(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **LONGROPE}))
    line = refused(capsys, "engines", str(path))
    assert "max_position_embeddings" in line and "NoneType" not in line


@pytest.mark.parametrize("cfg, key", [
    ({**BASE, "max_position_embeddings": 131072, "original_max_position_embeddings": 1, **LONGROPE},
     "original_max_position_embeddings"),
    ({**BASE, "max_position_embeddings": 131072,
      "rope_scaling": {**LONGROPE["rope_scaling"], "original_max_position_embeddings": 1}},
     "rope_scaling.original_max_position_embeddings"),
    ({**BASE, "max_position_embeddings": 4096, "use_logn_attn": True, "seq_length": 1}, "seq_length"),
    ({**BASE, "max_position_embeddings": 1}, "max_position_embeddings"),
])
def test_a_length_of_1_in_a_config_names_its_key(cfg, key):
    with pytest.raises(ValueError, match=rf"`config`: <dict>: `{key}` must be an integer >= 2") as exc:
        engine_scales(cfg, [1, 8192])
    assert "pin_length" not in str(exc.value) and "train_length" not in str(exc.value)


def test_a_gguf_file_is_refused_in_its_own_spelling(tmp_path):
    """GGUF keys as llama.cpp spells them: a length of 1, and a scaling type nothing reads (an unknown key, first)."""
    from engines.test_reader import write_gguf

    def orig_1(w, gguf):
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(1)

    with pytest.raises(ValueError, match=r"`llama.rope.scaling.original_context_length` must be an integer >= 2"):
        read_config(write_gguf(tmp_path / "a.gguf", "llama", orig_1))

    def foo(w, gguf):
        w.add_string("llama.rope.scaling.type", "foo")
        w.add_rope_scaling_factor(2.0)
        w.add_float32("llama.rope.scaling.mystery", 3.0)

    ms = read_config(write_gguf(tmp_path / "b.gguf", "llama", foo))
    assert ms.unknown_keys == ("llama.rope.scaling.type", "llama.rope.scaling.mystery")


def test_an_entropy_scale_out_of_range_names_the_scheme_parameter():
    with pytest.raises(ValueError, match=r"`s` = 1e\+308") as exc:
        entropy_curve([512, 1024], "ssmax", s=1e308)
    assert "`alpha`" not in str(exc.value)


def test_a_head_of_constant_rows_of_1e308_is_a_uniform_softmax():
    """Finite constant rows: sigma 0 and H = log n, whatever the constant (closed form of a uniform softmax)."""
    for c in (1e308, 5.0, -3.0):
        r = ss.head_stats(np.full((1, 4, 8), c))
        assert r.sigma[0] == 0.0
        assert r.entropy[0] == pytest.approx(math.log(8), rel=1e-15)


def test_a_row_of_huge_spread_keeps_its_standard_deviation():
    """Rows of +-a have sigma a exactly (closed form), also where a^2 overflows float64."""
    for a in (1e300, 3.0):
        row = np.array([a, -a] * 4)
        r = ss.head_stats(row[None, None, None, :], predict=False, mask_fill="keep")
        assert r.sigma[0] == a


def test_a_ragged_list_of_scores_names_the_parameter_and_the_rule():
    with pytest.raises(ValueError, match=r"`logits` must have rows of the same length"):
        ss.head_stats([[1.0, 2.0, 3.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match=r"`probs` must have rows of the same length"):
        ss.head_stats(probs=[[[0.5, 0.5], [1.0]]])


def test_advise_names_match():
    with pytest.raises((TypeError, ValueError), match=r"`match` must be a cosine"):
        ss.advise(128, 4096, 16384, match="x")
    with pytest.raises(ValueError, match=r"`match` must be a cosine"):
        ss.advise(128, 4096, 16384, match=2.0)


def _damaged_results(tmp_path):
    """A results folder holding one committed result file with its rows cut to their first 3 columns (the column row kept)."""
    from softmax_scale.advice import RESULTS
    from softmax_scale.experiments import EXPERIMENTS

    folder = tmp_path / "results"
    folder.mkdir()
    exp = EXPERIMENTS["real_copy"]
    path = exp.result_path(exp.config(), folder)
    shutil.copy(exp.result_path(exp.config(), RESULTS), path)
    lines = path.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    body = [",".join(line.rstrip("\n").split(",")[:3]) + "\n" for line in lines[first + 1:]]
    path.write_text("".join(lines[: first + 1] + body))
    return folder, path, first + 2  # the first damaged row's line number (1-based)


def test_a_damaged_result_file_names_the_file_and_the_row(tmp_path):
    folder, path, line = _damaged_results(tmp_path)
    with pytest.raises(ValueError) as exc:
        ss.advise(64, 8192, 16384, results=folder)
    msg = str(exc.value)
    assert str(path) in msg
    assert f"line {line}" in msg


def test_a_damaged_result_file_is_one_line_on_the_command_line(capsys, tmp_path):
    folder, path, line = _damaged_results(tmp_path)
    msg = refused(capsys, "advise", "--d", "64", "--train-length", "8192", "--n", "16384", "--results", str(folder))
    assert str(path) in msg and f"line {line}" in msg


def test_a_torn_last_line_is_still_left_out(tmp_path):
    from softmax_scale._util.store import read_table

    p = tmp_path / "r.csv"
    p.write_text("# k: v\na,b\n1,2\n3,4\n5")
    t = read_table(p, ("a", "b"))
    assert t.rows["a"].tolist() == [1.0, 3.0]
    p.write_text("# k: v\na,b\n1,2\n3\n5,6\n")
    with pytest.raises(ValueError, match=r"line 4 has 1 cell"):
        read_table(p, ("a", "b"))
    p.write_text("# k: v\na,b\n1,2\n3,x\n")
    with pytest.raises(ValueError, match=r"line 4.*`b`.*'x'"):
        read_table(p, ("a", "b"), ints=("b",))


# ---------------------------------------------------------------------------------------------
# the command line: one line for every argparse error, the option as typed


ARGPARSE_CASES = [
    (("--frobnicate",), "--frobnicate"),                       # unknown option, no command
    (("frob",), "frob"),                                       # unknown command
    (("alpha",), "n"),                                         # missing argument
    (("alpha", "ten"), "ten"),                                 # bad type
    (("alpha", "512", "--frobnicate"), "--frobnicate"),        # unknown option after a command
    (("alpha", "512", "--dist", "laplace"), "laplace"),        # bad choice
    (("stats", "1", "100", "--method", "quad"), "quad"),       # bad choice
    (("fit", "--ns"), "--ns"),                                 # an option without its value
    (("table", "--d", "x"), "x"),                              # bad type of an int option
    (("measure", "model.gguf"), "--n"),                        # a required option missing
    ((), "COMMAND"),                                           # no command at all
]


@pytest.mark.parametrize("argv, says", ARGPARSE_CASES)
def test_every_argparse_error_is_one_line(capsys, argv, says):
    line = refused(capsys, *argv)
    assert line.startswith("softmax-scale")
    assert "error:" in line
    assert says in line
    assert "--help" in line


def test_an_unknown_option_is_named_before_a_missing_command(capsys):
    line = refused(capsys, "--frobnicate")
    assert "required" not in line


def test_an_unknown_option_after_a_command_names_the_command(capsys):
    assert refused(capsys, "alpha", "512", "--frobnicate").startswith("softmax-scale alpha: error:")


def test_help_and_version_still_exit_0(capsys):
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and "softmax-scale" in out
    code, out, _ = cli(capsys, "alpha", "--help")
    assert code == 0 and "usage" in out


@pytest.mark.parametrize("cmd", [("scale", "512", "64", "--scheme", "entropy_invariant"), ("entropy", "--ns", "512")])
@pytest.mark.parametrize("value", ["-1", "1"])
def test_train_length_is_named_as_the_option(capsys, cmd, value):
    line = refused(capsys, *cmd, "--train-length", value)
    assert "`--train-length`" in line
    assert "pin_length" not in line


def test_an_unknown_param_is_named_before_its_value_is_read(capsys):
    line = refused(capsys, "scale", "512", "64", "--param", "foo=bar")
    assert "no parameter" in line and "foo" in line
    assert "must be a number" not in line
    line = refused(capsys, "entropy", "--ns", "512", "--schemes", "ssmax", "--param", "ssmax.foo=bar")
    assert "no parameter" in line and "foo" in line
    assert "must be a number" not in line
    # a known parameter with a bad value still says what the value must be
    assert "must be a number" in refused(capsys, "scale", "512", "64", "--scheme", "ssmax", "--param", "s=bar")

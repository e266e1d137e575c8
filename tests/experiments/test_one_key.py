"""The one-key experiments (copy, passkey, size): the quick forms end to end, a rerun that trains nothing, the probe.

- each quick form from the command line (under ``-m slow``): its file, every row kind, shares in [0, 1],
  evidence; passkey tests the models copy trained, as the full sweeps do;
- a rerun trains and evaluates nothing (the trainer and the evaluator are replaced by ones that fail);
- the retrieving-head probe on a tiny model against a naive numpy softmax of the same scores;
- the share-holding rule's factors hold the predicted share (through the experiment's own call);
- bad configurations are one clear error.
"""

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from softmax_scale import cli  # noqa: E402
from softmax_scale.experiments import EXPERIMENTS  # noqa: E402
from softmax_scale.experiments import _one_key as ok  # noqa: E402
from softmax_scale.experiments.copy import CopyConfig  # noqa: E402
from softmax_scale.experiments.passkey import PasskeyConfig  # noqa: E402
from softmax_scale.heads import SHARE_RULE, share_factors  # noqa: E402
from softmax_scale.train import TrainConfig  # noqa: E402
from softmax_scale.train.data import heldout_bytes  # noqa: E402
from softmax_scale.train.evaluation import batch_scores  # noqa: E402
from softmax_scale.train.model import init_params  # noqa: E402
from softmax_scale.train.tasks import copy_batch  # noqa: E402


@pytest.fixture(scope="module")
def shared_out(tmp_path_factory):
    """The folder of the copy and passkey quick forms: passkey tests the models copy trained, as the sweeps do."""
    return tmp_path_factory.mktemp("one_key")


@pytest.fixture(scope="module", params=[pytest.param(n, marks=pytest.mark.slow) for n in ("copy", "passkey", "size")])
def quick_run(request, shared_out, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) if request.param == "size" else shared_out
    status = cli.main(["run", request.param, "--quick", "--workers", "1", "--out", str(out), "--no-progress"])
    assert status == 0
    exp = EXPERIMENTS[request.param]
    path = exp.result_path(exp.config(True), out)
    return request.param, exp, out, path


def test_the_quick_form_writes_every_row_kind(quick_run):
    name, exp, out, path = quick_run
    table = exp.read(path)
    r = table.rows
    kinds = set(r["kind"])
    test_kinds = {"copy": {"copy", "control", "window", "factor"}, "passkey": {"passkey", "factor"},
                  "size": {"copy", "control", "window"}}[name]
    assert {"run", "curve", "head_L", "share"} | test_kinds <= kinds
    assert np.all(r["status"] == "ok")
    share = r["share"][np.isin(r["kind"], ("share", "head_L"))]
    assert np.all((share >= 0) & (share <= 1))
    predicted = r["share_predicted"][r["kind"] == "share"]
    assert np.all(np.isfinite(predicted))
    tasks = exp.tasks(exp.config(True), out=out)
    assert r["scheme"].size == sum(exp.expected_rows(t) for t in tasks)
    assert exp.evidence(table)
    assert all(exp.summaries(table))
    assert (out / f"{path.stem}_one_key_{name}.png").exists() or list(out.glob(f"{path.stem}*.png"))
    assert "compute_dtype float32" in table.header["compute"]


def test_a_rerun_trains_and_evaluates_nothing(quick_run, monkeypatch):
    from softmax_scale.experiments import run_experiment
    from softmax_scale.train import evaluation, loop

    name, exp, out, path = quick_run
    before = path.read_bytes()

    def refuse(*args, **kwargs):
        raise AssertionError("a complete result file must not train or evaluate again")

    monkeypatch.setattr(loop, "train_model", refuse)
    monkeypatch.setattr(evaluation, "evaluate_batch", refuse)
    run_experiment(name, quick=True, out=out, workers=0, progress=False)
    assert path.read_bytes() == before


def test_the_probe_matches_a_naive_softmax_on_a_tiny_model():
    cfg = TrainConfig(objective="causal", train_length=16, layers=2, d_model=16, heads=2, d_ff=24, batch=4, steps=2,
                      warmup=0)
    params = init_params(cfg, 3)
    for layer in params["layers"]:  # larger scores, so the shares are not all 1/n
        layer["wq"] = layer["wq"] * 4
    probe = copy_batch(heldout_bytes(), 16, 6, 3, np.random.default_rng(0))
    got = ok.probe_model(params, cfg, probe, toolkit=False, longest=32)
    s = batch_scores(params, cfg, probe.batch.inputs, rope="none").astype(np.float64)  # [layers, B, H, T, T]
    for la in range(2):
        for he in range(2):
            shares = []
            for b in range(3):
                for t in range(16):
                    j = probe.source[b, t]
                    if j < 0:
                        continue
                    row = s[la, b, he, t, : t + 1]
                    p = np.exp(row - row.max())
                    shares.append(p[j] / p.sum())
            assert got.shares.share[la, he] == pytest.approx(np.mean(shares), rel=1e-9)
    best = np.unravel_index(np.nanargmax(got.shares.share), (2, 2))
    assert (got.layer, got.head) == tuple(int(i) for i in best)


def test_the_share_rule_holds_the_share_at_L():
    from softmax_scale import signal_stats as stats
    from softmax_scale.distributions import WeightedSample

    pool = WeightedSample.from_pool(np.random.default_rng(1).standard_normal(5000), 1000)
    gap = 4.5  # above every point of the pool: the share can always be restored
    f = share_factors(1.2, pool, gap, 128, [256, 1024])
    target = stats(1.2, 128, gap, dist=pool).share
    for fj, n in zip(f, (256, 1024)):
        assert stats(1.2 * fj, n, gap, dist=pool).share == pytest.approx(target, abs=1e-9)
    assert SHARE_RULE in ok.RULES


@pytest.mark.parametrize("make, name", [
    (lambda: CopyConfig(multiples=(0.001,)), "multiples"),
    (lambda: PasskeyConfig(multiples=(0,)), "multiples"),
    (lambda: PasskeyConfig(depths=(1.5,)), "depths"),
    (lambda: PasskeyConfig(ropes=("bad",)), "ropes"),
    (lambda: CopyConfig(count=0), "count"),
    (lambda: CopyConfig(model=TrainConfig()), "model"),
])
def test_bad_configurations_are_one_clear_error(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_bad_cli_input_exits_2(capsys):
    assert cli.main(["run", "copy", "--seeds", "0", "--quick", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1


@pytest.mark.slow
@pytest.mark.parametrize("quick_run", ["copy"], indirect=True)
def test_copy_differences_pair_the_rows_by_seed(quick_run):
    """Against the rows themselves: one scale's per-seed accuracy minus standard's, and the copy minus its control."""
    from softmax_scale.experiments.copy import copy_differences, copy_differences_markdown

    name, exp, out, path = quick_run
    r = exp.read(path).rows
    d = copy_differences(exp.read(path), "accuracy")
    m = int(d["distances"][0])

    def acc(kind, scheme, rope, scale):
        sel = (r["kind"] == kind) & (r["scheme"] == scheme) & (r["rope"] == rope) & (r["scale"] == scale) \
            & (r["distance"] == m)
        return dict(zip(r["seed"][sel].tolist(), r["accuracy"][sel].tolist()))

    key = next(k for k in d["scales"] if k[0] == "standard" and k[2] != "trained")
    a, b = acc("copy", *key), acc("copy", "standard", key[1], "trained")
    naive = np.array([a[sd] - b[sd] for sd in sorted(a)])
    mean, std, above, seeds = d["scales"][key][0]
    assert mean == pytest.approx(naive.mean(), abs=1e-12)
    assert std == pytest.approx(naive.std(ddof=1), abs=1e-12)
    assert (above, seeds) == (int((naive > 0).sum()), naive.size)
    x, y = acc("copy", "ssmax", "none", "trained"), acc("control", "ssmax", "none", "trained")
    c = np.array([x[sd] - y[sd] for sd in sorted(x)])
    assert d["copying"][("ssmax", "none", "trained")][0][0] == pytest.approx(c.mean(), abs=1e-12)
    assert f"{100 * naive.mean():+.1f}" in copy_differences_markdown(exp.read(path))


@pytest.mark.slow
@pytest.mark.parametrize("quick_run", ["copy"], indirect=True)
def test_copy_differences_against_another_reference(quick_run):
    """Against standard + a test-time scale: the trained-in rows minus those rows, seed by seed; an unknown reference is refused."""
    from softmax_scale.experiments.copy import copy_differences

    name, exp, out, path = quick_run
    table = exp.read(path)
    r = table.rows
    ref = next(s for s in set(r["scale"][(r["kind"] == "copy") & (r["scheme"] == "standard")]) if s.startswith("qwen_logn"))
    d = copy_differences(table, "accuracy", reference=ref)
    m = int(d["distances"][0])

    def acc(scheme, scale):
        sel = (r["kind"] == "copy") & (r["scheme"] == scheme) & (r["rope"] == "none") & (r["scale"] == scale) \
            & (r["distance"] == m)
        return dict(zip(r["seed"][sel].tolist(), r["accuracy"][sel].tolist()))

    a, b = acc("ssmax", "trained"), acc("standard", ref)
    naive = np.array([a[sd] - b[sd] for sd in sorted(a)])
    assert d["scales"][("ssmax", "none", "trained")][0][0] == pytest.approx(naive.mean(), abs=1e-12)
    assert ("standard", "none", ref) not in d["scales"]
    with pytest.raises(ValueError, match="`reference`"):
        copy_differences(table, "accuracy", reference="no_such_scale")


# ---------------------------------------------------------------------------------------------
# the resume check: every setting that changes a row, and the committed files under their configuration


def _changed(exp, cfg, field):
    """``cfg`` with ``field`` set to another valid value (the full form's, or one made for the purpose)."""
    import dataclasses

    other = getattr(exp.full_config, field)
    if other == getattr(cfg, field):
        value = getattr(cfg, field)
        if field in ("test_scales", "rules") and not value:
            other = ("qwen_logn",) if field == "test_scales" else (SHARE_RULE,)
        else:
            other = value + 1 if isinstance(value, int) else (value[:-1] if len(value) > 1 else value + (value[0],))
    return dataclasses.replace(cfg, **{field: other})


@pytest.mark.parametrize("name", ["copy", "passkey", "size"])
def test_every_setting_that_changes_a_row_refuses_the_resume(name, tmp_path):
    import dataclasses

    from softmax_scale._util.store import ResultStore

    exp = EXPERIMENTS[name]
    cfg = exp.quick_config

    def store(c):
        return ResultStore(tmp_path / "r.csv", exp.header(c, exp.tasks(c), "test"), exp.columns, key=exp.key,
                           match=exp.match)

    store(cfg).append([exp.row(exp.tasks(cfg)[0], "ok", "curve", value=0)])
    fields = [f.name for f in dataclasses.fields(cfg) if f.name not in exp.not_row_settings]
    assert {"probe_windows", "share_windows", "entropy_windows", "curve_every", "ropes", "test_scales", "rules",
            "count"} <= set(fields)
    for field in fields:
        with pytest.raises(ValueError, match=r"`out`: .* was written with (settings|tests|config) = "):
            store(_changed(exp, cfg, field))
    store(dataclasses.replace(cfg, seeds=cfg.seeds + 1))  # more seeds extend the file


@pytest.mark.parametrize("name", ["copy", "passkey", "size", "first"])
def test_the_committed_results_are_resumed_by_the_committed_configuration(name, tmp_path):
    """The figures' one-key files match their configuration and hold every task: a rerun runs nothing."""
    import dataclasses
    import pathlib
    import shutil

    from softmax_scale._util.store import ResultStore

    exp = EXPERIMENTS[name]
    cfg = exp.config(False)
    if name != "first":  # the one-key sweeps ran with --seeds 3
        cfg = dataclasses.replace(cfg, seeds=3)
    src = pathlib.Path(__file__).parents[2] / "figures" / f"one_key_{name}.csv"
    path = tmp_path / src.name
    shutil.copy(src, path)
    tasks = exp.tasks(cfg)
    s = ResultStore(path, exp.header(cfg, tasks, "test"), exp.columns, key=exp.key, match=exp.match)
    assert all(exp.is_done(s, t) for t in tasks)
    assert path.read_bytes() == src.read_bytes()

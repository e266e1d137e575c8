"""The real-decoder one-key experiments (real_passkey, real_copy): prompts in tokens, bad input, the quick CLI runs."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from softmax_scale import models
from softmax_scale.experiments import EXPERIMENTS, real_copy, real_passkey
from softmax_scale.experiments import _real_one_key as rk


@pytest.fixture(scope="module")
def smol():
    return models.load("smollm2")


@pytest.mark.parametrize("key, depth", [("00000", 0.0), ("07342", 0.1), ("99999", 0.9), ("12121", 1.0)])
def test_passkey_digits_are_tokenised_where_the_scorer_expects(smol, key, depth):
    """The five digits end the prompt, one token each, and the sources point at the same digits in the key's line."""
    n = 600
    seq = real_passkey.passkey_sequence(smol, n, depth, key)
    assert seq.ids.size == n and seq.all_of
    targets = seq.ids[seq.scored + 1]
    assert seq.scored[-1] == n - 2 and seq.scored.size == 5
    assert [smol.detokenize([t]) for t in targets] == list(key)
    assert np.array_equal(seq.ids[seq.source], targets)  # the key's first occurrence
    assert np.all(seq.source < seq.scored)
    text = smol.detokenize(seq.ids)
    assert text.endswith("What is the pass key? The pass key is " + key)
    assert text.count(key) == 3  # twice in the line, once as the answer
    assert smol.detokenize(seq.ids[seq.source[0] - 5:seq.source[0]]) == "The pass key is "
    # the line sits at the depth asked for, as a fraction of the filler
    line = "The pass key is " + key
    at = text.index(line)
    if depth == 0.0:
        assert at == 0
    assert not any(ch.isdigit() for ch in text[:at])


def test_passkey_keys_are_fixed_per_index_and_differ_for_selection():
    assert real_passkey._key(0, False) == real_passkey._key(0, False)
    keys = {real_passkey._key(k, s) for k in range(4) for s in (False, True)}
    assert len(keys) == 8 and all(len(k) == 5 and k.isdigit() for k in keys)


def test_copy_sequence_sources_repeat_the_targets():
    tokens = np.random.default_rng(0).integers(5, 900, size=300)
    seq = real_copy.copy_sequence(tokens, 100)
    assert seq.ids.size == 200 and np.array_equal(seq.ids[:100], seq.ids[100:])
    assert seq.scored[0] == 100 and seq.scored[-1] == 198  # targets X[1..99] of the second copy
    assert np.array_equal(seq.ids[seq.source], seq.ids[seq.probe + 1])
    assert np.all(seq.ids[seq.source] == tokens[seq.probe + 1 - 100])
    ctl = real_copy.copy_sequence(tokens, 100, copied=False)
    assert np.array_equal(ctl.ids[ctl.scored + 1], seq.ids[seq.scored + 1])  # the same scored tokens
    assert np.all(ctl.source == -1)
    with pytest.raises(ValueError, match="`m`"):
        real_copy.copy_sequence(tokens, 400)


def test_memory_estimate_grows_with_length(smol):
    a, b = (rk.memory_needed(smol.config, n, 256) for n in (16384, 32768))
    assert 1 << 30 < a < b < 3 * a  # gigabytes at 16k, about linear in n
    assert b < 16 << 30


@pytest.mark.parametrize("name, change, match", [
    ("real_passkey", {"past": ((30, 1),)}, "`past` must be an integer >= 257"),
    ("real_passkey", {"past": ((300, 1),), "inside": ((20, 1), (256, 1))}, "`inside`: 20 tokens is below the prompt's minimum"),
    ("real_passkey", {"past": ((10**9, 1),)}, "GiB"),
    ("real_passkey", {"cells": (("warp", "standard"),)}, "`ropes`"),
    ("real_passkey", {"cells": (("rerope", "standard"),)}, "`ropes`"),
    ("real_passkey", {"cells": (("yarn", "qwen_log"),)}, "qwen_log"),
    ("real_passkey", {"depths": (1.5,)}, "`depths`"),
    ("real_passkey", {"reference_keys": 3}, "`reference_keys`"),
    ("real_copy", {"past": (100,)}, "`past`"),
    ("real_copy", {"inside": (64,)}, "L / 2"),
    ("real_copy", {"cells": (("yarn", "nope"),)}, "nope"),
    ("real_copy", {"past": (10**6,)}, "fewer than m"),
])
def test_bad_input_is_one_clear_error_before_any_pass(smol, monkeypatch, name, change, match):
    exp = EXPERIMENTS[name]
    cfg = dataclasses.replace(exp.config(quick=True), model=smol, **change)

    def no_pass(*a, **k):
        raise AssertionError("a pass ran before the input was checked")

    monkeypatch.setattr(smol, "_forward", no_pass)
    with pytest.raises(ValueError, match=match.replace("(", r"\(").replace("+", r"\+")):
        exp.tasks(cfg)


def test_cells_run_2L_rope_by_rope_and_group_each_prefix(smol):
    cfg = dataclasses.replace(real_passkey.RealPasskeyConfig(), model=smol)
    cells = EXPERIMENTS["real_passkey"].cells(cfg, smol, 8192)
    assert cells[0][0] == "heads"
    assert cells[1][1:] == (16384, "d0.1-k0", "yarn", "standard")
    # RoPE by RoPE: at each length past L every yarn cell of every prompt before the first ntk cell
    yarn_scales = [s for r, s in real_passkey.CELLS if r == "yarn"]
    for n, prompts in ((16384, 12), (32768, 6)):
        at = [c[2:] for c in cells if c[1] == n]
        assert [r for _, r, _ in at] == sorted((r for _, r, _ in at), key=[r for r, _ in real_passkey.CELLS].index)
        assert [s for _, r, s in at[:prompts * len(yarn_scales)]] == yarn_scales * prompts
    past = [c for c in cells if c[1] == 16384]
    assert {c[2] for c in past} == {f"d{d:g}-k{k}" for d in (0.1, 0.5, 0.9) for k in range(4)}
    assert len(past) == 12 * len(real_passkey.CELLS)
    # every (prompt, RoPE) is one run of consecutive cells: its prefix pass is computed once
    runs = [(c[1], c[2], c[3]) for c in cells[1:]]
    starts = [r for i, r in enumerate(runs) if i == 0 or runs[i - 1] != r]
    assert len(starts) == len(set(starts))
    assert {c[1] for c in cells} == {4096, 8192, 16384, 32768}
    assert len([c for c in cells if c[1] == 32768 and c[3] == "yarn"]) == 6 * len(yarn_scales)
    assert all((c[3], c[4]) == ("none", "standard") for c in cells[1:] if c[1] <= 8192)


def _run_cli(name, out, capsys):
    from softmax_scale import cli

    assert cli.main(["run", name, "--quick", "--out", str(out), "--no-progress"]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["real_passkey", "real_copy"])
def test_quick_cli_runs_and_a_rerun_computes_nothing(tmp_path, capsys, monkeypatch, name):
    text = _run_cli(name, tmp_path, capsys)
    csv = tmp_path / f"{name}_quick.csv"
    assert csv.exists() and (tmp_path / f"{name}_quick.png").exists()
    kept = tmp_path / f".{name}_quick-reference.npz"
    assert kept.exists() and kept.stat().st_size < 1 << 20  # the retrieving heads' reference only
    ref = rk._load_reference(kept, str(np.load(kept)["tag"]))
    assert ref["measured"] == ref["heads"] and len(ref["heads"]) == rk.HEADS
    assert "measured / predicted" in text
    exp = EXPERIMENTS[name]
    t = exp.read(csv)
    r = t.rows
    sc = r["kind"] == "score"
    assert np.all((r["accuracy"][sc] >= 0) & (r["accuracy"][sc] <= 1)) and np.isfinite(r["loss"][sc]).all()
    sh = (r["kind"] == "share") & (r["task"] != "control")
    assert np.isfinite(r["share"][sh]).all() and np.isfinite(r["share_predicted"][sh]).all()
    assert np.all((r["share"][sh] > 0) & (r["share"][sh] < 1))
    heads = r["kind"] == "head_L"
    assert heads.sum() == 30 * 9 and (r["note"][heads] == "retrieving").sum() == rk.HEADS
    # the retrieving heads are the largest shares on the selection sequences
    top = np.sort(r["share"][heads])[-rk.HEADS:]
    assert np.allclose(np.sort(r["share"][heads & (r["note"] == "retrieving")]), top)
    # the share maximiser's predicted share is at least the trained scale's, head by head and sequence by sequence
    mx, st = sh & (r["scale"] == rk.SHARE_MAX), sh & (r["scale"] == "standard") & (r["rope"] == "yarn")
    assert mx.sum() == st.sum() == rk.HEADS
    assert np.all(r["share_predicted"][mx] >= r["share_predicted"][st] - 1e-6)
    ev = exp.evidence(t)
    assert ev and all(e.model == "SmolLM2-135M" and e.size == 135_000_000 and e.multiple == 2.0 for e in ev)
    assert all((e.head_dim, e.train_length, e.length_unit) == (64, 256, "tokens") for e in ev)
    before = csv.read_bytes()
    mtime = os.path.getmtime(csv)

    def no_pass(*a, **k):
        raise AssertionError("a rerun computed a cell")

    monkeypatch.setattr(models.llama.LlamaDecoder, "_forward", no_pass)
    _run_cli(name, tmp_path, capsys)
    assert csv.read_bytes() == before and os.path.getmtime(csv) == mtime


def _table(rows):
    from softmax_scale._util.store import Table

    text = set(rk.TEXT)
    data = {c: np.array([r.get(c, "" if c in text else np.nan) for r in rows], dtype=object if c in text else float)
            for c in rk.COLUMNS}
    for c in rk.INTS:
        data[c] = np.nan_to_num(data[c], nan=-1).astype(np.int64)
    return Table({"train_length": "8192", "head_dim": "64"}, data, "x.csv")


def test_summary_lists_lengths_in_order_and_keeps_the_cells_order_within_one():
    cells = [(16384, "yarn", "standard"), (16384, "none", "standard"), (4096, "none", "standard"),
             (32768, "yarn", "standard"), (32768, "yarn", "qwen_logn")]
    rows = []
    for n, rope, scale in cells:
        rows.append({"task": "passkey", "length": n, "prompt": "d0.1-k0", "rope": rope, "scale": scale,
                     "kind": "score", "accuracy": 1, "loss": 0.5})
        rows.append({"task": "passkey", "length": n, "prompt": "d0.1-k0", "rope": rope, "scale": scale,
                     "kind": "share", "layer": 1, "head": 2, "share": 0.3, "share_predicted": 0.2})
    for md in EXPERIMENTS["real_passkey"].summaries(_table(rows)):
        listed = [tuple(c.strip() for c in line.split("|")[2:5]) for line in md.splitlines() if line.startswith("| passkey")]
        assert listed == [(str(n), r, s) for n, r, s in sorted(cells, key=lambda c: c[0])]


def test_evidence_pairs_scales_by_sequence():
    """Differences from standard under the same RoPE and under the trained one, paired by prompt, past L only."""
    from softmax_scale._util.store import Table

    rows = []
    acc = {("yarn", "standard"): [1, 0, 1], ("yarn", "qwen_logn"): [1, 1, 1], ("none", "standard"): [0, 0, 0]}
    loss = {("yarn", "standard"): [0.5, 2.0, 0.7], ("yarn", "qwen_logn"): [0.4, 1.0, 0.9], ("none", "standard"): [3, 3, 3]}
    for (rope, scale), a in acc.items():
        for i, p in enumerate(["d0.1-k0", "d0.5-k0", "d0.9-k0"]):
            rows.append({"task": "passkey", "length": 16384, "prompt": p, "rope": rope, "scale": scale, "kind": "score",
                         "accuracy": a[i], "loss": loss[(rope, scale)][i]})
    rows.append({"task": "passkey", "length": 8192, "prompt": "d0.1-k0", "rope": "none", "scale": "standard",
                 "kind": "score", "accuracy": 1, "loss": 0.1})
    t = _table(rows)
    data = {c: t.rows[c] for c in rk.COLUMNS}
    ev = {(e.rope, e.scale, e.reference, e.metric): e for e in EXPERIMENTS["real_passkey"].evidence(t)}
    assert all(e.multiple == 2.0 and e.seeds == (0, 1, 2) and e.task == "passkey retrieval" for e in ev.values())
    # the scope advise prints: the model's head dimension, L in tokens, the paired sequences are prompts
    assert {(e.head_dim, e.train_length, e.length_unit, e.replicates) for e in ev.values()} == {(64, 8192, "tokens",
                                                                                                 "prompts")}
    assert {e.replicates for e in EXPERIMENTS["real_copy"].evidence(t)} == {"documents"}
    assert {e.head_dim for e in EXPERIMENTS["real_passkey"].evidence(Table({"train_length": "8192"}, data, "x"))} == {0}
    e = ev[("yarn", "standard + qwen_logn at test", "standard", "loss")]
    d = np.array([0.4 - 0.5, 1.0 - 2.0, 0.9 - 0.7])
    assert e.difference == pytest.approx(d.mean()) and e.spread == pytest.approx(d.std(ddof=1))
    assert ev[("yarn", "standard + qwen_logn at test", "standard", "accuracy")].difference == pytest.approx(1 / 3)
    assert ev[("yarn", "standard", "standard, RoPE none", "accuracy")].difference == pytest.approx(2 / 3)
    assert ("none", "standard", "standard", "loss") not in ev  # no scale against itself
    assert len(ev) == 2 * 3  # (qwen_logn vs standard, vs RoPE none; standard vs RoPE none) x 2 metrics


def test_backend_is_part_of_the_resume_check(smol, monkeypatch):
    """The backend is in the matched ``scoring`` line: a jax file never resumes with numpy rows, nor the reverse;
    the numpy line is the one the files written before the option have."""
    exp = EXPERIMENTS["real_passkey"]
    assert "scoring" in exp.match
    assert rk.scoring_line("numpy") == ("teacher-forced greedy choice (argmax) and loss at each scored token; "
                                        "float32 activations, float64 shares")
    assert "JAX" in rk.scoring_line("jax")
    monkeypatch.setattr(smol, "_forward", lambda *a, **k: pytest.fail("a pass ran"))
    lines = {}
    for backend in ("numpy", "jax"):
        cfg = dataclasses.replace(exp.config(quick=True), model=smol, backend=backend)
        tasks = exp.tasks(cfg)
        assert {t.run.backend for t in tasks} == {backend}
        lines[backend] = exp.header(cfg, tasks, "x")["scoring"]
    assert lines == {b: rk.scoring_line(b) for b in lines}
    with pytest.raises(ValueError, match="`backend` must be one of"):
        exp.tasks(dataclasses.replace(exp.config(quick=True), model=smol, backend="torch"))


def test_backend_option_names_the_experiments_that_take_it(capsys):
    from softmax_scale import cli

    assert cli.main(["run", "alpha", "--quick", "--backend", "jax"]) == 2
    assert "`--backend` is an option of real_passkey, real_copy, not of alpha" in capsys.readouterr().err
    assert cli.main(["run", "real_copy", "--quick", "--backend", "torch"]) == 2
    assert "`backend` must be one of ['jax', 'numpy'], got 'torch'" in capsys.readouterr().err


@pytest.mark.slow
def test_quick_cli_runs_with_the_jax_backend(tmp_path, capsys):
    """The quick form under ``--backend jax`` writes the numpy form's cells; its reference and rows agree to float32."""
    from softmax_scale import cli

    exp = EXPERIMENTS["real_passkey"]
    runs = {}
    for backend in ("numpy", "jax"):
        out = tmp_path / backend
        assert cli.main(["run", "real_passkey", "--quick", "--out", str(out), "--no-progress", "--no-figure",
                         "--backend", backend]) == 0
        capsys.readouterr()
        runs[backend] = exp.read(out / "real_passkey_quick.csv")
    a, b = runs["numpy"], runs["jax"]
    assert "JAX" in b.header["scoring"] and "JAX" not in a.header["scoring"]
    for col in ("task", "length", "prompt", "rope", "scale", "kind", "layer", "head"):
        assert np.array_equal(a.rows[col], b.rows[col])
    sc = a.rows["kind"] == "score"
    np.testing.assert_allclose(b.rows["loss"][sc], a.rows["loss"][sc], rtol=1e-4, atol=1e-4)
    assert np.array_equal(b.rows["accuracy"][sc], a.rows["accuracy"][sc])
    sh = np.isin(a.rows["kind"], ["share", "head_L", "reference"])
    np.testing.assert_allclose(b.rows["share"][sh], a.rows["share"][sh], rtol=1e-3, atol=1e-6)


def test_reference_file_keeps_the_retrieving_heads_and_reads_back(tmp_path):
    rng = np.random.default_rng(0)

    def head(with_pool=True):
        x = rng.standard_normal(16) if with_pool else None
        return {"share": 0.5, "gap": 2.0, "alpha": 1.5, "n": 4096.0, "queries": 16, "alpha_bins": rng.random(4),
                "gap_bins": rng.random(4), "x": x, "w": None if x is None else np.full(16, 1 / 16)}

    every = [(la, he) for la in range(3) for he in range(2)]
    ref = {"heads": [(2, 1), (0, 0)], "measured": every, "tag": "abc"}
    ref.update({h: head(h != (0, 0)) for h in every})
    path = tmp_path / "ref.npz"
    rk._save_reference(path, ref)
    back = rk._load_reference(path, "abc")
    assert back["heads"] == back["measured"] == [(2, 1), (0, 0)] and (1, 1) not in back
    for h in back["heads"]:
        for k in ("share", "gap", "alpha", "n", "queries"):
            assert back[h][k] == ref[h][k]
        for k in ("alpha_bins", "gap_bins"):
            assert np.array_equal(back[h][k], ref[h][k])
    assert np.array_equal(back[(2, 1)]["x"], ref[(2, 1)]["x"]) and back[(0, 0)]["x"] is None
    assert rk._load_reference(path, "other tag") is None


def test_a_scale_above_1_at_the_Lth_position_is_read_whole_and_the_others_from_the_prefix(smol):
    """Llama 4's temperature is 1.07 at n = L already: a continuation from the prefix would read it as 1 there."""
    from softmax_scale.models.llama import scale_factors
    from softmax_scale.models.readout import read_out
    from softmax_scale.schemes.rope import rope_frequencies

    L, n = 256, 512
    assert scale_factors("llama4", [L], smol.config.head_dim, L)[0] > 1.0
    seq = real_passkey.passkey_sequence(smol, n, 0.5, "12345")
    run = rk.RealRun(EXPERIMENTS["real_passkey"], smol, L, real_passkey.QUICK_CONFIG, None, 64)
    got = run.read(seq, "yarn", "llama4", ("passkey", n, "p"))
    assert run.prefix_key is None  # no prefix pass was made for it
    inv = rope_frequencies("yarn", smol.config.head_dim, smol.config.rope_base, L, n)
    whole = read_out(smol, seq.ids, seq.scored, probe=seq.probe, inv_freq=inv, query_block=64,
                     factors=scale_factors("llama4", np.arange(1, n + 1), smol.config.head_dim, L))
    np.testing.assert_array_equal(got.nll, whole.nll)
    run.read(seq, "yarn", "qwen_logn", ("passkey", n, "p"))
    assert run.prefix_key == (("passkey", n, "p"), "yarn")  # qwen_logn is 1 up to L: continued from the prefix

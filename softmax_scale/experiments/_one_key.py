"""What the one-key experiments (:mod:`.copy`, :mod:`.passkey`) share: the models they test.

One family of causal byte models serves both: trained at ``L = 128`` on natural text with a
half of each batch made into copies inside ``L`` (:data:`~softmax_scale.train.tasks.MIX_DISTANCES`)
and an eighth into passkey prompts (:func:`~softmax_scale.train.tasks.training_mix`), because a
model trained on natural text alone does not learn to copy at this size.  Three scales are
trained in (:data:`ONE_KEY_SCALES`), each with the same data order per seed, and the models of
three sizes (:data:`SIZE_MODELS`) answer whether the difference grows with the parameters.

A model is kept as its final checkpoint, ``out/.train-checkpoints/one_key-<label>-seed<k>.npz``
(:func:`model_checkpoint`), so that the second experiment to need it reads it instead of training
it again; :func:`trained_model` is the one way to get one.

**The theory beside the measurement** (:func:`probe_model`, :func:`share_row`).  On test inputs
inside ``L`` (the task at the training length) every head's attention on the source key is
measured (:func:`softmax_scale.heads.key_share`); the head with the largest share is the
*retrieving* head.  At each longer test its share is measured again and predicted from what was
measured at ``L`` only (:func:`softmax_scale.heads.predict_share`: the source key's gap fixed,
``n - 1`` keys from the head's pooled scores, the scale grown as the test-time scale says).
The toolkit's share-holding factor (:data:`softmax_scale.heads.SHARE_RULE`,
:func:`softmax_scale.heads.share_factors`) is solved for every head whose source key stands
above its others, and applied as a test-time scale beside the two entropy rules.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._util.store import source_revision
from ..heads import SHARE_RULE, TOOLKIT_RULES
from ..train.config import QUICK, TrainConfig
from . import _training as tr

__all__ = ["COLUMNS", "INTS", "ONE_KEY_MODEL", "ONE_KEY_ROPES", "ONE_KEY_SCALES", "ONE_KEY_TEST_SCALES",
           "QUICK_ONE_KEY_MODEL", "REFERENCE", "RULES", "SIZE_MODELS", "SIZE_SCALES", "TEXT", "OneKeyConfig",
           "OneKeyExperiment", "OneKeyTask", "Probe", "model_checkpoint", "one_key_model", "paired", "probe_model",
           "scales_of", "share_markdown", "share_row", "trained_model"]

#: The one-key models: the causal experiment's layout (SwiGLU, 4 layers, 4 heads, ``L = 128``,
#: 16 sequences per step) at ``d_model`` 64, 3000 steps; half of each batch copies, an eighth passkey prompts.
ONE_KEY_MODEL = TrainConfig(objective="causal", ffn="swiglu", d_model=64, d_ff=172, train_length=128, batch=16,
                            steps=3000, warmup=200, copy_share=0.5, passkey_share=0.125)
#: The quick form: the tiny causal model with the mix, long enough for a passkey prompt.
QUICK_ONE_KEY_MODEL = QUICK.replace(objective="causal", ffn="swiglu", d_ff=48, train_length=112, batch=8,
                                    copy_share=0.25, passkey_share=0.25)
#: Scales trained in: (scheme, pin length); ``None`` pins at the training length.
ONE_KEY_SCALES = (("standard", None), ("entropy_invariant", None), ("ssmax", None))
#: The trained scale that the test-time scales are added to, and every other is compared with.
REFERENCE = ONE_KEY_SCALES[0][0]
#: Published scales added at test time to a ``standard`` model, pinned at ``L``.
ONE_KEY_TEST_SCALES = ("qwen_logn", "yarn")
#: The toolkit's per-head rules tested: the two entropy rules and the share-holding one.
RULES = (*TOOLKIT_RULES, SHARE_RULE)
#: RoPE variants at test time.
ONE_KEY_ROPES = ("none", "ntk", "yarn", "rerope")

#: Columns of the one-key result files.  ``kind``: ``run`` (``value`` = steps; final training loss
#: and accuracy; ``count`` = bytes trained on; seconds), ``curve`` (``value`` = step), ``head_L``
#: (every head on the task at ``L``: ``share`` on the source key, ``gap``, ``sigma`` = its scale
#: on unit-variance scores, ``value`` = mean keys per query, ``count`` = queries; ``note``
#: ``retrieving`` for the head with the largest share), ``factor`` (a rule's factor for one head
#: at ``length`` keys, in ``value``), ``share`` (the retrieving head on one test: measured
#: ``share``, ``share_predicted`` from ``L``, ``sigma``, ``gap``, ``value`` = mean keys), the
#: experiment's test kinds, and ``diverged``.
COLUMNS = ("scheme", "seed", "status", "kind", "rope", "scale", "length", "distance", "depth", "layer", "head", "loss",
           "accuracy", "share", "share_predicted", "sigma", "gap", "value", "count", "seconds", "note")
TEXT = ("scheme", "status", "kind", "rope", "scale", "note")
INTS = ("seed", "length", "distance", "layer", "head", "count")
#: The model sizes of the size trend (``d_model``, ``d_ff``): about 16x in parameters from first to last.
SIZE_MODELS = ((32, 64), (64, 172), (128, 344))
#: The scales compared in the size trend.
SIZE_SCALES = ONE_KEY_SCALES[:2]


@dataclass(frozen=True)
class OneKeyConfig:
    """What the one-key experiments' configurations share (each adds its test cells).

    Attributes
    ----------
    quick : bool
    seeds : int
        Seeds per trained scale.
    model : TrainConfig
        The causal model (the scale set per run).
    scales : tuple of (str, int or None)
        The scales trained in.
    ropes : tuple of str
        RoPE variants tested.
    test_scales : tuple of str
        Published scales added at test time to ``standard`` models, pinned at ``L``.
    rules : tuple of str
        The toolkit's per-head rules tested on ``standard`` models.
    count : int
        The size of a test cell, as the experiment reads it.
    share_windows, probe_windows, entropy_windows, curve_every : int
        As in :class:`OneKeyTask`.
    """

    quick: bool = False
    seeds: int = 3
    model: TrainConfig = ONE_KEY_MODEL
    scales: tuple = ONE_KEY_SCALES
    ropes: tuple = ONE_KEY_ROPES
    test_scales: tuple = ONE_KEY_TEST_SCALES
    rules: tuple = RULES
    count: int = 4096
    share_windows: int = 2
    probe_windows: int = 32
    entropy_windows: int = 16
    curve_every: int = 50

    def __post_init__(self):
        from .._util.validation import check_choice, check_int
        from ..schemes.rope import ROPES

        if not isinstance(self.model, TrainConfig) or not self.model.causal:
            raise ValueError(f"`model` must be a causal TrainConfig, got {self.model!r}")
        check_int(self.seeds, "seeds", minimum=1, maximum=1000)
        for name in ("count", "share_windows", "probe_windows", "entropy_windows", "curve_every"):
            check_int(getattr(self, name), name, minimum=1)
        for r in self.ropes:
            check_choice(r, "ropes", ROPES)
        for r in self.rules:
            check_choice(r, "rules", RULES)


def one_key_model(base: TrainConfig, scheme: str, pin_length=None, size=None) -> TrainConfig:
    """``base`` with a trained scale (and a ``(d_model, d_ff)`` size)."""
    c = base.replace(scheme=scheme, pin_length=pin_length, alpha=None)
    if size is not None:
        c = c.replace(d_model=size[0], d_ff=size[1])
    return c


def model_checkpoint(out, config: TrainConfig, seed: int) -> Path:
    """The kept final checkpoint of the model ``config`` trained with ``seed``; the folder is created."""
    folder = Path(out) / ".train-checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    size = "" if config.d_model == ONE_KEY_MODEL.d_model else f"-d{config.d_model}"
    quick = "-quick" if config.steps < 100 else ""
    return folder / f"one_key-{config.label()}{size}{quick}-seed{seed}.npz"


def trained_model(config: TrainConfig, seed: int, out, *, progress: bool = False):
    """The model trained (or read back from its checkpoint): a :class:`~softmax_scale.train.loop.TrainResult`."""
    from ..train.loop import train_model

    return train_model(config, rng=seed, checkpoint=model_checkpoint(out, config, seed), progress=progress,
                       desc=f"{config.label()} d{config.d_model} seed {seed}")


@dataclass(frozen=True)
class OneKeyTask:
    """One model of a one-key experiment and the tests it gets.

    Attributes
    ----------
    label : str
        The trained scale's label (the ``scheme`` column).
    seed : int
    config : TrainConfig
    out : str or None
        The folder of the kept checkpoints (``None``: train without one).
    ropes : tuple of str
        RoPE variants tested.
    test_scales : tuple of str
        Published scales added at test time (``standard`` models only), pinned at ``L``.
    toolkit : bool
        Also the toolkit's per-head rules (``standard`` models).
    rules : tuple of str
        Which of :data:`RULES` are tested (with ``toolkit``).
    tests : tuple
        The experiment's test cells (copy distances; passkey lengths).
    count : int
        Test sequences (or scored bytes) per cell, as the experiment reads it.
    share_windows : int
        Sequences the retrieving head is measured on per test.
    probe_windows : int
        Sequences of the task at ``L`` the heads are probed on.
    entropy_windows : int
        Held-out windows the entropy rules probe the heads on.
    curve_every : int
    progress : bool
    """

    label: str
    seed: int
    config: TrainConfig
    out: str | None
    ropes: tuple
    test_scales: tuple
    toolkit: bool
    rules: tuple
    tests: tuple
    count: int
    share_windows: int = 4
    probe_windows: int = 32
    entropy_windows: int = 16
    curve_every: int = 50
    progress: bool = False

    @property
    def scales(self) -> tuple:
        """The test-time scales, as written in the ``scale`` column."""
        L = self.config.train_length
        return ("trained", *(f"{s}@{L}" for s in self.test_scales), *(self.rules if self.toolkit else ()))


@dataclass(frozen=True)
class Probe:
    """Every head measured on the task at ``L`` (:func:`probe_model`).

    Attributes
    ----------
    shares : KeyShare
        :func:`softmax_scale.heads.key_share` over ``[layers, heads]``.
    layer, head : int
        The retrieving head (the largest share on the source key).
    factors : HeadFactors or None
        The toolkit's per-head factors (the entropy rules and :data:`~softmax_scale.heads.SHARE_RULE`).
    """

    shares: object
    layer: int
    head: int
    factors: object


def _causal_mask(windows, length):
    return np.tile(np.tril(np.ones((length, length), dtype=bool)), (windows, 1))[None, None]


def _measure(scores, source):
    """``key_share`` of every head of ``scores`` ``[layers, windows, heads, T, T]`` pooled over the windows."""
    from ..heads import key_share

    nl, w, nh, t, _ = scores.shape
    s = scores.transpose(0, 2, 1, 3, 4).reshape(nl, nh, w * t, t)
    return key_share(s, np.asarray(source).reshape(w * t), mask=_causal_mask(w, t))


def probe_model(params, config: TrainConfig, probe, *, toolkit: bool, longest: int, entropy_windows: int = 16) -> Probe:
    """Measure every head on ``probe`` (a :class:`~softmax_scale.train.tasks.OneKeyBatch` at ``L``) and solve the rules.

    With ``toolkit`` (a ``standard`` model) the entropy rules come from
    :func:`softmax_scale.train.head_scales.head_factors` (held-out text inside ``L``) and the share
    rule from each head's share on ``probe``: its factor at each ``n`` of the same grid holds the
    i.i.d. share of the source key at ``n = L`` (NaN, so the head is left as trained, where the
    source key does not stand above the others).
    """
    from ..heads import share_factors
    from ..train.evaluation import batch_scores
    from ..train.head_scales import head_factors

    ks = _measure(batch_scores(params, config, probe.batch.inputs, rope="none"), probe.source)
    share = np.where(np.isfinite(ks.share), ks.share, -1.0)
    layer, head = (int(i) for i in np.unravel_index(np.argmax(share), share.shape))
    hf = None
    if toolkit:
        L = config.train_length
        hf = head_factors(params, config, windows=entropy_windows, longest=longest)
        fac = np.full((config.layers, config.heads, hf.ns.size), np.nan)
        for h, (la, he) in enumerate(np.ndindex(config.layers, config.heads)):
            a, g, pool = ks.alpha[la, he], ks.gap[la, he], ks.pools[h]
            if pool is not None and a > 0 and g > 0:
                fac[la, he] = share_factors(float(a), pool, float(g), L, hf.ns)
        hf = dataclasses.replace(hf, factors={**hf.factors, SHARE_RULE: fac})
    return Probe(ks, layer, head, hf)


def scales_of(task: OneKeyTask, probe: Probe, length: int) -> list:
    """``(scale name, keyword arguments of evaluate_batch, per-position factors [layers, heads, length])`` of every test-time scale."""
    from ..train.head_scales import position_factors
    from ..train.scales import model_factors

    c = task.config
    L = c.train_length
    base = np.broadcast_to(model_factors(c, length), (c.layers, c.heads, length))
    out = [("trained", {}, base)]
    for s in task.test_scales:
        f = model_factors(c, length, scheme=s, pin_length=L)
        out.append((f"{s}@{L}", {"scheme": s, "pin_length": L}, np.broadcast_to(f, (c.layers, c.heads, length))))
    if task.toolkit:
        for r in task.rules:
            f = position_factors(probe.factors, r, length)
            out.append((r, {"factors": f}, f))
    return out


def share_row(row, task, probe: Probe, params, inputs, source, scale, kwargs, factors, **cells) -> tuple:
    """The retrieving head's measured and predicted share on one test (a row of kind ``share``)."""
    from ..heads import predict_share
    from ..train.evaluation import batch_scores

    la, he = probe.layer, probe.head
    s = batch_scores(params, task.config, inputs, rope=cells.get("rope", "none"), **kwargs)[la:la + 1, :, he:he + 1]
    ks = _measure(s, source)
    ref = probe.shares
    h = la * task.config.heads + he
    n_test, n_ref = float(ks.n[0, 0]), float(ref.n[la, he])
    pred = np.nan
    pool = ref.pools[h]
    if pool is not None and np.isfinite(ref.gap[la, he]) and ref.alpha[la, he] > 0:
        growth = factors[la, he, round(n_test) - 1] / factors[la, he, round(n_ref) - 1]
        pred = float(predict_share(ref.alpha_bins[la, he], pool, ref.gap_bins[la, he], [round(n_test)],
                                   growth=[growth])[0])
    return row(task, "ok", "share", scale=scale, layer=la, head=he, share=float(ks.share[0, 0]), share_predicted=pred,
               sigma=float(ks.alpha[0, 0]), gap=float(ks.gap[0, 0]), value=n_test, count=int(ks.queries[0, 0]), **cells)


def probe_rows(row, task, probe: Probe) -> list:
    """Rows ``head_L`` (every head on the task at ``L``) and ``factor`` (the rules' factors per head)."""
    c = task.config
    ks = probe.shares
    rows = []
    for la, he in np.ndindex(c.layers, c.heads):
        rows.append(row(task, "ok", "head_L", length=c.train_length, layer=la, head=he, share=float(ks.share[la, he]),
                        gap=float(ks.gap[la, he]), sigma=float(ks.alpha[la, he]), value=float(ks.n[la, he]),
                        count=int(ks.queries[la, he]),
                        note="retrieving" if (la, he) == (probe.layer, probe.head) else ""))
    if probe.factors is not None:
        hf = probe.factors
        for r in RULES:
            for la, he in np.ndindex(c.layers, c.heads):
                for j, n in enumerate(hf.ns):
                    rows.append(row(task, "ok", "factor", scale=r, length=int(n), layer=la, head=he,
                                    value=float(hf.factors[r][la, he, j])))
    return rows


class OneKeyExperiment(tr.TrainingExperiment):
    """What the copy and passkey experiments share: the models, the rows, the header, the checkpoints kept.

    Subclasses implement :meth:`test_lengths` (the sequence lengths of a task's tests),
    :meth:`probe_batch`, :meth:`test_rows` and :meth:`test_row_count`, and the summaries.
    """

    columns, text, ints = COLUMNS, TEXT, INTS
    reference = REFERENCE
    match = ("experiment", "config", "tests", "settings")
    #: The configuration's fields that change no row: the seeds and the scales trained in add or remove
    #: tasks, the model is the ``config`` line.  Every other field is in the ``settings`` line.
    not_row_settings = ("quick", "seeds", "scales", "model")
    #: The config dataclass (a frozen dataclass with ``quick``, ``seeds``, ``model``, ``scales``,
    #: ``ropes``, ``test_scales``, ``rules``, ``count``, ``share_windows``, ``probe_windows``,
    #: ``entropy_windows``, ``curve_every``) and its two forms, set by subclasses.
    full_config = None
    quick_config = None

    @property
    def file_stem(self) -> str:
        """``one_key_<name>``."""
        return f"one_key_{self.name}"

    def config(self, quick: bool = False):
        """The full configuration or its quick form."""
        return self.quick_config if quick else self.full_config

    def tests_of(self, config) -> tuple:
        """The test cells of ``config`` (see :attr:`OneKeyTask.tests`)."""
        raise NotImplementedError

    def test_lengths(self, task) -> tuple:
        """The sequence lengths of ``task``'s tests."""
        raise NotImplementedError

    def probe_batch(self, task):
        """The task at ``L``, on which the heads are probed (a :class:`~softmax_scale.train.tasks.OneKeyBatch`)."""
        raise NotImplementedError

    def test_rows(self, row, task, params, probe) -> list:
        """The experiment's own rows of one trained model."""
        raise NotImplementedError

    def test_row_count(self, task) -> int:
        """How many rows :meth:`test_rows` writes."""
        raise NotImplementedError

    def tasks(self, config, *, out=None, progress: bool = False) -> list:
        """One task per (seed, trained scale); the ``standard`` models also get the test-time and per-head scales."""
        base = config.model
        show = progress and not config.quick
        out_dir = None if out is None else str(out)
        tasks = []
        for seed in range(config.seeds):
            for scheme, pin in config.scales:
                c = one_key_model(base, scheme, pin)
                ref = scheme == REFERENCE
                tasks.append(OneKeyTask(c.label(), seed, c, out_dir, tuple(config.ropes),
                                        tuple(config.test_scales) if ref else (), ref, tuple(config.rules),
                                        self.tests_of(config),
                                        config.count, config.share_windows, config.probe_windows,
                                        config.entropy_windows, config.curve_every, show))
        return tasks

    def expected_rows(self, task) -> int:
        """Rows a finished (not diverged) task writes."""
        from ..train.head_scales import factor_grid

        c = task.config
        heads = c.layers * c.heads
        rules = heads * len(RULES) * len(factor_grid(c.train_length, max(self.test_lengths(task)))) if task.toolkit else 0
        return 1 + c.steps // task.curve_every + heads + rules + self.test_row_count(task)

    def run_task(self, task) -> list:
        """Train (or read back) the model, probe its heads at ``L``, run the experiment's tests."""
        from .sweep import limit_threads

        limit_threads()
        c = task.config
        res = trained_model(c, task.seed, task.out, progress=task.progress) if task.out is not None else \
            _train_without_checkpoint(c, task.seed, task.progress)
        if res.diverged:
            return [self.row(task, "diverged", "diverged", value=res.steps, seconds=res.seconds, note=res.message)]
        rows = [self.row(task, "ok", kind, value=step, loss=loss, accuracy=acc, count=count, seconds=sec)
                for kind, step, loss, acc, count, sec in tr.run_summary(res, c, task.curve_every)]
        probe = probe_model(res.params, c, self.probe_batch(task), toolkit=task.toolkit,
                            longest=max(self.test_lengths(task)), entropy_windows=task.entropy_windows)
        rows += probe_rows(self.row, task, probe)
        rows += self.test_rows(self.row, task, res.params, probe)
        return rows

    def task_finished(self, task) -> None:
        """Keep the model's checkpoint: the other one-key experiment reads it."""

    def header(self, config, tasks, command) -> dict:
        """Provenance: the command, the models' configuration, the tests, the data, versions."""
        import jax
        import optax

        from ..schemes.rope import rerope_window
        from ..train.data import corpus_hashes

        t = tasks[0]
        base = t.config.replace(scheme=REFERENCE, alpha=None, pin_length=None)
        L = base.train_length
        hashes = corpus_hashes()
        return {
            "command": command or " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "experiment": f"{self.name}{' (quick)' if config.quick else ''}",
            "config": base.describe(),
            "compute": f"compute_dtype {base.compute_dtype} (bfloat16 runs no faster than float32 on this CPU: "
                       "benchmarks/results_bf16.md)",
            "runs": "; ".join(sorted({f"{x.label}: " + " ".join(x.scales) for x in tasks})),
            "ropes": " ".join(t.ropes) + f" (rerope window {rerope_window(L)})",
            "tests": self.describe_tests(t),
            **self.extra_header(tasks),
            "measure": f"heads probed on {t.probe_windows} sequences of the task at L; the retrieving head on "
                       f"{t.share_windows} sequences per test; entropy rules on {t.entropy_windows} held-out windows",
            "settings": self.settings(config),
            "corpus": "; ".join(f"{k} {v}" for k, v in hashes.items()),
            "jax": f"jax {jax.__version__}, optax {optax.__version__}, {jax.default_backend()}",
            "code": f"softmax_scale at {source_revision()}",
            "date": datetime.date.today().isoformat(),
        }

    def describe_tests(self, task) -> str:
        """The ``tests`` header line."""
        raise NotImplementedError

    def settings(self, config) -> str:
        """The ``settings`` header line: every field of ``config`` that changes a row, as sorted JSON."""
        cells = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in self.not_row_settings}
        return json.dumps(cells, sort_keys=True, separators=(",", ":"))


def share_markdown(table, column: str) -> str:
    """The retrieving head's share on the source key per test ``column`` (``distance`` or ``length``).

    One row per (trained scale, RoPE the share was measured under, test scale): measured (mean ±
    standard error over seeds) and predicted from ``L`` (mean over seeds).
    """
    r = table.rows
    m0 = tr.ok(table) & (r["kind"] == "share")
    dist = np.unique(r[column][m0])
    sym = "m" if column == "distance" else "n"
    lines = ["| trained | RoPE | scale (share measured, mean ± standard error over seeds / predicted from L; seeds) | "
             + " | ".join(f"{sym} = {m}" for m in dist) + " |", "|---|---|---|" + "---:|" * len(dist)]
    keys = sorted(set(zip(r["scheme"][m0], r["rope"][m0], r["scale"][m0])), key=lambda k: (k[0] != REFERENCE, k))
    for label, rope, scale in keys:
        m = m0 & (r["scheme"] == label) & (r["rope"] == rope) & (r["scale"] == scale)
        cells = []
        for d in dist:
            md = m & (r[column] == d)
            share = r["share"][md]
            pred = np.nanmean(r["share_predicted"][md]) if np.any(np.isfinite(r["share_predicted"][md])) else np.nan
            cells.append(f"{tr.pm_of(share[np.isfinite(share)], digits=3)} / {pred:.3f}")
        lines.append(f"| {label} | {rope} | {scale} ({np.unique(r['seed'][m]).size}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired(a: dict, b: dict):
    """``{seed: value}`` minus ``{seed: value}`` over their common seeds: ``(mean, sample std, seeds, differences)``, or None."""
    seeds = tuple(sorted(set(a) & set(b)))
    if not seeds:
        return None
    d = np.array([a[sd] - b[sd] for sd in seeds])
    return float(np.mean(d)), float(tr.std(d)), seeds, tuple(float(x) for x in d)


def _train_without_checkpoint(config, seed, progress):
    from ..train.loop import train_model

    return train_model(config, rng=seed, progress=progress)

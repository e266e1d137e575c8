"""Your own model, measured: the multiplier on ``q.k`` past the training length that its loss prefers.

:func:`measure` reads a user's GGUF decoder (any architecture of
:data:`softmax_scale.models.gguf_file.ARCHITECTURES`) at the lengths asked, under the RoPE
scaling the file carries (:func:`softmax_scale.models.recipe.file_recipe`) or a named variant,
and for every *cell* — a constant multiplier on the logits of the queries past ``L`` (the
queries that see more than ``L`` keys), a published shape from the scheme registry
(``qwen_logn``, ``yarn``'s temperature, ``llama4``), and the multiplier the file's own recipe
applies (llama.cpp's) — it scores

- the next-token loss on documents (windows of ``n`` tokens of the user's text, or of the texts
  that ship with Python, :func:`softmax_scale.models.corpus`: the first window of every text, then
  the second...), mean over the positions past ``L``;
- pass-key retrieval (:func:`softmax_scale.experiments.real_passkey.passkey_sequence`): a key is
  retrieved when the greedy choice is right at all five digits, teacher-forced.

**Units.** One unit is a (task, length, document or prompt): the positions where the cells'
multipliers are 1 run once (the cached prefix: up to ``L``, or ``L - 1`` with ``llama4``), and
every cell continues from their keys and values (:func:`softmax_scale.models.readout.read_out`);
a cell that changes the multiplier earlier (a recipe's factor on every position) reads its whole
sequence, and two cells with the same multipliers are read once.  Units go to any
:class:`concurrent.futures.Executor` (:func:`~.sweep.run_sweep`); the result file is resumable
and names the model's SHA-256, the command and the code revision.

**Statistics** (float64, over documents).  The minimising constant multiplier is the vertex of the
parabola through the grid's lowest mean loss and its two neighbours (the grid's end where the
lowest is there); its interval is the 2.5 and 97.5 percentiles of the same minimiser over
:data:`BOOTSTRAP` resamples of the documents (a percentile bootstrap, seeded), each end's distance
from the minimiser widened by ``1.2 t(D - 1) / z * sqrt(D / (D - 1))`` for ``D`` documents
(:func:`~._measure_stats.minimiser_interval`).  Under the stopping rule (``width``), documents are
read one at a time until that interval is at most ``±width`` wide
(:func:`~._measure_stats.documents_wanted`).  Each other cell
is compared with the constant 1 document by document (mean paired difference and its standard
error).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._util.store import ResultStore
from .._util.validation import check_choice, check_int, check_real
from ._measure_run import (  # noqa: F401  (_RUNS, _prefix_length, _curve, _text_hashes: read by tests)
    _RUNS,
    BOOTSTRAP,
    COLUMNS,
    CONSTANT,
    DEFAULT_FACTORS,
    DEPTHS,
    FILE_ROPE,
    INTS,
    KEY_SEED,
    RECIPE,
    SHAPES,
    SMOKE,
    TEXT,
    MeasureConfig,
    _prefix_length,
    _run_of,
)
from ._measure_stats import MIN_DOCUMENTS, LengthCurve, _curve, figure, summarise  # noqa: F401
from ._measure_sweep import (  # noqa: F401
    MeasureExperiment,
    MeasureTask,
    _same_documents,
    _text_hashes,
    estimate_line,
    estimate_seconds,
    unit_plan,
)

__all__ = ["BOOTSTRAP", "COLUMNS", "CONSTANT", "DEFAULT_FACTORS", "DEPTHS", "FILE_ROPE", "INTS", "KEY_SEED",
           "MIN_DOCUMENTS", "RECIPE",
           "SHAPES", "SMOKE", "TEXT", "LengthCurve", "MeasureConfig", "MeasureExperiment", "MeasureResult", "MeasureTask", "figure",
           "measure", "quick_config", "score_bound", "summarise"]


def quick_config(config: MeasureConfig, model_length: int) -> MeasureConfig:
    """The quick form of ``config``: the model's ``L`` where the lengths reach past it, a smoke test otherwise.

    One document and at most one prompt; constants 0.9, 1 and 1.2; the ``yarn`` shape.  Where the
    shortest length is not past ``model_length`` + 1 (and no ``train_length`` is given), ``L`` is a
    pretend ``15/16`` of it, at most ``n - 2``: the pipeline runs, and nothing is extrapolated, so the
    summary says :data:`SMOKE` in place of a minimiser.
    """
    n = min(config.lengths)
    pretend = config.train_length is None and n < model_length + 2
    L = max(2, min(n * 15 // 16, n - 2)) if pretend else config.train_length
    return dataclasses.replace(config, train_length=L, factors=(0.9, 1.0, 1.2), shapes=("yarn",), docs=1,
                               prompts=min(config.prompts, 1), quick=True, model_length=model_length if pretend else None)


# ---------------------------------------------------------------------------------------------
# The public function


@dataclass(frozen=True)
class MeasureResult:
    """What :func:`measure` wrote and found.

    Attributes
    ----------
    path : pathlib.Path
        The result file (CSV with a provenance header).
    figure : pathlib.Path or None
        The figure (PNG beside it).
    header : dict
        The file's provenance lines.
    curves : tuple of LengthCurve
        One per length.
    method : str
        How the minimiser and its interval are computed.
    """

    path: Path
    figure: Path | None
    header: dict
    curves: tuple
    method: str

    def to_json(self) -> dict:
        """Plain JSON values (for ``--json``; NaN as None)."""
        from .._util.output import jsonable

        return jsonable({"path": str(self.path), "figure": None if self.figure is None else str(self.figure),
                "model": self.header.get("model"), "model_sha256": self.header.get("model_sha256"),
                "train_length": int(self.header["train_length"]), "rope": self.header.get("rope"),
                "method": self.method, "lengths": [c.to_json() for c in self.curves]})

    def to_text(self) -> str:
        """The curves as text."""
        return "\n\n".join([f"{self.header.get('model')} (sha256 {self.header.get('model_sha256', '')[:12]}...), "
                            f"rope {self.header.get('rope')}"] + [c.to_text() for c in self.curves])


def _file(path, name: str, what: str) -> str:
    """``path`` resolved, naming an existing file; the error names ``name``."""
    from ..models._files import MissingWeightsError, check_path

    try:
        return os.fspath(check_path(path, "file", what))
    except MissingWeightsError:
        raise ValueError(f"`{name}` must be {what}, got {os.fspath(path)!r}, which does not exist") from None
    except ValueError:
        raise ValueError(f"`{name}` must be {what}, got {os.fspath(path)!r}, which is a directory") from None
    except TypeError:
        raise TypeError(f"`{name}` must be a str or path-like naming {what}, got {type(path).__name__}") from None


def _utf8(path: str) -> str:
    """``path``, whose bytes must decode as UTF-8; the error names its line and column."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        line, column = data.count(b"\n", 0, exc.start) + 1, len(data[start:exc.start].decode("utf-8")) + 1
        raise ValueError(f"`text`: {path} line {line} column {column} is not UTF-8 text "
                         f"(byte 0x{data[exc.start]:02x})") from None
    return path


def _distinct(values, name: str, what: str = "a value") -> tuple:
    """``values`` as a tuple, refused where one comes twice."""
    values = tuple(values)
    twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if twice is not None:
        raise ValueError(f"`{name}` must not repeat {what}, got {twice!r} twice")
    return values


def _fit(exp, cfg, first, budget: float) -> tuple:
    """Read ``first`` and size ``cfg``'s documents and prompts so the whole run fits ``budget`` minutes.

    Both shrink in proportion (documents to no fewer than two) until the estimate from the first
    unit's time (:func:`~._measure_sweep.estimate_seconds`) fits; under the stopping rule the prompts
    alone, the documents' plan being the rule's least; the line saying it goes to stderr.
    ``(config, the first unit's rows)``; a ValueError naming ``budget`` where even the least does not fit.
    """
    t0 = time.perf_counter()
    rows = exp.run_task(first)
    took = time.perf_counter() - t0
    least = min(2, cfg.docs)
    for frac in np.linspace(1.0, 0.0, 21):
        c = dataclasses.replace(cfg, docs=cfg.docs if cfg.width else max(least, int(cfg.docs * frac)),
                                prompts=int(cfg.prompts * frac))
        plan = unit_plan(c)
        if took + estimate_seconds(took, plan) <= budget * 60:
            print(f"{estimate_line(took, plan, budget)}: {c.docs} documents and {c.prompts} prompts per length",
                  file=sys.stderr)
            return c, rows
    docs = min(MIN_DOCUMENTS, c.docs) if cfg.width else c.docs
    raise ValueError(f"`budget` of {budget:g} min is too short: the run needs about "
                     f"{(took + estimate_seconds(took, plan)) / 60:.2g} min at {docs} documents and no prompts per "
                     f"length, the least (its first unit took {took:.2g} s)")


def _spacing(spacing) -> float:
    """An adaptive sweep's least distance between two constants: 0.001 to 1."""
    v = check_real(spacing, "spacing")
    if not 1e-3 <= v <= 1.0:
        raise ValueError(f"`spacing` must be between 0.001 and 1, got {v!r}")
    return v


def _width(width, adaptive: int, quick: bool) -> float:
    """The stopping rule's half-width: ``width``, or 0.02 under an adaptive sweep and 0 (off) otherwise where None."""
    if width is None:
        return 0.02 if adaptive else 0.0
    v = check_real(width, "width")
    if not 0 <= v < 1:
        raise ValueError(f"`width` must be a half-width from 0 (off: read every document) to under 1, got {width!r}")
    if v and quick:
        raise ValueError("`width` and `quick` do not go together (the quick form reads one document)")
    return v


def _same_rule(store, header: dict) -> None:
    """Refuse to resume a file under another stopping rule (its ``stopping`` line, absent where it read every document)."""
    old, new = store.header.get("stopping"), header.get("stopping")
    if old != new:
        raise ValueError(f"`width`: {store.path} was read under the stopping rule {old or 'none (every document)'!r}, "
                         f"not {new or 'none (every document)'!r}; pass the same width, or overwrite=True")


def _past(lengths, L: int) -> None:
    """Every length must score a position past ``L`` (one whose next token is read)."""
    if lengths[0] < L + 2:
        raise ValueError(f"`n` must be at least L + 2 = {L + 2} (past the training length L = {L} is what is "
                         f"measured, and a scored token needs a next one), got {lengths[0]}")


def _target(out, quick: bool, figure_file: bool) -> Path:
    """The result file that ``out`` names; its folder must take a new file (checked by writing one)."""
    import tempfile

    from .._util.validation import check_output_dir

    out = Path(out)
    target = out if out.suffix == ".csv" else out / f"measure{'_quick' if quick else ''}.csv"
    folder = check_output_dir(target.parent, "out")
    for p in (target, target.with_suffix(".png")) if figure_file else (target,):
        if p.is_dir():
            raise ValueError(f"`out`: {p} is a folder, where the result is written as a file")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(f"`out` must be in a folder where files can be written, got {os.fspath(folder)!r} "
                         f"({exc.strerror or exc})") from None
    return target


def score_bound(model) -> float:
    """A bound on ``|q.k| / sqrt(d)`` over every layer, head and input of ``model``, from its weights.

    The attention's RMSNorm leaves ``|h| <= max|g| sqrt(D)``; a head's query is then at most
    ``||W_h||_F |h| + |b_h|`` long (or ``max|g_q| sqrt(d)`` under a per-head RMSNorm), and so is
    a key; RoPE is a rotation, so ``|q.k| <= |q| |k|`` (Cauchy-Schwarz).
    """
    c, w = model.config, model.weights
    out = 0.0
    for layer in range(c.n_layers):
        p = f"blk.{layer}."
        g = w[p + "attn_norm.weight"]
        h = float(np.max(np.abs(g))) * math.sqrt(g.size)
        q, k = (_longest(w, p + name, heads, h, c.head_dim) for name, heads in (("attn_q", c.n_heads),
                                                                               ("attn_k", c.n_kv_heads)))
        out = max(out, q * k / math.sqrt(c.head_dim))
    return out


def _longest(w, name: str, heads: int, h: float, d: int) -> float:
    """The longest of the ``heads`` vectors the tensor ``name`` makes from an input of length at most ``h``."""
    if name + "_norm.weight" in w:
        return float(np.max(np.abs(w[name + "_norm.weight"]))) * math.sqrt(d)
    W = w[name + ".weight"].astype(np.float64).reshape(heads, -1)
    b = w.get(name + ".bias", np.zeros(heads)).astype(np.float64).reshape(heads, -1)
    return float(np.max(np.linalg.norm(W, axis=1) * h + np.linalg.norm(b, axis=1)))


def _check_factors(factors, model) -> None:
    """The constants must keep every ``factor * q.k / sqrt(d)`` (and a difference of two) inside float32's range."""
    bound = score_bound(model)
    top = float(np.finfo(np.float32).max)
    limit = top / (4 * max(bound, 1.0))  # 2: the softmax subtracts the row's maximum; 2: rounding's margin
    if max(factors) > limit:
        raise ValueError(f"`factors` must be at most {limit:.3g} for this model (its weights bound |q.k| / sqrt(d) "
                         f"by {bound:.3g}; float32 holds {top:.3g}), got {max(factors):g}")


def _check(model, lengths, rope, train_length, factors, shapes, texts, docs, prompts, backend) -> tuple:
    from ..schemes import scheme_factor
    from ..schemes.rope import ROPES

    path = _file(model, "model", "a GGUF file")
    if isinstance(lengths, (int, np.integer)):
        lengths = (lengths,)
    lengths = tuple(sorted({check_int(n, "n", minimum=16) for n in lengths}))
    if not lengths:
        raise ValueError("`n` must hold at least one length")
    check_choice(rope, "rope", (FILE_ROPE, *[r for r in ROPES if r != "rerope"]))
    if train_length is not None:
        train_length = check_int(train_length, "train_length", minimum=2)
        _past(lengths, train_length)
    if isinstance(factors, (int, float, np.number)):
        factors = (factors,)
    fs = _distinct((check_real(f, "factors") for f in factors), "factors")
    if fs and min(fs) <= 0:
        raise ValueError(f"`factors` must be positive, got {min(fs)!r}")
    top = float(np.finfo(np.float32).max)
    if fs and max(fs) > top:  # the read-out multiplies q.k in float32: beyond its range at any q.k
        raise ValueError(f"`factors` must be at most {top:.4g} (float32's largest number), got {max(fs)!r}")
    shapes = _distinct((shapes,) if isinstance(shapes, str) else shapes, "shapes")
    for s in shapes:
        try:
            scheme_factor([1.0], 64, s, 2)
        except ValueError:
            raise ValueError(f"`shapes` must hold schemes of the registry (softmax-scale scale --list), got {s!r}") from None
    if isinstance(texts, (str, os.PathLike)):
        texts = (texts,)
    texts = tuple(_utf8(_file(t, "text", "a text file")) for t in texts or ())
    _distinct((os.path.basename(t) for t in texts), "text", "a file name (it names the documents)")
    docs = check_int(docs, "docs", minimum=1)
    prompts = check_int(prompts, "prompts", minimum=0)
    check_choice(backend, "backend", ("numpy", "jax"))
    return path, lengths, train_length, tuple(sorted(set(fs) | {1.0})), shapes, texts, docs, prompts


def measure(model, n, *, rope: str = FILE_ROPE, train_length: int | None = None, factors=None,
            shapes=None, recipe: bool = True, text=None, docs: int = 6, prompts: int = 12, adaptive: int = 0,
            spacing: float = 0.05, width: float | None = None, budget: float | None = None, quick: bool = False,
            keys: int = 1,
            out="measure", overwrite: bool = False, executor=None, workers: int = 0, scheduler: str | None = None,
            backend: str = "numpy", query_block: int = 256, figure_file: bool = True, progress: bool = True,
            command: str | None = None) -> MeasureResult:
    """Sweep the multiplier on ``q.k`` past the training length on a GGUF decoder (see the module docstring).

    Parameters
    ----------
    model : str or os.PathLike
        The GGUF file.
    n : int or sequence of int
        Sequence lengths, each above ``L``.
    rope : str
        ``"file"``: the file's own RoPE scaling; or a variant of :data:`softmax_scale.schemes.rope.ROPES`.
    train_length : int, optional
        ``L`` (the file's where omitted).
    factors : sequence of float, optional
        Constant multipliers past ``L`` (1 is always read); :data:`DEFAULT_FACTORS` (``quick``'s) where omitted.
    shapes : sequence of str, optional
        Published shapes from the scheme registry; :data:`SHAPES` (``quick``'s) where omitted.
    recipe : bool
        Also read the multiplier the file's recipe applies.
    text : str, os.PathLike or sequence of them, optional
        Text files cut into windows of ``n`` tokens; the texts that ship with Python otherwise.
    docs, prompts : int
        Documents (under the stopping rule, the most) and pass-key prompts per length.
    adaptive : int
        Under 0, the constants ``factors`` (a fixed grid); otherwise that many constants read on the
        first document one after another (:func:`~._measure_stats.next_factor`: from 1 and the
        recipe's multiplier, bracket the lowest loss, then refine it, ``spacing`` apart), and on the
        other documents and the prompts 1 and the first's lowest with its two neighbours (``factors``
        must be omitted).
    spacing : float
        The least distance between two constants of an adaptive sweep.
    width : float, optional
        The stopping rule: documents are read one at a time in window order, at least
        :data:`MIN_DOCUMENTS` (``docs`` where fewer), until the minimiser's 95% interval is at most
        ``±width`` wide (:func:`~._measure_stats.documents_wanted`; never where the lowest mean loss
        is at the grid's end), ``docs`` at most, then the prompts; under ``budget`` it stops too where
        the next document and the prompts would not fit.  0: every document of ``docs``.  Where
        omitted, 0.02 under ``adaptive`` and 0 otherwise.  A resumed file keeps its rule.
    keys : int
        Keys per prompt: 1, each prompt one key; more, the multi-key variant: each of the ``prompts``
        is a haystack of ``keys`` keys, each key asked by its own question continued from it
        (:func:`~.real_passkey.passkey_haystack`), a row per key and cell.
    budget : float, optional
        Minutes for the whole run: a new file's first unit is read and timed, and the documents and
        prompts shrink in proportion (documents to no fewer than two; under the stopping rule, the
        prompts alone) until the estimate from it fits (a ValueError where even that does not fit; a
        resumed file keeps its sizes).
    quick : bool
        :func:`quick_config`: one document and few cells past the model's ``L``, or a smoke test at a
        pretend ``L`` where ``n`` is not past it (``factors`` and ``shapes`` as given, where given).
    out : str or os.PathLike
        Folder of the result file (``measure.csv``, ``measure_quick.csv``) and figure; a path ending in
        ``.csv`` names the file itself.
    overwrite : bool
        Start a new file instead of resuming.  A file resumed may gain lengths and change backend;
        it must hold rows of the same model, RoPE, cells and prompts, read from the same text.
    executor : concurrent.futures.Executor, optional
        Where the units run; ``workers`` local processes (0: this one) or a Dask ``scheduler`` otherwise.
    backend : {"numpy", "jax"}
        The read-out (:data:`softmax_scale.models.readout.BACKENDS`).
    query_block : int
    figure_file : bool
        Draw the figure.
    progress : bool
        A progress bar over the units, and the estimate after the first.
    command : str, optional
        The command recorded in the header.

    Returns
    -------
    MeasureResult

    Raises
    ------
    ValueError
        Naming the parameter: a missing, unreadable or unsupported model file, a length not at
        least ``L + 2``, an unknown RoPE variant or shape, a repeated or out-of-range factor, text
        that is missing, not UTF-8 or too short, an output folder that takes no file, a factor
        whose scores could overflow float32 (:func:`score_bound`); at run time, a non-finite loss
        (nothing of its unit is written).
    """
    from .sweep import dask_executor, run_sweep

    clock = time.perf_counter()
    path, lengths, train_length, fs, shs, texts, docs, prompts = _check(
        model, n, rope, train_length, DEFAULT_FACTORS if factors is None else factors,
        SHAPES if shapes is None else shapes, text, docs, prompts, backend)
    cfg = MeasureConfig(path, lengths, rope, train_length, fs, shs, bool(recipe), texts, docs, prompts,
                        check_int(query_block, "query_block", minimum=1), backend)
    cfg = dataclasses.replace(cfg, keys=check_int(keys, "keys", minimum=1))
    if check_int(adaptive, "adaptive", minimum=0):
        if factors is not None:
            raise ValueError("`adaptive` chooses the constants: pass it or `factors`, not both")
        if quick:
            raise ValueError("`adaptive` and `quick` do not go together (the quick form reads a fixed grid)")
        check_int(adaptive, "adaptive", minimum=3)
        cfg = dataclasses.replace(cfg, factors=(1.0,), adaptive=int(adaptive),
                                  spacing=_spacing(spacing))
    cfg = dataclasses.replace(cfg, width=_width(width, cfg.adaptive, quick))
    workers = check_int(workers, "workers", minimum=0, maximum=1024)
    if budget is not None and not check_real(budget, "budget") > 0:
        raise ValueError(f"`budget` must be positive minutes, got {budget!r}")
    target = _target(out, quick, figure_file)
    if quick:
        cfg = quick_config(cfg, _run_of(cfg).L)
        cfg = dataclasses.replace(cfg, factors=cfg.factors if factors is None else fs,
                                  shapes=cfg.shapes if shapes is None else shs)
    run = _run_of(cfg)
    _past(lengths, run.L)
    _check_factors(cfg.factors, run.model)
    if cfg.prompts:
        from .real_passkey import haystack_min_tokens, passkey_min_tokens

        try:
            need = passkey_min_tokens(run.model) if cfg.keys == 1 else haystack_min_tokens(run.model, cfg.keys)
        except ValueError as exc:
            raise ValueError(f"`prompts`: no pass-key prompt can be built for this model ({exc}); pass prompts=0") from None
        if lengths[0] < need:
            raise ValueError(f"`n` must be at least {need} tokens for a pass-key prompt of this model, got {lengths[0]}; "
                             "pass a longer n or prompts=0")
    exp = MeasureExperiment(progress)
    exp.clock = clock
    if budget is not None and cfg.width:
        exp.deadline = clock + budget * 60
    tasks = exp.tasks(cfg, out=None if overwrite else target)
    first = None
    if budget is not None and (overwrite or not target.exists()):
        cfg, first = _fit(exp, cfg, tasks[0], budget)
        tasks = exp.tasks(cfg)
    header = exp.header(cfg, tasks, command)
    store = ResultStore(target, header, COLUMNS, key=exp.key, match=exp.match, overwrite=overwrite,
                        float_format=exp.float_format)
    _same_documents(store, header, run, cfg.lengths)
    _same_rule(store, header)
    exp.started = time.perf_counter()
    if first is not None:
        store.append(first)
        exp.task_finished(tasks[0])  # the estimate is said: none after the next unit
    exp.plan = unit_plan(cfg, {(t, int(n), i) for t, n, i in store.done})
    while True:  # an adaptive sweep: the first documents, then what their rows choose
        if scheduler is not None:
            with dask_executor(scheduler) as ex:
                run_sweep(exp, tasks, store, executor=ex, progress=progress)
        else:
            run_sweep(exp, tasks, store, executor=executor, workers=workers, progress=progress)
        more = exp.tasks(cfg, out=target)
        if len(more) == len(tasks):
            break
        tasks = more
    table = exp.read(target)
    curves = tuple(summarise(table))
    png = None
    if figure_file:
        from .._util.files import atomic_write

        title = f"{os.path.basename(path)}: loss against the multiplier past L = {run.L}"
        fig = figure(curves, f"{SMOKE} (L = {run.L} is pretend, the model's is {cfg.model_length}): {title}"
                     if cfg.model_length else title)
        png = target.with_suffix(".png")
        atomic_write(png, lambda p: fig.savefig(p, dpi=110, format="png"))
    return MeasureResult(target, png, dict(table.header), curves, header["statistics"])

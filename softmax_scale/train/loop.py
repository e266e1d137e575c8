"""Training: AdamW with warm-up and cosine decay, gradient clipping, one jit-compiled step.

Parameters, optimiser state and the loss are float32; the matrix products take their inputs in
the configuration's ``compute_dtype`` (:func:`softmax_scale.train.model.matmul`).

:func:`train_model` trains one model from a :class:`~softmax_scale.train.config.TrainConfig`
and a seed.  The seed fixes the initialisation and the data order (two independent child seeds:
the same data order for every scale trained with the same seed).  The batch is sharded over
``jax.devices()`` (data parallel through :mod:`jax.sharding`: the parameters replicated, the
batch split along its first axis), so the same code runs on one CPU, on a multi-device host,
and, after ``jax.distributed.initialize``, on several hosts.

A checkpoint (``.npz``: parameters, optimiser state, the step, the seed, the history and the
configuration) is written every ``checkpoint_every`` steps, atomically; a run given an existing
checkpoint resumes from it and ends with parameters bit-identical to an uninterrupted run (the
batch of step ``t`` depends only on the seed and ``t``).  A run whose loss turns NaN or exceeds
twice the loss of a uniform guess stops with ``diverged=True`` and a message.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from .._util.files import atomic_write
from .._util.jax_backend import jax, optax
from .._util.progress import progress_bar
from .._util.rng import seed_sequence
from .config import TrainConfig
from .data import VOCAB
from .model import init_params, loss_and_accuracy, rope_tables
from .scales import model_factors
from .tasks import train_batch

__all__ = ["DIVERGENCE_LOSS", "TrainResult", "initial_params", "load_checkpoint", "make_optimizer", "place", "train_model"]

#: A run diverges when its training loss is not finite or exceeds this (twice ln V, a uniform guess's loss).
DIVERGENCE_LOSS = 2.0 * math.log(VOCAB)
_HISTORY = ("loss", "accuracy", "lr", "grad_norm")


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train_model` returns.

    Attributes
    ----------
    config : TrainConfig
    params : dict
        Final parameters, numpy float32, nested as :func:`~softmax_scale.train.model.forward` takes them.
    history : dict of str -> ndarray
        Per step: ``loss``, ``accuracy`` (on the batch's predicted positions), ``lr``, ``grad_norm``.
    steps : int
        Steps completed.
    finished : bool
        Whether all ``config.steps`` ran (False after ``stop_after`` or a divergence).
    diverged : bool
        Whether the loss turned NaN or diverged.
    message : str
        Empty, or why the run stopped early.
    seconds : float
        Wall time of this call (compilation included).
    tokens_per_second : float
        Training bytes per second over the steps run in this call, compilation excluded.
    resumed_from : int
        The step the run resumed from (0 for a fresh start).
    seed : tuple
        ``(entropy, spawn_key)`` of the run's seed.
    """

    config: TrainConfig
    params: dict
    history: dict
    steps: int
    finished: bool
    diverged: bool
    message: str
    seconds: float
    tokens_per_second: float
    resumed_from: int = 0
    seed: tuple = field(default=())


def make_optimizer(config: TrainConfig):
    """``clip_by_global_norm`` then AdamW with linear warm-up and cosine decay; no decay on gains or ``s``."""
    schedule = optax.warmup_cosine_decay_schedule(0.0, config.lr, config.warmup, config.steps,
                                                  end_value=config.lr * config.min_lr_ratio)
    decay = partial(jax.tree_util.tree_map, lambda p: p.ndim == 2)
    opt = optax.chain(optax.clip_by_global_norm(config.clip),
                      optax.adamw(schedule, b1=config.b1, b2=config.b2, weight_decay=config.weight_decay, mask=decay))
    return opt, schedule


def _children(rng):
    ss = seed_sequence(rng)
    kids = [np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, i), pool_size=ss.pool_size) for i in (0, 1)]
    return ss, kids[0], kids[1]


def initial_params(config: TrainConfig, rng=None) -> dict:
    """The parameters :func:`train_model` starts from with the seed ``rng`` (numpy float32)."""
    return init_params(config, _children(rng)[1])


def _seed_text(ss) -> str:
    return json.dumps([str(ss.entropy), list(ss.spawn_key)])


def _save(path, params, opt_state, step, config, ss, history):
    leaves = jax.tree_util.tree_leaves((params, opt_state))
    meta = {"config": config.describe(), "step": step, "seed": _seed_text(ss), "format": "softmax_scale.train/1"}
    arrays = {f"leaf{i}": np.asarray(x) for i, x in enumerate(leaves)}
    arrays.update({f"history_{k}": np.asarray(v[:step]) for k, v in history.items()})
    meta_bytes = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)

    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez(f, meta=meta_bytes, **arrays)

    atomic_write(path, write)


def load_checkpoint(path, config: TrainConfig, template, ss) -> tuple:
    """Read a checkpoint written by :func:`train_model` for ``config`` and seed ``ss``.

    ``template`` is ``(params, opt_state)`` of a fresh run (the tree structure).  Returns
    ``(params, opt_state, step, history)``.

    Raises
    ------
    ValueError
        Naming ``checkpoint`` and the file if it is unreadable, truncated, of another
        configuration or seed, or its arrays do not fit the model.
    """
    try:
        with open(path, "rb") as f:
            raw = io.BytesIO(f.read())
        with np.load(raw, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            leaves = [z[f"leaf{i}"] for i in range(sum(1 for k in z.files if k.startswith("leaf")))]
            history = {k: z[f"history_{k}"] for k in _HISTORY}
    except Exception as err:  # a truncated zip, a foreign file, missing arrays: all the same to the caller
        raise ValueError(f"`checkpoint`: {os.fspath(path)} is not a readable checkpoint of this harness "
                         f"({type(err).__name__}: {err}); delete it to start the run again") from None
    if meta.get("config") != config.describe():
        raise ValueError(f"`checkpoint`: {os.fspath(path)} was written for another configuration: {meta.get('config')}")
    if meta.get("seed") != _seed_text(ss):
        raise ValueError(f"`checkpoint`: {os.fspath(path)} was written with another seed ({meta.get('seed')})")
    ref, treedef = jax.tree_util.tree_flatten(template)
    step = int(meta.get("step", -1))
    if len(leaves) != len(ref) or any(a.shape != np.shape(b) or a.dtype != np.asarray(b).dtype
                                      for a, b in zip(leaves, ref)) or not 0 < step <= config.steps \
            or any(v.shape != (step,) for v in history.values()):
        raise ValueError(f"`checkpoint`: {os.fspath(path)} does not fit this model (arrays or step differ)")
    params, opt_state = jax.tree_util.tree_unflatten(treedef, leaves)
    return params, opt_state, step, history


def place(tree, sharding):
    """Host arrays onto ``sharding``, each device taking its slice (also on several hosts).

    Every process holds the whole host array (parameters, or the batch, which every process draws
    alike from the seed and step) and gives each of its devices the part the sharding assigns it
    (:func:`jax.make_array_from_callback`): the same call on one device, on a multi-device host, or
    on several hosts after ``jax.distributed.initialize``.
    """
    def one(x):
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    return jax.tree_util.tree_map(one, tree)


def _check_devices(config, devices):
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("`devices` must name at least one device")
    if config.batch % len(devices):
        raise ValueError(f"`batch` must be a multiple of the number of devices ({len(devices)}), got {config.batch}")
    return devices


@functools.lru_cache(maxsize=16)
def _step_function(config, devices):
    """The jitted step for ``config`` on ``devices`` (cached: runs of one configuration share one compilation)."""
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = jax.sharding.Mesh(np.asarray(devices), ("data",))
    opt, _ = make_optimizer(config)
    loss = partial(loss_and_accuracy, heads=config.heads, causal=config.causal, compute_dtype=config.compute_dtype)
    replicated = NamedSharding(mesh, PartitionSpec())
    split = NamedSharding(mesh, PartitionSpec("data"))

    def step(params, opt_state, inputs, targets, weights, cos, sin, factors):
        (value, acc), grads = jax.value_and_grad(loss, has_aux=True)(params, inputs, targets, weights, cos=cos, sin=sin,
                                                                     factors=factors)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value, acc, optax.tree.norm(grads)

    shard = (replicated, replicated, split, split, split, replicated, replicated, replicated)
    return jax.jit(step, in_shardings=shard, out_shardings=replicated, donate_argnums=(0, 1)), replicated, split


def train_model(config: TrainConfig, *, rng=None, checkpoint=None, stop_after: int | None = None, devices=None,
                progress: bool = True, desc: str | None = None) -> TrainResult:
    """Train one model.

    Parameters
    ----------
    config : TrainConfig
        Sizes, optimiser, scale, objective.
    rng : None, int, SeedSequence or Generator
        The run's seed (SciPy SPEC 7): child 0 initialises the parameters, child 1 orders the data.
    checkpoint : str or PathLike, optional
        A checkpoint file: resumed from when it exists, written every ``config.checkpoint_every``
        steps and at the end.
    stop_after : int, optional
        Return after this many steps in all, without writing a checkpoint (as if the process were
        stopped there); ``finished`` is then False.
    devices : sequence of jax devices, optional
        Devices the batch is sharded over (default ``jax.devices()``); ``config.batch`` must be a
        multiple of their number.
    progress : bool
        A progress bar with the loss and the training bytes per second.
    desc : str, optional
        The bar's label (default: the scale's label).

    Returns
    -------
    TrainResult
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"`config` must be a TrainConfig, got {type(config).__name__}")
    devices = _check_devices(config, devices)
    if stop_after is not None and (not isinstance(stop_after, int) or stop_after < 0):
        raise ValueError(f"`stop_after` must be an integer >= 0, got {stop_after!r}")
    t_start = time.perf_counter()
    ss, init_seed, data_seed = _children(rng)
    opt, schedule = make_optimizer(config)
    step_fn, replicated, split = _step_function(config, tuple(devices))
    params = init_params(config, init_seed)
    opt_state = opt.init(params)
    history = {k: np.full(config.steps, np.nan, dtype=np.float64) for k in _HISTORY}
    start = 0
    if checkpoint is not None and os.path.exists(checkpoint):
        params, opt_state, start, old = load_checkpoint(checkpoint, config, (params, opt_state), ss)
        for k, v in old.items():
            history[k][:start] = v
    params, opt_state = place((params, jax.device_get(opt_state)), replicated)
    cos, sin = place(rope_tables(config, config.train_length), replicated)
    factors = place(model_factors(config, config.train_length), replicated)
    end = config.steps if stop_after is None else max(start, min(config.steps, stop_after))
    bar = progress_bar(total=config.steps, initial=start, desc=desc or f"train {config.label()}", unit="step",
                       disable=not progress)
    diverged, message = False, ""
    t_steps, tokens, step = None, 0, start
    try:
        for step in range(start, end):
            b = train_batch(config, data_seed, step)
            args = place((b.inputs, b.targets, b.weights), split)
            params, opt_state, loss, acc, gnorm = step_fn(params, opt_state, *args, cos, sin, factors)
            loss = float(loss)
            history["loss"][step], history["accuracy"][step] = loss, float(acc)
            history["lr"][step], history["grad_norm"][step] = float(schedule(step)), float(gnorm)
            if t_steps is None:
                t_steps = time.perf_counter()  # the first step compiles: rates count from the second
            else:
                tokens += config.tokens_per_step()
            if not math.isfinite(loss) or loss > DIVERGENCE_LOSS:
                diverged = True
                message = (f"diverged at step {step + 1}: training loss {loss:.4g} "
                           f"({'not finite' if not math.isfinite(loss) else f'> {DIVERGENCE_LOSS:.3g} = 2 ln {VOCAB}'})")
                step += 1
                break
            if progress and (step + 1) % 10 == 0 and tokens:
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens / (time.perf_counter() - t_steps):.0f}", refresh=False)
            bar.update()
            if checkpoint is not None and ((step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps) \
                    and (stop_after is None or step + 1 < stop_after):
                _save(checkpoint, jax.device_get(params), jax.device_get(opt_state), step + 1, config, ss, history)
        else:
            step = end
    finally:
        bar.close()
    rate = tokens / (time.perf_counter() - t_steps) if tokens else float("nan")
    steps_done = step
    hist = {k: v[:steps_done].copy() for k, v in history.items()}
    return TrainResult(config=config, params=jax.tree_util.tree_map(np.asarray, jax.device_get(params)), history=hist,
                       steps=steps_done, finished=steps_done == config.steps and not diverged, diverged=diverged,
                       message=message, seconds=time.perf_counter() - t_start, tokens_per_second=rate,
                       resumed_from=start, seed=(ss.entropy, ss.spawn_key))


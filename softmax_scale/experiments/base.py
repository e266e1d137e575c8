"""The interface every study implements, and the one runner that runs any of them resumably.

An :class:`Experiment` says what its work is (a configuration with a quick form, its tasks, a
task runner returning rows), where the rows go (its columns, result file and reader), and what
its rows mean (markdown summaries, figures drawn from the table, and :class:`Evidence`: the
comparisons its rows support).  :func:`run_experiment` runs the tasks that its result file does
not hold yet through :func:`softmax_scale.experiments.sweep.run_sweep` and returns the file read
back; ``softmax-scale run NAME`` is that function on the command line.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from .._util.store import ResultStore, format_value, read_table
from .._util.validation import check_int

__all__ = ["EXPERIMENTS", "LM_TASKS", "RESULTS", "Evidence", "Experiment", "applied_at_test", "at_test_label",
           "resolve_experiment", "run_experiment"]

#: The folder of the committed result files (inside a source checkout): what ``make figures`` redraws from.
RESULTS = Path(__file__).resolve().parents[2] / "figures"

#: The values of :attr:`Evidence.task` that are language modelling; any other task names the retrieval of one
#: key (a copy, a pass key, the first occurrence of a token).
LM_TASKS = ("masked bytes", "next byte", "next token")


_AT_TEST = " at test"


def at_test_label(trained: str, scale: str) -> str:
    """The :attr:`Evidence.scale` of ``scale`` applied at test time only to a model trained with ``trained``.

    ``at_test_label("standard", "qwen_logn@64")`` is ``"standard + qwen_logn@64 at test"``.
    """
    return f"{trained} + {scale}{_AT_TEST}"


def applied_at_test(label: str) -> bool:
    """Whether an :attr:`Evidence.scale` names a scale applied at test time only (:func:`at_test_label`), not trained in."""
    return label.endswith(_AT_TEST)


@dataclass(frozen=True)
class Evidence:
    """One comparison that an experiment's rows support: a scale against a reference, in one situation.

    Attributes
    ----------
    experiment : str
        The experiment's name.
    model : str
        The model (``"byte-level masked LM"``, ``"SmolLM2-135M"``, ...).
    size : int
        Its size, in ``size_unit``.
    size_unit : {"parameters", "d_model"}
    rope : str
        The RoPE variant at test time (``"none"`` for a model without rotary positions).
    task : str
        What the model predicts: one of :data:`LM_TASKS` (``"masked bytes"``, ``"next byte"``,
        ``"next token"``) for language modelling; any other name is a retrieval task.
    multiple : float
        The test length (or position) as a multiple of the training length ``L``.
    scale : str
        The scale measured: trained in, or applied at test time only to a model trained with another
        (labelled by :func:`at_test_label`).
    reference : str
        The scale it is measured against.
    metric : str
        ``"loss"`` (nats; lower is better) or ``"accuracy"`` (a fraction; higher is better).
    difference : float
        ``scale`` minus ``reference``: the mean over seeds of the per-seed differences when the
        runs are paired by seed.
    spread : float
        The sample standard deviation of those differences over seeds (NaN with one seed).
    seeds : tuple of int
        The seeds the difference is over (paired by seed).
    head_dim : int
        The model's head dimension (0: not stated).
    train_length : int
        Its training length ``L``, in ``length_unit`` (0: not stated).
    length_unit : str
        What a position is: ``"bytes"``, ``"tokens"``, ``"bits"`` (``""``: not stated).
    replicates : {"seeds", "documents", "prompts"}
        What :attr:`seeds` count: training seeds, or documents or prompts one model was run on.
    values : tuple of float
        The paired differences themselves, one per replicate in the order of :attr:`seeds` (empty:
        not given; then only :attr:`difference` and :attr:`spread` are known).
    binary : bool
        Whether each replicate's outcome is 0 or 1 (a pass key retrieved or not), so that each
        paired difference is -1, 0 or 1.
    """

    experiment: str
    model: str
    size: int
    size_unit: str
    rope: str
    task: str
    multiple: float
    scale: str
    reference: str
    metric: str
    difference: float
    spread: float
    seeds: tuple
    head_dim: int = 0
    train_length: int = 0
    length_unit: str = ""
    replicates: str = "seeds"
    values: tuple = ()
    binary: bool = False

    def __post_init__(self):
        if self.values and len(self.values) != len(self.seeds):
            raise ValueError(f"`values` must have one paired difference per replicate ({len(self.seeds)}), "
                             f"got {len(self.values)}")
        if self.binary and any(v not in (-1.0, 0.0, 1.0) for v in self.values):
            raise ValueError("`values` of a binary outcome must be -1, 0 or 1")


class Experiment:
    """A study: its tasks, the rows they write, and what the rows say.

    Subclasses set the class attributes and implement :meth:`config`, :meth:`tasks`,
    :meth:`run_task`, :meth:`task_cells`, :meth:`expected_rows`, :meth:`header` and
    :meth:`summaries`; the rest has defaults.

    Attributes
    ----------
    name : str
        The registry key (``softmax-scale run NAME``).
    description : str
        One line for ``--help``.
    file_stem : str
        The result file is ``out/<file_stem>.csv`` (``<file_stem>_quick.csv`` in quick form).
    columns : tuple of str
        The result file's columns.
    text, ints : tuple of str
        Columns read back as strings and as integers (the others are floats).
    key : tuple of str
        The leading columns that name a block of rows (:class:`~softmax_scale._util.store.ResultStore`).
    task_columns : tuple of str
        The leading columns that name the task that wrote a row (a prefix of ``key``).
    match : tuple of str
        Header lines that must agree for a run to resume an existing file.
    in_process : bool
        Run the tasks one after the other in this process (instead of a pool of workers).
    figure_names : tuple of str
        Figures of :func:`softmax_scale.plotting.all_figures` drawn from the experiment's table.
    float_format : str
        Format of the float cells.
    """

    name = ""
    description = ""
    file_stem = ""
    columns: tuple = ()
    text: tuple = ()
    ints: tuple = ()
    key: tuple = ()
    task_columns: tuple = ()
    match: tuple = ()
    in_process = False
    figure_names: tuple = ()
    float_format = ".9g"

    # -- the work -------------------------------------------------------------------------

    def config(self, quick: bool = False):
        """The configuration (a frozen dataclass with a ``quick`` field), full or in its quick form."""
        raise NotImplementedError

    def tasks(self, config, *, out=None, progress: bool = False) -> list:
        """The tasks of ``config``, in their canonical order (the order of the result file); ``out`` the result folder."""
        raise NotImplementedError

    def run_task(self, task) -> list:
        """Run one task; its rows (tuples in the order of :attr:`columns`)."""
        raise NotImplementedError

    def task_cells(self, task) -> tuple:
        """The values of :attr:`task_columns` in the rows of ``task``."""
        raise NotImplementedError

    def expected_rows(self, task) -> int:
        """Rows a finished task writes."""
        raise NotImplementedError

    def task_key(self, task) -> tuple:
        """:meth:`task_cells` as written in the file (strings)."""
        return tuple(format_value(v, self.float_format) for v in self.task_cells(task))

    def block_rows(self, key: tuple, expected: dict) -> int:
        """Rows a complete block with ``key`` (cells as written) has; ``expected`` maps task keys to rows.

        A block of a task not in ``expected`` counts as incomplete (dropped on resume).
        """
        return expected.get(tuple(key[: len(self.task_columns)]), -1)

    def is_done(self, store, task) -> bool:
        """Whether ``store`` holds ``task``'s rows (whole)."""
        return store.has(self.task_key(task), self.expected_rows(task))

    def task_finished(self, task) -> None:
        """Called in the main process once ``task``'s rows are written (e.g. to remove its checkpoint)."""

    def header(self, config, tasks, command: str | None) -> dict:
        """The provenance lines of a new result file (:attr:`match` among them)."""
        raise NotImplementedError

    # -- the results ----------------------------------------------------------------------

    def result_path(self, config, out="figures") -> Path:
        """``out/<file_stem>.csv``, ``..._quick.csv`` for the quick form."""
        return Path(out) / f"{self.file_stem}{'_quick' if config.quick else ''}.csv"

    def read(self, path):
        """The result file read back (numpy only)."""
        return read_table(path, self.columns, text=self.text, ints=self.ints)

    def summaries(self, table) -> list:
        """The result as markdown tables (strings), in the order they are printed."""
        raise NotImplementedError

    def figures(self, drawings: dict) -> list:
        """``(name, function)`` pairs: each ``function(table=table)`` returns a :class:`matplotlib.figure.Figure`.

        ``drawings`` maps the name of every figure of :func:`softmax_scale.plotting.all_figures` to its function
        (:func:`softmax_scale.plotting.save_figures` passes it: the figures sit above the experiments).
        """
        return [(name, drawings[name]) for name in self.figure_names]

    def evidence(self, table) -> list:
        """What the rows of ``table`` say, as :class:`Evidence` (none by default)."""
        return []


_PACKAGE = __name__.rpartition(".")[0]
#: Name -> the module defining it (as its ``EXPERIMENT``), in the order ``run --help`` lists them.
_MODULES = {"alpha_table": "alpha_table", "real_heads": "real_heads", "real_extrapolation": "real_extrapolation",
            "mlm": "mlm", "alpha": "alpha", "causal": "causal", "copy": "copy", "passkey": "passkey", "size": "size",
            "first": "first", "real_passkey": "real_passkey", "real_copy": "real_copy", "engine_cost": "engine_cost"}


class _Registry(MutableMapping):
    """Name -> :class:`Experiment`, importing an experiment's module on first lookup.

    Another experiment is added by assigning it (``EXPERIMENTS["toy"] = ToyExperiment()``) and
    removed with ``del``.
    """

    def __init__(self, modules: dict):
        self._modules = dict(modules)
        self._loaded: dict = {}

    def __getitem__(self, name):
        if name not in self._loaded:
            if name not in self._modules:
                raise KeyError(name)
            self._loaded[name] = importlib.import_module(f"{_PACKAGE}.{self._modules[name]}").EXPERIMENT
        return self._loaded[name]

    def __setitem__(self, name, experiment):
        if not isinstance(experiment, Experiment):
            raise TypeError(f"`experiment` must be an Experiment, got {type(experiment).__name__}")
        if not isinstance(name, str) or name != experiment.name:
            raise ValueError(f"`name` must be the experiment's name {experiment.name!r}, got {name!r}")
        self._modules.pop(name, None)
        self._loaded[name] = experiment

    def __delitem__(self, name):
        if name not in self:
            raise KeyError(name)
        self._modules.pop(name, None)
        self._loaded.pop(name, None)

    def __iter__(self):
        return iter(dict.fromkeys([*self._modules, *self._loaded]))

    def __len__(self):
        return len(set(self._modules) | set(self._loaded))

    def __contains__(self, name):
        return name in self._modules or name in self._loaded


#: Every experiment by name (see the module docstring).
EXPERIMENTS = _Registry(_MODULES)


def resolve_experiment(experiment) -> Experiment:
    """``experiment`` itself, or the experiment of :data:`EXPERIMENTS` it names."""
    if isinstance(experiment, Experiment):
        return experiment
    if not isinstance(experiment, str) or experiment not in EXPERIMENTS:
        raise ValueError(f"`experiment` must be one of {sorted(EXPERIMENTS)}, got {experiment!r}")
    return EXPERIMENTS[experiment]


def run_experiment(experiment, *, quick: bool = False, seeds: int | None = None, config=None, out="figures", path=None,
                   scheduler: str | None = None, workers: int = 2, executor=None, overwrite: bool = False,
                   progress: bool = True, command: str | None = None):
    """Run (or resume) an experiment and write its result file; the file read back.

    Parameters
    ----------
    experiment : str or Experiment
        A name of :data:`softmax_scale.experiments.EXPERIMENTS`, or an experiment.
    quick : bool
        The quick form of its configuration (small models and grids: checks the pipeline, not the science).
    seeds : int, optional
        Seeds per trained scale, for the experiments that have seeds.
    config : optional
        Another configuration (the experiment's config dataclass); ``quick`` is then ignored.
    out : str or PathLike
        Folder of the result file (and of training checkpoints).
    path : str or PathLike, optional
        The result file itself, instead of the one ``out`` names.
    scheduler : str, optional
        Address of a Dask scheduler to run the tasks on.
    workers : int
        Local worker processes (0: run in this process).
    executor : concurrent.futures.Executor, optional
        Any executor, instead of the local pool or ``scheduler``.
    overwrite : bool
        Start a new result file even if one exists.
    progress : bool
        Progress bars.
    command : str, optional
        The command recorded in the header.

    Returns
    -------
    object
        What the experiment's reader returns for the result file.
    """
    from .sweep import dask_executor, run_sweep

    exp = resolve_experiment(experiment)
    workers = check_int(workers, "workers", minimum=0, maximum=1024)
    cfg = exp.config(quick) if config is None else config
    if seeds is not None:
        if not any(f.name == "seeds" for f in dataclasses.fields(cfg)):
            raise ValueError(f"`seeds`: the experiment {exp.name!r} has no seeds")
        cfg = dataclasses.replace(cfg, seeds=check_int(seeds, "seeds", minimum=1, maximum=1000))
    target = Path(path) if path is not None else exp.result_path(cfg, out)
    tasks = exp.tasks(cfg, out=target.parent, progress=progress)
    header = exp.header(cfg, tasks, command)
    store = ResultStore(target, header, exp.columns, key=exp.key, match=exp.match, overwrite=overwrite,
                        float_format=exp.float_format)
    if scheduler is not None:
        with dask_executor(scheduler) as ex:
            run_sweep(exp, tasks, store, executor=ex, progress=progress)
    else:
        run_sweep(exp, tasks, store, executor=executor, workers=workers, progress=progress)
    return exp.read(target)

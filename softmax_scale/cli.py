"""The ``softmax-scale`` command line.

Subcommands: ``advise``, ``alpha``, ``temperature``, ``fit``, ``stats``, ``scale``, ``entropy``, ``engines``, ``figures``,
``table``, ``heads``, ``extrapolate``, ``train``, ``measure`` and ``run`` (any experiment of
:data:`softmax_scale.experiments.EXPERIMENTS`; ``table``, ``heads``, ``extrapolate`` and ``train``
are the names users know for some of them).  Every subcommand that prints numbers takes ``--json``.  Bad input
exits with status 2 and one line naming the parameter.  The commands on the core are in :mod:`softmax_scale._cli_theory`.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__
from ._cli_theory import (
    _cmd_alpha,
    _cmd_entropy,
    _cmd_fit,
    _cmd_scale,
    _cmd_stats,
    _cmd_table,
    _cmd_temperature,
    _pinned_defaults,
    _schemes_epilog,
)
from ._util.output import emit as _emit
from ._util.output import number as _number
from ._util.output import plural as _plural
from ._util.validation import check_int, check_output_dir
from .objectives.typical import MC_TRIALS

__all__ = ["main"]


#: advise's three required numbers, as a missing one is named.
_ADVISE_NEEDS = {"d": "the head dimension", "train_length": "the training length L", "n": "the length it is run at"}


def _cmd_advise(args):
    from .advice import advise, own_result

    if args.model is not None:
        if args.evidence is not None:
            raise ValueError("`--model` and `--evidence` name the same thing: pass one")
        args.evidence = own_result(args.model, name="--model")
    needs = _ADVISE_NEEDS if args.config is None and args.evidence is None else {"n": _ADVISE_NEEDS["n"]}
    if missing := [k for k in needs if getattr(args, k) is None]:
        raise ValueError(" and ".join(f"`--{k.replace('_', '-')}` ({_ADVISE_NEEDS[k]})" for k in missing) + " required")
    for k in (k for k in _ADVISE_NEEDS if getattr(args, k) is not None):  # parsed here: a bad value is one line
        try:
            setattr(args, k, _number(getattr(args, k)))
        except argparse.ArgumentTypeError:
            raise ValueError(f"`--{k.replace('_', '-')}` must be an integer, got {getattr(args, k)!r}") from None
    from .engines import parse_engine_pins

    if args.engine and args.config is None:
        raise ValueError("`--engine` reads engines' rules for a model's config: pass `--config`")
    a = advise(args.d, args.train_length, args.n, config=args.config, rope=args.rope, task=args.task,
               results=args.results, engine_versions=parse_engine_pins(args.engine or ()), evidence=args.evidence)
    _emit(args, a.to_dict(), a.text(full=args.full))


def _experiments_epilog() -> str:
    from .experiments import EXPERIMENTS

    return "experiments: " + ", ".join(EXPERIMENTS) + " (softmax_scale.experiments.EXPERIMENTS)"


def _cmd_figures(args):
    from .figures import main_job, make_figures

    if args.no_progress:
        os.environ["TQDM_DISABLE"] = "1"  # also silences the bars of long sweeps inside the figures
    if args.only:
        done = make_figures(args.out, quick=args.quick, only=args.only, progress=not args.no_progress)
    else:
        done, table, t_table = main_job(args.out, quick=args.quick, progress=not args.no_progress)
        print(f"computed the alpha* table and its objective tables ({t_table:.1f} s)")
    for name, path, sec in done:
        print(f"wrote {path}  ({sec:.1f} s)")
    if not args.only:
        print(f"wrote {args.out}/alpha_table.md and {args.out}/alpha_table.csv\n")
        print(table.to_markdown())


def _run(args, name, *, config=None, path=None, overwrite=False, command="run"):
    """Run the experiment ``name`` as ``softmax-scale run`` does: write its file, draw its figures, print its summaries."""
    from .experiments import EXPERIMENTS, run_experiment
    from .plotting import save_figures

    if args.no_progress:
        os.environ["TQDM_DISABLE"] = "1"
    if name not in EXPERIMENTS:
        raise ValueError(f"`experiment` must be one of {list(EXPERIMENTS)}, got {name!r}")
    exp = EXPERIMENTS[name]
    workers = check_int(getattr(args, "workers", 1), "workers", minimum=1, maximum=1024)
    cfg = exp.config(args.quick) if config is None else config
    if path is None:
        path = exp.result_path(cfg, check_output_dir(args.out, "out"))
    table = run_experiment(exp, seeds=getattr(args, "seeds", None), config=cfg, path=path,
                           scheduler=getattr(args, "scheduler", None), workers=workers, overwrite=overwrite,
                           progress=not args.no_progress, command=f"softmax-scale {command} {' '.join(args.argv)}".strip())
    print(f"wrote {path}")
    if not args.no_figure:
        for png in save_figures(exp, table, path):
            print(f"wrote {png}")
    print()
    print("\n\n".join(exp.summaries(table)))


def _cmd_run(args):
    config = None
    if args.backend is not None:
        import dataclasses

        from .experiments import EXPERIMENTS

        exp = EXPERIMENTS.get(args.experiment)
        if exp is not None:
            cfg = exp.config(args.quick)
            takes = [k for k, e in EXPERIMENTS.items() if "backend" in {f.name for f in dataclasses.fields(e.config())}]
            if args.experiment not in takes:
                raise ValueError(f"`--backend` is an option of {', '.join(takes)}, not of {args.experiment}")
            config = dataclasses.replace(cfg, backend=args.backend)
    _run(args, args.experiment, config=config)


def _cmd_extrapolate(args):
    import dataclasses

    from .experiments import EXPERIMENTS

    exp = EXPERIMENTS["real_extrapolation"]
    given = {"model": args.model, "lengths": tuple(args.lengths) if args.lengths else None, "docs": args.docs,
             "schemes": tuple(args.schemes) if args.schemes else None, "ropes": tuple(args.ropes) if args.ropes else None}
    cfg = dataclasses.replace(exp.config(args.quick), **{k: v for k, v in given.items() if v is not None},
                              predict=not args.no_predict)
    path = None
    if args.out is not None and args.out.endswith(".csv"):
        check_output_dir(os.path.dirname(os.path.abspath(args.out)), "out")
        path = args.out
    elif args.out is None:
        args.out = "figures"
    _run(args, "real_extrapolation", config=cfg, path=path, overwrite=args.overwrite, command="extrapolate")


def _cmd_train(args):
    _run(args, args.experiment, command="train")


def _cmd_heads(args):
    from .experiments.real_heads import real_head_table

    if not isinstance(args.n, int) or not 4 <= args.n <= 512:
        raise ValueError(f"`n` must be an integer between 4 and 512 (tokens per window, [CLS] and [SEP] included), got {args.n!r}")
    t = real_head_table(args.model, ns=(args.n,), chunks=args.chunks, rng=args.rng, text=args.text, layers=args.layers,
                        progress=not args.no_progress)
    keys = ("sigma", "alpha_star", "entropy", "entropy_ratio", "predicted_entropy", "predicted_entropy_empirical",
            "sink", "sep", "previous", "next", "top1", "kurtosis")
    rows = []
    for a, layer in enumerate(t.layer_index):
        for h in range(t.sigma.shape[2]):
            row = {"layer": int(layer), "head": h}
            row.update({k: float(getattr(t, k)[0, a, h]) for k in keys})
            row["predicted_ratio"] = float(t.predicted_ratio[0, a, h])
            row["predicted_ratio_empirical"] = float(t.predicted_ratio_empirical[0, a, h])
            rows.append(row)
    obj = {"model": t.model, "text": t.text, "n": args.n, "chunks": t.chunks, "rng": args.rng, "heads": rows}
    lines = [f"{t.model}: every head at n = {args.n} ([CLS] and [SEP] included), {_plural(t.chunks, 'window')} of `{t.text}` "
             f"(rng {args.rng}); H/log n measured and predicted for i.i.d. scores at the head's sigma",
             f"{'layer':>5} {'head':>4} {'sigma':>8} {'alpha*':>8} {'H/log n':>8} {'normal':>8} {'empir.':>8} "
             f"{'[CLS]':>7} {'[SEP]':>7} {'prev':>7} {'next':>7} {'top1':>7} {'kurt.':>8}"]
    for r in rows:
        lines.append(f"{r['layer']:>5d} {r['head']:>4d} {r['sigma']:>8.3f} {r['alpha_star']:>8.3f} {r['entropy_ratio']:>8.3f} "
                     f"{r['predicted_ratio']:>8.3f} {r['predicted_ratio_empirical']:>8.3f} {r['sink']:>7.3f} {r['sep']:>7.3f} "
                     f"{r['previous']:>7.3f} {r['next']:>7.3f} "
                     f"{r['top1']:>7.3f} {r['kurtosis']:>8.2f}")
    _emit(args, obj, "\n".join(lines))


def _cmd_measure(args):
    from .experiments.measure import measure

    if args.no_progress:
        os.environ["TQDM_DISABLE"] = "1"
    r = measure(args.model, args.n, rope=args.rope, train_length=args.train_length,
                factors=args.factors, shapes=args.shapes, recipe=not args.no_recipe, text=args.text,
                docs=args.docs, prompts=args.prompts, adaptive=args.adaptive, spacing=args.spacing, width=args.width,
                budget=args.budget, keys=args.keys, quick=args.quick, out=args.out, overwrite=args.overwrite,
                workers=args.workers, scheduler=args.scheduler, backend=args.backend, figure_file=not args.no_figure,
                progress=not args.no_progress and not args.json,
                command=f"softmax-scale measure {' '.join(args.argv)}".strip())
    text = "\n".join([f"wrote {r.path}"] + ([f"wrote {r.figure}"] if r.figure else []) + ["", r.to_text()])
    _emit(args, r.to_json(), text)


def _cmd_engines(args):
    from .engines import engine_scales, parse_engine_pins

    t = engine_scales(args.config, args.n, versions=parse_engine_pins(args.engine or ()))
    _emit(args, t.to_json(), t.to_text())


class _Parser(argparse.ArgumentParser):
    """An argument parser whose every error (unknown option or command, missing or bad argument) is one line.

    ``softmax-scale CMD: error: ...`` on stderr, exit status 2, and where the usage is: ``--help``.
    The subcommands' parsers are of this class too.
    """

    def error(self, message):
        """Print the error in one line and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())} (usage: {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    from .schemes import ENTROPY_INVARIANT, STANDARD
    from .schemes.rope import ROPE_CHANGES

    p = _Parser(
        prog="softmax-scale",
        description="The scale in front of a softmax: gradient-optimal alpha*, exact statistics, "
        "entropy against length, published attention scales.",
    )
    p.add_argument("--version", action="version", version=f"softmax-scale {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")  # a missing one is refused in main, after unknown options
    p.commands = sub.choices

    def add(name, func, help_, epilog=None):
        extra = {"epilog": epilog(), "formatter_class": argparse.RawDescriptionHelpFormatter} if epilog else {}
        sp = sub.add_parser(name, help=help_, description=help_, **extra)
        sp.set_defaults(func=func)
        return sp

    def train_length_opt(sp):
        sp.add_argument("--train-length", type=_number, default=None, metavar="L",
                        help="pin every scheme that has a training length at L (schemes.pinned); "
                        f"default: each scheme's published default ({_pinned_defaults()})")

    def dist_opts(sp):
        sp.add_argument("--dist", default="normal", choices=["normal", "cosine"], help="score distribution (default normal)")
        sp.add_argument("--d", type=int, default=None, help="dimension for --dist cosine (e.g. 128)")

    def json_opt(sp):
        sp.add_argument("--json", action="store_true",
                        help="print JSON instead of text: counts and sizes as integers, inf and nan as null "
                        "(the fields beside them, e.g. bounded: false, say why)")

    from .objectives import REGISTRY as OBJECTIVE_REGISTRY

    sp = add("alpha", _cmd_alpha, "optimal scale alpha* for one or more n (a factor on 1/sqrt(d); --d D: on q.k)")
    sp.add_argument("n", nargs="+", type=_number, help="number(s) of keys, integers >= 2")
    sp.add_argument("--dist", default="normal", choices=["normal", "cosine"], help="score distribution (default normal)")
    sp.add_argument("--d", type=int, default=None, help="normal scores: the head dimension (prints the multiplier on "
                    "q.k, the causal value and the training caveat); cosine: the dimension (e.g. 128)")
    sp.add_argument("--objective", default="mean_field", help="; ".join(
        f"{k}: {o.what}" + (" (default)" if k == "mean_field" else "") for k, o in OBJECTIVE_REGISTRY.items()))
    sp.add_argument("--trials", type=_number, default=None,
                    help=f"Monte Carlo trials per n (typical and geometric only; default {MC_TRIALS})")
    sp.add_argument("--seed", type=_number, default=None, help="Monte Carlo seed (typical and geometric only; default 0)")
    json_opt(sp)

    from .contrastive import CONTRASTIVE_LOSSES, DIMENSIONS

    sp = add("temperature", _cmd_temperature, "contrastive temperature tau* = 1/alpha* for a batch: n (B or 2B - 1) "
             "said, each d, the mean-field sum p^2 against the exact one at the optimum")
    sp.add_argument("--batch", type=_number, required=True, metavar="B", help="batch size B, an integer >= 2")
    sp.add_argument("--d", type=_number, default=None, help="embedding dimension, an integer >= 2 (default: "
                    f"{', '.join(str(x) for x in DIMENSIONS)})")
    sp.add_argument("--loss", default="infonce", help="; ".join(f"{k}: n = {v[0]}" for k, v in CONTRASTIVE_LOSSES.items())
                    + " (default infonce)")
    json_opt(sp)

    sp = add("fit", _cmd_fit, "fit the alpha*(n) laws (sqrt_log, log, power, affine_log)")
    dist_opts(sp)
    sp.add_argument("--ns", nargs="+", type=_number, help="grid of n (default 40, 80, ..., 20000)")
    sp.add_argument("--objective", default="mean_field", help="objective whose alpha* is fitted")
    json_opt(sp)

    sp = add("stats", _cmd_stats, "E[sum p^2], E[H], E[G], E[log Z] at one scale and n")
    sp.add_argument("alpha", type=_number, help="scale >= 0")
    sp.add_argument("n", type=_number, help="number of keys, integer >= 2")
    dist_opts(sp)
    sp.add_argument("--method", default="exact", choices=["exact", "mc"], help="exact quadrature (default) or Monte Carlo")
    sp.add_argument("--trials", type=_number, default=None, help="Monte Carlo trials (--method mc only; default 10000)")
    sp.add_argument("--seed", type=_number, default=None, help="Monte Carlo seed (--method mc only; default 0)")
    json_opt(sp)

    sp = add("scale", _cmd_scale, "a published attention scale (multiplier on q.k) at n keys, head dimension d",
             epilog=_schemes_epilog)
    sp.add_argument("n", type=_number, nargs="?", help="number of keys (or 1-indexed position)")
    sp.add_argument("d", type=_number, nargs="?", help="head dimension")
    sp.add_argument("--list", action="store_true", help="list every scheme with its formula, defaults and source")
    sp.add_argument("--scheme", default=STANDARD, help="scheme key (see `softmax-scale scale --list`)")
    train_length_opt(sp)
    sp.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="scheme parameter (after --train-length), repeatable; 'none' for None")
    json_opt(sp)

    sp = add("advise", _cmd_advise, "the multiplier on q.k to run with for head dimension d, trained to L, run at n: "
             "the model's own recipe unless the evidence supports a change; its scope, the published scales, the "
             "evidence", epilog=lambda: "--rope (the rotation "
             "frequencies only; the scale is apart):\n" + "\n".join(f"  {k:<12} {v}" for k, v in ROPE_CHANGES.items()))
    for k, v in _ADVISE_NEEDS.items():
        flags = [f"--{k.replace('_', '-')}"] + (["--trained-length"] if k == "train_length" else [])
        sp.add_argument(*flags, dest=k, default=None, metavar="L" if k == "train_length" else None,
                        help=v + (" (with --config: the length the recipe covers unless given)"
                                  if k == "train_length" else ""))
    sp.add_argument("--config", default=None, metavar="FILE", help="a model's config.json or GGUF file: its head "
                    "dimension, the length its recipe covers and its RoPE variant where --d, --train-length, --rope "
                    "are not given; the baseline becomes its authors' whole multiplier on q.k")
    sp.add_argument("--evidence", default=None, metavar="RESULT.csv", help="a result file of softmax-scale measure on "
                    "your own model: read first (d and L from it where not given), the other results beside it")
    sp.add_argument("--model", default=None, metavar="MODEL.gguf", help="the GGUF file you measured: its result "
                    "file (found by the file's SHA-256 in ./measure or the committed figures/) read as --evidence")
    sp.add_argument("--engine", nargs="+", metavar="NAME==VERSION", help="with --config: the engine versions you run "
                    "(e.g. vllm==0.11.0), to read their rules at; the others at their newest known")
    sp.add_argument("--rope", default=None, help="the RoPE variant past L (below); default: every variant measured")
    sp.add_argument("--task", default="lm", help="lm (language modelling; default) or retrieval (one key to find)")
    sp.add_argument("--results", default=None, metavar="DIR",
                    help="folder of the experiments' result files (default: the committed figures/)")
    sp.add_argument("--full", action="store_true", help="print the rule, the published scales and the measured "
                    "comparisons also where n is inside L (there the answer is the baseline and they are left out)")
    json_opt(sp)

    sp = add("entropy", _cmd_entropy, "expected attention entropy against n under published scales",
             epilog=_schemes_epilog)
    sp.add_argument("--schemes", nargs="+", default=[STANDARD, ENTROPY_INVARIANT],
                    help=f"scheme keys (default {STANDARD} {ENTROPY_INVARIANT})")
    train_length_opt(sp)
    sp.add_argument("--param", action="append", default=[], metavar="SCHEME.KEY=VALUE",
                    help="a parameter of one scheme (after --train-length), repeatable")
    sp.add_argument("--ns", nargs="+", type=_number, default=[512, 1024, 4096, 32768], help="values of n")
    sp.add_argument("--d", type=int, default=128, help="head dimension (default 128)")
    sp.add_argument(
        "--score-model", default="normal", help="normal (i.i.d. unit-variance q, k; default) or cosine (norm sqrt(d))"
    )
    sp.add_argument(
        "--match", type=_number, default=None, help="signal-plus-noise: one key at this cosine with the query"
    )
    json_opt(sp)

    sp = add("figures", _cmd_figures, "regenerate every figure and the alpha* table (the main job)")
    sp.add_argument("--out", default="figures", help="output directory (default figures/)")
    sp.add_argument("--quick", action="store_true", help="small grids, for a smoke run (< 60 s)")
    sp.add_argument("--only", nargs="+", help="only these figure names")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")

    sp = add("extrapolate", _cmd_extrapolate,
             "a real decoder (SmolLM2-135M) past its training length: loss and head entropy per (RoPE, scale) pair")
    sp.add_argument("--model", default="smollm2", help="registered decoder (default smollm2)")
    sp.add_argument("--lengths", nargs=2, type=_number, metavar=("L", "N"),
                    help="training length the scales are pinned at, and evaluation length (default 8192 16384)")
    sp.add_argument("--docs", type=_number, default=None, help="number of documents (default 2; 1 with --quick)")
    sp.add_argument("--schemes", nargs="+", help="softmax scales (default standard qwen_logn yarn entropy_invariant)")
    sp.add_argument("--ropes", nargs="+", help="RoPE variants (default none ntk yarn)")
    sp.add_argument("--out", default=None, metavar="DIR",
                    help="output folder, as for `figures` (default figures/; the CSV is real_extrapolation.csv, "
                    "real_extrapolation_quick.csv with --quick); a path ending in .csv names the file itself")
    sp.add_argument("--quick", action="store_true", help="pretend training length 256, n = 768, one document, 2 ropes x 3 scales")
    sp.add_argument("--overwrite", action="store_true", help="start a new CSV instead of resuming")
    sp.add_argument("--no-predict", action="store_true", help="skip the i.i.d. predictions")
    sp.add_argument("--no-figure", action="store_true", help="do not draw the figure")
    sp.add_argument("--no-progress", action="store_true", help="no progress bars")

    sp = add("heads", _cmd_heads, "per-head softmax statistics of a real model on real text (needs the MiniLM weights)")
    sp.add_argument("--model", default="minilm", help="encoder (default minilm: all-MiniLM-L6-v2)")
    sp.add_argument("--n", type=_number, default=512, help="tokens per window, [CLS] and [SEP] included (4..512; default 512)")
    sp.add_argument("--chunks", type=_number, default=8, help="windows of the text (default 8)")
    sp.add_argument("--rng", type=_number, default=0, help="seed of the window offsets (default 0)")
    sp.add_argument("--text", default="pydoc_topics", help="corpus name (default pydoc_topics)")
    sp.add_argument("--layers", nargs="+", type=_number, help="only these layers (default all)")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar (one bar over the layers otherwise)")
    json_opt(sp)

    def run_opts(sp, seeds_help):
        sp.add_argument("--quick", action="store_true", help="the quick form: small models and grids (checks the pipeline)")
        sp.add_argument("--seeds", type=_number, default=None, help=seeds_help)
        sp.add_argument("--scheduler", default=None, metavar="ADDRESS", help="a Dask scheduler to run on (default: local)")
        sp.add_argument("--workers", type=_number, default=2, help="local worker processes (default 2)")
        sp.add_argument("--out", default="figures", help="folder of the CSV and figures (default figures/)")
        sp.add_argument("--no-figure", action="store_true", help="do not draw the figures")
        sp.add_argument("--no-progress", action="store_true", help="no progress bars")

    sp = add("run", _cmd_run, "run an experiment (resumably: a rerun computes only what its CSV lacks)",
             epilog=_experiments_epilog)
    sp.add_argument("experiment", metavar="EXPERIMENT", help="an experiment's name (listed below)")
    run_opts(sp, "seeds per trained scale, for the training experiments (default: the experiment's)")
    sp.add_argument("--backend", default=None,
                    help="the real decoders' pass (real_passkey, real_copy): numpy (default) or jax, on the JAX device "
                         "(JAX_PLATFORMS=cuda with jax[cuda] installed); part of the file's resume check")

    sp = add("train", _cmd_train, "train small byte-level transformers with the scale trained in (`run` for mlm, alpha, causal)")
    sp.add_argument("--experiment", required=True, help="mlm (the note's table), alpha (the gradient-maximising alpha) or causal "
                         "(decoders trained at L, tested at 8L and 16L under RoPE variants and test-time scales)")
    run_opts(sp, "seeds per scale (default 3 for mlm and causal, 2 for alpha; 2 with --quick)")

    sp = add("measure", _cmd_measure, "your own GGUF decoder past its training length: next-token loss and pass keys "
             "against the multiplier on q.k, the minimising multiplier with its interval over documents")
    sp.add_argument("model", metavar="MODEL.gguf", help="a GGUF decoder (llama, smollm3, qwen2, qwen3)")
    sp.add_argument("--n", nargs="+", type=_number, required=True, help="sequence lengths in tokens, each above L")
    sp.add_argument("--rope", default="file", help="file (the RoPE scaling the file carries; default) or a variant: "
                    "none, pi, ntk, dynamic_ntk, yarn, set for L and each n")
    sp.add_argument("--train-length", type=_number, default=None, metavar="L",
                    help="the training length (default: the file's, its original context length under a RoPE scaling)")
    sp.add_argument("--factors", nargs="+", type=_number, default=None,
                    help="constant multipliers on q.k past L (default 1 1.05 1.1 1.2 1.3 1.5; 1 is always read)")
    sp.add_argument("--shapes", nargs="*", default=None,
                    help="published shapes from the scheme registry (default qwen_logn yarn llama4)")
    sp.add_argument("--no-recipe", action="store_true", help="do not read the multiplier the file's recipe applies")
    sp.add_argument("--text", nargs="+", default=None, metavar="FILE",
                    help="text files cut into documents of n tokens (default: texts that ship with Python)")
    sp.add_argument("--docs", type=_number, default=6, help="documents per length, the most under --width (default 6)")
    sp.add_argument("--prompts", type=_number, default=12, help="pass-key prompts per length (default 12; 0: none)")
    sp.add_argument("--keys", type=_number, default=1, help="keys per prompt (default 1; K > 1: the multi-key variant, "
                    "each prompt one haystack of K keys, each asked by its own question continued from it)")
    sp.add_argument("--adaptive", type=_number, default=0, metavar="CELLS",
                    help="read CELLS constants on the first document one after another (bracket the lowest loss, "
                    "then refine it), and on the others 1 and the lowest with its two neighbours (default 0: --factors)")
    sp.add_argument("--spacing", type=_number, default=0.05, help="least distance between two adaptive constants (0.05)")
    sp.add_argument("--width", type=_number, default=None, metavar="HALF",
                    help="read documents one at a time (at least 4, at most --docs) until the minimiser's 95%% interval "
                    "is at most ±HALF wide, then the prompts (default 0.02 with --adaptive, else 0: every document)")
    sp.add_argument("--budget", type=_number, default=None, metavar="MINUTES",
                    help="fit a new run in MINUTES: time its first unit, then shrink documents and prompts to fit")
    sp.add_argument("--quick", action="store_true", help="one document, at most 1 prompt, 3 constants and the yarn "
                    "shape (unless --factors/--shapes), past the model's L; where n is not past it, a smoke test at a "
                    "pretend L of 15/16 of n that prints no minimiser")
    sp.add_argument("--out", default="measure", help="folder of measure.csv and its figure, or a path ending in .csv "
                    "(default measure/)")
    sp.add_argument("--overwrite", action="store_true", help="start a new CSV instead of resuming")
    sp.add_argument("--workers", type=_number, default=0, help="local worker processes (default 0: this process)")
    sp.add_argument("--scheduler", default=None, metavar="ADDRESS", help="a Dask scheduler to run the units on")
    sp.add_argument("--backend", default="numpy", help="numpy (default) or jax (the JAX device; a GPU with jax[cuda])")
    sp.add_argument("--no-figure", action="store_true", help="do not draw the figure")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")
    json_opt(sp)

    sp = add("engines", _cmd_engines, "the multiplier on q.k each engine applies to a model's config, the authors' own, "
             "and how to set it in each engine that differs")
    sp.add_argument("config", help="a config.json (Hugging Face) or .gguf file")
    sp.add_argument("--n", nargs="+", type=_number, help="positions, as 1-based numbers of keys (default 1 2048 4096 8192 32768)")
    sp.add_argument("--engine", nargs="+", action="extend", metavar="NAME==VERSION",
                    help="read these engines' rules at these versions (e.g. vllm==0.11.0 transformers==4.51.0; "
                    "repeatable, one pin per engine); the others at their newest known; a rule not read at a "
                    "version prints unknown")
    json_opt(sp)

    sp = add("table", _cmd_table, "print the alpha* table with the fitted laws")
    sp.add_argument("--d", type=int, default=128, help="dimension of the cosine scores (default 128)")
    sp.add_argument("--quick", action="store_true",
                    help="only the rows the full table prints (n = 40, 80, 160, ..., 20000), the laws fitted to them alone")
    json_opt(sp)
    return p


def main(argv=None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named before a missing command: `softmax-scale --frobnicate` is about --frobnicate
        (parser.commands[args.command] if args.command else parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.error(f"a COMMAND is required, one of: {', '.join(parser.commands)}")
    args.argv = list(sys.argv[1:] if argv is None else argv)[1:]
    try:
        args.func(args)
    except (ValueError, TypeError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"softmax-scale {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. an output directory that cannot be written
        if isinstance(exc, BrokenPipeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0
        print(f"softmax-scale {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("softmax-scale: interrupted", file=sys.stderr)
        return 130
    return 0

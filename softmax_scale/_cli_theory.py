"""The command line's commands on the core: ``alpha``, ``temperature``, ``fit``, ``stats``, ``scale``, ``entropy``, ``table``.

Each ``_cmd_NAME(args)`` runs the subcommand ``NAME`` of :mod:`softmax_scale.cli`, which defines their arguments.
"""

from __future__ import annotations

import argparse

import numpy as np

from ._util.output import emit as _emit
from ._util.output import number as _number
from ._util.output import plural as _plural
from ._util.validation import check_int
from .objectives.typical import MC_OBJECTIVES, MC_TRIALS


def _cmd_alpha(args):
    from .objectives import REGISTRY
    from .optimize import optimize_alpha

    if args.dist == "normal" and args.d is not None:  # the head dimension: the answer on q.k
        from .advice import attention_alpha

        if args.objective != "mean_field" or args.trials is not None or args.seed is not None:
            raise ValueError(f"`--d` with normal scores is the head dimension, answered for --objective mean_field "
                             f"(the note's alpha*); got --objective {args.objective}"
                             + (" with --trials/--seed" if args.trials is not None or args.seed is not None else ""))
        r = attention_alpha(args.n if len(args.n) > 1 else args.n[0], args.d)
        _emit(args, r.to_dict(), r.text())
        return
    ns = args.n if len(args.n) > 1 else args.n[0]
    mc = args.objective in MC_OBJECTIVES
    if mc:  # seeded by default, as `stats --method mc` is
        kw = {"trials": MC_TRIALS if args.trials is None else args.trials, "rng": 0 if args.seed is None else args.seed}
    else:  # passed on only when given, for the deterministic objective to refuse
        kw = {k: v for k, v in (("trials", args.trials), ("rng", args.seed)) if v is not None}
    res = optimize_alpha(ns, args.dist, d=args.d, objective=args.objective, **kw)
    n_arr = np.atleast_1d(res.n)
    a_arr = np.atleast_1d(res.alpha)
    v_arr = np.atleast_1d(res.value)
    se_arr = np.broadcast_to(res.alpha_se, a_arr.shape)
    obj = {
        "objective": res.objective,
        "dist": res.dist,
        "n": n_arr,
        "alpha": a_arr,
        "alpha_se": se_arr,
        "value": v_arr,
        "bounded": np.atleast_1d(res.bounded),
        "success": np.atleast_1d(res.success),
        "message": res.message,
    }
    if len(args.n) == 1:
        obj = {k: (v[0] if isinstance(v, np.ndarray) else v) for k, v in obj.items()}
    if mc:
        obj.update(trials=kw["trials"], seed=kw["rng"])
    how = f"; Monte Carlo, {_plural(int(kw['trials']), 'trial')} per n, seed {int(kw['rng'])}" if mc else ""
    on = ("the cosine (tau = 1/alpha*; a contrastive batch: softmax-scale temperature)" if args.dist == "cosine"
          else "q.k/sqrt(d), unit-variance scores (--d D: the multiplier on q.k, the causal value, what training found)")
    w = max(14, *(len(str(int(n))) for n in n_arr))  # the n column fits the longest n
    lines = [f"alpha* ({res.objective}: {REGISTRY[res.objective].what}; {res.dist} scores{how})",
             f"{'n':>{w}} {'alpha*':>12}" + (f" {'SE':>9}" if mc else "") + f" {'G(alpha*)':>12}"]
    lines += [f"{int(n):>{w}d} {a:>12.6g}" + (f" {se:>9.2g}" if mc else "") + f" {v:>12.6g}"
              for n, a, se, v in zip(n_arr, a_arr, se_arr, v_arr)]
    if mc or not np.all(res.bounded):
        lines.append(res.message)
    lines.append(f"alpha* multiplies {on}")
    _emit(args, obj, "\n".join(lines))


def _cmd_temperature(args):
    from .contrastive import contrastive_temperature

    r = contrastive_temperature(args.batch, args.d, loss=args.loss)
    _emit(args, r.to_dict(), r.text())


def _cmd_fit(args):
    from .experiments.alpha_table import NOTE_GRID
    from .laws import compare_alpha_laws
    from .optimize import optimal_alpha

    ns = np.asarray(args.ns if args.ns else NOTE_GRID)
    alphas = optimal_alpha(ns, args.dist, d=args.d, objective=args.objective)
    fits = compare_alpha_laws(ns, alphas)
    obj = {
        f: {"formula": fit.formula, "params": fit.params, "rmse": fit.rmse, "max_rel_error": fit.max_rel_error, "r2": fit.r2}
        for f, fit in fits.items()
    }
    text = f"laws fitted to alpha* ({args.objective}, {args.dist}) over {_plural(ns.size, 'value')} of n, best first:\n"
    text += "\n".join(f"  {fit}" for fit in fits.values())
    _emit(args, obj, text)


def _cmd_stats(args):
    from .stats import softmax_stats

    kw = {k: v for k, v in (("trials", args.trials), ("rng", args.seed)) if v is not None}  # exact refuses them
    if args.method == "mc":
        kw.setdefault("rng", 0)
    r = softmax_stats(args.alpha, args.n, args.dist, d=args.d, method=args.method, **kw)
    names = ("sum_p2", "entropy", "grad", "log_z")
    obj = {"alpha": r.alpha, "n": r.n, "dist": r.dist, "method": r.method, "trials": r.trials}
    for k in names:
        obj[k] = getattr(r, k)
        obj[k + "_se"] = getattr(r, k + "_se")
    obj["quad_error"] = r.quad_error
    labels = {"sum_p2": "E[sum p^2]", "entropy": "E[H] (nats)", "grad": "E[G]", "log_z": "E[log Z]"}
    head = f"softmax statistics at alpha = {r.alpha:g}, n = {r.n}, {r.dist} scores, method = {r.method}"
    lines = [head] + [
        f"  {labels[k]:<14} {getattr(r, k):.8g}" + (f"  +/- {getattr(r, k + '_se'):.2g}" if r.method == "mc" else "")
        for k in names
    ]
    _emit(args, obj, "\n".join(lines))


def _scheme_rows():
    from .schemes import list_schemes

    return {i.key: {"applies_to": i.applies_to, "formula": i.formula, "defaults": dict(i.defaults),
                    "pinned_at_train_length": i.pin_rule or None, "source": i.source} for i in list_schemes()}


def _show_params(params) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()) or "no parameters"


def _pinned_defaults() -> str:
    """What each scheme with a training length uses without ``--train-length``: its published defaults."""
    from .schemes import list_schemes

    return ", ".join(f"{i.key} {_show_params({k: i.defaults[k] for k in i.pin(2)})}"
                     for i in list_schemes() if i.pin is not None)


def _schemes_epilog() -> str:
    lines = ["schemes (published defaults; what --train-length L sets):"]
    for key, r in _scheme_rows().items():
        pin = f"; --train-length sets {r['pinned_at_train_length']}" if r["pinned_at_train_length"] else ""
        lines.append(f"  {key:<24} {_show_params(r['defaults'])}{pin}")
    return "\n".join(lines)


def _cmd_scale(args):
    from .schemes import SCHEMES, pinned

    if args.list:
        rows = _scheme_rows()
        text = []
        for key, r in rows.items():
            pin = f"  [--train-length L sets {r['pinned_at_train_length']}]" if r["pinned_at_train_length"] else ""
            text.append(f"{key:<24} {r['formula']}\n{'':<24} defaults: {_show_params(r['defaults'])}{pin}\n"
                        f"{'':<24} {r['source']}")
        _emit(args, rows, "\n".join(text))
        return
    if args.n is None or args.d is None:
        raise ValueError("`n` and `d` are required (or pass --list)")
    if args.train_length is not None and args.scheme in SCHEMES and SCHEMES[args.scheme].pin is None:
        raise ValueError(f"`--train-length` pins a scheme that has a training length ("
                         f"{', '.join(k for k, i in SCHEMES.items() if i.pin is not None)}); --scheme {args.scheme} has none")
    params = dict(_parse_param(p, args.scheme)[1:] for p in args.param)
    ps = pinned(args.scheme, pin_length=_train_length(args), **params)
    m = ps.scale(args.n, args.d)
    obj = {"scheme": args.scheme, "n": args.n, "d": args.d, "train_length": ps.pin_length,
           "params": dict(ps.params), "multiplier": m}
    on = "q.k" if SCHEMES[args.scheme].applies_to == "qk" else "the cosine"
    text = f"{args.scheme} ({_show_params(ps.params)}): multiplier on {on} at n = {args.n}, d = {args.d}: {float(np.squeeze(m)):.8g}"
    if on == "q.k":
        f = float(np.squeeze(ps.factor(args.n, args.d)))
        obj["factor_over_standard"] = f
        text += f" (x{f:.6g} the standard 1/sqrt(d))"
    _emit(args, obj, text)


def _train_length(args):
    """``--train-length`` as an integer ``>= 2`` (or None), named as the option."""
    return None if args.train_length is None else check_int(args.train_length, "--train-length", minimum=2)


def _parse_param(text: str, scheme: str | None = None, schemes=()):
    """``--param KEY=VALUE`` of ``scheme`` (``SCHEME.KEY=VALUE``, SCHEME among ``schemes``, when it is None).

    Returns ``(scheme, key, value)``; the key is checked against the scheme's parameters before
    the value is read.
    """
    form = "key=value" if scheme is not None else "SCHEME.KEY=VALUE with SCHEME among --schemes"
    if "=" not in text:
        raise ValueError(f"`--param` must look like {form}, got {text!r}")
    name, v = (part.strip() for part in text.split("=", 1))
    if scheme is None:
        scheme, dot, name = name.rpartition(".")
        if not dot or scheme not in schemes:
            raise ValueError(f"`--param` must look like {form}, got {text!r}")
    if name.rpartition(".")[2] == "train_length":
        raise ValueError(f"`--param {text}`: pin the training length with --train-length L (it sets every "
                         "parameter that follows from L), not with --param")
    from .schemes import SCHEMES

    if scheme in SCHEMES and name not in SCHEMES[scheme].defaults:
        known = ", ".join(sorted(SCHEMES[scheme].defaults)) or "none"
        raise ValueError(f"`--param {text}`: scheme {scheme} has no parameter {name!r} (its parameters: {known})")
    if v.lower() == "none":
        return scheme, name, None
    try:
        return scheme, name, _number(v)
    except argparse.ArgumentTypeError:
        raise ValueError(f"`{name}` must be a number or none, got {v!r} (in --param {text})") from None


def _cmd_entropy(args):
    from .entropy import entropy_curves
    from .schemes import pinned

    per_scheme = {}
    for p in args.param:
        scheme, name, value = _parse_param(p, schemes=args.schemes)
        per_scheme.setdefault(scheme, {})[name] = value
    args.train_length = _train_length(args)
    ns = np.asarray(args.ns)
    curves = entropy_curves(ns, args.schemes, d=args.d, score_model=args.score_model, match=args.match,
                            pin_length=args.train_length, scheme_params=per_scheme)
    model = args.score_model + (f" + one key at match {args.match:g}" if args.match is not None else "")
    pin = f", schemes pinned at L = {args.train_length}" if args.train_length is not None else ", published defaults"
    obj, lines = {}, [f"E[H] (nats) against n, d = {args.d}, {model} scores{pin}"]
    lines.append(f"{'scheme':<24}" + "".join(f"{int(n):>12d}" for n in ns))
    for scheme, c in curves.items():
        params = dict(pinned(scheme, pin_length=args.train_length, **per_scheme.get(scheme, {})).params)
        obj[scheme] = {"params": params, "n": ns, "alpha": c.alpha, "entropy": c.entropy,
                       "entropy_over_log_n": c.entropy_ratio}
        lines.append(f"{scheme:<24}" + "".join(f"{x:>12.5f}" for x in np.atleast_1d(c.entropy))
                     + (f"   ({_show_params(params)})" if params else ""))
        if args.match is not None:
            obj[scheme]["signal_share"] = c.signal_share
            lines.append(f"{'  signal share':<24}" + "".join(f"{x:>12.5f}" for x in np.atleast_1d(c.signal_share)))
    _emit(args, obj, "\n".join(lines))


def _cmd_table(args):
    from .experiments.alpha_table import NOTE_GRID, TABLE_ROWS, alpha_table

    table = alpha_table(np.array(TABLE_ROWS) if args.quick else NOTE_GRID, cosine_d=args.d)
    obj = {
        "n": table.ns,
        "alpha": table.columns,
        "fits": {c: {f: {"params": x.params, "rmse": x.rmse, "r2": x.r2} for f, x in fits.items()} for c, fits in table.fits.items()},
    }
    _emit(args, obj, table.to_markdown())

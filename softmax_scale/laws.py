"""Fitting laws ``alpha*(n)``: ``c sqrt(log n)``, ``c log n``, ``c (log n)^p``, ``a + b log n``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from ._util.validation import check_choice, check_choices, check_float_array, check_n_array

__all__ = ["LAW_FORMS", "LawFit", "compare_alpha_laws", "fit_alpha_law", "law_value"]

#: form -> (parameter names, formula as text)
LAW_FORMS = {
    "sqrt_log": (("c",), "c * sqrt(log n)"),
    "log": (("c",), "c * log n"),
    "power": (("c", "p"), "c * (log n)^p"),
    "affine_log": (("a", "b"), "a + b * log n"),
}


def law_value(form: str, params, n):
    """Evaluate a law at ``n`` (array_like) with parameters ``params`` (sequence, in LAW_FORMS order)."""
    check_choice(form, "form", LAW_FORMS)
    L = np.log(np.asarray(n, dtype=np.float64))
    if form == "sqrt_log":
        return params[0] * np.sqrt(L)
    if form == "log":
        return params[0] * L
    if form == "power":
        return params[0] * L ** params[1]
    return params[0] + params[1] * L


@dataclass(frozen=True)
class LawFit:
    """A least-squares fit of ``alpha*(n)`` to one law form.

    Attributes
    ----------
    form : str
        ``"sqrt_log"``, ``"log"``, ``"power"`` or ``"affine_log"``.
    formula : str
        The law as text, e.g. ``"c * sqrt(log n)"``.
    params : dict
        Fitted coefficients by name (``c``; ``c, p``; ``a, b``).
    rmse : float
        Root-mean-square residual, in units of ``alpha``.
    max_rel_error : float
        Largest ``|fit - alpha| / |alpha|`` over the points.
    r2 : float
        Coefficient of determination, ``1 - SS_res / SS_tot``.
    success : bool
        Whether ``scipy.optimize.least_squares`` converged.
    """

    form: str
    formula: str
    params: dict = field(default_factory=dict)
    rmse: float = np.nan
    max_rel_error: float = np.nan
    r2: float = np.nan
    success: bool = False

    def __call__(self, n):
        """The fitted law at ``n``."""
        return law_value(self.form, tuple(self.params.values()), n)

    def __str__(self):
        coef = ", ".join(f"{k}={v:.4g}" for k, v in self.params.items())
        return f"{self.formula} [{coef}]: rmse={self.rmse:.3g}, max rel err={self.max_rel_error:.2%}, R^2={self.r2:.5f}"


def _check_points(ns, alphas):
    nn, _ = check_n_array(ns, "ns")
    aa = check_float_array(alphas, "alphas", finite=False)
    if aa.shape != nn.shape:
        raise ValueError(f"`alphas` must have the same length as `ns`, got {aa.shape} and {nn.shape}")
    if not np.all(np.isfinite(aa)) or np.any(aa <= 0):
        raise ValueError("`alphas` must be finite and > 0 (an unbounded optimum cannot be fitted)")
    return nn, aa


def fit_alpha_law(ns, alphas, form="sqrt_log") -> LawFit:
    """Least-squares fit of ``alphas`` against ``ns`` to one law form.

    Parameters
    ----------
    ns : array_like
        Numbers of scores, ``>= 2`` (``log n > 0``).  At least as many distinct
        values as the form has parameters.
    alphas : array_like
        The values to fit (e.g. ``optimal_alpha(ns)``), finite and ``> 0``.
    form : {"sqrt_log", "log", "power", "affine_log"}
        ``c sqrt(log n)``, ``c log n``, ``c (log n)^p`` or ``a + b log n``.

    Returns
    -------
    LawFit
        Coefficients, RMSE, maximum relative error and ``R^2``.

    Examples
    --------
    >>> import numpy as np, softmax_scale as ss
    >>> ns = np.arange(40, 20001, 40)
    >>> round(ss.fit_alpha_law(ns, ss.optimal_alpha(ns), "sqrt_log").params["c"], 2)
    0.84
    """
    check_choice(form, "form", LAW_FORMS)
    nn, aa = _check_points(ns, alphas)
    names, formula = LAW_FORMS[form]
    distinct = np.unique(nn).size
    if distinct < len(names):  # k parameters are fixed by k distinct n, not by repeats of one
        raise ValueError(f"`ns` must have at least {len(names)} distinct values to fit form={form!r} "
                         f"({formula}, {len(names)} parameters), got {distinct}")
    L = np.log(nn)
    # Linear forms start from their exact linear least-squares solution.
    if form == "sqrt_log":
        x0 = [np.dot(np.sqrt(L), aa) / np.sum(L)]
    elif form == "log":
        x0 = [np.dot(L, aa) / np.dot(L, L)]
    elif form == "affine_log":
        x0 = np.linalg.lstsq(np.column_stack([np.ones_like(L), L]), aa, rcond=None)[0]
    else:
        slope, icpt = np.polyfit(np.log(L), np.log(aa), 1)
        x0 = [np.exp(icpt), slope]

    def resid(p):
        return law_value(form, p, nn) - aa

    res = least_squares(resid, np.asarray(x0, dtype=np.float64), method="lm", xtol=1e-15, ftol=1e-15, gtol=1e-15)
    r = resid(res.x)
    ss_tot = np.sum((aa - aa.mean()) ** 2)
    return LawFit(
        form=form,
        formula=formula,
        params={k: float(v) for k, v in zip(names, res.x)},
        rmse=float(np.sqrt(np.mean(r * r))),
        max_rel_error=float(np.max(np.abs(r) / aa)),
        r2=float(1.0 - np.sum(r * r) / ss_tot) if ss_tot > 0 else float("nan"),
        success=bool(res.success),
    )


def compare_alpha_laws(ns, alphas, forms=tuple(LAW_FORMS)) -> dict:
    """Fit every law form (or those in ``forms``) and return ``{form: LawFit}``, best RMSE first."""
    forms = check_choices(forms, "forms", LAW_FORMS)
    fits = [fit_alpha_law(ns, alphas, f) for f in forms]
    return {f.form: f for f in sorted(fits, key=lambda f: f.rmse)}

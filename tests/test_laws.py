"""Law fitting: recovering known laws, error measures, bad input."""

import numpy as np
import pytest

import softmax_scale as ss

NS = np.array([16, 64, 256, 1024, 4096, 16384, 65536])


@pytest.mark.parametrize(
    "form, params",
    [("sqrt_log", [0.84]), ("log", [3.5]), ("power", [0.6, 0.62]), ("affine_log", [0.9, 0.18])],
)
def test_exact_laws_are_recovered(form, params):
    L = np.log(NS)
    truth = {
        "sqrt_log": lambda: params[0] * np.sqrt(L),
        "log": lambda: params[0] * L,
        "power": lambda: params[0] * L ** params[1],
        "affine_log": lambda: params[0] + params[1] * L,
    }[form]()
    fit = ss.fit_alpha_law(NS, truth, form)
    np.testing.assert_allclose(list(fit.params.values()), params, rtol=1e-9)
    assert fit.rmse < 1e-9
    assert fit.max_rel_error < 1e-9
    assert fit.r2 == pytest.approx(1.0)
    np.testing.assert_allclose(fit(NS), truth, rtol=1e-9)


def test_linear_fit_matches_normal_equations_and_error_measures():
    rng = np.random.default_rng(0)
    y = 0.8 * np.sqrt(np.log(NS)) + 0.01 * rng.standard_normal(NS.size)
    fit = ss.fit_alpha_law(NS, y, "sqrt_log")
    x = np.sqrt(np.log(NS))
    c = x @ y / (x @ x)
    assert fit.params["c"] == pytest.approx(c, rel=1e-10)
    r = c * x - y
    assert fit.rmse == pytest.approx(np.sqrt(np.mean(r**2)), rel=1e-8)
    assert fit.max_rel_error == pytest.approx(np.max(np.abs(r) / y), rel=1e-8)
    assert fit.r2 == pytest.approx(1 - np.sum(r**2) / np.sum((y - y.mean()) ** 2), rel=1e-10)


def test_compare_orders_by_rmse_and_the_true_form_wins():
    y = 0.5 + 0.2 * np.log(NS)
    laws = ss.compare_alpha_laws(NS, y)
    assert set(laws) == {"sqrt_log", "log", "power", "affine_log"}
    assert next(iter(laws)) == "affine_log"
    rmses = [f.rmse for f in laws.values()]
    assert rmses == sorted(rmses)


@pytest.mark.parametrize(
    "args, match",
    [
        ((NS, np.ones(3), "log"), "`alphas`"),
        ((NS, np.ones(NS.size), "cubic"), "`form`"),
        ((NS, -np.ones(NS.size), "log"), "`alphas`"),
        ((NS, np.full(NS.size, np.inf), "log"), "`alphas`"),
        (([16], [1.0], "power"), "`ns`"),
        (([1, 4], [1.0, 2.0], "log"), "`ns`"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        ss.fit_alpha_law(*args)

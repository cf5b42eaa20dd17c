"""Fisher scoring (``hessian="fisher"``) and a distribution's declared parts
(``init``, ``fisher``, ``sampler``): jaxboost.engine.fisher."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.fisher import (
    declared_fisher,
    fisher_grad_hess,
    information_per_row,
    sampled_fisher,
)
from jaxboost.frontends.training.program_settings import hessian_setting


def _scores(rng, n):
    """``(n, 2)`` float32 raw Gaussian scores (mean, log sd) of several scales."""
    return np.stack([rng.normal(0, 50, n), rng.uniform(-3, 4, n)], axis=1).astype(np.float32)


def _diabetes():
    """Diabetes with its raw targets (mean 152, sd 77), split 3:1 by row."""
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_diabetes(return_X_y=True)
    X, y = X.astype(np.float32), y.astype(np.float32)
    test = np.arange(len(y)) % 4 == 0
    return X[~test], y[~test], X[test], y[test]


def _mean_gaussian_nll(y, mean, sd):
    return float(np.mean(np.log(sd) + 0.5 * np.square((y - mean) / sd) + 0.5 * np.log(2 * np.pi)))


def test_gaussian_fisher_is_the_closed_form_diag_inverse_variance_and_two():
    raw = _scores(np.random.default_rng(0), 64)
    info = np.asarray(declared_fisher(losses.gaussian_nll, jnp.asarray(raw)))
    expected = np.zeros((64, 2, 2))
    expected[:, 0, 0] = np.exp(-2.0 * raw[:, 1].astype(np.float64))
    expected[:, 1, 1] = 2.0
    np.testing.assert_allclose(info, expected, rtol=1e-6)


def test_gaussian_natural_gradient_is_the_closed_form():
    """F^-1 g per row equals the Normal's natural gradient in (loc, log scale),
    NGBoost's parameters: ``(loc - y, (1 - z^2) / 2)`` with ``z = (y - loc) / sd``
    (the gradient ``((loc - y) / sd^2, 1 - z^2)`` over the information
    ``diag(1 / sd^2, 2)``)."""
    rng = np.random.default_rng(1)
    raw = _scores(rng, 50)
    y = (raw[:, 0] + np.exp(raw[:, 1]) * rng.normal(size=50)).astype(np.float32)
    grad, info = fisher_grad_hess(losses.gaussian_nll, jnp.asarray(y), jnp.asarray(raw))
    natural = np.linalg.solve(np.asarray(info, np.float64), np.asarray(grad, np.float64)[..., None])
    loc, sd = raw[:, 0].astype(np.float64), np.exp(raw[:, 1].astype(np.float64))
    z = (y - loc) / sd
    expected_info = np.zeros((50, 2, 2))
    expected_info[:, 0, 0], expected_info[:, 1, 1] = 1.0 / sd**2, 2.0
    np.testing.assert_allclose(np.asarray(info), expected_info, rtol=1e-5)
    expected = np.stack([loc - y, 0.5 * (1.0 - z**2)], axis=1)
    np.testing.assert_allclose(natural[..., 0], expected, rtol=1e-4, atol=1e-4)


def test_sampled_fisher_agrees_with_the_closed_form_within_monte_carlo_error():
    raw = jnp.asarray(_scores(np.random.default_rng(2), 8))
    n_draws = 20000
    y = jnp.arange(8, dtype=jnp.float32)  # (the rows' keys)
    sampled = np.asarray(sampled_fisher(losses.gaussian_nll, y, raw, n_draws), np.float64)
    exact = np.asarray(declared_fisher(losses.gaussian_nll, raw), np.float64)
    # per draw, in units of the exact diagonal: var(g_mean^2) = 2, var(g_log_sd^2)
    # = E(1 - z^2)^4 - 4 = 56, and the off-diagonal's E[z^2 (1 - z^2)^2] = 10
    sd_unit = np.sqrt(np.array([[2.0, 10.0 / 2.0], [10.0 / 2.0, 56.0 / 4.0]]) / n_draws)
    scale = np.sqrt(np.diagonal(exact, axis1=1, axis2=2))
    tolerance = 5.0 * sd_unit * scale[:, :, None] * scale[:, None, :]
    assert np.all(np.abs(sampled - exact) <= tolerance), (sampled - exact) / tolerance


def test_a_loss_without_fisher_or_sampler_takes_the_empirical_fisher():
    def nll(y, f):
        return losses.gaussian_nll(y, f)

    rng = np.random.default_rng(3)
    raw = jnp.asarray(_scores(rng, 16))
    y = jnp.asarray(rng.normal(size=16).astype(np.float32))
    grad, info = fisher_grad_hess(nll, y, raw)
    np.testing.assert_allclose(info, np.einsum("nk,nj->nkj", grad, grad), rtol=1e-6)


def test_derivatives_with_hessian_fisher_give_the_fisher_information():
    rng = np.random.default_rng(7)
    raw = _scores(rng, 20)
    y = rng.normal(size=20).astype(np.float32)
    grad, hess = jb.derivatives(losses.gaussian_nll, y, raw, hessian="fisher")
    expected = np.asarray(declared_fisher(losses.gaussian_nll, jnp.asarray(raw)))
    np.testing.assert_allclose(hess, expected, rtol=1e-6)
    z = (y - raw[:, 0]) / np.exp(raw[:, 1])
    np.testing.assert_allclose(grad[:, 1], 1 - np.square(z), rtol=1e-5)


def test_information_per_row_is_the_weighted_mean_diagonal():
    hess_diag = jnp.asarray([[2.0, 4.0], [6.0, 8.0], [0.0, 0.0]])
    weight = jnp.asarray([1.0, 2.0, 0.0])
    np.testing.assert_allclose(information_per_row(hess_diag, weight, None), [8 / 3, 12 / 3])


def test_fisher_keeps_the_scale_from_collapsing_on_raw_diabetes():
    """Newton steps on the observed hessian (``hessian="diag"``) left held-out
    sds of 0.0003 (targets of sd 77) and a mean NLL in the millions at 200
    rounds of depth 3 and learning rate 0.1; at 0.02, sds of 18 to 120 and
    an NLL of 6.01, above the constant model's 5.86 (Fisher: 5.79)."""
    X, y, X_test, y_test = _diabetes()
    settings = {"n_estimators": 200, "learning_rate": 0.02, "max_depth": 3}
    model = jb.Booster(loss=losses.gaussian_nll, **settings).fit(X, y)  # auto: fisher
    raw = np.asarray(model.predict_raw(X_test), np.float64)
    sd = np.exp(raw[:, 1])
    assert 25.0 < sd.min() and sd.max() < 150.0, (sd.min(), sd.max())  # diag: 18 to 120
    constant = _mean_gaussian_nll(y_test, y.mean(), y.std())
    assert _mean_gaussian_nll(y_test, raw[:, 0], sd) < constant


@pytest.mark.parametrize("strategy", ["multi_output_tree", "one_output_per_tree"])
def test_fisher_fits_the_same_model_on_targets_of_any_scale(strategy):
    """``reg_lambda`` counts in rows' information: targets times 1000 give
    means times 1000 and log sds plus log 1000."""
    X, y, X_test, _ = _diabetes()
    settings = {"n_estimators": 30, "max_depth": 3, "hessian": "fisher"}
    settings["multi_strategy"] = strategy
    small = jb.Booster(loss=losses.gaussian_nll, **settings).fit(X, y / 100)
    large = jb.Booster(loss=losses.gaussian_nll, **settings).fit(X, y * 10)
    small_raw, large_raw = small.predict_raw(X_test), large.predict_raw(X_test)
    np.testing.assert_allclose(large_raw[:, 0], 1000 * small_raw[:, 0], rtol=2e-3)
    np.testing.assert_allclose(large_raw[:, 1], small_raw[:, 1] + np.log(1000), atol=2e-3)


def test_a_sampler_alone_fits_nearly_the_declared_fisher_model():
    sampler_only = losses.declare(
        lambda y, f: losses.gaussian_nll(y, f),
        name="gaussian_sampled",
        link="mean_scale",
        n_outputs=2,
        smooth=True,
        init=losses.gaussian_nll.init,
        sampler=losses.gaussian_nll.sampler,
    )
    X, y, X_test, _ = _diabetes()
    settings = {"n_estimators": 20, "max_depth": 2}
    exact = jb.Booster(loss=losses.gaussian_nll, **settings).fit(X, y).predict_raw(X_test)
    sampled = jb.Booster(loss=sampler_only, **settings).fit(X, y).predict_raw(X_test)
    # 64 draws a row: about 18% noise per row's entry, averaged over a leaf's rows
    relative = np.abs(sampled[:, 0] - exact[:, 0]) / np.abs(exact[:, 0])
    assert np.median(relative) < 0.02 and relative.max() < 0.1, relative
    assert np.median(np.abs(sampled[:, 1] - exact[:, 1])) < 0.05


def test_declared_init_starts_the_search_which_still_ends_at_the_minimum():
    calls = []

    def off_start(y, weight):  # (called when the program is traced)
        calls.append(y.shape)
        return jnp.stack([jnp.mean(y) + 3.0 * jnp.std(y), jnp.log(jnp.std(y)) - 1.0])

    loss = losses.declare(
        lambda y, f: losses.gaussian_nll(y, f),
        name="gaussian_off_start",
        link="mean_scale",
        n_outputs=2,
        smooth=True,
        init=off_start,
    )
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = rng.normal(2.0e5, 3.0e3, 300).astype(np.float32)
    with pytest.warns(UserWarning, match="reg_lambda: the loss's mean hessian"):  # (y ~ 2e5)
        model = jb.Booster(loss=loss, n_estimators=1, max_depth=1).fit(X, y)
    assert calls
    y64 = y.astype(np.float64)
    np.testing.assert_allclose(model.base_score_, [y64.mean(), np.log(y64.std())], rtol=1e-5)


def test_a_fisher_model_file_round_trips(tmp_path):
    X, y, X_test, _ = _diabetes()
    model = jb.Booster(loss=losses.gaussian_nll, n_estimators=5, max_depth=2, hessian="fisher")
    model.fit(X, y)
    model.save(tmp_path / "model.json")
    loaded = jb.load(tmp_path / "model.json")
    np.testing.assert_array_equal(loaded.predict_raw(X_test), model.predict_raw(X_test))
    assert loaded.hessian == "fisher"


def _gaussian_with(**parts):
    return losses.declare(
        lambda y, f: losses.gaussian_nll(y, f),
        name="gaussian_parts",
        link="mean_scale",
        n_outputs=2,
        smooth=True,
        **parts,
    )


@pytest.mark.parametrize("argument", ["init", "fisher", "sampler"])
def test_a_part_that_is_not_a_function_is_refused_at_declare(argument):
    with pytest.raises(ValueError, match=f"^{argument}: a function"):
        _gaussian_with(**{argument: 3.0})


@pytest.mark.parametrize(
    "parts, match",
    [
        (
            {"init": lambda y, w: jnp.zeros(3)},
            r"init: expected 2 finite raw scores .* shape \(3,\)",
        ),
        ({"init": lambda y, w: jnp.array([jnp.nan, 0.0])}, "init: expected 2 finite"),
        ({"fisher": lambda f: jnp.eye(3)}, "fisher: expected a finite symmetric positive"),
        ({"fisher": lambda f: -jnp.eye(2)}, "fisher: expected a finite symmetric positive"),
        ({"fisher": lambda f: 1 / 0}, "fisher: the declared function failed: ZeroDivision"),
        ({"sampler": lambda key, f, n: jnp.zeros((n, 2))}, r"sampler: expected .* \(4,\)"),
    ],
)
def test_a_part_with_a_bad_value_is_refused_at_fit_naming_it(parts, match):
    X = np.random.default_rng(5).normal(size=(50, 2)).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        jb.Booster(loss=_gaussian_with(**parts), n_estimators=1).fit(X, X[:, 0])


def test_hessian_settings_are_checked_and_auto_is_diag_without_a_declared_fisher():
    X = np.random.default_rng(6).normal(size=(50, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="hessian: expected one of .*'fisher'"):
        jb.Booster(loss=losses.gaussian_nll, hessian="natural").fit(X, X[:, 0])
    booster = jb.Booster(loss="squared_error")
    assert hessian_setting(booster, losses.squared_error) == "diag"
    assert hessian_setting(booster, losses.gaussian_nll) == "fisher"
    with pytest.raises(ValueError, match="hessian='fisher': .* group loss"):
        hessian_setting(jb.Booster(hessian="fisher"), losses.lambdarank())


def test_jax_grad_of_the_declared_fisher_parts_is_defined():
    """The parts are traced inside the programs: they must be JAX functions."""
    f = jnp.asarray([1.0, 0.5])
    assert jax.jacfwd(losses.gaussian_nll.fisher)(f).shape == (2, 2, 2)
    draws = losses.gaussian_nll.sampler(jax.random.key(0), f, 5)
    assert draws.shape == (5,)


def test_the_program_compiled_ahead_is_the_fisher_one_the_fit_calls():
    """``hessian="auto"`` is settled before compiling ahead: compiled as
    "auto", the program ahead was one no fit calls (a second compile)."""
    from test_compile_ahead import _COMPILES, _placed

    from jaxboost.engine.round_programs import derivatives_program
    from jaxboost.frontends.training.compile_ahead import start_loss_programs
    from jaxboost.frontends.training.hessian_probe import derivatives_settings
    from jaxboost.runtime.devices import make_mesh
    from jaxboost.runtime.distributed import global_rows

    mesh = make_mesh(jax.devices()[:1])
    y = np.linspace(-2, 2, 300).astype(np.float32)
    placed = _placed(y, mesh)
    shift = float(np.random.default_rng().uniform(0.1, 0.2))  # new to the disk cache
    loss = losses.declare(
        eval(f"lambda y, f: losses.gaussian_nll(y, f + {shift!r})", {"losses": losses}),
        name="gaussian_shifted",
        link="mean_scale",
        n_outputs=2,
        smooth=True,
        fisher=losses.gaussian_nll.fisher,
    )
    booster = jb.Booster(loss=loss)
    start_loss_programs(booster, loss, 2, y, placed, y.shape[0]).result()
    settings = derivatives_settings(loss, 2, "fisher", y.shape[0])
    raw = global_rows(mesh, np.zeros((y.shape[0], 2), np.float32))
    _COMPILES.active = True
    try:
        derivatives_program(settings, mesh)(*placed, raw)
    finally:
        _COMPILES.active = False
    assert _COMPILES.count == 0

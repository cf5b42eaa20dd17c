"""JAX's 64-bit mode, turned on by the user, changes nothing in jaxboost."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.frontends.refit import refit_leaves


def _fit_and_use(loss, y, X):
    """Everything public that runs JAX code, on one model."""
    model = jb.Booster(loss=loss, n_estimators=6, max_depth=3).fit(X, y, eval_set=[(X, y)])
    staged = list(model.staged_predict(X[:5]))
    _, dependence = model.partial_dependence(X, [0], grid_resolution=5)
    refitted = refit_leaves(model, X, y, steps=3)
    return [model.train_loss_, model.predict(X), staged[-1], dependence, refitted.predict(X)]


@pytest.mark.parametrize(
    "loss",
    [
        losses.quantile(0.7),  # a line search: it broke with the mode on
        lambda y, f: jnp.logaddexp(f - y, y - f) - jnp.log(2.0),
        losses.softmax_cross_entropy,
    ],
)
def test_results_are_the_same_with_64_bit_mode_on(loss):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = X[:, 0] + 0.3 * rng.normal(size=300).astype(np.float32)
    if loss is losses.softmax_cross_entropy:
        y = np.digitize(y, [-0.5, 0.5]).astype(np.float32)
    expected = _fit_and_use(loss, y, X)
    jax.config.update("jax_enable_x64", True)
    try:
        got = _fit_and_use(loss, y, X)
        assert jax.config.jax_enable_x64  # the user's setting is left as it was
    finally:
        jax.config.update("jax_enable_x64", False)
    for got_array, expected_array in zip(got, expected):
        np.testing.assert_array_equal(np.asarray(got_array), np.asarray(expected_array))


# -- losses beyond float32 ------------------------------------------------------------
def _rows(n_rows=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4)).astype(np.float32)
    y = (2 * X[:, 0] + X[:, 1] + 0.3 * rng.normal(size=n_rows)).astype(np.float32)
    return X, y


def test_squared_error_on_targets_of_2e19_is_the_fit_of_the_targets_times_2e19():
    """Squared errors of 1e39 overflow float32 (LightGBM, whose gradients are
    float32, fits these targets): the engine fits the loss times a power of
    two; the model of ``c y`` is ``c`` times that of ``y`` (gradients scale by
    ``c``, hessians not), so ``reg_lambda`` must have been scaled with it."""
    X, y = _rows()
    scale = np.float32(2e19)
    settings = {"n_estimators": 8, "max_depth": 3}
    plain = jb.Booster(**settings).fit(X, y, eval_set=[(X, y)])
    with pytest.warns(UserWarning, match=r"beyond float32's range.* loss times 2\^-\d+"):
        large = jb.Booster(**settings).fit(X, y * scale, eval_set=[(X, y * scale)])
    assert large.loss_dtype_ == "float64"
    np.testing.assert_allclose(large.predict(X) / scale, plain.predict(X), rtol=1e-5, atol=1e-5)
    # the losses reported are the loss's own, not the engine's scaled ones
    np.testing.assert_allclose(large.train_loss_ / float(scale) ** 2, plain.train_loss_, rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(large.evals_result_["validation_0"]["loss"]) / float(scale) ** 2,
        plain.evals_result_["validation_0"]["loss"],
        rtol=1e-5,
    )


def test_a_loss_whose_gradients_overflow_float32_starts_at_its_minimiser_and_descends():
    """``cosh(f - y) - 1`` on targets in [0, 200]: 1e43 at residuals of 100,
    beyond float32 but not float64; argmin_c sum cosh(c - y) has the closed
    form (logsumexp(y) - logsumexp(-y)) / 2."""
    X, _ = _rows()
    y = np.random.default_rng(1).uniform(0, 200, X.shape[0]).astype(np.float32)
    with pytest.warns(UserWarning, match="not finite in float32 at the initial score"):
        model = jb.Booster(loss=lambda y, f: jnp.cosh(f - y) - 1, n_estimators=5).fit(X, y)
    wide = y.astype(np.float64)
    best = 0.5 * (np.logaddexp.reduce(wide) - np.logaddexp.reduce(-wide))
    np.testing.assert_allclose(model.base_score_, [best], rtol=1e-6)
    np.testing.assert_allclose(model.train_loss_[0], np.mean(np.cosh(best - wide) - 1), rtol=1e-5)
    assert np.all(np.isfinite(model.train_loss_)) and np.all(np.diff(model.train_loss_) < 0)
    with pytest.raises(ValueError, match=r"in float32\): every row's loss is finite in float64"):
        jb.Booster(loss=lambda y, f: jnp.cosh(f - y) - 1, loss_dtype="float32").fit(X, y)


def test_a_loss_infinite_on_a_row_of_weight_0_names_the_row_and_its_weight():
    X, y = _rows()
    y = np.abs(y)
    y[3] = -1.0  # log1p(-1) = -inf: the loss is infinite on row 3 only
    weight = np.ones_like(y)
    weight[3] = 0.0
    message = r"row 3 \(y = -1.0\) has loss inf .* sample_weight is 0.*drop such rows \(1 here\)"
    with pytest.raises(ValueError, match=message):
        jb.Booster(loss=lambda y, f: (f - y) ** 2 - jnp.log1p(y), n_estimators=2).fit(X, y, weight)

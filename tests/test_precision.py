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

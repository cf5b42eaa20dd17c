"""Per-row gradients at kinks: the middle of the subdifferential, so that rows
tied with their score (zero-inflated targets at a median of 0) can be split
from the others."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.derivatives import grad_hess, row_gradient


def _zero_inflated(n_rows: int, seed: int = 0):
    """Targets 0 with probability sigmoid(-2 x0 - 0.8) (most rows), else
    lognormal: the conditional median is 0 where that probability exceeds 1/2
    (x0 < -0.4) and positive where it is small."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4)).astype(np.float32)
    p_zero = 1.0 / (1.0 + np.exp(2.0 * X[:, 0] + 0.8))
    positive = rng.lognormal(0.5 * X[:, 1], 0.5)
    y = np.where(rng.random(n_rows) < p_zero, 0.0, positive).astype(np.float32)
    return X, y


@pytest.mark.parametrize(
    "loss, expected",
    [
        (losses.absolute_error, 0.0),
        (losses.quantile(0.3), 0.5 - 0.3),
        (losses.quantile(0.9), 0.5 - 0.9),
        (lambda y, f: jnp.abs(y - f), 0.0),
        (lambda y, f: jnp.where(f > y, 3.0 * (f - y), y - f), 1.0),  # slopes -1 and 3
    ],
    ids=["absolute", "quantile-0.3", "quantile-0.9", "abs-lambda", "where-lambda"],
)
def test_a_row_at_a_kink_gets_the_middle_of_its_subdifferential(loss, expected):
    y = jnp.array([0.0, 2.5, -1e-20, 300.0, 0.0], jnp.float32)
    raw = y[:, None]  # every row exactly at its kink
    assert np.asarray(row_gradient(loss, y, raw))[:, 0] == pytest.approx(expected, abs=1e-6)
    # away from the kink, JAX's own gradient
    away = raw + jnp.array([1.0, -1.0, 2.0, -5.0, 0.5])[:, None]
    one_sided = jax.vmap(jax.grad(loss, argnums=1))(y, away[:, 0])
    np.testing.assert_array_equal(np.asarray(row_gradient(loss, y, away))[:, 0], one_sided)


def test_smooth_losses_keep_jax_gradients_exactly():
    rng = np.random.default_rng(1)
    y = jnp.asarray(rng.normal(size=64).astype(np.float32) * 100)
    raw = jnp.asarray(rng.normal(size=(64, 1)).astype(np.float32) * 100)
    for loss in (lambda y, f: (y - f) ** 2, losses.log_cosh, losses.huber(2.0)):
        expected = jax.vmap(jax.grad(loss, argnums=1))(y, raw[:, 0])
        grad, _ = grad_hess(loss, y, raw)
        np.testing.assert_allclose(np.asarray(grad)[:, 0], expected, rtol=1e-5, atol=1e-3)


def test_vector_scores_take_the_middle_of_each_kink():
    loss = lambda y, f: jnp.abs(y - f[0]) + 0.5 * jnp.square(y - f[1])
    y = jnp.array([1.0, 2.0], jnp.float32)
    raw = jnp.array([[1.0, 0.0], [3.0, 2.0]], jnp.float32)
    np.testing.assert_allclose(
        np.asarray(row_gradient(loss, y, raw)), [[0.0, -1.0], [1.0, 0.0]], atol=1e-6
    )


@pytest.mark.parametrize(
    "loss",
    [losses.absolute_error, losses.quantile(0.5), lambda y, f: jnp.abs(y - f)],
    ids=["absolute", "quantile-0.5", "abs-lambda"],
)
def test_absolute_error_learns_zero_inflated_targets(loss):
    X, y = _zero_inflated(4000)
    X_test, y_test = _zero_inflated(4000, seed=1)
    model = jb.Booster(loss=loss, n_estimators=60, max_depth=3).fit(X, y)
    predicted = model.predict(X_test)
    constant_error = np.mean(np.abs(y_test - np.median(y)))
    # the conditional median: 0 where zeros are most rows, positive elsewhere
    mostly_zero = X_test[:, 0] < -1.0
    assert np.median(predicted[mostly_zero]) == pytest.approx(0.0, abs=1e-3)
    assert np.median(predicted[X_test[:, 0] > 1.0]) > 0.5
    assert np.mean(np.abs(y_test - predicted)) < 0.85 * constant_error


def _asymmetric_log_cosh(y, f):
    """Twice the log-cosh above the target: the gradient is continuous at
    ``r = 0`` (0 on both sides), only the hessian jumps (1 to 2)."""
    r = y - f
    return jnp.where(r > 0, 2.0, 1.0) * jnp.logaddexp(r, -r)


def _huber_lambda(y, f):
    r = jnp.abs(y - f)
    return jnp.where(r <= 1.0, 0.5 * r**2, r - 0.5)


@pytest.mark.parametrize(
    "loss, offset, expected",
    [
        (_asymmetric_log_cosh, 0.0, 0.0),  # only the hessian jumps at r = 0
        (_huber_lambda, 1.0, -1.0),  # ... and at |r| = delta
        (_huber_lambda, -1.0, 1.0),
    ],
    ids=["asymmetric-log-cosh", "huber-above", "huber-below"],
)
def test_a_jump_of_the_hessian_alone_keeps_the_gradient(loss, offset, expected):
    y = jnp.array([0.0, 2.5, -3.0, 41.0, 300.0, -1000.0], jnp.float32)
    raw = (y - offset)[:, None]
    grad = np.asarray(row_gradient(loss, y, raw))[:, 0]
    # a continuous gradient: its value, to float32 rounding (the one-sided
    # mean was off by half the step times the hessian's jump: 2.3e-3 at 300)
    np.testing.assert_allclose(grad, expected, atol=2e-6)


def test_a_kink_beside_a_jump_of_the_hessian_in_another_output():
    def loss(y, f):
        return _asymmetric_log_cosh(y, f[0]) + jnp.abs(y - f[1])

    y = jnp.array([300.0, -7.0], jnp.float32)
    raw = jnp.stack([y, y], axis=1)  # both outputs at their kink or hessian jump
    np.testing.assert_allclose(np.asarray(row_gradient(loss, y, raw)), 0.0, atol=2e-6)

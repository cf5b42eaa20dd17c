"""jb.derivatives: the gradient and hessian a round grows its trees from,
checked against closed forms and against what one round of training did."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses


def _rows(n_rows=64, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n_rows).astype(np.float32)
    f = rng.normal(size=n_rows).astype(np.float32)
    weight = rng.uniform(0.2, 3.0, n_rows).astype(np.float32)
    return y, f, weight


def test_closed_forms_of_weighted_per_sample_losses():
    y, f, weight = _rows()
    grad, hess = jb.derivatives("squared_error", y, f, sample_weight=weight)
    np.testing.assert_allclose(grad, weight * (f - y), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(hess, weight, rtol=1e-6)
    labels = (y > 0).astype(np.float32)
    grad, hess = jb.derivatives(losses.binary_logloss, labels, f, sample_weight=weight)
    p = 1.0 / (1.0 + np.exp(-f.astype(np.float64)))
    np.testing.assert_allclose(grad, weight * (p - labels), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hess, weight * p * (1 - p), rtol=1e-5, atol=1e-6)
    assert grad.shape == hess.shape == (64,) and grad.dtype == np.float32


def test_full_hessian_of_the_gaussian_likelihood():
    y, f, _ = _rows()
    scores = np.stack([f, 0.3 * f], axis=1)  # (mean, log scale)
    grad, hess = jb.derivatives(losses.gaussian_nll, y, scores, hessian="full")
    r, precision = (y - scores[:, 0]).astype(np.float64), np.exp(-2.0 * scores[:, 1])
    expected_grad = np.stack([-r * precision, 1.0 - r**2 * precision], axis=1)
    cross = 2.0 * r * precision
    expected_hess = np.stack(
        [np.stack([precision, cross], 1), np.stack([cross, 2.0 * r**2 * precision], 1)], 1
    )
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(hess, expected_hess, rtol=1e-5, atol=1e-5)
    _, diagonal = jb.derivatives(losses.gaussian_nll, y, scores)
    np.testing.assert_allclose(diagonal, np.diagonal(expected_hess, axis1=1, axis2=2), rtol=1e-5)


def test_kinks_take_the_middle_of_the_subdifferential():
    y = np.array([0.0, 1.5, -2.0], np.float32)
    grad, hess = jb.derivatives(losses.quantile(0.9), y, y)
    np.testing.assert_allclose(grad, 0.5 - 0.9, atol=1e-6)
    np.testing.assert_array_equal(hess, 0.0)
    grad, _ = jb.derivatives(lambda y, f: jnp.abs(y - f), y, y)
    np.testing.assert_allclose(grad, 0.0, atol=1e-6)


@pytest.mark.parametrize("mode, expected", [("clip", "clip"), ("abs", "abs")])
def test_hessian_modes_raise_the_hessian(mode, expected):
    y, f, weight = _rows()
    curvature = np.cos(f - y).astype(np.float64)  # the hessian of -cos(f - y)
    _, hess = jb.derivatives(
        lambda y, f: -jnp.cos(f - y),
        y,
        f,
        sample_weight=weight,
        hessian_mode=mode,
        hessian_floor=0.25,
    )
    treated = np.abs(curvature) if expected == "abs" else curvature
    np.testing.assert_allclose(hess, weight * np.maximum(treated, 0.25), rtol=1e-5, atol=1e-6)


def test_derivatives_not_finite_in_float32_are_taken_in_float64():
    def log_cosh(y, f):  # cosh overflows float32 beyond 89
        return jnp.log(jnp.cosh(f - y))

    y = np.array([0.0, 0.0], np.float32)
    f = np.array([0.5, 100.0], np.float32)
    with pytest.warns(UserWarning, match="not finite in float32 at these scores"):
        grad, hess = jb.derivatives(log_cosh, y, f)
    np.testing.assert_allclose(grad, np.tanh(f), rtol=1e-6)
    assert np.isfinite(hess).all()
    grad, _ = jb.derivatives(log_cosh, y, f, loss_dtype="float32")
    assert np.isnan(grad[1]) and grad[0] == pytest.approx(np.tanh(0.5))


def test_what_one_round_of_training_grew_its_tree_from():
    # one binary feature and a depth-1 tree: each leaf is the Newton step
    # -G / (H + lambda) of its rows' statistics, as derivatives() gives them
    rng = np.random.default_rng(2)
    X = (rng.uniform(size=(300, 1)) < 0.4).astype(np.float32)
    y = (3.0 * X[:, 0] + rng.normal(size=300)).astype(np.float32)
    weight = rng.uniform(0.5, 2.0, 300).astype(np.float32)

    def loss(y, f):  # an asymmetric log-cosh: the kink check runs, finds none
        r = y - f
        return jnp.where(r > 0, 2.0, 1.0) * jnp.logaddexp(r, -r)

    settings = {"hessian_mode": "clip", "hessian_floor": 0.3}
    model = jb.Booster(
        loss=loss, n_estimators=1, max_depth=1, learning_rate=0.5, reg_lambda=2.0, **settings
    ).fit(X, y, sample_weight=weight)
    init = np.broadcast_to(model.base_score_, y.shape)
    grad, hess = jb.derivatives(loss, y, init, sample_weight=weight, **settings)
    step = model.predict_raw(X) - init
    for side in (0.0, 1.0):
        rows = X[:, 0] == side
        expected = -0.5 * grad[rows].sum() / (hess[rows].sum() + 2.0)
        np.testing.assert_allclose(step[rows], expected, rtol=1e-4)


def test_a_group_loss_by_query_in_any_row_order():
    rng = np.random.default_rng(3)
    qid = rng.integers(0, 5, 40)
    y = rng.integers(0, 4, 40).astype(np.float32)
    f = rng.normal(size=40).astype(np.float32)
    grad, hess = jb.derivatives(losses.listnet, y, f, qid=qid)
    for query in np.unique(qid):  # ListNet: gradient q - p, hessian q (1 - q)
        rows = qid == query
        p = np.exp(y[rows]) / np.exp(y[rows]).sum()
        q = np.exp(f[rows]) / np.exp(f[rows]).sum()
        np.testing.assert_allclose(grad[rows], q - p, atol=1e-6)
        np.testing.assert_allclose(hess[rows], q * (1 - q), atol=1e-6)


def test_bad_arguments_are_named():
    y, f, _ = _rows(8)
    with pytest.raises(ValueError, match="f: scores must be finite; row 3"):
        jb.derivatives("squared_error", y, np.where(np.arange(8) == 3, np.nan, f))
    with pytest.raises(ValueError, match="y: expected shape"):
        jb.derivatives("squared_error", y[:5], f)
    with pytest.raises(ValueError, match="hessian: expected one of"):
        jb.derivatives("squared_error", y, f, hessian="diagonal")
    with pytest.raises(ValueError, match="qid: the loss 'squared_error' is a function of one"):
        jb.derivatives("squared_error", y, f, qid=np.zeros(8))

"""Joint Newton leaves: the exact L x L leaf hessian, its solve, and fits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.joint_newton import leaf_hessian, solve_joint


@losses.declare(name="test_coupled", link="identity", per="group")
def coupled(y, f, mask):
    """A quadratic group loss whose rows interact: squared errors plus the
    squared error of the group's mean."""
    residual = jnp.where(mask, f - y, 0.0)
    return 0.5 * jnp.sum(residual**2) + 2.0 * jnp.sum(residual) ** 2 / jnp.sum(mask)


def test_leaf_hessian_is_the_hessian_in_the_leaf_values():
    rng = np.random.default_rng(0)
    n, n_leaves = 40, 4
    y = jnp.asarray(rng.integers(0, 3, n), jnp.float32)
    f = jnp.asarray(rng.normal(size=n), jnp.float32)
    leaf_of_row = jnp.asarray(rng.integers(0, n_leaves, n), jnp.int32)
    in_bag = jnp.asarray(rng.uniform(size=n) < 0.8)
    starts = [0, 7, 19, 20, 33]  # groups of 7, 12, 1, 13 and 7 rows

    def objective(scores):
        return sum(
            losses.listnet(y[a:b], scores[a:b], jnp.ones(b - a, bool))
            for a, b in zip(starts, [*starts[1:], n])
        )

    hessian = leaf_hessian(objective, f, in_bag, leaf_of_row, n_leaves, None)

    def in_leaf_values(values):  # only in-bag rows move with their leaf
        return objective(f + jnp.where(in_bag, values[leaf_of_row], 0.0))

    expected = jax.hessian(in_leaf_values)(jnp.zeros(n_leaves))
    np.testing.assert_allclose(hessian, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(expected) - np.diag(np.diag(expected))).max() > 1e-3  # coupled


def test_the_joint_step_is_the_minimum_norm_step_on_a_null_space():
    # a shift-invariant loss with leaves covering every row: H 1 = 0
    hessian = jnp.asarray([[2.0, -1.0, -1.0], [-1.0, 2.0, -1.0], [-1.0, -1.0, 2.0]])
    grad = jnp.asarray([1.0, -2.0, 1.0])
    step = solve_joint(hessian, grad, 0.0)
    np.testing.assert_allclose(np.sum(step), 0.0, atol=1e-6)  # nothing along the null space
    np.testing.assert_allclose(hessian @ step, -grad, atol=1e-5)
    regularised = solve_joint(hessian, grad, 0.5)
    np.testing.assert_allclose((hessian + 0.5 * jnp.eye(3)) @ regularised, -grad, atol=1e-5)


def test_joint_newton_reaches_a_quadratic_group_loss_s_minimum_over_the_leaves():
    rng = np.random.default_rng(1)
    sizes = rng.integers(2, 12, size=30)
    n = int(sizes.sum())
    X = rng.normal(size=(n, 3)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.normal(size=n)).astype(np.float32)
    settings = {"loss": coupled, "n_estimators": 1, "max_depth": 2, "learning_rate": 1.0}
    model = jb.Booster(leaf_method="joint_newton", reg_lambda=0.0, **settings).fit(
        X, y, group=sizes
    )
    diagonal = jb.Booster(leaf_method="newton", reg_lambda=0.0, **settings).fit(X, y, group=sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def total(f):
        return sum(
            coupled(y[a : a + m], f[a : a + m], jnp.ones(m, bool)) for a, m in zip(starts, sizes)
        )

    f = jnp.asarray(model.predict_raw(X))
    grad = np.asarray(jax.grad(total)(f))
    # one tree from 0: a row's score is its leaf's value; at the joint step
    # the gradient summed over every leaf's rows is 0
    scores = np.asarray(f)
    assert np.unique(scores).size == 4
    for value in np.unique(scores):
        assert abs(grad[scores == value].sum()) < 1e-3 * n
    assert float(total(f)) < float(total(jnp.asarray(diagonal.predict_raw(X))))


def test_joint_newton_on_a_per_sample_loss_is_newton():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1500, 4)).astype(np.float32)
    labels = (X[:, 0] + rng.normal(size=1500) > 0).astype(np.float32)
    settings = {"loss": "logloss", "n_estimators": 8, "max_depth": 3, "subsample": 0.7}
    joint = jb.Booster(leaf_method="joint_newton", **settings).fit(X, labels)
    newton = jb.Booster(leaf_method="newton", **settings).fit(X, labels)
    np.testing.assert_allclose(joint.predict_raw(X), newton.predict_raw(X), rtol=1e-4, atol=1e-5)
    assert joint.leaf_method_ == "joint_newton"


def test_joint_newton_needs_one_output():
    X = np.random.default_rng(0).normal(size=(100, 3)).astype(np.float32)
    with pytest.raises(ValueError, match="leaf_method: 'joint_newton' fits models of one output"):
        jb.Booster(loss="softmax", leaf_method="joint_newton").fit(X, np.arange(100) % 3)

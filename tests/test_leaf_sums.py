"""The line search's leaf kernels: native (C++) against the XLA reference and numpy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures devices before JAX starts)
from jaxboost import losses
from jaxboost.engine.line_search import armijo_backtrack, line_search_leaf_values
from jaxboost.kernels.leaf_sums import LEAF_KERNELS
from jaxboost.kernels.native_library import native_available

pytestmark = pytest.mark.skipif(
    not native_available(warn=False), reason="test_native_kernel fails where a compiler exists"
)
NATIVE, REFERENCE = LEAF_KERNELS["native"], LEAF_KERNELS["reference"]


N_ROWS = 1001  # not a multiple of the native kernels' four lanes


def _random_leaves(rng, n_leaves):
    return rng.integers(0, n_leaves, N_ROWS).astype(np.int32)


def _numpy_leaf_sums(values, leaf, n_leaves):
    """``(V, n_rows)`` -> ``(n_leaves, V)`` float64 sums by leaf."""
    expected = np.zeros((n_leaves, values.shape[0]))
    np.add.at(expected, leaf, values.T.astype(np.float64))
    return expected


# 1 and 2 values per row (and 3, 6 for the sums) have kernels of their own; 5 and
# 7 take the general loop
@pytest.mark.parametrize("n_values", [1, 2, 3, 5, 6, 7])
@pytest.mark.parametrize("n_leaves", [1, 8, 64])
def test_native_leaf_kernels_equal_numpy(n_values, n_leaves):
    rng = np.random.default_rng(n_values * 100 + n_leaves)
    leaf = _random_leaves(rng, n_leaves)
    values = rng.normal(size=(n_values, N_ROWS)).astype(np.float32)
    table = rng.normal(size=(n_leaves, n_values)).astype(np.float32)

    spread = jax.jit(NATIVE.rows_of_leaves)(table, leaf)
    np.testing.assert_array_equal(np.asarray(spread), table[leaf].T)
    np.testing.assert_array_equal(np.asarray(spread), REFERENCE.rows_of_leaves(table, leaf))

    sums = jax.jit(NATIVE.leaf_sums, static_argnums=2)(values, leaf, n_leaves)
    expected = _numpy_leaf_sums(values, leaf, n_leaves)
    assert sums.shape == (n_leaves, n_values)
    # summed in float64, rounded once
    np.testing.assert_array_equal(np.asarray(sums), expected.astype(np.float32))
    np.testing.assert_allclose(
        np.asarray(REFERENCE.leaf_sums(values, leaf, n_leaves)), expected, rtol=1e-4, atol=1e-4
    )


# 1 and 2 points have kernels of their own, 3 takes the general loop
@pytest.mark.parametrize("n_points", [1, 2, 3])
@pytest.mark.parametrize("n_leaves", [1, 8])
def test_native_slope_sums_equal_numpy(n_points, n_leaves):
    rng = np.random.default_rng(n_points * 10 + n_leaves)
    leaf = _random_leaves(rng, n_leaves)
    slope = rng.normal(size=(n_points, N_ROWS)).astype(np.float32)
    curvature = rng.exponential(size=(n_points, N_ROWS)).astype(np.float32)
    weight = rng.uniform(0, 2, N_ROWS).astype(np.float32)
    weight[::7] = 0.0  # padding rows

    sums = jax.jit(NATIVE.slope_sums, static_argnums=4)(slope, curvature, weight, leaf, n_leaves)
    # float32 products, summed in float64, rounded once
    terms = np.concatenate([slope * weight, curvature * weight, np.abs(slope) * weight])
    expected = _numpy_leaf_sums(terms, leaf, n_leaves)
    assert sums.shape == (n_leaves, 3 * n_points)
    np.testing.assert_array_equal(np.asarray(sums), expected.astype(np.float32))
    reference = REFERENCE.slope_sums(slope, curvature, weight, leaf, n_leaves)
    np.testing.assert_allclose(np.asarray(reference), expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="leaf index out of range"):
        bad = leaf.copy()
        bad[3] = n_leaves
        jax.block_until_ready(NATIVE.slope_sums(slope, curvature, weight, bad, n_leaves))


def test_native_slope_sums_refuse_shapes_that_disagree():
    slope = np.ones((2, 10), np.float32)
    with pytest.raises(Exception, match="shapes disagree"):
        jax.block_until_ready(
            NATIVE.slope_sums(
                slope,
                np.ones((2, 9), np.float32),
                np.ones(10, np.float32),
                np.zeros(10, np.int32),
                2,
            )
        )


# fewer true rows than the capacity, exactly as many, more; none; all
@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.05, 0.3, 1.0])
@pytest.mark.parametrize("capacity", [1, 64, 200])
def test_native_first_true_rows_equal_numpy(fraction, capacity):
    rng = np.random.default_rng(int(fraction * 100) + capacity)
    mask = rng.uniform(size=2001) < fraction
    if fraction == 0.05:
        mask[:] = False
        mask[rng.choice(2001, capacity, replace=False)] = True  # exactly full
    expected = np.flatnonzero(mask)[:capacity]
    expected = np.concatenate([expected, np.zeros(capacity - expected.size, np.int64)])
    for kernels in (NATIVE, REFERENCE):
        rows, count = jax.jit(kernels.first_true_rows, static_argnums=1)(mask, capacity)
        assert rows.dtype == jnp.int32 and rows.shape == (capacity,)
        np.testing.assert_array_equal(np.asarray(rows), expected)
        assert int(count) == int(mask.sum())


def test_native_leaf_kernels_refuse_a_leaf_out_of_range():
    leaf = np.array([0, 1, 4], np.int32)
    with pytest.raises(Exception, match="leaf index out of range"):
        jax.block_until_ready(NATIVE.leaf_sums(np.ones((3, 3), np.float32), leaf, 4))
    with pytest.raises(Exception, match="leaf index out of range"):
        jax.block_until_ready(NATIVE.rows_of_leaves(np.ones((4, 2), np.float32), leaf))


def test_native_leaf_kernels_under_vmap():
    rng = np.random.default_rng(1)
    leaf = rng.integers(0, 4, (3, 50)).astype(np.int32)
    values = rng.normal(size=(3, 2, 50)).astype(np.float32)
    sums = jax.vmap(lambda v, leaf: NATIVE.leaf_sums(v, leaf, 4))(values, leaf)
    expected = jax.vmap(lambda v, leaf: REFERENCE.leaf_sums(v, leaf, 4))(values, leaf)
    np.testing.assert_allclose(np.asarray(sums), np.asarray(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("loss_name", ["log_cosh", "quantile", "binary_logloss"])
def test_line_search_and_armijo_are_the_same_with_either_kernels(loss_name):
    rng = np.random.default_rng(2)
    n_rows, n_leaves = 3000, 8
    leaf = jnp.asarray(rng.integers(0, n_leaves, n_rows).astype(np.int32))
    if loss_name == "binary_logloss":
        y = rng.integers(0, 2, n_rows).astype(np.float32)
    else:
        y = (3 * rng.standard_t(3, n_rows)).astype(np.float32)
    loss = losses.quantile(0.7) if loss_name == "quantile" else getattr(losses, loss_name)
    raw = jnp.asarray(rng.normal(size=(n_rows, 1)).astype(np.float32))
    weight = jnp.asarray(rng.uniform(0.5, 2, n_rows).astype(np.float32))
    direction = jnp.ones((n_leaves, 1))
    args = (loss, jnp.asarray(y), raw, weight, leaf, direction, None)
    native = line_search_leaf_values(*args, NATIVE)
    reference = line_search_leaf_values(*args, REFERENCE)
    np.testing.assert_allclose(np.asarray(native), np.asarray(reference), rtol=1e-5, atol=1e-5)

    grad_sum = jax.ops.segment_sum(
        jax.vmap(jax.grad(loss, argnums=1))(jnp.asarray(y), raw[:, 0]) * weight, leaf, n_leaves
    )[:, None]
    big_steps = 40 * native  # too long: Armijo must shrink some
    shrunk = [
        armijo_backtrack(loss, jnp.asarray(y), raw, weight, leaf, big_steps, grad_sum, None, k)
        for k in (NATIVE, REFERENCE)
    ]
    np.testing.assert_allclose(np.asarray(shrunk[0]), np.asarray(shrunk[1]), rtol=1e-6)
    assert np.any(np.asarray(shrunk[0]) != np.asarray(big_steps))

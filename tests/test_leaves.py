"""Leaf values: Newton steps and line searches against closed forms and numpy."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures devices before JAX starts)
from jaxboost import losses
from jaxboost.engine.derivatives import grad_hess
from jaxboost.engine.leaves import leaf_totals, newton_leaf_values, solve_newton
from jaxboost.engine.line_search import line_search_leaf_values
from jaxboost.kernels.leaf_sums import LEAF_KERNELS


def _leaf_data(seed, n_rows=400, n_leaves=5):
    rng = np.random.default_rng(seed)
    leaf_of_row = rng.integers(0, n_leaves, n_rows).astype(np.int32)
    weight = rng.uniform(0.5, 2.0, n_rows).astype(np.float32)
    return rng, leaf_of_row, weight


def inverted_cdf_quantile(values, weights, alpha):
    """Smallest value whose cumulative weight reaches alpha of the total."""
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order].astype(np.float64))
    index = np.searchsorted(cumulative, alpha * cumulative[-1] * (1 - 1e-9))
    return values[order][index]


def test_newton_leaf_on_log_loss_is_friedmans_closed_form():
    rng, leaf_of_row, _ = _leaf_data(0)
    y = rng.integers(0, 2, leaf_of_row.size).astype(np.float32)
    raw = rng.normal(size=(leaf_of_row.size, 1)).astype(np.float32)
    grad, hess = grad_hess(losses.binary_logloss, jnp.asarray(y), jnp.asarray(raw))
    values = newton_leaf_values(grad, hess, jnp.asarray(leaf_of_row), 5, reg_lambda=0.0)
    p = 1 / (1 + np.exp(-raw[:, 0].astype(np.float64)))
    for leaf in range(5):
        rows = leaf_of_row == leaf
        gamma = np.sum(y[rows] - p[rows]) / np.sum(p[rows] * (1 - p[rows]))
        np.testing.assert_allclose(values[leaf, 0], gamma, rtol=1e-4, atol=1e-6)


def test_newton_with_lambda_shrinks_toward_zero():
    grad_sum = jnp.array([[-4.0], [2.0]])
    hess_sum = jnp.array([[1.0], [3.0]])
    np.testing.assert_allclose(solve_newton(grad_sum, hess_sum, 1.0), [[2.0], [-0.5]])


def test_full_hessian_newton_is_the_pseudo_inverse_step():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), size=3)
    # softmax hessians: singular (shifting all scores changes nothing)
    hess = np.stack([np.diag(q) - np.outer(q, q) for q in p]) * 50
    grad = rng.normal(size=(3, 4))
    grad -= grad.mean(axis=1, keepdims=True)  # in the range of the hessian
    step = np.asarray(
        solve_newton(jnp.asarray(grad, jnp.float32), jnp.asarray(hess, jnp.float32), 0.0)
    )
    expected = -np.einsum("lij,lj->li", np.linalg.pinv(hess, rcond=1e-6), grad)
    np.testing.assert_allclose(step, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("alpha", [0.5, 0.1, 0.8])
def test_line_search_gives_the_weighted_quantile_of_each_leaf(alpha):
    rng, leaf_of_row, weight = _leaf_data(2)
    y = rng.normal(size=leaf_of_row.size).astype(np.float32) * 10
    raw = rng.normal(size=(leaf_of_row.size, 1)).astype(np.float32)
    loss = losses.absolute_error if alpha == 0.5 else losses.quantile(alpha)
    values = line_search_leaf_values(
        loss,
        jnp.asarray(y),
        jnp.asarray(raw),
        jnp.asarray(weight),
        jnp.asarray(leaf_of_row),
        jnp.ones((5, 1)),
    )
    residual = y - raw[:, 0]
    for leaf in range(5):
        rows = leaf_of_row == leaf
        expected = inverted_cdf_quantile(residual[rows], weight[rows], alpha)
        np.testing.assert_allclose(values[leaf, 0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scale", [1e-9, 1e-6, 1e3])
@pytest.mark.parametrize("offset", [0.0, 1.0])
def test_pinball_leaves_are_exact_at_any_scale_of_the_targets(scale, offset):
    # the first bracket is [-1, 1] whatever the targets: its size once set the
    # search's tolerance (2e-7), so leaves of targets of scale 1e-6 were off
    # by 70% of their value; now the scores' magnitude sets a finer one (and
    # scores all 0, the first round from a zero start, leave float32's)
    rng, leaf_of_row, weight = _leaf_data(5)
    y = (rng.normal(size=leaf_of_row.size) * scale).astype(np.float32)
    raw = (offset * scale * rng.uniform(0.5, 1.5, (leaf_of_row.size, 1))).astype(np.float32)
    values = line_search_leaf_values(
        losses.quantile(0.7),
        jnp.asarray(y),
        jnp.asarray(raw),
        jnp.asarray(weight),
        jnp.asarray(leaf_of_row),
        jnp.ones((5, 1)),
        narrow=True,
    )
    residual = y - raw[:, 0]
    expected = [
        inverted_cdf_quantile(residual[leaf_of_row == leaf], weight[leaf_of_row == leaf], 0.7)
        for leaf in range(5)
    ]
    # (the search resolves steps to 1e-5 of the scores' magnitude, about scale)
    np.testing.assert_allclose(values[:, 0], expected, rtol=1e-5, atol=2e-5 * scale)


def test_line_search_on_squared_error_is_the_weighted_mean_residual():
    rng, leaf_of_row, weight = _leaf_data(3)
    y = rng.normal(size=leaf_of_row.size).astype(np.float32)
    raw = np.zeros((leaf_of_row.size, 1), np.float32)
    values = line_search_leaf_values(
        losses.squared_error,
        jnp.asarray(y),
        jnp.asarray(raw),
        jnp.asarray(weight),
        jnp.asarray(leaf_of_row),
        jnp.ones((5, 1)),
    )
    for leaf in range(5):
        rows = leaf_of_row == leaf
        np.testing.assert_allclose(
            values[leaf, 0], np.average(y[rows], weights=weight[rows]), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("reg_lambda", [0.0, 0.5, 1.0, 4.0])
def test_line_search_finds_the_stationary_point_of_the_penalised_log_loss(reg_lambda):
    """sum_i w_i loss_i(t) + reg_lambda/2 |t d|^2 has slope zero at the result.
    With a penalty, also on a leaf of one class, whose log loss alone falls
    without bound (the search used to stop where float32 slopes underflow)."""
    rng, leaf_of_row, weight = _leaf_data(9, n_leaves=4)
    y = rng.integers(0, 2, leaf_of_row.size).astype(np.float32)
    if reg_lambda > 0:
        y[leaf_of_row == 3] = 1.0  # a pure leaf
    raw = rng.normal(size=(leaf_of_row.size, 1)).astype(np.float32)
    direction = np.asarray([[1.0], [0.5], [2.0], [1.0]], np.float32)
    values = np.asarray(
        line_search_leaf_values(
            losses.binary_logloss,
            jnp.asarray(y),
            jnp.asarray(raw),
            jnp.asarray(weight),
            jnp.asarray(leaf_of_row),
            jnp.asarray(direction),
            reg_lambda=reg_lambda,
        )
    )
    moved = raw[:, 0].astype(np.float64) + values[leaf_of_row, 0]
    p = 1 / (1 + np.exp(-moved))
    for leaf in range(4):
        rows = leaf_of_row == leaf
        d = float(direction[leaf, 0])
        # d/dt at the step t = value / d
        slope = d * np.sum(weight[rows] * (p[rows] - y[rows])) + reg_lambda * d * values[leaf, 0]
        assert abs(slope) < 1e-5 * np.sum(weight[rows]), (leaf, slope)
    if reg_lambda > 0:  # the pure leaf: finite, of the size log(weight / lambda)
        total = np.sum(weight[leaf_of_row == 3])
        assert 0 < values[3, 0] < np.log(total / reg_lambda) + 1


def test_line_search_without_reg_lambda_is_unchanged_by_the_penalty_argument():
    rng, leaf_of_row, weight = _leaf_data(10)
    y = rng.normal(size=leaf_of_row.size).astype(np.float32)
    args = (
        losses.log_cosh,
        jnp.asarray(y),
        jnp.zeros((leaf_of_row.size, 1)),
        jnp.asarray(weight),
        jnp.asarray(leaf_of_row),
        jnp.ones((5, 1)),
    )
    np.testing.assert_array_equal(
        line_search_leaf_values(*args), line_search_leaf_values(*args, reg_lambda=0.0)
    )


def test_line_search_far_from_zero_and_empty_leaves():
    """Targets far from the start (the bracket must grow), and a leaf with no rows."""
    y = jnp.asarray([1e4, 1e4 + 2, 1e4 + 5, -3e3], jnp.float32)
    leaf_of_row = jnp.asarray([0, 0, 0, 2], jnp.int32)
    values = line_search_leaf_values(
        losses.absolute_error, y, jnp.zeros((4, 1)), jnp.ones(4), leaf_of_row, jnp.ones((3, 1))
    )
    np.testing.assert_allclose(np.asarray(values)[:, 0], [1e4 + 2, 0.0, -3e3], rtol=1e-6)


def test_line_search_along_a_vector_direction():
    """Vector leaves: the minimum of the leaf's loss along the given direction."""
    rng = np.random.default_rng(5)
    y = rng.integers(0, 3, 300).astype(np.float32)
    raw = jnp.zeros((300, 3))
    direction = jnp.asarray([[1.0, -0.5, 0.25]])
    values = line_search_leaf_values(
        losses.softmax_cross_entropy,
        jnp.asarray(y),
        raw,
        jnp.ones(300),
        jnp.zeros(300, jnp.int32),
        direction,
    )
    step = float(values[0, 0])

    def total(t):
        moved = raw + t * direction
        return jnp.sum(jax.vmap(losses.softmax_cross_entropy)(jnp.asarray(y), moved))

    assert abs(float(jax.grad(total)(step))) < 1e-3
    assert float(total(step)) <= float(total(0.0))


def _count_row_sums(monkeypatch):
    """The number of rows of every sum over rows a line search runs (each sum
    is one collective when sharded)."""
    from jaxboost.engine import leaves, line_search

    calls = []
    summed, slope_summed = leaves.sum_by_leaf, line_search._slope_sums

    def counting(kernels, values, leaf_of_row, n_leaves, axis_name):
        n_rows = values.shape[1]
        jax.debug.callback(lambda: calls.append(n_rows))
        return summed(kernels, values, leaf_of_row, n_leaves, axis_name)

    def counting_slopes(loss, kernels, direction, n_leaves, rows, steps, axis_name):
        n_rows = rows.weight.shape[0]
        jax.debug.callback(lambda: calls.append(n_rows))
        return slope_summed(loss, kernels, direction, n_leaves, rows, steps, axis_name)

    monkeypatch.setattr(leaves, "sum_by_leaf", counting)  # (sum_rows' sums)
    monkeypatch.setattr(line_search, "sum_by_leaf", counting)
    monkeypatch.setattr(line_search, "_slope_sums", counting_slopes)
    return calls


@pytest.mark.parametrize(
    "loss_name, most_sums, most_sums_over_all_rows",
    # (the counts include the leaves' weight sums, which the search takes first)
    [("squared_error", 8, 8), ("log_cosh", 8, 8), ("quantile", 22, 8)],
)
def test_line_search_converges_in_few_sums(
    monkeypatch, loss_name, most_sums, most_sums_over_all_rows
):
    """Curved losses stop once Newton's step is within the rounding of the slope's
    sum (a quadratic: at once); curvature-free ones shrink the bracket threefold
    per sum, and after a few sums over all rows sum only the rows whose slope
    still changes in the bracket.  Every value is the float64 minimiser of its
    leaf."""
    from scipy.optimize import brentq

    calls = _count_row_sums(monkeypatch)
    rng, leaf_of_row, weight = _leaf_data(6, n_rows=20_000, n_leaves=8)
    y = (3 * rng.standard_t(3, leaf_of_row.size)).astype(np.float32)
    raw = np.full((leaf_of_row.size, 1), -0.3, np.float32)
    loss = losses.quantile(0.9) if loss_name == "quantile" else getattr(losses, loss_name)
    slopes = {
        "squared_error": lambda t, r: 2 * (t - r),
        "log_cosh": lambda t, r: np.tanh(t - r),
    }
    search = functools.partial(line_search_leaf_values, narrow=True)
    values = jax.jit(search, static_argnums=0)(
        loss,
        jnp.asarray(y),
        jnp.asarray(raw),
        jnp.asarray(weight),
        jnp.asarray(leaf_of_row),
        jnp.ones((8, 1)),
    )
    values = np.asarray(values)[:, 0]
    assert len(calls) <= most_sums
    assert sum(n_rows == leaf_of_row.size for n_rows in calls) <= most_sums_over_all_rows
    for leaf in range(8):
        rows = leaf_of_row == leaf
        residual = (y[rows] - raw[rows, 0]).astype(np.float64)
        if loss_name == "quantile":
            expected = inverted_cdf_quantile(residual, weight[rows], 0.9)
        else:
            slope, leaf_weight = slopes[loss_name], weight[rows]

            def leaf_slope(t, slope=slope, leaf_weight=leaf_weight, residual=residual):
                return np.sum(leaf_weight * slope(t, residual))

            expected = brentq(leaf_slope, -50, 50)
        np.testing.assert_allclose(values[leaf], expected, rtol=2e-6, atol=1e-6)


def _pinball_problem(seed, n_rows, alpha):
    """Leaves of Student-t targets with weights (a tenth of them 0, as padding
    rows): ``(loss, y, raw (n_rows, 1), weight, leaf_of_row)`` and each of the 8
    leaves' exact weighted quantile."""
    rng, leaf_of_row, weight = _leaf_data(seed, n_rows=n_rows, n_leaves=8)
    weight[rng.uniform(size=n_rows) < 0.1] = 0.0
    y = (3 * rng.standard_t(2, n_rows) + leaf_of_row).astype(np.float32)
    raw = rng.normal(size=(n_rows, 1)).astype(np.float32)
    expected = [
        inverted_cdf_quantile(
            (y - raw[:, 0]).astype(np.float64)[rows], weight[rows].astype(np.float64), alpha
        )
        for rows in (leaf_of_row == leaf for leaf in range(8))
    ]
    problem = (losses.quantile(alpha), y, raw, weight, leaf_of_row)
    return problem, np.array(expected)


def test_a_pinball_search_that_cannot_narrow_goes_on_over_all_rows(monkeypatch):
    """More rows changing slope in the brackets than the search may gather
    (here at most 64): every sum runs over all rows, to the same quantiles."""
    from jaxboost.engine import line_search

    monkeypatch.setattr(line_search, "_NARROW_FRACTION", 10**9)
    calls = _count_row_sums(monkeypatch)
    (loss, *arrays), expected = _pinball_problem(8, 20_000, 0.8)
    search = functools.partial(line_search_leaf_values, narrow=True)
    values = jax.jit(search, static_argnums=0)(loss, *map(jnp.asarray, arrays), jnp.ones((8, 1)))
    assert len(calls) > 10 and set(calls) == {20_000}
    np.testing.assert_allclose(np.asarray(values)[:, 0], expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("kernels", sorted(LEAF_KERNELS))
def test_a_sharded_pinball_search_narrows_to_the_exact_quantiles(monkeypatch, kernels):
    """Sharded rows: after a few sums over all of a shard's rows, the search
    gathers every shard's rows whose slope still changes and finishes on them."""
    from jax.sharding import Mesh, PartitionSpec

    devices = jax.devices()[:2]
    n_rows = 12_000
    calls = _count_row_sums(monkeypatch)
    (loss, *arrays), expected = _pinball_problem(10, n_rows, 0.3)

    def local(y, raw, weight, leaf_of_row):
        direction = jnp.ones((8, 1))
        leaf_kernels = LEAF_KERNELS[kernels]
        return line_search_leaf_values(
            loss, y, raw, weight, leaf_of_row, direction, "rows", leaf_kernels, narrow=True
        )

    mesh = Mesh(np.array(devices), ("rows",))
    rows = PartitionSpec("rows")
    search = jax.shard_map(
        local, mesh=mesh, in_specs=(rows,) * 4, out_specs=PartitionSpec(), check_vma=False
    )
    values = jax.jit(search)(*map(jnp.asarray, arrays))
    jax.effects_barrier()  # every shard's callbacks have run
    shard_rows = n_rows // len(devices)
    sums_over_shards = [n for n in calls if n == shard_rows]
    # (the leaves' weight sums, taken first, included)
    assert len(sums_over_shards) <= 8 * len(devices)
    assert len(calls) - len(sums_over_shards) >= 5 * len(devices)
    np.testing.assert_allclose(np.asarray(values)[:, 0], expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("kernels", sorted(LEAF_KERNELS))
@pytest.mark.parametrize("hessian_shape", [(3,), (3, 3)])
def test_leaf_totals_sum_gradients_hessians_and_weights_by_leaf(kernels, hessian_shape):
    rng = np.random.default_rng(3)
    n_rows, n_leaves = 500, 8
    grad = rng.normal(size=(n_rows, 3)).astype(np.float32)
    hess = rng.uniform(size=(n_rows, *hessian_shape)).astype(np.float32)
    weight = rng.uniform(size=n_rows).astype(np.float32)
    leaf_of_row = rng.integers(0, n_leaves - 1, n_rows).astype(np.int32)  # the last leaf empty
    totals = jax.jit(leaf_totals, static_argnums=(0, 5, 6))(
        LEAF_KERNELS[kernels], grad, hess, weight, leaf_of_row, n_leaves, None
    )
    one_hot = np.eye(n_leaves)[leaf_of_row]  # (n_rows, n_leaves)
    np.testing.assert_allclose(totals.grad, one_hot.T @ grad, rtol=1e-5, atol=1e-5)
    expected_hess = np.einsum("rl,r...->l...", one_hot, hess.astype(np.float64))
    assert totals.hess.shape == (n_leaves, *hessian_shape)
    np.testing.assert_allclose(totals.hess, expected_hess, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(totals.weight, one_hot.T @ weight, rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(totals.grad)[-1] == 0) and totals.weight[-1] == 0
    assert totals.loss is None and totals.score is None


@pytest.mark.parametrize("kernels", sorted(LEAF_KERNELS))
def test_leaf_totals_sum_the_scores_magnitude_and_the_loss_when_asked(kernels):
    rng = np.random.default_rng(4)
    n_rows, n_leaves = 300, 4
    grad, hess = (rng.normal(size=(n_rows, 2)).astype(np.float32) for _ in range(2))
    weight = rng.uniform(size=n_rows).astype(np.float32)
    raw = rng.normal(size=(n_rows, 2)).astype(np.float32)
    row_loss = rng.uniform(size=n_rows).astype(np.float32)
    leaf_of_row = rng.integers(0, n_leaves, n_rows).astype(np.int32)
    one_hot = np.eye(n_leaves)[leaf_of_row]
    for asked in ({"raw": raw}, {"row_loss": row_loss}, {"raw": raw, "row_loss": row_loss}):
        totals = leaf_totals(
            LEAF_KERNELS[kernels], grad, hess, weight, leaf_of_row, n_leaves, None, **asked
        )
        expected_score = one_hot.T @ (weight * np.abs(raw).mean(axis=1))
        expected_loss = one_hot.T @ (weight * row_loss)
        if "raw" in asked:
            np.testing.assert_allclose(totals.score, expected_score, rtol=1e-5)
        if "row_loss" in asked:
            np.testing.assert_allclose(totals.loss, expected_loss, rtol=1e-5)
        np.testing.assert_allclose(totals.weight, one_hot.T @ weight, rtol=1e-5)


@pytest.mark.parametrize("loss_name", ["log_cosh", "quantile"])
def test_leaf_totals_give_the_search_its_start_and_armijo_its_base(loss_name):
    """The training program hands the line search each leaf's slope and
    curvature at 0, and the Armijo check each leaf's loss, from the leaf
    totals' one pass (the loss as an extra column): the same leaf values as
    when both compute them with passes of their own."""
    from jaxboost.engine.derivatives import sample_loss
    from jaxboost.engine.line_search import armijo_backtrack

    rng, leaf_of_row, weight = _leaf_data(11, n_rows=3000, n_leaves=8)
    y = jnp.asarray((3 * rng.standard_t(3, leaf_of_row.size)).astype(np.float32))
    raw = jnp.asarray(rng.normal(size=(leaf_of_row.size, 1)).astype(np.float32))
    loss = losses.quantile(0.7) if loss_name == "quantile" else losses.log_cosh
    grad, hess = grad_hess(loss, y, raw)
    kernels = LEAF_KERNELS["native"]
    leaf, w = jnp.asarray(leaf_of_row), jnp.asarray(weight)
    row_loss = sample_loss(loss, y, raw)
    totals = leaf_totals(
        kernels, grad * w[:, None], hess * w[:, None], w, leaf, 8, None, row_loss=row_loss
    )
    one_hot = np.eye(8)[leaf_of_row]
    expected_loss = one_hot.T @ (weight * np.asarray(row_loss)).astype(np.float64)
    np.testing.assert_allclose(totals.loss, expected_loss, rtol=1e-5)

    direction = jnp.ones((8, 1))
    args = (loss, y, raw, w, leaf, direction, None, kernels)
    started = line_search_leaf_values(*args, start=(totals.grad[:, 0], totals.hess[:, 0]))
    np.testing.assert_allclose(started, line_search_leaf_values(*args), rtol=1e-6, atol=1e-7)

    big_steps = 40 * started  # too long: Armijo must shrink some
    armijo_args = (loss, y, raw, w, leaf, big_steps, totals.grad, None, kernels)
    shrunk = armijo_backtrack(*armijo_args, base=totals.loss)
    np.testing.assert_array_equal(shrunk, armijo_backtrack(*armijo_args))
    assert np.any(np.asarray(shrunk) != np.asarray(big_steps))

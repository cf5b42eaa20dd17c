"""Tests of ``jaxboost.engine.tree.grow_tree``: the grown structure routes rows as numpy does
on raw features, and every split is the brute-force best split of its node."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.engine.binning import TILE_ROWS, apply_bins, fit_bin_edges, tile_bins
from jaxboost.engine.tree import TreeParams, grow_tree
from jaxboost.kernels.interfaces import LevelSplit
from jaxboost.kernels.leaf_sums import leaf_sums_native
from jaxboost.kernels.route_native import native_route_leaf_sums, native_route_rows

_grow = jax.jit(grow_tree, static_argnames=("params", "axis_name"))

RTOL, ATOL = 1e-4, 1e-4


def _route_raw(X, feature, threshold, missing_left, depth):
    """Leaf of every row by walking the heap with raw thresholds, in numpy."""
    leaves = np.empty(X.shape[0], np.int64)
    for row in range(X.shape[0]):
        node = 0
        for _ in range(depth):
            value = X[row, feature[node]]
            if np.isnan(value):
                go_right = not missing_left[node]
            else:
                go_right = not value <= threshold[node]
            node = 2 * node + 1 + int(go_right)
        leaves[row] = node - (2**depth - 1)
    return leaves


def _node_of_rows(X, feature, threshold, missing_left, depth):
    """Heap node of every row at every level: ``(depth + 1, n_rows)``."""
    nodes = np.zeros((depth + 1, X.shape[0]), np.int64)
    for level in range(depth):
        node = nodes[level]
        value = X[np.arange(X.shape[0]), feature[node]]
        go_right = np.where(np.isnan(value), ~missing_left[node], ~(value <= threshold[node]))
        nodes[level + 1] = 2 * node + 1 + go_right
    return nodes


def _brute_force_best_gain(bins, stats, n_outputs, max_bins, params):
    """Best gain over every (feature, threshold bin, missing direction) of these rows,
    and the gain of each candidate as a dict."""

    def score(rows):
        grad = stats[rows, :n_outputs].sum(axis=0)
        hess = stats[rows, n_outputs : 2 * n_outputs].sum(axis=0)
        return np.sum(
            np.where(hess + params.reg_lambda > 0, grad**2 / (hess + params.reg_lambda), 0)
        )

    def ok(rows):
        hess = stats[rows, n_outputs : 2 * n_outputs].sum()
        return hess >= params.min_child_weight and stats[rows, -1].sum() > 0

    gains = {}
    parent = score(np.ones(stats.shape[0], bool))
    for feature in range(bins.shape[0]):
        missing = bins[feature] == max_bins
        for threshold in range(max_bins):
            for missing_left in (False, True):
                left = np.where(missing, missing_left, bins[feature] <= threshold)
                if ok(left) and ok(~left):
                    gains[feature, threshold, missing_left] = 0.5 * (
                        score(left) + score(~left) - parent
                    )
    return gains


def _data(seed, n_rows, n_outputs):
    rng = np.random.default_rng(seed)
    X = np.stack(
        [
            rng.normal(size=n_rows),
            rng.integers(0, 5, size=n_rows).astype(float),
            np.where(rng.random(n_rows) < 0.25, np.nan, rng.uniform(-1, 1, size=n_rows)),
            rng.exponential(size=n_rows),
        ],
        axis=1,
    ).astype(np.float32)
    X[rng.random(n_rows) < 0.05, 0] = np.nan
    signal = (
        np.sin(2 * np.nan_to_num(X[:, 0]))
        + (X[:, 1] >= 3)
        + np.where(np.isnan(X[:, 2]), 1.5, X[:, 2])
    )
    grad = np.stack([signal * (k + 1) * (-1) ** k for k in range(n_outputs)], axis=1)
    grad = grad + rng.normal(scale=0.3, size=grad.shape)
    hess = rng.uniform(0.5, 1.5, size=(n_rows, n_outputs))
    weight = rng.uniform(0.5, 1.5, size=(n_rows, 1))
    stats = np.concatenate([grad, hess, weight], axis=1).astype(np.float32)
    return X, stats


def _grow_on(X, stats, params, max_bins):
    edges = fit_bin_edges(X, max_bins)
    bins = np.asarray(apply_bins(jnp.asarray(X), jnp.asarray(edges)))
    structure, leaf_of_row, _ = _grow(
        jnp.asarray(bins), jnp.asarray(stats), jnp.asarray(edges), params=params, axis_name=None
    )
    return edges, bins, jax.tree.map(np.asarray, structure), np.asarray(leaf_of_row)


@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("max_depth", [1, 4])
def test_leaf_of_row_matches_raw_routing_and_splits_are_best(n_outputs, max_depth):
    X, stats = _data(seed=max_depth + n_outputs, n_rows=300, n_outputs=n_outputs)
    max_bins = 16
    params = TreeParams(
        max_depth=max_depth, reg_lambda=1.0, min_child_weight=2.0, min_split_gain=0.0
    )
    edges, bins, tree, leaf_of_row = _grow_on(X, stats, params, max_bins)
    n_internal = 2**max_depth - 1
    assert tree.feature.shape == (n_internal,) and tree.feature.dtype == np.int32
    assert tree.threshold.shape == (n_internal,) and tree.threshold.dtype == np.float32
    assert tree.threshold_bin.shape == (n_internal,)
    assert tree.missing_left.shape == (n_internal,) and tree.missing_left.dtype == bool
    assert tree.split_gain.shape == (n_internal,)
    assert leaf_of_row.shape == (X.shape[0],)
    assert leaf_of_row.min() >= 0 and leaf_of_row.max() < 2**max_depth

    expected = _route_raw(X, tree.feature, tree.threshold, tree.missing_left, max_depth)
    np.testing.assert_array_equal(leaf_of_row, expected)

    splits = tree.split_gain > 0
    assert splits[0], "the root should split on this data"
    np.testing.assert_array_equal(
        tree.threshold[splits], edges[tree.feature[splits], tree.threshold_bin[splits]]
    )
    nodes = _node_of_rows(X, tree.feature, tree.threshold, tree.missing_left, max_depth)
    for node in range(n_internal):
        level = int(np.log2(node + 1))
        rows = nodes[level] == node
        gains = _brute_force_best_gain(bins[:, rows], stats[rows], n_outputs, max_bins, params)
        best = max(gains.values(), default=-np.inf)
        if not splits[node]:
            assert tree.threshold[node] == np.inf
            assert tree.missing_left[node]
            assert tree.threshold_bin[node] == max_bins - 1
            assert tree.feature[node] == 0
            assert best <= 1e-4 * max(1.0, abs(best)), f"node {node} should split (gain {best})"
            continue
        np.testing.assert_allclose(tree.split_gain[node], best, rtol=RTOL, atol=ATOL)
        key = (
            int(tree.feature[node]),
            int(tree.threshold_bin[node]),
            bool(tree.missing_left[node]),
        )
        np.testing.assert_allclose(gains[key], best, rtol=RTOL, atol=ATOL, err_msg=f"node {node}")


def test_level_without_splits_sends_rows_left():
    """One binary feature carries all the signal: after the root every node is pure."""
    rng = np.random.default_rng(0)
    n_rows, max_depth = 120, 3
    X = np.stack([rng.integers(0, 2, n_rows), rng.normal(size=n_rows)], axis=1).astype(np.float32)
    grad = np.where(X[:, 0] == 1, -1.0, 1.0)
    stats = np.stack([grad, np.ones(n_rows), np.ones(n_rows)], axis=1).astype(np.float32)
    params = TreeParams(
        max_depth=max_depth, reg_lambda=1.0, min_child_weight=0.0, min_split_gain=0.0
    )
    max_bins = 8
    _, _, tree, leaf_of_row = _grow_on(X, stats, params, max_bins)
    assert tree.feature[0] == 0 and tree.threshold_bin[0] == 0 and tree.split_gain[0] > 0
    below_root = slice(1, 2**max_depth - 1)
    np.testing.assert_array_equal(tree.threshold[below_root], np.inf)
    np.testing.assert_array_equal(tree.missing_left[below_root], True)
    np.testing.assert_array_equal(tree.split_gain[below_root], 0.0)
    np.testing.assert_array_equal(tree.threshold_bin[below_root], max_bins - 1)
    # left of the root: leaf 0; right of the root: the leftmost leaf below node 2
    np.testing.assert_array_equal(leaf_of_row, np.where(X[:, 0] == 1, 2 ** (max_depth - 1), 0))
    X_missing = X.copy()
    X_missing[::3, 1] = np.nan
    expected = _route_raw(X_missing, tree.feature, tree.threshold, tree.missing_left, max_depth)
    np.testing.assert_array_equal(leaf_of_row, expected)


def test_nothing_splits_at_the_root():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3)).astype(np.float32)
    X[::4, 2] = np.nan
    stats = np.tile(np.array([0.7, 1.0, 1.0], np.float32), (50, 1))
    params = TreeParams(max_depth=2, reg_lambda=1.0, min_child_weight=0.0, min_split_gain=0.0)
    _, _, tree, leaf_of_row = _grow_on(X, stats, params, 8)
    np.testing.assert_array_equal(tree.threshold, np.inf)
    np.testing.assert_array_equal(tree.split_gain, 0.0)
    np.testing.assert_array_equal(leaf_of_row, 0)


def test_missing_values_follow_the_learned_direction():
    """Missing rows of the only informative feature behave like its high values."""
    rng = np.random.default_rng(2)
    n_rows = 200
    x = (rng.integers(0, 20, size=n_rows) / 2).astype(np.float32)  # exact bins
    missing = rng.random(n_rows) < 0.2
    grad = np.where((x > 6) | missing, -1.0, 1.0)
    x[missing] = np.nan
    stats = np.stack([grad, np.ones(n_rows), np.ones(n_rows)], axis=1).astype(np.float32)
    params = TreeParams(max_depth=1, reg_lambda=1.0, min_child_weight=0.0, min_split_gain=0.0)
    _, _, tree, leaf_of_row = _grow_on(x[:, None], stats, params, 32)
    assert not tree.missing_left[0]
    assert np.max(x[~missing & (x <= 6)]) <= tree.threshold[0] < np.min(x[x > 6])
    np.testing.assert_array_equal(leaf_of_row, (grad < 0).astype(int))


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_kernels_and_the_weight_column_give_the_same_tree(n_outputs):
    # the weight column changes nothing (children of zero weight gain exactly
    # 0), and the packed kernel equals the reference
    X, stats = _data(seed=7, n_rows=400, n_outputs=n_outputs)
    stats[::5, -1] = 0.0  # some rows weigh nothing: their hessians are 0 too
    stats[::5, n_outputs : 2 * n_outputs] = 0.0
    trees = []
    for kernel in ("reference", "packed", "native"):
        params = TreeParams(4, 1.0, 0.0, 0.0, histogram_kernel=kernel)
        for columns in (stats, stats[:, :-1]):
            trees.append(_grow_on(X, columns, params, 16)[2:])
    for tree, leaf_of_row in trees[1:]:
        for name in ("feature", "threshold_bin", "missing_left"):
            np.testing.assert_array_equal(getattr(tree, name), getattr(trees[0][0], name))
        np.testing.assert_array_equal(leaf_of_row, trees[0][1])


def test_rows_of_zero_weight_are_never_split_off_without_a_weight_column():
    # the weighted rows are pure; the rows of zero weight (x <= 0) have zero
    # weighted sums, so splitting them off gains exactly 0, even with
    # min_child_weight = 0 and no weight column in the statistics
    x = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
    weight = (x > 0).astype(np.float32)
    stats = np.stack([-1.0 * weight, weight], axis=1).astype(np.float32)
    for kernel in ("reference", "packed", "native"):
        params = TreeParams(1, 1.0, 0.0, 0.0, histogram_kernel=kernel)
        tree = _grow_on(x[:, None], stats, params, 32)[2]
        assert tree.split_gain[0] == 0.0 and np.isinf(tree.threshold[0])


def _random_split(seed, n_features=5, n_rows=300, n_nodes=4, missing_bin=16):
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, missing_bin + 1, (n_features, n_rows)).astype(np.uint8)
    node_of_row = rng.integers(0, n_nodes, n_rows).astype(np.int32)
    split = (
        rng.integers(0, n_features, n_nodes).astype(np.int32),
        rng.integers(0, missing_bin, n_nodes).astype(np.int32),
        rng.uniform(size=n_nodes) < 0.5,
    )
    return bins, node_of_row, split


def _routed_by_numpy(bins, node_of_row, split, missing_bin):
    feature, threshold_bin, missing_left = (part[node_of_row] for part in split)
    row_bin = bins[feature, np.arange(bins.shape[1])]
    right = np.where(row_bin == missing_bin, ~missing_left, row_bin > threshold_bin)
    return 2 * node_of_row + right


def test_every_way_of_routing_rows_equals_numpy(monkeypatch):
    # the flat int32 index; feature rows, for large shards (n_features * n_rows
    # >= 2^31); the native kernel
    import jaxboost.kernels.histogram_kernels as tree_module

    bins, node_of_row, split = _random_split(2)
    expected = _routed_by_numpy(bins, node_of_row, split, 16)
    arguments = (
        jnp.asarray(bins),
        jnp.asarray(node_of_row),
        LevelSplit(*map(jnp.asarray, split), missing_bin=16),
    )
    native = native_route_rows(*arguments)
    flat = tree_module.route_rows(*arguments)
    monkeypatch.setattr(tree_module, "_FLAT_INDEX_LIMIT", 0)
    by_rows = tree_module.route_rows(*arguments)
    for routed in (native, flat, by_rows):
        np.testing.assert_array_equal(np.asarray(routed), expected)


@pytest.mark.parametrize("n_nodes, n_rows", [(1, 5000), (32, 5000), (32, 2 * TILE_ROWS + 300)])
def test_native_routing_on_a_larger_level_jitted(n_nodes, n_rows):
    # the kernel reads the bins by tiles of rows
    bins, node_of_row, split = _random_split(3, 9, n_rows, n_nodes, missing_bin=255)
    routed = jax.jit(
        lambda bins, nodes, *split: native_route_rows(bins, nodes, LevelSplit(*split, 255))
    )(tile_bins(bins), node_of_row, *split)
    np.testing.assert_array_equal(
        np.asarray(routed), _routed_by_numpy(bins, node_of_row, split, 255)
    )


@pytest.mark.parametrize("bad", ["node", "feature"])
def test_native_routing_rejects_indices_out_of_range(bad):
    bins, node_of_row, (feature, threshold_bin, missing_left) = _random_split(4)
    if bad == "node":
        node_of_row[7] = 4
    else:
        feature[1] = 5
    with pytest.raises(Exception, match=f"{bad}.* out of range"):
        jax.block_until_ready(
            native_route_rows(
                bins, node_of_row, LevelSplit(feature, threshold_bin, missing_left, 16)
            )
        )


def _leaf_values(seed, n_rows, widths):
    """Per-row values to sum by leaf: one ``(c, n_rows)`` float32 array per width."""
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=(width, n_rows)).astype(np.float32) for width in widths)


@pytest.mark.parametrize(
    "widths, n_nodes, n_rows",
    [((1, 1, 1), 4, 300), ((1, 1, 1, 1), 32, 2 * TILE_ROWS + 300), ((3, 3, 1, 1), 2, 5000)],
)
def test_native_routing_sums_the_leaves_as_the_leaf_kernel_does(widths, n_nodes, n_rows):
    # one pass routes the last level and sums its leaves: the same leaves as
    # the routing kernel, and the same float64 sums as the native leaf kernel
    # on the values stacked (so a fit's leaf totals are unchanged), for the
    # widths a fit passes (3 and 4 values unrolled, 8 taken from the buffers)
    bins, node_of_row, split = _random_split(5, 9, n_rows, n_nodes, missing_bin=255)
    columns = _leaf_values(6, n_rows, widths)
    leaf_of_row, sums = jax.jit(
        lambda bins, nodes, columns, *split: native_route_leaf_sums(
            bins, nodes, LevelSplit(*split, 255), columns
        )
    )(tile_bins(bins), node_of_row, columns, *split)
    expected_leaves = _routed_by_numpy(bins, node_of_row, split, 255)
    np.testing.assert_array_equal(np.asarray(leaf_of_row), expected_leaves)
    stacked = np.concatenate(columns, axis=0)
    by_kernel = leaf_sums_native(jnp.asarray(stacked), jnp.asarray(expected_leaves), 2 * n_nodes)
    np.testing.assert_array_equal(np.asarray(sums), np.asarray(by_kernel))
    by_numpy = np.zeros((2 * n_nodes, stacked.shape[0]))
    np.add.at(by_numpy, expected_leaves, stacked.T.astype(np.float64))
    np.testing.assert_allclose(np.asarray(sums), by_numpy, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("bad", ["node_of_row", "feature"])
def test_native_routing_with_leaf_sums_rejects_indices_out_of_range(bad):
    bins, node_of_row, (feature, threshold_bin, missing_left) = _random_split(7)
    if bad == "node_of_row":
        node_of_row[11] = -1
    else:
        feature[2] = 5
    split = LevelSplit(feature, threshold_bin, missing_left, 16)
    with pytest.raises(Exception, match=f"{bad} out of range"):
        jax.block_until_ready(
            native_route_leaf_sums(bins, node_of_row, split, _leaf_values(8, 300, (1, 1, 1)))
        )


@pytest.mark.parametrize("kernel", ["reference", "packed", "native"])
def test_grown_trees_sum_their_leaves_as_routed(kernel):
    # grow_tree's leaf sums (the native kernel's in its last routing pass)
    # are the sums over the rows of each leaf it returns
    X, stats = _data(seed=9, n_rows=400, n_outputs=1)
    edges = fit_bin_edges(X, 32)
    bins = apply_bins(jnp.asarray(X), jnp.asarray(edges))
    if kernel == "native":
        bins = tile_bins(np.asarray(bins))
    columns = _leaf_values(10, X.shape[0], (1, 2))
    params = TreeParams(3, 1.0, 0.0, 0.0, histogram_kernel=kernel)
    _, leaf_of_row, sums = _grow(
        jnp.asarray(bins),
        jnp.asarray(stats),
        jnp.asarray(edges),
        params=params,
        axis_name=None,
        leaf_columns=columns,
    )
    expected = np.zeros((8, 3))
    np.add.at(expected, np.asarray(leaf_of_row), np.concatenate(columns).T.astype(np.float64))
    np.testing.assert_allclose(np.asarray(sums), expected, rtol=1e-5, atol=1e-5)

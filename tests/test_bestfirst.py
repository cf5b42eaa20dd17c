"""The best-first grower (engine.bestfirst) against the depth-wise tree
pruned best-first (engine.leafwise), and its trees' depth bound."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxboost.engine.bestfirst import grow_best_first
from jaxboost.engine.binning import apply_bins, fit_bin_edges
from jaxboost.engine.tree import TreeParams, grow_tree


@functools.cache
def _data(seed=0, n_rows=2000):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 6)).astype(np.float32)
    X[rng.uniform(size=X.shape) < 0.03] = np.nan
    signal = np.nan_to_num(np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + (X[:, 3] > 1))
    stats = np.c_[-(signal + rng.normal(size=n_rows)), np.ones(n_rows)].astype(np.float32)
    edges = jnp.asarray(fit_bin_edges(X, 32))
    return apply_bins(jnp.asarray(X), edges), edges, jnp.asarray(stats)


def _params(max_leaves, max_depth, **settings):
    return TreeParams(
        max_depth=max_depth,
        reg_lambda=1.0,
        min_child_weight=1.0,
        min_split_gain=0.0,
        max_leaves=max_leaves,
        **settings,
    )


def _grow(grower, params):
    bins, edges, stats = _data()
    columns = (stats.T,)
    return jax.jit(lambda: grower(bins, stats, edges, params, None, leaf_columns=columns))()


def _same_tree(heap, table):
    """The pruned heap tree ``(structure, leaf_of_row, sums)`` and the node
    table's make the same splits and the same leaves (rows and sums)."""
    (h_structure, h_leaf, h_sums), (t_structure, t_leaf, t_sums) = heap, table
    h_split = np.asarray(h_structure.split_gain) > 0
    t_split = np.asarray(t_structure.split_gain) > 0

    def splits(structure, used):
        keys = zip(
            np.asarray(structure.feature)[used],
            np.asarray(structure.threshold_bin)[used],
            np.asarray(structure.missing_left)[used],
            np.asarray(structure.threshold)[used],
        )
        return sorted((int(f), int(b), bool(m), float(t)) for f, b, m, t in keys)

    assert splits(h_structure, h_split) == splits(t_structure, t_split)
    np.testing.assert_allclose(
        np.sort(np.asarray(h_structure.split_gain)[h_split]),
        np.sort(np.asarray(t_structure.split_gain)[t_split]),
        rtol=1e-5,
    )
    h_leaf, t_leaf = np.asarray(h_leaf), np.asarray(t_leaf)
    pairs = np.unique(np.c_[h_leaf, t_leaf], axis=0)  # the same partition of the rows
    assert len(np.unique(pairs[:, 0])) == len(np.unique(pairs[:, 1])) == len(pairs)
    np.testing.assert_allclose(
        np.asarray(h_sums)[pairs[:, 0]], np.asarray(t_sums)[pairs[:, 1]], rtol=1e-5, atol=1e-4
    )
    return int(t_split.sum())


@pytest.mark.parametrize("max_leaves, max_depth", [(2, 6), (5, 6), (20, 6), (31, 4)])
def test_trees_equal_the_pruned_depthwise_trees(max_leaves, max_depth):
    # within the same depth bound both grow the best-first tree of
    # max_leaves leaves: the same splits, rows and leaf sums
    params = _params(max_leaves, max_depth)
    n_splits = _same_tree(_grow(grow_tree, params), _grow(grow_best_first, params))
    assert n_splits == min(max_leaves - 1, 2**max_depth - 1)


def test_without_max_depth_the_tree_is_deeper_than_the_depthwise_bound():
    # 31 leaves, no depth bound: the grower goes past depth 6 on this data,
    # and a depth bound deep enough to never bind gives the same tree
    free = _grow(grow_best_first, _params(31, 0))
    deep = _grow(grow_tree, _params(31, 12))
    _same_tree(deep, free)
    left, right = np.asarray(free[0].left_child), np.asarray(free[0].right_child)

    def depth(node):
        return 0 if node < 0 else 1 + max(depth(left[node]), depth(right[node]))

    assert depth(0) > 6


@pytest.mark.parametrize("n_rows", [2000, 40_000])
def test_the_native_kernel_grows_the_reference_tree(n_rows):
    # the native step sums the two children's rows only, from bins stored
    # by tiles (40,000 rows: two tiles); the same tree as the reference's
    from jaxboost.engine.binning import tile_bins
    from jaxboost.kernels.native_library import native_available

    if not native_available(warn=False):
        pytest.skip("the native kernels do not build here")
    bins, edges, stats = _data(n_rows=n_rows)
    params = _params(12, 0)
    columns = (stats.T,)

    def grow(native):
        on = tile_bins(bins) if native else bins
        return jax.jit(
            lambda: grow_best_first(
                on, stats, edges, params, None, leaf_columns=columns, native=native
            )
        )()

    native, reference = grow(True), grow(False)
    _same_tree(reference, native)
    for field in ("left_child", "right_child", "feature", "threshold_bin"):
        np.testing.assert_array_equal(
            np.asarray(getattr(native[0], field)), np.asarray(getattr(reference[0], field))
        )

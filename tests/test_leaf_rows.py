"""Best-first growth's rows (engine.leaf_rows): the native kernel's step on
a segment of the rows' permutation against numpy, every row's leaf from the
segments, and the trees grown on the segments against the reference's pass
over every row's leaf number (missing values, categories, rows of no
weight, two outputs, quantised stats)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxboost.engine.bestfirst import grow_best_first
from jaxboost.engine.binning import TILE_ROWS, apply_bins, fit_bin_edges, tile_bins
from jaxboost.engine.categorical import CategoricalSettings, categorical_search
from jaxboost.engine.leaf_rows import Segments, leaf_of_row, row_major_bins
from jaxboost.engine.tree import TreeParams
from jaxboost.kernels.native_library import native_available

pytestmark = pytest.mark.skipif(
    not native_available(warn=False), reason="the native kernels do not build here"
)


def _rule_goes_right(bin_, threshold_bin, missing_left, category_left, missing_bin):
    """numpy: does a row of bin ``bin_`` go right?"""
    if bin_ == missing_bin:
        return not missing_left
    if np.any(category_left):
        return not (category_left[bin_ >> 5] >> (bin_ & 31)) & 1
    return bin_ > threshold_bin


@pytest.mark.parametrize(
    "categorical, n_features, n_stats",
    # (37 features: two passes of the sums; 6 stats: three outputs)
    [(False, 5, 2), (True, 5, 2), (False, 37, 6)],
)
def test_a_split_partitions_its_segment_stably_and_sums_the_smaller_child(
    categorical, n_features, n_stats
):
    from jaxboost.kernels.leaf_histogram import native_leaf_split

    rng = np.random.default_rng(3)
    n_rows, n_bins, n_leaves = 40_000, 9, 4  # two tiles of rows
    bins = rng.integers(0, n_bins, size=(n_features, n_rows), dtype=np.uint8)
    stats = rng.normal(size=(n_rows, n_stats)).astype(np.float32)
    positive = rng.random(n_rows) < 0.7
    order = rng.permutation(n_rows).astype(np.int32)
    start, count = 1000, 30_000
    order[start : start + count].sort()  # a leaf's rows: increasing
    table = rng.normal(size=(n_leaves, n_features, n_bins, n_stats)).astype(np.float32)
    category_left = np.zeros(8, np.uint32)
    if categorical:
        category_left[0] = 0b10110  # categories 1, 2, 4 go left
    feature, threshold_bin, missing_left = 2, 4, False
    leaves = np.array([1, 3], np.int32)

    new_order, new_table, hist, rows = jax.jit(native_leaf_split)(
        tile_bins(jnp.asarray(bins)),
        jnp.asarray(bins.T),
        jnp.asarray(stats),
        jnp.asarray(order),
        jnp.asarray(table),
        jnp.asarray(positive),
        jnp.asarray(leaves),
        jnp.array([start, count], jnp.int32),
        jnp.array([feature, threshold_bin, missing_left], jnp.int32),
        jnp.asarray(category_left),
    )
    segment = order[start : start + count]
    right = np.array(
        [
            _rule_goes_right(b, threshold_bin, missing_left, category_left, n_bins - 1)
            for b in bins[feature, segment]
        ]
    )
    expected = np.concatenate([segment[~right], segment[right]])
    new_order = np.asarray(new_order)
    np.testing.assert_array_equal(new_order[start : start + count], expected)
    np.testing.assert_array_equal(
        np.delete(new_order, np.s_[start : start + count]),
        np.delete(order, np.s_[start : start + count]),
    )
    children = (segment[~right], segment[right])
    np.testing.assert_array_equal(
        np.asarray(rows),
        [len(children[0]), len(children[1])] + [positive[rows_].sum() for rows_ in children],
    )

    def sums(rows_):  # (F, n_bins, S): running sums over the value bins, the missing bin as is
        hist_ = np.zeros((n_features, n_bins, n_stats))
        for f in range(n_features):
            np.add.at(hist_[f], bins[f, rows_], stats[rows_])
        hist_[:, :-1] = np.cumsum(hist_[:, :-1], axis=1)
        return hist_

    small = int(len(children[1]) < len(children[0]))
    hist = np.asarray(hist)
    np.testing.assert_allclose(hist[:, small], sums(children[small]), rtol=1e-6, atol=1e-4)
    # the other child: the parent's histograms (the table's) minus the summed one
    np.testing.assert_allclose(hist[:, 1 - small], table[1] - hist[:, small], rtol=1e-6)
    new_table = np.asarray(new_table)
    np.testing.assert_array_equal(new_table[leaves], np.moveaxis(hist, 1, 0))
    np.testing.assert_array_equal(new_table[[0, 2]], table[[0, 2]])


@pytest.mark.parametrize("n_rows", [100, 2 * TILE_ROWS, 2 * TILE_ROWS + 5])
def test_tiled_bins_read_back_row_by_row(n_rows):
    bins = np.random.default_rng(1).integers(0, 256, size=(3, n_rows), dtype=np.uint8)
    rows = jax.jit(row_major_bins)(tile_bins(jnp.asarray(bins)))
    np.testing.assert_array_equal(np.asarray(rows), bins.T)


def test_every_rows_leaf_from_the_segments():
    rng = np.random.default_rng(0)
    n_rows, n_leaves = 50, 6
    order = rng.permutation(n_rows).astype(np.int32)
    count = np.array([7, 0, 20, 3, 20, 0], np.int32)  # leaves 1 and 5: none
    start = np.array([43, 0, 0, 40, 20, 0], np.int32)
    expected = np.empty(n_rows, np.int32)
    for leaf in range(n_leaves):
        expected[order[start[leaf] : start[leaf] + count[leaf]]] = leaf
    segments = Segments(*map(jnp.asarray, (order, start, count)), hist=None)
    np.testing.assert_array_equal(np.asarray(jax.jit(leaf_of_row)(segments)), expected)


def _table(n_rows, seed=0):
    """Two numeric columns (missing values), a categorical one of 12 codes
    (one bin each) and a numeric one, bins and edges."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 12, n_rows).astype(np.float32)
    codes[rng.random(n_rows) < 0.05] = np.nan
    numeric = rng.normal(size=(n_rows, 3)).astype(np.float32)
    numeric[rng.random(n_rows) < 0.1, 1] = np.nan
    X = np.column_stack([numeric[:, 0], numeric[:, 1], codes, numeric[:, 2]])
    effect = rng.normal(size=12)[np.nan_to_num(codes).astype(int)]
    signal = effect + np.sin(2 * X[:, 0]) + np.nan_to_num(X[:, 1]) * (X[:, 3] > 0)
    edges = fit_bin_edges(X, 32)
    edges[2] = np.inf
    edges[2, :12] = np.arange(12) + 0.5
    bins = apply_bins(jnp.asarray(X), jnp.asarray(edges))
    return bins, jnp.asarray(edges), (signal + rng.normal(size=n_rows)).astype(np.float32)


@pytest.mark.parametrize(
    "case", ["categories, rows of no weight", "two outputs", "quantised stats"]
)
def test_trees_on_the_segments_are_the_reference_trees(case):
    n_rows = 40_000 if case == "two outputs" else 3000
    bins, edges, signal = _table(n_rows)
    rng = np.random.default_rng(1)
    hess = rng.uniform(0.5, 1.5, n_rows).astype(np.float32)
    grad = -signal * hess
    row_positive, stats_scale, categorical = None, None, None
    params = TreeParams(0, 1.0, 1e-3, 0.0, max_leaves=24)
    if case == "categories, rows of no weight":
        row_positive = rng.random(n_rows) < 0.8
        grad, hess = grad * row_positive, hess * row_positive
        params = params._replace(min_child_samples=30.0)
        categorical = CategoricalSettings((2,), (12,), max_cat_to_onehot=4)
    stats = np.column_stack([grad, hess])
    if case == "two outputs":
        stats = np.column_stack([grad, np.roll(grad, 7) - 0.3, hess, hess[::-1]])
    if case == "quantised stats":
        stats = np.column_stack([np.round(grad * 4), np.round(hess * 8)]).astype(np.int32)
        stats_scale = jnp.array([0.25, 0.125], jnp.float32)

    def grow(native):
        search = None
        if categorical is not None:
            search = categorical_search(categorical, 4, None, native_order=native)
        grown = jax.jit(
            lambda bins, stats: grow_best_first(
                bins,
                stats,
                edges,
                params,
                None,
                stats_scale=stats_scale,
                leaf_columns=(stats.T.astype(jnp.float32),),
                categorical=search,
                native=native,
                row_positive=None if row_positive is None else jnp.asarray(row_positive),
            )
        )(tile_bins(bins) if native else bins, jnp.asarray(stats))
        return jax.tree.map(np.asarray, grown)

    (tree, leaves, sums), (reference, reference_leaves, reference_sums) = grow(True), grow(False)
    assert (tree.split_gain > 0).sum() > 15  # the leaves are many
    if categorical is not None:
        assert np.any(tree.category_left != 0)  # and some split is on a set
    # the same splits; the gains from sums in another order (float64, and
    # the larger child by subtraction)
    jax.tree.map(
        np.testing.assert_array_equal,
        tree._replace(split_gain=None),
        reference._replace(split_gain=None),
    )
    np.testing.assert_allclose(tree.split_gain, reference.split_gain, rtol=1e-5)
    np.testing.assert_array_equal(leaves, reference_leaves)
    np.testing.assert_allclose(sums, reference_sums, rtol=1e-5, atol=1e-3)


def test_the_memory_check_counts_every_leafs_histograms():
    from jaxboost.frontends.settings.checks import check_histogram_memory

    # 255 leaves of 28 features x 256 bins x 2 stats, float32: the native
    # step's table of every leaf's histograms (14.6 MB), and a step's two
    table = 255 * 28 * 256 * 2 * 4
    check_histogram_memory(0, 28, 256, 1, table + 3 * table // 255, max_leaves=255)
    with pytest.raises(ValueError, match="max_leaves: 255 needs about"):
        check_histogram_memory(0, 28, 256, 1, table, max_leaves=255)

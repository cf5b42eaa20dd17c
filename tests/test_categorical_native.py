"""Categorical splits on the native CPU kernels: routing rows by category
sets (the routing and children histogram kernels), the search's sort of the
categories, whole trees and fits against the XLA reference path, and
prediction by the native walk against the JAX one."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from native_levels import native_children

import jaxboost as jb
import jaxboost.engine.predict as predict_module
import jaxboost.engine.tree as tree_module
from jaxboost.engine.binning import TILE_ROWS, apply_bins, fit_bin_edges, tile_bins
from jaxboost.engine.categorical import CategoricalSettings, categorical_search
from jaxboost.engine.predict import predict_forest, predict_forest_native
from jaxboost.engine.tree import TreeParams, grow_tree
from jaxboost.frontends.training import initial_score_search, row_binning
from jaxboost.frontends.training import program_settings as settings_module
from jaxboost.kernels.category_order import native_category_order, native_category_sums
from jaxboost.kernels.histogram_kernels import HISTOGRAM_KERNELS, route_rows
from jaxboost.kernels.interfaces import LevelSplit
from jaxboost.kernels.registry import KernelChoice
from jaxboost.kernels.route_native import native_route_leaf_sums, native_route_rows


def _random_sets(rng, n_nodes, missing_bin, categorical):
    """``(n_nodes, 8)`` uint32 random sets of value bins at the nodes where
    ``categorical``, zero elsewhere."""
    in_left = rng.random((n_nodes, 256)) < 0.5
    in_left[:, missing_bin:] = False  # the search never puts the missing bin in a set
    in_left[~categorical] = False
    words = in_left.reshape(n_nodes, 8, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    return words.sum(axis=2).astype(np.uint32)


def _level(seed, n_features, n_rows, n_nodes, missing_bin):
    """Random bins (``missing_bin`` the missing bin), nodes and a level's
    splits, about half of them categorical."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, missing_bin + 1, (n_features, n_rows)).astype(np.uint8)
    node_of_row = rng.integers(0, n_nodes, n_rows).astype(np.int32)
    categorical = rng.random(n_nodes) < 0.5
    categorical[0] = True
    split = LevelSplit(
        jnp.asarray(rng.integers(0, n_features, n_nodes), jnp.int32),
        jnp.asarray(np.where(categorical, missing_bin - 1, rng.integers(0, missing_bin, n_nodes))),
        jnp.asarray(rng.random(n_nodes) < 0.5),
        missing_bin=missing_bin,
        category_left=jnp.asarray(_random_sets(rng, n_nodes, missing_bin, categorical)),
    )
    return bins, node_of_row, split


def _routed_by_numpy(bins, node_of_row, split):
    """The routing rule written out: missing by the node's direction; at a
    categorical node a bin in its set left; else by the threshold."""
    feature = np.asarray(split.feature)[node_of_row]
    row_bin = bins[feature, np.arange(bins.shape[1])].astype(np.int64)
    sets = np.asarray(split.category_left)[node_of_row]  # (n_rows, 8)
    in_set = (sets[np.arange(len(row_bin)), row_bin // 32] >> (row_bin % 32)) & 1
    categorical = sets.any(axis=1)
    value_right = np.where(
        categorical, in_set == 0, row_bin > np.asarray(split.threshold_bin)[node_of_row]
    )
    missing_right = ~np.asarray(split.missing_left)[node_of_row]
    right = np.where(row_bin == split.missing_bin, missing_right, value_right)
    return 2 * node_of_row + right


@pytest.mark.parametrize(
    "n_rows, n_nodes, missing_bin", [(300, 4, 16), (2 * TILE_ROWS + 300, 32, 255)]
)
def test_native_routing_by_category_sets_equals_numpy(n_rows, n_nodes, missing_bin):
    bins, node_of_row, split = _level(1, 6, n_rows, n_nodes, missing_bin)
    expected = _routed_by_numpy(bins, node_of_row, split)
    reference = route_rows(jnp.asarray(bins), jnp.asarray(node_of_row), split)
    native = jax.jit(lambda b, n: native_route_rows(b, n, split))(tile_bins(bins), node_of_row)
    columns = (np.random.default_rng(2).normal(size=(3, n_rows)).astype(np.float32),)
    leaves, sums = jax.jit(lambda b, n, c: native_route_leaf_sums(b, n, split, c))(
        tile_bins(bins), node_of_row, columns
    )
    for routed in (reference, native, leaves):
        np.testing.assert_array_equal(np.asarray(routed), expected)
    by_numpy = np.zeros((2 * n_nodes, 3))
    np.add.at(by_numpy, expected, columns[0].T.astype(np.float64))
    np.testing.assert_allclose(np.asarray(sums), by_numpy, rtol=1e-6, atol=1e-5)


def test_native_routing_rejects_sets_of_the_wrong_shape():
    bins, node_of_row, split = _level(3, 4, 200, 4, 16)
    split = split._replace(category_left=split.category_left[:3])
    with pytest.raises(Exception, match="category_left not"):
        jax.block_until_ready(native_route_rows(tile_bins(bins), node_of_row, split))


@pytest.mark.parametrize("quantised", [False, True])
def test_native_children_route_by_category_sets_and_sum_where_rows_went(quantised):
    n_features, n_rows, n_parents, n_bins = 5, TILE_ROWS + 700, 4, 33
    bins, parents, split = _level(4, n_features, n_rows, n_parents, n_bins - 1)
    stats = np.random.default_rng(5).integers(-3, 4, size=(n_rows, 2)).astype(np.int32)
    children = functools.partial(
        native_children, split=split, n_parents=n_parents, n_bins=n_bins, quantised=quantised
    )
    hist, _, routed = jax.jit(children)(tile_bins(bins), parents, stats)
    expected = _routed_by_numpy(bins, parents, split)
    np.testing.assert_array_equal(np.asarray(routed), expected)
    reference = HISTOGRAM_KERNELS["reference"].level(
        jnp.asarray(bins),
        jnp.asarray(expected),
        jnp.asarray(stats, jnp.float32),
        2 * n_parents,
        n_bins,
        None,
        None,
    )[0]
    plain = np.asarray(hist).copy()  # running sums over the value bins: back to plain
    plain[:, :, 1:-1] -= plain[:, :, :-2].copy()
    np.testing.assert_array_equal(plain, np.asarray(reference))


def test_native_category_order_is_a_stable_argsort_and_sums_in_that_order():
    rng = np.random.default_rng(6)
    keys = rng.integers(-3, 4, size=(3, 5, 64)).astype(np.float32)  # many ties
    keys[0, 0, :8] = [np.inf, np.nan, -0.0, 0.0, -np.inf, np.nan, 0.0, -0.0]
    keys[1] = rng.normal(size=(5, 64))
    expected = np.asarray(jnp.argsort(jnp.asarray(keys), axis=-1, stable=True))
    np.testing.assert_array_equal(np.asarray(jax.jit(native_category_order)(keys)), expected)
    batched = jax.vmap(native_category_order)(jnp.asarray(keys))
    np.testing.assert_array_equal(np.asarray(batched), expected)
    # and the bins' sums in that order: running (exact here: small integers), or as they are
    sums = rng.integers(-4, 5, size=(3, 5, 64, 3)).astype(np.float32)
    prefix = rng.random((3, 5)) < 0.5
    order, left = jax.jit(native_category_sums)(keys, sums, prefix)
    np.testing.assert_array_equal(np.asarray(order), expected)
    ordered = np.take_along_axis(sums, expected[..., None], axis=2)
    running = np.where(prefix[..., None, None], np.cumsum(ordered, axis=2), ordered)
    np.testing.assert_array_equal(np.asarray(left), running)


def _categorical_table(seed, n_rows):
    """Two categorical columns (codes 0..39 and 0..4, some missing) and two
    numeric ones (one with missing values), and integer-valued gradients:
    every kernel's sums are exact, so the trees must be the same bit for bit."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 40, n_rows).astype(np.float32)
    few = rng.integers(0, 5, n_rows).astype(np.float32)
    codes[rng.random(n_rows) < 0.05] = np.nan
    numeric = rng.normal(size=(n_rows, 2)).astype(np.float32)
    numeric[rng.random(n_rows) < 0.1, 1] = np.nan
    X = np.column_stack([numeric[:, 0], codes, few, numeric[:, 1]])
    effect = rng.normal(size=40)[np.nan_to_num(codes, nan=0).astype(int)]
    y = effect + (few == 2) + np.sin(2 * numeric[:, 0]) + np.nan_to_num(numeric[:, 1])
    return X, y.astype(np.float32)


def test_a_grown_tree_with_category_sets_is_the_same_on_every_kernel():
    X, y = _categorical_table(7, 3000)
    edges = fit_bin_edges(X, 64)
    edges[1:3] = np.inf
    edges[1:3, :40] = np.arange(40) + 0.5  # one bin per category code
    bins = np.asarray(apply_bins(jnp.asarray(X), jnp.asarray(edges)))
    stats = np.column_stack([np.round(4 * y) / 4, np.ones_like(y), np.ones_like(y)])
    settings = CategoricalSettings((1, 2), (40, 5))
    grown = {}
    for kernel in ("reference", "native"):
        search = categorical_search(settings, 4, None, native_order=kernel == "native")
        params = TreeParams(4, 1.0, 0.0, 0.0, histogram_kernel=kernel)
        on_kernel = tile_bins(bins) if kernel == "native" else bins
        grow = jax.jit(
            functools.partial(grow_tree, params=params, axis_name=None, categorical=search)
        )
        structure, leaf_of_row, _ = grow(
            jnp.asarray(on_kernel), jnp.asarray(stats, jnp.float32), jnp.asarray(edges)
        )
        grown[kernel] = jax.tree.map(np.asarray, (structure, leaf_of_row))
    (structure, leaves), (native, native_leaves) = grown["reference"], grown["native"]
    assert np.any(structure.category_left != 0)  # some split is on a set
    jax.tree.map(np.testing.assert_array_equal, native, structure)
    np.testing.assert_array_equal(native_leaves, leaves)


def _fit_and_predict(monkeypatch, native, X, y, X_new):
    """A categorical fit and its predictions on ``X_new``, on the native
    kernels or, ``native`` False, on the XLA ones as where none build."""
    if not native:
        xla = KernelChoice(histogram="packed", leaf="reference", native=False)
        for module in (settings_module, row_binning, initial_score_search):
            monkeypatch.setattr(module, "kernels_for", lambda platform: xla)
    searched_natively = []  # (the native split search of categorical features)
    native_search = tree_module.native_best_splits

    def recorded(*arguments, categorical=None, **options):
        searched_natively.append(categorical is not None)
        return native_search(*arguments, categorical=categorical, **options)

    monkeypatch.setattr(tree_module, "native_best_splits", recorded)
    settings = {"n_estimators": 4, "max_depth": 3, "cat_smooth": 3.0, "max_cat_to_onehot": 5}
    model = jb.Booster(categorical_features=[1, 2], **settings).fit(X, y)
    monkeypatch.undo()
    return model, model.predict(X_new), any(searched_natively)


def test_a_categorical_fit_on_the_native_kernels_equals_the_xla_one(monkeypatch):
    X, y = _categorical_table(8, 2000)
    X_new = X[:300].copy()
    X_new[:100, 1] = 41.0  # a category unseen in training: the missing direction
    xla, xla_prediction, xla_native = _fit_and_predict(monkeypatch, False, X, y, X_new)
    native, native_prediction, searched_natively = _fit_and_predict(monkeypatch, True, X, y, X_new)
    assert searched_natively and not xla_native  # the native search ran, and only there
    for name in ("feature", "threshold_bin", "missing_left", "category_left"):
        np.testing.assert_array_equal(getattr(native.forest_, name), getattr(xla.forest_, name))
    np.testing.assert_allclose(native_prediction, xla_prediction, rtol=1e-5, atol=1e-5)
    unseen = native.predict(np.where(np.arange(4) == 1, np.nan, X_new[:100]))
    np.testing.assert_allclose(native_prediction[:100], unseen, rtol=1e-6, atol=1e-6)


def test_native_prediction_walks_category_sets_as_the_jax_walk(monkeypatch):
    X, y = _categorical_table(9, 1500)
    model = jb.Booster(categorical_features=[1, 2], n_estimators=5, max_depth=4).fit(X, y)
    forest = jax.tree.map(jnp.asarray, model.forest_)
    assert np.any(model.forest_.category_left != 0)
    # codes as the model's encoding gives them, NaN, and codes out of range,
    # which both walks clamp to [0, 255]
    X_new = X[:400].copy()
    X_new[:50, 1] = np.nan
    X_new[50:60, 1] = [-1.0, 300.0, np.inf, -np.inf, 39.0, 40.0, 254.0, 255.0, 2.5, 0.0]
    init_score = jnp.asarray(model.base_score_)
    native = predict_forest_native(forest, init_score, jnp.asarray(X_new))
    walked = predict_forest(forest, init_score, jnp.asarray(X_new))
    np.testing.assert_allclose(np.asarray(native), np.asarray(walked), rtol=1e-6, atol=1e-6)
    # and predict() takes the native kernel on CPUs (called from the host)
    calls = []
    host_walk = predict_module.predict_forest_host
    monkeypatch.setattr(
        predict_module,
        "predict_forest_host",
        lambda *arguments, **options: calls.append(1) or host_walk(*arguments, **options),
    )
    X_valid = X[:400].copy()
    X_valid[50:60, 1] = 45.0  # unseen: encoded as missing
    encoded = jnp.asarray(np.where(X_valid > 39, np.nan, X_valid))
    expected = np.asarray(predict_forest(forest, init_score, encoded))[:, 0]
    np.testing.assert_allclose(model.predict(X_valid), expected, rtol=1e-6, atol=1e-6)
    assert calls

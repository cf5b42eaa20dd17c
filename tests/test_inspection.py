"""Tests of ``jaxboost.frontends.fitted.inspection``: importances and node weights against hand
counts and brute force, partial dependence against a hand computation, a
recursive transcription of Friedman's algorithm and brute-force averaging of
predictions where the two are exactly equal."""

from __future__ import annotations

import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost import Booster, losses
from jaxboost.engine.tree import Tree
from jaxboost.frontends.fitted.inspection import (
    feature_importances,
    grid_from_data,
    node_weights,
    partial_dependence,
)

INF = np.inf


def _hand_forest() -> Tree:
    """Two depth-2 trees.

    Tree 0: root x0 <= 0.5 (gain 4); node 1 x1 <= 0 (gain 2); node 2 does not
    split.  Tree 1: root x1 <= 1 (gain 1); node 1 x0 <= -1 (gain 3); node 2
    x2 <= 0 (gain 0.5).
    """
    return Tree(
        feature=np.array([[0, 1, 0], [1, 0, 2]], np.int32),
        threshold=np.array([[0.5, 0.0, INF], [1.0, -1.0, 0.0]], np.float32),
        threshold_bin=np.zeros((2, 3), np.int32),
        missing_left=np.ones((2, 3), bool),
        split_gain=np.array([[4.0, 2.0, 0.0], [1.0, 3.0, 0.5]], np.float32),
        leaf_value=np.array([[1.0, 2.0, 3.0, 0.0], [-1.0, 0.5, 2.0, 4.0]], np.float32)[..., None],
        leaf_weight=np.array([[10.0, 30.0, 60.0, 0.0], [20.0, 30.0, 40.0, 10.0]], np.float32),
    )


def _friedman_reference(forest: Tree, init_score, features, point) -> np.ndarray:
    """Friedman's weighted traversal, node by node, as written in the paper."""
    forest = Tree(*(np.asarray(leaf) for leaf in forest))
    n_internal = forest.feature.shape[1]

    def weight(t, node):
        if node >= n_internal:
            return float(forest.leaf_weight[t, node - n_internal])
        return weight(t, 2 * node + 1) + weight(t, 2 * node + 2)

    def visit(t, node):
        if node >= n_internal:
            return forest.leaf_value[t, node - n_internal].astype(np.float64)
        left, right = 2 * node + 1, 2 * node + 2
        feature = int(forest.feature[t, node])
        if feature in features:
            value = np.float32(point[features.index(feature)])
            return visit(t, left if value <= forest.threshold[t, node] else right)
        w_left, w_right = weight(t, left), weight(t, right)
        if w_left + w_right == 0:
            return visit(t, left)
        return (w_left * visit(t, left) + w_right * visit(t, right)) / (w_left + w_right)

    trees = range(forest.feature.shape[0])
    return np.asarray(init_score, np.float64) + sum(visit(t, 0) for t in trees)


def _visits(forest: Tree, X: np.ndarray) -> np.ndarray:
    """``(n_trees, 2^D - 1)`` rows of ``X`` passing through every internal node."""
    n_trees, n_internal = forest.feature.shape
    counts = np.zeros((n_trees, n_internal))
    for t in range(n_trees):
        node = np.zeros(X.shape[0], np.int64)
        while node[0] < n_internal:
            counts[t] += np.bincount(node, minlength=n_internal)
            value = X[np.arange(X.shape[0]), forest.feature[t, node]]
            node = 2 * node + 1 + (value > forest.threshold[t, node])
    return counts


def _brute_force(model: Booster, X: np.ndarray, features, grid) -> np.ndarray:
    """Average raw prediction over the rows of ``X`` with ``X[:, features]`` set."""
    mesh = np.meshgrid(*grid, indexing="ij")
    out = []
    for values in zip(*(axis.reshape(-1) for axis in mesh)):
        modified = X.copy()
        modified[:, list(features)] = values
        out.append(np.asarray(model.predict_raw(modified)).reshape(X.shape[0], -1).mean(axis=0))
    return np.asarray(out).reshape(mesh[0].shape + (-1,))


def _regression(seed=0, n_rows=400, n_features=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] + 0.1 * rng.normal(size=n_rows)
    return X, y.astype(np.float32)


@pytest.fixture(scope="module")
def deep_model():
    X, y = _regression(seed=1)
    model = Booster(loss=losses.squared_error, n_estimators=20, max_depth=3).fit(X, y)
    return model, X


@pytest.fixture(scope="module")
def additive_model():
    X, y = _regression()
    model = Booster(loss=losses.squared_error, n_estimators=20, max_depth=1).fit(X, y)
    return model, X


# -- importances -------------------------------------------------------------
def test_importances_of_a_hand_built_forest():
    forest = _hand_forest()
    gain = feature_importances(forest, 4, "gain")
    np.testing.assert_allclose(gain, np.array([7.0, 3.0, 0.5, 0.0]) / 10.5)
    split = feature_importances(forest, 4, "split")
    np.testing.assert_allclose(split, np.array([2.0, 2.0, 1.0, 0.0]) / 5)
    assert gain.dtype == np.float64 and gain.shape == (4,)


def test_importances_are_zero_without_splits_and_reject_bad_arguments():
    forest = _hand_forest()._replace(split_gain=np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(feature_importances(forest, 3, "gain"), np.zeros(3))
    with pytest.raises(ValueError, match="importance_type"):
        feature_importances(_hand_forest(), 4, "cover")
    with pytest.raises(ValueError, match="n_features"):
        feature_importances(_hand_forest(), 2, "gain")


def test_importance_of_the_only_informative_feature_dominates():
    X, _ = _regression(seed=3)
    y = np.sin(2 * X[:, 0]).astype(np.float32)
    model = Booster(loss=losses.squared_error, n_estimators=20, max_depth=3).fit(X, y)
    gain = feature_importances(model.forest_, 4, "gain")
    split = feature_importances(model.forest_, 4, "split")
    assert gain.sum() == pytest.approx(1.0) and split.sum() == pytest.approx(1.0)
    assert gain[0] > 0.95
    assert split[0] == split.max()


# -- node weights ------------------------------------------------------------
def test_node_weights_of_a_hand_built_forest():
    np.testing.assert_array_equal(
        node_weights(_hand_forest()), [[100.0, 40.0, 60.0], [100.0, 50.0, 50.0]]
    )


def test_node_weights_count_the_training_rows_through_each_node(deep_model):
    model, X = deep_model
    weights = node_weights(model.forest_)
    assert weights.shape == (20, 7)
    np.testing.assert_array_equal(weights, _visits(model.forest_, X))


# -- partial dependence ------------------------------------------------------
def test_partial_dependence_of_a_hand_built_forest():
    # tree 0: x0 <= 0.5 -> (10 * 1 + 30 * 2) / 40 = 1.75, else 3
    # tree 1: half x1 <= 1 -> (x0 <= -1 ? -1 : 0.5), half -> (40 * 2 + 10 * 4) / 50 = 2.4
    grid = np.array([-2.0, 0.0, 1.0], np.float32)
    expected = 0.5 + np.array([1.75 + 0.5 * (-1 + 2.4), 1.75 + 0.5 * (0.5 + 2.4), 3 + 1.45])
    pd = partial_dependence(_hand_forest(), [0.5], [0], [grid])
    assert pd.shape == (3, 1)
    np.testing.assert_allclose(pd[:, 0], expected, rtol=1e-6)


def test_two_feature_partial_dependence_of_a_hand_built_forest():
    forest = _hand_forest()
    grid = [np.array([-2.0, 0.0, 1.0]), np.array([-0.5, 0.5, 2.0])]
    pd = partial_dependence(forest, [0.5], (0, 1), grid)
    assert pd.shape == (3, 3, 1)
    for i, a in enumerate(grid[0]):
        for j, b in enumerate(grid[1]):
            expected = _friedman_reference(forest, [0.5], [0, 1], (a, b))
            np.testing.assert_allclose(pd[i, j], expected, rtol=1e-6)
    # x1 = -0.5, x0 = 0: tree 0 -> leaf 0 (1), tree 1 -> leaf 1 (0.5)
    assert pd[1, 0, 0] == pytest.approx(0.5 + 1 + 0.5)


def test_partial_dependence_equals_the_recursive_algorithm_on_a_fitted_forest(deep_model):
    model, _ = deep_model
    grid = [np.array([-1.0, 0.2, 1.5]), np.array([-0.7, 0.9])]
    pd = partial_dependence(model.forest_, model.base_score_, [1, 0], grid)
    for i, a in enumerate(grid[0]):
        for j, b in enumerate(grid[1]):
            expected = _friedman_reference(model.forest_, model.base_score_, [1, 0], (a, b))
            np.testing.assert_allclose(pd[i, j], expected, rtol=1e-5, atol=1e-5)


def test_partial_dependence_of_an_additive_model_equals_brute_force(additive_model):
    # with stumps and leaf weights counting the rows of X, the weighted
    # traversal of a stump on another feature is the average over the rows
    model, X = additive_model
    for feature in range(X.shape[1]):
        grid = grid_from_data(X, feature, grid_resolution=7)
        pd = partial_dependence(model.forest_, model.base_score_, [feature], [grid])
        brute = _brute_force(model, X, [feature], [grid])
        np.testing.assert_allclose(np.diff(pd[:, 0]), np.diff(brute[:, 0]), atol=1e-4)
        np.testing.assert_allclose(pd, brute, atol=1e-4)


def test_two_feature_partial_dependence_of_an_additive_model_is_the_sum(additive_model):
    model, X = additive_model
    grid = [grid_from_data(X, 0, grid_resolution=6), grid_from_data(X, 1, grid_resolution=5)]
    both = partial_dependence(model.forest_, model.base_score_, [0, 1], grid)
    first = partial_dependence(model.forest_, model.base_score_, [0], grid[:1])
    second = partial_dependence(model.forest_, model.base_score_, [1], grid[1:])
    assert both.shape == (6, 5, 1)
    residual = both - first[:, None, :] - second[None, :, :]
    assert np.ptp(residual) < 1e-4
    np.testing.assert_allclose(both, _brute_force(model, X, [0, 1], grid), atol=1e-4)


def test_partial_dependence_equals_brute_force_under_exact_independence():
    # rows are the product of 8 values of x0 with 50 (x1, x2, x3) rows, so in
    # the training distribution x0 is independent of the rest: there Friedman's
    # weighted traversal is exactly the average of predictions over the rows,
    # and the same holds for the pair (x1, x2) against the rest
    rng = np.random.default_rng(4)
    x0 = np.linspace(-2, 2, 8, dtype=np.float32)
    rest = rng.normal(size=(50, 3)).astype(np.float32)
    X = np.concatenate([np.repeat(x0, 50)[:, None], np.tile(rest, (8, 1))], axis=1)
    y = X[:, 0] * X[:, 1] + X[:, 2] ** 2 + np.sin(3 * X[:, 0] * X[:, 2])
    # (min_child_samples=0: with 20, 400 rows grow no split on x1)
    model = Booster(
        loss=losses.squared_error, n_estimators=20, max_depth=3, min_child_samples=0
    ).fit(X, y)
    assert np.all(np.isin([0, 1, 2], model.forest_.feature[model.forest_.split_gain > 0]))

    grid = [np.array([-3.0, -1.0, 0.1, 0.5, 2.0], np.float32)]
    pd = partial_dependence(model.forest_, model.base_score_, [0], grid)
    np.testing.assert_allclose(pd, _brute_force(model, X, [0], grid), atol=1e-4)

    grid = [grid_from_data(X, 1, grid_resolution=5), grid_from_data(X, 2, grid_resolution=4)]
    pd = partial_dependence(model.forest_, model.base_score_, [1, 2], grid)
    np.testing.assert_allclose(pd, _brute_force(model, X, [1, 2], grid), atol=1e-4)


def test_multi_output_partial_dependence_shapes_and_values():
    X, _ = _regression(seed=5)
    labels = (X[:, 0] > 0).astype(np.float32) + (X[:, 1] > 0.5)
    model = Booster(loss=losses.softmax_cross_entropy, n_estimators=20, max_depth=1).fit(X, labels)
    assert model.n_outputs_ == 3
    grid = [grid_from_data(X, 0, grid_resolution=9), grid_from_data(X, 1, grid_resolution=4)]
    one = partial_dependence(model.forest_, model.base_score_, [0], grid[:1])
    two = partial_dependence(model.forest_, model.base_score_, [0, 1], grid)
    assert one.shape == (9, 3) and two.shape == (9, 4, 3)
    np.testing.assert_allclose(one, _brute_force(model, X, [0], grid[:1]), atol=1e-4)
    np.testing.assert_allclose(two, _brute_force(model, X, [0, 1], grid), atol=1e-4)


def test_booster_partial_dependence_takes_an_index_or_a_column_name(additive_model):
    import pandas as pd

    model, X = additive_model
    _, by_list = model.partial_dependence(X, [1], grid_resolution=7)
    _, by_index = model.partial_dependence(X, 1, grid_resolution=7)
    np.testing.assert_array_equal(by_index, by_list)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    named = Booster(loss=losses.squared_error, n_estimators=20, max_depth=1).fit(
        frame, model.predict_raw(X)
    )
    _, by_name = named.partial_dependence(frame, "x1", grid_resolution=7)
    _, pair = named.partial_dependence(frame, ["x1", 0], grid_resolution=7)
    np.testing.assert_array_equal(by_name, named.partial_dependence(frame, [1], 7)[1])
    assert pair.shape == (7, 7, 1)
    with pytest.raises(ValueError, match="no column named 'x9'"):
        named.partial_dependence(frame, "x9")
    with pytest.raises(TypeError, match="expected column indices .* got 1.5"):
        model.partial_dependence(X, [1.5])


def test_partial_dependence_rejects_bad_arguments():
    forest = _hand_forest()
    with pytest.raises(ValueError, match="features"):
        partial_dependence(forest, [0.0], [0, 1, 2], [np.zeros(2)] * 3)
    with pytest.raises(ValueError, match="features"):
        partial_dependence(forest, [0.0], [1, 1], [np.zeros(2)] * 2)
    with pytest.raises(ValueError, match="grid"):
        partial_dependence(forest, [0.0], [0], [np.array([0.0, np.nan])])
    with pytest.raises(ValueError, match="grid"):
        partial_dependence(forest, [0.0], [0, 1], [np.zeros(2)])
    with pytest.raises(ValueError, match="init_score"):
        partial_dependence(forest, [0.0, 1.0], [0], [np.zeros(2)])


# -- grids -------------------------------------------------------------------
def test_grid_from_data_matches_scikit_learn():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 2)).astype(np.float32)
    X[:, 1] = rng.integers(0, 5, size=200)
    X[::7, 0] = np.nan
    grid = grid_from_data(X, 0, grid_resolution=20)
    finite = X[~np.isnan(X[:, 0]), 0].astype(np.float64)
    expected = np.linspace(*np.quantile(finite, [0.05, 0.95]), 20)
    np.testing.assert_allclose(grid, expected, rtol=1e-6)
    np.testing.assert_array_equal(grid_from_data(X, 1), np.arange(5, dtype=np.float32))
    with pytest.raises(ValueError, match="feature"):
        grid_from_data(X, 2)
    with pytest.raises(ValueError, match="percentiles"):
        grid_from_data(X, 0, percentiles=(0.9, 0.1))

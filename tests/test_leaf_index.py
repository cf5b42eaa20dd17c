"""``apply``: each row's leaf in every tree, against a walk of the heap in
numpy, and the leaves' values summing to the raw scores."""

import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses


def _numpy_leaves(forest, X: np.ndarray) -> np.ndarray:
    """``(n_rows, n_trees)`` leaves by walking each tree's heap row by row."""
    n_trees, n_internal = forest.feature.shape
    leaves = np.zeros((X.shape[0], n_trees), np.int64)
    for tree in range(n_trees):
        for row in range(X.shape[0]):
            node = 0
            while node < n_internal:
                value = X[row, forest.feature[tree, node]]
                if np.isnan(value):
                    right = not forest.missing_left[tree, node]
                else:
                    right = value > forest.threshold[tree, node]
                node = 2 * node + 1 + int(right)
            leaves[row, tree] = node - n_internal
    return leaves


def _data(n_rows=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4)).astype(np.float32)
    X[rng.uniform(size=X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1]))).astype(np.float32)
    return X, y


def test_apply_walks_the_heap_and_its_leaves_sum_to_the_raw_scores():
    X, y = _data()
    model = jb.Booster(n_estimators=6, max_depth=3).fit(X, y)
    leaves = model.apply(X)
    assert leaves.shape == (300, 6) and leaves.dtype == np.int32
    np.testing.assert_array_equal(leaves, _numpy_leaves(model.forest_, X))
    values = model.forest_.leaf_value[np.arange(6)[None, :], leaves]  # (n_rows, n_trees, 1)
    raw = model.base_score_[0] + values[..., 0].astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(raw, model.predict_raw(X), rtol=1e-5, atol=1e-5)


def test_apply_of_one_tree_per_output_and_an_iteration_range():
    X, y = _data(seed=1)
    labels = np.digitize(y, [-0.5, 0.5]).astype(np.float32)
    model = jb.Booster(
        losses.softmax_cross_entropy,
        n_estimators=4,
        max_depth=2,
        multi_strategy="one_output_per_tree",
    ).fit(X, labels)
    leaves = model.apply(X)
    assert leaves.shape == (300, 12)  # 4 rounds of 3 trees, in round order
    trees = np.arange(12)[None, :]
    raw = model.base_score_ + model.forest_.leaf_value[trees, leaves].sum(axis=1)
    np.testing.assert_allclose(raw, model.predict_raw(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(model.apply(X, iteration_range=(1, 3)), leaves[:, 3:9])


def test_the_estimators_apply_and_a_loaded_model_gives_the_same_leaves(tmp_path):
    X, y = _data(seed=2)
    estimator = jb.Regressor(n_estimators=3, max_depth=2).fit(X, y)
    np.testing.assert_array_equal(estimator.apply(X), estimator.booster_.apply(X))
    path = tmp_path / "model.json"
    estimator.booster_.save(path)
    np.testing.assert_array_equal(jb.load(path).apply(X), estimator.apply(X))


def test_apply_checks_the_columns():
    X, y = _data(seed=3)
    model = jb.Booster(n_estimators=2, max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.apply(X[:, :3])

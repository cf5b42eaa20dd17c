"""Partial dependence of models with categorical columns: the grid of a
categorical column is its categories; the values equal the average of the
predictions over the rows with the column set to each category (stumps:
Friedman's traversal is that average exactly), and a recursive traversal
of the stored trees for deeper ones."""

import numpy as np
import pandas as pd
import pytest

import jaxboost as jb

SHOPS = np.array(list("abcdefghij"), dtype=object)


def _data(n_rows=1500, seed=0):
    """Shop codes (column 0, 10 categories, independent of the rest), a
    number, and a target with a set effect of the shops plus the number."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 10, n_rows)
    number = rng.normal(size=n_rows)
    y = 1.5 * np.isin(codes, [1, 4, 7]) - np.isin(codes, [2, 9]) + number
    return np.c_[codes, number].astype(np.float32), (y + 0.1 * rng.normal(size=n_rows))


def _frame(X, order="abcdefghij"):
    shop = pd.Categorical(SHOPS[X[:, 0].astype(int)], categories=list(order))
    return pd.DataFrame({"shop": shop, "number": X[:, 1]})


def _brute_force(model, X, names, grid):
    """``(len(grid[0]), ..., K)``: the mean raw score over frame ``X``'s rows
    with its columns ``names`` set to each grid point."""
    points = np.meshgrid(*grid, indexing="ij")
    values = []
    for point in zip(*(axis.reshape(-1) for axis in points)):
        rows = X.copy()
        for name, value in zip(names, point):
            if isinstance(rows[name].dtype, pd.CategoricalDtype):
                rows[name] = pd.Categorical([value] * len(rows), categories=X[name].cat.categories)
            else:
                rows[name] = np.float32(value)
        values.append(model.predict_raw(rows).reshape(len(rows), -1).mean(axis=0))
    return np.asarray(values).reshape(points[0].shape + (-1,))


def test_the_grid_of_a_categorical_column_is_its_categories_present_in_X():
    X, y = _data()
    model = jb.Booster(n_estimators=3, max_depth=2).fit(_frame(X), y)
    without_c = _frame(X[X[:, 0] != 2], order="jihgfedcbaz")  # another order, "c" absent
    (grid,), values = model.partial_dependence(without_c, "shop")
    assert grid.tolist() == [s for s in "abdefghij"]  # the fitted order
    assert values.shape == (9, 1)


@pytest.mark.parametrize("features", [["shop"], ["shop", "number"], ["number", "shop"]])
def test_stumps_partial_dependence_is_the_average_prediction(features):
    X, y = _data(seed=1)
    frame = _frame(X)
    model = jb.Booster(n_estimators=12, max_depth=1, learning_rate=0.5).fit(frame, y)
    assert (model.forest_.feature[:, 0] == 0).any() and (model.forest_.feature[:, 0] == 1).any()
    grid, values = model.partial_dependence(frame, features, grid_resolution=6)
    brute = _brute_force(model, frame, features, grid)
    np.testing.assert_allclose(values, brute, atol=1e-4)
    # the shops with the set effect stand out
    if features == ["shop"]:
        order = np.argsort(-values[:, 0])
        assert set(grid[0][order[:3]]) == {"b", "e", "h"}


def _recursive(tree, codes_of, point, node=0):
    """Friedman's traversal of one heap-ordered tree at ``point`` (a dict
    feature -> value; categorical features by code), by recursion."""
    n_internal = tree.feature.shape[0]
    if node >= n_internal:
        return tree.leaf_value[node - n_internal]
    left, right = 2 * node + 1, 2 * node + 2
    feature = int(tree.feature[node])
    if feature in point:
        value = point[feature]
        bits = tree.category_left[node]
        if bits.any():  # a set of codes goes left
            code = int(value)
            goes_left = (int(bits[code // 32]) >> (code % 32)) & 1 == 1
        else:
            goes_left = value <= tree.threshold[node]
        return _recursive(tree, codes_of, point, left if goes_left else right)
    weight_left, weight_right = codes_of(left), codes_of(right)
    total = weight_left + weight_right
    share = weight_left / total if total > 0 else 1.0
    return share * _recursive(tree, codes_of, point, left) + (1 - share) * _recursive(
        tree, codes_of, point, right
    )


def _node_weight(tree, node):
    n_internal = tree.feature.shape[0]
    if node >= n_internal:
        return float(tree.leaf_weight[node - n_internal])
    return _node_weight(tree, 2 * node + 1) + _node_weight(tree, 2 * node + 2)


def test_deeper_trees_match_a_recursive_traversal_with_category_sets():
    X, y = _data(seed=2)
    y = y + np.where(np.isin(X[:, 0], [0, 3]), X[:, 1], 0)  # an interaction
    model = jb.Booster(categorical_features=[0], n_estimators=4, max_depth=3).fit(X, y)
    assert model.forest_.category_left[:, :3].any()
    grid, values = model.partial_dependence(X, [0, 1], grid_resolution=4)
    np.testing.assert_array_equal(grid[0], np.arange(10.0))
    codes = {
        value: code for value, code in zip(model.categories_[0].values, model.categories_[0].codes)
    }
    forest = model.forest_
    for i, shop in enumerate(grid[0]):
        for j, number in enumerate(grid[1]):
            expected = model.base_score_.astype(np.float64).copy()
            for t in range(forest.feature.shape[0]):
                tree = type(forest)(*(None if f is None else f[t] for f in forest))
                expected += _recursive(
                    tree,
                    lambda node, tree=tree: _node_weight(tree, node),
                    {0: codes[shop], 1: number},
                )
            np.testing.assert_allclose(values[i, j], expected, rtol=1e-5, atol=1e-5)


def test_the_plot_draws_the_categories_along_their_axis():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from jaxboost.frontends.fitted.plotting import plot_partial_dependence

    X, y = _data(seed=3)
    frame = _frame(X)
    model = jb.Booster(n_estimators=3, max_depth=2).fit(frame, y)
    ax = plot_partial_dependence(model, frame, "shop")
    (line,) = ax.get_lines()
    _, values = model.partial_dependence(frame, "shop")
    np.testing.assert_array_equal(line.get_ydata(), values[:, 0])
    assert [label.get_text() for label in ax.get_xticklabels()] == list("abcdefghij")
    ax = plot_partial_dependence(model, frame, ["number", "shop"], grid_resolution=5)
    assert [label.get_text() for label in ax.get_yticklabels()] == list("abcdefghij")
    matplotlib.pyplot.close("all")

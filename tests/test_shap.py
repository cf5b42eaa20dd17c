"""SHAP values (jaxboost.engine.node_table, jaxboost.engine.shap,
jaxboost.frontends.fitted.explain) against brute-force Shapley values: every
subset of 5 features, with path-dependent expectations over the covers."""

import itertools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.node_table import child_share, node_table, tree_paths
from jaxboost.engine.shap import (
    forest_contributions,
    forest_contributions_native,
    forest_interactions,
    forest_interactions_native,
    shap_paths,
)
from jaxboost.kernels.registry import kernels_for

N_FEATURES = 5


def _data(n=300, seed=0, categorical=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    y = X[:, 0] * X[:, 1] + X[:, 2] - 0.5 * X[:, 3] + 0.1 * rng.normal(size=n)
    if categorical:  # column 4: codes 0..6 whose set {1, 4, 5} matters
        X[:, 4] = rng.integers(0, 7, n)
        y = y + 2.0 * np.isin(X[:, 4], [1, 4, 5])
    X[:, :4][rng.random((n, 4)) < 0.15] = np.nan
    return X, y.astype(np.float32)


# -- the brute force: on the node table, node by node ---------------------------
def _goes_right(table, tree, node, x):
    value = x[table.feature[tree, node]]
    if np.isnan(value):
        return not table.missing_left[tree, node]
    bitset = None if table.category_left is None else table.category_left[tree, node]
    if bitset is not None and bitset.any():
        code = int(np.clip(value, 0, 255))
        return not (int(bitset[code // 32]) >> (code % 32)) & 1
    return bool(value > table.threshold[tree, node])


def _expectation(table, shares, tree, node, x, known):
    """E[tree(x) | the features in ``known``] by the covers (path-dependent)."""
    if table.left[tree, node] < 0:
        return table.value[tree, node].astype(np.float64)
    left, right = table.left[tree, node], table.right[tree, node]
    if table.feature[tree, node] in known:
        child = right if _goes_right(table, tree, node, x) else left
        return _expectation(table, shares, tree, child, x, known)
    left_value = _expectation(table, shares, tree, left, x, known)
    right_value = _expectation(table, shares, tree, right, x, known)
    return shares[0][tree, node] * left_value + shares[1][tree, node] * right_value


def _value_function(model, x):
    """``v(S)``: the forest's expectation given the features in S, by subset."""
    table = node_table(jax.tree.map(np.asarray, model.forest_))
    shares = child_share(table)
    trees = range(table.left.shape[0])
    values = {}
    for size in range(N_FEATURES + 1):
        for known in itertools.combinations(range(N_FEATURES), size):
            values[frozenset(known)] = sum(
                _expectation(table, shares, t, table.root[t], x, set(known)) for t in trees
            )
    return values


def _shapley(model, X):
    """``(n_rows, n_features, K)`` brute-force Shapley values and the
    ``(n_rows, n_features, n_features, K)`` interaction index (0 diagonal)."""
    n = N_FEATURES
    phi = np.zeros((len(X), n, model.n_outputs_))
    pairs = np.zeros((len(X), n, n, model.n_outputs_))
    for row, x in enumerate(X):
        v = _value_function(model, x)
        for i in range(n):
            others = [f for f in range(n) if f != i]
            for size in range(n):
                weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
                for known in map(set, itertools.combinations(others, size)):
                    phi[row, i] += weight * (v[frozenset(known | {i})] - v[frozenset(known)])
        for i, j in itertools.permutations(range(n), 2):
            rest = [f for f in range(n) if f not in (i, j)]
            for size in range(n - 1):
                weight = math.factorial(size) * math.factorial(n - size - 2)
                weight /= 2 * math.factorial(n - 1)
                for known in map(frozenset, itertools.combinations(rest, size)):
                    both = v[known | {i, j}] - v[known | {i}] - v[known | {j}] + v[known]
                    pairs[row, i, j] += weight * both
    return phi, pairs


def _check_against_brute_force(model, X, init_score=None):
    contributions = model.predict_contributions(X, init_score=init_score)
    if model.n_outputs_ == 1:
        contributions = contributions[:, None]
    raw = model.predict_raw(X, init_score=init_score).reshape(len(X), -1)
    np.testing.assert_allclose(contributions.sum(axis=-1), raw, rtol=1e-5, atol=1e-5)
    phi, _ = _shapley(model, X)
    np.testing.assert_allclose(
        contributions[..., :N_FEATURES], np.moveaxis(phi, 2, 1), rtol=1e-4, atol=1e-5
    )
    assert np.abs(phi).max() > 0.1  # (not a model of stumps)


@pytest.mark.parametrize(
    "growth",
    [{"max_depth": 3}, {"max_depth": 4, "grow_policy": "lossguide", "max_leaves": 6}],
    ids=["depthwise", "lossguide"],
)
def test_contributions_are_the_brute_force_shapley_values(growth):
    X, y = _data()
    weight = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    model = jb.Booster(n_estimators=3, **growth).fit(X, y, sample_weight=weight)
    _check_against_brute_force(model, X[:12])


def test_categorical_splits_are_explained_as_their_sets():
    X, y = _data(categorical=True)
    model = jb.Booster(n_estimators=3, max_depth=3, categorical_features=[4]).fit(X, y)
    assert model.forest_.category_left.any()  # a set split is there to explain
    X_new = X[:12].copy()
    X_new[0, 4] = 9  # a code fit never saw
    _check_against_brute_force(model, X_new)


@pytest.mark.parametrize("strategy", ["multi_output_tree", "one_output_per_tree"])
def test_each_output_of_a_softmax_is_explained(strategy):
    X, y = _data()
    labels = np.digitize(y, [-0.5, 0.5])
    model = jb.Booster(
        loss=losses.softmax_cross_entropy, n_estimators=2, max_depth=2, multi_strategy=strategy
    ).fit(X, labels)
    _check_against_brute_force(model, X[:8])
    assert model.predict_contributions(X[:8]).shape == (8, 3, N_FEATURES + 1)


def test_interactions_are_the_brute_force_interaction_index():
    X, y = _data()
    model = jb.Booster(n_estimators=3, max_depth=3).fit(X, y)
    rows = X[:6]
    interactions = model.predict_interactions(rows)
    assert interactions.shape == (6, N_FEATURES + 1, N_FEATURES + 1)
    _, pairs = _shapley(model, rows)
    off_diagonal = ~np.eye(N_FEATURES, dtype=bool)
    np.testing.assert_allclose(
        interactions[:, :N_FEATURES, :N_FEATURES][:, off_diagonal],
        pairs[..., 0][:, off_diagonal],
        rtol=1e-4,
        atol=1e-5,
    )
    assert np.abs(pairs).max() > 0.01  # (x0 * x1: an interaction to find)
    np.testing.assert_allclose(
        interactions.sum(axis=2), model.predict_contributions(rows), rtol=1e-5, atol=1e-5
    )


def test_rows_sum_to_predict_raw_on_real_data_with_a_custom_loss_and_offsets():
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X, y = X.astype(np.float32), (y / 100.0).astype(np.float32)
    offsets = np.linspace(-0.2, 0.2, len(y)).astype(np.float32)

    def log_cosh(y, f):
        return jnp.logaddexp(f - y, y - f)

    model = jb.Booster(loss=log_cosh, n_estimators=20, max_depth=3).fit(X, y, init_score=offsets)
    contributions = model.predict_contributions(X, init_score=offsets)
    assert contributions.shape == (len(X), X.shape[1] + 1)
    raw = model.predict_raw(X, init_score=offsets)
    np.testing.assert_allclose(contributions.sum(axis=1), raw, rtol=1e-5, atol=2e-5)
    # the expected value: the initial score, the offsets and the trees' mean over the covers
    np.testing.assert_allclose(
        contributions[:, -1] - offsets, contributions[0, -1] - offsets[0], rtol=1e-6, atol=1e-6
    )
    # bmi and s5 lead, as every model of this data finds
    top = np.argsort(-np.abs(contributions[:, :-1]).mean(axis=0))[:3]
    assert {2, 8} <= set(top.tolist())


@pytest.mark.skipif(not kernels_for("cpu").native, reason="the native kernels did not build")
def test_the_native_kernels_equal_the_xla_programs():
    X, y = _data(categorical=True)
    model = jb.Booster(n_estimators=4, max_depth=4, categorical_features=[4]).fit(X, y)
    table = node_table(jax.tree.map(np.asarray, model.forest_))
    paths, _ = shap_paths(table, tree_paths(table))
    paths = jax.tree.map(jnp.asarray, paths)
    # 50 rows: each row's weights computed (a table of 2^4 patterns needs 64 rows)
    rows = jnp.asarray(X[:50])
    many = jnp.asarray(np.repeat(X[:50], 40, axis=0))  # 2000 rows: tabulated
    for native, reference in (
        (forest_contributions_native, forest_contributions),
        (forest_interactions_native, forest_interactions),
    ):
        for X_rows in (rows, many):
            np.testing.assert_allclose(
                native(paths, X_rows), reference(paths, X_rows), rtol=1e-5, atol=1e-6
            )


def test_the_node_table_routes_rows_to_the_leaves_predict_reaches():
    X, y = _data(categorical=True)
    model = jb.Booster(
        n_estimators=3, max_depth=4, grow_policy="lossguide", max_leaves=5, categorical_features=[4]
    ).fit(X, y)
    table = node_table(jax.tree.map(np.asarray, model.forest_))
    walked = np.zeros(40)
    for row, x in enumerate(X[:40]):
        for tree in range(table.left.shape[0]):
            node = table.root[tree]
            while table.left[tree, node] >= 0:
                right = _goes_right(table, tree, node, x)
                node = table.right[tree, node] if right else table.left[tree, node]
            walked[row] += table.value[tree, node, 0]
    np.testing.assert_allclose(walked + model.base_score_[0], model.predict_raw(X[:40]), atol=1e-5)


def test_covers_are_the_weighted_hessian_sums():
    X, y = _data()
    weight = np.random.default_rng(2).uniform(0.5, 2.0, len(y))
    labels = (y > 0).astype(np.float32)
    model = jb.Booster(loss="logloss", n_estimators=2, max_depth=2).fit(
        X, labels, sample_weight=weight
    )
    p = 1 / (1 + np.exp(-model.base_score_[0]))  # the first tree's hessians: p (1 - p)
    np.testing.assert_allclose(
        model.forest_.leaf_cover[0].sum(), (weight * p * (1 - p)).sum(), rtol=1e-4
    )
    squared = jb.Booster(n_estimators=2, max_depth=2).fit(X, y, sample_weight=weight)
    np.testing.assert_allclose(squared.forest_.leaf_cover, squared.forest_.leaf_weight, rtol=1e-6)


def test_a_split_without_positive_cover_weighs_its_children_by_sample_weight():
    X, y = _data()
    model = jb.Booster(n_estimators=1, max_depth=1).fit(X, y)
    forest = jax.tree.map(np.asarray, model.forest_)
    forest = forest._replace(leaf_cover=np.array([[1.0, -1.0]], np.float32))
    left, right = child_share(node_table(forest))
    expected = forest.leaf_weight[0] / forest.leaf_weight[0].sum()
    np.testing.assert_allclose([left[0, 0], right[0, 0]], expected)


def test_estimators_give_contributions_through_predict():
    X, y = _data()
    regressor = jb.Regressor(n_estimators=2, max_depth=2).fit(X, y)
    contributions = regressor.predict(X[:5], pred_contrib=True)
    np.testing.assert_allclose(contributions.sum(axis=1), regressor.predict(X[:5]), atol=1e-5)
    classifier = jb.Classifier(n_estimators=2, max_depth=2).fit(X, y > 0)
    contributions = classifier.predict(X[:5], pred_contrib=True)
    assert contributions.shape == (5, N_FEATURES + 1)
    np.testing.assert_allclose(
        contributions.sum(axis=1), classifier.decision_function(X[:5]), atol=1e-5
    )
    ranker = jb.Ranker(n_estimators=2, max_depth=2).fit(X, (y > 0).astype(int), group=[100] * 3)
    np.testing.assert_allclose(
        ranker.predict(X[:5], pred_contrib=True).sum(axis=1), ranker.predict(X[:5]), atol=1e-5
    )


def test_covers_survive_a_file_and_a_file_without_them_says_what_to_do(tmp_path):
    X, y = _data()
    model = jb.Booster(n_estimators=2, max_depth=2).fit(X, y)
    path = tmp_path / "model.json"
    model.save(path)
    loaded = jb.load(path)
    np.testing.assert_array_equal(loaded.predict_contributions(X), model.predict_contributions(X))
    # a version 4 file, as jaxboost wrote it before covers
    document = json.loads(path.read_text())
    document["version"] = 4
    del document["state"]["forest_"]["leaf_cover"]
    del document["checksums"]["state.forest_.leaf_cover"]
    from jaxboost.frontends.fitted.file_format import document_checksum

    document["checksum"] = document_checksum(document)
    path.write_text(json.dumps(document))
    older = jb.load(path)
    np.testing.assert_array_equal(older.predict_raw(X), model.predict_raw(X))
    with pytest.raises(ValueError, match="no covers.*fit it again"):
        older.predict_contributions(X)
    continued = jb.Booster(n_estimators=1, max_depth=2).fit(X, y, init_model=older)
    assert continued.forest_.leaf_cover is None
    with pytest.raises(ValueError, match="no covers"):
        continued.predict_interactions(X)


def test_a_refitted_model_is_explained_with_the_covers_it_was_grown_with():
    X, y = _data()
    model = jb.Booster(n_estimators=3, max_depth=2).fit(X, y)
    refitted = jb.refit_leaves(model, X, y * 2.0, steps=5)
    np.testing.assert_array_equal(refitted.forest_.leaf_cover, model.forest_.leaf_cover)
    contributions = refitted.predict_contributions(X[:20])
    np.testing.assert_allclose(contributions.sum(axis=1), refitted.predict_raw(X[:20]), atol=1e-5)


def _shap_dict_model(model):
    """The model as shap.TreeExplainer's dict of trees: each tree's nodes
    reachable from its root, numbered in breadth-first order."""
    table = node_table(jax.tree.map(np.asarray, model.forest_))
    trees = []
    for tree in range(table.left.shape[0]):
        order, at = [int(table.root[tree])], 0
        while at < len(order):
            node, at = order[at], at + 1
            if table.left[tree, node] >= 0:
                order += [int(table.left[tree, node]), int(table.right[tree, node])]
        number = {node: i for i, node in enumerate(order)}
        nodes = np.array(order)
        left = np.array([number.get(int(c), -1) for c in table.left[tree, nodes]])
        right = np.array([number.get(int(c), -1) for c in table.right[tree, nodes]])
        is_leaf = left < 0
        trees.append(
            {
                "children_left": left,
                "children_right": right,
                "children_default": np.where(table.missing_left[tree, nodes], left, right),
                "features": np.where(is_leaf, -2, table.feature[tree, nodes]),
                "thresholds": table.threshold[tree, nodes].astype(np.float64),  # x <= t: left
                "values": table.value[tree, nodes].astype(np.float64),
                "node_sample_weight": table.cover[tree, nodes],
            }
        )
    return {"trees": trees, "base_offset": float(model.base_score_[0])}


def test_contributions_and_interactions_equal_shaps_tree_explainer():
    shap = pytest.importorskip("shap", reason="shap is not installed (it is an optional reference)")
    X, y = _data()
    model = jb.Booster(n_estimators=6, max_depth=4, grow_policy="lossguide", max_leaves=7).fit(X, y)
    explainer = shap.TreeExplainer(_shap_dict_model(model))
    rows = X[:40].astype(np.float64)
    contributions = model.predict_contributions(X[:40])
    np.testing.assert_allclose(
        contributions[:, :-1], explainer.shap_values(rows), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(contributions[:, -1], explainer.expected_value[0], rtol=1e-6)
    np.testing.assert_allclose(
        model.predict_interactions(X[:10])[:, :-1, :-1],
        explainer.shap_interaction_values(rows[:10]),
        rtol=1e-5,
        atol=1e-6,
    )

"""Leaf-wise trees without a depth bound (node tables, engine.bestfirst)
through the model: each reader against the same trees held in the heap (a
depth bound that never binds grows the same splits), files, and the depth
that only max_leaves bounds."""

import numpy as np
import pytest

import jaxboost as jb

_SETTINGS = {"grow_policy": "lossguide", "min_child_samples": 0, "n_estimators": 5}


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 4)) * 5) / 5).astype(np.float32)
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    Z = np.nan_to_num(X)
    y = 3 * (Z[:, 0] > 0.5) + np.sin(2 * Z[:, 1]) * (Z[:, 0] > 0) + 0.5 * Z[:, 2]
    return X, (y + 0.2 * rng.normal(size=n)).astype(np.float32)


X, Y = _data()


@pytest.fixture(scope="module")
def pair():
    """Node tables of 6 leaves, and the same trees in the heap: 6 leaves
    are at most 5 deep, so max_depth=5 never binds."""
    tables = jb.Booster(max_leaves=6, **_SETTINGS).fit(X, Y)
    heap = jb.Booster(max_leaves=6, max_depth=5, **_HEAP, **_SETTINGS).fit(X, Y)
    return tables, heap


# interaction constraints that constrain nothing: the same trees in the
# depth-bounded heap (engine.leafwise), which constraints keep
_HEAP = {"interaction_constraints": [[0, 1, 2, 3]]}


def _leaf_partition(model):
    """Each tree's rows grouped by leaf: every row labelled by the first row
    of its leaf (whatever the leaves' numbers)."""
    leaves = model.apply(X)
    labels = []
    for tree in leaves.T:
        first = {leaf: row for row, leaf in reversed(list(enumerate(tree)))}
        labels.append(np.array([first[leaf] for leaf in tree]))
    return labels


def test_node_tables_hold_the_heap_trees(pair):
    tables, heap = pair
    assert tables.forest_.left_child is not None and heap.forest_.left_child is None
    assert tables.forest_.leaf_value.shape[1] == 6 and heap.forest_.leaf_value.shape[1] == 32
    for mine, theirs in zip(_leaf_partition(tables), _leaf_partition(heap)):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_allclose(tables.predict_raw(X), heap.predict_raw(X), rtol=1e-6, atol=1e-6)
    gains = [
        np.sort(np.asarray(m.forest_.split_gain)[np.asarray(m.forest_.split_gain) > 0])
        for m in pair
    ]
    np.testing.assert_allclose(*gains, rtol=1e-5)  # (the heap: sums by subtraction)
    np.testing.assert_allclose(
        tables.feature_importance("gain"), heap.feature_importance("gain"), rtol=1e-5
    )


def test_readers_agree_with_the_heap(pair, tmp_path):
    tables, heap = pair
    np.testing.assert_allclose(
        tables.predict_contributions(X[:40]), heap.predict_contributions(X[:40]), atol=1e-5
    )
    _, values_t = tables.partial_dependence(X, [0, 1], grid_resolution=7)
    _, values_h = heap.partial_dependence(X, [0, 1], grid_resolution=7)
    np.testing.assert_allclose(values_t, values_h, rtol=1e-5, atol=1e-5)
    path = tmp_path / "tables.json"
    tables.save(path)
    loaded = jb.load(path)
    np.testing.assert_array_equal(loaded.predict_raw(X), tables.predict_raw(X))
    np.testing.assert_array_equal(loaded.apply(X), tables.apply(X))
    pytest.importorskip("pandas")
    from jaxboost.plotting import trees_to_dataframe

    dumps = [trees_to_dataframe(model) for model in pair]  # (node numbers differ)
    columns = ["tree_index", "node_depth", "split_feature", "threshold", "count"]
    dumps = [dump.sort_values(columns).reset_index(drop=True) for dump in dumps]
    assert dumps[0][columns].astype(str).equals(dumps[1][columns].astype(str))
    np.testing.assert_allclose(dumps[0]["value"], dumps[1]["value"], rtol=1e-5)


def test_xgboost_reads_the_exported_tables(pair, tmp_path):
    xgboost = pytest.importorskip("xgboost")
    tables, _ = pair
    path = tmp_path / "tables_xgb.json"
    tables.save(path, format="xgboost")
    theirs = xgboost.Booster(model_file=str(path)).predict(
        xgboost.DMatrix(X, missing=np.nan), output_margin=True
    )
    np.testing.assert_allclose(theirs, tables.predict_raw(X), rtol=1e-5, atol=1e-5)


def test_continued_training_and_refit():
    settings = {**_SETTINGS, "max_leaves": 6}
    longer = jb.Booster(**{**settings, "n_estimators": 4}).fit(X, Y)
    first = jb.Booster(**{**settings, "n_estimators": 2}).fit(X, Y)
    continued = jb.Booster(**{**settings, "n_estimators": 2}).fit(X, Y, init_model=first)
    np.testing.assert_array_equal(continued.predict_raw(X), longer.predict_raw(X))
    # a depth bound is the trees' own: the node tables continue under one
    bounded = jb.Booster(**{**settings, "n_estimators": 1, "max_depth": 3})
    assert bounded.fit(X, Y, init_model=first).forest_.leaf_value.shape[:2] == (3, 6)
    with pytest.raises(ValueError, match="init_model: its trees are leaf-wise node tables of 6"):
        jb.Booster(**{**settings, "max_leaves": 7}).fit(X, Y, init_model=first)
    # heap trees (a leaf-wise model of constraints, or of a version before
    # node tables) continue as node tables of the same splits and leaves
    heap = jb.Booster(**{**settings, "max_depth": 5, **_HEAP}).fit(X, Y)
    tables = jb.Booster(**{**settings, "max_depth": 5}).fit(X, Y, init_model=heap)
    assert tables.forest_.left_child is not None and tables.n_estimators_ == 10
    np.testing.assert_array_equal(
        tables.predict_raw(X, iteration_range=(0, 5)), heap.predict_raw(X)
    )
    for mine, theirs in zip(_leaf_partition(tables)[:5], _leaf_partition(heap)):
        np.testing.assert_array_equal(mine, theirs)
    with pytest.raises(ValueError, match="init_model: its trees .* reach up to 6 leaves, more "):
        jb.Booster(**{**settings, "max_leaves": 5}).fit(X, Y, init_model=heap)
    refitted = jb.refit_leaves(first, X, Y, steps=5)
    np.testing.assert_array_equal(refitted.apply(X), first.apply(X))
    assert np.mean((refitted.predict(X) - Y) ** 2) < np.mean((first.predict(X) - Y) ** 2)


def _depth(forest, tree):
    left, right = np.asarray(forest.left_child[tree]), np.asarray(forest.right_child[tree])

    def below(node):
        return 0 if node < 0 else 1 + max(below(left[node]), below(right[node]))

    return below(0)


def test_max_leaves_alone_bounds_the_depth():
    # 31 leaves, no max_depth (LightGBM's num_leaves): deeper than 6 here,
    # and the rows' leaves as the native walk and the XLA walk reach them
    model = jb.Booster(max_leaves=31, **_SETTINGS).fit(X, Y)
    assert max(_depth(model.forest_, t) for t in range(5)) > 6
    leaves = model.apply(X)
    assert leaves.max() < 31
    values = np.asarray(model.forest_.leaf_value)[np.arange(5), leaves, 0]
    expected = np.asarray(model.base_score_)[0] + values.sum(axis=1)
    np.testing.assert_allclose(model.predict_raw(X), expected, rtol=1e-5, atol=1e-5)


def test_max_depth_bounds_the_node_tables_as_the_heap():
    # max_depth=3 binds (the unbounded trees go deeper): node tables within
    # it hold the heap's best-first trees of depth 3
    settings = {**_SETTINGS, "max_leaves": 8, "max_depth": 3}
    tables = jb.Booster(**settings).fit(X, Y)
    heap = jb.Booster(**settings, **_HEAP).fit(X, Y)
    free = jb.Booster(**{**settings, "max_depth": None}).fit(X, Y)
    assert tables.forest_.leaf_value.shape[1] == 8 and heap.forest_.left_child is None
    assert max(_depth(tables.forest_, t) for t in range(5)) == 3
    assert max(_depth(free.forest_, t) for t in range(5)) > 3
    for mine, theirs in zip(_leaf_partition(tables), _leaf_partition(heap)):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_allclose(tables.predict_raw(X), heap.predict_raw(X), rtol=1e-6, atol=1e-6)


def test_a_deep_bound_costs_the_leaves_not_two_to_the_depth(monkeypatch):
    # max_depth=20: the heap would hold 2^20 leaves a tree (50 trees a
    # program: 1.5 GiB); node tables hold 31, checked against 64 MiB
    import jaxboost.frontends.training.row_binning

    monkeypatch.setattr(
        jaxboost.frontends.training.row_binning, "memory_per_device", lambda devices: 2**26
    )
    model = jb.Booster(max_leaves=31, max_depth=20, **_SETTINGS).fit(X, Y)
    assert model.forest_.leaf_value.shape[1] == 31
    free = jb.Booster(max_leaves=31, **_SETTINGS).fit(X, Y)  # 20 never binds here
    np.testing.assert_array_equal(model.predict_raw(X), free.predict_raw(X))


def test_constraints_keep_the_depth_bounded_heap():
    model = jb.Booster(max_leaves=6, monotone_constraints=[0, 1, 0, 0], **_SETTINGS).fit(X, Y)
    assert model.forest_.left_child is None and model.forest_.feature.shape[1] == 63


def test_a_file_with_a_child_out_of_order_is_refused(pair, tmp_path):
    from jaxboost.frontends.model_file import ModelFileError

    tables, _ = pair
    forest = tables.forest_
    broken = forest._replace(left_child=np.asarray(forest.left_child).copy())
    broken.left_child[0, 1] = 0  # node 1's left child: the root, a cycle
    tables.forest_ = broken
    path = tmp_path / "broken.json"
    tables.save(path)
    tables.forest_ = forest
    with pytest.raises(ModelFileError, match="left_child: expected a later node"):
        jb.load(path)

"""Trees as tables and text (jaxboost.frontends.fitted.tree_dump,
jaxboost.engine.node_table.node_places): the thresholds, sets and missing
directions the dumps state, applied by hand to rows in the user's units,
reach the leaves `apply` reports and sum to `predict_raw`."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.plotting import dump_tree, trees_to_dataframe

pd = pytest.importorskip("pandas")

LABELS = ["north", "south", "east", "west"]


def _frame(n=200, seed=0):
    """Numeric ``a`` and ``b`` (NaN in 15% of b), a category column
    ``region`` whose set {south, west} matters, a constant column."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "region": pd.Categorical(rng.choice(LABELS, n), categories=LABELS),
            "constant": np.ones(n),
        }
    )
    y = frame.a - 0.7 * frame.b.clip(-1, 1) + 1.5 * frame.region.isin(["south", "west"])
    y = y + 0.1 * rng.normal(size=n)
    frame.loc[rng.random(n) < 0.15, "b"] = np.nan
    return frame, y.to_numpy(np.float32)


@pytest.fixture(scope="module", params=["depthwise", "lossguide"])
def fitted(request):
    frame, y = _frame()
    leaves = {"max_leaves": 5} if request.param == "lossguide" else {}
    model = jb.Booster(
        loss=losses.squared_error,
        n_estimators=4,
        max_depth=3,
        grow_policy=request.param,
        **leaves,
    ).fit(frame, y)
    return model, frame


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _goes_left(node: dict, value, known: set) -> bool:
    """The rule the dumps state, in the user's units."""
    if node["decision_type"] == "==":
        if _is_missing(value) or value not in known:  # missing or unseen
            return node["missing_direction"] == "left"
        return value in node["threshold"]
    if _is_missing(value):
        return node["missing_direction"] == "left"
    return bool(np.float32(value) <= node["threshold"])


def _walk(frame: pd.DataFrame, rows: pd.DataFrame, known: set) -> tuple[np.ndarray, np.ndarray]:
    """``(leaf index (n_rows, n_trees), sum of the leaves' values (n_rows,))``
    by walking the table's rows from each tree's root."""
    nodes = {row["node_index"]: row for row in frame.to_dict("records")}
    values = rows.to_dict("records")
    trees = sorted(frame.tree_index.unique())
    leaf = np.zeros((len(values), len(trees)), np.int64)
    total = np.zeros(len(values))
    for column, t in enumerate(trees):
        root = frame[(frame.tree_index == t) & frame.parent_index.isna()].node_index
        assert len(root) == 1
        for i, row in enumerate(values):
            node = nodes[root.iloc[0]]
            while pd.notna(node["decision_type"]):
                value = row[node["split_feature"]]
                left = _goes_left(node, value, known)
                node = nodes[node["left_child"] if left else node["right_child"]]
            leaf[i, column] = int(node["node_index"].split("-L")[1])
            total[i] += node["value"]
    return leaf, total


def _rows_at_thresholds(frame: pd.DataFrame, model_frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``'s first rows, then for every numeric split a row at its
    threshold, one a float32 step above it, and one a quarter of that step
    above it in float64 (float32 rounds it back to the threshold), then
    rows with an unseen category and every value missing."""
    base = frame.iloc[:5].copy()
    extra = []
    numeric = model_frame[(model_frame.decision_type == "<=")]
    for _, node in numeric.iterrows():
        threshold = np.float32(node.threshold)
        step = np.nextafter(threshold, np.float32(np.inf)) - threshold
        for value in (float(threshold), float(threshold + step), float(threshold) + step / 4):
            row = frame.iloc[[len(extra) % len(frame)]].copy()
            row[node.split_feature] = value
            extra.append(row)
    unseen = frame.iloc[:3].copy()
    unseen["region"] = "nowhere"
    missing = frame.iloc[:2].copy()
    missing[["a", "b", "region"]] = None
    rows = pd.concat([base, *extra, unseen, missing], ignore_index=True)
    rows["region"] = pd.Categorical(rows["region"].astype(object), categories=LABELS + ["nowhere"])
    rows[["a", "b"]] = rows[["a", "b"]].astype(np.float64)
    return rows


def test_the_table_walked_by_hand_reaches_apply_s_leaves_and_predict_raw(fitted):
    model, frame = fitted
    table = trees_to_dataframe(model)
    rows = _rows_at_thresholds(frame, table)
    assert (table.decision_type == "==").any() and (table.decision_type == "<=").any()
    leaf, total = _walk(table, rows, set(LABELS))
    np.testing.assert_array_equal(leaf, model.apply(rows))
    np.testing.assert_allclose(
        total + model.base_score_[0], model.predict_raw(rows), rtol=1e-6, atol=1e-6
    )
    # the categorical splits name labels, never codes; the constant column never splits
    sets = table.threshold[table.decision_type == "=="]
    assert all(set(labels) <= set(LABELS) for labels in sets)
    assert "constant" not in set(table.split_feature.dropna())


def test_the_table_has_lightgbm_s_columns_and_links(fitted):
    model, _ = fitted
    table = trees_to_dataframe(model)
    assert list(table.columns) == [
        "tree_index",
        "node_depth",
        "node_index",
        "left_child",
        "right_child",
        "parent_index",
        "split_feature",
        "split_gain",
        "threshold",
        "decision_type",
        "missing_direction",
        "missing_type",
        "value",
        "weight",
        "count",
    ]
    assert table.node_index.is_unique
    splits = table[table.decision_type.notna()]
    leaves = table[table.decision_type.isna()]
    for _, tree in table.groupby("tree_index"):  # a binary tree: nodes = 2 splits + 1
        assert len(tree) == 2 * tree.decision_type.notna().sum() + 1
    by_name = table.set_index("node_index")
    for side in ("left_child", "right_child"):
        children = by_name.loc[splits[side]]
        assert (children.parent_index.to_numpy() == splits.node_index.to_numpy()).all()
        assert (children.node_depth.to_numpy() == splits.node_depth.to_numpy() + 1).all()
        # a split's weight (hessian sum) and count are its children's sums
    left, right = by_name.loc[splits.left_child], by_name.loc[splits.right_child]
    for column in ("weight", "count"):
        np.testing.assert_allclose(
            left[column].to_numpy() + right[column].to_numpy(), splits[column], rtol=1e-6
        )
    assert (splits.split_gain > 0).all() and leaves.split_gain.isna().all()
    assert leaves.value.notna().all() and splits.value.isna().all()
    assert (table[table.node_depth == 1].weight == 200).all()  # squared error: hessian 1 a row


def test_the_json_dump_walked_by_hand_reaches_apply_s_leaves(fitted):
    model, frame = fitted
    rows = _rows_at_thresholds(frame, trees_to_dataframe(model))
    values = rows.to_dict("records")
    n_trees = model.forest_.feature.shape[0]
    leaves = np.zeros((len(values), n_trees), np.int64)
    for t in range(n_trees):
        tree = json.loads(dump_tree(model, t, format="json"))
        assert tree["tree_index"] == t and tree["round"] == t
        for i, row in enumerate(values):
            node = tree["tree_structure"]
            while "split_index" in node:
                rule = {
                    "decision_type": node["decision_type"],
                    "threshold": node["threshold"],
                    "missing_direction": "left" if node["default_left"] else "right",
                }
                side = _goes_left(rule, row[node["feature_name"]], set(LABELS))
                node = node["left_child" if side else "right_child"]
            leaves[i, t] = node["leaf_index"]
    np.testing.assert_array_equal(leaves, model.apply(rows))


def test_the_text_dump_states_the_table_s_nodes_exactly(fitted):
    model, _ = fitted
    table = trees_to_dataframe(model)
    tree = table[table.tree_index == 1]
    text = dump_tree(model, 1)
    lines = text.splitlines()
    assert lines[0] == "tree 1 (round 1)" and len(lines) == 2 + len(tree)
    for line, (_, node) in zip(lines[2:], tree.iterrows()):
        name = node.node_index.split("-")[1]
        assert line.strip().startswith(name + ":")
        assert line.startswith("  " * (node.node_depth - 1) + name)
        if node.decision_type == "<=":
            stated = line.split(" <= ")[1].split("]")[0]
            assert np.float32(stated) == np.float32(node.threshold)  # float32 reads it back
        elif node.decision_type == "==":
            assert line.split("[")[1].startswith("region in {")
            assert all(repr(label) in line for label in node.threshold)
        else:
            assert np.float32(line.split("leaf=")[1].split()[0]) == np.float32(node.value)


def test_node_places_number_a_depth_first_walk(fitted):
    import jax

    from jaxboost.engine.node_table import node_places, node_table

    model, _ = fitted
    table = node_table(jax.tree.map(np.asarray, model.forest_))
    places = node_places(table)
    for t in range(table.left.shape[0]):  # the same walk, recursively
        walk = []

        def visit(node, depth, parent, t=t, walk=walk):
            walk.append((node, depth, parent))
            if table.left[t, node] >= 0:
                visit(table.left[t, node], depth + 1, node)
                visit(table.right[t, node], depth + 1, node)

        visit(table.root[t], 0, -1)
        nodes = [node for node, _, _ in walk]
        assert list(places.order[t, nodes]) == list(range(len(walk)))
        assert list(places.depth[t, nodes]) == [depth for _, depth, _ in walk]
        assert list(places.parent[t, nodes]) == [parent for _, _, parent in walk]
        off = np.setdiff1d(np.arange(table.left.shape[1]), nodes)
        assert (places.order[t, off] == -1).all() and (places.depth[t, off] == -1).all()


def _multi_data(n=200, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    X[rng.random((n, 3)) < 0.1] = np.nan
    labels = (np.nan_to_num(X[:, 0]) > 0).astype(np.float32) + (np.nan_to_num(X[:, 1]) > 0.5)
    return X, labels


@pytest.mark.parametrize("strategy", ["one_output_per_tree", "multi_output_tree"])
def test_several_outputs_show_each_tree_s_output_or_every_output(strategy):
    X, labels = _multi_data()
    model = jb.Booster(
        loss=losses.softmax_cross_entropy, n_estimators=3, max_depth=2, multi_strategy=strategy
    ).fit(X, labels)
    frame = pd.DataFrame(X, columns=["f0", "f1", "f2"])
    table = trees_to_dataframe(model)
    raw = model.predict_raw(X) - model.base_score_
    if strategy == "one_output_per_tree":  # tree t adds to output t % 3, in `value`
        assert "value" in table.columns
        for k in range(3):
            own = table[table.tree_index % 3 == k]
            leaf, total = _walk(own, frame, set())
            np.testing.assert_allclose(total, raw[:, k], rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(leaf, model.apply(X)[:, k::3])
            chosen = trees_to_dataframe(model, output=k)
            assert set(chosen.tree_index) == set(own.tree_index)
        assert dump_tree(model, 4).splitlines()[0] == "tree 4 (round 1, output 1)"
        with pytest.raises(ValueError, match="output: tree 4 adds to output 1"):
            dump_tree(model, 4, output=0)
    else:  # vector leaves: value_0, value_1, value_2; output= picks one
        assert {"value_0", "value_1", "value_2"} <= set(table.columns)
        for k in range(3):
            walked = table.rename(columns={f"value_{k}": "value"})
            _, total = _walk(walked, frame, set())
            np.testing.assert_allclose(total, raw[:, k], rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(
                trees_to_dataframe(model, output=k).value, table[f"value_{k}"]
            )
        leaf = json.loads(dump_tree(model, 0, format="json"))["tree_structure"]
        while "left_child" in leaf:
            leaf = leaf["left_child"]
        assert len(leaf["leaf_value"]) == 3
    with pytest.raises(ValueError, match=r"output: expected an output index in \[0, 3\)"):
        trees_to_dataframe(model, output=3)


def test_a_tree_without_a_split_is_one_leaf():
    frame, y = _frame()
    model = jb.Booster(
        loss=losses.squared_error, n_estimators=2, max_depth=3, min_split_gain=1e9
    ).fit(frame, y)
    table = trees_to_dataframe(model)
    assert len(table) == 2 and table.parent_index.isna().all()
    assert list(table.node_index) == ["0-L0", "1-L0"] and (table.node_depth == 1).all()
    np.testing.assert_allclose(
        table.value.sum() + model.base_score_[0], model.predict_raw(frame.iloc[:1])[0], rtol=1e-6
    )
    assert dump_tree(model, 0).splitlines()[2].startswith("L0: leaf=")
    assert json.loads(dump_tree(model, 1, format="json"))["tree_structure"]["leaf_index"] == 0


def test_an_estimator_a_loaded_model_and_unnamed_columns(tmp_path, fitted):
    pytest.importorskip("sklearn")
    model, _ = fitted
    path = tmp_path / "model.json"
    model.save(path)
    pd.testing.assert_frame_equal(trees_to_dataframe(jb.load(path)), trees_to_dataframe(model))

    X, y = _multi_data()
    regressor = jb.Regressor(n_estimators=2, max_depth=2).fit(X, y)
    table = trees_to_dataframe(regressor)
    assert set(table.split_feature.dropna()) <= {"f0", "f1", "f2"}
    assert dump_tree(regressor, 1) == dump_tree(regressor.booster_, 1)
    regressor.save(tmp_path / "regressor.json")
    assert dump_tree(jb.load(tmp_path / "regressor.json"), 1) == dump_tree(regressor, 1)


def test_a_model_without_covers_dumps_nan_weights(fitted):
    model, _ = fitted
    old = copy.copy(model)
    old.forest_ = model.forest_._replace(leaf_cover=None)
    table = trees_to_dataframe(old)
    assert table.weight.isna().all() and table["count"].notna().all()
    assert "weight=nan" in dump_tree(old, 0)


def test_bad_arguments_are_named(fitted):
    with pytest.raises(RuntimeError, match="not fitted"):
        dump_tree(jb.Booster())
    model, _ = fitted
    with pytest.raises(ValueError, match=r"tree_index: expected an index in \[0, 4\)"):
        dump_tree(model, 4)
    with pytest.raises(TypeError, match="tree_index"):
        dump_tree(model, "0")
    with pytest.raises(ValueError, match="format: expected one of"):
        dump_tree(model, 0, format="dot")

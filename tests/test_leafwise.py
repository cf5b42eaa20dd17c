"""Leaf-wise growth (``grow_policy="lossguide"``, `jaxboost.engine.leafwise`):
the splits a numpy best-first grower takes, at most ``max_leaves`` leaves,
the depth-wise model at a full budget, and everything that reads the heap
(prediction, ``apply``, files, constraints, group and vector losses)."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses

_LOSSGUIDE = {"grow_policy": "lossguide", "max_depth": 5, "min_child_samples": 0}


def _data(n=600, seed=0):
    """Columns of about 30 distinct values each (a bin each, so the numpy
    reference sees the same candidate thresholds) and a target with
    unequal structure in each, so that best-first and depth-wise differ."""
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 4)) * 5) / 5).astype(np.float32)
    y = 3 * (X[:, 0] > 0.5) + np.sin(2 * X[:, 1]) * (X[:, 0] > 0) + 0.5 * X[:, 2]
    return X, (y + 0.2 * rng.normal(size=n)).astype(np.float32)


X, Y = _data()


def _half_square(y, f):
    return 0.5 * (f - y) ** 2  # gradient f - y, hessian 1


def _best_split(X, residual, rows, reg_lambda):
    """``(gain, feature, cut)`` of the best ``x <= cut`` split of ``rows`` by
    second-order gain, halved as the engine stores it (``gain`` 0: none)."""

    def score(g, n):
        return g * g / (n + reg_lambda)

    total_g, total_n = residual[rows].sum(), rows.size
    best = (0.0, -1, 0.0)
    for feature in range(X.shape[1]):
        values = X[rows, feature]
        order = np.argsort(values, kind="stable")
        sorted_values, sorted_g = values[order], residual[rows][order]
        left_g = np.cumsum(sorted_g)
        for i in range(rows.size - 1):
            if sorted_values[i] == sorted_values[i + 1]:
                continue
            n_left = i + 1
            gain = 0.5 * (
                score(left_g[i], n_left)
                + score(total_g - left_g[i], total_n - n_left)
                - score(total_g, total_n)
            )
            if gain > best[0] * (1 + 1e-6):
                best = (gain, feature, float(sorted_values[i]))
    return best


def _numpy_best_first(X, y, max_leaves, max_depth, reg_lambda=1.0):
    """``{heap node: (gain, feature, rows going left)}`` of best-first growth
    of one squared-error tree from scores 0 (residual ``-y``, hessian 1)."""
    residual = -y.astype(np.float64)
    open_nodes = {0: np.arange(X.shape[0])}
    best = {0: _best_split(X, residual, open_nodes[0], reg_lambda)}
    splits = {}
    for _ in range(max_leaves - 1):
        candidates = [node for node in sorted(open_nodes) if best[node][0] > 0]
        if not candidates:
            break
        node = max(candidates, key=lambda k: (best[k][0], -k))
        rows = open_nodes.pop(node)
        gain, feature, cut = best[node]
        goes_left = X[rows, feature] <= cut
        splits[node] = (gain, feature, set(rows[goes_left].tolist()))
        depth = int(np.log2(node + 1))
        for child, child_rows in (
            (2 * node + 1, rows[goes_left]),
            (2 * node + 2, rows[~goes_left]),
        ):
            if depth + 1 < max_depth:
                open_nodes[child] = child_rows
                best[child] = _best_split(X, residual, child_rows, reg_lambda)
    return splits


def _heap_splits(forest, tree, X):
    """``{heap node: (table node, row indices reaching it)}`` of the splits
    of node table ``tree`` (heap numbers: node ``k``'s children ``2k + 1``,
    ``2k + 2``, as the numpy reference numbers its nodes)."""
    left_child, right_child = (
        np.asarray(forest.left_child[tree]),
        np.asarray(forest.right_child[tree]),
    )
    feature, threshold = np.asarray(forest.feature[tree]), np.asarray(forest.threshold[tree])
    gain = np.asarray(forest.split_gain[tree])
    splits, stack = {}, [(0, 0, np.arange(X.shape[0]))]
    while stack:
        node, number, rows = stack.pop()
        if gain[node] <= 0:  # (node 0 of a tree of no split)
            continue
        splits[number] = (node, rows)
        left = X[rows, feature[node]] <= threshold[node]
        for child, side, part in (
            (left_child[node], 1, rows[left]),
            (right_child[node], 2, rows[~left]),
        ):
            if child >= 0:
                stack.append((child, 2 * number + side, part))
    return splits


# depth 12: levels from depth 6 hold the histograms of at most 2 (12 - depth)
# live nodes, not 2^depth
@pytest.mark.parametrize("max_leaves, max_depth", [(2, 5), (7, 5), (12, 5), (12, 12)])
def test_splits_match_a_numpy_best_first_grower(max_leaves, max_depth):
    model = jb.Booster(
        loss=_half_square,
        n_estimators=1,
        learning_rate=1.0,
        base_score=0.0,
        reg_lambda=1.0,
        min_child_weight=0.0,
        max_leaves=max_leaves,
        **{**_LOSSGUIDE, "max_depth": max_depth},
    ).fit(X, Y)
    expected = _numpy_best_first(X, Y, max_leaves, max_depth=max_depth)
    forest = model.forest_
    splits = _heap_splits(forest, 0, X)
    assert set(splits) == set(expected)
    for number, (ref_gain, ref_feature, ref_left) in expected.items():
        node, rows = splits[number]
        assert int(forest.feature[0, node]) == ref_feature, number
        left = X[rows, ref_feature] <= float(forest.threshold[0, node])
        assert set(rows[left].tolist()) == ref_left, number
        np.testing.assert_allclose(forest.split_gain[0, node], ref_gain, rtol=1e-3)


def test_best_first_is_not_level_order_on_this_data():
    # (else the reference test above could not tell best-first from level
    # order): 11 splits best-first reach depth 4 before level 3 is complete
    every_split = sorted(_numpy_best_first(X, Y, 2**5, max_depth=5))
    assert sorted(_numpy_best_first(X, Y, 12, max_depth=5)) != every_split[:11]


def _partition(leaves):
    """Each tree's rows labelled by the first row of their leaf (``leaves``:
    `apply`'s), whatever the leaves' numbers."""
    labels = []
    for tree in leaves.T:
        first = {leaf: row for row, leaf in reversed(list(enumerate(tree)))}
        labels.append([first[leaf] for leaf in tree])
    return np.array(labels)


def test_a_full_budget_grows_the_depthwise_forest():
    Xn = X.copy()
    Xn[::17, 1] = np.nan  # the missing direction too
    labels = (Y > 1).astype(np.float32)
    settings = {"loss": "logloss", "n_estimators": 8, "max_depth": 4, "subsample": 0.8}
    depthwise = jb.Booster(**settings).fit(Xn, labels)
    # the heap (interaction constraints that constrain nothing keep it), bit for bit
    leafwise = {"grow_policy": "lossguide", "max_leaves": 16, **settings}
    heap = jb.Booster(interaction_constraints=[[0, 1, 2, 3]], **leafwise).fit(Xn, labels)
    for field in depthwise.forest_._fields:
        left, right = getattr(depthwise.forest_, field), getattr(heap.forest_, field)
        if left is None:
            assert right is None
            continue
        np.testing.assert_array_equal(np.asarray(left), np.asarray(right), err_msg=field)
    # node tables (no constraints): the same trees, the leaves numbered as grown
    tables = jb.Booster(**leafwise).fit(Xn, labels)
    assert tables.forest_.left_child is not None
    np.testing.assert_array_equal(_partition(tables.apply(Xn)), _partition(depthwise.apply(Xn)))
    np.testing.assert_allclose(
        tables.predict_raw(Xn), depthwise.predict_raw(Xn), rtol=1e-6, atol=1e-6
    )


def _leaf_count(forest):
    """Reachable leaves of each tree: non-splits send every row left."""
    gain = np.asarray(forest.split_gain)
    return 1 + np.sum(gain > 0, axis=1)


@pytest.fixture(scope="module")
def fitted():
    return jb.Booster(n_estimators=6, max_leaves=6, **_LOSSGUIDE).fit(X, Y)


def test_trees_hold_at_most_max_leaves_and_predict_as_their_walks(fitted):
    counts = _leaf_count(fitted.forest_)
    assert counts.max() == 6 and counts.min() >= 2
    leaves = fitted.apply(X)
    assert leaves.shape == (X.shape[0], 6)
    assert all(np.unique(leaves[:, t]).size <= counts[t] for t in range(6))
    values = np.asarray(fitted.forest_.leaf_value)[np.arange(6), leaves, 0]
    expected = np.asarray(fitted.base_score_)[0] + values.sum(axis=1)
    np.testing.assert_allclose(fitted.predict_raw(X), expected, rtol=1e-5, atol=1e-5)


def test_max_leaves_alone_grows_leafwise_as_lightgbms_num_leaves(fitted):
    settings = {key: value for key, value in _LOSSGUIDE.items() if key != "grow_policy"}
    alone = jb.Booster(n_estimators=6, max_leaves=6, **settings)
    assert alone.grow_policy == "auto"
    alone.fit(X, Y)
    for field, left, right in zip(alone.forest_._fields, alone.forest_, fitted.forest_):
        if left is not None:
            np.testing.assert_array_equal(np.asarray(left), np.asarray(right), err_msg=field)
    assert _leaf_count(alone.forest_).max() == 6


def test_leaf_values_are_the_newton_values_of_the_rows_routed_there():
    model = jb.Booster(
        loss=_half_square,
        n_estimators=1,
        learning_rate=0.5,
        base_score=0.0,
        reg_lambda=2.0,
        max_leaves=5,
        **_LOSSGUIDE,
    ).fit(X, Y)
    leaf = model.apply(X)[:, 0]
    stored = np.asarray(model.forest_.leaf_value[0, :, 0])
    weight = np.asarray(model.forest_.leaf_weight[0])
    for index in np.unique(leaf):
        rows = leaf == index
        np.testing.assert_allclose(stored[index], 0.5 * Y[rows].sum() / (rows.sum() + 2.0), 1e-5)
        assert weight[index] == rows.sum()
    unreached = np.setdiff1d(np.arange(stored.size), leaf)
    assert np.all(stored[unreached] == 0) and np.all(weight[unreached] == 0)


def test_save_load_round_trip(fitted, tmp_path):
    path = tmp_path / "lossguide.json"
    fitted.save(path)
    loaded = jb.load(path)
    assert (loaded.grow_policy, loaded.max_leaves) == ("lossguide", 6)
    np.testing.assert_array_equal(loaded.predict_raw(X), fitted.predict_raw(X))
    np.testing.assert_array_equal(loaded.apply(X), fitted.apply(X))


_CLASSES = np.digitize(Y, [0.5, 2.0]).astype(np.float32)


def test_vector_outputs_grow_leafwise():
    model = jb.Booster(loss="softmax", n_estimators=4, max_leaves=5, **_LOSSGUIDE)
    model.fit(X, _CLASSES)
    assert _leaf_count(model.forest_).max() == 5
    assert model.train_loss_[-1] < model.train_loss_[0]


def test_group_losses_grow_leafwise():
    qid = np.repeat(np.arange(30), 20)
    group = {"loss": losses.lambdarank(), "n_estimators": 3, "min_child_samples": 0}
    ranker = jb.Booster(grow_policy="lossguide", max_leaves=4, max_depth=4, **group)
    ranker.fit(X, _CLASSES, qid=qid)
    assert _leaf_count(ranker.forest_).max() == 4
    # a full budget: the depth-wise ranker, leaves solved jointly; bit for
    # bit in the heap (interaction constraints that constrain nothing keep
    # it), and in node tables the same splits, the leaves solved in their
    # order (the last digits)
    depthwise = jb.Booster(max_depth=3, leaf_method="joint_newton", **group)
    depthwise.fit(X, _CLASSES, qid=qid)
    full = {"grow_policy": "lossguide", "max_leaves": 8, "max_depth": 3, **group}
    full["leaf_method"] = "joint_newton"
    heap = jb.Booster(interaction_constraints=[[0, 1, 2, 3]], **full).fit(X, _CLASSES, qid=qid)
    full = jb.Booster(**full)
    np.testing.assert_array_equal(depthwise.predict_raw(X), heap.predict_raw(X))
    full.fit(X, _CLASSES, qid=qid)
    assert full.forest_.left_child is not None
    np.testing.assert_array_equal(_partition(full.apply(X)), _partition(depthwise.apply(X)))
    np.testing.assert_allclose(full.predict_raw(X), depthwise.predict_raw(X), rtol=1e-5, atol=1e-6)


def _swept(model, rows, column, grid):
    swept = np.repeat(rows, grid.size, axis=0)
    swept[:, column] = np.tile(grid, rows.shape[0])
    return model.predict_raw(swept).reshape(rows.shape[0], grid.size)


def test_monotone_and_interaction_constraints_hold_on_pruned_trees():
    grid = np.linspace(-3, 3, 41, dtype=np.float32)
    target = (Y - 2 * np.sin(3 * X[:, 2])).astype(np.float32)  # wavy in column 2
    settings = {"n_estimators": 10, "max_leaves": 9, "learning_rate": 0.3, **_LOSSGUIDE}
    free = jb.Booster(**settings).fit(X, target)
    assert np.any(np.diff(_swept(free, X[:20], 2, grid), axis=1) < 0)  # the test can fail
    model = jb.Booster(monotone_constraints=[0, 0, 1, 0], **settings).fit(X, target)
    assert _leaf_count(model.forest_).max() == 9
    assert np.all(np.diff(_swept(model, X[:40], 2, grid), axis=1) >= 0)
    sets = [{0, 1}, {2, 3}]
    constrained = jb.Booster(interaction_constraints=[[0, 1], [2, 3]], **settings).fit(X, Y)
    feature = np.asarray(constrained.forest_.feature)
    gain = np.asarray(constrained.forest_.split_gain)
    for tree in range(feature.shape[0]):
        stack = [(0, frozenset())]
        while stack:
            node, used = stack.pop()
            if node >= feature.shape[1]:
                assert any(used <= allowed for allowed in sets), used
                continue
            if gain[tree, node] > 0:
                used = used | {int(feature[tree, node])}
            stack += [(2 * node + 1, used), (2 * node + 2, used)]


def test_estimators_take_the_policy():
    regressor = jb.Regressor(n_estimators=3, max_leaves=4, **_LOSSGUIDE).fit(X, Y)
    assert _leaf_count(regressor.booster_.forest_).max() == 4
    labels = (Y > 1).astype(int)
    classifier = jb.Classifier(n_estimators=3, max_leaves=3, **_LOSSGUIDE).fit(X, labels)
    assert _leaf_count(classifier.booster_.forest_).max() == 3
    assert regressor.get_params()["grow_policy"] == "lossguide"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"grow_policy": "leafwise"}, "grow_policy: expected one of"),
        (
            {"grow_policy": "depthwise", "max_leaves": 8},
            'max_leaves: 8 bounds leaf-wise trees only; set grow_policy="lossguide"',
        ),
        ({"grow_policy": "lossguide", "max_leaves": 1}, "max_leaves: expected a whole number >= 2"),
        ({"grow_policy": "lossguide", "max_leaves": 2.5}, "max_leaves: expected a whole number"),
        (
            {"grow_policy": "lossguide", "max_leaves": 255, "max_depth": 6},
            r"max_leaves: 255 leaves do not fit in trees of max_depth=6 .*set max_depth >= 8",
        ),
    ],
)
def test_bad_settings_name_the_setting_and_the_fix(settings, message):
    with pytest.raises(ValueError, match=message):
        jb.Booster(n_estimators=1, **settings).fit(X[:50], Y[:50])


def test_default_max_leaves_is_lightgbms():
    model = jb.Booster(grow_policy="lossguide", n_estimators=1, min_child_samples=0)
    model.fit(X, Y)
    assert _leaf_count(model.forest_).max() == 31


def test_refit_leaves_keeps_the_pruned_splits(fitted):
    refitted = jb.refit_leaves(fitted, X, Y, steps=20)
    np.testing.assert_array_equal(refitted.apply(X), fitted.apply(X))
    before = np.mean((fitted.predict(X) - Y) ** 2)
    assert np.mean((refitted.predict(X) - Y) ** 2) < before
    # leaves no row reaches keep their value (0)
    unreached = np.asarray(fitted.forest_.leaf_weight) == 0
    np.testing.assert_array_equal(
        np.asarray(refitted.forest_.leaf_value)[unreached],
        np.asarray(fitted.forest_.leaf_value)[unreached],
    )


def test_continued_training_equals_one_longer_fit():
    settings = {"max_leaves": 6, **_LOSSGUIDE}
    longer = jb.Booster(n_estimators=6, **settings).fit(X, Y)
    first = jb.Booster(n_estimators=3, **settings).fit(X, Y)
    continued = jb.Booster(n_estimators=3, **settings).fit(X, Y, init_model=first)
    np.testing.assert_array_equal(continued.predict_raw(X), longer.predict_raw(X))
    np.testing.assert_array_equal(
        np.asarray(continued.forest_.feature), np.asarray(longer.forest_.feature)
    )


def _wide_level_data(seed=0, n_rows=2000):
    """Six noisy features of 32 bins, and ``[grad, hess]`` rows of a squared
    error at 0: ``(X, edges, stats)``."""
    from jaxboost.engine.binning import fit_bin_edges

    rng = np.random.default_rng(seed)
    X_wide = rng.normal(size=(n_rows, 6)).astype(np.float32)
    X_wide[rng.uniform(size=X_wide.shape) < 0.03] = np.nan
    signal = np.sin(2 * X_wide[:, 0]) + X_wide[:, 1] * X_wide[:, 2] + (X_wide[:, 3] > 1)
    signal = np.nan_to_num(signal)
    stats = np.c_[-(signal + rng.normal(size=n_rows)), np.ones(n_rows)].astype(np.float32)
    return X_wide, jnp.asarray(fit_bin_edges(X_wide, 32)), stats


@functools.cache
def _grown(kernel: str, max_leaves: int, max_depth: int = 6):
    """``grow_tree``'s ``(structure, leaf_of_row, sums)`` on `_wide_level_data`
    with ``kernel`` ("reference", "native" or "native-quantised");
    ``max_leaves`` 0: the complete depth-wise tree."""
    from jaxboost.engine.binning import apply_bins, tile_bins
    from jaxboost.engine.tree import TreeParams, grow_tree

    X_wide, edges, stats = _wide_level_data()
    bins = apply_bins(jnp.asarray(X_wide), edges)
    name, _, variant = kernel.partition("-")
    if name == "native":
        bins = tile_bins(bins)
    row_stats, scale = jnp.asarray(stats), None
    if variant == "quantised":  # eighths: exact integers
        row_stats = jnp.asarray(np.round(stats * 8).astype(np.int32))
        scale = jnp.full(2, 0.125, jnp.float32)
    params = TreeParams(
        max_depth=max_depth,
        reg_lambda=1.0,
        min_child_weight=1.0,
        min_split_gain=0.0,
        histogram_kernel=name,
        max_leaves=max_leaves,
    )
    columns = (jnp.asarray(stats.T),)
    grow = jax.jit(
        lambda: grow_tree(
            bins,
            row_stats,
            edges,
            params,
            None,
            stats_scale=scale,
            leaf_columns=columns,
        )
    )
    return grow()


@pytest.mark.parametrize(
    "kernel, max_leaves",
    [
        ("reference", 3),
        ("reference", 9),
        ("reference", 20),
        ("native", 5),
        ("native", 20),
        ("native-quantised", 9),
    ],
)
def test_live_node_histograms_keep_the_best_first_tree(kernel, max_leaves):
    # only the live nodes' histograms are built and searched
    # (engine.leafwise.live_slots): the tree must equal the complete
    # depth-wise tree of every node's histograms pruned afterwards, its
    # splits bit for bit (the same histograms: the same rows in the same
    # order, the same child summed by the native kernel)
    from jaxboost.engine.leafwise import best_first_tree, live_capacity

    assert live_capacity(5, max_leaves) < 2**5  # the deepest levels hold live nodes only
    structure, leaf_of_row, sums = _grown(kernel, max_leaves)
    expected = best_first_tree(*_grown(kernel, 0), None, max_leaves, 32)
    for field in structure._fields:
        if getattr(structure, field) is not None:
            np.testing.assert_array_equal(
                np.asarray(getattr(structure, field)),
                np.asarray(getattr(expected[0], field)),
                err_msg=field,
            )
    np.testing.assert_array_equal(np.asarray(leaf_of_row), np.asarray(expected[1]))
    # the leaves' sums: over the complete tree's leaves first, then merged
    # (pruned_sums): float32 sums grouped otherwise
    np.testing.assert_allclose(np.asarray(sums), np.asarray(expected[2]), rtol=1e-6, atol=1e-4)
    assert int(np.sum(np.asarray(structure.split_gain) > 0)) == max_leaves - 1


def test_importances_count_the_kept_splits_only(fitted):
    splits = np.asarray(fitted.forest_.split_gain) > 0
    features = np.asarray(fitted.forest_.feature)[splits]
    counts = np.bincount(features, minlength=X.shape[1]) / features.size
    np.testing.assert_allclose(fitted.feature_importance("split"), counts, rtol=1e-6)
    assert splits.sum() == 6 * 5  # 6 trees of 6 leaves: pruned nodes are not counted


@pytest.mark.parametrize("max_leaves", [5, 20])
def test_best_first_on_the_held_nodes_table_chooses_as_on_the_heap(max_leaves):
    # best_first_table walks the held nodes by explicit children; the heap
    # walk (best_first_splits) over the same gains, 0 where a node was not
    # held, is the reference, ties (equal gains) included
    from jaxboost.engine.leafwise import (
        HeldNodes,
        best_first_splits,
        best_first_table,
        heap_chosen,
        with_children,
    )

    max_depth, rng = 6, np.random.default_rng(max_leaves)
    table = jax.jit(lambda held: heap_chosen(held, best_first_table(held, max_leaves)))
    heap = jax.jit(lambda gain: best_first_splits(gain, max_leaves))
    for trial in range(6):
        gain = np.round(rng.exponential(size=2**max_depth - 1), 1 if trial % 2 else 6)
        gain = (gain * (rng.random(gain.size) < 0.8)).astype(np.float32)
        gain[0] = 1.0  # the root splits
        held, heap_gain = [], np.zeros_like(gain)
        for depth in range(max_depth):
            level = gain[2**depth - 1 : 2 ** (depth + 1) - 1]
            if depth < 3:  # every node, in order
                nodes = np.arange(2**depth)
                held.append(HeldNodes(jnp.asarray(nodes), jnp.ones(2**depth, bool), level))
            else:  # some sibling pairs, then padding (valid False)
                pairs = np.sort(rng.choice(2 ** (depth - 1), size=3, replace=False))
                nodes = np.stack([2 * pairs, 2 * pairs + 1], axis=1).reshape(-1)
                padded = np.r_[nodes, [2**depth - 1, 2**depth - 1]].astype(np.int32)
                valid = np.r_[np.ones(nodes.size, bool), False, False]
                place = np.full(2**depth, padded.size, np.int32)
                place[nodes] = np.arange(nodes.size)
                held_gain = np.r_[level[nodes], 9.0, 9.0].astype(np.float32)  # padding: ignored
                held.append(HeldNodes(jnp.asarray(padded), jnp.asarray(valid), held_gain, place))
            heap_gain[2**depth - 1 + nodes] = level[nodes]
        chosen, expected = table(held), heap(jnp.asarray(heap_gain))
        assert 0 < int(np.sum(chosen)) <= max_leaves - 1
        np.testing.assert_array_equal(np.asarray(chosen), np.asarray(expected))
        # the children's places found once, as grow_tree does
        linked = [with_children(upper, lower) for upper, lower in itertools.pairwise(held)]
        np.testing.assert_array_equal(np.asarray(table(linked + held[-1:])), np.asarray(expected))


@pytest.mark.parametrize("max_leaves", [3, 6, 9, 20, 31, 255])
def test_live_capacity_holds_every_node_best_first_growth_can_split(max_leaves):
    # live_slots keeps the first live_capacity / 2 split parents of a level:
    # one more would be dropped silently, so the bound must hold for any
    # gains, and it is reached by the leftmost nodes of a level with their
    # ancestors (the fewest ancestors for their number)
    from jaxboost.engine.leafwise import best_first_splits, kept_at_depth, live_capacity

    max_depth = 8
    depth_of = np.floor(np.log2(np.arange(2**max_depth - 1) + 1)).astype(int)
    rng = np.random.default_rng(max_leaves)
    for trial in range(20):  # random gains, some nodes not splitting, shallow ones first or not
        gain = rng.exponential(size=2**max_depth - 1) * (rng.random(2**max_depth - 1) < 0.8)
        if trial % 2:
            gain = gain / (1 + depth_of)
        chosen = np.asarray(best_first_splits(jnp.asarray(gain, jnp.float32), max_leaves))
        for depth in range(max_depth):
            assert chosen[depth_of == depth].sum() <= kept_at_depth(depth, max_leaves)
    for depth in range(max_depth):
        kept = kept_at_depth(depth, max_leaves)
        for count in range(kept, min(kept + 2, 2**depth + 1)):  # the bound, and one past it
            nodes = set()
            for node in range(2**depth - 1, 2**depth - 1 + count):
                while node >= 0 and node not in nodes:
                    nodes.add(node)
                    node = (node - 1) // 2 if node else -1
            gain = np.zeros(2**max_depth - 1, np.float32)
            gain[sorted(nodes)] = 1.0 / (1 + depth_of[sorted(nodes)])  # ancestors pop first
            chosen = np.asarray(best_first_splits(jnp.asarray(gain), max_leaves))
            at_depth = chosen[depth_of == depth].sum()
            assert at_depth == kept if count == kept else at_depth <= kept
        if depth + 1 < max_depth:
            assert live_capacity(depth + 1, max_leaves) >= min(2 * kept, 2 ** (depth + 1))

"""Tests of ``jaxboost.engine.predict``: a fitted forest applied by ``predict_forest`` equals a
plain numpy walk of the same padded trees, and the training scores it implies."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost import Booster, losses
from jaxboost.engine.predict import predict_forest, tree_depth
from jaxboost.engine.tree import Tree

N_ROWS, N_FEATURES, DEPTH = 50, 4, 3


def _features(seed: int, n_rows: int = N_ROWS) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, N_FEATURES)).astype(np.float32)
    X[:, 1] = rng.integers(0, 6, size=n_rows)
    X[rng.random(n_rows) < 0.2, 0] = np.nan
    X[rng.random(n_rows) < 0.3, 2] = np.nan
    return X


def _walk(forest: Tree, init_score: np.ndarray, X: np.ndarray, by_bin=None) -> np.ndarray:
    """``F0 + sum_t leaf_value_t[leaf]`` by walking every tree's heap in numpy.

    With ``by_bin = (bins, missing_bin)`` rows are routed by bins and ``threshold_bin``
    (as in training) instead of raw values and ``threshold``.
    """
    n_trees, n_internal = forest.feature.shape
    depth = (n_internal + 1).bit_length() - 1
    rows = np.arange(X.shape[0])
    raw = np.tile(np.asarray(init_score, np.float64), (X.shape[0], 1))
    for t in range(n_trees):
        node = np.zeros(X.shape[0], np.int64)
        for _ in range(depth):
            feature = forest.feature[t][node]
            if by_bin is None:
                value = X[rows, feature]
                is_missing = np.isnan(value)
                above = ~(value <= forest.threshold[t][node])
            else:
                bins, missing_bin = by_bin
                value = bins[feature, rows].astype(np.int64)
                is_missing = value == missing_bin
                above = value > forest.threshold_bin[t][node]
            go_right = np.where(is_missing, ~forest.missing_left[t][node], above)
            node = 2 * node + 1 + go_right
        raw += forest.leaf_value[t][node - (2**depth - 1)]
    return raw


def _numpy_bins(X: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of every value from the edges: the number of edges below it, NaN last."""
    max_bins = edges.shape[1]
    bins = np.empty(X.T.shape, np.int64)
    for feature in range(X.shape[1]):
        bins[feature] = np.searchsorted(edges[feature, :-1], X[:, feature], side="left")
    bins[np.isnan(X.T)] = max_bins
    return bins


def _fit(loss, y, X, **kwargs) -> Booster:
    params = {"n_estimators": 6, "learning_rate": 0.3, "max_depth": DEPTH, "max_bins": 16}
    params.update(kwargs)
    return Booster(loss=loss, **params).fit(X, y)


@pytest.fixture(scope="module")
def regression():
    X = _features(0)
    y = np.nan_to_num(X[:, 0]) * 2 + X[:, 1] - np.isnan(X[:, 2]) + 0.1 * X[:, 3]
    return X, y.astype(np.float32), _fit(losses.squared_error, y, X)


@pytest.fixture(scope="module", params=["multi_output_tree", "one_output_per_tree"])
def three_classes(request):
    X = _features(1)
    labels = (np.nan_to_num(X[:, 0]) > 0).astype(int) + (X[:, 1] >= 3).astype(int)
    model = _fit(losses.softmax_cross_entropy, labels, X, multi_strategy=request.param)
    return X, labels, model


def _forest(model: Booster) -> Tree:
    return jax.tree.map(np.asarray, model.forest_)


def _predict(model: Booster, X: np.ndarray, **kwargs) -> np.ndarray:
    forest = jax.tree.map(jnp.asarray, model.forest_)
    raw = predict_forest(forest, jnp.asarray(model.base_score_), jnp.asarray(X), **kwargs)
    return np.asarray(raw)


def test_forest_shapes(regression, three_classes):
    for model, n_outputs, n_trees in [
        (regression[2], 1, 6),
        (three_classes[2], 3, 6 if three_classes[2].multi_strategy == "multi_output_tree" else 18),
    ]:
        forest = _forest(model)
        assert forest.feature.shape == (n_trees, 2**DEPTH - 1)
        assert forest.leaf_value.shape == (n_trees, 2**DEPTH, n_outputs)
        assert tree_depth(forest) == DEPTH
        assert model.base_score_.shape == (n_outputs,)


@pytest.mark.parametrize("batch_rows", [7, 1_024, 16_384])
def test_regression_matches_numpy_walk(regression, batch_rows):
    X, _, model = regression
    X_new = _features(10, n_rows=N_ROWS)
    for data in (X, X_new):
        expected = _walk(_forest(model), model.base_score_, data)
        raw = _predict(model, data, batch_rows=batch_rows)
        assert raw.shape == (data.shape[0], 1) and raw.dtype == np.float32
        np.testing.assert_allclose(raw, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.predict_raw(X_new), expected[:, 0], rtol=1e-5, atol=1e-5)
    # the walk had something to check: many leaves, NaN sent both ways by real splits
    assert len(np.unique(np.round(expected, 5))) > 4
    forest = _forest(model)
    splits = forest.split_gain > 0
    assert {True, False} <= set(forest.missing_left[splits & (forest.feature != 1)].tolist())


@pytest.mark.parametrize("batch_rows", [7, 50, 64])
def test_three_classes_match_numpy_walk(three_classes, batch_rows):
    X, _, model = three_classes
    X_new = _features(11, n_rows=N_ROWS)
    for data in (X, X_new):
        expected = _walk(_forest(model), model.base_score_, data)
        raw = _predict(model, data, batch_rows=batch_rows)
        assert raw.shape == (data.shape[0], 3)
        np.testing.assert_allclose(raw, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.predict_raw(X_new), expected, rtol=1e-5, atol=1e-5)


def test_all_missing_rows_follow_missing_directions(regression):
    _, _, model = regression
    X_missing = np.full((5, N_FEATURES), np.nan, np.float32)
    expected = _walk(_forest(model), model.base_score_, X_missing)
    np.testing.assert_allclose(_predict(model, X_missing, batch_rows=2), expected, rtol=1e-5)


def test_raw_features_reach_the_leaves_training_reached(regression, three_classes):
    """Routing raw values by ``threshold`` = routing bins by ``threshold_bin``."""
    for X, _, model in (regression, three_classes):
        bins = _numpy_bins(X, model.bin_edges_)
        by_bin = _walk(_forest(model), model.base_score_, X, by_bin=(bins, model.max_bins))
        raw = model.predict_raw(X).reshape(X.shape[0], -1)
        np.testing.assert_allclose(raw, by_bin, rtol=1e-5, atol=1e-5)


def test_squared_error_training_loss_matches_predictions(regression):
    X, y, model = regression
    raw = model.predict_raw(X).astype(np.float64)
    np.testing.assert_allclose(np.mean(0.5 * (y - raw) ** 2), model.train_loss_[-1], rtol=1e-5)
    assert model.train_loss_[-1] < model.train_loss_[0]


def test_odd_row_count_training_loss_matches_predictions():
    """51 rows over 2 devices: the padding row must not leak into the loss."""
    X = _features(3, n_rows=51)
    y = (np.nan_to_num(X[:, 3]) - X[:, 1]).astype(np.float32)
    model = _fit(losses.squared_error, y, X)
    raw = model.predict_raw(X).astype(np.float64)
    np.testing.assert_allclose(np.mean(0.5 * (y - raw) ** 2), model.train_loss_[-1], rtol=1e-5)


def test_softmax_training_loss_matches_predictions(three_classes):
    X, labels, model = three_classes
    raw = model.predict_raw(X).astype(np.float64)
    top = raw.max(axis=1)
    log_norm = top + np.log(np.exp(raw - top[:, None]).sum(axis=1))
    loss = np.mean(log_norm - raw[np.arange(X.shape[0]), labels])
    np.testing.assert_allclose(loss, model.train_loss_[-1], rtol=1e-5)


def test_large_inputs_are_predicted_on_every_device_as_on_one():
    import jax

    from jaxboost.engine.predict import predict_on_devices

    if len(jax.devices()) < 2:
        pytest.skip("needs 2 devices: run with jaxboost imported before JAX starts")
    X = _features(4, n_rows=3000)
    y = np.nan_to_num(X[:, 0]) + X[:, 1]
    model = Booster(loss=losses.squared_error, n_estimators=15, max_depth=DEPTH).fit(X, y)
    big = _features(5, n_rows=40_003)  # enough rows for 2 devices, not a multiple of 2
    forest = jax.tree.map(jnp.asarray, model.forest_)
    on_two = predict_on_devices(forest, model.base_score_, big, jax.devices()[:2])
    on_one = predict_on_devices(forest, model.base_score_, big, jax.devices()[:1])
    np.testing.assert_array_equal(on_two, on_one)
    np.testing.assert_allclose(
        on_one, _walk(model.forest_, model.base_score_, big), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("n_rows", [1, 50, 64, 130])
def test_the_native_kernel_matches_numpy_walk(regression, three_classes, n_rows):
    from jaxboost.engine.predict import predict_forest_native

    X_new = _features(12, n_rows=n_rows)
    X_new[::7] = np.nan  # whole rows missing too
    for _, _, model in (regression, three_classes):
        forest = jax.tree.map(jnp.asarray, model.forest_)
        raw = predict_forest_native(forest, jnp.asarray(model.base_score_), jnp.asarray(X_new))
        expected = _walk(_forest(model), model.base_score_, X_new)
        assert raw.shape == expected.shape and raw.dtype == np.float32
        np.testing.assert_allclose(np.asarray(raw), expected, rtol=1e-6, atol=1e-6)


def test_the_native_kernel_jumps_over_nodes_that_send_every_row_left():
    """Random depth-4 trees whose nodes do not split (threshold +inf, NaN
    left) at every level, with splitting nodes below them, and a tree whose
    root does not split: the native walk, which jumps from such a node to the
    first splitting node or leaf down its left side, scores as the
    level-by-level heap walk."""
    from jaxboost.engine.predict import predict_forest_native

    rng = np.random.default_rng(3)
    n_trees, depth = 5, 4
    n_internal = 2**depth - 1
    idle = rng.random((n_trees, n_internal)) < 0.4
    idle[0, 0] = True  # a tree whose root sends every row left
    idle[1, :] = False
    idle[1, 1:3] = True  # both children of the root; their subtrees split
    forest = Tree(
        feature=rng.integers(0, N_FEATURES, size=(n_trees, n_internal)).astype(np.int32),
        threshold=np.where(idle, np.inf, rng.normal(size=(n_trees, n_internal))).astype(np.float32),
        threshold_bin=np.zeros((n_trees, n_internal), np.int32),
        missing_left=idle | (rng.random((n_trees, n_internal)) < 0.5),
        split_gain=np.zeros((n_trees, n_internal), np.float32),
        leaf_value=rng.normal(size=(n_trees, n_internal + 1, 1)).astype(np.float32),
        leaf_weight=np.ones((n_trees, n_internal + 1), np.float32),
    )
    X_new = _features(13, n_rows=200)
    X_new[::9] = np.nan
    init_score = np.zeros(1, np.float32)
    native = jax.tree.map(jnp.asarray, forest)
    raw = predict_forest_native(native, jnp.asarray(init_score), jnp.asarray(X_new))
    expected = _walk(forest, init_score, X_new)
    np.testing.assert_allclose(np.asarray(raw), expected, rtol=1e-6, atol=1e-6)


def test_the_native_kernel_rejects_a_split_feature_out_of_range(regression):
    from jaxboost.engine.predict import predict_forest_native

    _, _, model = regression
    forest = jax.tree.map(jnp.asarray, model.forest_)
    forest = forest._replace(feature=forest.feature.at[0, 0].set(N_FEATURES))
    with pytest.raises(Exception, match="split feature out of range"):
        np.asarray(predict_forest_native(forest, jnp.asarray(model.base_score_), jnp.ones((3, 4))))


def _walk_forest(feature, threshold, missing_left, sets, leaf_value) -> Tree:
    """A forest of the node arrays a walk reads (``(n_trees, n_internal)``
    each, ``sets`` ``(..., 8)`` or None) and ``leaf_value`` ``(n_trees,
    n_leaves, n_outputs)``; the fields no walk reads zero."""
    return Tree(
        feature=feature,
        threshold=threshold,
        threshold_bin=np.zeros(feature.shape, np.int32),
        missing_left=missing_left,
        split_gain=np.zeros(feature.shape, np.float32),
        leaf_value=leaf_value,
        leaf_weight=np.ones(leaf_value.shape[:2], np.float32),
        category_left=sets,
    )


def _lossguide_forest(seed: int, n_trees: int, depth: int, with_sets: bool) -> Tree:
    """Random depth-``depth`` heaps shaped as leaf-wise trees: up to 10 splitting
    nodes anywhere down the heap, every other reachable node sending every row
    left (chains of them down to the leaves), unreachable nodes random; tree 0
    splits at every node.  Splitting nodes include threshold +inf with NaN right
    and, ``with_sets``, categorical nodes on feature 1 (threshold +inf)."""
    rng = np.random.default_rng(seed)
    n_internal = 2**depth - 1
    shape = (n_trees, n_internal)
    feature = rng.integers(0, N_FEATURES, size=shape).astype(np.int32)
    threshold = rng.normal(size=shape).astype(np.float32)
    missing_left = rng.random(shape) < 0.5
    sets = rng.integers(0, 2**32, size=(*shape, 8), dtype=np.uint32)
    sets[rng.random(shape) < 0.7] = 0
    for t in range(1, n_trees):
        frontier, n_splits = [0], 0
        while frontier:
            k = frontier.pop(rng.integers(len(frontier)))
            if k >= n_internal:
                continue
            if n_splits < 10 and rng.random() < 0.4:
                n_splits += 1
                frontier += [2 * k + 1, 2 * k + 2]
                sets[t, k] = 0
                if rng.random() < 0.15:
                    threshold[t, k], missing_left[t, k] = np.inf, False
                elif with_sets and rng.random() < 0.4:
                    feature[t, k], threshold[t, k] = 1, np.inf
                    sets[t, k] = rng.integers(1, 2**32, size=8, dtype=np.uint32)
            else:
                threshold[t, k], missing_left[t, k], sets[t, k] = np.inf, True, 0
                frontier.append(2 * k + 1)
    leaf_value = rng.normal(size=(n_trees, n_internal + 1, 2)).astype(np.float32)
    return _walk_forest(feature, threshold, missing_left, sets if with_sets else None, leaf_value)


def _walk_with_sets(forest: Tree, X: np.ndarray) -> np.ndarray:
    """Sum over trees (float64, in order) of each row's leaf value by walking
    the heap level by level, categorical nodes by their sets (the code
    clamped to [0, 255] and truncated goes left when in the set)."""
    n_trees, n_internal = forest.feature.shape
    depth = (n_internal + 1).bit_length() - 1
    rows = np.arange(X.shape[0])
    raw = np.zeros((X.shape[0], forest.leaf_value.shape[-1]), np.float64)
    for t in range(n_trees):
        node = np.zeros(X.shape[0], np.int64)
        for _ in range(depth):
            value = X[rows, forest.feature[t][node]]
            go_right = ~(value <= forest.threshold[t][node])
            if forest.category_left is not None:
                sets = forest.category_left[t][node]
                code = np.clip(np.nan_to_num(value), 0, 255).astype(np.int64)
                in_set = (sets[rows, code // 32] >> (code % 32).astype(np.uint32)) & 1
                categorical = sets.any(axis=1)
                go_right = np.where(categorical, in_set == 0, go_right)
            go_right = np.where(np.isnan(value), ~forest.missing_left[t][node], go_right)
            node = 2 * node + 1 + go_right
        raw += forest.leaf_value[t][node - n_internal]
    return raw


@pytest.mark.parametrize("with_sets", [False, True])
def test_the_native_kernel_walks_leaf_wise_trees_as_the_heap(with_sets):
    """Deep heaps with few splitting nodes (which the kernel compacts) beside a
    tree that splits everywhere: the native scores equal, bit for bit, the
    float64 sums of the heap walk's leaves in tree order."""
    from jaxboost.engine.predict import predict_forest_native

    forest = _lossguide_forest(7, n_trees=8, depth=8, with_sets=with_sets)
    X_new = _features(14, n_rows=300)
    X_new[:, 1] = np.random.default_rng(15).integers(-3, 300, size=300)  # codes out of range too
    X_new[::11] = np.nan
    X_new[5::13, 1] = np.nan
    native = jax.tree.map(jnp.asarray, forest)
    raw = predict_forest_native(native, jnp.zeros(2, jnp.float32), jnp.asarray(X_new))
    expected = _walk_with_sets(forest, X_new).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(raw), expected)
    # the forest had something to check: many distinct leaves reached
    assert len(np.unique(expected[:, 0])) > 30


def _chain_forest(depth: int) -> Tree:
    """Depth-``depth`` heaps of leaf-wise shapes the kernel compacts: tree 0 of
    one leaf (no node splits); tree 1 a chain of non-splitting nodes from the
    root to one split on the last internal level, threshold +inf sending NaN
    right; tree 2 a categorical split on feature 1 halfway down the chain,
    whose right child splits numerically; tree 3 a numeric split at the root
    with chains under both children to splits near the bottom."""
    n_internal = 2**depth - 1
    shape = (4, n_internal)
    feature = np.zeros(shape, np.int32)
    threshold = np.full(shape, np.inf, np.float32)
    missing_left = np.ones(shape, bool)
    sets = np.zeros((*shape, 8), np.uint32)

    def left_chain(k: int, levels: int) -> int:
        for _ in range(levels):
            k = 2 * k + 1
        return k

    deepest = left_chain(0, depth - 1)  # first node of the last internal level
    feature[1, deepest], missing_left[1, deepest] = 2, False
    middle = left_chain(0, depth // 2)
    feature[2, middle], sets[2, middle, 0] = 1, 0b10110
    feature[2, 2 * middle + 2], threshold[2, 2 * middle + 2] = 3, 0.2
    feature[3, 0], threshold[3, 0], missing_left[3, 0] = 0, 0.1, False
    for child, levels in ((1, depth - 3), (2, depth - 2)):
        k = left_chain(child, levels)
        feature[3, k], threshold[3, k], missing_left[3, k] = 3, -0.3, bool(child == 1)
    leaf_value = np.random.default_rng(21).normal(size=(4, n_internal + 1, 1)).astype(np.float32)
    return _walk_forest(feature, threshold, missing_left, sets, leaf_value)


@pytest.mark.parametrize("depth", [8, 11])
def test_the_native_kernel_walks_one_leaf_trees_and_deep_chains(depth):
    """Compacted trees of one leaf, and chains down to splits on the heap's
    last levels (numeric with NaN right at +inf, categorical, both sides of
    the root), over rows that end their walks at different passes, whole NaN
    rows and a partial last block: the native scores equal, bit for bit, the
    float64 sums of the heap walk's leaves, and every tree's leaves are
    reached (so each path is checked)."""
    from jaxboost.engine.predict import predict_forest_native

    forest = _chain_forest(depth)
    X_new = _features(22, n_rows=150)
    X_new[:, 1] = np.random.default_rng(23).integers(0, 6, size=150)
    X_new[::10] = np.nan
    X_new[3::7, 2] = np.nan
    X_new[4::9, 3] = np.nan
    native = jax.tree.map(jnp.asarray, forest)
    raw = predict_forest_native(native, jnp.zeros(1, jnp.float32), jnp.asarray(X_new))
    expected = _walk_with_sets(forest, X_new).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(raw), expected)
    for t, n_leaves in enumerate((1, 2, 3, 4)):
        one_tree = jax.tree.map(lambda leaf, t=t: leaf[t : t + 1], forest)
        leaves = _walk_with_sets(one_tree, X_new)[:, 0]
        assert len(np.unique(leaves)) == n_leaves, t


_compile_events = [0]


def _count_compile(event: str, seconds: float, **_) -> None:
    # (this thread's: a fit's background compiles (compile_ahead) may still
    # run on their own thread after the fit returns)
    if (
        event.startswith("/jax/core/compile/")
        and threading.current_thread() is threading.main_thread()
    ):
        _compile_events[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compile)


def _softmax(raw: np.ndarray) -> np.ndarray:
    shifted = np.exp(raw - raw.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def test_a_batch_of_any_size_compiles_nothing_after_the_first(regression, three_classes):
    """After a model's first prediction, batches of new sizes (one row, odd
    sizes, past a chunk) compile no program (JAX's compile events), and
    every row scores as the numpy walk of the heap, through the link too."""
    _, _, model = three_classes
    _, _, line = regression
    model.predict(_features(20, n_rows=5))
    line.predict(_features(20, n_rows=5))
    for n_rows in (1, 7, 1000, 4097, 70_001):
        X_new = _features(21 + n_rows % 7, n_rows=n_rows)
        before = _compile_events[0]
        probability, raw = model.predict(X_new), model.predict_raw(X_new)
        value = line.predict(X_new)
        assert _compile_events[0] == before, f"{n_rows} rows compiled a program"
        expected = _walk(_forest(model), model.base_score_, X_new)
        np.testing.assert_allclose(raw, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(probability, _softmax(expected), rtol=1e-5, atol=1e-6)
        expected = _walk(_forest(line), line.base_score_, X_new)[:, 0]
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5)


def test_chunks_cover_every_row_with_a_few_sizes():
    """`in_chunks` calls its function on chunks of `CHUNK_ROWS` sizes only
    and joins their rows back in order, at sizes around every boundary."""
    from jaxboost.runtime.padding import CHUNK_ROWS, chunk_sizes, in_chunks

    seen = set()

    def double(rows):
        seen.add(rows.shape[0])
        return 2 * rows

    for n_rows in (0, 1, 255, 256, 257, 4097, 65536, 65537, 2 * 65536 + 3):
        array = np.arange(n_rows * 2, dtype=np.float32).reshape(n_rows, 2)
        np.testing.assert_array_equal(in_chunks(double, array), 2 * array)
        assert sum(rows for rows, _ in chunk_sizes(n_rows)) == n_rows
    assert seen <= set(CHUNK_ROWS)


def test_the_host_walk_rejects_a_split_feature_out_of_range(regression):
    from jaxboost.engine.predict import predict_forest_host

    _, _, model = regression
    forest = _forest(model)
    forest = forest._replace(feature=forest.feature.copy())
    forest.feature[0, 0] = N_FEATURES
    with pytest.raises(ValueError, match="split feature out of range"):
        predict_forest_host(forest, model.base_score_, np.ones((3, N_FEATURES), np.float32))


def test_devices_without_the_host_walk_take_chunks_of_three_sizes(regression, monkeypatch):
    """Where the native walk is not called from the host (GPUs, no native
    kernels) a batch runs as chunks of `CHUNK_ROWS` sizes through the
    program, and scores as the numpy walk at sizes across the chunks."""
    from jaxboost.engine import predict

    monkeypatch.setattr(predict, "_walks_on_host", lambda devices: False)
    _, _, model = regression
    for n_rows in (1, 300, 65536 + 5):
        X_new = _features(30, n_rows=n_rows)
        expected = _walk(_forest(model), model.base_score_, X_new)[:, 0]
        np.testing.assert_allclose(model.predict_raw(X_new), expected, rtol=1e-5, atol=1e-5)


def test_a_forest_without_trees_predicts_its_initial_score(regression):
    _, _, model = regression
    X_new = _features(31, n_rows=3)
    raw = model.predict_raw(X_new, iteration_range=(0, 0))
    np.testing.assert_array_equal(raw, np.full(3, model.base_score_[0], np.float32))

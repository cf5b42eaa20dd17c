"""The split search on packed bins chooses what the search on every bin does,
and the kernels' packed histograms are their padded ones at the used bins."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.engine import packed_split
from jaxboost.engine.binning import TILE_ROWS, apply_bins, splittable_columns, tile_bins
from jaxboost.engine.packed_split import find_best_packed_splits, packed_bins, slot_layout
from jaxboost.engine.split import find_best_splits
from jaxboost.engine.tree import TreeParams, grow_tree
from jaxboost.kernels.histogram_kernels import HISTOGRAM_KERNELS
from jaxboost.kernels.histogram_reference import in_slots
from jaxboost.kernels.interfaces import LevelSplit, SlotLayout


@pytest.fixture(autouse=True)
def _pack_small_tables(monkeypatch):
    # these tables are small: packed here whatever their candidates' count
    monkeypatch.setattr(packed_split, "_PACKED_LEAST", 0)


def _edges(used: np.ndarray, n_value_bins: int, rng) -> np.ndarray:
    edges = np.full((used.size, n_value_bins), np.inf, np.float32)
    for feature, count in enumerate(used):
        edges[feature, : count - 1] = np.sort(rng.normal(size=count - 1))
    return edges


def _histograms(used, n_nodes, n_value_bins, n_outputs, weight_column, rng):
    """Histograms whose bins past each feature's used ones are empty, with
    gradients rounded to tenths (ties between candidates)."""
    n_stats = 2 * n_outputs + int(weight_column)
    hist = np.zeros((used.size, n_nodes, n_value_bins + 1, n_stats), np.float32)
    for feature, count in enumerate(used):
        shape = (n_nodes, count, n_outputs)
        hist[feature, :, :count, :n_outputs] = rng.normal(size=shape).round(1)
        hist[feature, :, :count, n_outputs : 2 * n_outputs] = np.abs(rng.normal(size=shape))
        if weight_column:
            hist[feature, :, :count, -1] = rng.integers(0, 3, size=(n_nodes, count))
    missing = rng.uniform(size=(used.size, n_nodes)) < 0.3
    hist[:, :, -1, :n_outputs] = (
        rng.normal(size=(used.size, n_nodes, n_outputs)) * missing[..., None]
    )
    hist[:, :, -1, n_outputs:] = np.abs(hist[:, :, -1, :1]) * missing[..., None]
    return hist


# jitted with the numeric settings traced: one program per shape, not one per
# call (an eager lax.cond compiles its branches at every call)
_full_search = jax.jit(find_best_splits, static_argnums=1, static_argnames="cumulative")
_packed_search = jax.jit(find_best_packed_splits, static_argnums=2)


@pytest.mark.parametrize("n_outputs, weight_column", [(1, False), (1, True), (3, False)])
def test_packed_and_full_searches_choose_the_same_splits(n_outputs, weight_column):
    rng = np.random.default_rng(n_outputs + 10 * weight_column)
    n_features, n_value_bins, n_nodes = 40, 31, 8
    used = rng.integers(1, n_value_bins + 1, n_features)
    used[:5] = 1  # constant features: no candidate at all
    packed = packed_bins(_edges(used, n_value_bins, rng))
    assert packed is not None and int(packed.valid.sum()) == used.sum()
    packed = jax.tree.map(jnp.asarray, packed)
    slots = slot_layout(packed)
    for trial in range(12):
        hist = _histograms(used, n_nodes, n_value_bins, n_outputs, weight_column, rng)
        if trial % 3 == 2:  # no missing values: one direction searched
            hist[:, :, -1] = 0
        mask = jnp.asarray(rng.uniform(size=n_features) < 0.7) if trial % 2 else None
        settings = (n_outputs, 1.0 if trial % 3 else 0.0, 1e-3, 0.05 * (trial % 4))
        for cumulative in (False, True):
            given = hist.copy()
            if cumulative:
                given[:, :, :-1] = np.cumsum(given[:, :, :-1], axis=2)
            full = _full_search(jnp.asarray(given), *settings, mask, cumulative=cumulative)
            packed_hist = in_slots(jnp.asarray(given), slots, cumulative)
            found = _packed_search(packed_hist, packed, *settings, mask)
            for name, a, b in zip(full._fields, full, found):
                np.testing.assert_array_equal(a, b, err_msg=f"{name}, trial {trial}")


def test_packing_is_skipped_where_features_use_most_bins():
    rng = np.random.default_rng(0)
    assert packed_bins(_edges(np.full(20, 60), 63, rng)) is None
    few = packed_bins(_edges(np.full(20, 6), 63, rng))
    assert few is not None and few.feature.size < 0.6 * 20 * 63


def test_few_candidates_are_not_packed(monkeypatch):
    # a small table's padded search is cheap, and its shape is the same on a
    # cross-validation's folds and its refit (packed: 1,024 and 1,152
    # candidates on diabetes), so they share one compiled program
    from sklearn.datasets import load_diabetes

    monkeypatch.setattr(packed_split, "_PACKED_LEAST", 4096)
    X, y = load_diabetes(return_X_y=True)
    settings = {"n_estimators": 2, "max_depth": 2}
    fold, whole = (
        jb.Booster(**settings).fit(X[rows], y[rows]) for rows in (slice(294), slice(None))
    )
    monkeypatch.setattr(packed_split, "_PACKED_LEAST", 0)
    packed = [packed_bins(model.bin_edges_) for model in (fold, whole)]
    assert packed[0].feature.shape != packed[1].feature.shape  # what packing would do
    monkeypatch.undo()
    assert packed_split._PACKED_LEAST > fold.bin_edges_.size
    assert packed_bins(fold.bin_edges_) is None and packed_bins(whole.bin_edges_) is None
    wide = _edges(np.full(100, 6), 255, np.random.default_rng(0))  # 25,500 padded: packed
    assert packed_bins(wide) is not None


@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("n_devices", [1, 2])
def test_a_fit_on_few_valued_features_is_the_fit_without_packing(monkeypatch, quantised, n_devices):
    if len(jax.devices()) < n_devices:
        pytest.skip(f"needs {n_devices} devices")
    rng = np.random.default_rng(1)
    X = np.column_stack(
        [rng.integers(0, k, 3000) for k in (2, 3, 5, 8, 2, 200)] + [np.zeros(3000)]
    ).astype(np.float32)
    X[rng.uniform(size=3000) < 0.2, 2] = np.nan  # a missing bin beside 5 value bins
    y = (X[:, 0] + np.sin(X[:, 3]) + 0.01 * X[:, 5] + rng.normal(size=3000)).astype(np.float32)
    settings = {
        "n_estimators": 10,
        "max_depth": 3,  # (5 compiled programs 40% slower; depth is not the point)
        "colsample_bytree": 0.8,
        "use_quantized_grad": quantised,
        "devices": jax.devices()[:n_devices],
    }
    packed = jb.Booster(**settings).fit(X, y)
    assert packed_bins(packed.bin_edges_) is not None
    monkeypatch.setattr(packed_split, "_WORTH_PACKING", 0.0)
    assert packed_bins(packed.bin_edges_) is None
    every_bin = jb.Booster(**settings).fit(X, y)
    np.testing.assert_array_equal(packed.forest_.feature, every_bin.forest_.feature)
    np.testing.assert_array_equal(packed.forest_.threshold_bin, every_bin.forest_.threshold_bin)
    np.testing.assert_array_equal(packed.forest_.missing_left, every_bin.forest_.missing_left)
    np.testing.assert_array_equal(packed.predict_raw(X), every_bin.predict_raw(X))


def _used_bins(hist, start: np.ndarray, n_slots: int) -> np.ndarray:
    """Padded ``(n_features, n_nodes, n_bins, C)`` histograms packed by numpy:
    feature ``f``'s first value bins, then its missing bin (the last), in
    slots ``start[f] .. start[f + 1] - 1`` of every node; the other slots 0."""
    hist = np.asarray(hist)
    packed = np.zeros((hist.shape[1], n_slots, hist.shape[3]), hist.dtype)
    for feature, (first, end) in enumerate(itertools.pairwise(start)):
        packed[:, first : end - 1] = hist[feature, :, : end - 1 - first]
        packed[:, end - 1] = hist[feature, :, -1]
    return packed


def _native_levels(quantised, bins, stats, node_of_row, n_nodes, splits, n_bins, slots):
    """The native kernel's levels from one of ``n_nodes`` nodes summed afresh,
    each next one routed by the next of ``splits``: per level its running
    sums, plain sums and ``node_of_row``, packed in ``slots`` or padded."""
    kernel = HISTOGRAM_KERNELS["native"]
    level = kernel.level_quantised if quantised else kernel.level
    scale = (jnp.ones(stats.shape[1], jnp.float32),) if quantised else ()
    parent, split, levels = None, None, []
    for split_below in (*splits, None):
        hist, parent, node_of_row = level(
            bins, node_of_row, stats, *scale, n_nodes, n_bins, parent, split, slots
        )
        levels.append((hist, parent, node_of_row))
        split, n_nodes = split_below, 2 * n_nodes
    return levels


@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("flagged", ["the features with missing values", "every feature"])
@pytest.mark.parametrize(
    "n_rows, first_nodes, n_splits",
    [
        (2000, 1, 4),  # the root, then children listed in row order
        (TILE_ROWS + 500, 1, 2),  # two tiles of rows
        (3000, 8, 1),  # a level of several nodes summed afresh
        # 128 children of ~23 rows: subtracted by blocks of several features
        # (HistLayout::FeatureBlocks), most bins of a node empty
        (3000, 64, 1),
        (3000, 1024, 1),  # 2048 children: routed and counted first
    ],
)
def test_native_packed_histograms_are_the_padded_ones_at_the_used_bins(
    quantised, flagged, n_rows, first_nodes, n_splits
):
    rng = np.random.default_rng(n_rows + first_nodes)
    # value bins of each feature: two blocks of 4 features and 2 alone
    used = np.array([1, 2, 3, 9, 40, 5, 63, 2, 7, 1])
    n_features, n_bins = used.size, 64
    bins = (rng.uniform(size=(n_features, n_rows)) * used[:, None]).astype(np.uint8)
    # missing values in the first block and the first lone feature only
    has_missing = np.isin(np.arange(n_features), [1, 8])
    bins[(rng.uniform(size=bins.shape) < 0.1) & has_missing[:, None]] = n_bins - 1
    if flagged == "every feature":
        has_missing[:] = True
    stats = rng.integers(-9, 10, size=(n_rows, 2)).astype(np.int32)
    if not quantised:
        stats = (stats + rng.normal(size=stats.shape)).astype(np.float32)
    node_of_row = rng.integers(0, first_nodes, n_rows).astype(np.int32)
    splits = []
    for depth in range(n_splits):
        feature = rng.integers(0, n_features, first_nodes << depth)
        splits.append(
            LevelSplit(
                jnp.asarray(feature, jnp.int32),
                jnp.asarray(rng.integers(0, used[feature]), jnp.int32),
                jnp.asarray(rng.uniform(size=feature.size) < 0.5),
                missing_bin=n_bins - 1,
            )
        )
    start = np.concatenate([[0], np.cumsum(used + 1)]).astype(np.int32)
    n_slots = int(start[-1]) + 5  # 5 padding slots
    slots = SlotLayout(jnp.asarray(start), n_slots, jnp.asarray(has_missing))
    arguments = (jnp.asarray(tile_bins(bins)), jnp.asarray(stats), jnp.asarray(node_of_row))
    padded = _native_levels(quantised, *arguments, first_nodes, splits, n_bins, None)
    packed = _native_levels(quantised, *arguments, first_nodes, splits, n_bins, slots)
    for depth, (padded_level, packed_level) in enumerate(zip(padded, packed)):
        running, sums, routed = map(np.asarray, packed_level)
        assert running.shape == (slots.n_slots, first_nodes << depth, 2)  # slot-major
        running_by_node = running.swapaxes(0, 1)
        np.testing.assert_array_equal(
            running_by_node, _used_bins(padded_level[0], start, slots.n_slots)
        )
        np.testing.assert_array_equal(sums, _used_bins(padded_level[1], start, slots.n_slots))
        np.testing.assert_array_equal(routed, padded_level[2])


@pytest.mark.parametrize("kernel", sorted(HISTOGRAM_KERNELS))
@pytest.mark.parametrize("quantised", [False, True])
def test_every_kernel_grows_the_same_tree_packed(kernel, quantised):
    # features of 2 to 200 values, some with missing values; integer
    # statistics, so every way of summing them gives the same numbers
    rng = np.random.default_rng(5)
    n_rows, n_value_bins = 3000, 200
    used = np.array([2, 3, 5, 200, 2, 8, 4, 40, 2])
    X = (rng.uniform(size=(n_rows, used.size)) * used).astype(np.float32)
    X[rng.uniform(size=X.shape) < 0.1 * (np.arange(used.size) % 3 == 1)] = np.nan
    edges = _edges(used, n_value_bins, rng)
    edges[:, :-1] = np.where(np.isfinite(edges[:, :-1]), np.arange(n_value_bins - 1) + 0.5, np.inf)
    bins = apply_bins(jnp.asarray(X), jnp.asarray(edges))
    if kernel == "native":
        bins = tile_bins(bins)
    grad = rng.integers(-3, 4, n_rows) + 2 * (X[:, 1] > 1)
    stats = np.stack([grad, rng.integers(1, 3, n_rows)], axis=1).astype(np.float32)
    scale = None
    if quantised:
        stats, scale = stats.astype(np.int32), jnp.ones(2, jnp.float32)
    packed = packed_bins(edges)
    packed = jax.tree.map(jnp.asarray, packed._replace(has_missing=np.isnan(X).any(axis=0)))
    # depth 3: a root and two levels of children (5 compiled 40% slower)
    params = TreeParams(3, 1.0, 0.0, 0.0, histogram_kernel=kernel)
    grow = jax.jit(grow_tree, static_argnames=("params", "axis_name"))
    trees = [
        grow(
            bins, jnp.asarray(stats), jnp.asarray(edges), params, None, stats_scale=scale, packed=p
        )
        for p in (None, packed)
    ]
    (padded, padded_leaves, _), (tree, leaf_of_row, _) = trees
    assert np.all(np.asarray(padded.split_gain)[:3] > 0)  # it splits
    for name in ("feature", "threshold_bin", "missing_left", "split_gain"):
        np.testing.assert_array_equal(getattr(tree, name), getattr(padded, name), err_msg=name)
    np.testing.assert_array_equal(leaf_of_row, padded_leaves)


def test_constant_columns_are_left_out_and_the_trees_are_the_same(monkeypatch):
    from jaxboost.frontends.training import row_binning

    rng = np.random.default_rng(3)
    n = 2000
    X = rng.normal(size=(n, 8)).astype(np.float32)
    X[:, [1, 4]] = 3.0  # constant: no split
    X[:, 6] = np.where(rng.uniform(size=n) < 0.3, np.nan, 1.0)  # constant but missing: splits
    y = (X[:, 0] + 2.0 * np.isnan(X[:, 6]) + rng.normal(size=n)).astype(np.float32)
    Xv, yv = X[:500], y[:500]
    settings = {"n_estimators": 12, "max_depth": 4, "colsample_bytree": 0.6}
    fit = {"eval_set": [(Xv, yv)], "eval_metric": "rmse"}
    without = jb.Booster(**settings).fit(X, y, **fit)
    kept = splittable_columns(without.bin_edges_, X)
    np.testing.assert_array_equal(kept, [0, 2, 3, 5, 6, 7])  # trained without 1 and 4
    monkeypatch.setattr(row_binning, "splittable_columns", lambda edges, features: None)
    every = jb.Booster(**settings).fit(X, y, **fit)
    np.testing.assert_array_equal(without.forest_.feature, every.forest_.feature)
    np.testing.assert_array_equal(without.forest_.threshold_bin, every.forest_.threshold_bin)
    np.testing.assert_array_equal(without.predict_raw(X), every.predict_raw(X))
    assert without.evals_result_ == every.evals_result_
    assert 6 in without.forest_.feature[without.forest_.split_gain > 0]  # the missing split
    np.testing.assert_array_equal(without.bin_edges_, every.bin_edges_)

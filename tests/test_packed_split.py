"""The split search on packed bins chooses what the search on every bin does."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.engine import packed_split
from jaxboost.engine.binning import splittable_columns
from jaxboost.engine.packed_split import find_best_packed_splits, packed_bins
from jaxboost.engine.split import find_best_splits


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


@pytest.mark.parametrize("n_outputs, weight_column", [(1, False), (1, True), (3, False)])
def test_packed_and_full_searches_choose_the_same_splits(n_outputs, weight_column):
    rng = np.random.default_rng(n_outputs + 10 * weight_column)
    n_features, n_value_bins, n_nodes = 40, 31, 8
    used = rng.integers(1, n_value_bins + 1, n_features)
    used[:5] = 1  # constant features: no candidate at all
    packed = packed_bins(_edges(used, n_value_bins, rng))
    assert packed is not None and int(packed.valid.sum()) == used.sum()
    packed = jax.tree.map(jnp.asarray, packed)
    for trial in range(12):
        hist = _histograms(used, n_nodes, n_value_bins, n_outputs, weight_column, rng)
        mask = jnp.asarray(rng.uniform(size=n_features) < 0.7) if trial % 2 else None
        settings = (n_outputs, 1.0 if trial % 3 else 0.0, 1e-3, 0.05 * (trial % 4))
        for cumulative in (False, True):
            given = hist.copy()
            if cumulative:
                given[:, :, :-1] = np.cumsum(given[:, :, :-1], axis=2)
            full = find_best_splits(jnp.asarray(given), *settings, mask, cumulative=cumulative)
            found = find_best_packed_splits(
                jnp.asarray(given), packed, *settings, mask, cumulative=cumulative
            )
            for name, a, b in zip(full._fields, full, found):
                np.testing.assert_array_equal(a, b, err_msg=f"{name}, trial {trial}")


def test_packing_is_skipped_where_features_use_most_bins():
    rng = np.random.default_rng(0)
    assert packed_bins(_edges(np.full(20, 60), 63, rng)) is None
    few = packed_bins(_edges(np.full(20, 6), 63, rng))
    assert few is not None and few.feature.size < 0.6 * 20 * 63


def test_a_fit_on_few_valued_features_is_the_fit_without_packing(monkeypatch):
    rng = np.random.default_rng(1)
    X = np.column_stack(
        [rng.integers(0, k, 3000) for k in (2, 3, 5, 8, 2, 200)] + [np.zeros(3000)]
    ).astype(np.float32)
    y = (X[:, 0] + np.sin(X[:, 3]) + 0.01 * X[:, 5] + rng.normal(size=3000)).astype(np.float32)
    settings = {"n_estimators": 10, "max_depth": 5, "colsample_bytree": 0.8}
    packed = jb.Booster(**settings).fit(X, y)
    assert packed_bins(packed.bin_edges_) is not None
    monkeypatch.setattr(packed_split, "_WORTH_PACKING", 0.0)
    assert packed_bins(packed.bin_edges_) is None
    every_bin = jb.Booster(**settings).fit(X, y)
    np.testing.assert_array_equal(packed.forest_.feature, every_bin.forest_.feature)
    np.testing.assert_array_equal(packed.forest_.threshold_bin, every_bin.forest_.threshold_bin)
    np.testing.assert_array_equal(packed.predict_raw(X), every_bin.predict_raw(X))


def test_constant_columns_are_left_out_and_the_trees_are_the_same(monkeypatch):
    from jaxboost.frontends import booster as booster_module

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
    monkeypatch.setattr(booster_module, "splittable_columns", lambda edges, features: None)
    every = jb.Booster(**settings).fit(X, y, **fit)
    np.testing.assert_array_equal(without.forest_.feature, every.forest_.feature)
    np.testing.assert_array_equal(without.forest_.threshold_bin, every.forest_.threshold_bin)
    np.testing.assert_array_equal(without.predict_raw(X), every.predict_raw(X))
    assert without.evals_result_ == every.evals_result_
    assert 6 in without.forest_.feature[without.forest_.split_gain > 0]  # the missing split
    np.testing.assert_array_equal(without.bin_edges_, every.bin_edges_)

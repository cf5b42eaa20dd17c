"""Tests of ``jaxboost.engine.level_loop``: a tree grown with every level in
one loop equals the tree grown level by level (unrolled), bit for bit, on
every kernel, layout and kind of statistics."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.engine import level_loop
from jaxboost.engine.binning import apply_bins, fit_bin_edges, tile_bins
from jaxboost.engine.categorical import CategoricalSettings, categorical_search
from jaxboost.engine.packed_split import packed_bins
from jaxboost.engine.tree import TreeParams, grow_tree


def _table(seed: int, n_rows: int, n_outputs: int):
    """Four features (codes 0..19 in the second, missing values in two) and
    ``[grad (K), hess (K), count]`` statistics of a signal in all four."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4)).astype(np.float32)
    X[:, 1] = rng.integers(0, 20, n_rows)
    X[rng.random(n_rows) < 0.1, 2] = np.nan
    X[rng.random(n_rows) < 0.05, 1] = np.nan
    effect = rng.normal(size=20)[np.nan_to_num(X[:, 1]).astype(int)]
    signal = effect + np.sin(2 * X[:, 0]) + np.nan_to_num(X[:, 2], nan=1.5) * X[:, 3]
    grad = np.stack([signal * (k + 1) * (-1) ** k for k in range(n_outputs)], axis=1)
    grad = grad + rng.normal(scale=0.3, size=grad.shape)
    hess = rng.uniform(0.5, 1.5, size=(n_rows, n_outputs))
    count = (rng.random((n_rows, 1)) < 0.9).astype(np.float32)
    return X, np.concatenate([grad, hess, count], axis=1).astype(np.float32)


def _grown(unrolled: bool, monkeypatch, bins, stats, edges, **settings):
    """``grow_tree``'s result as numpy arrays, with the levels unrolled
    (the loop's depth limit below every tree) or looped."""
    with monkeypatch.context() as patch:
        if unrolled:
            patch.setattr(level_loop, "MAX_LOOPED_DEPTH", 1)
        # a fresh function each time: jit's cache must not hand back the other way's trace
        grow = jax.jit(functools.partial(grow_tree, axis_name=None, **settings))
        return jax.tree.map(np.asarray, grow(bins, stats, edges))


def _check_same(monkeypatch, bins, stats, edges, **settings):
    looped = _grown(False, monkeypatch, bins, stats, edges, **settings)
    unrolled = _grown(True, monkeypatch, bins, stats, edges, **settings)
    structure, leaf_of_row = looped[0], looped[1]
    assert np.count_nonzero(structure.split_gain) >= 4  # the tree splits below the root
    assert len(np.unique(leaf_of_row)) >= 4
    jax.tree.map(np.testing.assert_array_equal, looped, unrolled)
    return looped


def _binned(X, max_bins: int, native: bool):
    edges = fit_bin_edges(X, max_bins)
    bins = np.asarray(apply_bins(jnp.asarray(X), jnp.asarray(edges)))
    return jnp.asarray(tile_bins(bins) if native else bins), jnp.asarray(edges)


@pytest.mark.parametrize(
    ("kernel", "n_outputs", "max_depth"),
    [("native", 1, 4), ("native", 3, 3), ("reference", 1, 3), ("packed", 2, 3)],
)
def test_the_looped_levels_grow_the_unrolled_tree(monkeypatch, kernel, n_outputs, max_depth):
    X, stats = _table(1, 600, n_outputs)
    bins, edges = _binned(X, 32, kernel == "native")
    columns = (jnp.asarray(stats[:, :n_outputs].T), jnp.asarray(stats[:, -1:].T))
    params = TreeParams(max_depth, 1.0, 0.0, 0.0, kernel, min_child_samples=5.0)
    _check_same(monkeypatch, bins, jnp.asarray(stats), edges, params=params, leaf_columns=columns)


def test_the_looped_levels_grow_the_unrolled_tree_of_quantised_packed_statistics(monkeypatch):
    # integer statistics, and histograms packed in the bins the features use
    X, stats = _table(2, 600, 1)
    X = np.round(np.clip(X, -3, 3) * 4) / 4  # at most 25 values a feature: few bins used
    bins, edges = _binned(X, 64, native=True)
    packed = packed_bins(np.asarray(edges))
    assert packed is not None
    quantised = np.round(stats[:, :2] * 64).astype(np.int32)
    scale = jnp.full(2, 1 / 64, jnp.float32)
    params = TreeParams(4, 1.0, 0.0, 0.0, "native", rows_per_hessian=64.0)
    _check_same(
        monkeypatch,
        bins,
        jnp.asarray(quantised),
        edges,
        params=params,
        stats_scale=scale,
        packed=jax.tree.map(jnp.asarray, packed),
    )


@pytest.mark.parametrize("kernel", ["native"])
def test_the_looped_levels_grow_the_unrolled_tree_with_category_sets(monkeypatch, kernel):
    X, stats = _table(3, 800, 1)
    edges = fit_bin_edges(X, 32)
    edges[1] = np.inf
    edges[1, :20] = np.arange(20) + 0.5  # one bin per category code
    bins = np.asarray(apply_bins(jnp.asarray(X), jnp.asarray(edges)))
    bins = jnp.asarray(tile_bins(bins) if kernel == "native" else bins)
    search = categorical_search(
        CategoricalSettings((1,), (20,)), 4, None, native_order=kernel == "native"
    )
    params = TreeParams(4, 1.0, 0.0, 0.0, kernel)
    looped = _check_same(
        monkeypatch, bins, jnp.asarray(stats), jnp.asarray(edges), params=params, categorical=search
    )
    assert np.any(looped[0].category_left != 0)  # some split is on a set

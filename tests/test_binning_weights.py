"""Tests of ``jaxboost.engine.binning``'s weighted bin edges: against numpy's
quantiles of the rows repeated by their weights, and unchanged by unit weights."""

from __future__ import annotations

import numpy as np
import pytest
from threaded_parts import run_parts

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.engine.binning import fit_bin_edges


def _repeated_quantile_edges(column: np.ndarray, weight: np.ndarray, max_bins: int) -> np.ndarray:
    """The reference: numpy's linear quantiles of ``column``'s present values,
    each repeated ``weight`` (integer) times, as float32, repeats removed,
    padded with ``+inf`` to ``max_bins``."""
    repeated = np.repeat(column, weight.astype(int))
    repeated = repeated[~np.isnan(repeated)]
    levels = np.linspace(0.0, 1.0, max_bins + 1)[1:-1]
    edges = np.unique(np.quantile(repeated.astype(np.float64), levels).astype(np.float32))
    return np.concatenate([edges, np.full(max_bins - edges.size, np.inf, np.float32)])


def _weighted_columns(rng: np.random.Generator, n_rows: int) -> np.ndarray:
    X = np.stack(
        [
            rng.standard_normal(n_rows),
            rng.exponential(size=n_rows),  # skewed
            np.where(rng.random(n_rows) < 0.2, np.nan, rng.uniform(-3, 3, n_rows)),
        ],
        axis=1,
    )
    return X.astype(np.float32)


@pytest.mark.parametrize("max_bins", [4, 32, 255])
def test_integer_weights_give_the_quantiles_of_the_repeated_rows(max_bins):
    rng = np.random.default_rng(max_bins)
    X = _weighted_columns(rng, n_rows=600)
    weight = rng.integers(0, 6, size=600).astype(np.float32)
    weight[0] = 1  # the smallest positive weight is one repeat
    edges = fit_bin_edges(X, max_bins, weight=weight)
    for feature in range(X.shape[1]):
        expected = _repeated_quantile_edges(X[:, feature], weight, max_bins)
        np.testing.assert_array_equal(edges[feature], expected, err_msg=f"feature {feature}")
    # the same as binning the repeated rows themselves
    repeated = fit_bin_edges(X.repeat(weight.astype(int), axis=0), max_bins)
    np.testing.assert_array_equal(edges, repeated)


def test_scaled_weights_give_the_same_edges():
    rng = np.random.default_rng(1)
    X = _weighted_columns(rng, n_rows=500)
    weight = rng.integers(0, 4, size=500).astype(np.float32)
    weight[0] = 1
    edges = fit_bin_edges(X, 32, weight=weight)
    # halves give the same multiplicities as the integers they halve
    np.testing.assert_array_equal(fit_bin_edges(X, 32, weight=weight * 0.5), edges)
    np.testing.assert_array_equal(fit_bin_edges(X, 32, weight=weight * 4.0), edges)


@pytest.mark.parametrize("scale", [1.0, 0.01, 7.0])
def test_equal_weights_give_exactly_the_unweighted_edges(scale):
    rng = np.random.default_rng(2)
    X = _weighted_columns(rng, n_rows=2000)
    X[:, 0] = np.round(X[:, 0] * 4)  # few distinct values: exact edges
    weight = np.full(2000, scale, np.float32)
    for max_bins in (8, 255):
        unweighted = fit_bin_edges(X, max_bins)
        np.testing.assert_array_equal(fit_bin_edges(X, max_bins, weight=weight), unweighted)


def test_rows_of_weight_zero_move_no_edge():
    column = np.array([0.0, 1.0, 2.0, 3.0, 10.0, 11.0], np.float32)
    weight = np.array([1, 0, 1, 1, 0, 2], np.float32)
    edges = fit_bin_edges(column[:, None], 8, weight=weight)
    # midpoints between the values of positive weight only: 0, 2, 3, 11
    np.testing.assert_array_equal(edges[0, :3], [1.0, 2.5, 7.0])
    assert np.all(edges[0, 3:] == np.inf)


def test_many_values_of_weight_zero_do_not_make_a_column_quantile():
    rng = np.random.default_rng(3)
    kept = np.arange(10, dtype=np.float32)
    column = np.concatenate([kept, rng.uniform(20, 30, 300).astype(np.float32)])
    weight = np.concatenate([np.ones(10), np.zeros(300)]).astype(np.float32)
    edges = fit_bin_edges(column[:, None], 16, weight=weight)
    np.testing.assert_array_equal(edges[0, :9], kept[:-1] + 0.5)  # one bin per kept value
    assert np.all(edges[0, 9:] == np.inf)


def _weighted_edges_from_processes(X, weight, parts, sample_size):
    """Each part's rows and weights fitted in its own thread, as processes would."""
    return run_parts(
        parts,
        lambda rows, gather: fit_bin_edges(
            X[rows], 32, sample_size, 5, first_row=rows.start, gather=gather, weight=weight[rows]
        ),
    )


@pytest.mark.parametrize("sample_size", [700, 10_000])
def test_weighted_edges_are_the_same_however_rows_are_split_between_processes(sample_size):
    rng = np.random.default_rng(4)
    X = _weighted_columns(rng, n_rows=3000)
    weight = rng.exponential(size=3000).astype(np.float32)
    weight[rng.random(3000) < 0.3] = 0
    one = fit_bin_edges(X, 32, sample_size, 5, weight=weight)
    assert not np.array_equal(one, fit_bin_edges(X, 32, sample_size, 5))  # weights count
    for parts in ([slice(0, 1000), slice(1000, 3000)], [slice(0, 10), slice(10, 3000)]):
        for edges in _weighted_edges_from_processes(X, weight, parts, sample_size):
            np.testing.assert_array_equal(edges, one)

"""Tests of ``jaxboost.engine.binning``: bin edges and bin indices against numpy references."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from threaded_parts import run_parts

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.engine.binning import (
    TILE_ROWS,
    apply_bins,
    apply_bins_native,
    fit_bin_edges,
    tile_bins,
    trim_unused_bins,
)

# fit_bin_edges does float arithmetic on +-inf (midpoints, np.nanquantile) and takes
# quantiles of all-NaN columns, which numpy reports as RuntimeWarnings; the results
# are still checked here.
pytestmark = [
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:All-NaN slice encountered:RuntimeWarning"),
]


def _bin(X: np.ndarray, max_bins: int, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, np.float32)
    edges = fit_bin_edges(X, max_bins, **kwargs)
    bins = np.asarray(apply_bins(jnp.asarray(X), jnp.asarray(edges)))
    # the native CPU kernel bins exactly as the reference does, stored by tiles
    native = np.asarray(apply_bins_native(jnp.asarray(X), jnp.asarray(edges)))
    np.testing.assert_array_equal(native, np.asarray(tile_bins(bins)))
    return edges, bins


def _check_contract(X: np.ndarray, edges: np.ndarray, bins: np.ndarray, max_bins: int) -> None:
    """``bin <= t`` iff ``x <= edges[f, t]`` for every t; NaN in bin ``max_bins``."""
    n_rows, n_features = X.shape
    assert edges.shape == (n_features, max_bins)
    assert edges.dtype == np.float32
    assert bins.shape == (n_features, n_rows)
    assert bins.dtype == np.uint8
    assert not np.any(np.isnan(edges))
    assert np.all(edges[:, 1:] >= edges[:, :-1]), "edges must be non-decreasing"
    assert np.all(edges[:, -1] == np.inf)
    values = X.T  # (n_features, n_rows)
    missing = np.isnan(values)
    np.testing.assert_array_equal(bins[missing], max_bins)
    assert np.all(bins[~missing] < max_bins)
    for t in range(max_bins):
        goes_left_by_bin = bins <= t
        goes_left_by_value = values <= edges[:, t : t + 1]
        np.testing.assert_array_equal(
            goes_left_by_bin[~missing], goes_left_by_value[~missing], err_msg=f"threshold {t}"
        )


def _rank_among_distinct(column: np.ndarray) -> np.ndarray:
    distinct = np.unique(column[~np.isnan(column)])
    return np.searchsorted(distinct, column)


def test_one_bin_per_distinct_value_in_value_order():
    column = np.array([3.0, 1.0, 2.0, 1.0, 3.0, 5.5, -2.0, 2.0], np.float32)
    other = np.array([0.5, 0.5, -1.0, 7.0, 7.0, 7.0, 0.5, -1.0], np.float32)
    X = np.stack([column, other], axis=1)
    edges, bins = _bin(X, max_bins=8)
    np.testing.assert_array_equal(bins[0], [3, 1, 2, 1, 3, 4, 0, 2])
    np.testing.assert_array_equal(bins[1], [1, 1, 0, 2, 2, 2, 1, 0])
    _check_contract(X, edges, bins, 8)


@pytest.mark.parametrize("max_bins", [2, 16, 255])
def test_exactly_max_bins_distinct_values_stay_exact(max_bins):
    rng = np.random.default_rng(max_bins)
    distinct = np.sort(rng.normal(size=max_bins).astype(np.float32))
    column = rng.permutation(np.repeat(distinct, 3))
    X = column[:, None]
    edges, bins = _bin(X, max_bins)
    np.testing.assert_array_equal(bins[0], _rank_among_distinct(column))
    _check_contract(X, edges, bins, max_bins)


def test_bins_are_exact_for_neighbouring_floats():
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2.0))
    down = np.nextafter(one, np.float32(0.0))
    big = np.float32(3e38)
    column = np.array([up, one, down, one, up, -big, big, 0.0, -0.0], np.float32)
    X = column[:, None]
    edges, bins = _bin(X, max_bins=10)
    # two values share a bin iff they are equal (0.0 == -0.0)
    same_bin = bins[0][:, None] == bins[0][None, :]
    np.testing.assert_array_equal(same_bin, column[:, None] == column[None, :])
    np.testing.assert_array_equal(bins[0], _rank_among_distinct(column))
    _check_contract(X, edges, bins, 10)


def test_missing_values_go_to_bin_max_bins():
    column = np.array([np.nan, 1.0, np.nan, 2.0, 0.0], np.float32)
    X = np.stack([column, np.full(5, np.nan, np.float32)], axis=1)
    edges, bins = _bin(X, max_bins=4)
    np.testing.assert_array_equal(bins[0], [4, 1, 4, 2, 0])
    np.testing.assert_array_equal(bins[1], [4, 4, 4, 4, 4])
    np.testing.assert_array_equal(edges[1], np.inf)
    _check_contract(X, edges, bins, 4)


def _awkward_columns(rng: np.random.Generator, n_rows: int) -> np.ndarray:
    continuous = rng.normal(size=n_rows)
    with_nan = rng.exponential(size=n_rows)
    with_nan[rng.random(n_rows) < 0.2] = np.nan
    duplicates = rng.integers(0, 40, size=n_rows).astype(float)
    heavy_ties = np.where(rng.random(n_rows) < 0.7, 0.0, rng.normal(size=n_rows))
    constant = np.full(n_rows, 4.25)
    all_nan = np.full(n_rows, np.nan)
    with_inf = rng.normal(size=n_rows)
    with_inf[rng.random(n_rows) < 0.1] = np.inf
    with_inf[rng.random(n_rows) < 0.1] = -np.inf
    with_inf[rng.random(n_rows) < 0.1] = np.nan
    few_with_inf = rng.choice([-np.inf, -1.0, 0.0, 2.5, np.inf, np.nan], size=n_rows)
    huge = rng.choice([-3e38, 3e38, 0.0], size=n_rows)
    columns = [
        continuous,
        with_nan,
        duplicates,
        heavy_ties,
        constant,
        all_nan,
        with_inf,
        few_with_inf,
        huge,
    ]
    return np.stack(columns, axis=1).astype(np.float32)


@pytest.mark.parametrize("max_bins", [2, 7, 32, 255])
def test_threshold_contract_on_random_data(max_bins):
    rng = np.random.default_rng(max_bins)
    X = _awkward_columns(rng, n_rows=1000)
    edges, bins = _bin(X, max_bins)
    _check_contract(X, edges, bins, max_bins)


def test_exact_columns_get_rank_bins_among_awkward_columns():
    rng = np.random.default_rng(1)
    X = _awkward_columns(rng, n_rows=600)
    max_bins = 64
    _, bins = _bin(X, max_bins)
    for feature in range(X.shape[1]):
        column = X[:, feature]
        if np.unique(column[~np.isnan(column)]).size <= max_bins:
            ranks = np.where(np.isnan(column), max_bins, _rank_among_distinct(column))
            np.testing.assert_array_equal(bins[feature], ranks, err_msg=f"feature {feature}")


def test_quantile_bins_are_balanced():
    rng = np.random.default_rng(2)
    n_rows, max_bins = 20_000, 16
    X = rng.normal(size=(n_rows, 2)).astype(np.float32)
    X[:, 1] = np.exp(X[:, 1])
    edges, bins = _bin(X, max_bins)
    _check_contract(X, edges, bins, max_bins)
    for feature in range(2):
        counts = np.bincount(bins[feature], minlength=max_bins + 1)
        assert counts[max_bins] == 0
        expected = n_rows / max_bins
        assert np.all(np.abs(counts[:max_bins] - expected) <= 0.1 * expected), counts


def test_sampled_edges_are_sorted_and_keep_the_contract():
    rng = np.random.default_rng(3)
    X = _awkward_columns(rng, n_rows=5000)
    max_bins = 32
    edges, bins = _bin(X, max_bins, sample_size=500, seed=7)
    _check_contract(X, edges, bins, max_bins)
    # the sample, not the full data, fixed the edges: a different seed moves them
    other_edges = fit_bin_edges(X, max_bins, sample_size=500, seed=8)
    assert not np.array_equal(edges[0], other_edges[0])
    # and the same seed reproduces them
    np.testing.assert_array_equal(edges, fit_bin_edges(X, max_bins, sample_size=500, seed=7))


@pytest.mark.parametrize("max_bins", [1, 256])
def test_max_bins_out_of_range_is_rejected(max_bins):
    with pytest.raises(ValueError, match="max_bins"):
        fit_bin_edges(np.zeros((3, 1), np.float32), max_bins)


def _edges_from_processes(X, parts, max_bins, sample_size, seed):
    """Each part's rows fitted in its own thread, as processes would."""
    return run_parts(
        parts,
        lambda rows, gather: fit_bin_edges(
            X[rows], max_bins, sample_size, seed, first_row=rows.start, gather=gather
        ),
    )


def test_edges_are_the_same_however_rows_are_split_between_processes():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3000, 4)).astype(np.float32)
    X[:, 3] = np.round(X[:, 3])  # few distinct values: exact edges
    one = fit_bin_edges(X, 32, sample_size=700, seed=5)
    for parts in (
        [slice(0, 1000), slice(1000, 3000)],
        [slice(0, 10), slice(10, 2500), slice(2500, 3000)],
    ):
        for edges in _edges_from_processes(X, parts, 32, sample_size=700, seed=5):
            np.testing.assert_array_equal(edges, one)
    # a sample, not all rows: another seed draws other rows
    assert not np.array_equal(one, fit_bin_edges(X, 32, sample_size=700, seed=6))


@pytest.mark.parametrize("max_bins", [1, 2, 3, 17, 128, 255])
def test_native_binning_equals_searchsorted_on_edges_and_between_them(max_bins):
    rng = np.random.default_rng(max_bins)
    n_features = 4
    edges = np.sort(rng.normal(size=(n_features, max_bins)).astype(np.float32), axis=1)
    edges[:, -1] = np.inf
    edges[1, max_bins // 2 :] = np.inf  # a feature with fewer bins: +inf padding
    X = rng.normal(size=(500, n_features)).astype(np.float32)
    X[:100] = edges[:, rng.integers(0, max_bins, 100)].T.clip(-10, 10)  # values on edges
    X[rng.random(X.shape) < 0.1] = np.nan
    native = np.asarray(apply_bins_native(jnp.asarray(X), jnp.asarray(edges)))
    expected = np.stack(
        [np.searchsorted(edges[f, :-1], X[:, f], side="left") for f in range(n_features)]
    )
    expected[np.isnan(X.T)] = max_bins
    np.testing.assert_array_equal(native, expected)
    np.testing.assert_array_equal(
        native, np.asarray(apply_bins(jnp.asarray(X), jnp.asarray(edges)))
    )


def _awkward_edges(max_bins: int) -> np.ndarray:
    """``(9, max_bins)`` ascending edges, +inf padded, that take the native
    kernel's every way to a bin: a lookup table with one compare per value
    (evenly spread edges, one finite edge), one with several (a few edges
    crowded into one of 4096 buckets; a span that overflows float32, 6e38,
    which puts every edge in bucket 0), a binary search (edges too crowded
    for any table: an outlier far from the rest, Cauchy draws; a span of
    2e-39, which XLA flushes to 0) and no edge at all."""
    rng = np.random.default_rng(7)
    n = max_bins - 1  # the searched edges
    columns = [
        np.linspace(-2.0, 3.0, n),
        np.sort(rng.normal(size=n)),
        np.sort(np.concatenate([np.linspace(0.0, 1.0, n - 3), 0.5 + 1e-7 * np.arange(1, 4)])),
        np.concatenate([np.linspace(0.0, 1e-6, n - 1), [1e3]]),
        np.array([1.2e-38, 1.3e-38, 1.4e-38]),
        np.array([-3e38, -1.0, 0.0, 3e38]),
        np.array([0.25]),
        np.array([]),
        np.sort(rng.standard_cauchy(size=n)),
    ]
    edges = np.full((len(columns), max_bins), np.inf, np.float32)
    for f, column in enumerate(columns):
        column = np.unique(column.astype(np.float32))[:n]
        edges[f, : column.size] = column
    return edges


def test_native_binning_equals_searchsorted_on_awkward_edges():
    max_bins = 255
    edges = _awkward_edges(max_bins)
    rng = np.random.default_rng(8)
    n_rows = 3000
    X = np.empty((n_rows, edges.shape[0]), np.float32)
    for f in range(edges.shape[0]):
        finite = edges[f, np.isfinite(edges[f])]
        if finite.size == 0:
            finite = np.zeros(1, np.float32)
        on_edge = rng.choice(finite, n_rows)
        # values on the edges, their float32 neighbours, between and beyond them
        X[:, f] = np.select(
            [rng.random(n_rows) < 0.25, rng.random(n_rows) < 0.33, rng.random(n_rows) < 0.5],
            [
                on_edge,
                np.nextafter(on_edge, np.where(rng.random(n_rows) < 0.5, -np.inf, np.inf)),
                rng.uniform(finite.min(), finite.max(), n_rows),
            ],
            rng.choice(np.array([-np.inf, np.inf, -3.4e38, 3.4e38, np.nan], np.float32), n_rows),
        )
    native = np.asarray(apply_bins_native(jnp.asarray(X), jnp.asarray(edges)))
    expected = np.stack(
        [np.searchsorted(edges[f, :-1], X[:, f], side="left") for f in range(edges.shape[0])]
    )
    expected[np.isnan(X.T)] = max_bins
    np.testing.assert_array_equal(native, expected)


@pytest.mark.parametrize(
    "n_rows", [1, TILE_ROWS - 1, TILE_ROWS, TILE_ROWS + 1, 2 * TILE_ROWS + 77, 3 * TILE_ROWS]
)
def test_tiles_of_bins_hold_every_bin_where_the_native_kernels_read_it(n_rows):
    # bin (f, r) at (r // T) * n_features * T + f * pitch + r % T, with pitch T
    # but in a last tile of fewer rows
    n_features = 3
    bins = np.random.default_rng(n_rows).integers(0, 256, (n_features, n_rows)).astype(np.uint8)
    flat = np.asarray(tile_bins(bins)).reshape(-1)
    rows = np.arange(n_rows)
    tile_start = rows // TILE_ROWS * TILE_ROWS
    pitch = np.minimum(TILE_ROWS, n_rows - tile_start)
    for f in range(n_features):
        at = tile_start * n_features + f * pitch + rows - tile_start
        np.testing.assert_array_equal(flat[at], bins[f])


def test_native_binning_writes_tiles_of_rows():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2 * TILE_ROWS + 500, 3)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    edges = fit_bin_edges(X, 63)
    native = np.asarray(apply_bins_native(jnp.asarray(X), jnp.asarray(edges)))
    reference = np.asarray(apply_bins(jnp.asarray(X), jnp.asarray(edges)))
    assert not np.array_equal(native, reference)  # the bytes did move
    np.testing.assert_array_equal(native, np.asarray(tile_bins(reference)))


@pytest.mark.parametrize(
    ("distinct_values", "max_bins", "kept_bins"),
    [
        (2, 255, 3),
        (3, 255, 3),
        (4, 255, 7),
        (17, 255, 31),
        (200, 255, 191),
        (90, 100, 100),
        (60, 100, 63),
        (215, 255, 255),
    ],
)
def test_trimmed_edges_keep_every_value_in_its_bin(distinct_values, max_bins, kept_bins):
    rng = np.random.default_rng(distinct_values)
    X = rng.integers(0, distinct_values, size=(600, 3)).astype(np.float32)
    X[:, 1] = X[:, 1] % 2  # a flag beside the widest column
    X[rng.random(600) < 0.1, 2] = np.nan
    edges, bins = _bin(X, max_bins)
    trimmed = trim_unused_bins(edges)
    # the smallest power of two of bins (the missing bin included; above 64 a
    # multiple of 16; beyond three quarters of max_bins + 1 all) that holds
    # every used bin, so that fits on slightly different data share programs
    assert trimmed.shape == (3, kept_bins)
    trimmed_bins = np.asarray(apply_bins(jnp.asarray(X), jnp.asarray(trimmed)))
    np.testing.assert_array_equal(trimmed_bins[~np.isnan(X.T)], bins[~np.isnan(X.T)])
    _check_contract(X, trimmed, trimmed_bins, kept_bins)

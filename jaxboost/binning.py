"""Quantise float features into uint8 bins, once per fit.

Every feature gets at most ``max_bins`` value bins plus one bin for missing
values (NaN), whose index is ``max_bins``.  Value bin ``b`` holds the values
``x`` with ``edges[b-1] < x <= edges[b]``; so "bin <= t goes left" is the same
test as "x <= edges[t] goes left" on raw values, which is how trees are applied
to raw features.  The last value bin's upper edge is ``+inf``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

DEFAULT_SAMPLE_SIZE = 200_000


def _upper_edges_exact(sorted_sample: np.ndarray, n_edges: int) -> np.ndarray:
    """Midpoints between consecutive distinct values, per column.

    Args:
      sorted_sample: ``(n_rows, n_features)`` float32, sorted per column, NaN last.
    Returns:
      ``(n_edges, n_features)`` float32, ascending, padded with ``+inf``.
    """
    low, high = sorted_sample[:-1], sorted_sample[1:]
    mid = low + (high - low) / np.float32(2)
    # In float32 the midpoint of two neighbouring values can round up to the
    # upper one, which would merge the two bins: keep the lower value instead.
    mid = np.where(mid < high, mid, low)
    starts_new_value = (high != low) & ~np.isnan(high)
    candidates = np.where(starts_new_value, mid, np.inf).astype(np.float32)
    candidates = np.sort(candidates, axis=0)
    return _pad_rows(candidates, n_edges)


def _upper_edges_quantile(sample: np.ndarray, n_edges: int) -> np.ndarray:
    """Quantiles of each column as bin edges, duplicates removed.

    Args:
      sample: ``(n_rows, n_features)`` float32 with NaN for missing.
    Returns:
      ``(n_edges, n_features)`` float32, ascending, padded with ``+inf``.
    """
    levels = np.linspace(0.0, 1.0, n_edges + 2)[1:-1]
    quantiles = np.nanquantile(sample.astype(np.float64), levels, axis=0).astype(np.float32)
    repeated = np.zeros_like(quantiles, dtype=bool)
    repeated[1:] = quantiles[1:] == quantiles[:-1]
    quantiles = np.where(repeated | np.isnan(quantiles), np.inf, quantiles)
    return np.sort(quantiles, axis=0)


def _pad_rows(values: np.ndarray, n_rows: int) -> np.ndarray:
    if values.shape[0] >= n_rows:
        return values[:n_rows]
    padding = np.full((n_rows - values.shape[0], values.shape[1]), np.inf, np.float32)
    return np.concatenate([values, padding], axis=0)


def fit_bin_edges(
    X: np.ndarray, max_bins: int = 255, sample_size: int = DEFAULT_SAMPLE_SIZE, seed: int = 0
) -> np.ndarray:
    """Upper edges of the value bins of every feature.

    A feature with at most ``max_bins`` distinct values gets one bin per value
    (edges at midpoints); otherwise edges are quantiles of a sample of at most
    ``sample_size`` rows.

    Args:
      X: ``(n_rows, n_features)`` float32, NaN for missing.
    Returns:
      ``edges``: ``(n_features, max_bins)`` float32; ``edges[f, b]`` is the upper
      edge of value bin ``b``; unused bins and the last bin have ``+inf``.
    """
    if not 2 <= max_bins <= 255:
        raise ValueError(f"max_bins: expected an integer in [2, 255], got {max_bins}")
    n_rows = X.shape[0]
    if n_rows > sample_size:
        rows = np.random.default_rng(seed).choice(n_rows, sample_size, replace=False)
        X = X[np.sort(rows)]
    sorted_sample = np.sort(X, axis=0)
    is_new_value = np.ones(sorted_sample.shape, dtype=bool)
    is_new_value[1:] = sorted_sample[1:] != sorted_sample[:-1]
    n_distinct = (is_new_value & ~np.isnan(sorted_sample)).sum(axis=0)
    n_edges = max_bins - 1
    exact = _upper_edges_exact(sorted_sample, n_edges)
    quantile = _upper_edges_quantile(X, n_edges)
    edges = np.where(n_distinct <= max_bins, exact, quantile)
    last = np.full((1, X.shape[1]), np.inf, np.float32)
    return np.ascontiguousarray(np.concatenate([edges, last], axis=0).T)


@jax.jit
def apply_bins(X: jax.Array, edges: jax.Array) -> jax.Array:
    """Bin index of every value, feature-major.

    Args:
      X: ``(n_rows, n_features)`` float32, NaN for missing.
      edges: ``(n_features, max_bins)`` float32 from :func:`fit_bin_edges`.
    Returns:
      ``(n_features, n_rows)`` uint8; missing values get bin ``max_bins``.
    """
    max_bins = edges.shape[1]

    def bin_feature(column, feature_edges):
        value_bin = jnp.searchsorted(feature_edges[:-1], column, side="left")
        return jnp.where(jnp.isnan(column), max_bins, value_bin).astype(jnp.uint8)

    return jax.vmap(bin_feature, in_axes=(1, 0))(X, edges)

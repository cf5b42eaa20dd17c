"""Quantise float features into uint8 bins, once per fit.

Every feature gets at most ``max_bins`` value bins plus one bin for missing
values (NaN), whose index is ``max_bins``.  Value bin ``b`` holds the values
``x`` with ``edges[b-1] < x <= edges[b]``; so "bin <= t goes left" is the same
test as "x <= edges[t] goes left" on raw values, which is how trees are applied
to raw features.  The last value bin's upper edge is ``+inf``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kernels.native_library import load

DEFAULT_SAMPLE_SIZE = 200_000
# float32's smallest normal magnitude (about 1.2e-38): XLA on CPU reads a
# smaller (subnormal) number as 0 inside its programs, where the rows are
# binned and the trees applied
SMALLEST_NORMAL = np.finfo(np.float32).tiny
# rows per tile of the native kernels' bins (kBinTileRows in native/bin_tiles.h)
TILE_ROWS = 32768


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
    mid = _off_negative_zero(mid, low <= -SMALLEST_NORMAL)
    starts_new_value = (high != low) & ~np.isnan(high)
    candidates = np.where(starts_new_value, mid, np.inf).astype(np.float32)
    candidates = np.sort(candidates, axis=0)
    return _pad_rows(candidates, n_edges)


def _upper_edges_quantile(sorted_sample: np.ndarray, n_edges: int) -> np.ndarray:
    """Quantiles of each column as bin edges, duplicates removed.

    ``np.nanquantile``'s linear interpolation in float64, read off the sorted
    columns directly (``nanquantile`` sorts every column again).

    Args:
      sorted_sample: ``(n_rows, n_features)`` float32, sorted per column, NaN last.
    Returns:
      ``(n_edges, n_features)`` float32, ascending, padded with ``+inf``.
    """
    n_present = (~np.isnan(sorted_sample)).sum(axis=0)  # (n_features,)
    last = np.maximum(n_present - 1, 0)
    position = last * _levels(n_edges)  # (n_edges, n_features), as numpy's (n - 1) * q
    below = np.floor(position)
    fraction = position - below
    below = np.minimum(below.astype(np.intp), last)
    above = np.minimum(below + 1, last)
    return _interpolated_edges(sorted_sample, below, above, fraction, n_present)


def _upper_edges_weighted_quantile(
    sorted_sample: np.ndarray, sorted_weight: np.ndarray, n_edges: int
) -> np.ndarray:
    """`_upper_edges_quantile` of the sample in which every row is repeated
    ``weight / smallest positive weight`` times.

    Integer weights whose smallest positive one is 1 give exactly the edges
    of the rows repeated that many times; equal weights give the unweighted
    edges; other weights read the repeated rows at fractional multiplicities,
    so that scaling all weights moves no edge.

    Args:
      sorted_sample: ``(n_rows, n_features)`` float32, sorted per column, NaN last.
      sorted_weight: ``(n_rows, n_features)`` the weight of each value, 0 for NaN.
    Returns:
      ``(n_edges, n_features)`` float32, ascending, padded with ``+inf``.
    """
    n_present = (~np.isnan(sorted_sample)).sum(axis=0)  # (n_features,)
    last = np.maximum(n_present - 1, 0)
    positive = sorted_weight[sorted_weight > 0]
    unit = positive.min() if positive.size else 1.0  # (no positive weight: no value, no edge)
    multiplicity = sorted_weight.astype(np.float64) / unit
    ends = np.cumsum(multiplicity, axis=0)  # repeated row ends[r] - 1 is value r's last
    position = np.maximum(ends[-1] - 1, 0) * _levels(n_edges)  # in the repeated rows
    below = np.floor(position)
    fraction = position - below

    def value_of(repeated_row):  # the value whose repeats hold repeated_row
        index = np.stack(
            # one search per column: numpy has no batched searchsorted
            [
                np.searchsorted(ends[:, f], repeated_row[:, f], side="right")
                for f in range(ends.shape[1])
            ],
            axis=1,
        )
        return np.minimum(index, last)

    return _interpolated_edges(
        sorted_sample, value_of(below), value_of(below + 1), fraction, n_present
    )


def _levels(n_edges: int) -> np.ndarray:
    """``(n_edges, 1)`` float64 quantile levels strictly between 0 and 1."""
    return np.linspace(0.0, 1.0, n_edges + 2)[1:-1, None]


def _interpolated_edges(
    sorted_sample: np.ndarray,
    below: np.ndarray,
    above: np.ndarray,
    fraction: np.ndarray,
    n_present: np.ndarray,
) -> np.ndarray:
    """Edges ``fraction`` of the way from the values at rows ``below`` to those
    at ``above`` (``(n_edges, n_features)``), as numpy interpolates in float64;
    repeated edges and those of empty columns become ``+inf``, sorted last."""
    low = np.take_along_axis(sorted_sample, below, axis=0).astype(np.float64)
    high = np.take_along_axis(sorted_sample, above, axis=0).astype(np.float64)
    step = high - low
    quantiles = np.where(fraction >= 0.5, high - step * (1 - fraction), low + step * fraction)
    quantiles = np.where(n_present > 0, quantiles, np.nan).astype(np.float32)
    quantiles = _off_negative_zero(quantiles, True)
    repeated = np.zeros_like(quantiles, dtype=bool)
    repeated[1:] = quantiles[1:] == quantiles[:-1]
    quantiles = np.where(repeated | np.isnan(quantiles), np.inf, quantiles)
    return np.sort(quantiles, axis=0)


def _off_negative_zero(edges: np.ndarray, allowed: np.ndarray | bool) -> np.ndarray:
    """``edges`` with those in ``(-SMALLEST_NORMAL, 0)`` moved to
    ``-SMALLEST_NORMAL`` where ``allowed`` (no value lies between: the lower
    neighbour is a normal number).  XLA on CPU reads such an edge as -0, so
    zeros would share the negative values' bin (``-1.2e-38`` and ``0`` could
    not be split); a subnormal edge in ``[0, SMALLEST_NORMAL)`` reads as 0 and
    splits normal values as it does."""
    subnormal_negative = (edges < 0) & (edges > -SMALLEST_NORMAL) & allowed
    return np.where(subnormal_negative, -SMALLEST_NORMAL, edges).astype(np.float32)


def _pad_rows(values: np.ndarray, n_rows: int) -> np.ndarray:
    if values.shape[0] >= n_rows:
        return values[:n_rows]
    padding = np.full((n_rows - values.shape[0], values.shape[1]), np.inf, np.float32)
    return np.concatenate([values, padding], axis=0)


def _row_hashes(first_row: int, n_rows: int, seed: int) -> np.ndarray:
    """``(n_rows,)`` uint64 hashes (splitmix64) of global row numbers
    ``first_row ..``, fixed by ``seed``."""
    x = np.arange(first_row, first_row + n_rows, dtype=np.uint64)
    x = x + np.uint64(0x9E3779B97F4A7C15 * (int(seed) + 1) % 2**64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def one_process(array: np.ndarray) -> np.ndarray:
    """The ``gather`` of a single process: its own array."""
    return array


def edge_sample(
    X: np.ndarray,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    seed: int = 0,
    first_row: int = 0,
    gather: Callable[[np.ndarray], np.ndarray] = one_process,
    weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The rows the bin edges are computed from: at most ``sample_size`` of them.

    The rows with the ``sample_size`` smallest hashes of their global row
    number, in row order.  The sample depends on the rows and their global
    numbers only, not on how they are split between processes, and no process
    holds more than the sample.

    Args:
      X: ``(n_rows, n_features)`` this process's rows, global numbers
        ``first_row ..``.
      gather: concatenates an array from every process in process order (the
        identity with one process).
      weight: ``(n_rows,)`` float32 weights of the rows, or None.
    Returns:
      ``(sample, sample_weight)``: ``(min(sample_size, all rows), n_features)``
      and the sample's ``(min(sample_size, all rows),)`` weights (None
      without ``weight``), the same on every process.
    """
    hashes = _row_hashes(first_row, X.shape[0], seed)
    smallest = hashes
    if hashes.size > sample_size:
        smallest = np.partition(hashes, sample_size - 1)[:sample_size]
    smallest = gather(smallest)
    if smallest.size < sample_size:  # fewer rows than the sample in all
        picked, picked_weight = X, weight
    else:
        threshold = np.partition(smallest, sample_size - 1)[sample_size - 1]
        # (taken by row numbers: a boolean index is several times slower)
        rows = np.flatnonzero(hashes <= threshold)
        picked = X.take(rows, axis=0)
        picked_weight = None if weight is None else weight.take(rows)
    if weight is None:
        return gather(picked), None
    # one gather for both: the weights ride as a last column
    joined = gather(np.column_stack([picked, picked_weight.astype(picked.dtype)]))
    return joined[:, :-1], joined[:, -1]


def _sorted_columns(
    sample: np.ndarray, sample_weight: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Each column of ``sample`` sorted, NaN last, as a row: ``(n_features,
    n_rows)``; with weights, the rows of weight 0 as NaN (they hold no value)
    and the weight of each sorted value (0 for NaN), else None."""
    if sample_weight is None:
        # numpy sorts contiguous rows ~1.7x faster than strided columns
        return np.sort(np.ascontiguousarray(sample.T), axis=1), None
    by_feature = np.where(sample_weight > 0, sample.T, np.nan).astype(np.float32)
    order = np.argsort(by_feature, axis=1)
    sorted_rows = np.take_along_axis(by_feature, order, axis=1)
    sorted_weight = np.where(np.isnan(sorted_rows), 0.0, sample_weight[order])
    return sorted_rows, sorted_weight


def fit_bin_edges(
    X: np.ndarray,
    max_bins: int = 255,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    seed: int = 0,
    first_row: int = 0,
    gather: Callable[[np.ndarray], np.ndarray] = one_process,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """Upper edges of the value bins of every feature.

    A feature with at most ``max_bins`` distinct values gets one bin per value
    (edges at midpoints); otherwise edges are quantiles.  Both are computed on
    `edge_sample`'s rows (all rows up to ``sample_size``), so with
    several processes (``first_row``, ``gather``: see there) every process
    gets the edges one process holding all rows would.

    With ``weight``, the sample's rows of weight 0 are left out and the
    quantiles are weighted (`_upper_edges_weighted_quantile`): integer
    weights give the edges of the rows repeated that many times (as
    scikit-learn's estimator checks ask).  Equal weights give exactly the
    unweighted edges.

    Args:
      X: ``(n_rows, n_features)`` float32, NaN for missing.
      weight: ``(n_rows,)`` non-negative float32 weights of the rows, or None.
    Returns:
      ``edges``: ``(n_features, max_bins)`` float32; ``edges[f, b]`` is the upper
      edge of value bin ``b``; unused bins and the last bin have ``+inf``.
    """
    if not 2 <= max_bins <= 255:
        raise ValueError(f"max_bins: expected an integer in [2, 255], got {max_bins}")
    X, sample_weight = edge_sample(X, sample_size, seed, first_row, gather, weight)
    if sample_weight is not None and (
        np.all(sample_weight == sample_weight[0]) or not np.any(sample_weight > 0)
    ):
        sample_weight = None  # equal weights: the unweighted edges, sorted faster
    sorted_rows, sorted_weight = _sorted_columns(X, sample_weight)  # (n_features, n_rows)
    sorted_sample = sorted_rows.T
    # distinct values counted along the contiguous rows (2.2x faster)
    is_new_value = np.ones(sorted_rows.shape, dtype=bool)
    np.not_equal(sorted_rows[:, 1:], sorted_rows[:, :-1], out=is_new_value[:, 1:])
    is_new_value &= ~np.isnan(sorted_rows)
    n_distinct = np.count_nonzero(is_new_value, axis=1)
    n_edges = max_bins - 1
    few_values = n_distinct <= max_bins  # (n_features,): one bin per value
    if sorted_weight is None:
        edges = _upper_edges_quantile(sorted_sample, n_edges)
    else:
        edges = _upper_edges_weighted_quantile(sorted_sample, sorted_weight.T, n_edges)
    if few_values.any():
        edges[:, few_values] = _upper_edges_exact(sorted_sample[:, few_values], n_edges)
    last = np.full((1, X.shape[1]), np.inf, np.float32)
    return np.ascontiguousarray(np.concatenate([edges, last], axis=0).T)


def trim_unused_bins(edges: np.ndarray) -> np.ndarray:
    """``edges`` without the value bins no feature uses, so that the
    histograms of data with few distinct values (integers, flags) are small.

    Keeps the first ``k`` value bins, with ``k + 1`` (the missing bin
    included) the smallest power of two up to 64, above it the smallest
    multiple of 16, that holds every feature's used bins, and all
    ``edges.shape[1] + 1`` beyond three quarters of them: fits whose data
    differ a little (the folds of a cross-validation) share the compiled
    programs, and the histograms (every feature padded to ``k + 1`` bins)
    stay within a quarter of the bins used (a third, near the top).  The bins cut off are empty for every feature,
    so a tree grown on the trimmed edges is the one grown on the full ones
    (the same splits, as every empty bin's split equals the last used bin's
    and comes after it); only the missing bin's index moves, to ``k``.

    Args:
      edges: ``(n_features, max_bins)`` float32 from `fit_bin_edges`.
    Returns:
      ``(n_features, k)`` float32 with ``2 <= k <= max_bins``: the same bin
      of every value, and ``+inf`` as the last edge.
    """
    max_bins = edges.shape[1]
    used = int(np.isfinite(edges).sum(axis=1).max(initial=0)) + 1  # value bins
    n_bins = 1 << max(used, 2).bit_length()  # a power of two > used
    if n_bins > 64:  # above 64, a multiple of 16 (at most 1/4 more than used)
        n_bins = -(-(used + 1) // 16) * 16
    if 4 * n_bins > 3 * (max_bins + 1):  # near the top, all: samples of one data set bin alike
        n_bins = max_bins + 1
    k = min(n_bins - 1, max_bins)
    last = np.full((edges.shape[0], 1), np.inf, np.float32)
    return np.ascontiguousarray(np.concatenate([edges[:, : k - 1], last], axis=1))


@jax.jit
def apply_bins(X: jax.Array, edges: jax.Array) -> jax.Array:
    """Bin index of every value, feature-major.

    One feature at a time (``lax.map``), so the search's intermediates are
    a column's, not the whole matrix's (``vmap`` held several
    ``(n_features, n_rows)`` int32 arrays at once: 5x the float matrix).

    Args:
      X: ``(n_rows, n_features)`` float32, NaN for missing.
      edges: ``(n_features, max_bins)`` float32 from `fit_bin_edges`.
    Returns:
      ``(n_features, n_rows)`` uint8; missing values get bin ``max_bins``.
    """
    max_bins = edges.shape[1]

    def bin_feature(feature):
        column = X[:, feature]
        value_bin = jnp.searchsorted(edges[feature, :-1], column, side="left")
        return jnp.where(jnp.isnan(column), max_bins, value_bin).astype(jnp.uint8)

    return lax.map(bin_feature, jnp.arange(X.shape[1]))


@jax.jit
def tile_bins(bins: jax.Array) -> jax.Array:
    """``(n_features, n_rows)`` bins stored as the native kernels read them:
    by tiles of `TILE_ROWS` rows, each tile feature after feature.

    Tile ``t`` holds rows ``[t T, t T + pitch)`` of every feature (``pitch``
    is ``T``, or the rows left in the last tile), so the bin of ``(f, r)`` is
    at flat position ``(r // T) * n_features * T + f * pitch + r % T``; with
    at most ``T`` rows nothing moves.  Column-major, the four features a
    histogram pass reads at once lie ``n_rows`` bytes apart, and at some row
    counts those reads conflict in the memory system (``native/bin_tiles.h``,
    ``benchmarks/README.md``); within a tile they are ``T`` bytes apart.

    Returns:
      ``(n_features, n_rows)`` uint8: the same shape, the bytes reordered.
    """
    n_features, n_rows = bins.shape
    n_full = n_rows // TILE_ROWS
    full = n_full * TILE_ROWS
    tiles = bins[:, :full].reshape(n_features, n_full, TILE_ROWS).transpose(1, 0, 2)
    rest = bins[:, full:]
    return jnp.concatenate([tiles.reshape(-1), rest.reshape(-1)]).reshape(n_features, n_rows)


@jax.jit
def apply_bins_native(X: jax.Array, edges: jax.Array) -> jax.Array:
    """`apply_bins` by the native CPU kernel (``native/binning.cc``, a
    branchless binary search per value), stored as the native kernels read
    it: ``tile_bins(apply_bins(X, edges))``."""
    load()
    result = jax.ShapeDtypeStruct((X.shape[1], X.shape[0]), jnp.uint8)
    return jax.ffi.ffi_call("jaxboost_apply_bins", result, vmap_method="sequential")(X, edges)


def splittable_columns(edges: np.ndarray, features: np.ndarray) -> np.ndarray | None:
    """The columns a tree can split on, ``(n_kept,)`` int32 indices, or None
    when that is all of them: a column of one value bin and no missing value
    (a constant) has no split.  Training without the others grows the same
    trees on fewer histograms.

    Args:
      edges: ``(n_features, k)`` bin edges (`trim_unused_bins`'s).
      features: ``(n_rows, n_features)`` float32, NaN for missing.
    """
    splittable = np.isfinite(edges).any(axis=1) | np.isnan(features).any(axis=0)
    if splittable.all() or not splittable.any():
        return None
    return np.flatnonzero(splittable).astype(np.int32)

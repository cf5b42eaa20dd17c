"""The native CPU kernel of leaf-wise growth's step (``native/leaf_histogram.cc``):
split one leaf's rows, kept as a segment of a permutation of the rows, and
make the two children's histograms (the smaller summed from its rows, the
other its parent's minus it), in time linear in that leaf's rows.

Its plain reference is best-first growth's reference step
(`jaxboost.engine.leaf_rows`: every row's leaf number, routed by
`jaxboost.engine.leaf_rows.goes_right`, summed by
`jaxboost.kernels.histogram_reference.build_histograms`); tests compare the
trees grown on either."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .native_library import load


def native_leaf_split(
    tiled: jax.Array,
    bins: jax.Array,
    row_stats: jax.Array,
    order: jax.Array,
    leaf_hist: jax.Array,
    row_positive: jax.Array | None,
    leaves: jax.Array,
    segment: jax.Array,
    rule: jax.Array,
    category_left: jax.Array | None,
    smaller: bool = True,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Split leaf ``leaves[0]``, whose rows are ``order[start : start +
    count]``, into ``leaves``, and make its children's histograms.

    Args:
      tiled: ``(n_features, n_rows)`` uint8, stored by tiles of rows
        (`jaxboost.engine.binning.tile_bins`): the split feature's bins, read
        by the partition.
      bins: ``(n_rows, n_features)`` uint8, the same row by row (a row's
        bins, read for every feature of a summed row, lie together).
      row_stats: ``(n_rows, n_stats)`` float32.
      order: ``(n_rows,)`` int32, a permutation of the rows in which every
        leaf's rows lie side by side in increasing row order.
      leaf_hist: ``(L, n_features, n_bins, n_stats)`` float32 every leaf's
        histograms (as ``hist`` below).
      row_positive: ``(n_rows,)`` bool, the rows to count in each child, or
        None (every row).
      leaves: ``(2,)`` int32 the split leaf (its left child) and its right
        child; leaves past ``L`` are not kept.
      segment: ``(2,)`` int32 ``[start, count]``, the split leaf's rows in ``order``.
      rule: ``(3,)`` int32 ``[feature, threshold_bin, missing_left]``.
      category_left: ``(8,)`` uint32 the categories going left (a
        categorical rule where any is set), or None.
      smaller: sum the child of fewer rows (the left on a tie) and take the
        other as the parent's histograms minus it; else sum the left child
        and take the right as empty (the root: every row goes left).
    Returns:
      ``(order, leaf_hist, hist, rows)``: ``order`` with the segment split
      stably (the rows going left first), ``leaf_hist`` with the children's
      histograms kept, ``hist (n_features, 2, n_bins, n_stats)`` float32
      the left and right child's sums by (feature, bin), summed in float64
      (running sums over the value bins, the missing bin, the last, as it
      is, as `jaxboost.engine.split.find_best_splits` reads them with
      ``cumulative=True``), and ``rows (4,)`` int32: each child's rows, then
      each child's rows in ``row_positive``.
    """
    load()
    (n_rows, n_features), n_stats, n_bins = bins.shape, row_stats.shape[1], leaf_hist.shape[2]
    results = (
        jax.ShapeDtypeStruct((n_rows,), jnp.int32),
        jax.ShapeDtypeStruct(leaf_hist.shape, jnp.float32),
        jax.ShapeDtypeStruct((n_features, 2, n_bins, n_stats), jnp.float32),
        jax.ShapeDtypeStruct((4,), jnp.int32),
    )
    if row_positive is None:
        row_positive = jnp.zeros((0,), jnp.uint8)
    if category_left is None:
        category_left = jnp.zeros((8,), jnp.uint32)
    call = jax.ffi.ffi_call(
        "jaxboost_leaf_split",
        results,
        vmap_method="sequential",
        input_output_aliases={3: 0, 4: 1},  # the permutation and the table, updated in place
    )
    return call(
        tiled,
        bins,
        row_stats.astype(jnp.float32),
        order.astype(jnp.int32),
        leaf_hist.astype(jnp.float32),
        row_positive.astype(jnp.uint8),
        leaves.astype(jnp.int32),
        segment.astype(jnp.int32),
        rule.astype(jnp.int32),
        category_left.astype(jnp.uint32),
        n_bins=np.int64(n_bins),
        smaller=bool(smaller),
    )


def native_row_major_bins(tiled: jax.Array) -> jax.Array:
    """``(n_rows, n_features)`` uint8 the bins ``tiled`` ``(n_features,
    n_rows)``, stored by tiles of rows (`jaxboost.engine.binning.tile_bins`),
    row by row."""
    load()
    n_features, n_rows = tiled.shape
    result = jax.ShapeDtypeStruct((n_rows, n_features), jnp.uint8)
    return jax.ffi.ffi_call("jaxboost_row_major_bins", result, vmap_method="sequential")(tiled)


def native_leaf_of_row(order: jax.Array, start: jax.Array, count: jax.Array) -> jax.Array:
    """``(n_rows,)`` int32 every row's leaf: ``l`` for the rows
    ``order[start[l] : start[l] + count[l]]`` (rows in no segment: 0)."""
    load()
    result = jax.ShapeDtypeStruct(order.shape, jnp.int32)
    call = jax.ffi.ffi_call("jaxboost_leaf_of_row", result, vmap_method="sequential")
    return call(order.astype(jnp.int32), start.astype(jnp.int32), count.astype(jnp.int32))

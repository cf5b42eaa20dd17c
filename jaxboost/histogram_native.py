"""The native CPU histogram kernel: C++ (``native/histogram.cc``), with subtraction.

It sums a level's histograms in float64 and, below the root, sums only the
smaller child of every parent and takes its sibling as parent minus child,
so a level passes over at most half of the rows (XLA's scatter-add cannot
skip rows: it costs per update, kept or not).  The plain reference it must
equal is :func:`jaxboost.histogram.build_histograms`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .native_library import load


def native_level_histograms(
    bins: jax.Array,
    node_of_row: jax.Array,
    row_stats: jax.Array,
    n_nodes: int,
    n_bins: int,
    parent: jax.Array | None,
) -> tuple[jax.Array, jax.Array]:
    """One level's histograms, from its parents' when ``parent`` is given.

    Args:
      bins: ``(n_features, n_rows)`` uint8 bin of every value.
      node_of_row: ``(n_rows,)`` int32 node within the level.
      row_stats: ``(n_rows, n_stats)`` float32 statistics to sum.
      n_nodes: nodes in the level (``2 * parents`` below the root).
      n_bins: bins per feature, the missing bin included.
      parent: ``(n_features, n_nodes // 2, n_bins, n_stats)`` float64, the
        previous level's second result, or None at the root.
    Returns:
      ``(n_features, n_nodes, n_bins, n_stats)`` float32 running sums over the
      value bins (bin ``b`` holds bins ``0..b`` of what
      :func:`jaxboost.histogram.build_histograms` returns; the missing bin,
      the last, is as it is: see ``find_best_splits(cumulative=True)``), and
      the plain sums in float64, for the next level.
    """
    load()
    shape = (bins.shape[0], n_nodes, n_bins, row_stats.shape[1])
    results = (jax.ShapeDtypeStruct(shape, jnp.float64), jax.ShapeDtypeStruct(shape, jnp.float32))
    # under vmap the kernel runs once per member
    if parent is None:
        call = jax.ffi.ffi_call("jaxboost_histogram_root", results, vmap_method="sequential")
        exact, cumulative = call(
            bins, node_of_row, row_stats, n_nodes=np.int64(n_nodes), n_bins=np.int64(n_bins)
        )
    else:
        call = jax.ffi.ffi_call("jaxboost_histogram_children", results, vmap_method="sequential")
        exact, cumulative = call(bins, node_of_row, row_stats, parent, n_bins=np.int64(n_bins))
    return cumulative, exact

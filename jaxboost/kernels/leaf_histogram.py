"""The native CPU kernel of leaf-wise growth's step: the histograms of the
two leaves a split makes, over their rows only (``native/leaf_histogram.cc``).

Its plain reference is `jaxboost.kernels.histogram_reference.build_histograms`
on the rows of the two leaves, summed over the value bins (tests compare the
trees grown on either)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .native_library import load


def native_leaf_histograms(
    bins: jax.Array, leaf_of_row: jax.Array, row_stats: jax.Array, leaves: jax.Array, n_bins: int
) -> jax.Array:
    """``(n_features, 2, n_bins, n_stats)`` float32 sums of ``row_stats``
    over the rows of ``leaves[0]`` and ``leaves[1]`` by (feature, bin),
    summed in float64: running sums over the value bins (bin ``b`` holds
    bins ``0..b``), the missing bin (the last) as it is, as
    `jaxboost.engine.split.find_best_splits` reads them with
    ``cumulative=True``.

    Args:
      bins: ``(n_features, n_rows)`` uint8, stored by tiles of rows
        (`jaxboost.engine.binning.tile_bins`).
      leaf_of_row: ``(n_rows,)`` int32.
      row_stats: ``(n_rows, n_stats)`` float32.
      leaves: ``(2,)`` int32.
      n_bins: bins per feature, the missing bin included.
    """
    load()
    n_features, n_stats = bins.shape[0], row_stats.shape[1]
    result = jax.ShapeDtypeStruct((n_features, 2, n_bins, n_stats), jnp.float32)
    call = jax.ffi.ffi_call("jaxboost_leaf_histograms", result, vmap_method="sequential")
    return call(
        bins,
        leaf_of_row.astype(jnp.int32),
        row_stats.astype(jnp.float32),
        leaves.astype(jnp.int32),
        n_bins=np.int64(n_bins),
    )

"""The native CPU kernels that route rows one level down (``native/route.cc``).

XLA fuses the split search's last per-node steps into its per-row routing
loop and recomputes them for every row; as a custom call the routing cannot
be fused into.  The plain reference it must equal is
`jaxboost.kernels.histogram_kernels.route_rows`, categorical splits (a
category set per node) included.  The last level's routing also sums the
leaves' values in the same pass (the reference: route, then
`jaxboost.kernels.leaf_sums.leaf_sums_native`).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .interfaces import LevelSplit
from .native_library import load


def split_buffers(split: LevelSplit) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """A level's splits as the native kernels take them: ``(n_nodes,)`` int32
    feature, int32 threshold bin and bool missing-left, and the category
    sets ``(n_nodes, 8)`` uint32 (all zero at numeric nodes), or ``(0,)``
    without categorical features."""
    category_left = split.category_left
    if category_left is None:
        category_left = jnp.zeros(0, jnp.uint32)
    return (
        split.feature.astype(jnp.int32),
        split.threshold_bin.astype(jnp.int32),
        split.missing_left.astype(jnp.bool_),
        category_left.astype(jnp.uint32),
    )


def native_route_rows(bins: jax.Array, node_of_row: jax.Array, split: LevelSplit) -> jax.Array:
    """`jaxboost.kernels.histogram_kernels.route_rows` in C++: the same arguments and result,
    but ``bins (n_features, n_rows)`` uint8 stored by tiles of rows, as
    `jaxboost.engine.binning.tile_bins` gives them; ``node_of_row (n_rows,)``
    int32; the result ``(n_rows,)`` int32 node within the next level."""
    load()
    call = jax.ffi.ffi_call(
        "jaxboost_route_rows",
        jax.ShapeDtypeStruct(node_of_row.shape, jnp.int32),
        vmap_method="sequential",
    )
    return call(bins, node_of_row, *split_buffers(split), missing_bin=np.int64(split.missing_bin))


def native_route_leaf_sums(
    bins: jax.Array,
    node_of_row: jax.Array,
    split: LevelSplit,
    columns: Sequence[jax.Array],
) -> tuple[jax.Array, jax.Array]:
    """`native_route_rows`, and the sums of every leaf's rows of
    ``columns`` (each ``(c_j, n_rows)`` float32) in the same pass.

    Returns:
      ``(n_rows,)`` int32 leaf of every row, and ``(2 n_nodes, V)`` float32
      sums (``V`` the columns' rows, in order; summed in float64 as
      `jaxboost.kernels.leaf_sums.leaf_sums_native` sums them).
    """
    load()
    n_values = sum(column.shape[0] for column in columns)
    call = jax.ffi.ffi_call(
        "jaxboost_route_leaf_sums",
        (
            jax.ShapeDtypeStruct(node_of_row.shape, jnp.int32),
            jax.ShapeDtypeStruct((2 * split.feature.shape[0], n_values), jnp.float32),
        ),
        vmap_method="sequential",
    )
    return call(
        bins,
        node_of_row,
        *split_buffers(split),
        *(column.astype(jnp.float32) for column in columns),
        missing_bin=np.int64(split.missing_bin),
    )

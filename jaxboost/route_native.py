"""The native CPU kernel that routes rows one level down (``native/route.cc``).

XLA fuses the split search's last per-node steps into its per-row routing
loop and recomputes them for every row; as a custom call the routing cannot
be fused into.  The plain reference it must equal is
:func:`jaxboost.tree.route_rows`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .native_library import load
from .split import LevelSplit


def split_buffers(split: LevelSplit) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A level's splits as the native kernels take them: ``(n_nodes,)`` int32
    feature, int32 threshold bin and bool missing-left."""
    return (
        split.feature.astype(jnp.int32),
        split.threshold_bin.astype(jnp.int32),
        split.missing_left.astype(jnp.bool_),
    )


def native_route_rows(bins: jax.Array, node_of_row: jax.Array, split: LevelSplit) -> jax.Array:
    """:func:`jaxboost.tree.route_rows` in C++: the same arguments and result,
    but ``bins (n_features, n_rows)`` uint8 stored by tiles of rows, as
    :func:`jaxboost.binning.tile_bins` gives them; ``node_of_row (n_rows,)``
    int32; the result ``(n_rows,)`` int32 node within the next level."""
    load()
    call = jax.ffi.ffi_call(
        "jaxboost_route_rows",
        jax.ShapeDtypeStruct(node_of_row.shape, jnp.int32),
        vmap_method="sequential",
    )
    return call(bins, node_of_row, *split_buffers(split), missing_bin=np.int64(split.missing_bin))

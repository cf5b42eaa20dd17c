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


def native_route_rows(
    bins: jax.Array,
    node_of_row: jax.Array,
    feature: jax.Array,
    threshold_bin: jax.Array,
    missing_left: jax.Array,
    missing_bin: int,
) -> jax.Array:
    """:func:`jaxboost.tree.route_rows` in C++: the same arguments and result,
    but ``bins (n_features, n_rows)`` uint8 stored by tiles of rows, as
    :func:`jaxboost.binning.tile_bins` gives them; ``node_of_row (n_rows,)``
    int32, ``feature``, ``threshold_bin``, ``missing_left`` ``(n_nodes,)``; the
    result ``(n_rows,)`` int32 node within the next level."""
    load()
    call = jax.ffi.ffi_call(
        "jaxboost_route_rows",
        jax.ShapeDtypeStruct(node_of_row.shape, jnp.int32),
        vmap_method="sequential",
    )
    return call(
        bins,
        node_of_row,
        feature.astype(jnp.int32),
        threshold_bin.astype(jnp.int32),
        missing_left.astype(jnp.bool_),
        missing_bin=np.int64(missing_bin),
    )

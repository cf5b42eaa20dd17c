"""The order of a node's categories in the categorical split search
(`jaxboost.engine.categorical`), by the native CPU kernel
(``native/category_order.cc``).

XLA's CPU sort calls its comparator through a pointer for every comparison:
sorting 12 features' 256 bins at 32 nodes took 42 ms, 30 times the rest of
the split search; its cumsum (reduce_window) runs slowly and took 0.8 s of
compilation per level of a tree.  The plain references they must equal are
``jnp.argsort(keys, axis=-1, stable=True)`` and ``jnp.cumsum`` of the sums
taken in that order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .native_library import load


def native_category_order(keys: jax.Array) -> jax.Array:
    """``jnp.argsort(keys, axis=-1, stable=True)`` in C++: ``keys (..., n)``
    float32 -> ``(..., n)`` int32 (ties in index order, NaN last)."""
    load()
    call = jax.ffi.ffi_call(
        "jaxboost_category_order",
        jax.ShapeDtypeStruct(keys.shape, jnp.int32),
        vmap_method="broadcast_all",
    )
    return call(keys.astype(jnp.float32))


def native_category_sums(
    keys: jax.Array, sums: jax.Array, prefix: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """`native_category_order`, and the bins' sums in that order.

    Args:
      keys: ``(..., n)`` float32.
      sums: ``(..., n, c)`` float32, each bin's sums.
      prefix: ``(...)`` bool: running sums (else each bin's own).
    Returns:
      ``order (..., n)`` int32 and ``left (..., n, c)`` float32: with
      ``ordered = take_along_axis(sums, order[..., None], -2)``,
      ``cumsum(ordered, -2)`` where ``prefix``, else ``ordered``.
    """
    load()
    call = jax.ffi.ffi_call(
        "jaxboost_category_sums",
        (
            jax.ShapeDtypeStruct(keys.shape, jnp.int32),
            jax.ShapeDtypeStruct(sums.shape, jnp.float32),
        ),
        vmap_method="broadcast_all",
    )
    return call(keys.astype(jnp.float32), sums.astype(jnp.float32), prefix.astype(jnp.bool_))

"""Reproducible row and column subsampling, the same whatever the sharding.

Row ``i`` of round ``r`` is kept when a hash of ``(i, r, seed)`` falls below the
sampling fraction; the hash depends on the global row index, not on the shard,
so a model trained on one device or on many draws the same rows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_GOLDEN = 0x9E3779B9


def _mix(x: jax.Array) -> jax.Array:
    """A 32-bit integer hash (the "lowbias32" finaliser); uint32 -> uint32."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def hash_bits(index: jax.Array, round_index: jax.Array, seed: jax.Array, stream: int) -> jax.Array:
    """32 uniform random bits per ``index`` (any shape of integers), fixed by
    ``(round, seed, stream)``; uint32 of ``index``'s shape."""
    key = _mix(jnp.uint32(seed) * jnp.uint32(_GOLDEN) + jnp.uint32(stream))
    key = _mix(key ^ _mix(jnp.uint32(round_index) + jnp.uint32(_GOLDEN)))
    return _mix(index.astype(jnp.uint32) ^ key)


def uniform_hash(
    index: jax.Array, round_index: jax.Array, seed: jax.Array, stream: int
) -> jax.Array:
    """A uniform number in ``[0, 1)`` per ``index``, fixed by ``(round, seed, stream)``.

    Args:
      index: ``(n,)`` integer indices (global row or feature numbers).
    Returns:
      ``(n,)`` float32.
    """
    bits = hash_bits(index, round_index, seed, stream)
    return (bits >> 8).astype(jnp.float32) * jnp.float32(1.0 / (1 << 24))


def row_mask(global_row: jax.Array, round_index, seed, fraction) -> jax.Array:
    """``(n_rows,)`` bool: the rows of this round's subsample (about ``fraction``;
    all rows when ``fraction`` is 1, as the draws are below 1).  ``fraction``
    may be traced."""
    return uniform_hash(global_row, round_index, seed, stream=1) < fraction


def feature_mask(n_features: int, round_index, seed, fraction) -> jax.Array:
    """``(n_features,)`` bool with exactly ``max(1, round(fraction * n_features))``
    features drawn for this round's tree(s); ``fraction`` may be traced."""
    n_kept = jnp.maximum(1, jnp.round(fraction * n_features))
    draw = uniform_hash(jnp.arange(n_features), round_index, seed, stream=2)
    rank = jnp.argsort(jnp.argsort(draw))
    return rank < n_kept

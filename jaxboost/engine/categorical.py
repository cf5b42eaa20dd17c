"""Splits on categorical features: a set of categories goes left.

A categorical feature's value bins are its category codes (bin ``c`` holds
code ``c``; the missing bin holds NaN, and at prediction every code the model
does not know).  A candidate split sends a set of bins left, and its gain is
the numeric split's, with the left child's sums taken over that set:

- a feature of at most ``max_cat_to_onehot`` categories (LightGBM's
  default 4) tries each category alone against the rest;
- otherwise the node's non-empty categories are sorted by ``G / (H +
  cat_smooth)`` (for vector outputs, the first output's: the sum over a
  softmax's outputs is 0, rounding noise) and every prefix of that order is a candidate whose
  smaller side holds at most ``max_cat_threshold`` categories (LightGBM's
  method, Fisher 1958: for one output the best set is a prefix of the order
  by ``G / H``).

Either way the candidates sit where a numeric feature's thresholds sit
(candidate ``t``: the first ``t + 1`` categories of the order, or the
``t``-th alone), with both missing directions, so the search picks among all
features at once.  The chosen set is stored per node as a bitset of the 256
bins, ``(n_nodes, 8)`` uint32 (bit ``b % 32`` of word ``b // 32``), all zero
at numeric nodes.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..kernels.category_order import native_category_sums

BITSET_WORDS = 8  # 256 bins in 32-bit words


class CategoricalSettings(NamedTuple):
    """Static settings of the categorical splits (hashable).

    ``columns``: the data's categorical column indices, ascending;
    ``n_categories``: each one's number of category bins."""

    columns: tuple[int, ...]
    n_categories: tuple[int, ...]
    max_cat_to_onehot: int = 4
    max_cat_threshold: int = 32
    cat_smooth: float = 10.0


class CategoricalSearch(NamedTuple):
    """What the split search needs of the bins' features, ``(n_features,)``
    each, and the static limits."""

    is_categorical: jax.Array  # bool
    one_hot: jax.Array  # bool: one category against the rest
    cat_smooth: float
    max_cat_threshold: int
    # static: at most this many of the features are categorical (None: any)
    n_categorical: int | None = None
    # the categories sorted by the native CPU kernel (XLA's CPU sort is slow)
    native_order: bool = False


def categorical_search(
    settings: CategoricalSettings | None,
    n_columns: int,
    columns: jax.Array | None,
    native_order: bool = False,
) -> CategoricalSearch | None:
    """The `CategoricalSearch` of the bins' features (``columns``: the data
    columns they are, or None: all ``n_columns``); None without categorical
    columns, so that the programs trace nothing of it.  ``native_order``:
    sort by the native CPU kernel (only where the programs run on CPUs that
    built it)."""
    if settings is None or not settings.columns:
        return None
    is_categorical = jnp.zeros(n_columns, bool).at[jnp.asarray(settings.columns)].set(True)
    n_categories = (
        jnp.zeros(n_columns, jnp.int32)
        .at[jnp.asarray(settings.columns)]
        .set(jnp.asarray(settings.n_categories, jnp.int32))
    )
    one_hot = is_categorical & (n_categories <= settings.max_cat_to_onehot)
    if columns is not None:
        is_categorical, one_hot = is_categorical[columns], one_hot[columns]
    return CategoricalSearch(
        is_categorical,
        one_hot,
        settings.cat_smooth,
        settings.max_cat_threshold,
        len(settings.columns),
        native_order,
    )


def candidate_sums(
    plain: jax.Array, n_outputs: int, search: CategoricalSearch
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The left child's sums of every categorical candidate.

    Computed on the categorical features only (the sort and the running
    sums cost per feature); the results' rows of the other features are
    those of some categorical one, for the caller to mask.

    Args:
      plain: ``(F, N, Bv, C)`` the value bins' sums (not running sums),
        ``C = 2 K [+ 1]``.
    Returns:
      ``left`` ``(F, N, Bv, C)``: candidate ``t``'s left sums; ``valid``
      ``(F, N, Bv)`` bool: the candidates allowed; ``order`` ``(F, N, Bv)``
      int32: the bins in sorted order.
    """
    n_features = plain.shape[0]
    n_categorical = min(search.n_categorical or n_features, n_features)
    # (F,) categorical features up to each (a triangular sum: cumsum and
    # nonzero cost XLA ~0.7 s of compilation each per level)
    up_to = jnp.arange(n_features)
    count = jnp.sum(search.is_categorical[None, :] & (up_to[None, :] <= up_to[:, None]), axis=1)
    # (n_categorical,) the categorical features' places (the last where fewer are)
    place = jnp.minimum(
        jnp.sum(count[None, :] <= jnp.arange(n_categorical)[:, None], axis=1), n_features - 1
    )
    sums = plain[place]
    grad, hess = sums[..., 0], sums[..., n_outputs]  # the first output's
    non_empty = sums[..., n_outputs : 2 * n_outputs].sum(axis=-1) > 0
    ratio = grad / (hess + search.cat_smooth)
    # empty bins last, so that prefixes are of the categories present
    key = jnp.where(non_empty, ratio, jnp.inf)
    one_hot = search.one_hot[place][:, None, None, None]
    if search.native_order:
        prefix = jnp.broadcast_to(~one_hot[:, :, 0, 0], key.shape[:2])
        order, left = native_category_sums(key, sums, prefix)
    else:
        order = jnp.argsort(key, axis=2, stable=True).astype(jnp.int32)
        ordered = jnp.take_along_axis(sums, order[..., None], axis=2)
        left = jnp.where(one_hot, ordered, jnp.cumsum(ordered, axis=2))
    n_present = non_empty.sum(axis=2, keepdims=True)  # (n_categorical, N, 1)
    size = jnp.arange(1, sums.shape[2] + 1)[None, None, :]  # categories left
    limit = search.max_cat_threshold
    prefix_ok = (size < n_present) & ((size <= limit) | (n_present - size <= limit))
    valid = jnp.where(one_hot[..., 0], size <= n_present, prefix_ok)
    # every feature's row: its own where categorical
    row = jnp.clip(count - 1, 0, n_categorical - 1)
    return left[row], valid[row], order[row]


def chosen_bitsets(
    order: jax.Array, one_hot: jax.Array, feature: jax.Array, candidate: jax.Array
) -> jax.Array:
    """The bins sent left by each node's chosen candidate, as bitsets.

    Args:
      order: ``(F, N, Bv)`` from `candidate_sums`.
      one_hot: ``(F,)`` bool.
      feature, candidate: ``(N,)`` int32, the chosen local feature and candidate.
    Returns:
      ``(N, BITSET_WORDS)`` uint32.
    """
    n_nodes, n_value_bins = order.shape[1], order.shape[2]
    node = jnp.arange(n_nodes)
    node_order = order[feature, node]  # (N, Bv)
    position = jnp.arange(n_value_bins)[None, :]
    taken = jnp.where(
        one_hot[feature][:, None], position == candidate[:, None], position <= candidate[:, None]
    )
    in_left = jnp.zeros((n_nodes, 32 * BITSET_WORDS), bool)
    in_left = in_left.at[node[:, None], node_order].set(taken)
    return pack_bits(in_left)


def pack_bits(in_left: jax.Array) -> jax.Array:
    """``(N, 256)`` bool as ``(N, 8)`` uint32 bitsets."""
    words = in_left.reshape(in_left.shape[0], BITSET_WORDS, 32).astype(jnp.uint32)
    return jnp.sum(words << jnp.arange(32, dtype=jnp.uint32), axis=-1, dtype=jnp.uint32)


def bin_goes_left(bitset: jax.Array, code: jax.Array) -> jax.Array:
    """Whether ``code`` (int32 in ``[0, 256)``) is in ``bitset`` (``(..., 8)``
    uint32, gathered per row: ``bitset[row]``): bool, shaped as ``code``."""
    word = jnp.take_along_axis(bitset, (code >> 5)[..., None], axis=-1)[..., 0]
    return ((word >> (code & 31).astype(jnp.uint32)) & 1) == 1


def is_categorical_node(bitset: jax.Array) -> jax.Array:
    """``(..., 8)`` uint32 -> bool: a categorical split (a non-empty set)."""
    return jnp.any(bitset != 0, axis=-1)

"""Apply a padded forest to raw float features: a jitted ``vmap`` over trees."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from .tree import Tree

DEFAULT_BATCH_ROWS = 16_384


def tree_depth(forest: Tree) -> int:
    """Depth ``D`` of the trees (their internal-node axis has ``2^D - 1`` entries)."""
    return (forest.feature.shape[-1] + 1).bit_length() - 1


def leaf_of_rows(tree: Tree, X: jax.Array) -> jax.Array:
    """Leaf reached by every row in one tree.

    Walks ``D`` levels with gathers, no branches: ``node = 2 node + 1 + right``.

    Args:
      tree: one tree (no leading axis).
      X: ``(n_rows, n_features)`` float32, NaN for missing.
    Returns:
      ``(n_rows,)`` int32 leaf index in ``[0, 2^D)``.
    """
    depth = tree_depth(tree)
    node = jnp.zeros(X.shape[0], jnp.int32)
    for _ in range(depth):
        value = jnp.take_along_axis(X, tree.feature[node][:, None], axis=1)[:, 0]
        goes_right = jnp.where(
            jnp.isnan(value), ~tree.missing_left[node], value > tree.threshold[node]
        )
        node = 2 * node + 1 + goes_right.astype(jnp.int32)
    return node - (2**depth - 1)


def _forest_sum(forest: Tree, X_batch: jax.Array) -> jax.Array:
    def one_tree(tree: Tree) -> jax.Array:
        return tree.leaf_value[leaf_of_rows(tree, X_batch)]

    return jnp.sum(jax.vmap(one_tree)(forest), axis=0)


@functools.partial(jax.jit, static_argnames="batch_rows")
def predict_forest(
    forest: Tree, init_score: jax.Array, X: jax.Array, batch_rows: int = DEFAULT_BATCH_ROWS
) -> jax.Array:
    """Raw scores ``F0 + sum_t tree_t(x)`` in batches of rows.

    Args:
      forest: trees stacked on a leading ``(n_trees,)`` axis.
      init_score: ``(K,)``.
      X: ``(n_rows, n_features)`` float32.
    Returns:
      ``(n_rows, K)`` float32.
    """
    n_rows, n_features = X.shape
    batch_rows = max(1, min(batch_rows, n_rows))
    n_batches = -(-n_rows // batch_rows)
    padded = jnp.pad(X, ((0, n_batches * batch_rows - n_rows), (0, 0)))
    batches = padded.reshape(n_batches, batch_rows, n_features)
    raw = lax.map(functools.partial(_forest_sum, forest), batches)
    return raw.reshape(-1, raw.shape[-1])[:n_rows] + init_score


@functools.partial(jax.jit, static_argnames="trees_per_round")
def round_increments(forest: Tree, X: jax.Array, trees_per_round: int = 1) -> jax.Array:
    """What each round adds to the raw scores.

    Args:
      forest: ``n_rounds * trees_per_round`` stacked trees, in round order.
      X: ``(n_rows, n_features)`` float32.
    Returns:
      ``(n_rounds, n_rows, K)`` float32.
    """

    def one_tree(tree: Tree) -> jax.Array:
        return tree.leaf_value[leaf_of_rows(tree, X)]

    per_tree = jax.vmap(one_tree)(forest)  # (n_trees, n_rows, K)
    n_trees, n_rows, n_outputs = per_tree.shape
    per_round = per_tree.reshape(n_trees // trees_per_round, trees_per_round, n_rows, n_outputs)
    return per_round.sum(axis=1)

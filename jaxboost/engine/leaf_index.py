"""Each row's leaf in every tree of a forest (scikit-learn's ``apply``,
LightGBM's ``pred_leaf``), jitted as prediction is.

The numbering is the trees' heap layout (`jaxboost.engine.tree`): leaf ``j``
of a depth-``D`` tree is node ``2^D - 1 + j``, ``j`` in ``[0, 2^D)``; read as
``D`` bits from the most significant, ``j`` is the row's path from the root
(0: left, 1: right).  A node that does not split sends every row left, so
only leaves under splits are reached.  So ``tree.leaf_value[j]`` is the
value a row of leaf ``j`` gets, and ``init_score + sum_t
forest.leaf_value[t, leaf_index[:, t]]`` its raw score.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..runtime.padding import bucket_size, pad_rows
from .predict import DEFAULT_BATCH_ROWS, leaf_of_rows
from .tree import Tree


@functools.partial(jax.jit, static_argnames="batch_rows")
def leaf_indices(forest: Tree, X: jax.Array, batch_rows: int = DEFAULT_BATCH_ROWS) -> jax.Array:
    """The leaf each row reaches in each tree, in batches of rows.

    Args:
      forest: trees stacked on a leading ``(n_trees,)`` axis.
      X: ``(n_rows, n_features)`` float32, NaN for missing.
    Returns:
      ``(n_rows, n_trees)`` int32 in ``[0, 2^D)``.
    """
    n_rows, n_features = X.shape
    batch_rows = max(1, min(batch_rows, n_rows))
    n_batches = -(-n_rows // batch_rows)
    padded = jnp.pad(X, ((0, n_batches * batch_rows - n_rows), (0, 0)))
    batches = padded.reshape(n_batches, batch_rows, n_features)

    def batch_leaves(batch: jax.Array) -> jax.Array:  # (batch_rows, n_trees)
        return jax.vmap(leaf_of_rows, in_axes=(0, None), out_axes=1)(forest, batch)

    leaves = lax.map(batch_leaves, batches)
    return leaves.reshape(-1, leaves.shape[-1])[:n_rows]


def leaf_indices_on(forest: Tree, X: np.ndarray, device: jax.Device) -> np.ndarray:
    """`leaf_indices` of ``X (n_rows, n_features)`` on ``device``, rows padded
    to their bucket (nearby sizes reuse the compiled program); ``(n_rows,
    n_trees)`` int32."""
    n_rows = X.shape[0]
    if forest.feature.shape[0] == 0:
        return np.zeros((n_rows, 0), np.int32)
    padded = pad_rows(X, bucket_size(n_rows))
    return np.asarray(leaf_indices(forest, jax.device_put(padded, device)))[:n_rows]

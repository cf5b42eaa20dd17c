"""Joint Newton leaves: one Newton step on all of a tree's leaf values at once.

With the tree's structure fixed, the training loss is a function of its
``L`` leaf values ``v``: ``F(v) = loss(raw + v[leaf_of_row])``.  Its gradient
is the leaves' gradient sums; its hessian ``H[l, l'] = sum over rows i of
leaf l and j of leaf l' of d^2 loss / df_i df_j`` is exact, ``L``
Hessian-vector products away.  For a per-sample loss ``H`` is diagonal (the
per-leaf Newton step); for a group loss (ranking, Cox, any loss comparing
rows) rows of different leaves interact, and this is the exact second-order
step (R's gbm takes it for Cox, by hand).  The step solves
``(H + reg_lambda I) v = -G`` on ``H``'s positive eigenspace, so the
constant null space of ranking and Cox losses (every score of a group moved
alike changes nothing) gives the minimum-norm step.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

# an eigenvalue below this fraction of the largest is 0 (a null direction)
_EIGEN_CUTOFF = 1e-6
# leaves whose Hessian-vector products run at once (memory: this many score vectors)
_LEAVES_AT_ONCE = 8


def leaf_hessian(
    objective: Callable[[jax.Array], jax.Array],
    f: jax.Array,
    in_bag: jax.Array,
    leaf_of_row: jax.Array,
    n_leaves: int,
    axis_name,
) -> jax.Array:
    """``(n_leaves, n_leaves)`` hessian of ``objective`` in the leaf values,
    over all shards.

    Args:
      objective: ``f (n_rows,) -> scalar``, the shard's loss at scores ``f``
        (its rows' groups whole in the shard).
      f: ``(n_rows,)`` the scores it is expanded at.
      in_bag: ``(n_rows,)`` bool, the rows the tree is fitted to (a leaf's
        value moves these rows' scores in the expansion).
      leaf_of_row: ``(n_rows,)`` int32 in ``[0, n_leaves)``.
    """
    gradient = jax.grad(objective)
    leaf_rows = jnp.where(in_bag, leaf_of_row, n_leaves)  # out of bag: no leaf

    def column(leaf: jax.Array) -> jax.Array:
        direction = (leaf_rows == leaf).astype(f.dtype)
        _, product = jax.jvp(gradient, (f,), (direction,))
        return jax.ops.segment_sum(product, leaf_rows, num_segments=n_leaves + 1)[:n_leaves]

    columns = lax.map(column, jnp.arange(n_leaves), batch_size=min(_LEAVES_AT_ONCE, n_leaves))
    hessian = columns.T  # (leaf row, leaf column)
    if axis_name is not None:
        hessian = lax.psum(hessian, axis_name)
    return 0.5 * (hessian + hessian.T)


def solve_joint(hessian: jax.Array, grad_sum: jax.Array, reg_lambda) -> jax.Array:
    """``(n_leaves,)`` the step ``-(H + lambda I)^+ G``, inverted on the
    positive eigenspace (null and negative-curvature directions get no step).

    Args:
      hessian: ``(n_leaves, n_leaves)``; grad_sum: ``(n_leaves,)``.
    """
    n_leaves = hessian.shape[0]
    eigenvalues, eigenvectors = jnp.linalg.eigh(hessian + reg_lambda * jnp.eye(n_leaves))
    cutoff = _EIGEN_CUTOFF * jnp.max(jnp.abs(eigenvalues))
    keep = eigenvalues > jnp.maximum(cutoff, 1e-30)
    inverse = jnp.where(keep, 1.0 / jnp.where(keep, eigenvalues, 1.0), 0.0)
    return -eigenvectors @ (inverse * (eigenvectors.T @ grad_sum))

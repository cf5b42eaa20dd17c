"""Leaf values of a grown tree: the leaves' sums over rows and a Newton step.

All leaves are solved at once; sums over rows are summed over shards with
``psum`` so every shard gets the same values.  A line search per leaf, and
Armijo's safeguard, are `jaxboost.engine.line_search`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..kernels.leaf_sums import LEAF_KERNELS, LeafKernels

# eigenvalues below this fraction of the largest are float32 noise on a singular
# hessian (softmax): inverting them would move the scores along the null space
_EIGEN_CUTOFF = 1e-4


def across_shards(total: jax.Array, axis_name) -> jax.Array:
    """A shard's sums summed over every shard (``axis_name`` None: one shard)."""
    return lax.psum(total, axis_name) if axis_name is not None else total


def sum_rows(
    kernels: LeafKernels, values: jax.Array, leaf_of_row: jax.Array, n_leaves: int, axis_name
) -> jax.Array:
    """``values (n_rows, ...)`` -> ``(n_leaves, ...)`` sums over the rows of every
    leaf and every shard (rows first: `sum_by_leaf` for row-major values)."""
    columns = values.reshape(values.shape[0], -1).T  # (V, n_rows)
    total = sum_by_leaf(kernels, columns, leaf_of_row, n_leaves, axis_name)
    return total.reshape(n_leaves, *values.shape[1:])


def sum_by_leaf(
    kernels: LeafKernels, values: jax.Array, leaf_of_row: jax.Array, n_leaves: int, axis_name
) -> jax.Array:
    """``values (V, n_rows)`` -> ``(n_leaves, V)`` sums over the rows of every leaf
    and every shard."""
    return across_shards(kernels.leaf_sums(values, leaf_of_row, n_leaves), axis_name)


class LeafTotals(NamedTuple):
    """Sums over the rows of every leaf and every shard."""

    grad: jax.Array  # (n_leaves, K) weighted gradients
    hess: jax.Array  # (n_leaves, K) or (n_leaves, K, K) weighted hessians
    weight: jax.Array  # (n_leaves,) sample weights
    # (n_leaves,) weighted losses at the scores of the gradients, where asked for
    loss: jax.Array | None = None
    # (n_leaves,) weighted sums of the scores' magnitude, mean_k |raw_ik|, where
    # asked for (they set the line search's resolution)
    score: jax.Array | None = None


class LeafColumns(NamedTuple):
    """The per-row values whose sums by leaf make `LeafTotals`: each
    entry ``(c, n_rows)`` float32, rows last, as the leaf kernels read them
    (for one output a transpose is free)."""

    columns: tuple[jax.Array, ...]
    # hess.shape[1:]: (K,) diagonal or (K, K) full
    hess_shape: tuple[int, ...]
    # the optional LeafTotals fields the columns after the weight hold
    asked: tuple[str, ...]


def leaf_columns(
    grad: jax.Array,
    hess: jax.Array,
    weight: jax.Array,
    row_loss: jax.Array | None = None,
    raw: jax.Array | None = None,
) -> LeafColumns:
    """The columns of `leaf_totals`: ``[grad, hess, weight]`` and the
    weighted ``row_loss`` and score magnitude where given.

    Args:
      grad: ``(n_rows, K)``; hess: ``(n_rows, K)`` or ``(n_rows, K, K)``;
      weight: ``(n_rows,)``; row_loss: ``(n_rows,)`` unweighted per-row
        losses, or None; raw: ``(n_rows, K)`` raw scores, or None.
    """
    n_rows = grad.shape[0]
    optional = {"loss": row_loss, "score": None if raw is None else score_magnitude(raw)}
    asked = tuple(name for name, value in optional.items() if value is not None)
    columns = [grad.T, hess.reshape(n_rows, -1).T, weight[None, :]]
    columns += [(weight * optional[name])[None, :] for name in asked]
    return LeafColumns(tuple(columns), tuple(hess.shape[1:]), asked)


def totals_from_sums(total: jax.Array, layout: LeafColumns) -> LeafTotals:
    """`LeafTotals` from ``total (n_leaves, V)``, the sums over every
    shard of the ``V`` rows of ``layout.columns``, in their order."""
    n_leaves = total.shape[0]
    n_outputs, hess_width = layout.columns[0].shape[0], layout.columns[1].shape[0]
    weight_column = n_outputs + hess_width
    return LeafTotals(
        grad=total[:, :n_outputs],
        hess=total[:, n_outputs:weight_column].reshape(n_leaves, *layout.hess_shape),
        weight=total[:, weight_column],
        **{name: total[:, weight_column + 1 + i] for i, name in enumerate(layout.asked)},
    )


def leaf_totals(
    kernels: LeafKernels,
    grad: jax.Array,
    hess: jax.Array,
    weight: jax.Array,
    leaf_of_row: jax.Array,
    n_leaves: int,
    axis_name,
    row_loss: jax.Array | None = None,
    raw: jax.Array | None = None,
) -> LeafTotals:
    """Every leaf's gradient, hessian and weight sums (and weighted loss, with
    ``row_loss``; weighted score magnitude, with ``raw``) in one pass over the
    rows and one ``psum`` (with the native kernels: summed in float64).

    Args:
      grad, hess, weight, row_loss, raw: as `leaf_columns`;
      leaf_of_row: ``(n_rows,)`` int32.
    """
    layout = leaf_columns(grad, hess, weight, row_loss, raw)
    # (V, n_rows), row by row: concatenated as columns and transposed, XLA on
    # CPU took over twice as long
    values = jnp.concatenate(layout.columns, axis=0)
    return totals_from_sums(sum_by_leaf(kernels, values, leaf_of_row, n_leaves, axis_name), layout)


def score_magnitude(raw: jax.Array) -> jax.Array:
    """``(n_rows,)`` mean over outputs of ``|raw|`` ``(n_rows, K)``."""
    return jnp.mean(jnp.abs(raw), axis=1)


def solve_newton(grad_sum: jax.Array, hess_sum: jax.Array, reg_lambda: float) -> jax.Array:
    """Newton step ``-(H + lambda I)^+ G`` per leaf.

    Args:
      grad_sum: ``(n_leaves, K)``.
      hess_sum: ``(n_leaves, K)`` diagonal or ``(n_leaves, K, K)`` full hessian sums.
    Returns:
      ``(n_leaves, K)``; 0 where the (regularised) hessian is not positive.  The
      full hessian is inverted on its positive eigenspace, so a singular one
      (softmax: shifting all scores changes nothing) gives the minimum-norm step.
    """
    if hess_sum.ndim == 2:
        denominator = hess_sum + reg_lambda
        safe = jnp.where(denominator > 0, denominator, 1.0)
        return jnp.where(denominator > 0, -grad_sum / safe, 0.0)
    n_outputs = hess_sum.shape[-1]
    regularised = hess_sum + reg_lambda * jnp.eye(n_outputs)
    eigenvalues, eigenvectors = jnp.linalg.eigh(regularised)
    cutoff = _EIGEN_CUTOFF * jnp.max(jnp.abs(eigenvalues), axis=-1, keepdims=True)
    keep = eigenvalues > jnp.maximum(cutoff, 1e-30)
    inverse_values = jnp.where(keep, 1.0 / jnp.where(keep, eigenvalues, 1.0), 0.0)
    projected = jnp.einsum("lkj,lk->lj", eigenvectors, grad_sum)
    return -jnp.einsum("lkj,lj->lk", eigenvectors, inverse_values * projected)


def newton_leaf_values(
    grad: jax.Array,
    hess: jax.Array,
    leaf_of_row: jax.Array,
    n_leaves: int,
    reg_lambda: float,
    axis_name: str | None = None,
    kernels: LeafKernels = LEAF_KERNELS["reference"],
) -> jax.Array:
    """``-G / (H + lambda)`` per leaf (or the full-hessian Newton step).

    Args:
      grad: ``(n_rows, K)`` weighted gradients.
      hess: ``(n_rows, K)`` or ``(n_rows, K, K)`` weighted hessians.
      leaf_of_row: ``(n_rows,)`` int32.
      kernels: how rows are summed by leaf (`jaxboost.kernels.leaf_sums.LEAF_KERNELS`).
    Returns:
      ``(n_leaves, K)`` float32.
    """
    grad_sum = sum_rows(kernels, grad, leaf_of_row, n_leaves, axis_name)
    hess_sum = sum_rows(kernels, hess, leaf_of_row, n_leaves, axis_name)
    return solve_newton(grad_sum, hess_sum, reg_lambda)

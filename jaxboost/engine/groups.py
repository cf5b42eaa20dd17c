"""Group losses inside the programs: a shard's query groups (or strata), their
loss and its per-row derivatives.

A group loss is ``loss(y, f, mask) -> scalar`` on one group's rows padded to
a width ``m`` (see ``losses._declare``).  A shard holds its groups in
buckets of one width each (powers of two), as `GroupBucket` index
tables into the shard's rows; a group never spans two shards.  The loss of
the shard is the sum over its groups; a row's gradient and hessian are those
of that sum, so that every per-row program downstream (histograms, splits,
leaf sums) is the per-sample engine's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..losses.metadata import metadata_of


class GroupBucket(NamedTuple):
    """The groups of one padded width ``m`` in a shard.

    Unused table slots (shards hold different numbers of groups of a width)
    are groups of ``weight`` 0 whose one row is the shard's row 0: their loss
    is computed (so that it stays finite) and dropped.
    """

    index: jax.Array  # (n_groups, m) int32: the shard's row of every slot
    mask: jax.Array  # (n_groups, m) bool: the slot holds a row of the group
    # (n_groups,) float32: the group's weight (1 unless sample weights give
    # another), 0 for an unused slot (and a group of weight 0: skipped alike)
    weight: jax.Array


# groups at least this wide are taken one after another (lax.map), narrower
# ones all at once (vmap): under vmap a loss's lax.cond runs both branches
# (Cox's sort, skipped for rows in time order), and wide groups are few
_MAPPED_WIDTH = 1024


def over_groups(fn: Callable, weight: jax.Array, *tables: jax.Array):
    """``fn`` of one group applied to every group of ``tables`` (leading
    axis: groups), by ``vmap`` for narrow groups, ``lax.map`` for wide ones,
    which skips unused slots (``weight`` 0: their results are zeros)."""
    if tables[0].shape[1] < _MAPPED_WIDTH:
        return jax.vmap(fn)(*tables)
    shapes = jax.eval_shape(fn, *(table[0] for table in tables))

    def one(group):
        slot_weight, *arguments = group
        return lax.cond(
            slot_weight > 0,
            lambda: fn(*arguments),
            lambda: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes),
        )

    return lax.map(one, (weight, *tables))


def bucket_widths(groups: tuple[GroupBucket, ...]) -> tuple[int, ...]:
    """The padded width of every bucket of ``groups``."""
    return tuple(int(bucket.index.shape[1]) for bucket in groups)


def group_values(loss: Callable, y: jax.Array, f: jax.Array, bucket: GroupBucket) -> jax.Array:
    """``(n_groups,)`` every group's loss times its weight, 0 for unused slots.

    Args:
      y: ``(n_rows,)`` or ``(n_rows, k)`` the shard's targets.
      f: ``(n_rows,)`` the shard's raw scores.
    """
    values = over_groups(loss, bucket.weight, y[bucket.index], f[bucket.index], bucket.mask)
    return jnp.where(bucket.weight > 0, bucket.weight * values, 0.0)


def loss_sum(loss: Callable, y: jax.Array, raw: jax.Array, groups: tuple[GroupBucket, ...]):
    """The shard's loss, a weighted sum over its groups (a scalar); ``raw (n_rows, 1)``."""
    f = raw[:, 0]
    return sum(jnp.sum(group_values(loss, y, f, bucket)) for bucket in groups)


def group_count(groups: tuple[GroupBucket, ...]) -> jax.Array:
    """The summed weight of the groups the shard holds (a float32 scalar)."""
    return sum(jnp.sum(bucket.weight) for bucket in groups)


def mean_group_loss(loss, y, raw, groups, axis_name) -> jax.Array:
    """The loss per group over all shards, groups weighted (a scalar)."""
    sums = jnp.stack([loss_sum(loss, y, raw, groups), group_count(groups)])
    if axis_name is not None:
        sums = lax.psum(sums, axis_name)
    return sums[0] / sums[1]


def one_group_derivatives(loss: Callable, y, f, mask) -> tuple[jax.Array, jax.Array]:
    """``(grad (m,), hess (m,))`` of one group's loss in its scores: the
    loss's declared ``row_derivatives`` where it has them, else ``jax.grad``
    and the hessian's diagonal by ``m`` Hessian-vector products (the
    diagonal needs one per row: O(m) evaluations of the loss's gradient)."""
    closed_form = metadata_of(loss).row_derivatives
    if closed_form is not None:
        return closed_form(y, f, mask)
    grad_fn = jax.grad(lambda scores: loss(y, scores, mask))
    eye = jnp.eye(f.shape[0], dtype=f.dtype)
    grad, columns = jax.vmap(lambda e: jax.jvp(grad_fn, (f,), (e,)))(eye)
    return grad[0], jnp.diagonal(columns)


def group_grad_hess(
    loss: Callable, y: jax.Array, raw: jax.Array, groups: tuple[GroupBucket, ...]
) -> tuple[jax.Array, jax.Array]:
    """Every row's gradient and hessian diagonal of the shard's group loss.

    Args:
      y: ``(n_rows,)`` or ``(n_rows, k)`` targets; raw: ``(n_rows, 1)`` scores.
    Returns:
      ``grad (n_rows, 1)`` and ``hess (n_rows, 1)``, 0 on rows in no group
      (padding).
    """
    f = raw[:, 0]
    grad = jnp.zeros_like(f)
    hess = jnp.zeros_like(f)
    for bucket in groups:
        group_grad, group_hess = over_groups(
            lambda yg, fg, mg: one_group_derivatives(loss, yg, fg, mg),
            bucket.weight,
            y[bucket.index],
            f[bucket.index],
            bucket.mask,
        )
        keep = bucket.mask & (bucket.weight[:, None] > 0)
        grad = grad.at[bucket.index].add(jnp.where(keep, group_grad, 0.0))
        hess = hess.at[bucket.index].add(jnp.where(keep, group_hess, 0.0))
    return grad[:, None], hess[:, None]

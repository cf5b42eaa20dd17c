"""The losses a round reports and judges: the mean training loss, rows whose
derivatives are not finite, and the in-bag losses before and after a round
that catch a rising loss; called inside the training programs
(`jaxboost.engine.training`, `jaxboost.engine.round_programs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax

from .derivatives import Loss, sample_loss
from .groups import mean_group_loss
from .sampling import row_mask

if TYPE_CHECKING:  # (the training module imports this one)
    from .training import ShardData, StaticSettings


def count_not_finite(grad: jax.Array, hess: jax.Array, weight: jax.Array, axis_name) -> jax.Array:
    """The rows of positive ``weight`` (before any subsample), over all
    shards, whose ``grad (n, K)`` or ``hess (n, K[, K])`` is NaN or infinite
    (an int32 scalar)."""
    finite = jnp.all(jnp.isfinite(grad), axis=1)
    finite &= jnp.all(jnp.isfinite(hess.reshape(hess.shape[0], -1)), axis=1)
    count = jnp.sum((~finite & (weight > 0)).astype(jnp.int32))
    return lax.psum(count, axis_name) if axis_name is not None else count


def mean_loss(loss: Loss, y: jax.Array, weight: jax.Array, raw: jax.Array, axis_name) -> jax.Array:
    """Weighted mean training loss over all shards (a scalar); ``y``,
    ``weight`` and ``raw`` are a shard's rows."""
    sums = jnp.stack([jnp.sum(weight * sample_loss(loss, y, raw)), jnp.sum(weight)])
    if axis_name is not None:
        sums = lax.psum(sums, axis_name)
    return sums[0] / sums[1]


def training_loss(cfg: StaticSettings, data: ShardData, raw: jax.Array, axis_name) -> jax.Array:
    """The training loss over all shards (a scalar): the weighted mean over
    rows of a per-sample loss, the mean over groups of a group loss."""
    if cfg.grouped:
        return mean_group_loss(cfg.loss, data.y, raw, data.groups, axis_name)
    return mean_loss(cfg.loss, data.y, data.weight, raw, axis_name)


def judges_rises_in_bag(cfg: StaticSettings) -> bool:
    """Whether ``cfg``'s programs report the in-bag losses of `in_bag_losses`:
    a subsampled fit's rounds, whose trees move the scores of out-of-bag rows
    too, so that the full training loss may rise where no Newton step
    overshot; a rise is then judged on the rows the round was fitted to.
    Not with Armijo's safeguard on (no rise is looked for) nor for a group
    loss (its rises are not watched)."""
    return cfg.subsampled and not cfg.armijo and not cfg.grouped


def in_bag_losses(
    row_loss: jax.Array, weight: jax.Array, row_id: jax.Array, draw, axis_name
) -> jax.Array:
    """``(2,)``: the weighted mean of the rows' losses ``row_loss (n_rows,)``
    (at the scores a round starts from), over all shards, on the in-bag rows
    of round ``round_index`` (`row_mask`, the draw of `grow_round`) and of
    the round before: the round's own rows' loss before it and the previous
    round's rows' loss after that round.

    Args:
      weight, row_id: a shard's, as in `ShardData`.
      draw: ``(round_index, seed, fraction)``, scalars.
    """
    round_index, seed, fraction = draw
    weights = jnp.stack(
        [
            jnp.where(row_mask(row_id, index, seed, fraction), weight, 0.0)
            for index in (round_index, round_index - 1)
        ]
    )
    sums = jnp.concatenate([jnp.sum(weights * row_loss, axis=1), jnp.sum(weights, axis=1)])
    if axis_name is not None:
        sums = lax.psum(sums, axis_name)
    return sums[:2] / sums[2:]


def in_bag_pairs(at_start: jax.Array, at_end: jax.Array, n_active) -> jax.Array:
    """``(n_rounds, 2)``: each round's in-bag loss before and after it, from
    `in_bag_losses` ``(n_rounds, 2)`` at each round's start and ``(2,)`` at
    the scores after round ``n_active - 1`` (the rounds from ``n_active`` on
    hold what follows the last active one; their slots are discarded)."""
    after = jnp.concatenate([at_start[1:, 1], at_end[1:]])
    after = jnp.where(jnp.arange(at_start.shape[0]) == n_active - 1, at_end[1], after)
    return jnp.stack([at_start[:, 0], after], axis=1)


def mean_loss_at(loss: Loss, y, weight, score: jax.Array, axis_name) -> jax.Array:
    """`mean_loss` with every row's raw score ``score (K,)``."""
    raw = jnp.broadcast_to(score, (weight.shape[0], score.shape[0]))
    return mean_loss(loss, y, weight, raw, axis_name)

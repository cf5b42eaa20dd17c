"""Monotone and interaction constraints on the splits of a tree.

Monotone constraints (one output): every node carries bounds ``[lower,
upper]`` on the values of the leaves below it (``-inf, +inf`` at the root).
A candidate split's children take the Newton values ``-G / (H + lambda)``
clipped to the node's bounds; on a feature constrained increasing (+1) a
split whose left child's value exceeds its right child's is not taken (-1:
the reverse), and its children's bounds meet at the midpoint ``m`` of their
two values: the left child's leaves stay at most ``m``, the right child's at
least ``m`` (LightGBM's "basic" method).  Bounds only narrow down the tree,
so every leaf reached by a smaller value of the feature is at most ``m`` and
every leaf reached by a larger one at least ``m``: the leaf values, whatever
computes them (Newton, line search, joint Newton), clipped to their leaf's
bounds make each tree, and so the forest, monotone along the feature
exactly (float rounding is monotone too).  The gains are those of the
clipped values, ``-(2 G w + (H + lambda) w^2)``.

Interaction constraints: sets of features; the features on any root-to-leaf
path lie within one set.  Every node carries which sets still hold every
feature on its path (all at the root); it may split on the features of
those sets (a feature in no set is never used, as in LightGBM).

The bounds are in the split search's units (gradients times the search's
unit, `jaxboost.engine.split.gradient_unit`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class TreeConstraints(NamedTuple):
    """The constraints of a tree's features (the bins' features), either None."""

    monotone: jax.Array | None  # (n_features,) int32: -1, 0 or +1
    interaction: jax.Array | None  # (n_sets, n_features) bool: the sets' members
    # monotone_constraints_method="intermediate": bounds from the nodes that
    # touch (jaxboost.engine.neighbours) instead of nested midpoints
    intermediate: bool = False


def tree_constraints(
    monotone: tuple[int, ...],
    interaction: tuple[tuple[int, ...], ...],
    n_columns: int,
    columns: jax.Array | None,
    method: str = "basic",
) -> TreeConstraints | None:
    """The `TreeConstraints` of the bins' features (``columns`` ``(n_features,)``
    of the data's ``n_columns``, or None: all) from the settings: ``monotone``
    per data column (``()``: none) and ``interaction``, sets of data column
    indices (``()``: none); None without either, so that the programs trace
    no constraint.  ``method``: ``"basic"`` or ``"intermediate"`` (the
    monotone bounds' method)."""
    if not monotone and not interaction:
        return None
    direction = member = None
    if monotone:
        direction = jnp.asarray(monotone, jnp.int32)
    if interaction:
        table = np.zeros((len(interaction), n_columns), bool)
        for row, members in enumerate(interaction):
            table[row, list(members)] = True
        member = jnp.asarray(table)
    if columns is not None:  # the columns trained on
        direction = None if direction is None else direction[columns]
        member = None if member is None else member[:, columns]
    return TreeConstraints(direction, member, method == "intermediate" and direction is not None)


class NodeBounds(NamedTuple):
    """What the nodes of one level may do; every field ``(n_nodes, ...)`` or None."""

    lower: jax.Array | None  # (n_nodes,) float32 least leaf value below the node
    upper: jax.Array | None  # (n_nodes,) float32 greatest leaf value below the node
    sets: jax.Array | None  # (n_nodes, n_sets) bool: sets holding every path feature


def root_bounds(constraints: TreeConstraints) -> NodeBounds:
    """The root's `NodeBounds`: no bound, every set open."""
    lower = upper = sets = None
    if constraints.monotone is not None:
        lower = jnp.full((1,), -jnp.inf, jnp.float32)
        upper = jnp.full((1,), jnp.inf, jnp.float32)
    if constraints.interaction is not None:
        sets = jnp.ones((1, constraints.interaction.shape[0]), bool)
    return NodeBounds(lower, upper, sets)


def node_feature_mask(constraints: TreeConstraints, bounds: NodeBounds) -> jax.Array | None:
    """``(n_features, n_nodes)`` bool, the features each node may split on
    under the interaction constraints (None without them)."""
    if bounds.sets is None:
        return None
    member = constraints.interaction  # (S, F)
    return jnp.any(bounds.sets[None, :, :] & member.T[:, None, :], axis=2)


def children_bounds(
    constraints: TreeConstraints,
    bounds: NodeBounds,
    feature: jax.Array,
    do_split: jax.Array,
    middle: jax.Array | None,
) -> NodeBounds:
    """The next level's `NodeBounds` ``(2 n_nodes, ...)`` from this level's
    choices (``feature``, ``do_split``, ``middle``: ``(n_nodes,)``); a node
    that does not split passes its own to both children."""

    def interleave(left, right):  # children of node k are 2k and 2k + 1
        return jnp.stack([left, right], axis=1).reshape((-1,) + left.shape[1:])

    lower = upper = sets = None
    if bounds.lower is not None:
        direction = jnp.where(do_split, constraints.monotone[feature], 0)
        low, high = bounds.lower, bounds.upper
        raised, lowered = jnp.maximum(low, middle), jnp.minimum(high, middle)
        lower = interleave(
            jnp.where(direction < 0, raised, low), jnp.where(direction > 0, raised, low)
        )
        upper = interleave(
            jnp.where(direction > 0, lowered, high), jnp.where(direction < 0, lowered, high)
        )
    if bounds.sets is not None:
        used = constraints.interaction[:, feature].T  # (N, S)
        narrowed = jnp.where(do_split[:, None], bounds.sets & used, bounds.sets)
        sets = interleave(narrowed, narrowed)
    return NodeBounds(lower, upper, sets)


def bounded_value(stats: jax.Array, reg_lambda, lower, upper) -> tuple[jax.Array, jax.Array]:
    """``(w, score)``: the Newton value ``-G / (H + lambda)`` of one output's
    ``stats`` ``(..., [grad, hess, ...])`` clipped to ``[lower, upper]``
    (broadcast to ``(...)``), and the loss decrease it scores, ``-(2 G w +
    (H + lambda) w^2)`` (``G^2 / (H + lambda)`` unclipped); 0 both where
    ``H + lambda <= 0``."""
    grad_sum, denominator = stats[..., 0], stats[..., 1] + reg_lambda
    positive = denominator > 0
    value = jnp.where(positive, -grad_sum / jnp.where(positive, denominator, 1.0), 0.0)
    value = jnp.clip(value, lower, upper)
    score = jnp.where(positive, -(2.0 * grad_sum * value + denominator * value * value), 0.0)
    return value, score


def bounded_split_gain(
    left: jax.Array,
    total: jax.Array,
    child_ok,
    reg_lambda,
    direction: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(gain, middle, values)`` of splitting ``total`` into ``left`` and the
    rest (one output's stats ``(..., C)``) under a node's bounds: half the
    clipped values' score gained, ``-inf`` where a child fails ``child_ok``
    or the children's order breaks ``direction`` (``+1``: left <= right); the
    midpoint of the children's values, and the values ``(..., 2)`` (left, right).  ``direction``, ``lower`` and
    ``upper`` broadcast to ``(...)``."""
    right = total - left
    left_value, left_score = bounded_value(left, reg_lambda, lower, upper)
    right_value, right_score = bounded_value(right, reg_lambda, lower, upper)
    _, parent_score = bounded_value(total, reg_lambda, lower, upper)
    gain = 0.5 * (left_score + right_score - parent_score)
    in_order = direction * (left_value - right_value) <= 0
    ok = child_ok(left) & child_ok(right) & in_order
    values = jnp.stack([left_value, right_value], axis=-1)
    return jnp.where(ok, gain, -jnp.inf), 0.5 * (left_value + right_value), values


def clip_to_bounds(values: jax.Array, lower: jax.Array, upper: jax.Array) -> jax.Array:
    """Leaf ``values`` ``(2^D, 1)`` clipped to their leaves' bounds ``(2^D,)``
    (NaN stays NaN)."""
    return jnp.clip(values, lower[:, None], upper[:, None])

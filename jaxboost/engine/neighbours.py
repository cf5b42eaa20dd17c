"""Monotone bounds from neighbouring regions (``monotone_constraints_method="intermediate"``).

Every node of a level owns a box of the binned feature space: per feature
an interval of value bins ``[low, high]`` and whether the missing bin is in
it.  Two nodes are *neighbours along* a constrained feature ``f`` when their
intervals on ``f`` touch (one's ``high + 1`` is the other's ``low``) and
their boxes overlap on every other feature (a bin in common, or both hold
the missing bin): exactly the pairs of nodes holding two points that differ
only in ``f``, by one bin.  The one on the side where predictions must be
smaller (``+1``: the lower bins) is *below* the other.  Along any line
parallel to ``f`` the nodes met are consecutive neighbours, so a tree is
monotone along ``f`` exactly when every below pair has ``v_below <=
v_above`` (by transitivity).

A grown tree's leaves (`ordered_leaves`): from their final values (Newton,
line search or joint Newton, learning rate included), put in order where
they are not (`ordered_values`), each below pair gets the cut ``c`` midway
between its two values; a leaf's ``upper`` is the least cut above it, its
``lower`` the greatest cut below it, and its value is clipped to them.  Then
``upper_i <= c_ij <= lower_j`` for every below pair ``(i, j)``: clipped, the
values are in order, exactly (float rounding is monotone), and values
already in order lie within their bounds and are kept.  Only leaves that
touch bound each other: a region split away from its old neighbour is free
of it, where the "basic" method's nested midpoints
(`jaxboost.engine.constraints`) keep every leaf below a split on its side.

The split search (`search_bounds`): each node's children lie between the
values of the nodes that touch it, as LightGBM's intermediate method bounds
a leaf by its neighbours' outputs.  Two neighbours split in the same level
may then cross; the next level's values are put in order before they bound
anything, and the leaves' final bounds above make the tree exact whatever
the search did.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .categorical import is_categorical_node


class NodeBoxes(NamedTuple):
    """The boxes and values of one level's nodes."""

    low: jax.Array  # (n_nodes, n_features) int32 least value bin
    high: jax.Array  # (n_nodes, n_features) int32 greatest value bin (< low: none)
    missing: jax.Array  # (n_nodes, n_features) bool: holds the missing bin
    value: jax.Array  # (n_nodes,) float32 the node's value in the split search's units


def root_boxes(n_features: int, max_bins: int) -> NodeBoxes:
    """The root's `NodeBoxes`: every bin and the missing bin; value 0."""
    return NodeBoxes(
        jnp.zeros((1, n_features), jnp.int32),
        jnp.full((1, n_features), max_bins - 1, jnp.int32),
        jnp.ones((1, n_features), bool),
        jnp.zeros((1,), jnp.float32),
    )


def children_boxes(
    boxes: NodeBoxes,
    feature: jax.Array,
    threshold_bin: jax.Array,
    missing_left: jax.Array,
    child_values: jax.Array,
    do_split: jax.Array,
    whole: jax.Array | None = None,
) -> NodeBoxes:
    """The next level's `NodeBoxes` ``(2 n_nodes, ...)`` (children of node
    ``k``: ``2k`` and ``2k + 1``) from this level's splits, each ``(n_nodes,)``
    (``child_values`` ``(n_nodes, 2)``: the split's left and right values).
    A node that does not split sends every row left: its left child is the
    node, its right child empty.  ``whole`` ``(n_nodes,)`` bool marks
    categorical splits, whose children keep the node's box (a superset:
    more pairs count as neighbours, which only tightens bounds)."""
    n_nodes, n_features = boxes.low.shape
    bin_cut = jnp.where(do_split, threshold_bin, jnp.iinfo(jnp.int32).max - 1)
    goes_left = jnp.where(do_split, missing_left, True)
    is_feature = jnp.arange(n_features)[None, :] == feature[:, None]  # (N, F)
    if whole is not None:
        is_feature = is_feature & ~whole[:, None]
    left_high = jnp.where(is_feature, jnp.minimum(boxes.high, bin_cut[:, None]), boxes.high)
    right_low = jnp.where(is_feature, jnp.maximum(boxes.low, bin_cut[:, None] + 1), boxes.low)
    left_missing = boxes.missing & (~is_feature | goes_left[:, None])
    right_missing = boxes.missing & (~is_feature | ~goes_left[:, None])
    right_missing = right_missing & do_split[:, None]
    right_low = jnp.where(do_split[:, None], right_low, boxes.high + 1)  # empty

    def interleave(left, right):
        return jnp.stack([left, right], axis=1).reshape((2 * n_nodes,) + left.shape[1:])

    own = jnp.stack([boxes.value, boxes.value], axis=1)
    values = jnp.where(do_split[:, None], child_values, own)
    return NodeBoxes(
        interleave(boxes.low, right_low),
        interleave(left_high, boxes.high),
        interleave(left_missing, right_missing),
        values.reshape(-1),
    )


# below_pairs compares all features at once up to this many (node, node,
# feature) entries (XLA fuses it: at depth 8 about 2x faster than the scan)
PAIRWISE_LIMIT = 2**24


def _below_at_once(direction: jax.Array, boxes: NodeBoxes, valued: jax.Array) -> jax.Array:
    """`below_pairs` (before dropping empty nodes) on ``(N, N, F)`` arrays."""
    low, high, missing = boxes.low, boxes.high, boxes.missing
    overlap = jnp.maximum(low[:, None], low[None, :]) <= jnp.minimum(high[:, None], high[None, :])
    overlap = overlap | (missing[:, None] & missing[None, :])  # (N, N, F)
    n_apart = jnp.sum(~overlap, axis=2)
    others_overlap = (n_apart[:, :, None] - (~overlap).astype(n_apart.dtype)) == 0
    touches = (high[:, None, :] + 1) == low[None, :, :]  # i's bins just before j's
    touches = touches & valued[:, None, :] & valued[None, :, :]
    rising = touches & (direction > 0)[None, None, :]
    falling = jnp.swapaxes(touches, 0, 1) & (direction < 0)[None, None, :]
    return jnp.any((rising | falling) & others_overlap, axis=2)


def below_pairs(direction: jax.Array, boxes: NodeBoxes) -> jax.Array:
    """``(n_nodes, n_nodes)`` bool: ``[i, j]`` where node ``i`` is below node
    ``j`` along some constrained feature (``direction`` ``(n_features,)``
    int32); empty nodes are in no pair.  Past `PAIRWISE_LIMIT` entries of
    ``(n_nodes, n_nodes, n_features)`` the features are scanned one at a
    time, so memory stays ``(n_nodes, n_nodes)`` (deep trees)."""
    valued = boxes.low <= boxes.high  # (N, F): some value bin (else at most the missing bin)
    nonempty = jnp.all(valued | boxes.missing, axis=1)
    if boxes.low.size * boxes.low.shape[0] <= PAIRWISE_LIMIT:
        below = _below_at_once(direction, boxes, valued)
        return below & nonempty[:, None] & nonempty[None, :]
    by_feature = (boxes.low.T, boxes.high.T, boxes.missing.T, valued.T)  # (F, N) each

    def apart(low, high, missing):  # (N, N): no point in common on this feature
        meet = jnp.maximum(low[:, None], low[None, :]) <= jnp.minimum(high[:, None], high[None, :])
        return ~(meet | (missing[:, None] & missing[None, :]))

    def count_apart(n_apart, feature):
        low, high, missing, _ = feature
        return n_apart + apart(low, high, missing).astype(jnp.int32), None

    n_nodes = boxes.low.shape[0]
    n_apart, _ = lax.scan(count_apart, jnp.zeros((n_nodes, n_nodes), jnp.int32), by_feature)

    def add_pairs(below, feature):
        (low, high, missing, has_values), sign = feature
        others_overlap = n_apart - apart(low, high, missing).astype(jnp.int32) == 0
        touches = (high[:, None] + 1 == low[None, :]) & has_values[:, None] & has_values[None, :]
        pairs = jnp.where(sign > 0, touches, jnp.where(sign < 0, touches.T, False))
        return below | (pairs & others_overlap), None

    start = jnp.zeros((n_nodes, n_nodes), bool)
    below, _ = lax.scan(add_pairs, start, (by_feature, direction))
    return below & nonempty[:, None] & nonempty[None, :]


def ordered_values(below: jax.Array, value: jax.Array) -> jax.Array:
    """``value`` ``(n_nodes,)`` put in order over the pairs ``below``: the
    mean of the least values raised over every chain below and the greatest
    lowered over every chain above; ``value`` itself where already in order."""

    def propagate(combine, pull):
        def step(state):
            current, _, count = state
            updated = combine(current, pull(current))
            return updated, jnp.any(updated != current), count + 1

        def unsettled(state):  # a chain is at most n_nodes long (NaN: stop there)
            return state[1] & (state[2] <= value.shape[0])

        start = (value, jnp.array(True), jnp.array(0, jnp.int32))
        return lax.while_loop(unsettled, step, start)[0]

    raised = propagate(
        jnp.maximum, lambda v: jnp.max(jnp.where(below, v[:, None], -jnp.inf), axis=0)
    )
    lowered = propagate(
        jnp.minimum, lambda v: jnp.min(jnp.where(below, v[None, :], jnp.inf), axis=1)
    )
    return 0.5 * (raised + lowered)


def neighbour_bounds(direction: jax.Array, boxes: NodeBoxes) -> tuple[jax.Array, jax.Array]:
    """``(lower, upper)``, each ``(n_nodes,)`` float32: the bounds of the
    nodes' values from the cuts midway between each below pair's (ordered)
    values; ``-inf`` / ``+inf`` where a node has no neighbour on that side."""
    below = below_pairs(direction, boxes)
    value = ordered_values(below, boxes.value)
    cut = 0.5 * (value[:, None] + value[None, :])  # (i below, j above)
    upper = jnp.min(jnp.where(below, cut, jnp.inf), axis=1)
    lower = jnp.max(jnp.where(below, cut, -jnp.inf), axis=0)
    return lower, upper


def search_bounds(direction: jax.Array, boxes: NodeBoxes) -> tuple[jax.Array, jax.Array]:
    """``(lower, upper)``, each ``(n_nodes,)`` float32, for a level's split
    search: each node's children between the greatest (ordered) value of a
    node below it and the least of a node above it, as LightGBM's
    intermediate method bounds a leaf by its neighbours' outputs."""
    below = below_pairs(direction, boxes)
    value = ordered_values(below, boxes.value)
    upper = jnp.min(jnp.where(below, value[None, :], jnp.inf), axis=1)
    lower = jnp.max(jnp.where(below, value[:, None], -jnp.inf), axis=0)
    return lower, upper


def ordered_leaves(direction: jax.Array, boxes: NodeBoxes, leaf_value: jax.Array) -> jax.Array:
    """A tree's leaf values ``(2^D, 1)`` (whatever computed them) clipped to
    the bounds of `neighbour_bounds` from those values themselves
    (``boxes``: the leaves' `NodeBoxes`, values ignored): unchanged where
    already in order, and monotone along every constrained feature, exactly."""
    lower, upper = neighbour_bounds(direction, boxes._replace(value=leaf_value[:, 0]))
    return jnp.clip(leaf_value, lower[:, None], upper[:, None])


def leaf_boxes(structure, n_features: int, max_bins: int) -> NodeBoxes:
    """The `NodeBoxes` of a tree's ``2^D`` leaves (value 0) from its internal
    nodes (``structure``: a `jaxboost.engine.tree.TreeStructure` or `Tree`,
    ``split_gain > 0`` where a node splits): a leaf no row reaches has an
    empty box."""
    boxes = root_boxes(n_features, max_bins)
    n_levels = (structure.feature.shape[0] + 1).bit_length() - 1
    for depth in range(n_levels):
        level = slice(2**depth - 1, 2 ** (depth + 1) - 1)
        whole = None
        if structure.category_left is not None:
            whole = is_categorical_node(structure.category_left[level])
        boxes = children_boxes(
            boxes,
            structure.feature[level],
            structure.threshold_bin[level],
            structure.missing_left[level],
            jnp.zeros((2**depth, 2), jnp.float32),
            structure.split_gain[level] > 0,
            whole,
        )
    return boxes


def ordered_forest(forest, direction: jax.Array, max_bins: int) -> jax.Array:
    """A forest's leaf values ``(n_trees, 2^D, 1)`` put in order tree by tree
    (`ordered_leaves`; ``forest``: a `jaxboost.engine.tree.Tree` with a
    leading ``n_trees`` axis, features numbered as ``direction``
    ``(n_features,)``)."""

    def one_tree(tree):
        boxes = leaf_boxes(tree, direction.shape[0], max_bins)
        return ordered_leaves(direction, boxes, tree.leaf_value)

    return jax.vmap(one_tree)(forest)

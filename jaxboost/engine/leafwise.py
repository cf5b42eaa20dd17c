"""Leaf-wise (best-first) growth as a pruning of the depth-wise tree.

A node's best split depends only on its own rows, so the complete depth-``D``
tree grown level by level (`jaxboost.engine.tree.grow_tree`) holds every
node's best split and gain.  Best-first growth with ``max_leaves`` leaves,
bounded by depth ``D`` (LightGBM's ``num_leaves`` growth), is then exactly:
start from the root; ``max_leaves - 1`` times, split the open node of largest
positive gain (ties: lowest heap index) and open its children.  The nodes not
chosen become non-splits (every row left), so the tree keeps the heap layout
of `jaxboost.engine.tree.Tree` and everything that reads it.

A row's leaf in the pruned tree is a function of its leaf in the complete
one: its path stops at its first unchosen node ``n`` and then goes left, to
the leftmost leaf under ``n``.  So rows are never routed again: their
leaves, and the leaves' sums, are mapped through a table of ``2^D`` entries.

Only nodes that can still be kept need histograms and a split search: a
level's live nodes (`live_slots`, at most ``2 max_leaves``: `live_capacity`) are
summed and searched, the others do not split.  So a level costs memory and
search for ``2 max_leaves`` nodes at most, whatever its depth.  Best-first
growth itself runs on a table of the nodes held so far (`HeldNodes`, the
levels one after another, with explicit child indices: `best_first_table`),
not on the ``2^D - 1`` heap nodes; the heap arrays of the tree (its ``2^D``
leaves) and the row-to-leaf map remain.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..kernels.interfaces import LiveSlots
from .constraints import NodeBounds

# grow_policy="lossguide"'s max_leaves when not given: LightGBM's num_leaves
DEFAULT_MAX_LEAVES = 31


def best_first_splits(gain: jax.Array, max_leaves: int) -> jax.Array:
    """``(2^D - 1,)`` bool: the internal nodes best-first growth splits.

    Args:
      gain: ``(2^D - 1,)`` float32 split gains of the complete tree's nodes in
        heap order, > 0 exactly where a node would split.
      max_leaves: at most this many leaves (``max_leaves - 1`` splits).
    """
    n_internal = gain.shape[0]
    # each node's score while open (its gain where positive), -inf while not
    # open or never to split; children past the internal nodes (leaves) are
    # padding that never splits.  One array carries both, so an iteration
    # is an argmax and three small updates.
    never = jnp.full(n_internal + 1, -jnp.inf, gain.dtype)
    splits = jnp.concatenate([jnp.where(gain > 0, gain, -jnp.inf), never])
    score = jnp.full(splits.shape, -jnp.inf, gain.dtype).at[0].set(splits[0])
    chosen = jnp.zeros(splits.shape, bool)

    def split_best(_, state):
        score, chosen = state
        best = jnp.argmax(score)  # first of ties
        take = score[best] > -jnp.inf
        child = 2 * best + 1
        opened = jnp.where(take, lax.dynamic_slice(splits, (child,), (2,)), -jnp.inf)
        kept = lax.dynamic_slice(score, (child,), (2,))
        score = lax.dynamic_update_slice(score, jnp.maximum(kept, opened), (child,))
        score = score.at[best].set(-jnp.inf)
        return score, chosen.at[best].set(chosen[best] | take)

    _, chosen = lax.fori_loop(0, max_leaves - 1, split_best, (score, chosen))
    return chosen[:n_internal]


class HeldNodes(NamedTuple):
    """A level's nodes whose histograms were built and searched, in heap
    order: every node of the level, or its live ones (`live_slots`)."""

    node: jax.Array  # (n_held,) int32 node within the level (any on the padding)
    valid: jax.Array  # (n_held,) bool, False on the padding
    gain: jax.Array  # (n_held,) float32 split gain, > 0 where the node would split
    # (2^depth,) int32 each node's place in node, n_held where it has none;
    # None: every node of the level, in order
    held_of_node: jax.Array | None = None
    # (n_held, 2) int32 the place of each node's children among the next
    # level's held nodes (`with_children`), or None: found when needed
    child_place: jax.Array | None = None


def _child_place(level: HeldNodes, below: HeldNodes) -> jax.Array:
    """``(n_held, 2)`` int32 place of each of ``level``'s nodes' children
    among ``below``'s held nodes, ``below``'s count where not held."""
    child = 2 * level.node[:, None] + jnp.arange(2, dtype=jnp.int32)
    return child if below.held_of_node is None else below.held_of_node[child]


def with_children(level: HeldNodes, below: HeldNodes) -> HeldNodes:
    """``level`` with its children's places in the next level, ``below``
    (found once, not at every later level's `best_first_table`)."""
    return level._replace(child_place=_child_place(level, below))


def _children(held: list[HeldNodes], n_entries: int) -> jax.Array:
    """``(n_entries, 2)`` int32 table index of each entry's children (the
    levels' held nodes one after another), ``n_entries`` where a child was
    not held or lies below the last level."""
    children, first = [], 0
    for depth, level in enumerate(held):
        below_first = first + level.node.shape[0]
        if depth + 1 == len(held):
            index = jnp.full((level.node.shape[0], 2), n_entries, jnp.int32)
        else:
            below = held[depth + 1]
            place = level.child_place
            if place is None:
                place = _child_place(level, below)
            index = jnp.where(place < below.node.shape[0], below_first + place, n_entries)
        children.append(jnp.where(level.valid[:, None], index, n_entries))
        first = below_first
    return jnp.concatenate(children)


def best_first_table(held: list[HeldNodes], max_leaves: int) -> list[jax.Array]:
    """Of each level's held nodes, ``(n_held,)`` bool: those best-first
    growth of ``max_leaves`` leaves splits (`best_first_splits`, on a
    table of the held nodes with explicit children instead of the heap: a
    node never held never splits).  The table lists the levels in order and
    each level's nodes in heap order, so its first of tied gains is the
    heap's."""
    gain = jnp.concatenate([jnp.where(level.valid, level.gain, 0.0) for level in held])
    n_entries = gain.shape[0]
    children = _children(held, n_entries)
    # one entry past the table: where absent children point, never open
    splits = jnp.concatenate([jnp.where(gain > 0, gain, -jnp.inf), jnp.full(1, -jnp.inf)])
    score = jnp.full(splits.shape, -jnp.inf, gain.dtype).at[0].set(splits[0])
    chosen = jnp.zeros(splits.shape, bool)

    def split_best(_, state):
        score, chosen = state
        best = jnp.argmax(score)  # first of ties
        take = score[best] > -jnp.inf
        child = children[best]
        opened = jnp.where(take, splits[child], -jnp.inf)
        score = score.at[child].max(opened)
        score = score.at[best].set(-jnp.inf).at[n_entries].set(-jnp.inf)
        return score, chosen.at[best].set(chosen[best] | take)

    _, chosen = lax.fori_loop(0, max_leaves - 1, split_best, (score, chosen))
    parts, first = [], 0
    for level in held:
        parts.append(chosen[first : first + level.node.shape[0]] & level.valid)
        first += level.node.shape[0]
    return parts


def heap_chosen(held: list[HeldNodes], chosen: list[jax.Array]) -> jax.Array:
    """``(2^D - 1,)`` bool in heap order from `best_first_table`'s choice."""
    parts = []
    for depth, (level, kept) in enumerate(zip(held, chosen)):
        target = jnp.where(level.valid, level.node, 2**depth)  # padding: dropped
        parts.append(jnp.zeros(2**depth, bool).at[target].set(kept, mode="drop"))
    return jnp.concatenate(parts)


def stop_depth(chosen: jax.Array, max_depth: int) -> jax.Array:
    """``(2^D,)`` int32: for each leaf of the complete tree, the depth of the
    first unchosen node on its path (``max_depth`` where all are chosen)."""
    leaf = jnp.arange(2**max_depth, dtype=jnp.int32)
    depth = jnp.full(leaf.shape, max_depth, jnp.int32)
    for level in reversed(range(max_depth)):  # the shallowest unchosen wins
        node = 2**level - 1 + (leaf >> (max_depth - level))
        depth = jnp.where(chosen[node], depth, level)
    return depth


def pruned_leaf(stop: jax.Array, max_depth: int) -> jax.Array:
    """``(2^D,)`` int32: each complete-tree leaf's leaf in the pruned tree, the
    leftmost leaf under the node where its path stops (``stop``: `stop_depth`)."""
    leaf = jnp.arange(2**max_depth, dtype=jnp.int32)
    shift = max_depth - stop
    return (leaf >> shift) << shift


def stop_node(stop: jax.Array, max_depth: int) -> jax.Array:
    """``(2^D,)`` int32: the heap index (of all ``2^(D+1) - 1`` nodes) of the
    node where each complete-tree leaf's path stops."""
    leaf = jnp.arange(2**max_depth, dtype=jnp.int32)
    return (1 << stop) - 1 + (leaf >> (max_depth - stop))


def prune_structure(structure, chosen: jax.Array, max_bins: int):
    """The tree's internal nodes (a `jaxboost.engine.tree.TreeStructure`) with
    every unchosen node made a non-split: feature 0, every row left."""
    feature = jnp.where(chosen, structure.feature, 0)
    category_left = structure.category_left
    if category_left is not None:
        category_left = jnp.where(chosen[:, None], category_left, 0)
    return structure._replace(
        feature=feature,
        threshold=jnp.where(chosen, structure.threshold, jnp.inf),
        threshold_bin=jnp.where(chosen, structure.threshold_bin, max_bins - 1),
        missing_left=jnp.where(chosen, structure.missing_left, True),
        split_gain=jnp.where(chosen, structure.split_gain, 0.0),
        category_left=category_left,
    )


def pruned_sums(sums: jax.Array | None, leaf_map: jax.Array) -> jax.Array | None:
    """Per-leaf sums ``(2^D, V)`` of the complete tree summed into the pruned
    tree's leaves (``leaf_map``: `pruned_leaf`); None stays None."""
    if sums is None:
        return None
    return jax.ops.segment_sum(sums, leaf_map, num_segments=sums.shape[0])


def pruned_bounds(node_bounds: NodeBounds, stop: jax.Array, max_depth: int) -> NodeBounds:
    """The pruned tree's leaf bounds ``(2^D,)`` from the bounds of every node
    of the complete tree (``node_bounds``, ``(2^(D+1) - 1,)`` in heap order):
    a pruned leaf's are those of the node where its paths stop.  Leaves that
    no path reaches keep bounds too; they hold no rows."""
    node = stop_node(stop, max_depth)
    return NodeBounds(*(None if part is None else part[node] for part in node_bounds))


def best_first_tree(
    structure,
    leaf_of_row: jax.Array,
    sums: jax.Array | None,
    node_bounds: NodeBounds | None,
    max_leaves: int,
    max_bins: int,
    chosen: jax.Array | None = None,
):
    """``(structure, leaf_of_row, sums, leaf bounds)`` of the best-first tree
    of at most ``max_leaves`` leaves within the complete one.

    Args:
      structure: the complete tree's internal nodes (``2^D - 1`` each).
      leaf_of_row: ``(n_rows,)`` int32 leaves of the complete tree.
      sums: ``(2^D, V)`` float32 per-leaf sums, or None.
      node_bounds: `NodeBounds` of all ``2^(D+1) - 1`` nodes, or None.
      max_leaves: the budget of leaves.
      max_bins: value bins per feature (a non-split's ``threshold_bin`` is the last).
      chosen: ``(2^D - 1,)`` bool, the nodes best-first growth splits
        (`heap_chosen`), or None: found from the structure's gains.
    """
    max_depth = (structure.feature.shape[0] + 1).bit_length() - 1
    if chosen is None:
        chosen = best_first_splits(structure.split_gain, max_leaves)
    stop = stop_depth(chosen, max_depth)
    leaf_map = pruned_leaf(stop, max_depth)
    bounds = None if node_bounds is None else pruned_bounds(node_bounds, stop, max_depth)
    return (
        prune_structure(structure, chosen, max_bins),
        leaf_map[leaf_of_row],
        pruned_sums(sums, leaf_map),
        bounds,
    )


# Summing and searching only the nodes that can still be kept.  Best-first
# growth on the levels above depth d alone pops its nodes in an order of which
# the full growth's pops above d are a prefix (the nodes open above d, and so
# the next one popped there, depend only on the pops above d; deeper pops only
# spend the budget).  So a node at depth d can be kept only if its parent is
# kept by best-first growth on the levels above: those are the live nodes,
# siblings in pairs, one pair per kept node at depth d - 1 (`live_capacity`
# bounds their number), and only their histograms are built and searched.  A kept parent was itself live one level up (its own parent
# is kept by growth on fewer levels, which spends no budget below it), so
# its histograms are there to subtract from.


def kept_at_depth(depth: int, max_leaves: int) -> int:
    """The most nodes at ``depth`` that best-first growth of ``max_leaves``
    leaves can split: ``k`` split nodes there have at least ``ceil(k / 2^j)``
    split ancestors at ``depth - j`` (a node has at most ``2^j`` descendants
    that deep), and the growth splits ``max_leaves - 1`` nodes at most."""
    budget = max_leaves - 1
    kept = 0
    while kept < 2**depth:
        more = kept + 1
        ancestors = sum(-(-more // 2**j) for j in range(1, depth + 1))
        if more + ancestors > budget:
            break
        kept = more
    return kept


def live_capacity(depth: int, max_leaves: int) -> int:
    """The most nodes at ``depth`` that best-first growth of ``max_leaves``
    leaves can keep open: the children of the nodes it can split one level
    up (`kept_at_depth`), in pairs of siblings (at least one pair below the
    root, for a fixed shape)."""
    return min(2**depth, max(2, 2 * kept_at_depth(depth - 1, max_leaves)))


def live_slots(
    held_above: list[HeldNodes], depth: int, max_leaves: int
) -> tuple[LiveSlots, jax.Array, jax.Array]:
    """The level's live nodes from the held nodes of the levels above.

    Args:
      held_above: the `HeldNodes` of levels ``0 .. depth - 1``.
      depth: the level (>= 1); ``live_capacity(depth, max_leaves) < 2^depth``.
      max_leaves: the budget of leaves.
    Returns:
      ``(live, index, valid)``: the `jaxboost.kernels.interfaces.LiveSlots`
      of the ``live_capacity`` slots (pairs of siblings whose parent
      best-first growth keeps on the levels above, in order), each slot's
      node within the level ``(live_capacity,)`` int32 (the last node on the
      padding) and ``valid`` ``(live_capacity,)`` bool, False on the padding.
    """
    parent_kept = best_first_table(held_above, max_leaves)[-1]  # the level above's
    n_pairs = live_capacity(depth, max_leaves) // 2
    # a kept parent's slot in the level above's histograms is its place there
    (parent_slot,) = jnp.nonzero(parent_kept, size=n_pairs, fill_value=-1)
    parent_slot = parent_slot.astype(jnp.int32)
    held = parent_slot >= 0
    parent = jnp.where(held, held_above[-1].node[jnp.maximum(parent_slot, 0)], -1)
    live = LiveSlots(parent, jnp.maximum(parent_slot, 0))
    index = (2 * parent[:, None] + jnp.arange(2, dtype=jnp.int32)).reshape(-1)
    valid = jnp.repeat(held, 2)
    return live, jnp.where(valid, index, 2**depth - 1), valid


def spread_choice(choice, index: jax.Array, valid: jax.Array, n_nodes: int):
    """A `jaxboost.engine.split.SplitChoice` of the live nodes ``index``
    spread to the level's ``n_nodes``: the others do not split (every field
    0 or False there)."""
    target = jnp.where(valid, index, n_nodes)  # padding: dropped

    def spread(values):
        if values is None:
            return None
        whole = jnp.zeros((n_nodes,) + values.shape[1:], values.dtype)
        return whole.at[target].set(values, mode="drop")

    return type(choice)(*(spread(values) for values in choice))

"""A forest as a table of nodes with explicit children, and its leaves' paths.

TreeSHAP (`jaxboost.engine.shap`) reads trees through this view only:
`node_table` is the one function that knows how a `Tree` lays out its
nodes (heap order today); everything after it works on child indices.

In the table, node ``i`` of tree ``t`` is a leaf where ``left[t, i] < 0``,
else a split: a row goes right where its value of ``feature`` is above
``threshold``, or its code is outside ``category_left`` at a categorical
node, or it is missing (NaN) and ``missing_left`` is False, exactly as
`jaxboost.engine.predict.leaf_of_rows` routes it.  ``cover`` is the
training hessians' sum over a node's rows (XGBoost's cover), ``weight``
their sample weights'.  A node that does not split (every row left) never
appears on a path: its parent links to its left child.

Model files for other libraries (`jaxboost.frontends.exports.export_xgboost`,
`export_onnx`) number a tree's nodes `breadth_first`.

A path (`tree_paths`) is one reachable leaf and the splits above it, each
with the side the path takes and the share of its node's cover that side
holds (`child_share`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .tree import Tree


class NodeTable(NamedTuple):
    """Trees as nodes, leading ``(n_trees,)`` axis, ``n_nodes`` per tree (numpy)."""

    left: np.ndarray  # (T, N) int32 left child, -1 at leaves
    right: np.ndarray  # (T, N) int32 right child, -1 at leaves
    feature: np.ndarray  # (T, N) int32, 0 at leaves
    threshold: np.ndarray  # (T, N) float32: x <= threshold goes left
    missing_left: np.ndarray  # (T, N) bool: NaN goes left
    category_left: np.ndarray | None  # (T, N, 8) uint32 category bitsets, or None
    cover: np.ndarray  # (T, N) float64 training hessian sums
    weight: np.ndarray  # (T, N) float64 training sample weights
    value: np.ndarray  # (T, N, K) float32, the leaf values (0 at splits)
    root: np.ndarray  # (T,) int32
    gain: np.ndarray  # (T, N) float32 the split's gain (0 at leaves)


class TreePaths(NamedTuple):
    """Every tree's root-to-leaf paths, ``P`` paths of ``S`` steps (padded)."""

    node: np.ndarray  # (T, P, S) int32 the split at each step, -1 on padding
    goes_right: np.ndarray  # (T, P, S) bool: the side the path takes there
    share: np.ndarray  # (T, P, S) float64 that side's share of the node's cover (1 on padding)
    feature: np.ndarray  # (T, P, S) int32 the split's feature (0 on padding)
    value: np.ndarray  # (T, P, K) float32 the leaf's value (0 on padding paths)


def node_table(forest: Tree) -> NodeTable:
    """The `NodeTable` of a forest of heap-ordered trees (`jaxboost.engine.tree`).

    Node ``i < 2^D - 1`` is internal (children ``2i+1``, ``2i+2``), leaf ``j``
    is node ``2^D - 1 + j``.  An internal node splits where its gain is
    positive; one that does not sends every row left, so a link to it is
    resolved to the first split or leaf down its left side.  Internal covers
    and weights are the sums of the leaves' below.

    A node table's trees (``forest.left_child``, leaf-wise growth) keep
    their internal nodes and list leaf ``j`` as node ``L - 1 + j``.

    Raises:
      ValueError: the forest holds no covers (``leaf_cover`` None).
    """
    if forest.leaf_cover is None:
        raise ValueError("forest: the trees hold no covers (leaf_cover)")
    if forest.left_child is not None:
        return _table_of_node_trees(forest)
    gain = np.asarray(forest.split_gain)
    n_trees, n_internal = gain.shape
    n_nodes = 2 * n_internal + 1
    splits = np.concatenate([gain > 0, np.zeros((n_trees, n_internal + 1), bool)], axis=1)
    index = np.arange(n_nodes, dtype=np.int32)
    internal = index < n_internal

    def resolved(node: np.ndarray) -> np.ndarray:  # (T, N) -> past the non-splits
        for _ in range((n_internal + 1).bit_length()):
            passes = internal[node] & ~np.take_along_axis(splits, node, axis=1)
            node = np.where(passes, 2 * node + 1, node)
        return node

    def child(offset):  # (T, N) heap children (clipped at the leaves, which have none)
        heap_child = np.minimum(2 * index + offset, n_nodes - 1)
        return np.where(splits, resolved(np.broadcast_to(heap_child, splits.shape)), -1)

    left, right = child(1), child(2)
    root = resolved(np.zeros((n_trees, 1), np.int32))[:, 0]

    def per_node(internal_values, fill):  # (T, n_internal, ...) padded over the leaves
        values = np.asarray(internal_values)
        pad = np.full((n_trees, n_internal + 1) + values.shape[2:], fill, values.dtype)
        return np.concatenate([values, pad], axis=1)

    category_left = forest.category_left
    if category_left is not None:
        category_left = per_node(category_left, 0)
    value = np.asarray(forest.leaf_value)
    value = np.concatenate(
        [np.zeros((n_trees, n_internal) + value.shape[2:], value.dtype), value], 1
    )
    return NodeTable(
        left=left.astype(np.int32),
        right=right.astype(np.int32),
        feature=np.where(splits, per_node(forest.feature, 0), 0).astype(np.int32),
        threshold=per_node(forest.threshold, np.inf).astype(np.float32),
        missing_left=per_node(forest.missing_left, True).astype(bool),
        category_left=category_left,
        cover=_heap_sums(np.asarray(forest.leaf_cover, np.float64)),
        weight=_heap_sums(np.asarray(forest.leaf_weight, np.float64)),
        value=value,
        root=root.astype(np.int32),
        gain=np.where(splits, per_node(gain, 0), 0).astype(np.float32),
    )


def _table_of_node_trees(forest: Tree) -> NodeTable:
    """`node_table` of trees that are node tables already
    (`jaxboost.engine.bestfirst`): children ``~j`` become node ``L - 1 + j``;
    the unused internal nodes (gain 0) are off the tree."""
    gain = np.asarray(forest.split_gain)
    n_trees, n_internal = gain.shape
    splits = np.concatenate([gain > 0, np.zeros((n_trees, n_internal + 1), bool)], axis=1)

    def child(children):  # (T, n_internal) -> (T, N), -1 at leaves and unused nodes
        children = np.asarray(children, np.int64)
        node = np.where(children >= 0, children, n_internal + ~children)
        padded = np.concatenate([node, np.full((n_trees, n_internal + 1), -1)], axis=1)
        return np.where(splits, padded, -1).astype(np.int32)

    left, right = child(forest.left_child), child(forest.right_child)

    def per_node(internal_values, fill):  # (T, n_internal, ...) padded over the leaves
        values = np.asarray(internal_values)
        pad = np.full((n_trees, n_internal + 1) + values.shape[2:], fill, values.dtype)
        return np.concatenate([values, pad], axis=1)

    def sums(leaf):  # (T, L) -> every node's sum of the leaves below it
        total = np.concatenate([np.zeros((n_trees, n_internal)), leaf], axis=1)
        rows = np.arange(n_trees)
        for node in reversed(range(n_internal)):  # children come after their parent
            below = total[rows, np.maximum(left[:, node], 0)]
            below = below + total[rows, np.maximum(right[:, node], 0)]
            total[:, node] = np.where(splits[:, node], below, 0.0)
        return total

    category_left = forest.category_left
    if category_left is not None:
        category_left = per_node(category_left, 0)
    value = np.asarray(forest.leaf_value)
    value = np.concatenate(
        [np.zeros((n_trees, n_internal) + value.shape[2:], value.dtype), value], 1
    )
    return NodeTable(
        left=left,
        right=right,
        feature=np.where(splits, per_node(forest.feature, 0), 0).astype(np.int32),
        threshold=per_node(forest.threshold, np.inf).astype(np.float32),
        missing_left=per_node(forest.missing_left, True).astype(bool),
        category_left=category_left,
        cover=sums(np.asarray(forest.leaf_cover, np.float64)),
        weight=sums(np.asarray(forest.leaf_weight, np.float64)),
        value=value,
        root=np.where(splits[:, 0], 0, n_internal).astype(np.int32),
        gain=np.where(splits, per_node(gain, 0), 0).astype(np.float32),
    )


def breadth_first(table: NodeTable, tree: int) -> np.ndarray:
    """``(n,)`` the nodes of tree ``tree`` a row can reach, breadth first
    from the root, each split's two children side by side (left first), as
    XGBoost numbers a tree's nodes."""
    left, right = table.left[tree], table.right[tree]
    level = table.root[tree : tree + 1]
    levels = [level]
    while True:
        splits = level[left[level] >= 0]
        if not splits.size:
            return np.concatenate(levels).astype(np.int32)
        level = np.stack([left[splits], right[splits]], axis=1).reshape(-1)
        levels.append(level)


def _heap_sums(leaf: np.ndarray) -> np.ndarray:
    """``(T, 2^(D+1) - 1)``: every heap node's sum of ``leaf (T, 2^D)`` below it."""
    levels = [leaf]
    while levels[0].shape[-1] > 1:
        levels.insert(0, levels[0].reshape(leaf.shape[0], -1, 2).sum(axis=-1))
    return np.concatenate(levels, axis=-1)


def child_share(table: NodeTable) -> tuple[np.ndarray, np.ndarray]:
    """``(left share, right share)``, ``(T, N)`` each: the part of a split's
    cover each child holds, the weights of path-dependent TreeSHAP's
    expectations.  Where a child's cover is not positive (a loss of zero
    or negative curvature there: quantile, absolute error, Huber beyond
    its delta) the children's sample weights stand in; where those sum to
    0 too, one half each.  Leaves: one half each (unused)."""
    is_split = table.left >= 0

    def children(values):
        return (
            np.take_along_axis(values, np.maximum(table.left, 0), axis=1),
            np.take_along_axis(values, np.maximum(table.right, 0), axis=1),
        )

    shares = [np.full(is_split.shape, 0.5), np.full(is_split.shape, 0.5)]
    for values in (table.weight, table.cover):  # the covers where they can, else weights
        left, right = children(values)
        total = left + right
        usable = is_split & np.isfinite(total) & (total > 0)
        if values is table.cover:  # (a reader's TreeSHAP divides by each child's cover)
            usable &= (left > 0) & (right > 0)
        safe = np.where(usable, total, 1.0)
        shares = [
            np.where(usable, left / safe, shares[0]),
            np.where(usable, right / safe, shares[1]),
        ]
    return shares[0], shares[1]


def tree_paths(table: NodeTable) -> TreePaths:
    """Every reachable leaf's path from the root (`TreePaths`), in node order.

    Walks the table's parent links up from each leaf; a leaf is reachable
    where its walk ends at the root.  Steps run from the leaf up."""
    n_trees, n_nodes = table.left.shape
    trees = np.arange(n_trees)[:, None]
    is_split = table.left >= 0
    parent = _parents(table)
    left_share, right_share = child_share(table)

    node = np.broadcast_to(np.arange(n_nodes), (n_trees, n_nodes))
    steps_node, steps_right, steps_share = [], [], []
    for _ in range(n_nodes):  # at most the tree's depth steps, stops early
        above = np.where(node >= 0, parent[trees, np.maximum(node, 0)], -1)
        if not np.any(above >= 0):
            break
        safe = np.maximum(above, 0)
        right = (above >= 0) & (table.right[trees, safe] == node)
        share = np.where(right, right_share[trees, safe], left_share[trees, safe])
        steps_node.append(above)
        steps_right.append(right)
        steps_share.append(np.where(above >= 0, share, 1.0))
        node = np.where(above >= 0, above, node)
    reachable = ~is_split & (node == table.root[:, None])  # its walk ended at the root
    n_paths = max(int(reachable.sum(axis=1).max()), 1)
    # each tree's reachable leaves first, in node order
    order = np.argsort(~reachable, axis=1, kind="stable")[:, :n_paths]
    valid = np.take_along_axis(reachable, order, axis=1)

    def gather(steps, fill):
        if not steps:
            return np.full((n_trees, n_paths, 1), fill)
        stacked = np.stack(steps, axis=-1)  # (T, N, S)
        picked = np.take_along_axis(stacked, order[:, :, None], axis=1)
        return np.where(valid[:, :, None], picked, fill)

    path_node = gather(steps_node, -1).astype(np.int32)
    feature = np.where(
        path_node >= 0, table.feature[trees[:, :, None], np.maximum(path_node, 0)], 0
    )
    value = np.take_along_axis(table.value, order[:, :, None], axis=1)
    return TreePaths(
        node=path_node,
        goes_right=gather(steps_right, False).astype(bool),
        share=gather(steps_share, 1.0).astype(np.float64),
        feature=feature.astype(np.int32),
        value=np.where(valid[:, :, None], value, 0).astype(np.float32),
    )


def _parents(table: NodeTable) -> np.ndarray:
    """``(T, N)`` int64: each node's split above it, -1 at the root and at
    nodes no split links to."""
    n_trees, n_nodes = table.left.shape
    is_split = table.left >= 0
    parent = np.full((n_trees, n_nodes + 1), -1, np.int64)  # (column N: a sink for -1)
    split_rows, split_nodes = np.nonzero(is_split)
    parent[split_rows, table.left[is_split]] = split_nodes
    parent[split_rows, table.right[is_split]] = split_nodes
    return parent[:, :n_nodes]


class NodePlaces(NamedTuple):
    """Where each node of a `NodeTable` sits in its tree, ``(T, N)`` int32
    each; -1 everywhere at the nodes off the tree (those `node_table` links
    past, and what only they lead to)."""

    parent: np.ndarray  # the split above (-1 at the root)
    depth: np.ndarray  # 0 at the root
    order: np.ndarray  # rank in a depth-first walk from the root, left side first
    leaf: np.ndarray  # a leaf's index in the forest's leaf_value (-1 at splits)


def node_places(table: NodeTable) -> NodePlaces:
    """The `NodePlaces` of a table's nodes.

    Walks the parent links up from every node (as many steps as the trees
    are deep), gathering the sides taken as the bits of a number, the
    deepest last; the depth-first order sorts the nodes by that number
    padded to the deepest node's depth, a node before its children."""
    n_trees, n_nodes = table.left.shape
    trees = np.arange(n_trees)[:, None]
    parent = _parents(table)
    node = np.broadcast_to(np.arange(n_nodes), (n_trees, n_nodes))
    depth = np.zeros((n_trees, n_nodes), np.int64)
    sides = np.zeros((n_trees, n_nodes), np.int64)  # the path's sides (1: right), deepest last
    for _ in range(n_nodes):  # at most the tree's depth steps, stops early
        above = parent[trees, node]
        moving = above >= 0
        if not moving.any():
            break
        right = moving & (table.right[trees, np.maximum(above, 0)] == node)
        sides += right.astype(np.int64) << depth
        depth += moving
        node = np.where(moving, above, node)
    on_tree = node == table.root[:, None]
    deepest = int(depth[on_tree].max(initial=0))
    key = (sides << np.maximum(deepest - depth, 0)) * (deepest + 1) + depth  # (parent first)
    key = np.where(on_tree, key, np.iinfo(np.int64).max)
    walk = np.argsort(key, axis=1, kind="stable")
    order = np.empty_like(walk)
    np.put_along_axis(order, walk, np.arange(n_nodes)[None, :], axis=1)
    n_internal = (n_nodes - 1) // 2  # leaf j of leaf_value is node 2^D - 1 + j
    is_leaf = on_tree & (table.left < 0)
    return NodePlaces(
        parent=np.where(on_tree, parent, -1).astype(np.int32),
        depth=np.where(on_tree, depth, -1).astype(np.int32),
        order=np.where(on_tree, order, -1).astype(np.int32),
        leaf=np.where(is_leaf, np.arange(n_nodes) - n_internal, -1).astype(np.int32),
    )

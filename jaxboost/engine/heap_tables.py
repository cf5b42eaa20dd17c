"""Heap trees rewritten as node tables (`jaxboost.engine.bestfirst`'s layout).

A leaf-wise model grown before node tables held every tree in the heap of
``2^D`` leaves (`jaxboost.engine.leafwise`: the best-first tree of
``max_leaves`` leaves, its other nodes sending every row left); a
continued fit of leaf-wise settings grows node tables.  `heap_as_tables`
rewrites the heap trees as tables of ``L`` leaves that route every row to
the leaf of the same value: a node whose ``split_gain`` is 0 (a non-split,
every row left) is skipped for its left side, a split becomes the next
internal node in a walk from the root (so every child comes after its
parent), a heap leaf reached through splits the next leaf.  Numpy, once a
fit.
"""

from __future__ import annotations

import numpy as np

from .tree import Tree


def _walk(split_gain: np.ndarray, n_internal: int):
    """``(splits, leaves)`` of one heap tree: its splitting heap nodes in a
    walk from the root, and the heap leaves (``0 .. 2^D - 1``) reached, in
    the order the walk meets them, with each split's two children as
    ``("node", k)`` or ``("leaf", j)`` (indices into those lists)."""
    splits, leaves, children = [], [], []

    def visit(node: int):
        while node < n_internal and split_gain[node] <= 0:
            node = 2 * node + 1  # a non-split: every row goes left
        if node >= n_internal:
            leaves.append(node - n_internal)
            return ("leaf", len(leaves) - 1)
        index = len(splits)
        splits.append(node)
        children.append(None)
        children[index] = (visit(2 * node + 1), visit(2 * node + 2))
        return ("node", index)

    visit(0)
    return splits, leaves, children


def heap_leaf_counts(forest: Tree) -> np.ndarray:
    """``(n_trees,)`` the leaves each heap tree's rows can reach."""
    gain = np.asarray(forest.split_gain)
    return np.array([len(_walk(tree, gain.shape[1])[1]) for tree in gain])


def heap_as_tables(forest: Tree, n_leaves: int, max_bins: int) -> Tree:
    """``forest`` (heap trees, numpy, a leading tree axis) as node tables of
    ``n_leaves`` leaves (each tree's reachable leaves at most ``n_leaves``:
    `heap_leaf_counts`); unused internal nodes are non-splits to leaf 0
    (every one of the ``max_bins`` value bins left, as growth leaves them),
    unused leaves hold 0."""
    gain = np.asarray(forest.split_gain)
    n_trees, n_internal = gain.shape
    nodes = (n_trees, n_leaves - 1)
    out = {
        "feature": np.zeros(nodes, np.int32),
        "threshold": np.full(nodes, np.inf, np.float32),
        "threshold_bin": np.full(nodes, max_bins - 1, np.int32),
        "missing_left": np.ones(nodes, bool),
        "split_gain": np.zeros(nodes, np.float32),
        "left_child": np.full(nodes, -1, np.int32),
        "right_child": np.full(nodes, -1, np.int32),
    }
    leaf_fields = ("leaf_value", "leaf_weight", "leaf_cover")
    leaf_fields = [name for name in leaf_fields if getattr(forest, name) is not None]
    for name in leaf_fields:
        held = np.asarray(getattr(forest, name))
        out[name] = np.zeros((n_trees, n_leaves) + held.shape[2:], held.dtype)
    if forest.category_left is not None:
        out["category_left"] = np.zeros(nodes + (forest.category_left.shape[-1],), np.uint32)
    for tree in range(n_trees):
        splits, leaves, children = _walk(gain[tree], n_internal)
        if len(leaves) > n_leaves:
            raise ValueError(f"tree {tree} reaches {len(leaves)} leaves, more than {n_leaves}")
        for index, node in enumerate(splits):
            for name in ("feature", "threshold", "threshold_bin", "missing_left", "split_gain"):
                out[name][tree, index] = np.asarray(getattr(forest, name))[tree, node]
            if forest.category_left is not None:
                out["category_left"][tree, index] = np.asarray(forest.category_left)[tree, node]
            for name, (kind, at) in zip(("left_child", "right_child"), children[index]):
                out[name][tree, index] = at if kind == "node" else ~at
        for leaf, heap_leaf in enumerate(leaves):
            for name in leaf_fields:
                out[name][tree, leaf] = np.asarray(getattr(forest, name))[tree, heap_leaf]
    return Tree(**out)

"""Leaf-wise (best-first) growth of one tree as LightGBM grows it.

The tree is a table of ``L - 1`` internal nodes and ``L`` leaves (``L``:
``max_leaves``) with explicit children, LightGBM's layout: internal node
``i``'s ``left_child[i]`` and ``right_child[i]`` are an internal node
(``>= 0``) or a leaf ``j`` written ``~j`` (``-1 - j``).  The root is
internal node 0; growth that makes ``s`` splits fills internal nodes
``0 .. s - 1`` and leaves ``0 .. s``, and the unused internal nodes are
non-splits (every row left, to leaf 0: a tree of no split is node 0 sending
every row to leaf 0).  So the tree's arrays are ``O(L)``, whatever its depth.

Growth keeps each open leaf's best split.  Each of at most
``L - 1`` steps splits the open leaf of largest gain (ties: the lowest
leaf), whose left child keeps its leaf number and whose right child takes
the next one (``s + 1`` at step ``s``); it routes that leaf's rows, sums
the two children's histograms and searches them.  The steps are one
``lax.while_loop`` body, so the program's size does not grow with depth.
A leaf at ``max_depth`` (0: no bound) stays a leaf.

A node's best split depends on its rows alone, so the tree is the one
`jaxboost.engine.leafwise` prunes from the complete depth-``D`` tree
whenever that tree is deep enough for it (tests compare the two).

Each step's histograms sum the two children's rows only with the native
CPU kernel (`jaxboost.kernels.leaf_histogram`: ``O(n F)`` a tree level
of splits, ``O(L n)`` to find the rows), or by the reference's pass over
every row (``O(L n F)`` a tree), which it must equal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kernels.histogram_reference import build_histograms
from ..kernels.leaf_histogram import native_leaf_histograms
from ..kernels.leaf_sums import leaf_sums_reference
from .binning import TILE_ROWS
from .categorical import CategoricalSearch, is_categorical_node
from .split import SplitChoice, find_best_splits


class NodeTree(NamedTuple):
    """The internal nodes of a best-first tree, ``(L - 1,)`` each; fields
    as in `jaxboost.engine.tree.TreeStructure`, and the children."""

    feature: jax.Array  # int32
    threshold: jax.Array  # float32: x <= threshold goes left
    threshold_bin: jax.Array  # int32
    missing_left: jax.Array  # bool
    split_gain: jax.Array  # float32, 0 at the unused nodes
    category_left: jax.Array | None  # (L - 1, 8) uint32, or None
    left_child: jax.Array  # int32: an internal node, or ~leaf
    right_child: jax.Array  # int32


class _Open(NamedTuple):
    """Every leaf's best split while growing, ``(L, ...)``."""

    choice: SplitChoice  # each field (L, ...)
    depth: jax.Array  # (L,) int32
    parent: jax.Array  # (L,) int32 the internal node above, -1 at the root
    is_right: jax.Array  # (L,) bool: the leaf is its parent's right child


class _Grown(NamedTuple):
    node_of_row: jax.Array  # (n_rows,) int32 leaf of every row
    open: _Open
    tree: NodeTree  # with threshold still unset (filled from the bins' edges)
    n_splits: jax.Array  # int32 scalar
    # the histograms of the two leaves the last split made (F, 2, B, S), to
    # search at the next step, and the leaves (L: none, its search dropped)
    pending: jax.Array
    pending_leaves: jax.Array  # (2,) int32
    done: jax.Array  # bool scalar: no leaf splits


def children_problems(left_child, right_child) -> list[tuple[str, str]]:
    """``(field, problem)`` of each children array (``(n_trees, L - 1)``
    numpy, or None: heap trees) that breaks the layout: every child an
    internal node after its own, or a leaf ``~j`` with ``j`` in ``[0, L)``
    (so every walk ends at a leaf)."""
    if left_child is None:
        return []
    n_nodes = left_child.shape[1]
    node = np.arange(n_nodes)
    problems = []
    for field, child in (("left_child", left_child), ("right_child", right_child)):
        inner = (child >= 0) & ((child <= node) | (child >= n_nodes))
        if inner.any() or (child < -(n_nodes + 1)).any():
            problems.append(
                (
                    field,
                    f"expected a later node in [0, {n_nodes}) or a leaf ~j, j in [0, {n_nodes}]",
                )
            )
    return problems


def feature_bins(bins: jax.Array, feature: jax.Array, tiled: bool) -> jax.Array:
    """``(n_rows,)`` int32 the bins of one ``feature`` (a traced scalar) of
    ``bins (n_features, n_rows)``, stored by tiles of rows where ``tiled``
    (`jaxboost.engine.binning.tile_bins`: row ``r`` of feature ``f`` at
    ``(r // T) F T + f pitch + r % T``)."""
    n_features, n_rows = bins.shape
    if not tiled or n_rows <= TILE_ROWS:  # (at most one tile: nothing moved)
        return lax.dynamic_index_in_dim(bins, feature, keepdims=False).astype(jnp.int32)
    row = jnp.arange(n_rows, dtype=jnp.int32)
    last_start = (n_rows - 1) // TILE_ROWS * TILE_ROWS
    pitch = jnp.where(row >= last_start, n_rows - last_start, TILE_ROWS)
    tile_start = row // TILE_ROWS * (n_features * TILE_ROWS)
    return bins.reshape(-1)[tile_start + feature * pitch + row % TILE_ROWS].astype(jnp.int32)


def _goes_right(row_bin: jax.Array, choice: SplitChoice, missing_bin: int) -> jax.Array:
    """``(n_rows,)`` bool: rows of bins ``row_bin`` go right at the split
    ``choice`` (one node's fields), as
    `jaxboost.kernels.histogram_kernels.route_rows` sends them."""
    is_missing = row_bin == missing_bin
    value_goes_right = row_bin > choice.threshold_bin
    if choice.category_left is not None:  # categorical nodes test set membership
        word = choice.category_left[row_bin >> 5]
        in_set = (word >> (row_bin & 31).astype(jnp.uint32)) & 1
        categorical_node = jnp.any(choice.category_left != 0)
        value_goes_right = jnp.where(categorical_node, in_set == 0, value_goes_right)
    return jnp.where(is_missing, ~choice.missing_left, value_goes_right)


def _search(
    hist, n_outputs, params, feature_mask, categorical, axis_name, cumulative, node_rows=None
) -> SplitChoice:
    """The `SplitChoice` of ``hist (F, N, B, S)``, summed over shards
    (``cumulative``: running sums over the value bins; ``node_rows``:
    ``(N,)`` the nodes' rows of positive weight, for the row rule where the
    hessian varies, or None)."""
    if axis_name is not None:
        hist, node_rows = lax.psum((hist, node_rows), axis_name)
    return find_best_splits(
        hist,
        n_outputs,
        params.reg_lambda,
        params.min_child_weight,
        params.min_split_gain,
        feature_mask,
        cumulative=cumulative,
        min_child_samples=params.min_child_samples,
        rows_per_hessian=params.rows_per_hessian,
        node_rows=node_rows,
        categorical=categorical,
    )


def _set(table, index, values):
    """``table`` (a pytree of arrays with a leading axis) with its entries
    ``index`` replaced by ``values``' (leading axis of ``index``'s length;
    an index past the table: dropped)."""
    return jax.tree.map(lambda whole, part: whole.at[index].set(part, mode="drop"), table, values)


def _empty_tree(n_leaves: int, max_bins: int, categorical: bool) -> NodeTree:
    n_internal = n_leaves - 1
    return NodeTree(
        feature=jnp.zeros(n_internal, jnp.int32),
        threshold=jnp.full(n_internal, jnp.inf, jnp.float32),
        threshold_bin=jnp.full(n_internal, max_bins - 1, jnp.int32),
        missing_left=jnp.ones(n_internal, bool),
        split_gain=jnp.zeros(n_internal, jnp.float32),
        category_left=jnp.zeros((n_internal, 8), jnp.uint32) if categorical else None,
        left_child=jnp.full(n_internal, -1, jnp.int32),  # ~0: leaf 0
        right_child=jnp.full(n_internal, -1, jnp.int32),
    )


def _leaf_histograms(native, bins, node_of_row, row_stats, stats_scale, leaves, n_bins):
    """``(F, 2, n_bins, S)`` float32 sums of ``row_stats`` over the rows of
    ``leaves (2,)`` (quantised stats, int32 with ``stats_scale``, summed
    exactly and then scaled): by the native kernel over those rows only
    (``native``, tiled bins; running sums over the value bins), else by a
    pass over every row."""
    if native:  # (quantised units are small integers: exact in float32 and float64 sums)
        hist = native_leaf_histograms(bins, node_of_row, row_stats, leaves, n_bins)
    else:
        slot = jnp.where(node_of_row == leaves[0], 0, jnp.where(node_of_row == leaves[1], 1, 2))
        hist = build_histograms(bins, slot, row_stats, 3, n_bins)[:, :2]
    return hist if stats_scale is None else hist.astype(jnp.float32) * stats_scale


def _step(native, bins, row_stats, stats_scale, n_bins, max_depth, search, grown: _Grown) -> _Grown:
    """One step: search the leaves the last split made, then split the open
    leaf of largest gain, or finish (``done``) where none gains or the
    leaves are all made.  (The search at the step's start, not its end, is
    one search in the program for the root's and every split's.)"""
    n_leaves = grown.open.depth.shape[0]
    children = search(grown.pending, grown.node_of_row, grown.pending_leaves)
    opened = grown.open._replace(choice=_set(grown.open.choice, grown.pending_leaves, children))
    scores = _scores(opened, max_depth)
    best = jnp.argmax(scores).astype(jnp.int32)
    take = (scores[best] > -jnp.inf) & (grown.n_splits < n_leaves - 1)
    grown = grown._replace(open=opened)
    split = functools.partial(_split, native, bins, row_stats, stats_scale, n_bins, best)
    return lax.cond(take, split, lambda grown: grown._replace(done=jnp.bool_(True)), grown)


def _split(native, bins, row_stats, stats_scale, n_bins, best, grown: _Grown) -> _Grown:
    """Split leaf ``best``, its best split kept in ``grown.open``."""
    opened = grown.open
    new = grown.n_splits + 1  # the right child's leaf
    node = grown.n_splits  # the internal node the split becomes
    leaf_choice = jax.tree.map(lambda values: values[best], opened.choice)
    category = None if leaf_choice.category_left is None else leaf_choice.category_left[None]
    in_leaf = grown.node_of_row == best
    row_bin = feature_bins(bins, leaf_choice.feature, tiled=native)
    goes_right = _goes_right(row_bin, leaf_choice, n_bins - 1)
    node_of_row = jnp.where(in_leaf & goes_right, new, grown.node_of_row)
    both = jnp.stack([best, new])
    children_hist = _leaf_histograms(
        native, bins, node_of_row, row_stats, stats_scale, both, n_bins
    )
    depth = opened.depth[best] + 1
    parent, is_right = opened.parent[best], opened.is_right[best]
    tree = grown.tree
    parent = jnp.where(parent < 0, tree.feature.shape[0], parent)  # the root's: dropped
    # the parent's link to the split leaf now leads to the new internal node
    left_child = tree.left_child.at[parent].set(
        jnp.where(is_right, tree.left_child[parent], node), mode="drop"
    )
    right_child = tree.right_child.at[parent].set(
        jnp.where(is_right, node, tree.right_child[parent]), mode="drop"
    )
    tree = tree._replace(
        feature=tree.feature.at[node].set(leaf_choice.feature),
        threshold_bin=tree.threshold_bin.at[node].set(leaf_choice.threshold_bin),
        missing_left=tree.missing_left.at[node].set(leaf_choice.missing_left),
        split_gain=tree.split_gain.at[node].set(leaf_choice.gain),
        left_child=left_child.at[node].set(~best),
        right_child=right_child.at[node].set(~new),
    )
    if category is not None:
        tree = tree._replace(category_left=tree.category_left.at[node].set(category[0]))
    opened = opened._replace(
        depth=opened.depth.at[both].set(depth),
        parent=opened.parent.at[both].set(node),
        is_right=opened.is_right.at[both].set(jnp.array([False, True])),
    )
    return _Grown(node_of_row, opened, tree, grown.n_splits + 1, children_hist, both, grown.done)


def _scores(opened: _Open, max_depth: int) -> jax.Array:
    """``(L,)`` each leaf's gain where it may split, else -inf."""
    can_split = opened.choice.do_split
    if max_depth:
        can_split = can_split & (opened.depth < max_depth)
    return jnp.where(can_split, opened.choice.gain, -jnp.inf)


def grow_best_first(
    bins: jax.Array,
    row_stats: jax.Array,
    edges: jax.Array,
    params,
    axis_name: str | None,
    feature_mask: jax.Array | None = None,
    stats_scale: jax.Array | None = None,
    leaf_columns: Sequence[jax.Array] = (),
    leaf_sums: Callable = leaf_sums_reference,
    categorical: CategoricalSearch | None = None,
    native: bool = False,
    row_positive: jax.Array | None = None,
) -> tuple:
    """Grow one tree of at most ``params.max_leaves`` leaves best-first.

    Args:
      bins: ``(n_features, n_rows)`` uint8, missing bin ``max_bins``.
      row_stats: ``(n_rows, 2 * n_outputs)`` float32 ``[grad, hess]`` as
        `jaxboost.engine.tree.grow_tree` takes them.
      edges: ``(n_features, max_bins)`` float32 upper bin edges.
      params: a `jaxboost.engine.tree.TreeParams`; ``max_leaves`` (>= 2)
        bounds the leaves, ``max_depth`` the depth (0: only the leaves).
      axis_name: the mesh axis the rows are sharded over, or None.
      feature_mask: ``(n_features,)`` bool, the features the tree may split on.
      stats_scale: ``(n_stats,)`` float32 when ``row_stats`` are quantised
        (int32, `jaxboost.engine.quantise`): what one unit of each is worth.
      leaf_columns: per-row values to sum by leaf, each ``(c_j, n_rows)``.
      leaf_sums: ``(values (V, n_rows), leaf_of_row, n_leaves) -> (n_leaves, V)``.
      categorical: the categorical features, or None.
      native: sum the histograms by the native CPU kernel
        (`jaxboost.kernels.leaf_histogram`, ``bins`` stored by tiles), else
        by the reference's pass over every row.
      row_positive: ``(n_rows,)`` bool, the rows of positive weight, when
        ``params.min_child_samples`` reads each leaf's rows (a varying
        hessian: `jaxboost.engine.split.estimated_row_rule`), else None.
    Returns:
      ``(NodeTree, leaf_of_row (n_rows,) int32 in [0, L), sums (L, V) or None)``.
    """
    n_leaves, max_bins = params.max_leaves, edges.shape[1]
    n_outputs = row_stats.shape[1] // 2

    def search(hist, node_of_row, leaves):
        """The choice of the leaves ``leaves (N,)`` from their histograms."""
        node_rows = None
        if row_positive is not None:
            node_rows = jnp.sum(
                row_positive[None, :] & (node_of_row[None, :] == leaves[:, None]),
                axis=1,
                dtype=jnp.int32,
            )
        return _search(
            hist, n_outputs, params, feature_mask, categorical, axis_name, native, node_rows
        )

    node_of_row = jnp.zeros(bins.shape[1], jnp.int32)
    root_leaves = jnp.array([0, n_leaves], jnp.int32)  # (no row is in leaf L)
    root_hist = _leaf_histograms(
        native, bins, node_of_row, row_stats, stats_scale, root_leaves, max_bins + 1
    )
    choice = jax.tree.map(
        lambda values: jnp.zeros((n_leaves,) + values.shape[1:], values.dtype),
        jax.eval_shape(search, root_hist, node_of_row, root_leaves),
    )
    opened = _Open(
        choice=choice,
        depth=jnp.zeros(n_leaves, jnp.int32),
        parent=jnp.full(n_leaves, -1, jnp.int32),
        is_right=jnp.zeros(n_leaves, bool),
    )
    tree = _empty_tree(n_leaves, max_bins, categorical is not None)
    grown = _Grown(
        node_of_row, opened, tree, jnp.int32(0), root_hist, root_leaves, jnp.bool_(False)
    )

    def step(grown: _Grown) -> _Grown:
        n_bins = max_bins + 1
        return _step(native, bins, row_stats, stats_scale, n_bins, params.max_depth, search, grown)

    grown = lax.while_loop(lambda grown: ~grown.done, step, grown)
    tree = grown.tree
    used = jnp.arange(n_leaves - 1) < grown.n_splits
    threshold = jnp.where(used, edges[tree.feature, tree.threshold_bin], jnp.inf)
    if tree.category_left is not None:  # a categorical node's numeric test sends all left
        numeric = ~is_categorical_node(tree.category_left)
        tree = tree._replace(threshold_bin=jnp.where(numeric, tree.threshold_bin, max_bins - 1))
        threshold = jnp.where(numeric, threshold, jnp.inf)
    tree = tree._replace(threshold=threshold)
    leaf_of_row = grown.node_of_row
    if not leaf_columns:
        return tree, leaf_of_row, None
    values = jnp.concatenate(list(leaf_columns), axis=0)
    return tree, leaf_of_row, leaf_sums(values, leaf_of_row, n_leaves)

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

A step's search of its two leaves is the native split search
(`jaxboost.engine.native_split`, one C++ call, the same choice bit for bit)
where it covers the leaves' histograms (the native kernel's running sums of
numeric features), else `jaxboost.engine.split.find_best_splits`.

Where each leaf's rows are kept, and how a step splits them and sums the
two children's histograms, is `jaxboost.engine.leaf_rows`: the native CPU
kernel partitions the split leaf's segment of a permutation of the rows
(``O(m F)`` for a leaf of ``m`` rows, LightGBM's layout), the reference
passes over every row's leaf number (``O(n F)`` a step), which it must
equal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kernels.leaf_sums import leaf_sums_reference
from .categorical import CategoricalSearch, is_categorical_node
from .leaf_rows import Segments, leaf_of_row, root_step, row_major_bins, split_step
from .native_split import covers, native_best_splits
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
    rows: Segments | jax.Array  # each leaf's rows (jaxboost.engine.leaf_rows)
    open: _Open
    tree: NodeTree  # with threshold still unset (filled from the bins' edges)
    n_splits: jax.Array  # int32 scalar
    # the histograms of the two leaves the last split made (F, 2, B, S), to
    # search at the next step, and the leaves (L: none, its search dropped)
    pending: jax.Array
    pending_leaves: jax.Array  # (2,) int32
    pending_rows: jax.Array | None  # (2,) int32 their rows of positive weight, or None
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


def _search(
    hist,
    n_outputs,
    params,
    feature_mask,
    categorical,
    axis_name,
    cumulative,
    node_rows=None,
    native_search=False,
) -> SplitChoice:
    """The `SplitChoice` of ``hist (F, N, B, S)``, summed over shards
    (``cumulative``: running sums over the value bins; ``node_rows``:
    ``(N,)`` the nodes' rows of positive weight, for the row rule where the
    hessian varies, or None; ``native_search``: by the native split search,
    `jaxboost.engine.native_split`, the same choice in one call)."""
    if axis_name is not None:
        hist, node_rows = lax.psum((hist, node_rows), axis_name)
    if native_search:
        return native_best_splits(
            hist,
            n_outputs,
            params.reg_lambda,
            params.min_child_weight,
            params.min_split_gain,
            feature_mask,
            min_child_samples=params.min_child_samples,
            rows_per_hessian=params.rows_per_hessian,
            node_rows=node_rows,
        )
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


def _step(split_rows, max_depth, search, grown: _Grown) -> _Grown:
    """One step: search the leaves the last split made, then split the open
    leaf of largest gain, or finish (``done``) where none gains or the
    leaves are all made.  (The search at the step's start, not its end, is
    one search in the program for the root's and every split's.)  The rows
    are split outside the ``cond`` (a finishing step splits the leaf past
    the table: no rows), which so never copies their arrays."""
    n_leaves = grown.open.depth.shape[0]
    children = search(grown.pending, grown.pending_rows)
    opened = grown.open._replace(choice=_set(grown.open.choice, grown.pending_leaves, children))
    scores = _scores(opened, max_depth)
    best = jnp.argmax(scores).astype(jnp.int32)
    take = (scores[best] > -jnp.inf) & (grown.n_splits < n_leaves - 1)
    # the split leaf keeps its number for its left child, the right one takes the next
    both = jnp.where(take, jnp.stack([best, grown.n_splits + 1]), n_leaves)
    leaf_choice = jax.tree.map(lambda values: values[best], opened.choice)
    split = split_rows(grown.rows, both, leaf_choice)
    kept = (opened, grown.tree, grown.n_splits)
    opened, tree, n_splits = lax.cond(
        take, functools.partial(_record, both, leaf_choice), lambda kept: kept, kept
    )
    return _Grown(split.rows, opened, tree, n_splits, split.hist, both, split.node_rows, ~take)


def _record(both, leaf_choice, kept):
    """``(open, tree, n_splits)`` after leaf ``both[0]`` splits by
    ``leaf_choice`` into ``both``."""
    opened, tree, n_splits = kept
    best, new = both[0], both[1]
    node = n_splits  # the internal node the split becomes
    category = leaf_choice.category_left
    depth = opened.depth[best] + 1
    parent, is_right = opened.parent[best], opened.is_right[best]
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
        tree = tree._replace(category_left=tree.category_left.at[node].set(category))
    opened = opened._replace(
        depth=opened.depth.at[both].set(depth),
        parent=opened.parent.at[both].set(node),
        is_right=opened.is_right.at[both].set(jnp.array([False, True])),
    )
    return opened, tree, n_splits + 1


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
      native: keep the rows as segments of a permutation and split them
        by the native CPU kernel (`jaxboost.engine.leaf_rows`,
        `jaxboost.kernels.leaf_histogram`; ``bins`` stored by tiles), else
        by the reference's passes over every row.
      row_positive: ``(n_rows,)`` bool, the rows of positive weight, when
        ``params.min_child_samples`` reads each leaf's rows (a varying
        hessian: `jaxboost.engine.split.estimated_row_rule`), else None.
    Returns:
      ``(NodeTree, leaf_of_row (n_rows,) int32 in [0, L), sums (L, V) or None)``.
    """
    n_leaves, max_bins = params.max_leaves, edges.shape[1]
    n_outputs = row_stats.shape[1] // 2

    n_bins = max_bins + 1
    # the native kernel's running sums of numeric features: the native search
    native_search = (
        covers("native" if native else "reference", n_outputs, None, None, stats_scale is not None)
        and categorical is None
    )
    if native:  # (once a tree, not at every step)
        bins, row_stats = (bins, row_major_bins(bins)), row_stats.astype(jnp.float32)

    def search(hist, node_rows):
        """The choice of two leaves from their histograms (and rows)."""
        return _search(
            hist,
            n_outputs,
            params,
            feature_mask,
            categorical,
            axis_name,
            native,
            node_rows,
            native_search,
        )

    rows_of = (native, bins, row_stats, stats_scale, row_positive)
    root = root_step(*rows_of, n_leaves, n_bins)
    choice = jax.tree.map(
        lambda values: jnp.zeros((n_leaves,) + values.shape[1:], values.dtype),
        jax.eval_shape(search, root.hist, root.node_rows),
    )
    opened = _Open(
        choice=choice,
        depth=jnp.zeros(n_leaves, jnp.int32),
        parent=jnp.full(n_leaves, -1, jnp.int32),
        is_right=jnp.zeros(n_leaves, bool),
    )
    tree = _empty_tree(n_leaves, max_bins, categorical is not None)
    root_leaves = jnp.array([0, n_leaves], jnp.int32)  # (no row is in leaf L)
    grown = _Grown(
        root.rows,
        opened,
        tree,
        jnp.int32(0),
        root.hist,
        root_leaves,
        root.node_rows,
        jnp.bool_(False),
    )
    split_rows = functools.partial(split_step, *rows_of, n_bins=n_bins)

    def step(grown: _Grown) -> _Grown:
        return _step(split_rows, params.max_depth, search, grown)

    grown = lax.while_loop(lambda grown: ~grown.done, step, grown)
    tree = grown.tree
    used = jnp.arange(n_leaves - 1) < grown.n_splits
    threshold = jnp.where(used, edges[tree.feature, tree.threshold_bin], jnp.inf)
    if tree.category_left is not None:  # a categorical node's numeric test sends all left
        numeric = ~is_categorical_node(tree.category_left)
        tree = tree._replace(threshold_bin=jnp.where(numeric, tree.threshold_bin, max_bins - 1))
        threshold = jnp.where(numeric, threshold, jnp.inf)
    tree = tree._replace(threshold=threshold)
    leaf_of = leaf_of_row(grown.rows)
    if not leaf_columns:
        return tree, leaf_of, None
    values = jnp.concatenate(list(leaf_columns), axis=0)
    return tree, leaf_of, leaf_sums(values, leaf_of, n_leaves)

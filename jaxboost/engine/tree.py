"""Trees as padded arrays, and growing one tree depth-wise on binned rows.

A depth-``D`` tree is a complete binary tree in heap order: node ``i`` has
children ``2i+1`` and ``2i+2``; the ``2^D - 1`` internal nodes come first and
leaf ``j`` is node ``2^D - 1 + j``.  A node that does not split sends every row
left (``threshold = +inf``, missing left), so the shape never changes; the
leaves under its empty right side are never reached and hold 0.

A leaf-wise tree grown without constraints is a node table instead
(`jaxboost.engine.bestfirst`): ``L - 1`` internal nodes with explicit
children (``Tree.left_child``) and ``L`` leaves.

A forest is the same structure with a leading ``(n_trees,)`` axis.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..kernels.histogram_kernels import HISTOGRAM_KERNELS
from ..kernels.interfaces import LevelSplit
from ..kernels.leaf_sums import leaf_sums_reference
from .categorical import CategoricalSearch, is_categorical_node
from .constraints import (
    NodeBounds,
    TreeConstraints,
    children_bounds,
    node_feature_mask,
    root_bounds,
)
from .leafwise import (
    HeldNodes,
    best_first_table,
    best_first_tree,
    heap_chosen,
    live_capacity,
    live_slots,
    spread_choice,
    with_children,
)
from .native_split import covers, native_best_splits
from .neighbours import children_boxes, leaf_boxes, root_boxes, search_bounds
from .packed_split import PackedBins, find_best_packed_splits, slot_layout
from .split import find_best_splits, first_across_shards


class Tree(NamedTuple):
    """One tree (or a forest, with a leading ``n_trees`` axis on every field)."""

    feature: jax.Array  # (2^D - 1,) int32 feature tested at each internal node
    threshold: jax.Array  # (2^D - 1,) float32: x <= threshold goes left
    threshold_bin: jax.Array  # (2^D - 1,) int32: bin <= threshold_bin goes left
    missing_left: jax.Array  # (2^D - 1,) bool: NaN goes left
    split_gain: jax.Array  # (2^D - 1,) float32, 0 at nodes that do not split
    leaf_value: jax.Array  # (2^D, n_outputs) float32, learning rate included
    leaf_weight: jax.Array  # (2^D,) float32 sum of training sample weights per leaf
    # (2^D - 1, 8) uint32 with categorical features: the category bins each
    # node sends left (jaxboost.engine.categorical; zero at numeric nodes,
    # whose threshold is then +inf), else None
    category_left: jax.Array | None = None
    # (2^D,) float32 sum of the training hessians per leaf (weighted; the
    # trace of the tree's outputs' hessian block): the "cover" TreeSHAP
    # weighs a node's children by (jaxboost.engine.node_table); None in
    # models saved before covers were recorded
    leaf_cover: jax.Array | None = None
    # a node table (leaf-wise trees, jaxboost.engine.bestfirst) instead of
    # the heap: (L - 1,) int32 each internal node's children, an internal
    # node (> its parent) or a leaf j written ~j; the leaves then number
    # L = max_leaves, not 2^D.  None: heap order
    left_child: jax.Array | None = None
    right_child: jax.Array | None = None


class TreeParams(NamedTuple):
    """Settings of tree growth (``max_depth`` and ``histogram_kernel`` static)."""

    max_depth: int
    reg_lambda: float
    min_child_weight: float
    min_split_gain: float
    histogram_kernel: str = "reference"
    # least rows of positive weight in a child (jaxboost.engine.split.child_check)
    min_child_samples: float = 0.0
    # grow_policy="lossguide": at most this many leaves, chosen best-first
    # within the depth-max_depth tree (jaxboost.engine.leafwise); 0: depth-wise
    max_leaves: int = 0
    # the rows a unit of the stats' hessian sums holds where every row adds
    # the same, for min_child_samples (jaxboost.engine.split.child_check);
    # None: grow_tree's row_positive counts each node's rows
    rows_per_hessian: float | None = None


class TreeStructure(NamedTuple):
    """The internal nodes of a grown tree; fields as in `Tree`."""

    feature: jax.Array
    threshold: jax.Array
    threshold_bin: jax.Array
    missing_left: jax.Array
    split_gain: jax.Array
    category_left: jax.Array | None = None


def _split_search(
    n_features,
    params,
    n_outputs,
    feature_mask,
    axis_name,
    cumulative,
    packed,
    constraints=None,
    categorical=None,
    native=False,
):
    """``(shard's histograms, NodeBounds, node_rows) -> SplitChoice``, the
    same on every shard (``constraints``: a `TreeConstraints`, or None: the
    bounds are ignored; ``node_rows``: the shard's rows of positive weight
    per node, summed with the histograms, or None).

    With several shards the histograms are summed by a reduce-scatter over
    features (``psum_scatter``): each shard receives the full sums of its
    slice of the features (padded with empty features to a multiple of the
    shard count), searches them, and the shards agree on the best candidate
    with one ``pmax`` (each node's score and best gain) and one ``all_gather``
    (each shard's first tied candidate and its gain): three collectives per
    level.  That moves half the bytes of a ``psum`` and splits the search
    between the devices.  Packed histograms (``packed``: only the bins each
    feature uses, at most 0.6 of the padded ones) are summed whole with one
    ``psum`` and searched on every shard: split by slots, a shard would hold
    parts of features (``categorical``, a `CategoricalSearch`, is not
    packed: the caller leaves ``packed`` None with it).  ``native``: the
    native search makes the choice (`jaxboost.engine.native_split.covers`),
    on whole histograms summed with one ``psum``, as packed ones.
    """
    settings = (n_outputs, params.reg_lambda, params.min_child_weight, params.min_split_gain)
    least_rows = params.min_child_samples
    per_hessian = params.rows_per_hessian
    # Across processes (gloo on CPU) the reduce-scatter path gave run-to-run
    # different splits under CPU load (1 run in 3 of
    # examples/distributed_training.py, never with psum).  The cause is gloo's
    # reduce-scatter (ReduceScatterHalvingDoubling sends from a buffer the
    # other rank overwrites), which intermittently returns wrong values on
    # rank 0: JAX issue 40830.  So several processes sum whole histograms with
    # psum (an all-reduce), which that bug does not touch.
    one_shard = axis_name is None or lax.axis_size(axis_name) == 1
    if one_shard or jax.process_count() > 1 or packed is not None or native:

        def search_whole(hist, bounds=None, node_rows=None):
            if axis_name is not None:
                if node_rows is not None:  # (float32: one all-reduce with the histograms)
                    node_rows = node_rows.astype(jnp.float32)
                hist, node_rows = lax.psum((hist, node_rows), axis_name)
            if native:
                return native_best_splits(
                    hist,
                    *settings,
                    feature_mask,
                    min_child_samples=least_rows,
                    rows_per_hessian=per_hessian,
                    node_rows=node_rows,
                    packed=packed,
                    categorical=categorical,
                )
            node_mask, monotone = _node_constraints(constraints, bounds)
            if packed is not None:
                return find_best_packed_splits(
                    hist,
                    packed,
                    *settings,
                    feature_mask,
                    min_child_samples=least_rows,
                    rows_per_hessian=per_hessian,
                    node_rows=node_rows,
                    node_mask=node_mask,
                    monotone=monotone,
                )
            return find_best_splits(
                hist,
                *settings,
                feature_mask,
                cumulative=cumulative,
                min_child_samples=least_rows,
                rows_per_hessian=per_hessian,
                node_rows=node_rows,
                node_mask=node_mask,
                monotone=monotone,
                categorical=categorical,
            )

        return search_whole

    n_shards = lax.axis_size(axis_name)
    per_shard = -(-n_features // n_shards)
    padding = per_shard * n_shards - n_features
    first_feature = lax.axis_index(axis_name) * per_shard
    mask = jnp.ones(n_features, bool) if feature_mask is None else feature_mask
    padded_mask = jnp.concatenate([mask, jnp.zeros(padding, bool)])
    shard_mask = lax.dynamic_slice_in_dim(padded_mask, first_feature, per_shard)

    def shard_slice(per_feature):  # this shard's features of (n_features, ...)
        widths = ((0, padding),) + ((0, 0),) * (per_feature.ndim - 1)
        padded = jnp.pad(per_feature, widths)
        return lax.dynamic_slice_in_dim(padded, first_feature, per_shard)

    def search_slice(hist, bounds=None, node_rows=None):
        hist = jnp.pad(hist, ((0, padding), (0, 0), (0, 0), (0, 0)))
        part = lax.psum_scatter(hist, axis_name, scatter_dimension=0, tiled=True)
        if node_rows is not None:
            node_rows = lax.psum(node_rows, axis_name)
        node_mask, monotone = _node_constraints(constraints, bounds)
        if node_mask is not None:
            node_mask = shard_slice(node_mask)
        if monotone is not None:
            monotone = (shard_slice(monotone[0]), *monotone[1:])
        shard_categorical = categorical
        if categorical is not None:
            shard_categorical = categorical._replace(
                is_categorical=shard_slice(categorical.is_categorical),
                one_hot=shard_slice(categorical.one_hot),
            )
        return find_best_splits(
            part,
            *settings,
            shard_mask,
            first_feature=first_feature,
            reduce_max=functools.partial(lax.pmax, axis_name=axis_name),
            pick_first=first_across_shards(axis_name),
            cumulative=cumulative,
            min_child_samples=least_rows,
            rows_per_hessian=per_hessian,
            node_rows=node_rows,
            node_mask=node_mask,
            monotone=monotone,
            categorical=shard_categorical,
        )

    return search_slice


def _node_constraints(constraints: TreeConstraints | None, bounds: NodeBounds | None):
    """``(node_mask, monotone)`` for the split search of a level's nodes
    (see `jaxboost.engine.split.find_best_splits`), None each without."""
    if constraints is None:
        return None, None
    monotone = None
    if constraints.monotone is not None:
        monotone = (constraints.monotone, bounds.lower, bounds.upper)
    return node_feature_mask(constraints, bounds), monotone


def _children_boxes(boxes, choice):
    """The next level's `jaxboost.engine.neighbours.NodeBoxes` from a
    level's `SplitChoice` (categorical splits keep their node's box)."""
    whole = None
    if choice.category_left is not None:
        whole = is_categorical_node(choice.category_left)
    return children_boxes(
        boxes,
        choice.feature,
        choice.threshold_bin,
        choice.missing_left,
        choice.child_values,
        choice.do_split,
        whole,
    )


def _live_level(held: list, depth: int, max_leaves: int):
    """``(live, index, valid)`` of `jaxboost.engine.leafwise.live_slots` for
    a level of leaf-wise growth (``max_leaves``) with fewer live nodes than
    nodes, else None (every node summed and searched); ``held``: the
    `HeldNodes` of the levels above."""
    if not max_leaves or live_capacity(depth, max_leaves) >= 2**depth:
        return None
    return live_slots(held, depth, max_leaves)


def _level_choice(search, hist, bounds, live_level, n_nodes: int, node_rows=None):
    """``(choice, held)``: the `SplitChoice` of a level's ``n_nodes`` nodes
    from its histograms (and this shard's rows per node, ``node_rows``
    ``(n_nodes,)``, or None), of every node or of its live nodes only
    (``live_level``: `_live_level`; the others do not split), and the
    level's `HeldNodes`."""
    if live_level is None:
        choice = search(hist, bounds, node_rows)
        every = jnp.arange(n_nodes, dtype=jnp.int32)
        return choice, HeldNodes(every, jnp.ones(n_nodes, bool), choice.gain)
    live, index, valid = live_level
    live_bounds = None
    if bounds is not None:
        live_bounds = NodeBounds(*(None if part is None else part[index] for part in bounds))
    choice = search(hist, live_bounds, None if node_rows is None else node_rows[index])
    held = HeldNodes(index, valid, choice.gain, live.slot_of_node(n_nodes))
    return spread_choice(choice, index, valid, n_nodes), held


def grow_tree(
    bins: jax.Array,
    row_stats: jax.Array,
    edges: jax.Array,
    params: TreeParams,
    axis_name: str | None,
    feature_mask: jax.Array | None = None,
    stats_scale: jax.Array | None = None,
    leaf_columns: Sequence[jax.Array] = (),
    leaf_sums: Callable = leaf_sums_reference,
    packed: PackedBins | None = None,
    constraints: TreeConstraints | None = None,
    categorical: CategoricalSearch | None = None,
    row_positive: jax.Array | None = None,
) -> tuple:
    """Grow the splits of one tree, level by level, on one shard of rows.

    Each level builds the histograms of all its nodes in one pass over the
    rows, sums them over shards (``psum``), so every shard takes the same
    decisions, and routes the rows one level down.  With
    ``params.max_leaves`` a level builds and searches the histograms of its
    live nodes only (at most ``2 max_leaves``) and the tree is then pruned
    to the best-first tree of that many leaves (`jaxboost.engine.leafwise`).

    Args:
      bins: ``(n_features, n_rows)`` uint8, missing bin ``max_bins``.
      row_stats: ``(n_rows, 2 * n_outputs)`` float32 ``[grad, hess]``.
      edges: ``(n_features, max_bins)`` float32 upper bin edges.
      axis_name: the mesh axis the rows are sharded over, or None.
      feature_mask: ``(n_features,)`` bool, the features the tree may split on.
      stats_scale: ``(n_stats,)`` float32 when ``row_stats`` are quantised
        (int32, see `jaxboost.engine.quantise`): what one unit of each column
        is worth.
      leaf_columns: per-row values to sum by leaf, each ``(c_j, n_rows)``
        float32 (`jaxboost.engine.leaves.leaf_columns`); the last routing
        sums them (the native kernel in the same pass).
      leaf_sums: how a kernel that routes and sums apart sums them
        (`jaxboost.kernels.leaf_sums.LeafKernels`).
      packed: the features' used bins (`jaxboost.engine.packed_split`):
        the histograms hold and the search reads only those; None: every
        feature's histograms padded to ``max_bins + 1`` bins.
      constraints: monotone and interaction constraints
        (`jaxboost.engine.constraints`), or None.
      categorical: the categorical features (`jaxboost.engine.categorical`),
        or None; the kernel must route by `LevelSplit`'s ``category_left``
        (the reference's does).
      row_positive: ``(n_rows,)`` bool, the rows of positive weight, when
        children must hold ``params.min_child_samples`` rows and
        ``params.rows_per_hessian`` is None: the kernel counts them in every
        node as it routes the rows, and the search estimates each child's
        rows from its node's (`jaxboost.engine.split.find_best_splits`).
    Returns:
      The tree's internal nodes, ``leaf_of_row``: ``(n_rows,)`` int32 in
      ``[0, 2^max_depth)``, and this shard's sums of ``leaf_columns`` by leaf,
      ``(2^max_depth, V)`` float32 (None without columns); with
      ``constraints``, a fourth: the leaves' `NodeBounds` (basic
      method), or their `jaxboost.engine.neighbours.NodeBoxes`
      (intermediate: the bounds come from the leaves' values,
      `jaxboost.engine.neighbours.ordered_leaves`).
    """
    n_outputs = row_stats.shape[1] // 2
    kernel = HISTOGRAM_KERNELS[params.histogram_kernel]
    slots = None if packed is None else slot_layout(packed)
    max_bins = edges.shape[1]
    node_of_row = jnp.zeros(bins.shape[1], jnp.int32)
    search = _split_search(
        bins.shape[0],
        params,
        n_outputs,
        feature_mask,
        axis_name,
        kernel.cumulative,
        packed,
        constraints,
        categorical,
        native=covers(
            params.histogram_kernel, n_outputs, constraints, categorical, stats_scale is not None
        ),
    )
    bounds = None if constraints is None else root_bounds(constraints)
    boxes = None  # monotone_constraints_method="intermediate": the level's boxes
    if constraints is not None and constraints.intermediate:
        boxes = root_boxes(bins.shape[0], max_bins)
    levels, level_bounds = [], []
    carry = None  # what the kernel keeps from the level above (native: its sums)
    split = None  # the level above's splits: the kernel routes the rows by them
    held = []  # leaf-wise: each level's HeldNodes, the table best-first growth reads
    for depth in range(params.max_depth):
        n_nodes, n_bins = 2**depth, max_bins + 1
        live_level = _live_level(held, depth, params.max_leaves)
        live = None if live_level is None else live_level[0]
        node_rows = None
        if stats_scale is None and row_positive is None:
            hist, carry, node_of_row = kernel.level(
                bins, node_of_row, row_stats, n_nodes, n_bins, carry, split, slots, live
            )
        elif stats_scale is None:
            hist, carry, node_of_row, node_rows = kernel.level(
                bins,
                node_of_row,
                row_stats,
                n_nodes,
                n_bins,
                carry,
                split,
                slots,
                live,
                row_positive,
            )
        else:
            hist, carry, node_of_row = kernel.level_quantised(
                bins,
                node_of_row,
                row_stats,
                stats_scale,
                n_nodes,
                n_bins,
                carry,
                split,
                slots,
                live,
            )
        if boxes is not None:
            lower, upper = search_bounds(constraints.monotone, boxes)
            bounds = bounds._replace(lower=lower, upper=upper)
        choice, level_held = _level_choice(search, hist, bounds, live_level, n_nodes, node_rows)
        if params.max_leaves and held:
            held[-1] = with_children(held[-1], level_held)
        held.append(level_held)
        if constraints is not None:
            level_bounds.append(bounds)
            bounds = children_bounds(
                constraints, bounds, choice.feature, choice.do_split, choice.middle
            )
        if boxes is not None:
            boxes = _children_boxes(boxes, choice)
        feature = jnp.where(choice.do_split, choice.feature, 0)
        threshold_bin = jnp.where(choice.do_split, choice.threshold_bin, max_bins - 1)
        missing_left = jnp.where(choice.do_split, choice.missing_left, True)
        threshold = jnp.where(choice.do_split, edges[feature, threshold_bin], jnp.inf)
        category_left = choice.category_left
        if category_left is not None:  # a categorical node's numeric test sends all left
            numeric = ~is_categorical_node(category_left)
            threshold_bin = jnp.where(numeric, threshold_bin, max_bins - 1)
            threshold = jnp.where(numeric, threshold, jnp.inf)
        levels.append(
            TreeStructure(
                feature, threshold, threshold_bin, missing_left, choice.gain, category_left
            )
        )
        split = LevelSplit(
            feature, threshold_bin, missing_left, missing_bin=max_bins, category_left=category_left
        )
    structure = jax.tree.map(lambda *parts: jnp.concatenate(parts), *levels)
    if not leaf_columns:
        leaf_of_row, sums = kernel.route(bins, node_of_row, split), None
    else:
        leaf_of_row, sums = kernel.route_and_sum(bins, node_of_row, split, leaf_columns, leaf_sums)
    if params.max_leaves:
        node_bounds = None
        if constraints is not None and boxes is None:
            node_bounds = jax.tree.map(lambda *parts: jnp.concatenate(parts), *level_bounds, bounds)
        chosen = heap_chosen(held, best_first_table(held, params.max_leaves))
        structure, leaf_of_row, sums, bounds = best_first_tree(
            structure, leaf_of_row, sums, node_bounds, params.max_leaves, max_bins, chosen
        )
    if boxes is not None:  # the leaves' boxes: their values are ordered once computed
        bounds = leaf_boxes(structure, bins.shape[0], max_bins)
    if constraints is None:
        return structure, leaf_of_row, sums
    return structure, leaf_of_row, sums, bounds

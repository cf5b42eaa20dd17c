"""Where best-first growth (`jaxboost.engine.bestfirst`) keeps each leaf's
rows, and how a step splits them and sums its children's histograms.

Two layouts of the same leaves:

- the reference's: ``node_of_row (n_rows,)`` int32, every row's leaf.  A
  step routes the split leaf's rows and sums the two children's histograms
  by passes over every row: ``O(n F)`` a step.
- the native kernel's, LightGBM's data partition (`Segments`): ``order``,
  a permutation of the shard's rows in which leaf ``j``'s rows are
  ``order[start[j] : start[j] + count[j]]``, in increasing row order.  A
  step partitions the split leaf's segment in place (stably: the rows going
  left keep its start, the left child keeps its leaf number), sums the
  smaller child's rows and takes the other child as the parent's histogram
  minus it, from a table of every leaf's histograms
  (`jaxboost.kernels.leaf_histogram`): ``O(m)`` for a leaf of ``m`` rows,
  and ``O(m' F)`` for its smaller child's ``m'``.  Every row's leaf (for
  the leaf sums and the next round's scores) is made once, when the tree is
  grown.

Both sum a leaf's rows in increasing row order (in float64 where native),
so they make the same splits; the gains differ in the last digits (the
subtraction).  Several devices:
each shard keeps its own rows' layout; the caller sums the histograms and
counts over shards.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..kernels.histogram_reference import build_histograms
from ..kernels.leaf_histogram import native_leaf_of_row, native_leaf_split, native_row_major_bins
from .split import SplitChoice


class Segments(NamedTuple):
    """Each leaf's rows as a segment of a permutation of the rows."""

    order: jax.Array  # (n_rows,) int32: the rows, leaf by leaf
    start: jax.Array  # (L,) int32: where each leaf's rows begin in order
    count: jax.Array  # (L,) int32: how many there are (0: no leaf yet)
    # (L, F, n_bins, S) float32 each leaf's histograms (in the stats' units),
    # its children's parent when it is split
    hist: jax.Array


class Step(NamedTuple):
    """What a split (or the root) gives the next step's search."""

    rows: Segments | jax.Array  # the leaves' rows after it
    hist: jax.Array  # (F, 2, n_bins, S) the two children's histograms
    node_rows: jax.Array | None  # (2,) int32 their rows in row_positive, or None


def goes_right(row_bin: jax.Array, choice: SplitChoice, missing_bin: int) -> jax.Array:
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


def row_major_bins(bins: jax.Array) -> jax.Array:
    """``(n_rows, n_features)`` uint8 the bins stored by tiles of rows
    (`jaxboost.engine.binning.tile_bins`, ``(n_features, n_rows)``) row by
    row, as the native step sums them: a summed row's bins are one or two
    cache lines, where by tiles they are one a feature (leaves deep in a
    tree hold rows far apart, each feature's bin a miss of its own)."""
    return native_row_major_bins(bins)


def _scaled(hist: jax.Array, stats_scale: jax.Array | None) -> jax.Array:
    """Histograms of quantised stats (exact integer sums) in their units."""
    return hist if stats_scale is None else hist.astype(jnp.float32) * stats_scale


def _reference_children(bins, node_of_row, row_stats, stats_scale, row_positive, leaves, n_bins):
    """The `Step` of the two leaves ``leaves (2,)`` by passes over every row."""
    slot = jnp.where(node_of_row == leaves[0], 0, jnp.where(node_of_row == leaves[1], 1, 2))
    hist = build_histograms(bins, slot, row_stats, 3, n_bins)[:, :2]
    node_rows = None
    if row_positive is not None:
        node_rows = jnp.sum(
            row_positive[None, :] & (slot[None, :] == jnp.arange(2)[:, None]),
            axis=1,
            dtype=jnp.int32,
        )
    return Step(node_of_row, _scaled(hist, stats_scale), node_rows)


def _native_split(
    bins, segments, row_stats, stats_scale, row_positive, leaves, rule, n_bins, smaller=True
):
    """Split ``leaves[0]``'s segment by ``rule`` (`native_leaf_split`'s
    ``rule`` and ``category_left``) into ``leaves``; its `Step`."""
    best, new = leaves[0], leaves[1]
    # (a leaf past the table: no rows, nothing kept)
    segment = jnp.stack(
        [
            segments.start.at[best].get(mode="fill", fill_value=0),
            segments.count.at[best].get(mode="fill", fill_value=0),
        ]
    )
    order, table, hist, rows = native_leaf_split(
        *bins,
        row_stats,
        segments.order,
        segments.hist,
        row_positive,
        leaves,
        segment,
        *rule,
        smaller=smaller,
    )
    start = segments.start.at[new].set(segments.start[best] + rows[0], mode="drop")
    count = segments.count.at[best].set(rows[0], mode="drop").at[new].set(rows[1], mode="drop")
    node_rows = None if row_positive is None else rows[2:]
    return Step(Segments(order, start, count, table), _scaled(hist, stats_scale), node_rows)


def root_step(native, bins, row_stats, stats_scale, row_positive, n_leaves, n_bins) -> Step:
    """Every row in leaf 0: the rows' layout, and the histograms of leaf 0
    and of the empty leaf ``n_leaves`` (dropped where they are set).

    ``bins``: ``(n_features, n_rows)``, or where ``native`` those stored
    by tiles and `row_major_bins` of them; ``row_stats``: float32 where
    ``native`` (quantised stats converted once, not at every step)."""
    n_features, n_rows = bins[0].shape if native else bins.shape
    if not native:
        node_of_row = jnp.zeros(n_rows, jnp.int32)
        leaves = jnp.array([0, n_leaves], jnp.int32)
        return _reference_children(
            bins, node_of_row, row_stats, stats_scale, row_positive, leaves, n_bins
        )
    segments = Segments(
        order=jnp.arange(n_rows, dtype=jnp.int32),
        start=jnp.zeros(n_leaves, jnp.int32),
        count=jnp.zeros(n_leaves, jnp.int32).at[0].set(n_rows),
        hist=jnp.zeros((n_leaves, n_features, n_bins, row_stats.shape[1]), jnp.float32),
    )
    every_row_left = (jnp.array([0, n_bins - 1, 1], jnp.int32), None)
    leaves = jnp.array([0, n_leaves], jnp.int32)
    return _native_split(
        bins,
        segments,
        row_stats,
        stats_scale,
        row_positive,
        leaves,
        every_row_left,
        n_bins,
        smaller=False,
    )


def split_step(
    native, bins, row_stats, stats_scale, row_positive, rows, leaves, choice, n_bins
) -> Step:
    """Split leaf ``leaves[0]`` by ``choice`` (one leaf's `SplitChoice`): the
    rows going left keep its number, those going right take ``leaves[1]``
    (leaves past the table: nothing moves)."""
    if native:
        rule = jnp.stack(
            [choice.feature, choice.threshold_bin, choice.missing_left.astype(jnp.int32)]
        )
        return _native_split(
            bins,
            rows,
            row_stats,
            stats_scale,
            row_positive,
            leaves,
            (rule, choice.category_left),
            n_bins,
        )
    row_bin = lax.dynamic_index_in_dim(bins, choice.feature, keepdims=False).astype(jnp.int32)
    moved = (rows == leaves[0]) & goes_right(row_bin, choice, n_bins - 1)
    node_of_row = jnp.where(moved, leaves[1], rows)
    return _reference_children(
        bins, node_of_row, row_stats, stats_scale, row_positive, leaves, n_bins
    )


def leaf_of_row(rows: Segments | jax.Array) -> jax.Array:
    """``(n_rows,)`` int32 every row's leaf."""
    if not isinstance(rows, Segments):
        return rows
    return native_leaf_of_row(rows.order, rows.start, rows.count)

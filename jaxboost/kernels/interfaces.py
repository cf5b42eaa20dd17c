"""What the engine and the kernels exchange: a level's splits, and the
interface every histogram kernel offers (one per platform and kind, chosen by
`jaxboost.kernels.registry`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp


class LevelSplit(NamedTuple):
    """The splits of a level, as its rows are routed by them to the next
    (`jaxboost.kernels.histogram_kernels.route_rows`): every array is ``(n_nodes,)``; a node
    that does not split sends every row left."""

    feature: jax.Array  # int32
    threshold_bin: jax.Array  # int32: value bins <= threshold_bin go left
    missing_left: jax.Array  # bool: the missing bin goes left
    missing_bin: int  # the bin index of missing values (static)
    # (n_nodes, 8) uint32: the bins a categorical split sends left, zero at
    # numeric nodes (jaxboost.engine.categorical), or None
    category_left: jax.Array | None = None


class LiveSlots(NamedTuple):
    """A level's histograms for some of its nodes only (leaf-wise growth,
    `jaxboost.engine.leafwise.live_slots`), as pairs of siblings: slots
    ``2j`` and ``2j + 1`` hold the children of node ``parent_node[j]`` of the
    level above, whose sums a kernel that subtracts reads in slot
    ``parent_slot[j]`` of that level's; ``parent_node`` -1: padding, empty.
    The other nodes' rows are routed as usual but summed nowhere."""

    parent_node: jax.Array  # (n_pairs,) int32 node within the level above, or -1
    parent_slot: jax.Array  # (n_pairs,) int32 its slot in the level above's sums

    def slot_of_node(self, n_nodes: int) -> jax.Array:
        """``(n_nodes,)`` int32 slot of each of the level's nodes, ``2 n_pairs``
        (one past the slots) where it has none."""
        n_slots = 2 * self.parent_node.shape[0]
        child = 2 * self.parent_node[:, None] + jnp.arange(2, dtype=jnp.int32)
        child = jnp.where(self.parent_node[:, None] >= 0, child, n_nodes).reshape(-1)
        empty = jnp.full(n_nodes, n_slots, jnp.int32)
        return empty.at[child].set(jnp.arange(n_slots, dtype=jnp.int32), mode="drop")


class SlotLayout(NamedTuple):
    """Histograms that hold only the bins each feature uses (packed): within
    a node, feature ``f``'s value bins and then its missing bin in slots
    ``[start[f], start[f + 1])`` (at least 2); slots from ``start[-1]`` on are
    padding, 0.  A level's running sums over the value bins (see
    ``cumulative`` below; the missing bin as it is) are slot-major,
    ``(n_slots, n_nodes, n_stats)``, so that the split search gathers whole
    rows of nodes; the plain sums a kernel keeps for the next level
    node-major, ``(n_nodes, n_slots, n_stats)``, so that every node's offset
    is ``node * n_slots``, as in the padded layout ``(n_features, n_nodes,
    n_bins, n_stats)`` every feature's is ``feature * n_nodes * n_bins``."""

    start: jax.Array  # (n_features + 1,) int32, rising from 0
    n_slots: int  # static: slots per node, padding included
    # (n_features,) bool: False where a feature has no missing values, so a
    # kernel may take its bins as its slots without moving the missing bin
    has_missing: jax.Array


class HistogramKernel(Protocol):
    """A way to build a level's histograms, and to route its rows down.

    ``level(bins, node_of_row, row_stats, n_nodes, n_bins, parent, split,
    slots=None, live=None, row_positive=None) -> (hist, carry, node_of_row[,
    node_rows])``: ``hist``
    ``(n_features, n_nodes, n_bins, n_stats)`` float32, or with ``slots`` (a
    `SlotLayout`) ``(n_slots, n_nodes, n_stats)`` running sums; with
    ``live`` (a `LiveSlots`, never at the root) its ``2 n_pairs`` slots in
    place of the ``n_nodes`` nodes,
    ``carry`` what the next level gets as ``parent`` (None at the root), and
    the rows' nodes within the level; with ``row_positive`` (``(n_rows,)``
    bool) a fourth, ``node_rows`` ``(n_nodes,)`` int32: its rows in every
    node of the level (live or not), counted as the rows are routed.  With ``split`` (a
    `LevelSplit`; None at the root), ``node_of_row`` is the level
    above's and the rows are routed by it first.  A kernel that sums
    children by subtraction (native) gets ``parent`` with ``split``.
    ``cumulative``: the padded ``hist`` holds running sums over the value
    bins (see `jaxboost.engine.split.find_best_splits`); packed, every
    kernel's does.
    ``level_quantised(bins, node_of_row, quantised_stats, scale, n_nodes,
    n_bins, parent, split, slots=None, live=None)``: the same for ``(n_rows, n_stats)`` int32
    statistics (`jaxboost.engine.quantise`), summed exactly; ``hist`` is
    the sums times ``scale`` ``(n_stats,)``, float32.
    ``route``: sends the rows one level down, as
    `jaxboost.kernels.histogram_kernels.route_rows` does.
    ``route_and_sum(bins, node_of_row, split, columns, leaf_sums) -> (next,
    sums)``: ``route``, and the sums ``(2 n_nodes, V)`` of ``columns`` (each
    ``(c_j, n_rows)``, ``V`` rows in all) over the rows of every node of the
    next level, as ``leaf_sums`` (`jaxboost.kernels.leaf_sums.LeafKernels`)
    gives them on the columns stacked (native: in the routing's pass).
    """

    level: Callable
    cumulative: bool
    level_quantised: Callable
    route: Callable
    route_and_sum: Callable

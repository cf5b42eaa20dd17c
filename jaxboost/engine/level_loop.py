"""Growing a depth-wise tree with one copy of a level's program.

Every level runs in one ``lax.fori_loop`` at the shape of the widest level,
``W = 2^(max_depth - 1)`` nodes: a level of ``2^d`` nodes holds its nodes in
the first ``2^d`` of its ``W`` histogram slots (node ``i`` in slot ``i``), and
the kernel leaves the other slots alone (`LiveSlots` with absent pairs: no
rows, never summed or written).  The split search reads the live slots in
chunks of ``CHUNK_NODES`` nodes, ``ceil(2^d / CHUNK_NODES)`` of them (a
dynamic trip count), so a level costs its own nodes' search and not the
widest level's.  Unrolled, every level is a copy of the split search (about
320 HLO operations each, most of a program's compile time: see
benchmarks/README.md, "Compile time"); looped, there is one.

The trees equal the unrolled growth's (`jaxboost.engine.tree.grow_tree`)
bit for bit (tests/test_level_loop.py): every node's search reads the same
sums, and the kernels sum the same rows in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..kernels.interfaces import LevelSplit, LiveSlots
from .categorical import BITSET_WORDS, is_categorical_node

# nodes searched at once: a level of fewer searches this many (its absent
# slots' results dropped), a wider one ceil(nodes / CHUNK_NODES) chunks
CHUNK_NODES = 4
# deepest tree grown in the loop.  The loop writes a widest level's sums
# more than the unrolled levels do (the root's padded to the widest level,
# and the last level's passed through the loop's last step): about 36 MB a
# tree at depth 8 with 28 features, 150 MB at depth 10, which a deep tree on
# many rows would pay in run time.  (Past 2^10 nodes a level the native
# kernel would also pick the children it sums by row counts, not as
# unrolled: jaxboost/kernels/native/histogram.cc.)
MAX_LOOPED_DEPTH = 8
# a pair of LiveSlots that is absent: no rows, its slots not written
ABSENT = -(2**31)  # INT32_MIN


class LevelArrays(NamedTuple):
    """The internal nodes of a tree, ``(2^D - 1, ...)``, as
    `jaxboost.engine.tree.TreeStructure`'s fields."""

    feature: jax.Array
    threshold: jax.Array
    threshold_bin: jax.Array
    missing_left: jax.Array
    split_gain: jax.Array
    category_left: jax.Array | None


def loops_levels(max_depth: int, max_leaves: int, constrained: bool, n_shards: int) -> bool:
    """Whether a tree grows in the level loop: depth-wise (no
    ``max_leaves``), without constraints, on one shard, 2 to
    ``MAX_LOOPED_DEPTH`` levels.  (On two CPU devices the looped search,
    whose chunks each run the shards' collectives, made a 200k-row fit's
    trees about twice as slow: several shards grow unrolled.)"""
    return (
        not max_leaves and not constrained and n_shards == 1 and 2 <= max_depth <= MAX_LOOPED_DEPTH
    )


def _empty_choice(width: int, categorical: bool) -> tuple:
    """``(feature, threshold_bin, missing_left, gain, do_split,
    category_left)`` of ``width`` nodes that do not split."""
    return (
        jnp.zeros(width, jnp.int32),
        jnp.zeros(width, jnp.int32),
        jnp.zeros(width, bool),
        jnp.zeros(width, jnp.float32),
        jnp.zeros(width, bool),
        jnp.zeros((width, BITSET_WORDS), jnp.uint32) if categorical else None,
    )


def search_chunks(
    search: Callable, hist: jax.Array, n_nodes: jax.Array, categorical: bool, chunk: int
):
    """The split choice of the first ``n_nodes`` (traced) of the
    ``hist.shape[1]`` slots of ``hist`` (nodes on axis 1, as every kernel
    lays them out), searched ``chunk`` at a time; ``(feature,
    threshold_bin, missing_left, gain, do_split, category_left)``, each
    ``(width, ...)``, undefined past ``n_nodes``."""
    width = hist.shape[1]

    def one_chunk(k, choice):
        start = k * chunk
        part = lax.dynamic_slice_in_dim(hist, start, chunk, axis=1)
        found = search(part)
        found = (
            found.feature,
            found.threshold_bin,
            found.missing_left,
            found.gain,
            found.do_split,
            found.category_left,
        )
        return jax.tree.map(
            lambda whole, new: lax.dynamic_update_slice_in_dim(whole, new, start, 0),
            choice,
            found,
        )

    n_chunks = (n_nodes + chunk - 1) // chunk
    return lax.fori_loop(0, n_chunks, one_chunk, _empty_choice(width, categorical))


def _pad_nodes(sums: jax.Array | None, axis: int, width: int) -> jax.Array | None:
    """The root's ``sums`` (one node on ``axis``) padded with zeros to
    ``width`` nodes."""
    if sums is None:
        return None
    widths = [(0, 0)] * sums.ndim
    widths[axis] = (0, width - sums.shape[axis])
    return jnp.pad(sums, widths)


def grow_levels(
    level: Callable,
    search: Callable,
    n_rows: int,
    max_depth: int,
    edges: jax.Array,
    categorical: bool,
    packed: bool,
) -> tuple[LevelArrays, jax.Array, LevelSplit]:
    """The splits of a depth-wise tree, every level in one loop.

    Args:
      level: ``(node_of_row, n_nodes, parent, split, live) -> (hist, carry,
        node_of_row)``, a `jaxboost.kernels.interfaces.HistogramKernel`'s
        ``level`` (or ``level_quantised``) with the bins, statistics,
        bins per feature and slot layout bound.
      search: a level's histograms of ``N`` nodes -> their
        `jaxboost.engine.split.SplitChoice` (``(N,)`` each).
      n_rows: this shard's rows.
      max_depth: the tree's depth, 2 to ``MAX_LOOPED_DEPTH``.
      edges: ``(n_features, max_bins)`` float32 upper bin edges.
      categorical: the search returns category sets.
      packed: the histograms are packed in slots (the kernel's ``carry``
        then holds its nodes on axis 0, else on axis 1).
    Returns:
      The tree's internal nodes, ``node_of_row`` within the last level, and
      that level's `LevelSplit`, by which the caller routes the rows to the
      leaves.
    """
    width = 2 ** (max_depth - 1)
    chunk = min(CHUNK_NODES, width)
    max_bins = edges.shape[1]
    n_internal = 2**max_depth - 1
    slot = jnp.arange(width, dtype=jnp.int32)
    pair = jnp.arange(width // 2, dtype=jnp.int32)

    hist, carry, node_of_row = level(jnp.zeros(n_rows, jnp.int32), 1, None, None, None)
    hist = _pad_nodes(hist, 1, width)
    carry = _pad_nodes(carry, 0 if packed else 1, width)
    filler = _empty_choice(width, categorical)
    # the level's splits (LevelSplit's arrays), by which the next routes its rows
    split = (filler[0], jnp.full(width, max_bins - 1, jnp.int32), ~filler[2], filler[5])
    arrays = LevelArrays(
        jnp.zeros(n_internal, jnp.int32),
        jnp.zeros(n_internal, jnp.float32),
        jnp.zeros(n_internal, jnp.int32),
        jnp.zeros(n_internal, bool),
        jnp.zeros(n_internal, jnp.float32),
        None if not categorical else jnp.zeros((n_internal, BITSET_WORDS), jnp.uint32),
    )

    def one_level(depth, state):
        hist, carry, node_of_row, split, arrays = state
        n_nodes = jnp.left_shift(jnp.int32(1), depth)
        feature, threshold_bin, missing_left, gain, do_split, category_left = search_chunks(
            search, hist, n_nodes, categorical, chunk
        )
        do_split = do_split & (slot < n_nodes)  # the slots past the level's nodes: absent
        feature = jnp.where(do_split, feature, 0)
        threshold_bin = jnp.where(do_split, threshold_bin, max_bins - 1)
        missing_left = jnp.where(do_split, missing_left, True)
        threshold = jnp.where(do_split, edges[feature, threshold_bin], jnp.inf)
        gain = jnp.where(do_split, gain, 0.0)
        if category_left is not None:  # a categorical node's numeric test sends all left
            category_left = jnp.where(do_split[:, None], category_left, jnp.uint32(0))
            numeric = ~is_categorical_node(category_left)
            threshold_bin = jnp.where(numeric, threshold_bin, max_bins - 1)
            threshold = jnp.where(numeric, threshold, jnp.inf)
        # the level's nodes from 2^d - 1 on: the slots past them are written
        # over by the levels below
        first = n_nodes - 1
        found = LevelArrays(feature, threshold, threshold_bin, missing_left, gain, category_left)
        arrays = jax.tree.map(
            lambda whole, new: lax.dynamic_update_slice_in_dim(whole, new, first, 0),
            arrays,
            found,
        )
        split = (feature, threshold_bin, missing_left, category_left)

        def children(hist, carry, node_of_row):
            live = LiveSlots(jnp.where(pair < n_nodes, pair, ABSENT), pair)
            routed_by = LevelSplit(*split[:3], max_bins, split[3])
            return level(node_of_row, width, carry, routed_by, live)

        def last(hist, carry, node_of_row):  # the caller routes the rows to the leaves
            return hist, carry, node_of_row

        hist, carry, node_of_row = lax.cond(
            depth + 1 < max_depth, children, last, hist, carry, node_of_row
        )
        return hist, carry, node_of_row, split, arrays

    state = (hist, carry, node_of_row, split, arrays)
    _, _, node_of_row, split, arrays = lax.fori_loop(0, max_depth, one_level, state)
    return arrays, node_of_row, LevelSplit(*split[:3], max_bins, split[3])

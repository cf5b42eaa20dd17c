"""The native CPU histogram kernel: C++ (``native/histogram.cc``), with subtraction.

It sums a level's histograms in float64 and, below the root, routes the rows
of the level above (counting the children's rows in the same pass), sums only
the smaller child of every parent and takes its sibling as parent minus child,
so a level passes over at most half of the rows (XLA's scatter-add cannot
skip rows: it costs per update, kept or not).  The plain reference it must
equal is `jaxboost.kernels.histogram_reference.build_histograms`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .histogram_reference import rows_by_node
from .interfaces import LevelSplit, LiveSlots, SlotLayout
from .native_library import load
from .route_native import split_buffers


def native_level_histograms(
    bins: jax.Array,
    node_of_row: jax.Array,
    row_stats: jax.Array,
    n_nodes: int,
    n_bins: int,
    parent: jax.Array | None,
    split: LevelSplit | None = None,
    slots: SlotLayout | None = None,
    live: LiveSlots | None = None,
    row_positive: jax.Array | None = None,
) -> tuple:
    """One level's histograms, from its parents' when ``parent`` is given.

    Args:
      bins: ``(n_features, n_rows)`` uint8 bin of every value, stored by
        tiles of rows (`jaxboost.engine.binning.tile_bins`).
      node_of_row: ``(n_rows,)`` int32 node within the level, or within the
        level above when ``split`` is given.
      row_stats: ``(n_rows, n_stats)`` float32 statistics to sum.
      n_nodes: nodes in the level (``2 * parents`` below the root).
      n_bins: bins per feature, the missing bin included.
      parent: ``(n_features, n_nodes // 2, n_bins, n_stats)`` float64, the
        level above's second result, or None at the root.
      split: the level above's splits, by which the rows are first routed,
        in the same call, which counts the children's rows as it routes them;
        given with ``parent`` and only then.
      slots: the histograms' packed layout, or None: padded.
      live: the level's nodes the histograms hold (leaf-wise growth: its
        live ones, `jaxboost.kernels.interfaces.LiveSlots`), ``n_nodes``
        then read as ``2 n_pairs`` in what is returned, ``parent`` the level
        above's slots; None: every node.  Given with ``split`` only.
      row_positive: ``(n_rows,)`` bool, the rows of positive weight: their
        number in every node of the level is returned too, tallied as the
        rows are routed (at the root, a sum); None: not counted.
    Returns:
      ``(n_features, n_nodes, n_bins, n_stats)`` float32 running sums over the
      value bins (bin ``b`` holds bins ``0..b`` of what
      `jaxboost.kernels.histogram_reference.build_histograms` returns; the missing bin,
      the last, is as it is: see ``find_best_splits(cumulative=True)``), the
      plain sums in float64, for the next level (``parent`` is laid out the
      same), and ``(n_rows,)`` int32 ``node_of_row`` within the level.  With
      ``slots`` (`jaxboost.kernels.interfaces.SlotLayout`), the
      running sums are ``(slots.n_slots, n_nodes, n_stats)`` and the plain
      ones ``(n_nodes, slots.n_slots, n_stats)``.  With ``row_positive``, a
      fourth: ``(n_nodes,)`` int32, its rows in each node of the level (every
      node, live or not).
    """
    load()
    n_stats = row_stats.shape[1]
    n_held = _held_nodes(n_nodes, live)
    sums = _level_sums(bins.shape[0], n_held, n_bins, n_stats, n_stats, jnp.float64, slots)
    if parent is None:
        _check_afresh(split, live)
        # under vmap the kernel runs once per member
        call = jax.ffi.ffi_call("jaxboost_histogram_root", sums, vmap_method="sequential")
        exact, cumulative = call(
            bins,
            node_of_row,
            row_stats,
            *_layout_arguments(slots),
            n_nodes=np.int64(n_nodes),
            n_bins=np.int64(n_bins),
        )
        if row_positive is None:
            return cumulative, exact, node_of_row
        return cumulative, exact, node_of_row, rows_by_node(row_positive, node_of_row, n_nodes)
    tallied = 0 if row_positive is None else n_nodes
    call = jax.ffi.ffi_call(
        "jaxboost_histogram_children",
        (_nodes_like(node_of_row), *sums, jax.ShapeDtypeStruct((tallied,), jnp.int32)),
        vmap_method="sequential",
    )
    node_of_row, exact, cumulative, node_rows = call(
        bins,
        node_of_row,
        row_stats,
        parent,
        *_split_arguments(split),
        *_layout_arguments(slots),
        *_live_arguments(live),
        jnp.zeros(0, jnp.bool_) if row_positive is None else row_positive.astype(jnp.bool_),
        **_attributes(n_bins, split),
    )
    if row_positive is None:
        return cumulative, exact, node_of_row
    return cumulative, exact, node_of_row, node_rows


def native_level_histograms_quantised(
    bins: jax.Array,
    node_of_row: jax.Array,
    quantised_stats: jax.Array,
    scale: jax.Array,
    n_nodes: int,
    n_bins: int,
    parent: jax.Array | None,
    split: LevelSplit | None = None,
    slots: SlotLayout | None = None,
    live: LiveSlots | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`native_level_histograms` for integer statistics (see
    `jaxboost.engine.quantise`): every (gradient, hessian) pair of a row is
    packed into one int64 and summed exactly, with one integer add.

    Args:
      bins, node_of_row, n_nodes, n_bins, split, slots, live: as
        `native_level_histograms`.
      quantised_stats: ``(n_rows, 2K)`` int32 ``[gradients, hessians]``,
        each ``|value| < 2**31 / n_rows``.
      scale: ``(2K,)`` float32, the worth of one unit of each column.
      parent: ``(n_features, n_nodes // 2, n_bins, K)`` int64 packed sums,
        the level above's second result, or None at the root.
    Returns:
      ``(n_features, n_nodes, n_bins, 2K)`` float32 running sums of the
      columns times ``scale`` (as `native_level_histograms`), the exact
      packed sums ``(n_features, n_nodes, n_bins, K)`` int64, and
      ``node_of_row`` (with ``slots``: ``(n_slots, n_nodes, 2K)`` and
      ``(n_nodes, n_slots, K)``).
    """
    load()
    packed = packed_pairs(quantised_stats)
    n_features, n_columns = bins.shape[0], quantised_stats.shape[1]
    n_held = _held_nodes(n_nodes, live)
    sums = _level_sums(n_features, n_held, n_bins, n_columns // 2, n_columns, jnp.int64, slots)
    if parent is None:
        _check_afresh(split, live)
        call = jax.ffi.ffi_call("jaxboost_histogram_root_quantised", sums, vmap_method="sequential")
        exact, cumulative = call(
            bins,
            node_of_row,
            packed,
            scale,
            *_layout_arguments(slots),
            n_nodes=np.int64(n_nodes),
            n_bins=np.int64(n_bins),
        )
        return cumulative, exact, node_of_row
    call = jax.ffi.ffi_call(
        "jaxboost_histogram_children_quantised",
        (_nodes_like(node_of_row), *sums),
        vmap_method="sequential",
    )
    node_of_row, exact, cumulative = call(
        bins,
        node_of_row,
        packed,
        scale,
        parent,
        *_split_arguments(split),
        *_layout_arguments(slots),
        *_live_arguments(live),
        **_attributes(n_bins, split),
    )
    return cumulative, exact, node_of_row


def _level_sums(
    n_features: int,
    n_nodes: int,
    n_bins: int,
    n_stored: int,
    n_columns: int,
    exact_type,
    slots: SlotLayout | None,
) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
    """A level's sums as the kernels return them: ``n_stored`` exact sums of
    ``exact_type`` and ``n_columns`` float32 running sums per bin, both
    ``(n_features, n_nodes, n_bins, ...)``, or packed in ``slots``: ``(n_nodes,
    n_slots, ...)`` and slot-major ``(n_slots, n_nodes, ...)``."""
    if slots is None:
        exact = running = (n_features, n_nodes, n_bins)
    else:
        exact, running = (n_nodes, slots.n_slots), (slots.n_slots, n_nodes)
    return (
        jax.ShapeDtypeStruct((*exact, n_stored), exact_type),
        jax.ShapeDtypeStruct((*running, n_columns), jnp.float32),
    )


def _layout_arguments(slots: SlotLayout | None) -> tuple[jax.Array, jax.Array]:
    """The kernels' ``slot_start`` ``(n_features + 1,)`` int32 and
    ``has_missing`` ``(n_features,)`` bool, both ``(0,)`` for the padded
    layout."""
    if slots is None:
        return jnp.zeros(0, jnp.int32), jnp.zeros(0, jnp.bool_)
    return slots.start.astype(jnp.int32), slots.has_missing.astype(jnp.bool_)


def _check_afresh(split: LevelSplit | None, live: LiveSlots | None) -> None:
    """A level summed afresh (no ``parent``) takes its rows as they are,
    every node."""
    if split is not None:
        raise ValueError("the native kernel routes the rows only with the parents' sums")
    if live is not None:
        raise ValueError("the native kernel sums live nodes only from their parents' sums")


def _held_nodes(n_nodes: int, live: LiveSlots | None) -> int:
    """The nodes a level's histograms hold: all ``n_nodes``, or ``live``'s slots."""
    return n_nodes if live is None else 2 * live.parent_node.shape[0]


def _live_arguments(live: LiveSlots | None) -> tuple[jax.Array, jax.Array]:
    """The children kernels' ``parent_node`` and ``parent_slot``, ``(n_pairs,)``
    int32 each, or ``(0,)`` each: every node."""
    if live is None:
        return jnp.zeros(0, jnp.int32), jnp.zeros(0, jnp.int32)
    return live.parent_node.astype(jnp.int32), live.parent_slot.astype(jnp.int32)


def _nodes_like(node_of_row: jax.Array) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(node_of_row.shape, jnp.int32)


def _split_arguments(split: LevelSplit | None) -> tuple[jax.Array, ...]:
    """The children kernels' split buffers (`split_buffers`)."""
    if split is None:
        raise ValueError("the native kernel sums children as it routes: pass the level's split")
    return split_buffers(split)


def _attributes(n_bins: int, split: LevelSplit) -> dict[str, np.int64]:
    return {"n_bins": np.int64(n_bins), "missing_bin": np.int64(split.missing_bin)}


def packed_pairs(quantised_stats: jax.Array) -> jax.Array:
    """``(n_rows, 2K)`` int32 ``[gradients, hessians]`` as the native kernel
    reads them: ``(n_rows, 2K)`` int32 words whose pairs ``(2j, 2j+1)``, read as
    one little-endian int64, hold ``gradient_j * 2**32 + hessian_j`` (low
    word: the hessian's bits; high word: the gradient minus the borrow of a
    negative hessian).  Built inside the program, where XLA fuses it with the
    rounding, so the kernel packs nothing."""
    n_pairs = quantised_stats.shape[1] // 2
    grad, hess = quantised_stats[:, :n_pairs], quantised_stats[:, n_pairs:]
    high = grad - (hess < 0).astype(jnp.int32)
    return jnp.stack([hess, high], axis=2).reshape(quantised_stats.shape)

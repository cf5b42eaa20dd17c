"""Query groups (or strata) on the host: ``group=`` / ``qid=`` checked, rows
put in group order, groups placed whole on the devices' shards, and the
index tables of `jaxboost.engine.groups.GroupBucket` built.

Rows are taken in the order of a stable sort by ``qid`` (``group=`` sizes
already give that order), so a model does not depend on how the groups'
rows are interleaved in the input, only on each group's own row order (as
LightGBM's and XGBoost's, whose ranking objectives break ties in score by
row order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from ...engine.groups import GroupBucket
from ...losses.metadata import metadata_of
from ...runtime.padding import bucket_size


class GroupedRows(NamedTuple):
    """The groups of a data set."""

    order: np.ndarray  # (n_rows,) int64: the input's rows in group order
    sizes: np.ndarray  # (n_groups,) int64: the groups' sizes, in that order


class GroupPlacement(NamedTuple):
    """Rows in group order placed on ``n_shards`` shards of equal size, each
    group whole on one shard, and the shards' group tables."""

    gather: np.ndarray  # (n_padded,) int64: the input row at every place (0 on padding)
    present: np.ndarray  # (n_padded,) bool: the place holds a row (not padding)
    row_number: np.ndarray  # (n_padded,) uint32: the row's place in group order
    buckets: tuple[GroupBucket, ...]  # numpy tables, (n_shards * n_groups, width) each, widening


def grouped_rows(
    group: Any, qid: Any, n_rows: int, names: tuple[str, str] = ("group", "qid")
) -> GroupedRows | None:
    """The groups given as ``group`` (sizes, in row order) or ``qid`` (one id
    per row, in any order), checked; None when neither is given.

    Raises:
      ValueError: both given, sizes that are not positive whole numbers
        summing to ``n_rows``, or ids that are not one number or string
        per row (strings group by equality, in sorted order).
    """
    group_name, qid_name = names
    if group is not None and qid is not None:
        raise ValueError(f"{group_name}, {qid_name}: give one of them, not both")
    if group is not None:
        sizes = _whole_numbers(group, group_name)
        if sizes.size == 0 or np.any(sizes < 1) or int(sizes.sum()) != n_rows:
            raise ValueError(
                f"{group_name}: expected the sizes of the groups, positive whole numbers "
                f"summing to the number of rows ({n_rows}), got {sizes.size} sizes summing "
                f"to {int(sizes.sum())} (smallest {int(sizes.min()) if sizes.size else None})"
            )
        return GroupedRows(np.arange(n_rows), sizes)
    if qid is not None:
        ids = np.asarray(qid)
        if ids.ndim != 1 or ids.shape[0] != n_rows:
            raise ValueError(
                f"{qid_name}: expected one group id per row ({n_rows}), got shape {ids.shape}"
            )
        ids = _numeric_ids(ids, qid_name)
        order = np.argsort(ids, kind="stable")
        _, sizes = np.unique(ids[order], return_counts=True)
        return GroupedRows(order, sizes.astype(np.int64))
    return None


def _numeric_ids(ids: np.ndarray, name: str) -> np.ndarray:
    """Group ids as numbers: finite numbers as they are, strings (query
    names) as their rank among the distinct ones; a ValueError naming
    ``name`` for anything else (NaN, None, dates, mixed kinds)."""
    if ids.dtype.kind in "US" or (
        ids.dtype.kind == "O" and ids.size and all(isinstance(v, str) for v in ids.tolist())
    ):
        return np.unique(ids.astype(str), return_inverse=True)[1].reshape(-1)
    if ids.dtype.kind not in "iuf" or (ids.dtype.kind == "f" and not np.all(np.isfinite(ids))):
        raise ValueError(
            f"{name}: expected one group id per row, finite numbers or strings, got dtype "
            f"{ids.dtype} (missing or mixed ids?); give every row an id (numbers: "
            "pd.factorize(ids)[0])"
        )
    return ids


def _whole_numbers(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or array.dtype.kind not in "iuf":
        raise ValueError(f"{name}: expected a 1-D array of group sizes, got {array!r:.80}")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array) & (array == np.floor(array))):
        raise ValueError(f"{name}: expected whole numbers, got {array!r:.80}")
    return array.astype(np.int64)


def in_row_order(groups: GroupedRows, loss: Any, y: np.ndarray) -> GroupedRows:
    """``groups`` with each group's rows in the stable order of the loss's
    declared ``row_order`` keys of ``y`` (as they are without one)."""
    row_order = metadata_of(loss).row_order
    if row_order is None:
        return groups
    keys = np.asarray(row_order(y))[groups.order]
    group_of_row = np.repeat(np.arange(groups.sizes.size), groups.sizes)
    return GroupedRows(groups.order[np.lexsort((keys, group_of_row))], groups.sizes)


def one_group(n_rows: int) -> GroupedRows:
    """All rows as one group (a group loss fitted without ``group``/``qid``:
    Cox without strata)."""
    return GroupedRows(np.arange(n_rows), np.array([n_rows], np.int64))


def group_width(size: int) -> int:
    """The padded width of a group of ``size`` rows: a power of two."""
    return 1 << (int(size) - 1).bit_length()


def place_groups(
    groups: GroupedRows,
    n_shards: int,
    row_weight: np.ndarray | None = None,
    agreed: GroupShapes | None = None,
    first_row: int = 0,
) -> GroupPlacement:
    """Groups in order, cut into ``n_shards`` runs of whole groups of about
    equal rows, each run padded to the same shard size (a bucket size, so
    that nearby data sets share programs); every group weighs its first
    row's ``row_weight`` (``(n_rows,)``, the input's rows; default 1).

    With several processes each places its own groups on its own shards,
    in the shapes ``agreed`` between them (`agreed_shapes`: every process's
    programs take the same shapes), its rows numbered from ``first_row``
    (the rows of the processes before it)."""
    sizes = groups.sizes
    ends = np.cumsum(sizes)
    n_rows = int(ends[-1])
    # shard s ends at the group boundary nearest s * n_rows / n_shards
    boundaries = np.concatenate([[0], ends])  # rows before group g, g = 0 .. n_groups
    targets = np.arange(1, n_shards) * n_rows / n_shards
    right = np.clip(np.searchsorted(boundaries, targets), 1, sizes.size)
    left = right - 1
    nearest = np.where(targets - boundaries[left] <= boundaries[right] - targets, left, right)
    cuts = np.maximum.accumulate(np.concatenate([[0], nearest, [sizes.size]]))
    starts = np.concatenate([[0], ends[:-1]])
    group_weight = np.ones(sizes.size, np.float32)
    if row_weight is not None:
        group_weight = np.asarray(row_weight, np.float32)[groups.order[starts]]
    shard_rows = [int(sizes[cuts[s] : cuts[s + 1]].sum()) for s in range(n_shards)]
    n_padded = bucket_size(max(shard_rows) * n_shards, n_shards)
    if agreed is not None:
        n_padded = max(n_padded, agreed.rows_per_shard * n_shards)
    per_shard = n_padded // n_shards
    gather = np.zeros(n_padded, np.int64)
    present = np.zeros(n_padded, bool)
    row_number = np.zeros(n_padded, np.uint32)
    offset = first_row
    for shard in range(n_shards):
        first_row = int(boundaries[cuts[shard]])
        place, count = shard * per_shard, shard_rows[shard]
        gather[place : place + count] = groups.order[first_row : first_row + count]
        present[place : place + count] = True
        row_number[place : place + count] = offset + np.arange(first_row, first_row + count)
    # every group's shard, its first row within the shard, and its width
    shard_of = np.searchsorted(cuts, np.arange(sizes.size), side="right") - 1
    local_start = starts - boundaries[cuts[shard_of]]
    width_of = np.left_shift(1, np.frexp(sizes - 1)[1]).astype(np.int64)  # group_width
    buckets = []
    widths = set(np.unique(width_of).tolist())
    if agreed is not None:
        widths |= set(agreed.slots)
    for width in sorted(widths):
        chosen = np.flatnonzero(width_of == width)  # in order, so by shard
        shard = shard_of[chosen]
        # a group's slot: its place among its shard's groups of this width
        slot = np.arange(chosen.size) - np.searchsorted(shard, shard)
        n_slots = int(slot.max()) + 1 if chosen.size else 1
        if agreed is not None:
            n_slots = max(n_slots, agreed.slots.get(width, 1))
        offsets = np.arange(width)
        index = np.zeros((n_shards, n_slots, width), np.int32)
        mask = np.zeros((n_shards, n_slots, width), bool)
        mask[:, :, 0] = True  # unused slots: row 0, weight 0
        weight = np.zeros((n_shards, n_slots), np.float32)
        inside = offsets[None, :] < sizes[chosen][:, None]
        index[shard, slot] = np.where(inside, local_start[chosen][:, None] + offsets, 0)
        mask[shard, slot] = inside
        weight[shard, slot] = group_weight[chosen]
        buckets.append(
            GroupBucket(index.reshape(-1, width), mask.reshape(-1, width), weight.reshape(-1))
        )
    return GroupPlacement(gather, present, row_number, tuple(buckets))


class GroupShapes(NamedTuple):
    """The shapes of a group placement: rows per shard, and per group width
    the table slots per shard."""

    rows_per_shard: int
    slots: dict[int, int]  # width -> slots per shard


_WIDTH_BITS = 32  # group widths are powers of two below 2**32 (uint32 row numbers)


def placement_shapes(placement: GroupPlacement, n_shards: int) -> GroupShapes:
    """The shapes of ``placement`` (of ``n_shards`` shards)."""
    slots = {
        int(bucket.index.shape[1]): int(bucket.index.shape[0]) // n_shards
        for bucket in placement.buckets
    }
    return GroupShapes(placement.gather.shape[0] // n_shards, slots)


def agreed_shapes(shapes: GroupShapes, gather_same_shape: Callable) -> GroupShapes:
    """The shapes that hold every process's placement: the largest of each
    (``gather_same_shape``: `jaxboost.runtime.distributed`'s, every
    process's array)."""
    sent = np.zeros(_WIDTH_BITS + 1, np.int64)
    sent[0] = shapes.rows_per_shard
    for width, n_slots in shapes.slots.items():
        sent[width.bit_length()] = n_slots  # (width 2**k at k + 1)
    largest = gather_same_shape(sent).max(axis=0)
    slots = {1 << (bit - 1): int(n) for bit, n in enumerate(largest) if bit and n}
    return GroupShapes(int(largest[0]), slots)


def is_group_loss(loss: Any) -> bool:
    """Whether ``loss`` is declared ``per="group"`` (``loss(y, f, mask)``)."""
    return metadata_of(loss).per == "group"


def fit_groups(
    loss: Any,
    group: Any,
    qid: Any,
    y: np.ndarray,
    sample_weight: np.ndarray | None,
    settings: dict[str, Any],
) -> GroupedRows | None:
    """The training rows' groups for ``loss``: those given, or all rows as one
    group for a group loss given none (Cox without strata); None for a
    per-sample loss.

    Raises:
      ValueError: groups given to a per-sample loss, bad ``group``/``qid``,
        ``sample_weight`` (``(n_rows,)``, or None) that differs within a
        group, or a setting group losses do not take yet (``settings``: the
        Booster's ``leaf_method``, ``armijo``, ``n_outputs``).
    """
    n_rows = y.shape[0]
    groups = grouped_rows(group, qid, n_rows)
    if not is_group_loss(loss):
        if groups is not None:
            name = metadata_of(loss).name
            raise ValueError(
                f"{'group' if group is not None else 'qid'}: the loss {name!r} is a function "
                "of one sample; groups are for a group loss loss(y, f, mask), declared with "
                "losses.declare(..., per='group') (losses.lambdarank(), losses.cox, ...)"
            )
        return None
    if settings["leaf_method"] == "line_search":
        raise ValueError(
            "leaf_method: 'line_search' needs a per-sample loss (a group loss's leaves "
            "depend on each other); use 'newton', 'joint_newton' or 'auto'"
        )
    if settings["armijo"]:
        raise ValueError("armijo: needs a per-sample loss; leave it None for a group loss")
    if settings["n_outputs"] not in (None, 1):
        raise ValueError(f"n_outputs: a group loss scores one output, got {settings['n_outputs']}")
    if jax.process_count() > 1 and groups is None:
        name = metadata_of(loss).name
        raise ValueError(
            f"group, qid: with several processes the group loss {name!r} needs each "
            "process's groups (a group is whole in one process); without them all rows "
            "would be one group across the processes (Cox without strata: train in one "
            "process)"
        )
    groups = in_row_order(groups if groups is not None else one_group(n_rows), loss, y)
    if sample_weight is not None:
        check_group_weights(groups, sample_weight)
    return groups


def check_group_weights(groups: GroupedRows, weight: np.ndarray) -> None:
    """A group loss weighs whole groups: every row of a group must carry the
    same ``weight`` (the group's; XGBoost's ranking weights are per group)."""
    in_order = np.asarray(weight, np.float32)[groups.order]
    starts = np.concatenate([[0], np.cumsum(groups.sizes)[:-1]])
    low, high = np.minimum.reduceat(in_order, starts), np.maximum.reduceat(in_order, starts)
    uneven = np.flatnonzero(low != high)
    if uneven.size:
        first = int(uneven[0])
        raise ValueError(
            f"sample_weight: a group loss weighs whole groups, so every row of a group needs "
            f"the same weight; group {first} (in group order, {int(groups.sizes[first])} rows) "
            f"has weights from {low[first]:g} to {high[first]:g} ({uneven.size} such groups)"
        )


def eval_set_groups(eval_group: Any, eval_qid: Any, eval_set: Any, loss: Any) -> list | None:
    """Per evaluation set, its ``(group, qid)`` arguments (one of them None;
    both None: the set is one group), or None when no set has groups (a
    per-sample loss given neither).  Checks the entries' count only; each
    set's own are checked against its rows by `grouped_eval_set`."""
    n_sets = 0 if eval_set is None else len(eval_set)
    if eval_group is None and eval_qid is None:
        return [(None, None)] * n_sets if is_group_loss(loss) else None
    if eval_group is not None and eval_qid is not None:
        raise ValueError("eval_group, eval_qid: give one of them, not both")
    name, given = ("eval_group", eval_group) if eval_group is not None else ("eval_qid", eval_qid)
    if isinstance(given, np.ndarray) or len(given) != n_sets:
        raise ValueError(
            f"{name}: expected a list with one entry per eval_set ({n_sets}), got {given!r:.80}"
        )
    return [(entry, None) if eval_group is not None else (None, entry) for entry in given]


def grouped_eval_set(
    X: np.ndarray, y: np.ndarray, given: tuple[Any, Any], index: int, loss: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[GroupBucket, ...]]:
    """An evaluation set's rows in group order, padded: ``(X, y, weight (1
    on rows, 0 on padding), group tables)``; ``given`` its ``(group, qid)``
    (`eval_set_groups`), ``loss`` the training loss (its ``row_order``)."""
    names = (f"eval_group[{index}]", f"eval_qid[{index}]")
    groups = grouped_rows(*given, X.shape[0], names) or one_group(X.shape[0])
    if is_group_loss(loss):
        groups = in_row_order(groups, loss, y)
    placement = place_groups(groups, 1)
    weight = placement.present.astype(np.float32)
    return X[placement.gather], y[placement.gather], weight, placement.buckets

"""Categorical columns over several processes: the categories of all rows.

Each process sees its own rows, so the processes agree their category
tables from every process's categories, exchanged once: per categorical
column the union of the categories with their row counts summed.  Numbers
come out ascending; a frame's labels in the order they are first listed
(process 0's frame's categories in its order, then those only a later
process lists, in its order), with the categories no row holds dropped
afterwards.  So where every process lists the same categories, the tables
are those of one process holding all the rows, and every process codes its
rows alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ...runtime.distributed import gather, gather_same_shape, on_every_process


class ColumnCategories(NamedTuple):
    """One column's categories in the rows of one process (or of all):
    ``values`` (numbers ascending, or a frame's listed labels, object),
    ``counts`` (int64, rows holding each; 0 for a listed label no row holds)
    and whether they are a frame's ``labels``."""

    values: np.ndarray
    counts: np.ndarray
    labels: bool


def _as_json(columns: Sequence[int], found: list[ColumnCategories], names) -> bytes:
    """This process's categories as JSON bytes; a ValueError naming a
    column whose labels are neither strings nor numbers."""
    listed = []
    for column, categories in zip(columns, found):
        values = [v.item() if isinstance(v, np.generic) else v for v in categories.values.tolist()]
        if categories.labels and not all(isinstance(v, (str, int, float)) for v in values):
            name = repr(names[column]) if names else str(column)
            raise ValueError(
                f"categorical_features: column {name} has category labels other than strings "
                "or numbers, which the processes cannot exchange; recode them as strings"
            )
        listed.append([categories.labels, values, categories.counts.tolist()])
    return json.dumps({"columns": [int(c) for c in columns], "categories": listed}).encode()


def _exchanged(local: bytes) -> list[dict]:
    """Every process's JSON document, in process order."""
    lengths = gather_same_shape(np.int64(len(local)))
    sent = gather(np.frombuffer(local, np.uint8))
    documents, start = [], 0
    for length in lengths:
        documents.append(json.loads(sent[start : start + int(length)].tobytes()))
        start += int(length)
    return documents


def _union(parts: list[list], labels: bool) -> ColumnCategories:
    """One column's ``[labels, values, counts]`` of every process, joined."""
    if not labels:
        values = np.concatenate([np.asarray(part[1], np.float64) for part in parts])
        counts = np.concatenate([np.asarray(part[2], np.int64) for part in parts])
        union, position = np.unique(values, return_inverse=True)
        summed = np.bincount(position, weights=counts, minlength=union.size)
        return ColumnCategories(union, summed.astype(np.int64), False)
    totals: dict = {}  # insertion order: first listing
    for _, values, counts in parts:
        for value, count in zip(values, counts):
            totals[value] = totals.get(value, 0) + int(count)
    values = np.empty(len(totals), dtype=object)
    values[:] = list(totals)
    return ColumnCategories(values, np.array(list(totals.values()), np.int64), True)


def categories_of_all_processes(
    columns: Sequence[int], found: list[ColumnCategories], names
) -> list[ColumnCategories]:
    """Each of ``columns``' categories in all processes' rows, from this
    process's ``found`` (one exchange); the same on every process, or a
    ValueError on every process naming ``categorical_features``."""
    local = on_every_process(lambda: _as_json(columns, found, names))
    documents = _exchanged(local)
    chosen = [document["columns"] for document in documents]
    if any(columns_of != chosen[0] for columns_of in chosen):
        raise ValueError(
            f"categorical_features: the processes have other categorical columns ({chosen}, "
            "in process order); pass the same categorical_features, and frames with the same "
            "category columns, in every process"
        )
    joined = []
    for position, column in enumerate(chosen[0]):
        parts = [document["categories"][position] for document in documents]
        if len({part[0] for part in parts}) > 1:
            name = repr(names[column]) if names else str(column)
            raise ValueError(
                f"categorical_features: column {name} is a category column in some processes' "
                "frames and numbers in others; pass it alike in every process"
            )
        joined.append(_union(parts, parts[0][0]))
    return joined

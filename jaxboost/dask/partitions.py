"""A fit's Dask collections as partitions on workers: which worker trains
on which rows.

Every row collection (``X``, ``y``, ``sample_weight``, ``init_score``,
``qid``) is cut into the same partitions as ``X`` and persisted; partition
``i`` of each trains in the process of the worker that holds ``X``'s
partition ``i``.  Processes are numbered in the order of the first
partition each worker holds, and a process's rows are its partitions in
collection order, so the rows are numbered worker by worker.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Placement(NamedTuple):
    """Where a fit's rows are: one entry per training process."""

    workers: list[str]  # the worker's address, process 0 first
    parts: list[dict[str, list]]  # per process, per row argument: its partitions' futures
    n_rows: list[int]  # per process, its rows


def _is_dataframe(collection: Any) -> bool:
    return hasattr(collection, "npartitions") and not hasattr(collection, "chunks")


def _check_collection(name: str, value: Any) -> None:
    if not (hasattr(value, "npartitions") or hasattr(value, "chunks")):
        raise TypeError(
            f"{name}: expected a dask.array or dask.dataframe collection, got "
            f"{type(value).__name__}; wrap local data with dask.array.from_array or "
            "dask.dataframe.from_pandas"
        )


def aligned(rows: dict[str, Any]) -> dict[str, Any]:
    """``rows`` (``X`` first, then the other row arguments, None for absent
    ones) cut into ``X``'s partitions: arrays rechunked to ``X``'s row chunks
    (one chunk across columns), dataframes checked for ``X``'s partition
    count."""
    X = rows["X"]
    _check_collection("X", X)
    out = {}
    if not _is_dataframe(X) and X.ndim == 2:
        X = X.rechunk({1: -1})
    out["X"] = X
    n_parts = X.npartitions if _is_dataframe(X) else len(X.chunks[0])
    for name, value in rows.items():
        if name == "X" or value is None:
            continue
        _check_collection(name, value)
        if not _is_dataframe(value) and not _is_dataframe(X) and not np.isnan(X.chunks[0]).any():
            if value.shape[0] != X.shape[0]:
                raise ValueError(f"{name}: {value.shape[0]} rows, X has {X.shape[0]}")
            value = value.rechunk({0: X.chunks[0], **{a: -1 for a in range(1, value.ndim)}})
        else:
            count = value.npartitions if _is_dataframe(value) else len(value.chunks[0])
            if count != n_parts:
                raise ValueError(
                    f"{name}: {count} partitions, X has {n_parts}; give the row arguments "
                    "the same partitions (columns of one dask DataFrame, or arrays of the "
                    "same row chunks)"
                )
            if not _is_dataframe(value) and value.ndim == 2:
                value = value.rechunk({1: -1})
        out[name] = value
    return out


def persisted_parts(client, rows: dict[str, Any]) -> dict[str, list]:
    """Per row argument, its partitions' futures in order (persisted on the
    cluster together, so work they share runs once)."""
    names = list(rows)
    persisted = client.persist([rows[name] for name in names])
    parts = {}
    for name, collection in zip(names, persisted):
        # a partition's key is (name, i) or, for a 2-D array, (name, i, 0)
        futures = sorted(client.futures_of(collection), key=lambda future: future.key[1:])
        n_parts = collection.npartitions
        if len(futures) != n_parts:
            raise RuntimeError(f"{name}: {len(futures)} persisted parts for {n_parts} partitions")
        parts[name] = futures
    return parts


def _row_count(part: Any) -> int:
    return len(part)


def place(client, rows: dict[str, Any]) -> Placement:
    """The training processes of a fit on ``rows`` (`aligned`'s): the workers
    holding ``X``'s partitions, each with its partitions, in process order.
    Workers whose partitions hold no rows take no part."""
    parts = persisted_parts(client, rows)
    X_parts = parts["X"]
    counts = client.gather(client.map(_row_count, X_parts, pure=False))
    holders = client.who_has(X_parts)
    owner = [min(holders[future.key]) for future in X_parts]
    workers, by_worker = [], {}
    for index, worker in enumerate(owner):
        if counts[index] == 0:
            continue  # an empty partition: nothing to train on
        if worker not in by_worker:
            workers.append(worker)
            by_worker[worker] = []
        by_worker[worker].append(index)
    if not workers:
        raise ValueError("X: no rows in any partition")
    return Placement(
        workers=workers,
        parts=[
            {name: [futures[i] for i in by_worker[worker]] for name, futures in parts.items()}
            for worker in workers
        ],
        n_rows=[sum(counts[i] for i in by_worker[worker]) for worker in workers],
    )

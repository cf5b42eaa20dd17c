"""``jaxboost.dask.fit``: one model from the rows of a Dask cluster.

Every worker that holds partitions of ``X`` trains on its own rows in a
training process of its own (`jaxboost.dask.launch`); only the bin-edge
sample, the histograms and the leaf sums cross between them.  The fitted
model comes back to the client as the ordinary jaxboost model it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .launch import run
from .partitions import aligned, persisted_parts, place

# fit arguments that hold one entry per row: cut into X's partitions
_ROW_ARGUMENTS = ("sample_weight", "init_score", "qid")


def current_client(client: Any = None):
    """``client``, else the current ``dask.distributed`` client."""
    if client is not None:
        return client
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        raise ValueError(
            "client: no dask.distributed Client given and none is current; pass "
            "client=Client(...) or create one first"
        ) from None


def _eval_parts(client, fit_params: dict) -> list | None:
    """``eval_set`` (with ``eval_sample_weight``, ``eval_init_score``) as
    lists of partition futures, all for process 0."""
    eval_set = fit_params.pop("eval_set", None)
    weights = fit_params.pop("eval_sample_weight", None)
    offsets = fit_params.pop("eval_init_score", None)
    if eval_set is None:
        return None
    sets = []
    for i, (X, y) in enumerate(eval_set):
        rows = {"X": X, "y": y}
        rows["sample_weight"] = None if weights is None else weights[i]
        rows["init_score"] = None if offsets is None else offsets[i]
        rows = aligned({name: value for name, value in rows.items() if value is not None})
        sets.append(persisted_parts(client, rows))
    return sets


def _check_queries(client, placement, model: Any) -> None:
    """A group loss over several workers needs each query whole on one
    worker: refused here, naming a query and its workers, before any
    process starts."""
    import jaxboost as jb

    if len(placement.workers) == 1:
        return
    loss = getattr(model, "loss", None)  # (None: a DaskClassifier's, per sample)
    params = getattr(model, "loss_params", None)
    if loss is None or jb.losses.metadata_of(jb.losses.resolve(loss, params)).per != "group":
        return
    if "qid" not in placement.parts[0]:
        raise ValueError(
            f"qid: a group loss over {len(placement.workers)} workers needs each row's query "
            "id (a query whole on one worker); without it all rows are one group across "
            "the workers. Give qid=, or persist the rows on one worker"
        )
    ids = client.gather(
        [
            client.submit(_query_ids, parts["qid"], workers=[worker], pure=False)
            for worker, parts in zip(placement.workers, placement.parts)
        ]
    )
    owner = np.concatenate([np.full(len(found), i) for i, found in enumerate(ids)])
    values, counts = np.unique(np.concatenate(ids), return_counts=True)
    if np.any(counts > 1):
        shared = values[counts > 1][0].item()
        on = [placement.workers[i] for i in owner[np.concatenate(ids) == shared]]
        raise ValueError(
            f"qid: query {shared!r} has rows on workers {on[0]} and {on[1]} "
            f"({int(np.sum(counts > 1))} queries are split); a group loss needs each query "
            "whole on one worker: partition the rows by query first (e.g. "
            "frame.shuffle('qid'))"
        )


def _query_ids(parts: list) -> np.ndarray:
    return np.unique(np.concatenate([np.asarray(part).reshape(-1) for part in parts]))


def fit(
    client: Any,
    X: Any,
    y: Any,
    sample_weight: Any = None,
    *,
    model: Any = None,
    devices_per_worker: int | None = None,
    start_timeout: int = 120,
    heartbeat_timeout: int = 30,
    keep_processes: bool = True,
    **fit_params: Any,
) -> Any:
    """Fit ``model`` on the rows of a Dask cluster; returns the fitted model.

    Args:
      client: a ``dask.distributed.Client`` (None: the current one).
      X: ``dask.array`` ``(n_rows, n_features)`` or ``dask.dataframe``
        (pandas category columns are categorical), partitioned on rows.
      y: the targets, a Dask collection of ``X``'s partitions (a column of
        the same DataFrame, or an array of the same row chunks).
      sample_weight: per-row weights, as ``y``.
      model: the unfitted model whose settings train: a `jaxboost.Booster`
        (default ``Booster()``), ``Regressor`` or ``Ranker``.
      devices_per_worker: CPU devices of each training process (default:
        the worker's threads).
      start_timeout: seconds the training processes wait for each other to
        start before giving up.
      heartbeat_timeout: seconds after which a silent training process
        counts as lost.
      keep_processes: keep the training processes for the next fit on the
        same workers with the same settings (which then skips their
        start-up: importing JAX, meeting, loading the programs); they end
        after 10 minutes unused, a failed fit, or a fit on other workers.
        False: processes for this fit alone.
      fit_params: the rest of ``model.fit``'s arguments: ``init_score`` and
        ``qid`` per row, as ``y``; ``eval_set`` as a list of ``(X, y)`` Dask
        collections, with ``eval_sample_weight`` and ``eval_init_score``
        (evaluated in process 0, to which they are sent); ``eval_metric``,
        ``early_stopping_rounds``, ``callbacks`` (run in every training
        process), ``verbose`` (printed to the training processes' logs).
    Returns:
      the fitted ``model`` (a copy; ``model`` itself stays unfitted).
    """
    import cloudpickle

    import jaxboost as jb

    client = current_client(client)
    model = jb.Booster() if model is None else model
    if "group" in fit_params or "eval_group" in fit_params:
        raise ValueError(
            "group: give each row's query id as qid= (a Dask collection of X's "
            "partitions); group sizes do not cut into partitions"
        )
    rows = {"X": X, "y": y, "sample_weight": sample_weight}
    rows.update({name: fit_params.pop(name, None) for name in _ROW_ARGUMENTS[1:]})
    rows = aligned({name: value for name, value in rows.items() if value is not None})
    eval_sets = _eval_parts(client, fit_params)
    placement = place(client, rows)
    _check_queries(client, placement, model)
    spec = {
        "model": cloudpickle.dumps(model),
        "fit_kwargs": cloudpickle.dumps(fit_params),
        "devices": devices_per_worker,
        "start_timeout": start_timeout,
        "heartbeat_timeout": heartbeat_timeout,
        "keep": bool(keep_processes),
    }
    return cloudpickle.loads(run(client, placement, spec, eval_sets))

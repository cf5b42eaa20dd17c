"""Lazy predictions of a fitted model on a Dask collection: each partition
is predicted on the worker that holds it; the result is a ``dask.array``
of one block per partition."""

from __future__ import annotations

from typing import Any

import numpy as np


def _predict_part(part: Any, model: Any, method: str, kwargs: dict) -> np.ndarray:
    return np.asarray(getattr(model, method)(part, **kwargs))


def _sample_row(X: Any) -> Any:
    """One row like ``X``'s (its dtypes and categories), to learn the
    prediction's shape and dtype without computing ``X``."""
    if hasattr(X, "_meta_nonempty"):
        return X._meta_nonempty.iloc[:1]
    return np.zeros((1, X.shape[1]), X.dtype)


def predict(model: Any, X: Any, method: str = "predict", **kwargs: Any) -> Any:
    """``model.<method>(X)`` as a lazy ``dask.array``, one block per
    partition of ``X`` (a ``dask.array`` or ``dask.dataframe``).

    Args:
      model: a fitted jaxboost model (``Booster``, ``Regressor``, ...).
      X: the rows, partitioned as any Dask collection.
      method: ``"predict"``, ``"predict_raw"``, ``"predict_proba"``,
        ``"predict_contributions"``, ... : a method of ``model`` taking
        ``X`` first and returning an array of one entry per row.
      kwargs: passed on to the method.
    """
    import dask
    import dask.array as da

    if not hasattr(model, method):
        raise ValueError(f"method: {type(model).__name__} has no method {method!r}")
    if hasattr(X, "chunks") and X.ndim == 2:
        X = X.rechunk({1: -1})
    sample = np.asarray(getattr(model, method)(_sample_row(X), **kwargs))
    trailing, dtype = sample.shape[1:], sample.dtype
    model_on_cluster = dask.delayed(model, pure=True)
    if hasattr(X, "chunks"):
        return X.map_blocks(
            _predict_part,
            model_on_cluster,
            method,
            kwargs,
            dtype=dtype,
            chunks=(X.chunks[0], *((n,) for n in trailing)),
            drop_axis=None if trailing else 1,
            meta=np.empty((0, *trailing), dtype),
        )
    blocks = [
        da.from_delayed(
            dask.delayed(_predict_part)(part, model_on_cluster, method, kwargs),
            shape=(np.nan, *trailing),
            dtype=dtype,
        )
        for part in X.to_delayed()
    ]
    return da.concatenate(blocks, axis=0)

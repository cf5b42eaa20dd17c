"""Train one model on the rows of a Dask cluster, with a custom loss.

Run ``python examples/dask_training.py`` (needs ``pip install
"jaxboost[dask]"``): it starts a ``LocalCluster`` of 2 worker processes on
127.0.0.1, builds a Dask DataFrame of 3 partitions (a category column, two
numbers), and fits a pseudo-Huber loss with ``jaxboost.dask.DaskRegressor``:
each worker trains on the partitions it holds, in a training process of its
own (docs/dask.md).  It then predicts lazily (one task per partition, on
the worker that holds it), and fits the same model in this process on all
rows to compare: same splits, and raw scores within 1e-5 of their largest
(float32 sums of the same rows in another order).

On a real cluster, pass ``Client("scheduler-host:8786")`` instead of the
local one; nothing else changes.
"""

from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np
import pandas as pd

import jaxboost as jb  # before any JAX operation

N_ROWS = 6000


def pseudo_huber(y, f):
    """A robust loss as a plain JAX function: ``sqrt(1 + (f - y)^2) - 1``.

    Defined in the script run (``__main__``), it travels to the workers by
    value; a loss from a module of your own must be importable there."""
    return jnp.sqrt(1.0 + (f - y) ** 2) - 1.0


def make_frame(n_rows: int = N_ROWS) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    shops = np.array(list("abcdefgh"), dtype=object)[rng.integers(0, 8, n_rows)]
    frame = pd.DataFrame({"shop": pd.Categorical(shops, categories=list("abcdefgh"))})
    frame["price"] = rng.uniform(1, 10, n_rows).astype(np.float32)
    frame["rating"] = rng.normal(size=n_rows).astype(np.float32)
    signal = 3.0 * frame["shop"].isin(["b", "f"]) - 0.5 * frame["price"] + frame["rating"]
    outliers = rng.random(n_rows) < 0.02  # a few wild targets: the loss shrugs them off
    noise = rng.normal(size=n_rows) + outliers * rng.normal(0, 50, n_rows)
    frame["sales"] = (signal + noise).astype(np.float32)
    return frame


SETTINGS = {"loss": pseudo_huber, "n_estimators": 30, "max_depth": 4, "learning_rate": 0.2}
FEATURES = ["shop", "price", "rating"]


def main() -> None:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import jaxboost.dask as jbd

    frame = make_frame()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        data = dd.from_pandas(frame, npartitions=3).persist()
        start = time.perf_counter()
        model = jbd.DaskRegressor(client=client, **SETTINGS).fit(data[FEATURES], data["sales"])
        print(f"fit on the cluster: {time.perf_counter() - start:.1f} s (with process start)")
        lazy = model.predict(data[FEATURES])  # a dask.array: nothing computed yet
        predicted = lazy.compute()
    local = model.to_local()  # an ordinary jaxboost.Regressor: save, load, explain
    print(f"{type(local).__name__} of {local.n_estimators_} rounds; "
          f"lazy prediction of {predicted.shape[0]} rows, first {predicted[0]:.3f}")  # fmt: skip

    # the same rows in this process (with 1 bin-edge sample of all rows and no
    # subsampling, the rows' order across workers changes no split)
    single = jb.Regressor(**SETTINGS).fit(frame[FEATURES], frame["sales"])
    same_splits = all(
        np.array_equal(getattr(local.booster_.forest_, field), getattr(single.booster_.forest_, field))
        for field in ("feature", "threshold_bin", "category_left")
    )  # fmt: skip
    expected = single.booster_.predict_raw(frame[FEATURES])
    gap = float(np.max(np.abs(local.booster_.predict_raw(frame[FEATURES]) - expected)))
    close = gap <= 1e-5 * float(np.max(np.abs(expected)))
    print(f"cluster vs one process: same splits {same_splits}, raw scores within 1e-5 of "
          f"their largest: {close} (largest gap {gap:.2g})")  # fmt: skip
    if not (same_splits and close):
        raise SystemExit(1)


if __name__ == "__main__":
    main()

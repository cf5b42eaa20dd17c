"""Training on a Dask cluster: Dask collections in, one jaxboost model out.

Needs ``dask[distributed]`` (the ``dask`` extra).  Every worker holding
partitions trains on its own rows in a training process of its own, kept
for the next fit on the same workers (`jaxboost.dask.launch`); the model
returned is an ordinary jaxboost model.
Guide: docs/dask.md.
"""

from .estimators import DaskBooster, DaskClassifier, DaskRanker, DaskRegressor
from .fitting import fit
from .prediction import predict

__all__ = ["DaskBooster", "DaskClassifier", "DaskRanker", "DaskRegressor", "fit", "predict"]

"""``DaskBooster``, ``DaskRegressor``, ``DaskClassifier``, ``DaskRanker``:
the jaxboost models fitted on a Dask cluster's rows, in the shape of
``lightgbm.dask`` and ``xgboost.dask``.

Each takes ``client=`` (default: the current ``dask.distributed`` client)
and the settings of its local model (``Booster``, ``Regressor``, ...);
``fit`` trains through `jaxboost.dask.fit`, the ``predict`` methods give
lazy ``dask.array`` results, and ``to_local()`` is the fitted local model
(save, load, predict, explain as any).  Fitted attributes (``n_estimators_``,
``evals_result_``, ``feature_importances_``, ...) are the local model's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontends.settings.loss_params import PREFIX
from .fitting import current_client, fit
from .prediction import predict


class _DaskModel:
    """Settings, the client, and the fitted local model."""

    _local_name = "Booster"

    def __init__(self, client: Any = None, **settings: Any):
        self.client = client
        self._settings = dict(settings)
        self._local_class()(**settings)  # an unknown setting fails here, named

    @classmethod
    def _local_class(cls):
        import jaxboost as jb

        return getattr(jb, cls._local_name)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The settings, the client and, with ``deep``, the catalogue loss's
        parameters ``loss__<name>`` (`loss_params`), as the local model's."""
        nested = {}
        if deep:
            local = self._unfitted().get_params(deep=True)
            nested = {k: v for k, v in local.items() if k.startswith(PREFIX)}
        return {"client": self.client, **self._settings, **nested}

    def set_params(self, **params: Any) -> _DaskModel:
        """Sets settings by name (``loss__<name>``: into ``loss_params``), as
        the local model's ``set_params`` checks them; returns ``self``."""
        if "client" in params:
            self.client = params.pop("client")
        local = self._unfitted().set_params(**params)
        given = local.get_params(deep=False)
        names = [name for name in params if not name.startswith(PREFIX)]
        if len(names) < len(params):
            names.append("loss_params")
        self._settings.update({name: given[name] for name in names})
        return self

    def _unfitted(self) -> Any:
        return self._local_class()(**self._settings)

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any) -> _DaskModel:
        """Fit on Dask collections (`jaxboost.dask.fit`'s arguments); returns self."""
        self.model_ = fit(
            current_client(self.client), X, y, sample_weight, model=self._unfitted(), **fit_params
        )
        return self

    def to_local(self) -> Any:
        """The fitted local model (``Booster``, ``Regressor``, ...)."""
        model = self.__dict__.get("model_")
        if model is None:
            raise AttributeError(f"{type(self).__name__} is not fitted yet: call fit first")
        return model

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_") and not name.startswith("_"):
            return getattr(self.to_local(), name)
        raise AttributeError(name)

    def predict(self, X: Any, **kwargs: Any) -> Any:
        """The local model's ``predict`` on every partition of ``X``: a lazy
        ``dask.array``."""
        return predict(self.to_local(), X, "predict", **kwargs)

    def save(self, path: Any) -> None:
        self.to_local().save(path)


class DaskBooster(_DaskModel):
    """A `jaxboost.Booster` fitted on a Dask cluster's rows."""

    _local_name = "Booster"

    def predict_raw(self, X: Any, **kwargs: Any) -> Any:
        return predict(self.to_local(), X, "predict_raw", **kwargs)

    def predict_contributions(self, X: Any, **kwargs: Any) -> Any:
        return predict(self.to_local(), X, "predict_contributions", **kwargs)


class DaskRegressor(_DaskModel):
    """A `jaxboost.Regressor` fitted on a Dask cluster's rows."""

    _local_name = "Regressor"


class DaskRanker(_DaskModel):
    """A `jaxboost.Ranker` fitted on a Dask cluster's rows (``qid=`` per
    row, each query whole on one worker: docs/dask.md)."""

    _local_name = "Ranker"


class _KnownClasses:
    """A Classifier whose fit codes the labels by ``classes`` (those of every
    process's rows, found on the client), not by the labels of its own rows,
    which may lack some."""

    def __init__(self, classifier: Any, classes: np.ndarray):
        self.classifier, self.classes = classifier, classes

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any) -> Any:
        from sklearn.utils.validation import _check_sample_weight

        model = self.classifier
        # Classifier.fit's steps, with the classes of every process
        checked, y = model._checked_X(X, reset=True, y=y)
        sample_weight = _check_sample_weight(
            sample_weight, checked, dtype=np.float32, ensure_non_negative=True
        )
        model.classes_ = self.classes
        encoded = model._encode(y)
        loss, n_outputs = model._loss_and_outputs(len(self.classes))
        fit_params = model._eval_fit_params(fit_params, model._encode, X)
        model._fit_booster(X, encoded, sample_weight, loss, n_outputs, fit_params)
        return model


class DaskClassifier(_DaskModel):
    """A `jaxboost.Classifier` fitted on a Dask cluster's rows; its
    ``classes_`` are the labels of all rows (found by a Dask reduction)."""

    _local_name = "Classifier"

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any) -> DaskClassifier:
        import dask

        labels = y.unique() if hasattr(y, "unique") else None
        if labels is None:
            import dask.array as da

            labels = da.unique(y)
        (classes,) = dask.compute(labels)
        classes = np.sort(np.asarray(classes))
        if len(classes) < 2:
            raise ValueError(f"y: expected at least 2 classes, got {classes.tolist()}")
        model = _KnownClasses(self._unfitted(), classes)
        self.model_ = fit(
            current_client(self.client), X, y, sample_weight, model=model, **fit_params
        )
        return self

    def predict_proba(self, X: Any, **kwargs: Any) -> Any:
        return predict(self.to_local(), X, "predict_proba", **kwargs)

"""``Model``: a fitted model, everything prediction needs and nothing of
how it was trained.

Its fields are exactly `jaxboost.frontends.fitted.model_fields.MODEL_FIELDS`
(the trees, the initial score, the bin edges, feature names, category
maps, the loss and its link, the training record); an optional field is
absent where it does not apply.  `jaxboost.frontends.training.trainer.train` makes
one; a `jaxboost.Booster` holds one in ``model_`` and reads its fitted
attributes (``forest_``, ``base_score_``, ...) through to it.  A Model is
not changed in place: `Model.replace` gives a new one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import losses as loss_catalogue
from ...engine.leaf_index import leaf_indices_on
from ...engine.predict import apply_link, predict_on_devices, round_increments
from ...engine.tree import Tree
from ...losses.metadata import metadata_of
from ...runtime.devices import check_devices
from ...runtime.padding import bucket_size, in_place_on, pad_rows
from ...runtime.precision import in_float32
from ..data.categories import category_grid, encode_categories
from ..data.offsets import with_offsets
from ..data.validation import as_features, check_columns, column_count, feature_names
from . import distribution_predict, explain
from .inspection import feature_importances, feature_indices, grid_from_data, partial_dependence
from .model_fields import MODEL_FIELDS, renamed_field, with_current_names
from .model_file import save_model

FIELD_NAMES = tuple(field.name for field in MODEL_FIELDS)


class Model:
    """A fitted model: the fields of `MODEL_FIELDS` as attributes (an
    optional one absent where it does not apply), and prediction from them.

    ``devices`` of the prediction methods: where to predict (None: this
    process's default devices)."""

    __slots__ = FIELD_NAMES

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            if name not in FIELD_NAMES:
                raise TypeError(f"Model: {name!r} is not a field of a fitted model")
            object.__setattr__(self, name, value)

    def fields(self) -> dict[str, Any]:
        """The fields this model holds, by name, in `MODEL_FIELDS`' order."""
        return {name: getattr(self, name) for name in FIELD_NAMES if hasattr(self, name)}

    def replace(self, **changes: Any) -> Model:
        """A new model of these fields with ``changes`` (a field given as
        `ABSENT` is left out)."""
        fields = {**self.fields(), **changes}
        return Model(**{name: value for name, value in fields.items() if value is not ABSENT})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Model: fields are not changed in place; use replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Model: fields are not removed in place; use replace({name}=ABSENT)")

    def __getstate__(self) -> dict[str, Any]:
        return self.fields()

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in with_current_names(state).items():
            object.__setattr__(self, name, value)

    init_score_ = renamed_field("init_score_")

    def save(self, path: Any, settings: Any) -> None:
        """Write the model to a versioned JSON file (`jaxboost.load` gives
        back a Booster), ``settings`` (a Booster, or a fit's settings
        record) its constructor's arguments."""
        save_model(self, path, settings=settings)

    def __repr__(self) -> str:
        return f"Model({self.n_estimators_} rounds, {self.n_outputs_} outputs)"

    # -- the trees -----------------------------------------------------------
    @property
    def trees_per_round_(self) -> int:
        """Trees grown per round: ``n_outputs`` with one tree per output, else 1."""
        return self.forest_.feature.shape[0] // max(self.n_estimators_, 1)

    def feature_importance(self, importance_type: str = "gain") -> np.ndarray:
        """``(n_features,)`` importances, by ``"gain"`` or ``"split"`` count, summing to 1."""
        return feature_importances(self.forest_, self.n_features_in_, importance_type)

    def trees(self, iteration_range: tuple[int, int] | None) -> Tree:
        """The trees of the rounds ``iteration_range`` (all: None), as host arrays."""
        start, end = iteration_range or (0, self.n_estimators_)
        if not 0 <= start <= end <= self.n_estimators_:
            raise ValueError(
                f"iteration_range: expected 0 <= start <= end <= {self.n_estimators_}, "
                f"got {iteration_range}"
            )
        # host arrays: the native walk reads them in place (no transfer a
        # call), the XLA programs take them as they take jnp arrays
        if (start, end) == (0, self.n_estimators_):
            return jax.tree.map(np.asarray, self.forest_)
        # sliced on the host: a device array's slice compiles a program per
        # range (staged_predict asks for every one)
        rows = slice(start * self.trees_per_round_, end * self.trees_per_round_)
        return jax.tree.map(lambda leaf: np.asarray(leaf)[rows], self.forest_)

    def features(self, X: Any) -> np.ndarray:
        """``X`` checked against the fitted columns (count, then names, in
        order) and coded by the fitted categories, as float32."""
        got = column_count(X)
        if got is None:
            got = as_features(X).shape[1]  # (refuses X by name unless it is 2-D)
        # the columns before their categories are looked up by position
        names = feature_names(X)
        check_columns(names, getattr(self, "feature_names_in_", None), self.n_features_in_, got)
        return as_features(encode_categories(X, getattr(self, "categories_", None)))

    def _shape_raw(self, raw: np.ndarray) -> np.ndarray:
        return raw[..., 0] if self.n_outputs_ == 1 else raw

    # -- prediction ----------------------------------------------------------
    @in_float32
    def predict_raw(
        self,
        X: Any,
        iteration_range: tuple[int, int] | None = None,
        init_score: Any = None,
        devices: Any = None,
    ) -> np.ndarray:
        """Raw scores (`jaxboost.Booster.predict_raw`)."""
        features = self.features(X)
        trees = self.trees(iteration_range)
        devices = check_devices(devices) or jax.local_devices()
        raw = predict_on_devices(trees, np.asarray(self.base_score_), features, devices)
        return self._shape_raw(with_offsets(raw, init_score, self.n_outputs_, self.loss_))

    @in_float32
    def apply(
        self, X: Any, iteration_range: tuple[int, int] | None = None, devices: Any = None
    ) -> np.ndarray:
        """The leaf each row reaches in every tree (`jaxboost.Booster.apply`)."""
        features = self.features(X)
        devices = check_devices(devices) or jax.local_devices()
        return leaf_indices_on(self.trees(iteration_range), features, devices[0])

    @in_float32
    def predict_contributions(
        self, X: Any, init_score: Any = None, devices: Any = None
    ) -> np.ndarray:
        """SHAP values (`jaxboost.Booster.predict_contributions`)."""
        features = self.features(X)
        devices = check_devices(devices) or jax.local_devices()
        values = explain.contributions(
            self.forest_, self.base_score_, features, init_score=init_score, devices=devices
        )
        return values[:, 0] if self.n_outputs_ == 1 else values

    @in_float32
    def predict_interactions(
        self, X: Any, init_score: Any = None, devices: Any = None
    ) -> np.ndarray:
        """SHAP interaction values (`jaxboost.Booster.predict_interactions`)."""
        features = self.features(X)
        devices = check_devices(devices) or jax.local_devices()
        values = explain.interactions(
            self.forest_, self.base_score_, features, init_score=init_score, devices=devices
        )
        return values[:, 0] if self.n_outputs_ == 1 else values

    @in_float32
    def link(self, raw: np.ndarray) -> np.ndarray:
        """``raw`` scores through the loss's declared link (a name of
        ``losses.links``, or a callable; identity: none)."""
        link = metadata_of(self.loss_).link
        if isinstance(link, str) and link == "identity":
            return raw
        link = link if callable(link) else loss_catalogue.links.get(link)
        # in chunks of a few sizes: a batch of any size compiles nothing new
        return apply_link(link, np.asarray(raw, np.float32))

    def predict(
        self,
        X: Any,
        iteration_range: tuple[int, int] | None = None,
        init_score: Any = None,
        devices: Any = None,
    ) -> np.ndarray:
        """Predictions on the response scale (`jaxboost.Booster.predict`)."""
        return self.link(self.predict_raw(X, iteration_range, init_score, devices))

    def distribution(
        self, X: Any, what: str, iteration_range=None, init_score=None, devices: Any = None
    ) -> Any:
        """The predicted distributions of ``X``'s rows; ``what`` names the
        method asking, in the error of a loss that is no distribution."""
        loss = distribution_predict.distribution_loss_of(self.loss_, what)
        raw = self.predict_raw(X, iteration_range, init_score, devices)
        return distribution_predict.predict_distribution(loss, raw)

    def predict_quantiles(
        self,
        X: Any,
        q: Sequence[float] | float,
        iteration_range=None,
        init_score=None,
        devices=None,
    ) -> np.ndarray:
        """Quantiles of the predicted distributions (`jaxboost.Booster.predict_quantiles`)."""
        levels = distribution_predict.checked_levels(q)
        dist = self.distribution(X, "predict_quantiles", iteration_range, init_score, devices)
        return distribution_predict.quantiles(dist, levels)

    def sample(
        self, X: Any, n: int, random_state: Any = None, init_score: Any = None, devices=None
    ) -> np.ndarray:
        """Draws from the predicted distributions (`jaxboost.Booster.sample`)."""
        dist = self.distribution(X, "sample", init_score=init_score, devices=devices)
        return distribution_predict.sample(dist, n, random_state)

    @in_float32
    def staged_raw(self, X: Any) -> np.ndarray:
        """``(n_rounds, n_rows, K)`` raw scores after each round."""
        features = self.features(X)
        aligned = in_place_on(jax.default_backend())
        padded = pad_rows(features, bucket_size(features.shape[0]), aligned=aligned)
        increments = round_increments(self.trees(None), jnp.asarray(padded), self.trees_per_round_)
        staged = np.asarray(jnp.cumsum(increments, axis=0) + self.base_score_)
        return staged[:, : features.shape[0]]

    def staged_predict_raw(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """Raw scores after each round (`jaxboost.Booster.staged_predict_raw`)."""
        for raw in self.staged_raw(X):
            yield self._shape_raw(with_offsets(raw, init_score, self.n_outputs_, self.loss_))

    def staged_predict(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """Response-scale predictions after each round."""
        for raw in self.staged_predict_raw(X, init_score):
            yield self.link(raw)

    @in_float32
    def partial_dependence(
        self, X: Any, features: int | str | Sequence[int | str], grid_resolution: int = 50
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Partial dependence of the raw score (`jaxboost.Booster.partial_dependence`)."""
        features_array = self.features(X)
        features = feature_indices(features, getattr(self, "feature_names_in_", None))
        tables = {table.column: table for table in getattr(self, "categories_", None) or []}
        grid, points = [], []  # what the user reads, and the values the trees compare
        for feature in features:
            if feature in tables:
                categories, codes = category_grid(X, tables[feature])
                grid.append(categories)
                points.append(codes.astype(np.float32))
            else:
                grid.append(grid_from_data(features_array, feature, grid_resolution))
                points.append(grid[-1])
        values = partial_dependence(self.forest_, self.base_score_, features, points)
        return grid, np.asarray(values)


class _Absent:
    def save(self, path: Any, settings: Any) -> None:
        """Write the model to a versioned JSON file (`jaxboost.load` gives
        back a Booster), ``settings`` (a Booster, or a fit's settings
        record) its constructor's arguments."""
        save_model(self, path, settings=settings)

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()
"""`Model.replace`'s mark of a field to leave out."""

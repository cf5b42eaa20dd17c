"""``Booster``: the settings, ``fit`` and the fitted model, behind one
XGBoost-like class.

``fit`` hands its arguments with a frozen record of the settings to
`jaxboost.frontends.training.fitting.fit_model` (checked into one record, then
trained: `jaxboost.frontends.training.trainer.train`, or, holding rows out for
early stopping, `jaxboost.frontends.training.holdout`), and keeps the
`jaxboost.frontends.fitted.model.Model` it returns in ``model_``.  Prediction is
the model's; the fitted attributes (``forest_``, ``base_score_``, ...: the
fields of `jaxboost.frontends.fitted.model_fields`) read through to it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..runtime.devices import device_keys, devices_from_keys
from ..runtime.distributed import stops_when_a_process_leaves
from ..runtime.precision import in_float32
from .exports.export import check_path, export_model
from .fitted.distribution_predict import checked_levels
from .fitted.model import ABSENT, FIELD_NAMES, Model
from .fitted.model_fields import MODEL_FIELDS, RENAMED_FIELDS, renamed_field, with_current_names
from .fitted.model_file import save_model
from .settings.loss_params import nested_params, pop_nested, set_nested
from .settings.settings_table import BOOSTER, settings_of, settings_record, takes_settings
from .training.fit_inputs import FitArguments
from .training.fitting import fit_model
from .training.program_settings import check_all_settings


@takes_settings(BOOSTER)
class Booster:
    """Gradient-boosted trees for any JAX loss ``loss(y, f) -> scalar`` of one
    sample, or ``loss(y, f, mask)`` of one group of rows.

    After `fit`, ``model_`` holds the fitted `jaxboost.frontends.fitted.model.Model`;
    the fitted attributes (``forest_``, ``base_score_``, ...: docs/algorithm.md)
    read through to it.

    Args:
      (the settings of `jaxboost.frontends.settings.settings_table`: each with its
      default and meaning in ``help(Booster)`` and the API reference)
    """

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The settings by name, as scikit-learn's ``get_params``; ``deep``
        adds the catalogue loss's parameters ``loss__<name>`` (`loss_params`)."""
        params = {setting.name: getattr(self, setting.name) for setting in settings_of(BOOSTER)}
        return {**params, **nested_params(self)} if deep else params

    def set_params(self, **params: Any) -> Booster:
        """Sets settings by name, as scikit-learn's ``set_params`` (and the
        loss's parameters as ``loss__<name>``); returns ``self``.  An unknown
        name is a ValueError naming it."""
        nested = pop_nested(params)
        names = {setting.name for setting in settings_of(BOOSTER)}
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"{name}: not a setting of Booster; its settings: {sorted(names)}")
            setattr(self, name, value)
        set_nested(self, nested)
        return self

    def __getstate__(self) -> dict[str, Any]:
        # jax.Device objects do not pickle: they travel as (platform, id)
        return {**self.__dict__, "devices": device_keys(self.devices)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = {**state, "devices": devices_from_keys(state["devices"])}
        # (a pickle of an older jaxboost holds the fields themselves)
        state = with_current_names(state)
        fields = {name: state.pop(name) for name in FIELD_NAMES if name in state}
        if fields:
            state["model_"] = Model(**fields)
        self.__dict__.update(state)

    # -- training ------------------------------------------------------------
    @in_float32
    @stops_when_a_process_leaves
    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        *,
        eval_set: Sequence[tuple[Any, Any]] | None = None,
        eval_sample_weight: Sequence[Any] | None = None,
        eval_metric: str | Callable | Sequence[str | Callable] | None = None,
        early_stopping_rounds: int | None = None,
        callbacks: Sequence[Callable] | None = None,
        verbose: bool | int = False,
        group: Any = None,
        qid: Any = None,
        eval_group: Sequence[Any] | None = None,
        eval_qid: Sequence[Any] | None = None,
        init_score: Any = None,
        eval_init_score: Sequence[Any] | None = None,
        init_model: Any = None,
    ) -> Booster:
        """Grow up to ``n_estimators`` rounds of trees.

        With several processes (`jaxboost.runtime.distributed.initialize`),
        ``X``, ``y`` and ``sample_weight`` are this process's rows, and every
        process ends with the model of all rows.

        Args:
          X: ``(n_rows, n_features)`` numbers, NaN for missing (numpy, JAX,
            pandas: the column names are kept in ``feature_names_in_``).
          y: ``(n_rows,)`` or ``(n_rows, n_targets)``.
          sample_weight: ``(n_rows,)`` non-negative weights.
          eval_set: ``[(X, y), ...]`` evaluated after every round; their
            metrics go to ``evals_result_["validation_<i>"]``.
          eval_metric: a name (``"loss"``, the default: the training loss;
            ``"rmse"``, ``"mae"``, ``"logloss"``, ``"error"``, ``"auc"``,
            ``"mlogloss"``, ``"merror"``, a loss catalogue name), a function
            ``metric(y, f)`` of one sample, a function ``metric(y, f, mask)``
            of one group declared ``per="group"`` (averaged over the set's
            groups), or a list of them.
          early_stopping_rounds: stop when the first metric on the last
            evaluation set has not improved for this many rounds; the model
            keeps the best round (``best_iteration_``).
          callbacks: functions ``callback(env)`` called after every round with a
            `jaxboost.frontends.training.monitor.CallbackEnv`; returning True stops.
          verbose: print progress every ``verbose`` rounds (True: every round).
          group: for a group loss (``losses.lambdarank()``, ``losses.cox``, a
            function declared ``per="group"``), the sizes of the groups of
            consecutive rows (LightGBM's ``group``); or
          qid: one group id per row, rows in any order (XGBoost's ``qid``).
            A group loss given neither takes all rows as one group.
          eval_group: the groups of each ``eval_set`` as sizes (one entry per set).
          eval_qid: or as ids.
          init_score: per-row offsets, ``(n_rows,)`` or ``(n_rows,
            n_outputs)`` raw scores added before the loss (LightGBM's
            ``init_score``, XGBoost's ``base_margin``: ``log(exposure)`` for
            a Poisson loss); ``base_score_`` then minimises the loss given
            them, and ``predict_raw(X, init_score=...)`` adds new rows'.
          eval_init_score: the offsets of each ``eval_set`` (one entry per
            set, None for a set without).
          init_model: a fitted Booster or estimator to add ``n_estimators``
            rounds to (docs/tabular.md): the result holds its trees and the
            new ones, binned by its bin edges and coded by its categories
            (``categorical_features`` must name its categorical columns).
        Returns:
          ``self``.
        """
        check_all_settings(self)
        settings = settings_record(self)
        arguments = FitArguments(
            X=X,
            y=y,
            sample_weight=sample_weight,
            eval_set=eval_set,
            eval_sample_weight=eval_sample_weight,
            eval_metric=eval_metric,
            early_stopping_rounds=early_stopping_rounds,
            group=group,
            qid=qid,
            eval_group=eval_group,
            eval_qid=eval_qid,
            init_score=init_score,
            eval_init_score=eval_init_score,
            init_model=init_model,
        )
        self.model_ = fit_model(
            settings,
            arguments,
            callbacks=callbacks,
            verbose=verbose,
            seen_as=functools.partial(self._holding, settings),
        )
        # what the model was fitted with, which save writes whatever
        # set_params does after (a file's params must describe its trees)
        self._fitted_settings = {  # (not devices: a file holds none, and they do not pickle)
            setting.name: getattr(settings, setting.name)
            for setting in settings_of(BOOSTER)
            if setting.name != "devices"
        }
        return self

    def _holding(self, settings: Any, model: Model) -> Booster:
        """A Booster of ``settings`` (a fit's record) holding ``model``: what
        a callback sees as ``env.model``; this Booster keeps its own fit."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(
            {setting.name: getattr(settings, setting.name) for setting in settings_of(BOOSTER)}
        )
        twin.model_ = model
        return twin

    # -- the fitted model ----------------------------------------------------
    def _fitted(self) -> Model:
        """The fitted model, or a RuntimeError saying to fit first."""
        model = self.__dict__.get("model_")
        if model is None or not hasattr(model, "forest_"):
            raise RuntimeError("this Booster is not fitted yet: call fit(X, y) first")
        return model

    def _check_fitted(self) -> None:
        self._fitted()

    def __sklearn_is_fitted__(self) -> bool:
        """scikit-learn's `check_is_fitted` reads this: a model is fitted."""
        model = self.__dict__.get("model_")
        return model is not None and hasattr(model, "forest_")

    def __sklearn_tags__(self):
        """scikit-learn's tags (1.6+): no estimator type (the loss decides), y required."""
        from sklearn.utils import Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=True))

    @property
    def trees_per_round_(self) -> int:
        """Trees grown per round: ``n_outputs`` with one tree per output, else 1."""
        return self._fitted().trees_per_round_

    @property
    def feature_importances_(self) -> np.ndarray:
        """``(n_features,)`` share of the total split gain of each feature."""
        return self.feature_importance("gain")

    def feature_importance(self, importance_type: str = "gain") -> np.ndarray:
        """``(n_features,)`` importances, by ``"gain"`` or ``"split"`` count, summing to 1."""
        return self._fitted().feature_importance(importance_type)

    def partial_dependence(
        self, X: Any, features: int | str | Sequence[int | str], grid_resolution: int = 50
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Partial dependence of the raw score on one or two features, computed
        from the forest by Friedman's weighted tree traversal (2001, section 8.2).

        Args:
          X: ``(n_rows, n_features)`` data whose percentiles set the grid; on
            a categorical column the grid is its categories seen in fit and
            present in ``X`` (as scikit-learn's for categorical features).
          features: one or two feature indices, or column names of a pandas
            fit (one feature may be given alone).
        Returns:
          ``(grid, values)``: one grid array per feature (a categorical
          column's category values or labels), and values of shape
          ``(len(grid[0]), [len(grid[1]),] n_outputs)``.
        """
        return self._fitted().partial_dependence(X, features, grid_resolution)

    def save(self, path, format: str = "jaxboost") -> None:
        """Write the model to a versioned JSON file (see `jaxboost.load`), or
        with ``format="xgboost"`` / ``"onnx"`` a file XGBoost / ONNX Runtime
        read (docs/explain.md, "Serve")."""
        self._check_fitted()
        check_path(path, format)
        if format == "jaxboost":
            fitted = getattr(self, "_fitted_settings", {})
            return save_model(self, path, settings=settings_record(self, **fitted))
        export_model(self, path, format)

    def _features_for_predict(self, X: Any) -> np.ndarray:
        return self._fitted().features(X)

    def predict_raw(
        self, X: Any, iteration_range: tuple[int, int] | None = None, init_score: Any = None
    ) -> np.ndarray:
        """Raw scores ``F(x)``: ``(n_rows,)``, or ``(n_rows, n_outputs)`` when
        ``n_outputs > 1``.  ``iteration_range=(start, end)`` uses only the trees
        of rounds ``start`` to ``end - 1`` (the initial score is always in).
        ``init_score``: the rows' offsets, ``(n_rows,)`` or ``(n_rows,
        n_outputs)``, added (as fit's ``init_score``).
        Columns are read by position: a DataFrame's names must be the fitted
        ones in the fitted order (a ValueError names the difference)."""
        return self._fitted().predict_raw(X, iteration_range, init_score, self.devices)

    def apply(self, X: Any, iteration_range: tuple[int, int] | None = None) -> np.ndarray:
        """``(n_rows, n_trees)`` int32: the leaf each row reaches in every tree
        (of the rounds in ``iteration_range``; ``trees_per_round_`` trees a
        round, in round order), as scikit-learn's ``apply`` and LightGBM's
        ``pred_leaf``.  Leaf ``j`` is ``forest_.leaf_value[tree, j]``: ``j``
        in ``[0, 2^max_depth)``, whose bits from the most significant are
        the row's path (0 left, 1 right); see `jaxboost.engine.leaf_index`.
        Leaf-wise trees (node tables: without monotone or interaction
        constraints) number their leaves in the order growth made them,
        ``[0, max_leaves)``."""
        return self._fitted().apply(X, iteration_range, self.devices)

    def predict_contributions(self, X: Any, init_score: Any = None) -> np.ndarray:
        """SHAP values of the raw scores: exact path-dependent TreeSHAP
        (Lundberg et al. 2018), unseen features averaged over the trees'
        training hessian sums (XGBoost's covers; docs/explain.md).

        ``(n_rows, n_features + 1)``, or ``(n_rows, n_outputs, n_features +
        1)`` when ``n_outputs > 1``, float32: each feature's contribution,
        then the expected value (the initial score and the rows' offsets
        ``init_score``, as in `predict_raw`, included), so each row sums to
        `predict_raw`, as XGBoost's ``pred_contribs`` and LightGBM's
        ``pred_contrib``."""
        return self._fitted().predict_contributions(X, init_score, self.devices)

    def predict_interactions(self, X: Any, init_score: Any = None) -> np.ndarray:
        """SHAP interaction values of the raw scores (XGBoost's
        ``pred_interactions``): ``(n_rows, n_features + 1, n_features + 1)``,
        or with an ``n_outputs`` axis second when ``n_outputs > 1``, float32.
        Entry ``[i, j]`` (``i != j``) is half the change feature ``j``
        makes to feature ``i``'s contribution, ``[i, i]`` the rest of it,
        so row ``i`` sums to `predict_contributions`' column ``i``; the
        expected value is at ``[n_features, n_features]``."""
        return self._fitted().predict_interactions(X, init_score, self.devices)

    def predict(
        self, X: Any, iteration_range: tuple[int, int] | None = None, init_score: Any = None
    ) -> np.ndarray:
        """Predictions on the response scale, through the loss's declared link
        (identity when the loss declares none); ``init_score`` as in `predict_raw`."""
        return self._fitted().predict(X, iteration_range, init_score, self.devices)

    def predict_distribution(
        self, X: Any, iteration_range: tuple[int, int] | None = None, init_score: Any = None
    ) -> Any:
        """The predicted distribution of every row, for a distribution loss
        (`jaxboost.losses.distribution`, `gaussian_nll`): a numpyro
        distribution of batch shape ``(n_rows,)`` (``.mean``, ``.variance``,
        ``.cdf``, ``.log_prob``, its parameters as attributes: ``.loc``);
        ``init_score``: the rows' offsets, as in `predict_raw` (a model fitted
        with offsets, ``log(exposure)``, needs the new rows')."""
        model = self._fitted()
        return model.distribution(
            X, "predict_distribution", iteration_range, init_score, self.devices
        )

    def predict_quantiles(
        self,
        X: Any,
        q: Sequence[float] | float,
        iteration_range: tuple[int, int] | None = None,
        init_score: Any = None,
    ) -> np.ndarray:
        """Quantiles ``(n_rows, len(q))`` of the predicted distributions at
        levels ``q`` in (0, 1) (docs/distributions.md: how they are computed);
        ``init_score`` as in `predict_distribution`."""
        checked_levels(q)  # (before the model: a wrong q is named first)
        return self._fitted().predict_quantiles(X, q, iteration_range, init_score, self.devices)

    def sample(
        self, X: Any, n: int, random_state: Any = None, init_score: Any = None
    ) -> np.ndarray:
        """``n`` draws ``(n_rows, n)`` from every row's predicted distribution;
        ``random_state``: an int, a numpy ``Generator`` or None (a fresh seed);
        ``init_score`` as in `predict_distribution`."""
        return self._fitted().sample(X, n, random_state, init_score, self.devices)

    def staged_predict_raw(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """Raw scores after each round, one array per round; ``init_score``
        as in `predict_raw`."""
        yield from self._fitted().staged_predict_raw(X, init_score)

    def staged_predict(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """Response-scale predictions after each round; ``init_score`` as in
        `predict_raw`."""
        yield from self._fitted().staged_predict(X, init_score)


def _model_field(name: str) -> property:
    """``Booster.<name>``: the fitted model's field, read through to ``model_``
    (absent: an AttributeError, as an attribute never set); set or deleted,
    a new model of the others."""

    def get(self: Booster) -> Any:
        model = self.__dict__.get("model_")
        if model is None or not hasattr(model, name):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return getattr(model, name)

    def put(self: Booster, value: Any) -> None:
        self.model_ = (self.__dict__.get("model_") or Model()).replace(**{name: value})

    def remove(self: Booster) -> None:
        get(self)  # (an AttributeError where it is absent)
        self.model_ = self.model_.replace(**{name: ABSENT})

    return property(get, put, remove, doc=f"The fitted model's ``{name}`` (``model_.{name}``).")


for _field in MODEL_FIELDS:
    setattr(Booster, _field.name, _model_field(_field.name))
for _old in RENAMED_FIELDS:
    setattr(Booster, _old, renamed_field(_old))

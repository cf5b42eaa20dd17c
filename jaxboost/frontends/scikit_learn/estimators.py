"""scikit-learn estimators around `jaxboost.Booster`.

`Regressor` and `Classifier` check their input the scikit-learn way
(``validate_data``: ``n_features_in_``, ``feature_names_in_``, NaN allowed in
``X``; `jaxboost.frontends.scikit_learn.estimator_inputs`), build a `Booster` from their
own parameters, fit it on ``X`` as given and keep it in ``booster_``: the
Booster holds the model, its feature names and its one category table, and
every prediction goes through it.  Their settings and the Booster's are
`jaxboost.frontends.settings.settings_table`'s, and every one the Booster takes is
forwarded by name.  Fit keywords (``eval_set``, ``early_stopping_rounds``, ...) go
to ``Booster.fit`` unchanged, except that evaluation sets are validated like
``X`` and a classifier's evaluation labels are encoded like ``y``.
"""

from __future__ import annotations

import contextlib
import copy
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from ...losses.distribution_loss import as_distribution_loss
from ...losses.metadata import metadata_of
from ...runtime.devices import check_devices, device_keys, devices_from_keys
from ..booster import Booster
from ..data.categories import CategoryColumn, frame_category_columns
from ..exports.export import check_path, export_model
from ..fitted.model_fields import renamed_field, with_current_names
from ..fitted.model_file import save_model
from ..settings.checks import devices_for_jobs, progress_rounds
from ..settings.loss_params import nested_params, pop_nested, set_nested
from ..settings.settings_table import BOOSTER, CLASSIFIER, REGRESSOR, settings_of, takes_settings
from .estimator_file import estimator_section
from .estimator_inputs import checked_data, fit_categorical_columns
from .estimator_losses import (
    SumOverTargets,
    WithLink,
    classifier_loss,
    classifier_loss_and_outputs,
    regressor_loss,
)

# the settings an estimator passes on to its Booster (its own, such as n_jobs
# and verbose, it resolves itself)
_BOOSTER_SETTINGS = frozenset(setting.name for setting in settings_of(BOOSTER))


# (the names pickles of fitted estimators of an older jaxboost hold)
_SumOverTargets, _WithLink = SumOverTargets, WithLink


def rounds_to_add(n_estimators: int, fitted: Booster) -> int:
    """The rounds a ``warm_start`` fit adds to ``fitted``: ``n_estimators``
    counts them all, as in scikit-learn's ``HistGradientBoosting``."""
    if int(n_estimators) < fitted.n_estimators_:
        raise ValueError(
            f"n_estimators: with warm_start=True it counts every round, and {n_estimators} is "
            f"below the {fitted.n_estimators_} already fitted; raise it, or set "
            "warm_start=False to fit afresh"
        )
    return int(n_estimators) - fitted.n_estimators_


@contextlib.contextmanager
def _one_names_warning() -> Iterator[None]:
    """Silences the Booster's warning that ``X`` has feature names on one
    side only: scikit-learn's checks have just given it.  Not a continued
    fit's about ``init_model``, which scikit-learn's checks (``reset`` at
    fit) never give."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="X (has|does not have) feature names, but (?!init_model)"
        )
        yield


class _BoosterEstimator(BaseEstimator):
    """What Regressor and Classifier share: building, fitting and reading the Booster."""

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """scikit-learn's, and with ``deep`` the loss's parameters ``loss__<name>``."""
        params = super().get_params(deep=False)
        return {**params, **nested_params(self)} if deep else params

    def set_params(self, **params: Any) -> _BoosterEstimator:
        """scikit-learn's, and the loss's parameters ``loss__<name>`` (`loss_params`)."""
        nested = pop_nested(params)
        super().set_params(**params)
        set_nested(self, nested)
        return self

    def _engine_params(self) -> dict[str, Any]:
        """The estimator's settings that ``Booster`` takes, but the loss and
        the outputs, which the estimator resolves itself (the estimator-only
        ones, `jaxboost.frontends.settings.settings_table`'s, are resolved at fit)."""
        params = {
            name: value
            for name, value in self.get_params(deep=False).items()
            if name in _BOOSTER_SETTINGS and name not in ("loss", "loss_params", "n_outputs")
        }
        if isinstance(params.get("random_state"), np.random.RandomState):
            params["random_state"] = int(
                check_random_state(params["random_state"]).randint(np.iinfo(np.int32).max)
            )
        return params

    def _checked_X(
        self,
        X: Any,
        reset: bool,
        y: Any = "no_validation",
        columns: Sequence[int] | None = None,
        name: str = "X",
        **check_args: Any,
    ):
        """scikit-learn's checks of ``X`` (and ``y``), NaN allowed
        (`jaxboost.frontends.scikit_learn.estimator_inputs`), the categorical columns
        being those of ``categorical_features`` at fit (and for its
        evaluation sets), the Booster's after it, and a frame's category
        columns (``columns`` if given: an evaluation set's are those of the
        training ``X``).  ``name`` names ``X`` in messages.  Returns
        ``validate_data``'s arrays; the Booster takes ``X`` as it is."""
        booster = None if reset else self.__dict__.get("booster_")
        if columns is not None:
            pass
        elif booster is None:
            columns = fit_categorical_columns(self.categorical_features, X)
        else:
            fitted = {table.column for table in booster.categories_ or []}
            columns = sorted(fitted | set(frame_category_columns(X)))
        return checked_data(
            self,
            X,
            columns,
            name,
            y=y,
            reset=reset,
            ensure_all_finite="allow-nan",
            dtype=np.float32,
            **check_args,
        )

    @property
    def categories_(self) -> list[CategoryColumn] | None:
        """The categorical columns' categories and codes (None without any):
        ``booster_``'s, the model's one table."""
        booster = self.__dict__.get("booster_")
        if booster is None:
            raise AttributeError("categories_: the estimator is not fitted yet")
        return booster.categories_

    def _eval_fit_params(
        self, fit_params: dict[str, Any], prepare_targets: Callable[[Any], np.ndarray], X: Any
    ) -> dict[str, Any]:
        """``fit_params`` with every ``(X_eval, y_eval)`` of ``eval_set`` validated
        like the training data ``X`` (its categorical columns are the
        evaluation sets'; ``prepare_targets(y_eval, name)`` turns ``y_eval`` into
        engine targets, naming it ``name`` in its errors)."""
        eval_set = fit_params.get("eval_set")
        if eval_set is None:
            return fit_params
        if isinstance(eval_set, tuple) and len(eval_set) == 2:
            eval_set = [eval_set]
        prepared = []
        columns = fit_categorical_columns(self.categorical_features, X)
        for index, pair in enumerate(eval_set):
            if len(pair) != 2:
                raise ValueError(f"eval_set[{index}]: expected a pair (X, y), got {pair!r}")
            X_eval, y_eval = pair
            # (the Booster codes its categories)
            self._checked_X(X_eval, reset=False, columns=columns, name=f"eval_set[{index}] X")
            prepared.append((X_eval, prepare_targets(y_eval, f"eval_set[{index}] y")))
        return {**fit_params, "eval_set": prepared}

    def _fit_booster(
        self,
        X: Any,
        targets: np.ndarray,
        sample_weight: np.ndarray,
        loss: Callable,
        n_outputs: int | None,
        fit_params: dict[str, Any],
    ) -> None:
        """Fit ``booster_`` on ``X (n_rows, n_features)`` as given (its names
        and categories become the Booster's) and engine ``targets``, and copy
        its fitted summary onto the estimator."""
        params = self._engine_params()
        if getattr(self, "warm_start", False) and hasattr(self, "booster_"):  # (Ranker: none)
            params["n_estimators"] = rounds_to_add(self.n_estimators, self.booster_)
            if params["n_estimators"] == 0:  # as scikit-learn's: nothing to add
                return
            fit_params = {**fit_params, "init_model": self.booster_}
        params["devices"] = devices_for_jobs(self.n_jobs, params.get("devices"), len(targets))
        if "verbose" not in fit_params:
            fit_params = {**fit_params, "verbose": progress_rounds(self.verbose, self.verbosity)}
        booster = Booster(loss=loss, n_outputs=n_outputs, **params)
        with _one_names_warning():
            booster.fit(X, targets, sample_weight, **fit_params)
        self._keep_booster(booster)

    def _keep_booster(self, booster: Booster) -> None:
        """Keeps the fitted ``booster`` and the summary read off it."""
        self.booster_ = booster
        self.n_estimators_ = int(booster.n_estimators_)
        self.base_score_ = np.asarray(booster.base_score_)
        self.evals_result_ = booster.evals_result_
        self.best_iteration_ = booster.best_iteration_
        self.best_score_ = booster.best_score_

    def _raw(self, X: Any, init_score: Any = None) -> np.ndarray:
        """Raw scores ``(n_rows,)`` or ``(n_rows, n_outputs)``, float64, plus
        the rows' offsets ``init_score`` (as ``fit``'s)."""
        check_is_fitted(self)
        self._checked_X(X, reset=False)
        with _one_names_warning():
            raw = self.booster_.predict_raw(X, init_score=init_score)
        return np.asarray(raw, np.float64)

    def _staged_raw(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """Raw scores after each boosting round, as in `_raw`."""
        check_is_fitted(self)
        self._checked_X(X, reset=False)
        with _one_names_warning():
            staged = list(self.booster_.staged_predict_raw(X, init_score=init_score))
        for raw in staged:
            yield np.asarray(raw, np.float64)

    def _through_booster(self, method: str, X: Any, *args: Any, **kwargs: Any) -> Any:
        """``booster_.<method>(X, *args, **kwargs)`` after scikit-learn's
        checks of ``X``."""
        check_is_fitted(self)
        self._checked_X(X, reset=False)
        with _one_names_warning():
            return getattr(self.booster_, method)(X, *args, **kwargs)

    def _contributions(self, X: Any, init_score: Any = None) -> np.ndarray:
        """``predict(X, pred_contrib=True)``: `jaxboost.Booster.predict_contributions`
        of ``booster_`` as float64 (the raw scores' SHAP values, expected value last)."""
        values = self._through_booster("predict_contributions", X, init_score=init_score)
        return np.asarray(values, np.float64)

    def apply(self, X: Any) -> np.ndarray:
        """``(n_rows, n_trees)`` int32: the leaf each row reaches in every tree
        (`jaxboost.Booster.apply`)."""
        return self._through_booster("apply", X)

    @property
    def feature_importances_(self) -> np.ndarray:
        """``(n_features_in_,)`` share of the total split gain of each feature."""
        check_is_fitted(self)
        return np.asarray(self.booster_.feature_importances_)

    def save(self, path: str | os.PathLike, format: str = "jaxboost") -> None:
        """Write the fitted estimator to a model file: its Booster's file
        (the trees, feature names and category maps) with the estimator's
        class, settings and labels; `jaxboost.load` gives back the
        estimator, predicting exactly as this one (docs/sklearn.md).
        ``format="xgboost"`` / ``"onnx"``: its trees as a file XGBoost /
        ONNX Runtime read (raw scores; docs/explain.md, "Serve")."""
        check_is_fitted(self)
        check_path(path, format)
        if format == "jaxboost":
            return save_model(self.booster_, path, estimator=estimator_section(self))
        export_model(self.booster_, path, format)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def __sklearn_clone__(self):
        """scikit-learn's ``clone``, with ``devices`` shared instead of deep-copied
        (``jax.Device`` objects cannot be copied: they are the process's own)."""
        without_devices = copy.copy(self)
        without_devices.devices = None
        twin = super(_BoosterEstimator, without_devices).__sklearn_clone__()
        twin.devices = check_devices(self.devices)
        return twin

    def __getstate__(self) -> dict[str, Any]:
        # jax.Device objects do not pickle: they travel as (platform, id)
        state = super().__getstate__()
        return {**state, "devices": device_keys(state.get("devices"))}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = with_current_names(state)  # (a pickle of an older jaxboost)
        super().__setstate__({**state, "devices": devices_from_keys(state.get("devices"))})

    init_score_ = renamed_field("init_score_")


@takes_settings(REGRESSOR)
class Regressor(RegressorMixin, _BoosterEstimator):
    """Gradient-boosted trees regressor for any per-sample JAX loss.

    Args:
      (the settings of `jaxboost.frontends.settings.settings_table`: each with its
      default and meaning in ``help(Regressor)`` and the API reference)

    Fitted attributes: ``booster_``, ``n_features_in_``, ``feature_names_in_``
    (DataFrame input), ``n_estimators_`` (rounds kept), ``base_score_``,
    ``feature_importances_``, ``evals_result_``, ``best_iteration_`` and
    ``best_score_`` (None without early stopping), ``categories_`` (the
    categorical columns' categories and codes: ``booster_``'s).
    ``booster_`` is the whole model (feature names and category maps too):
    ``booster_.predict(X)`` is `predict`; ``save(path)`` writes it with the
    estimator, and `jaxboost.load` gives back the estimator.

    With a distribution loss `predict` returns the parameters, as
    ``Booster.predict``, and `score` is the R^2 of the predicted mean.
    """

    def _targets(self, y: np.ndarray) -> np.ndarray:
        """Engine targets: ``(n_rows,)``, or ``(n_rows, n_targets)`` for several;
        a single column is flattened."""
        y = np.asarray(y, dtype=np.float32)
        return y[:, 0] if y.ndim == 2 and y.shape[1] == 1 else y

    def _loss_and_outputs(self, y: np.ndarray) -> tuple[Callable, int | None]:
        return regressor_loss(self.loss, self.loss_params, self.n_outputs, y)

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any) -> Regressor:
        """Fit on ``X (n_rows, n_features)`` (NaN for missing) and ``y (n_rows,)`` or
        ``(n_rows, n_targets)``; ``fit_params`` go to ``Booster.fit``. Returns ``self``."""
        checked, y = self._checked_X(
            X,
            reset=True,
            y=y,
            ensure_min_samples=2,  # the engine rejects data where every feature is constant
            multi_output=True,
            y_numeric=True,
        )
        sample_weight = _check_sample_weight(
            sample_weight, checked, dtype=np.float32, ensure_non_negative=True
        )
        targets = self._targets(y)
        loss, n_outputs = self._loss_and_outputs(targets)
        fit_params = self._eval_fit_params(fit_params, self._eval_targets, X)
        self._fit_booster(X, targets, sample_weight, loss, n_outputs, fit_params)
        return self

    def _eval_targets(self, y: Any, name: str) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim not in (1, 2):
            raise ValueError(f"{name}: expected shape (n,) or (n, n_targets), got {y.shape}")
        try:
            return self._targets(y)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}: expected numeric targets ({error})") from None

    def _response(self, raw: np.ndarray) -> np.ndarray:
        # the model's link: booster_.predict and a saved file's predict through it
        return np.asarray(self.booster_.model_.link(raw), dtype=np.float64)

    def predict(self, X: Any, init_score: Any = None, pred_contrib: bool = False) -> np.ndarray:
        """Predictions on the response scale (the loss's link applied to the raw
        scores, plus the rows' offsets ``init_score`` as in ``fit``):
        ``(n_rows,)`` or ``(n_rows, n_outputs)`` float64.

        ``pred_contrib=True`` (LightGBM's): the raw scores' SHAP values
        instead, ``(n_rows, n_features + 1)`` (``(n_rows, n_outputs,
        n_features + 1)`` for several outputs), the expected value last
        (`jaxboost.Booster.predict_contributions`; docs/explain.md)."""
        if pred_contrib:
            return self._contributions(X, init_score)
        return self._response(self._raw(X, init_score))

    def staged_predict(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """`predict` after each boosting round."""
        for raw in self._staged_raw(X, init_score):
            yield self._response(raw)

    def score(self, X: Any, y: Any, sample_weight: Any = None, init_score: Any = None) -> float:
        """R^2 (`sklearn.metrics.r2_score`) of the predictions of ``X`` (plus
        the rows' offsets ``init_score``, as in ``fit``) against ``y``.

        For a distribution loss the prediction scored is each row's
        predicted mean (``predict_distribution(X).mean``), not the
        parameters `predict` returns; a ValueError where a distribution has
        no finite mean (a Student-t of ``df <= 1``)."""
        from sklearn.metrics import r2_score

        check_is_fitted(self)
        if as_distribution_loss(self.booster_.loss_) is None:
            predicted = self.predict(X, init_score)
        else:
            predicted = np.asarray(self.predict_distribution(X, init_score).mean, np.float64)
            bad = np.flatnonzero(~np.isfinite(predicted.reshape(len(predicted), -1)).all(1))
            if bad.size:
                raise ValueError(
                    f"score: the predicted distribution has no finite mean on {bad.size} "
                    f"rows of X, the first row {bad[0]}: R^2 needs one; score with "
                    "scoring= a callable of predict_distribution(X) (its log_prob, say)"
                )
        return float(r2_score(y, predicted, sample_weight=sample_weight))

    def predict_distribution(self, X: Any, init_score: Any = None) -> Any:
        """`jaxboost.Booster.predict_distribution`: a numpyro distribution,
        batch shape ``(n_rows,)``, for a distribution loss; plus the rows'
        offsets ``init_score`` as in ``fit``."""
        return self._through_booster("predict_distribution", X, init_score=init_score)

    def predict_quantiles(
        self, X: Any, q: Sequence[float] | float, init_score: Any = None
    ) -> np.ndarray:
        """`jaxboost.Booster.predict_quantiles`: ``(n_rows, len(q))``."""
        return self._through_booster("predict_quantiles", X, q, init_score=init_score)

    def sample(
        self, X: Any, n: int, random_state: Any = None, init_score: Any = None
    ) -> np.ndarray:
        """`jaxboost.Booster.sample`: ``(n_rows, n)`` draws."""
        return self._through_booster("sample", X, n, random_state, init_score=init_score)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


@takes_settings(CLASSIFIER)
class Classifier(ClassifierMixin, _BoosterEstimator):
    """Gradient-boosted trees classifier for any per-sample JAX loss.

    Args:
      (the settings of `jaxboost.frontends.settings.settings_table`: each with its
      default and meaning in ``help(Classifier)`` and the API reference)

    Labels may be of any type (``classes_`` holds them sorted).  Fitted
    attributes as for `Regressor`, plus ``classes_``.
    """

    def _loss_and_outputs(self, n_classes: int) -> tuple[Callable, int]:
        return classifier_loss_and_outputs(self.loss, self.loss_params, n_classes)

    def _encode(self, y: Any, name: str = "y") -> np.ndarray:
        """Labels -> their index in ``classes_``, as float32 engine targets
        (``y`` named ``name`` in errors)."""
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        unseen = np.setdiff1d(y, self.classes_)
        if unseen.size:
            shown = self.classes_[:10].tolist() + (["..."] if len(self.classes_) > 10 else [])
            raise ValueError(
                f"{name}: labels {unseen[:10].tolist()} were not among the training classes {shown}"
            )
        return np.searchsorted(self.classes_, y).astype(np.float32)

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any) -> Classifier:
        """Fit on ``X (n_rows, n_features)`` (NaN for missing) and labels ``y (n_rows,)``
        of any type; ``fit_params`` go to ``Booster.fit``. Returns ``self``."""
        checked, y = self._checked_X(X, reset=True, y=y, ensure_min_samples=2)
        check_classification_targets(y)
        sample_weight = _check_sample_weight(
            sample_weight, checked, dtype=np.float32, ensure_non_negative=True
        )
        fitted_classes = getattr(self, "classes_", None) if self.warm_start else None
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if fitted_classes is not None and not np.array_equal(fitted_classes, self.classes_):
            self.classes_ = fitted_classes  # (the fitted model stays as it was)
            raise ValueError(
                f"y: warm_start=True continues a model of the classes {fitted_classes.tolist()}, "
                "y has others; set warm_start=False to fit afresh"
            )
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValueError(f"y: expected at least 2 classes, got 1 class ({self.classes_[0]!r})")
        weighted = np.bincount(encoded, weights=sample_weight, minlength=n_classes) > 0
        if weighted.sum() < 2:
            raise ValueError(
                "sample_weight: expected positive weight on at least 2 classes, got only "
                f"class {self.classes_[weighted].tolist()}"
            )
        loss, n_outputs = self._loss_and_outputs(n_classes)
        fit_params = self._eval_fit_params(fit_params, self._encode, X)
        self._fit_booster(X, encoded.astype(np.float32), sample_weight, loss, n_outputs, fit_params)
        return self

    def _linked_model(self) -> Any:
        """``booster_``'s model, whose link gives the probabilities (a pickle
        of an older jaxboost may hold a callable declaring none: the
        sigmoid or softmax it was fitted to predict through)."""
        model = self.booster_.model_
        if getattr(model.loss_, "link", None) is None:
            model = model.replace(loss_=classifier_loss(model.loss_, model.n_outputs_))
        return model

    def _proba(self, raw: np.ndarray) -> np.ndarray:
        proba = np.asarray(self._linked_model().link(raw), dtype=np.float64)
        if proba.ndim == 1:
            proba = np.column_stack([1.0 - proba, proba])
        return proba / proba.sum(axis=1, keepdims=True)

    def _decision(self, raw: np.ndarray) -> np.ndarray:
        if raw.ndim == 2 and len(self.classes_) == 2:  # two outputs for two classes
            return raw[:, 1] - raw[:, 0]
        return raw

    def decision_function(self, X: Any, init_score: Any = None) -> np.ndarray:
        """Raw scores: ``(n_rows,)`` for two classes (higher favours ``classes_[1]``),
        ``(n_rows, n_classes)`` for more; plus the rows' offsets ``init_score``
        (the raw scores' shape, as in ``fit``)."""
        return self._decision(self._raw(X, init_score))

    def predict_proba(self, X: Any, init_score: Any = None) -> np.ndarray:
        """``(n_rows, n_classes)`` class probabilities, in the order of ``classes_``."""
        return self._proba(self._raw(X, init_score))

    def predict_log_proba(self, X: Any, init_score: Any = None) -> np.ndarray:
        """Logarithm of `predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X, init_score))

    def predict(self, X: Any, init_score: Any = None, pred_contrib: bool = False) -> np.ndarray:
        """The most probable label of each row, ``(n_rows,)`` of ``classes_``' type.

        With a sigmoid or softmax link, read off `decision_function` (its
        sign, or its largest score): float32 probabilities of raw scores
        within about 3e-8 of each other tie, and a tie would pick the first
        class whatever the scores say.

        ``pred_contrib=True`` (LightGBM's): the raw scores' SHAP values
        instead, ``(n_rows, n_features + 1)`` for a binary model of one
        output (they sum to `decision_function`), ``(n_rows, n_outputs,
        n_features + 1)`` for one output per class; the expected value last
        (`jaxboost.Booster.predict_contributions`; docs/explain.md)."""
        if pred_contrib:
            return self._contributions(X, init_score)
        raw = self._raw(X, init_score)
        link = metadata_of(self._linked_model().loss_).link
        if isinstance(link, str) and link in ("sigmoid", "softmax"):
            decision = self._decision(raw)
            if decision.ndim == 1:
                return self.classes_[(decision > 0).astype(int)]
            return self.classes_[np.argmax(decision, axis=1)]
        return self.classes_[np.argmax(self._proba(raw), axis=1)]

    def staged_decision_function(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """`decision_function` after each boosting round."""
        for raw in self._staged_raw(X, init_score):
            yield self._decision(raw)

    def staged_predict_proba(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """`predict_proba` after each boosting round."""
        for raw in self._staged_raw(X, init_score):
            yield self._proba(raw)

    def staged_predict(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """`predict` after each boosting round."""
        for proba in self.staged_predict_proba(X, init_score):
            yield self.classes_[np.argmax(proba, axis=1)]

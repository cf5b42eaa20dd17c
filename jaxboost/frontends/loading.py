"""``jaxboost.load``: a fitted model from a model file: a ``Booster`` from a
Booster's file, the scikit-learn estimator from an estimator's (the file's
format and checks are `jaxboost.frontends.fitted.model_file`'s and
`jaxboost.frontends.scikit_learn.estimator_file`'s)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .booster import Booster
from .fitted.file_format import DEFAULT_MAX_BYTES, ModelFileError
from .fitted.model import Model
from .fitted.model_file import read_model
from .scikit_learn.estimator_file import read_estimator_section
from .scikit_learn.estimator_losses import WithLink


def _estimator_classes() -> dict[str, type]:
    # (the estimators need scikit-learn, loaded only for an estimator's file)
    from .scikit_learn.estimators import Classifier, Regressor
    from .scikit_learn.ranker import Ranker

    return {"Regressor": Regressor, "Classifier": Classifier, "Ranker": Ranker}


def _estimator_loss(loss: Any, section: Any, state: dict) -> Any:
    """The loss given to `load_model` as the file's estimator trains with
    it: a Classifier's callable without a link predicts through the sigmoid
    (softmax) it was saved with (`jaxboost.frontends.scikit_learn.estimator_losses.classifier_loss`)."""
    if isinstance(section, dict) and section.get("class") == "Classifier":
        from .scikit_learn.estimator_losses import classifier_loss

        return classifier_loss(loss, state["n_outputs_"])
    return loss


def load_model(
    path: str | os.PathLike, loss: Any = None, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> Any:
    """The fitted model saved in ``path``: a ``Booster`` from a file written
    by ``Booster.save``, a ``Regressor``, ``Classifier`` or ``Ranker`` from
    one written by the estimator's ``save`` (its ``booster_`` is the Booster).

    Args:
      path: the model file.
      loss: the loss to train with; needed to train again a model whose loss is
        custom (not from the catalogue).  Its link must be the saved one (a
        Classifier's callable without a link takes the sigmoid or softmax
        it predicts through, as at its fit).
        Default: the catalogue loss named in the file, else a stand-in that
        predicts through the saved link and raises if trained.
      max_bytes: files larger than this are refused before reading.
    Returns:
      the model, predicting exactly as the saved one did.
    Raises:
      ModelFileError: (a ``ValueError``) the file is not a valid model file,
        or does not match its checksums (it was edited or damaged after
        saving).
    """
    params, loss, state, section = read_model(
        path, Booster, loss, max_bytes=max_bytes, adapt_loss=_estimator_loss
    )
    if section is not None:
        try:
            estimator_class, settings, added = read_estimator_section(
                section, _estimator_classes(), state
            )
        except ModelFileError as error:
            raise ModelFileError(f"model file {os.fspath(path)!r}: {error}") from None
    model = Booster(loss=loss, **params)
    model.model_ = Model(**state, loss_=loss)
    if section is None:
        return model
    return loaded_estimator(estimator_class, settings, model, added)


def loaded_estimator(
    cls: type, settings: dict[str, Any], booster: Booster, state: dict[str, Any]
) -> Any:
    """The fitted estimator of class ``cls`` that a model file holds:
    ``settings`` its constructor's (the loss, when the file names none, is
    ``booster``'s), ``booster`` the file's Booster, ``state`` the estimator's
    own fitted attributes (`jaxboost.frontends.scikit_learn.estimator_file`)."""
    loss = booster.loss_  # (the callable given, not the link added to it)
    estimator = cls(**{"loss": loss.base if isinstance(loss, WithLink) else loss, **settings})
    estimator._keep_booster(booster)
    estimator.n_features_in_ = int(booster.n_features_in_)
    if state["feature_names_in_"] is not None:
        estimator.feature_names_in_ = np.asarray(state["feature_names_in_"], dtype=object)
    if "classes_" in state:
        estimator.classes_ = state["classes_"]
    return estimator

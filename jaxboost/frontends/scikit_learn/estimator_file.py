"""The ``estimator`` section of a model file: the scikit-learn estimator
that holds the saved Booster (`jaxboost.frontends.fitted.model_file`)::

    "estimator": {"class": "Classifier",          # Regressor, Classifier or Ranker
                  "loss": "auto",                  # the loss setting if a name, else null
                  "params": {...the estimator's other settings, but devices...},
                  "state": {"feature_names_in_": ["age", "sex", ...] or null,
                            "classes_": {"dtype": "int64", "values": [0, 1]}}}

The Booster's part of the file holds the model (trees, bin edges, feature
names, category maps, the loss and its link): what an estimator adds is its
settings (to fit again, or ``clone``) and its labels.  A loss given as an
object is the Booster's loss (rebuilt from the catalogue, or the one passed
to `jaxboost.load`).  The class is chosen from the three by name: nothing
is imported by a name read from a file.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ..fitted.file_format import ModelFileError, check_keys, decode_params, encode_params

ESTIMATOR_CLASSES = ("Regressor", "Classifier", "Ranker")
_KEYS = ("class", "loss", "params", "state")
# classes_ dtypes a file holds: numbers, booleans and strings (JSON has them exactly)
_LABEL_DTYPES = ("bool", "int64", "int32", "uint8", "float64", "float32", "str", "object")


def _encode_labels(classes: np.ndarray) -> dict:
    """``classes_`` as ``{"dtype", "values"}``, or a ValueError for labels
    a file cannot hold exactly."""
    classes = np.asarray(classes)
    dtype = "str" if classes.dtype.kind == "U" else classes.dtype.name
    values = classes.tolist()
    exact = dtype in _LABEL_DTYPES and (
        dtype != "object" or all(isinstance(value, str) for value in values)
    )
    if classes.dtype.kind == "f":
        exact = exact and bool(np.all(np.isfinite(classes)))
    if not exact:
        raise ValueError(
            f"cannot save classes_ {classes!r}: a model file holds class labels that are "
            "numbers, booleans or strings; encode the labels as those, or pickle the estimator"
        )
    return {"dtype": dtype, "values": values}


def _decode_labels(obj: Any, where: str) -> np.ndarray:
    check_keys(obj, where, ("dtype", "values"))
    dtype, values = obj["dtype"], obj["values"]
    if dtype not in _LABEL_DTYPES:
        raise ModelFileError(f"{where}.dtype: expected one of {list(_LABEL_DTYPES)}, got {dtype!r}")
    text = dtype in ("str", "object")
    kinds = (str,) if text else (bool,) if dtype == "bool" else (int, float)
    if not isinstance(values, list) or not all(
        isinstance(value, kinds) and (dtype == "bool" or not isinstance(value, bool))
        for value in values
    ):
        raise ModelFileError(f"{where}.values: expected a list of {dtype} labels")
    classes = np.array(values, dtype=object if dtype == "object" else dtype)
    if dtype not in ("object", "str", "bool") and not np.array_equal(classes, values):
        raise ModelFileError(f"{where}.values: not all {dtype}")
    if len(classes) < 2 or not all(a < b for a, b in itertools.pairwise(values)):
        raise ModelFileError(f"{where}.values: expected two or more labels, ascending")
    return classes


def estimator_section(estimator: Any) -> dict:
    """The ``estimator`` section of a fitted ``estimator``'s file."""
    loss = estimator.loss if isinstance(estimator.loss, str) else None
    names = getattr(estimator, "feature_names_in_", None)
    state: dict[str, Any] = {"feature_names_in_": None if names is None else list(map(str, names))}
    if hasattr(estimator, "classes_"):
        state["classes_"] = _encode_labels(estimator.classes_)
    return {
        "class": type(estimator).__name__,
        "loss": loss,
        "params": encode_params(estimator),
        "state": state,
    }


def read_estimator_section(
    section: Any, classes: dict[str, type], booster_state: dict
) -> tuple[type, dict, dict]:
    """``(class, settings, state)`` of a file's ``estimator`` section, checked
    (``classes``: the estimator classes by name; ``booster_state``: the
    Booster's fitted attributes in the same file, which the section must
    agree with); a `ModelFileError` names the field otherwise."""
    check_keys(section, "estimator", _KEYS)
    name = section["class"]
    if name not in ESTIMATOR_CLASSES:
        raise ModelFileError(f"estimator.class: expected one of {list(ESTIMATOR_CLASSES)}")
    cls = classes[name]
    params = decode_params(section["params"], cls, "estimator.params")
    if section["loss"] is not None:
        if not isinstance(section["loss"], str):
            raise ModelFileError("estimator.loss: expected a loss name or null")
        params["loss"] = section["loss"]
    labelled = name == "Classifier"
    state_obj = check_keys(
        section["state"], "estimator.state", ("feature_names_in_",) + ("classes_",) * labelled
    )
    names = state_obj["feature_names_in_"]
    if names is not None and (
        not isinstance(names, list)
        or not all(isinstance(column, str) for column in names)
        or len(names) != booster_state["n_features_in_"]
    ):
        raise ModelFileError(
            "estimator.state.feature_names_in_: expected null or one name per feature "
            f"({booster_state['n_features_in_']})"
        )
    state: dict[str, Any] = {"feature_names_in_": names}
    if labelled:
        state["classes_"] = _decode_labels(state_obj["classes_"], "estimator.state.classes_")
        n_outputs, n_classes = booster_state["n_outputs_"], len(state["classes_"])
        if n_outputs != n_classes and not (n_outputs == 1 and n_classes == 2):
            raise ModelFileError(
                f"estimator.state.classes_: {n_classes} classes, and the model has "
                f"{n_outputs} outputs"
            )
    return cls, params, state

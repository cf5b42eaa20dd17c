"""What the scikit-learn estimators check of ``X`` before their Booster sees it.

An estimator hands its ``X`` to its `jaxboost.Booster` as it is (a frame
with its names and category columns), so the Booster holds the model's one
category table and its feature names (`booster_`, a saved file).  Before
that, scikit-learn's conventions (``n_features_in_``, ``feature_names_in_``,
the messages scikit-learn's checks expect) are met by ``validate_data`` on
a numeric stand-in of ``X``: the categorical columns that hold labels
(a pandas ``category`` or polars ``Categorical`` column) read as 0 there.
Where scikit-learn refuses a frame or an array of text or objects, the
Booster's own check names the column and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.utils.validation import validate_data

from ..data.categories import categorical_columns
from ..data.validation import as_features, check_columns, feature_names


def _labelled(dtype: Any) -> bool:
    """Whether a frame column of ``dtype`` holds labels rather than numbers."""
    kind = getattr(dtype, "kind", None)
    if kind is not None:  # pandas' numpy-like dtypes, nullable numbers too
        return kind not in "biuf"
    is_numeric = getattr(dtype, "is_numeric", None)  # polars
    return not (is_numeric is not None and (is_numeric() or str(dtype) == "Boolean"))


def numeric_stand_in(X: Any, columns: Sequence[int]) -> Any:
    """``X`` with those of its categorical ``columns`` that hold labels
    replaced by zeros (same names, same shape); ``X`` itself when none do.
    Columns beyond ``X``'s are left to the checks, which count them."""
    if not columns:
        return X
    module = type(X).__module__
    if module.startswith("pandas") and hasattr(X, "dtypes"):
        labelled = [c for c in columns if c < X.shape[1] and _labelled(X.dtypes.iloc[c])]
        if not labelled:
            return X
        X = X.copy(deep=False)
        for column in labelled:
            X.isetitem(column, np.zeros(len(X), np.float32))
        return X
    if module.startswith("polars") and hasattr(X, "schema"):
        import polars as pl

        dtypes = list(X.schema.values())
        labelled = [c for c in columns if c < len(dtypes) and _labelled(dtypes[c])]
        zeros = np.zeros(X.height, np.float32)
        return X.with_columns([pl.Series(X.columns[c], zeros) for c in labelled])
    array = np.asarray(X)
    if array.ndim != 2 or array.dtype.kind not in "OUS":
        return X
    array = array.astype(object)
    array[:, [c for c in columns if c < array.shape[1]]] = 0.0
    return array


def fit_categorical_columns(spec: Any, X: Any) -> list[int]:
    """The columns a fit of ``X`` takes as categorical (`categorical_columns`
    of the setting ``spec``); none for an ``X`` that is not a table (the
    checks then refuse it in scikit-learn's words)."""
    names = feature_names(X)
    if names is None:
        if spec is None:
            return []  # (not a frame: no category columns)
        shape = np.shape(np.asarray(X))
        if len(shape) != 2:
            return []
    n_features = len(names) if names is not None else shape[1]
    return categorical_columns(spec, X, n_features, names)


def _text_or_objects(X: Any) -> bool:
    """Whether ``X`` reads as a numpy array of strings or objects."""
    try:
        return np.asarray(X).dtype.kind in "OUS"
    except (TypeError, ValueError):
        return False


def checked_data(
    estimator: Any, X: Any, columns: Sequence[int], name: str = "X", **check_args: Any
) -> Any:
    """``validate_data(estimator, stand-in of X, **check_args)``'s result:
    the checks, and ``n_features_in_`` and ``feature_names_in_`` set (reset)
    or compared.  Where scikit-learn refuses a frame whose columns are the
    fitted ones in another order, the Booster's message says so; other
    columns, its own; where it refuses another frame, or an array of text or
    objects, the Booster's message is raised when it has one (a text column
    named, with the fix; ``X`` named ``name``); scikit-learn's own messages
    for another ``name`` than ``X`` (an evaluation set's) begin with it."""
    stand_in = numeric_stand_in(X, columns)
    try:
        return validate_data(estimator, stand_in, **check_args)
    except (TypeError, ValueError) as error:
        names = feature_names(stand_in)
        if _other_columns(estimator, names, check_args.get("reset", True), name):
            pass  # scikit-learn's words name them, before a text column is blamed
        elif names is not None:
            as_features(stand_in, name)  # raises the Booster's message, naming the column
        elif _text_or_objects(stand_in):
            try:
                as_features(stand_in, name)
            except ValueError as booster_error:  # (scikit-learn's type: its checks expect it)
                raise type(error)(str(booster_error)) from None
        if name != "X":  # scikit-learn's words say "X": not the training X
            words = str(error)
            words = f"{name} {words[2:]}" if words.startswith("X has ") else f"{name}: {words}"
            raise type(error)(words) from error
        raise


def _other_columns(estimator: Any, names: list[str] | None, reset: bool, name: str) -> bool:
    """Whether a frame's columns ``names`` are not those ``estimator`` was
    fitted on, in that order; the fitted ones in another order raise the
    Booster's message for ``name`` (predict's)."""
    fitted = getattr(estimator, "feature_names_in_", None)
    if reset or names is None or fitted is None or list(names) == list(fitted):
        return False
    if sorted(names) == sorted(fitted):
        check_columns(names, list(fitted), len(fitted), len(names), name)
    return True

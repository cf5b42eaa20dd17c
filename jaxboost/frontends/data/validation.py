"""Checks of the data at the boundary: ``X``, ``y`` and ``sample_weight``
converted to float32 arrays, or an error naming the argument, the row or
column, and what was expected."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ...engine.binning import SMALLEST_NORMAL, one_process
from ...runtime.user_warning import warn


def feature_names(X: Any) -> list[str] | None:
    """Column names of a pandas DataFrame (as strings), else None."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "dtypes"):
        return None
    return [str(column) for column in columns]


def column_count(X: Any) -> int | None:
    """The number of columns of a 2-D ``X`` (array, frame or nested list), else None."""
    try:
        shape = np.shape(X)
    except (TypeError, ValueError):  # (a ragged list)
        return None
    return int(shape[1]) if len(shape) == 2 else None


class Table(NamedTuple):
    """What a fit reads off ``X`` and its evaluation sets before anything
    else: ``X``'s frame column names (None for an array), its column count
    (None unless it is 2-D) and each evaluation set's ``X``'s column count."""

    names: list[str] | None
    n_features: int | None
    eval_counts: tuple[int | None, ...] = ()


def read_table(X: Any, eval_set: Any = None) -> Table:
    """``X``'s and ``eval_set``'s `Table` (a malformed evaluation set counts
    no columns: its checks name it later)."""
    pairs = eval_set if isinstance(eval_set, (list, tuple)) else ()
    counts = tuple(
        column_count(pair[0]) if isinstance(pair, (list, tuple)) and pair else None
        for pair in pairs
    )
    return Table(feature_names(X), column_count(X), counts)


class Float32RangeError(ValueError):
    """A finite input value that float32, in which jaxboost computes, cannot hold."""


def _frame_to_numpy(frame: Any, dtype: Any) -> np.ndarray:
    """A pandas DataFrame's values, ``pd.NA`` as NaN (float64 for ``dtype=None``)."""
    return frame.to_numpy(dtype=np.float64 if dtype is None else dtype, na_value=np.nan)


def _as_float32(
    values: Any,
    name: str,
    to_array: Callable[[Any, Any], np.ndarray] = np.asarray,
    reject_infinite: bool = False,
) -> np.ndarray:
    """``to_array(values, np.float32)``, or a `Float32RangeError` naming
    the first entry that is finite in ``to_array(values, None)`` but beyond
    float32's range (and no numpy overflow warning); with ``reject_infinite``
    a ValueError naming the first infinite entry (the same scan finds both)."""
    with np.errstate(over="ignore"):
        array = to_array(values, np.float32)
    infinite = np.isinf(array)
    if infinite.any():
        before = to_array(values, None)
        if before.dtype.kind in "fiu":
            overflow = infinite & np.isfinite(before)
            if overflow.any():
                index = np.unravel_index(np.argmax(overflow), overflow.shape)
                raise Float32RangeError(
                    f"{name}: {before[index].item()!r} ({_position(index)}) is beyond float32's "
                    f"range (magnitude at most {np.finfo(np.float32).max:.3g}); jaxboost "
                    "computes in float32, so rescale these values"
                )
        if reject_infinite:
            index = np.unravel_index(np.argmax(infinite), infinite.shape)
            raise ValueError(
                f"{name}: contains infinite values (first at {_position(index)}); "
                "use NaN for missing values"
            )
    return array


def _position(index: tuple[int, ...]) -> str:
    """``"row r, column c"`` (or ``"row r"``) of an array index."""
    return ", ".join(f"{axis} {int(i)}" for axis, i in zip(("row", "column"), index))


def as_features(
    X: Any, name: str = "X", finite: bool = False, refuse_subnormal: bool = False
) -> np.ndarray:
    """``(n_rows, n_features)`` float32 with NaN for missing, or a clear error.

    Accepts numpy and JAX arrays, nested lists and numeric pandas and polars
    DataFrames (nullable columns too: ``pd.NA`` and polars' null are
    missing); a frame's text, category or date/time column is refused by
    name (`jaxboost.frontends.data.categories` codes categories and strings
    first).  Sparse matrices are refused: they would have to be made dense
    (``X.toarray()``).  With ``finite`` (training data: NaN means missing)
    infinities are refused too, and with ``refuse_subnormal`` nonzero values
    below float32's smallest normal number (see `_check_normal`).
    """
    if hasattr(X, "tocsr") or hasattr(X, "todense"):
        raise ValueError(
            f"{name}: sparse matrices are not supported; pass a dense array (X.toarray()), "
            "with NaN where a value is missing"
        )
    frame_module = type(X).__module__
    pandas_frame = frame_module.startswith("pandas") and hasattr(X, "dtypes")
    polars_frame = frame_module.startswith("polars") and hasattr(X, "schema")
    to_array = np.asarray
    if pandas_frame:
        _check_numeric_columns(X, name)
        to_array = _frame_to_numpy  # (nullable DataFrame columns hold pd.NA)
    elif polars_frame:
        _check_polars_columns(X, name)
        to_array = _polars_to_numpy
    else:
        _check_object_columns(X, name)
    try:
        array = _as_float32(X, name, to_array, reject_infinite=finite)
    except Float32RangeError:
        raise
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{name}: expected a numeric 2-D array, could not convert it to float32: "
            f"{error}{_unconvertible_column(X)}"
        ) from None
    if array.ndim != 2:
        raise ValueError(
            f"{name}: expected a 2-D array (n_rows, n_features), got shape {array.shape}"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(
            f"{name}: expected at least one row and one feature, got shape {array.shape}"
        )
    if refuse_subnormal:
        _check_normal(array, name, feature_names(X))
    return array


def text_among_numbers(values: np.ndarray) -> tuple[Any, Any] | None:
    """``(a string, a number)`` of an object column ``values`` ``(n_rows,)``
    that holds both (``1`` and ``"1"``, as a merge of a CSV read as text and
    one read as numbers gives), or None; ``None`` and NaN are missing, not
    numbers."""
    if values.dtype != object:
        return None
    text = number = None
    for value in values.tolist():
        if isinstance(value, str):
            text = value if text is None else text
        elif value is not None and not (isinstance(value, float) and math.isnan(value)):
            number = value if number is None else number
        if text is not None and number is not None:
            return text, number
    return None


def mixed_kinds_message(name: str, column: Any, text: Any, number: Any) -> str:
    """The error for a column holding strings among numbers: which, and the fix."""
    return (
        f"{name}: column {column} holds strings among numbers ({text!r} and {number!r}); "
        "make it one kind: numbers (pd.to_numeric(column); category codes named in "
        "categorical_features) or, for categories, strings (column.astype(str)) named "
        "in categorical_features"
    )


def _check_object_columns(X: Any, name: str) -> None:
    """Raises a ValueError naming the first column of a 2-D numpy object
    array that holds strings among numbers (float32 would read ``"1"`` as
    1.0 without a word)."""
    if not isinstance(X, np.ndarray) or X.dtype != object or X.ndim != 2:
        return
    for column in range(X.shape[1]):
        mixed = text_among_numbers(X[:, column])
        if mixed is not None:
            raise ValueError(mixed_kinds_message(name, column, *mixed))


def _unconvertible_column(X: Any) -> str:
    """Which column of a 2-D array ``X`` float32 cannot hold, and the fix
    (a column of strings is categorical when named), or ``""``."""
    try:
        array = np.asarray(X)
    except (TypeError, ValueError):
        return ""
    for column in range(array.shape[1] if array.ndim == 2 else 0):
        try:
            array[:, column].astype(np.float32)
        except (TypeError, ValueError):
            return (
                f" (column {column}); a column of strings is categorical when named in "
                f"categorical_features (categorical_features=[{column}]), else encode it "
                "as numbers"
            )
    return ""


def _not_numbers(name: str, column: Any, dtype: Any) -> ValueError:
    return ValueError(
        f"{name}: column {column!r} holds {dtype}, not numbers; encode it as numbers "
        "(integer category codes named in categorical_features; dates as numbers of "
        "days, say) or, for categories, as strings or a 'category' column, with NaN for "
        "missing values"
    )


def _check_numeric_columns(frame: Any, name: str) -> None:
    """Raises a ValueError naming a pandas DataFrame's first column that is
    not numbers or booleans (text, categories, dates)."""
    for column, dtype in zip(frame.columns, frame.dtypes):
        if getattr(dtype, "kind", "O") not in "biuf":
            raise _not_numbers(name, column, dtype)


def _check_polars_columns(frame: Any, name: str) -> None:
    """Raises a ValueError naming a polars DataFrame's first column that is
    not numbers, booleans or all null (text, categories, dates, times,
    durations: ``to_numpy`` would give a date's count of time units since
    1970, in the column's own unit)."""
    import polars  # only for a polars frame, so polars is loaded already

    for column, dtype in frame.schema.items():
        if not (dtype.is_numeric() or dtype in (polars.Boolean, polars.Null)):
            raise _not_numbers(name, column, dtype)


def _polars_to_numpy(frame: Any, dtype: Any) -> np.ndarray:
    """A polars DataFrame's values (null as NaN) as ``dtype`` (float64 for None)."""
    import polars

    target = polars.Float32 if dtype == np.float32 else polars.Float64
    return frame.cast(target).to_numpy(order="c")


def _check_normal(array: np.ndarray, name: str, columns: list[str] | None) -> None:
    """Raises a ValueError naming the first nonzero value of ``array`` below
    float32's smallest normal magnitude (``SMALLEST_NORMAL``): XLA on CPU
    flushes it to 0 where the rows are binned, so a feature of such values
    (a feature times 1e-40) could not be split on."""
    small = np.abs(array) < SMALLEST_NORMAL
    if not small.any():
        return
    subnormal = small & (array != 0)
    if not subnormal.any():
        return
    row, column = np.unravel_index(np.argmax(subnormal), subnormal.shape)
    label = f"{int(column)} ({columns[column]!r})" if columns else f"{int(column)}"
    raise ValueError(
        f"{name}: column {label} has values below float32's smallest normal number "
        f"{SMALLEST_NORMAL:.2g} in magnitude (the first at row {int(row)}: "
        f"{array[row, column].item():.3g}), which the engine flushes to 0; rescale the "
        "column (multiply it by a power of ten), or set such values to 0"
    )


def as_targets(y: Any, n_rows: int, name: str = "y") -> np.ndarray:
    """``(n_rows,)`` or ``(n_rows, n_targets)`` finite float32 targets."""
    try:
        targets = _as_float32(y, name)
    except Float32RangeError:
        raise
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: expected numeric targets: {error}") from None
    if targets.ndim not in (1, 2) or targets.shape[0] != n_rows:
        raise ValueError(
            f"{name}: expected shape ({n_rows},) or ({n_rows}, n_targets) to match the "
            f"{n_rows} rows of X, got {targets.shape}"
        )
    if not np.all(np.isfinite(targets)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return targets


def as_weights(sample_weight: Any, n_rows: int, name: str = "sample_weight") -> np.ndarray:
    """``(n_rows,)`` finite, non-negative float32 weights, not all zero (ones if None)."""
    if sample_weight is None:
        return np.ones(n_rows, np.float32)
    weight = _as_float32(sample_weight, name)
    if weight.shape != (n_rows,):
        raise ValueError(f"{name}: expected shape ({n_rows},), got {weight.shape}")
    if not np.all(np.isfinite(weight)) or np.any(weight < 0) or not np.any(weight > 0):
        raise ValueError(f"{name}: expected finite, non-negative values, not all zero")
    return weight


def check_columns(
    names: list[str] | None,
    fitted_names: list[str] | None,
    n_features: int,
    got: int,
    name: str = "X",
) -> None:
    """The columns of ``name`` (``names``: its DataFrame's, or None) match
    those seen in fit (``fitted_names``, ``n_features``).

    The trees read columns by position, so a DataFrame's columns must be
    the fitted ones in the fitted order: other names, or the same in
    another order, raise a ValueError naming them and the fix.  Names on
    one side only warn, as scikit-learn does: the columns are then taken by
    position.
    """
    if got != n_features:
        raise ValueError(f"{name}: expected {n_features} features as in fit, got {got}")
    if names is None or fitted_names is None:
        warn_names_on_one_side(names, fitted_names, name)
        return
    if list(names) == list(fitted_names):
        return
    missing = [column for column in fitted_names if column not in names]
    unexpected = [column for column in names if column not in fitted_names]
    if not missing and not unexpected and sorted(names) == sorted(fitted_names):
        reordered = "X[model.feature_names_in_]" if name == "X" else "X_eval[X.columns]"
        raise ValueError(
            f"{name}: the columns seen in fit, in another order ({_shown(names)}, fitted "
            f"on {_shown(fitted_names)}); the trees read columns by position: select them "
            f"in the fitted order, e.g. {reordered}"
        )
    raise ValueError(
        f"{name}: feature names differ from those seen in fit: missing {_shown(missing)}, "
        f"unexpected {_shown(unexpected)} (fitted on {_shown(fitted_names)}); rename or "
        "select the columns as in fit"
    )


def warn_names_on_one_side(
    names: list[str] | None, fitted_names: list[str] | None, name: str, model: str = "the model"
) -> None:
    """A warning, as scikit-learn's, where one of ``name``'s columns
    (``names``) and those ``model`` was fitted on (``fitted_names``) has
    names and the other not: the columns are then taken by position."""
    if names is not None and fitted_names is None:
        warn(
            f"{name} has feature names, but {model} was fitted on an array without "
            "them: its columns are taken by position"
        )
    elif names is None and fitted_names is not None:
        warn(
            f"{name} does not have feature names, but {model} was fitted on a DataFrame "
            f"with them: its columns are taken by position as {_shown(fitted_names)}"
        )


def check_continued_columns(names: list[str] | None, fitted_names: list[str] | None) -> None:
    """A continued fit's ``X`` columns (``names``, or None without) are
    those ``init_model`` was fitted on (``fitted_names``), in that order;
    else a ValueError naming both and the fix."""
    if names is not None and fitted_names is not None and list(names) != list(fitted_names):
        raise ValueError(
            "init_model: fitted on the columns "
            f"{list(fitted_names)}, X has {list(names)}: give X's columns in the fitted order"
        )


def _shown(names: list[str], limit: int = 10) -> str:
    """``names`` as a list, cut after ``limit`` entries."""
    shown = ", ".join(repr(column) for column in names[:limit])
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return f"[{shown}{more}]"


def _any_feature_varies(X: np.ndarray) -> bool:
    """Whether some feature takes two values (NaN counting as one)."""
    if X.shape[0] == 0:
        return False
    # a feature varies when some value differs from its first one (NaN differs
    # from everything), unless it is missing everywhere; on real data the
    # first rows settle it
    for rows in (X[:1024], X):
        differs = np.any(rows != rows[:1], axis=0)
        missing_everywhere = np.isnan(rows[0]) & np.all(np.isnan(rows), axis=0)
        if np.any(differs & ~missing_everywhere):
            return True
    return False


def check_not_all_constant(
    X: np.ndarray,
    name: str = "X",
    gather: Callable[[np.ndarray], np.ndarray] = one_process,
) -> None:
    """At least one feature must take two values, or no tree can split.

    With several processes (``gather`` concatenates every process's array,
    see `jaxboost.runtime.distributed.gather`) the rows of all of them count:
    a feature constant within each process varies when their first rows
    differ.  Every process reaches the same verdict.
    """
    if np.any(gather(np.array([_any_feature_varies(X)]))):
        return
    if _any_feature_varies(gather(X[:1])):
        return
    raise ValueError(f"{name}: every feature is constant, so no tree can split on it")

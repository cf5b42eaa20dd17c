"""Categorical columns: which they are, and their categories as codes.

Each categorical column keeps the categories seen in training, in order
(numbers ascending; a pandas or polars column's categories in their listed
order; strings ascending), each with a code: the code is the column's value
the engine bins (bin ``c`` holds code ``c``, `jaxboost.engine.categorical`).
With more categories than ``max_bins`` (255 by default), the ``max_bins - 1``
most frequent keep a code of their own and the rarest share the last one.
At prediction labels are matched by value, whatever their order or kind (a
category column or strings); a category unseen in training, like a missing
value, follows each split's missing direction.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from ...engine.categorical import CategoricalSettings
from ...runtime.distributed import on_every_process
from .category_union import ColumnCategories, categories_of_all_processes
from .validation import (
    Table,
    check_columns,
    check_continued_columns,
    feature_names,
    mixed_kinds_message,
    text_among_numbers,
)


class CategoryColumn(NamedTuple):
    """One categorical column: ``values`` (numbers ascending, or a frame's
    category labels) and each one's ``codes`` (int32, ``(n_values,)``)."""

    column: int
    values: np.ndarray
    codes: np.ndarray

    @property
    def n_codes(self) -> int:
        return int(self.codes.max(initial=-1)) + 1


def _frame_kind(X: Any) -> str | None:
    module = type(X).__module__
    if module.startswith("pandas") and hasattr(X, "dtypes"):
        return "pandas"
    if module.startswith("polars") and hasattr(X, "schema"):
        return "polars"
    return None


def _text_labels(values: np.ndarray, missing: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A column of strings (``values``, ``(n_rows,)``; ``missing`` where
    absent) as `_category_labels` gives it, labels ascending; None unless
    every present value is a string and one is."""
    present = values[~missing]
    if not present.size or not all(isinstance(v, str) for v in present.tolist()):
        return None
    labels, position = np.unique(present.astype(str), return_inverse=True)
    index = np.full(len(values), -1, np.int64)
    index[~missing] = position
    return labels.astype(object), index


def _category_labels(X: Any, column: int) -> tuple[np.ndarray, np.ndarray] | None:
    """A category or string column as ``(labels (n_categories,), index of
    each row's label (n_rows,), -1 for missing)``, or None for another
    column: a frame's category column (its listed categories) or column of
    strings, or an array's column of strings."""
    kind = _frame_kind(X)
    if kind == "pandas":
        series = X.iloc[:, column]
        if str(series.dtype) == "category":
            labels = np.asarray(series.cat.categories, dtype=object)
            return labels, np.asarray(series.cat.codes, dtype=np.int64)
        if getattr(series.dtype, "kind", "O") != "O":  # (object and pandas' string dtypes)
            return None
        return _text_labels(series.to_numpy(dtype=object), series.isna().to_numpy())
    if kind == "polars":
        series = X.to_series(column)
        if str(series.dtype).split("(")[0] not in ("Categorical", "Enum", "String", "Utf8"):
            return None
        text = series.cast(str).to_numpy()
        present = np.array([value is not None for value in text])
        labels = np.unique(text[present].astype(str)).astype(object)
        index = np.full(len(text), -1, np.int64)
        index[present] = np.searchsorted(labels, text[present].astype(str))
        return labels, index
    array = np.asarray(X)
    if array.ndim != 2 or array.dtype.kind not in "OU" or not 0 <= column < array.shape[1]:
        return None
    values = array[:, column].astype(object)
    missing = np.array(
        [v is None or (isinstance(v, float) and math.isnan(v)) for v in values.tolist()]
    )
    return _text_labels(values, missing.astype(bool).reshape(-1))


def frame_category_columns(X: Any) -> list[int]:
    """The columns of a pandas or polars frame that hold categories or strings."""
    if _frame_kind(X) is None:
        return []
    return [c for c in range(len(X.columns)) if _category_labels(X, c) is not None]


def categorical_columns(spec: Any, X: Any, n_features: int, names: list[str] | None) -> list[int]:
    """``categorical_features`` as ascending column indices: None (a
    frame's category columns), indices, names, or a boolean mask of
    ``n_features``; a frame's category columns are always among them."""
    chosen = set(frame_category_columns(X))
    if spec is None:
        return sorted(chosen)
    if isinstance(spec, str):
        entries = [spec]
    elif isinstance(spec, np.ndarray):
        entries = spec.reshape(-1).tolist()
    else:
        entries = [e.item() if isinstance(e, np.generic) else e for e in spec]
    if entries and all(isinstance(e, (bool, np.bool_)) for e in entries):
        if len(entries) != n_features:
            raise ValueError(
                f"categorical_features: a boolean mask needs one entry per column "
                f"({n_features}), got {len(entries)}"
            )
        return sorted(chosen | {i for i, e in enumerate(entries) if e})
    for entry in entries:
        if isinstance(entry, (str, np.str_)):
            if names is None or str(entry) not in names:
                known = "X has no column names" if names is None else f"columns: {names}"
                raise ValueError(
                    f"categorical_features: unknown column {str(entry)!r} ({known}); "
                    "pass column indices or a DataFrame with that column"
                )
            chosen.add(names.index(str(entry)))
        elif isinstance(entry, (int, np.integer)) and 0 <= entry < n_features:
            chosen.add(int(entry))
        else:
            raise ValueError(
                f"categorical_features: {entry!r} is not a column index in [0, {n_features}) "
                "nor a column name"
            )
    return sorted(chosen)


def continued_categories(
    tables: list[CategoryColumn] | None, columns: Sequence[int], names: list[str] | None
) -> list[int]:
    """A continued fit's categorical columns: those of ``init_model``'s
    ``tables`` (None without categorical columns), which must be this fit's
    ``columns``; else a ValueError naming the setting and the fix."""
    fitted = [table.column for table in tables or []]
    if fitted != list(columns):

        def shown(indices):
            return [names[c] for c in indices] if names else list(indices)

        raise ValueError(
            f"categorical_features: init_model's categorical columns are {shown(fitted)}, "
            f"this fit's {shown(columns)}: pass categorical_features={shown(fitted)} "
            "(and X's category columns as when it was fitted) to continue it"
        )
    return fitted


def _codes_by_frequency(counts: np.ndarray, max_codes: int) -> np.ndarray:
    """Each value's code: its position, or with more values than
    ``max_codes`` the ``max_codes - 1`` most frequent their rank among those
    (in value order) and the rest ``max_codes - 1``."""
    if counts.size <= max_codes:
        return np.arange(counts.size, dtype=np.int32)
    kept = np.sort(np.argsort(-counts, kind="stable")[: max_codes - 1])
    codes = np.full(counts.size, max_codes - 1, np.int32)
    codes[kept] = np.arange(kept.size, dtype=np.int32)
    return codes


def _column_name(X: Any, column: int) -> str:
    """How messages name ``X``'s ``column``: a frame's column name, else its index."""
    return repr(str(X.columns[column])) if _frame_kind(X) else str(column)


def _numeric_values(X: Any, column: int, name: str) -> np.ndarray:
    kind = _frame_kind(X)
    if kind == "pandas":
        series = X.iloc[:, column]
        objects = series.to_numpy() if series.dtype == object else np.zeros(0)
    elif kind is None:
        objects = np.asarray(X)[:, column]
    else:
        objects = np.zeros(0)  # (a polars column holds one kind)
    mixed = text_among_numbers(objects)
    if mixed is not None:
        raise ValueError(mixed_kinds_message("categorical_features", name, *mixed))
    try:
        if kind == "pandas":
            values = X.iloc[:, column].to_numpy(dtype=np.float64, na_value=np.nan)
        elif kind == "polars":
            values = X.to_series(column).cast(float).fill_null(np.nan).to_numpy()
        else:
            values = np.asarray(np.asarray(X)[:, column], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"categorical_features: column {name} holds neither category codes nor only "
            f"strings ({error}); pass integer codes (NaN for missing), strings, or a pandas "
            "'category' column"
        ) from None
    present = values[~np.isnan(values)]
    bad = present[(present < 0) | (present != np.round(present)) | ~np.isfinite(present)]
    if bad.size:
        raise ValueError(
            f"categorical_features: column {name} holds {bad[0]!r}, not a category code; "
            "codes are non-negative integers (NaN for missing): encode the column, or "
            "pass it as a pandas 'category' column"
        )
    return values


def _column_categories(X: Any, column: int, name: str) -> ColumnCategories:
    """A column's categories in ``X``'s rows: a frame's listed labels with
    their row counts (0 for a label no row holds), or the distinct numbers."""
    labelled = _category_labels(X, column)
    if labelled is not None:
        labels, index = labelled
        counts = np.bincount(index[index >= 0], minlength=len(labels)).astype(np.int64)
        return ColumnCategories(labels, counts, True)
    raw = _numeric_values(X, column, name)
    values, counts = np.unique(raw[~np.isnan(raw)], return_counts=True)
    return ColumnCategories(values, counts.astype(np.int64), False)


def fit_categories(
    X: Any, columns: Sequence[int], names: list[str] | None, max_bins: int
) -> list[CategoryColumn]:
    """Each categorical column's `CategoryColumn`, from the training rows
    (with several processes, all processes' rows: `jaxboost.frontends.data.category_union`)."""

    def found_here() -> list[ColumnCategories]:
        return [_column_categories(X, c, repr(names[c]) if names else str(c)) for c in columns]

    found = on_every_process(found_here)
    if jax.process_count() > 1:
        found = categories_of_all_processes(columns, found, names)
    tables = []
    for column, (values, counts, _) in zip(columns, found):
        name = repr(names[column]) if names else str(column)
        seen = counts > 0
        values, counts = values[seen], counts[seen]
        codes = _codes_by_frequency(counts, max_bins)
        if counts.size > max_bins:
            _warn_shared_bin(name, counts, codes, max_bins)
        tables.append(CategoryColumn(column, values, codes))
    return tables


class CodedData(NamedTuple):
    """A fit's ``X`` and evaluation sets with their categorical columns
    coded (as given without any), and the columns' ``tables`` (None without)."""

    X: Any
    eval_set: Any
    tables: list[CategoryColumn] | None


def coded_data(
    X: Any, eval_set: Any, spec: Any, max_bins: int, table: Table, init_model: Any = None
) -> CodedData:
    """A fit's categories, fitted once, and ``X`` and every evaluation set
    coded by them.  The categorical columns are ``spec``'s
    (``categorical_features``: `categorical_columns`) and a frame's category
    columns; their categories those of the training rows (`fit_categories`),
    or, where ``init_model`` (a fitted Booster) is continued, its tables,
    whose codes mean the same categories (its columns must be this fit's).
    ``table`` is `jaxboost.frontends.data.validation.read_table`'s."""
    tables = _fit_tables(X, spec, max_bins, table, init_model)
    if not tables:
        return CodedData(X, eval_set, None)
    if eval_set is not None:
        eval_set = [
            _coded_eval_pair(pair, got, tables, table, index)
            for index, (pair, got) in enumerate(zip(eval_set, table.eval_counts))
        ]
    return CodedData(encode_categories(X, tables), eval_set, tables)


def _coded_eval_pair(
    pair: Any, got: int | None, tables: list[CategoryColumn], table: Table, index: int
) -> tuple:
    """``eval_set[index]`` (``got`` columns) with its ``X`` coded by ``tables``
    (those of ``table``'s columns); another column count, or a frame's
    columns named otherwise or in another order, is refused first (coded,
    a number column at a category's place would be blamed on the category),
    and what is no pair is left as given (fit's checks refuse it by name)."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        return pair
    X_eval, y_eval = pair
    n_features, names, eval_names = table.n_features, table.names, feature_names(X_eval)
    if None not in (got, n_features) and got != n_features:
        raise ValueError(
            f"eval_set[{index}] X: expected {n_features} features as in fit, got {got}"
        )
    if None not in (got, names, eval_names) and list(eval_names) != list(names):
        check_columns(eval_names, names, n_features, got, f"eval_set[{index}] X")
    return (encode_categories(X_eval, tables, f"eval_set[{index}] X"), y_eval)


def _fit_tables(
    X: Any, spec: Any, max_bins: int, table: Table, init_model: Any
) -> list[CategoryColumn] | None:
    """`coded_data`'s tables, None without categorical columns; with several
    processes, of all processes' rows."""
    several = jax.process_count() > 1  # (each process then takes part in the exchange)
    if spec is None and not frame_category_columns(X) and init_model is None and not several:
        return None
    names, n_features = table.names, table.n_features
    if n_features is None and not several:
        return None  # fit's input checks refuse X by name
    old_tables = None if init_model is None else getattr(init_model, "categories_", None)
    if init_model is not None:  # (its codes are read by position: the columns first)
        check_continued_columns(names, getattr(init_model, "feature_names_in_", None))

    def chosen_columns() -> list[int]:
        # (not a table: no columns, on every process, which then refuse X alike)
        columns = [] if n_features is None else categorical_columns(spec, X, n_features, names)
        if init_model is not None:
            continued_categories(old_tables, columns, names)
        return columns

    columns = on_every_process(chosen_columns)
    if init_model is not None:
        return old_tables or None
    return fit_categories(X, columns, names, int(max_bins)) or None


def _warn_shared_bin(name: str, counts: np.ndarray, codes: np.ndarray, max_bins: int) -> None:
    """Warns that the rarest categories of column ``name`` (``counts`` rows
    each) share the last code: splits cannot tell them apart.  On lme4's
    InstEval (2972 students, 1128 lecturers, about 25 rows each) that bin
    held 79% and 37% of the rows and the model lost to one on the codes as
    numbers, so the user is told, with the ways out."""
    shared = codes == max_bins - 1
    share = counts[shared].sum() / counts.sum()
    warnings.warn(
        f"categorical_features: column {name} has {counts.size} categories, more than "
        f"max_bins={max_bins}: the {int(shared.sum())} rarest ({share:.1%} of the training "
        "rows) share one bin and no split tells them "
        "apart. Group the rare categories before fitting, or leave the column out of "
        "categorical_features (its codes are then split by ranges, as numbers)",
        UserWarning,
        stacklevel=2,
    )


def _label_kind(labels: np.ndarray) -> str | None:
    """``"numbers"`` or ``"strings"`` when every one of ``labels`` is one, else None."""
    values = labels.tolist()
    if values and all(isinstance(v, str) for v in values):
        return "strings"
    numbers = (int, float, np.integer, np.floating)
    if values and all(isinstance(v, numbers) and not isinstance(v, bool) for v in values):
        return "numbers"
    return None


def _check_label_kind(argument: str, name: str, fitted: np.ndarray, given: np.ndarray) -> None:
    """Refuses labels of another kind than the fitted ones (strings of
    digits, as a CSV read as text gives, for a column fitted on the
    numbers) in column ``name`` of ``argument``: matched by value, every
    row would be unseen, silently."""
    fitted_kind, given_kind = _label_kind(fitted), _label_kind(given)
    if fitted_kind and given_kind and fitted_kind != given_kind:
        cast = "pd.to_numeric(column)" if fitted_kind == "numbers" else "column.astype(str)"
        raise ValueError(
            f"{argument}: column {name} held category labels that are {fitted_kind} in fit "
            f"(e.g. {fitted[0]!r}), and holds {given_kind} (e.g. {given[0]!r}), which match "
            f"none of them; cast the column to {fitted_kind} as in fit "
            f"(pandas: {cast}.astype('category'))"
        )


def _column_codes(X: Any, table: CategoryColumn, argument: str) -> np.ndarray:
    """``(n_rows,)`` float32 codes of a column, NaN for missing and unseen
    (``X`` named ``argument`` in errors)."""
    name = _column_name(X, table.column)
    if not len(table.values):  # no category in training: every row is missing
        return np.full(len(X), np.nan, np.float32)
    labelled = _category_labels(X, table.column)
    if labelled is not None:
        labels, index = labelled
        if table.values.dtype != object:
            raise ValueError(
                f"{argument}: column {name} holds labels, but was fitted on category codes "
                "(numbers); pass it as the numbers it held in fit"
            )
        _check_label_kind(argument, name, table.values, labels[np.unique(index[index >= 0])])
        lookup = {value: code for value, code in zip(table.values.tolist(), table.codes)}
        label_codes = np.array([lookup.get(v, np.nan) for v in labels.tolist()] + [np.nan])
        return label_codes[index].astype(np.float32)  # index -1: the NaN at the end
    values = _numeric_values(X, table.column, name)
    if np.isnan(values).all():  # every row missing, whatever the column held in fit
        return np.full(len(values), np.nan, np.float32)
    if table.values.dtype == object:  # labels in fit, given as numbers
        raise ValueError(
            f"{argument}: column {name} held category labels in fit (a 'category' column or "
            "strings); pass it as one"
        )
    position = np.clip(np.searchsorted(table.values, values), 0, len(table.values) - 1)
    known = table.values[position] == values
    return np.where(known, table.codes[position], np.nan).astype(np.float32)


def category_grid(X: Any, table: CategoryColumn) -> tuple[np.ndarray, np.ndarray]:
    """The categories of ``table`` (the fitted ones) found in ``X``'s column,
    in the table's order, and their codes: a partial dependence grid
    (scikit-learn's for a categorical feature: its categories in the data)."""
    labelled = _category_labels(X, table.column)
    if labelled is not None:
        labels, index = labelled
        present = set(labels[np.unique(index[index >= 0])].tolist())
    else:
        values = _numeric_values(X, table.column, str(table.column))
        present = set(np.unique(values[~np.isnan(values)]).tolist())
    found = np.array([value in present for value in table.values.tolist()], bool)
    if not found.any():
        raise ValueError(
            f"X: column {table.column} holds none of the categories seen in fit; "
            "pass rows with some of them"
        )
    return table.values[found], table.codes[found]


def encode_categories(X: Any, tables: list[CategoryColumn] | None, argument: str = "X") -> Any:
    """``X`` with its categorical columns replaced by their codes: a pandas
    frame stays a frame (its names are kept), an array of strings an object
    array (its other columns as they were), anything else a float array;
    ``X`` itself without tables.  Errors name ``X`` ``argument``."""
    if not tables:
        return X
    kind = _frame_kind(X)
    codes = {table.column: _column_codes(X, table, argument) for table in tables}
    if kind == "pandas":
        X = X.copy()
        for column, values in codes.items():
            X[X.columns[column]] = values
        return X
    if kind == "polars":
        import polars as pl

        return X.with_columns([pl.Series(X.columns[c], values) for c, values in codes.items()])
    array = np.asarray(X)
    array = np.array(array, dtype=object if array.dtype.kind in "OU" else np.float32, copy=True)
    for column, values in codes.items():
        array[:, column] = values
    return array


def categorical_settings(settings: Any, tables: list[CategoryColumn]) -> CategoricalSettings:
    """The engine's `CategoricalSettings` of a fit's ``settings``."""
    return CategoricalSettings(
        columns=tuple(table.column for table in tables),
        n_categories=tuple(table.n_codes for table in tables),
        max_cat_to_onehot=int(settings.max_cat_to_onehot),
        max_cat_threshold=int(settings.max_cat_threshold),
        cat_smooth=float(settings.cat_smooth),
    )


def category_edges(edges: np.ndarray, tables: list[CategoryColumn]) -> np.ndarray:
    """``edges`` ``(n_features, max_bins)`` with each categorical column's
    value bins one per code (upper edge ``c + 0.5``)."""
    edges = edges.copy()
    for table in tables:
        n_codes = table.n_codes
        edges[table.column] = np.inf
        edges[table.column, : max(n_codes - 1, 0)] = np.arange(n_codes - 1) + 0.5
    return edges


def check_category_count(name: str, value: Any) -> int:
    """``max_cat_to_onehot``, ``max_cat_threshold``: an integer >= 1."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    return int(value)


def check_smoothing(name: str, value: Any) -> float:
    """``cat_smooth``: a finite number >= 0."""
    if not isinstance(value, (int, float, np.number)) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}")
    return float(value)


def check_not_monotone(monotone: tuple[int, ...], columns: Sequence[int], names) -> None:
    """Refuses a monotone constraint on a categorical column (categories have no order)."""
    for column in columns:
        if monotone and monotone[column] != 0:
            name = repr(names[column]) if names else str(column)
            raise ValueError(
                f"monotone_constraints: column {name} is categorical, and categories have no "
                "order; set its constraint to 0, or drop it from categorical_features"
            )


def _json_values(table: CategoryColumn, names: Sequence[str] | None) -> list:
    """A column's category values as JSON numbers or strings; a ValueError
    naming the column for labels JSON cannot hold (pandas' ``pd.cut``
    intervals, dates), which a file could only store as text that the
    frame's labels at prediction would no longer match."""
    values = [v.item() if isinstance(v, np.generic) else v for v in table.values.tolist()]
    other = [v for v in values if not isinstance(v, (str, int, float))]
    if other:
        name = repr(str(names[table.column])) if names is not None else str(table.column)
        raise ValueError(
            f"categories_: column {name} has category labels of type "
            f"{type(other[0]).__name__} ({other[0]!r}), which a model file cannot hold; give "
            "the column string or number labels before fitting (pd.cut(..., labels=[...]), "
            "or .cat.rename_categories(str), at prediction too), or pickle the model"
        )
    return values


def categories_to_json(
    tables: list[CategoryColumn], names: Sequence[str] | None = None
) -> list[dict]:
    """Model-file form: per column its index, values (numbers, or a frame's
    labels as JSON strings or numbers) and codes; errors name a column by
    its name in ``names`` (the fitted frame's) where given."""
    return [
        {
            "column": int(table.column),
            "labels": table.values.dtype == object,
            "values": _json_values(table, names),
            "codes": [int(code) for code in table.codes],
        }
        for table in tables
    ]


def categories_from_json(obj: Any) -> list[CategoryColumn]:
    """`categories_to_json`'s inverse; a ValueError for anything else."""
    if not isinstance(obj, list):
        raise TypeError("expected a list")
    tables = []
    for entry in obj:
        if set(entry) != {"column", "labels", "values", "codes"}:
            raise ValueError(f"unexpected keys {sorted(entry)}")
        values = entry["values"]
        if entry["labels"]:
            values = np.array(values, dtype=object)
        else:
            values = np.asarray(values, dtype=np.float64)
        codes = np.asarray(entry["codes"], dtype=np.int32)
        if codes.shape != values.shape or (codes.size and codes.min() < 0):
            raise ValueError("values and codes differ in length, or a code is negative")
        tables.append(CategoryColumn(int(entry["column"]), values, codes))
    return tables

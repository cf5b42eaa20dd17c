"""Checks at the boundary: every error names the argument and what was expected."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .losses import TARGET_DOMAINS

from .binning import SMALLEST_NORMAL, one_process


def choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {list(allowed)}, got {value!r}")
    return value


def feature_names(X: Any) -> list[str] | None:
    """Column names of a pandas DataFrame (as strings), else None."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "dtypes"):
        return None
    return [str(column) for column in columns]


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
    """``to_array(values, np.float32)``, or a :class:`Float32RangeError` naming
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
    name.  Sparse matrices are refused: they would have to be made dense
    (``X.toarray()``).  With ``finite`` (training data: NaN means missing)
    infinities are refused too, and with ``refuse_subnormal`` nonzero values
    below float32's smallest normal number (see :func:`_check_normal`).
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
    try:
        array = _as_float32(X, name, to_array, reject_infinite=finite)
    except Float32RangeError:
        raise
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{name}: expected a numeric 2-D array, could not convert it to float32: {error}"
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


def _not_numbers(name: str, column: Any, dtype: Any) -> ValueError:
    return ValueError(
        f"{name}: column {column!r} holds {dtype}, not numbers; encode it as numbers "
        "(categories as integer codes, dates as numbers of days, say), with NaN for "
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


def check_target_domain(loss, y: np.ndarray, name: str = "y") -> None:
    """Raises a ValueError if a declared loss's ``target_domain``
    (:data:`losses._declare.TARGET_DOMAINS`) excludes some of ``y``."""
    description, holds = TARGET_DOMAINS[getattr(loss, "target_domain", "any")]
    if holds is None:
        return
    outside = ~holds(y)
    if np.any(outside):
        row = int(np.argmax(outside.reshape(y.shape[0], -1).any(axis=1)))
        raise ValueError(
            f"{name}: the loss {loss.name!r} needs targets {description}; "
            f"{int(outside.sum())} are not, the first at row {row}: {y[row]}"
        )


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
    """The columns at predict time match those seen in fit."""
    if got != n_features:
        raise ValueError(f"{name}: expected {n_features} features as in fit, got {got}")
    if names is not None and fitted_names is not None and names != fitted_names:
        raise ValueError(
            f"{name}: feature names differ from those seen in fit: expected {fitted_names}, "
            f"got {names}"
        )


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
    see :func:`jaxboost.distributed.gather`) the rows of all of them count:
    a feature constant within each process varies when their first rows
    differ.  Every process reaches the same verdict.
    """
    if np.any(gather(np.array([_any_feature_varies(X)]))):
        return
    if _any_feature_varies(gather(X[:1])):
        return
    raise ValueError(f"{name}: every feature is constant, so no tree can split on it")


_SEEDS = 2**32  # the hashes take a uint32 seed


def check_random_state(random_state: Any) -> None:
    """Raises a ValueError unless ``random_state`` is None, a whole number in
    ``[0, 2**32 - 1]`` (an int, or a float such as 7.0, as counts are
    taken; not 1.5, nor a bool) or a numpy ``RandomState`` or ``Generator``."""
    if random_state is None or isinstance(
        random_state, (np.random.RandomState, np.random.Generator)
    ):
        return
    whole = isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool)
    whole = whole or (
        isinstance(random_state, (float, np.floating)) and float(random_state).is_integer()
    )
    if not (whole and 0 <= int(random_state) < _SEEDS):
        raise ValueError(
            f"random_state: expected a whole number in [0, {_SEEDS - 1}], a numpy "
            "RandomState or Generator to draw the seed from, or None for a fresh seed "
            f"each fit; got {random_state!r}"
        )


def draw_seed(random_state: Any) -> np.uint32:
    """The seed of ``random_state`` (checked by :func:`check_random_state`):
    the number itself, or one drawn from the given ``RandomState`` or
    ``Generator``, or for None from numpy's global ``RandomState`` (a fresh
    seed each call, as scikit-learn's ``check_random_state(None)`` gives)."""
    check_random_state(random_state)
    if random_state is None:
        return np.uint32(np.random.randint(_SEEDS, dtype=np.uint32))
    if isinstance(random_state, np.random.RandomState):
        return np.uint32(random_state.randint(_SEEDS, dtype=np.uint32))
    if isinstance(random_state, np.random.Generator):
        return np.uint32(random_state.integers(_SEEDS, dtype=np.uint32))
    return np.uint32(int(random_state))


_CONTROL_FLOW_ERRORS = tuple(
    getattr(jax.errors, name)
    for name in (
        "ConcretizationTypeError",
        "TracerBoolConversionError",
        "TracerIntegerConversionError",
        "TracerArrayConversionError",
    )
    if hasattr(jax.errors, name)
)


def check_histogram_memory(
    max_depth: int, n_features: int, n_bins: int, outputs_per_tree: int, memory: int | None
) -> None:
    """Raises a ValueError when the deepest level's histograms alone would
    not fit in a device's ``memory`` bytes (None: unknown, not checked).

    Trees are complete binary trees in padded arrays, so the level above the
    leaves has ``2^(max_depth - 1)`` nodes, each with a histogram of every
    feature: about 16 bytes (the float64 sums, the float32 running sums, the
    parent's share) per (feature, node, bin, statistic), 2 statistics per
    output a tree fits.  Without this check a deep tree fails inside XLA's
    allocator.
    """
    if memory is None:
        return
    needed = 16 * n_features * 2 ** (max_depth - 1) * n_bins * 2 * outputs_per_tree
    if needed > memory:
        raise ValueError(
            f"max_depth: {max_depth} needs about {needed / 2**30:.1f} GiB per device for the "
            f"histograms of its deepest level (2^{max_depth - 1} nodes x {n_features} features "
            f"x {n_bins} bins), more than the {memory / 2**30:.1f} GiB a device has; use a "
            "smaller max_depth (or max_bins)"
        )


def check_loss(loss, y: np.ndarray, n_outputs: int, n_rows: int = 8) -> None:
    """Check ``n_outputs`` against the loss, then call the loss and its
    derivatives on a few rows before training.

    Raises a ValueError naming the problem: ``n_outputs`` other than the
    count a loss declares (an int; one per column of ``y`` for
    ``"n_targets"``; at least 2 for ``"n_classes"``), class labels outside
    ``[0, n_outputs)`` for a loss whose targets are classes, Python control
    flow on traced values, numpy called on traced values, a vector ``f``
    indexed when ``n_outputs`` is 1, a non-scalar result per sample, an
    integer result, or a failure on the given target and score shapes.
    """
    declared = getattr(loss, "n_outputs", None)
    name = getattr(loss, "name", getattr(loss, "__name__", "loss"))
    fix = "leave n_outputs unset (None) or set it to"
    count, why = declared, f"it declares n_outputs={declared}"
    if declared == "n_targets":
        count, why = (int(y.shape[1]) if y.ndim == 2 else 1), "one per column of y"
    if isinstance(count, (int, np.integer)) and count != n_outputs:
        raise ValueError(
            f"n_outputs: the loss {name!r} takes f of {count} raw score(s) per sample "
            f"({why}), got n_outputs={n_outputs}; {fix} {count}"
        )
    if declared == "n_classes" and n_outputs < 2:
        raise ValueError(
            f"n_outputs: the loss {name!r} takes one raw score per class, at least 2, got "
            f"n_outputs={n_outputs}; {fix} the number of classes"
        )
    if getattr(loss, "target_domain", None) == "class" and y.size:
        outside = (y >= n_outputs).reshape(y.shape[0], -1).any(axis=1)
        if outside.any():
            row = int(np.argmax(outside))
            raise ValueError(
                f"y: the loss {name!r} scores n_outputs={n_outputs} classes, labels 0 to "
                f"{n_outputs - 1}, but {int(outside.sum())} labels are not, the first at row "
                f"{row}: {y[row]}; {fix} at least {int(np.max(y)) + 1} (max(y) + 1)"
            )
    check_per_sample(loss, y, n_outputs, "loss", "loss", differentiate=True, n_rows=n_rows)


def check_per_sample(
    fn,
    y: np.ndarray,
    n_outputs: int,
    name: str,
    role: str,
    differentiate: bool,
    n_rows: int = 8,
) -> None:
    """Call ``fn(y, f)`` of one sample (a loss or a metric; ``role`` names it in
    the message, ``name`` is the argument the error starts with) on a few rows
    of ``y`` and scores of ``n_outputs``, with its gradient if
    ``differentiate``; raises a ValueError as :func:`check_loss` describes.

    Only shapes and dtypes are traced, so a function that passed with these
    shapes passes again: repeated fits skip the tracing (a few ms)."""
    y_rows = jax.ShapeDtypeStruct(
        (min(n_rows, y.shape[0]), *y.shape[1:]), jax.dtypes.canonicalize_dtype(y.dtype)
    )
    arguments = (fn, y_rows, n_outputs, name, role, differentiate)
    try:
        hash(arguments)
    except TypeError:  # an unhashable callable: traced every time
        _traced_per_sample.__wrapped__(*arguments)
        return
    _traced_per_sample(*arguments)


@functools.lru_cache(maxsize=64)
def _traced_per_sample(
    fn, y_rows: jax.ShapeDtypeStruct, n_outputs: int, name: str, role: str, differentiate: bool
) -> None:
    """:func:`check_per_sample` on the shapes of a few rows (cached on
    success; a failure raises, and is not cached)."""
    n_rows = y_rows.shape[0]
    f_rows = jax.ShapeDtypeStruct((n_rows,) if n_outputs == 1 else (n_rows, n_outputs), jnp.float32)
    f_shape = "()" if n_outputs == 1 else f"({n_outputs},)"
    where = (
        f"{role}(y, f) with one sample's y of shape {tuple(y_rows.shape[1:])} and f of shape "
        f"{f_shape}"
    )
    try:
        values = jax.eval_shape(jax.vmap(fn), y_rows, f_rows)
        if values.shape != (n_rows,):
            hint = ""
            if len(y_rows.shape) == 2 and y_rows.shape[1] == 1 and values.shape[1:] == (1,):
                hint = "; for one target per sample pass y of shape (n_rows,), e.g. y.ravel()"
            raise ValueError(
                f"{name}: {where} must return a scalar per sample, got shape "
                f"{values.shape[1:]}{hint}"
            )
        if not jnp.issubdtype(values.dtype, jnp.floating):
            raise ValueError(f"{name}: {where} must return a float, got dtype {values.dtype}")
        if differentiate:
            jax.eval_shape(jax.vmap(jax.grad(fn, argnums=1)), y_rows, f_rows)
    except jax.errors.TracerArrayConversionError as error:
        raise ValueError(
            f"{name}: {where} calls numpy (np.*) on a traced value, where jax.numpy (jnp.*) is "
            "needed: write it with jnp.exp, jnp.log, ... so that JAX can trace and "
            f"differentiate it. JAX said: {str(error).splitlines()[0]}"
        ) from None
    except _CONTROL_FLOW_ERRORS as error:
        raise ValueError(
            f"{name}: {where} uses Python control flow (if, while, bool(), int()) on a traced "
            "value; write it with jnp.where or jax.lax.cond. JAX said: "
            f"{str(error).splitlines()[0]}"
        ) from None
    except (TypeError, ValueError, IndexError) as error:
        if str(error).startswith(f"{name}: "):
            raise
        said = str(error).splitlines()[0]
        indexes_f = False
        if isinstance(error, IndexError) and n_outputs == 1:
            # it is f that is indexed when a vector f (of ample width) passes
            wide = jax.ShapeDtypeStruct((n_rows, 64), jnp.float32)
            try:
                jax.eval_shape(jax.vmap(fn), y_rows, wide)
                indexes_f = True
            except Exception:  # noqa: BLE001, S110  any failure: the plain message below
                pass
        if indexes_f:
            raise ValueError(
                f"{name}: {where} failed ({said}): the {role} indexes f as a vector: set "
                "n_outputs to the number of scores it takes"
            ) from None
        raise ValueError(f"{name}: {where} failed: {said}") from None

"""The ``monotone_constraints`` and ``interaction_constraints`` settings,
checked and resolved to column indices (see `jaxboost.engine.constraints`
for what they do to the trees).

Each resolver returns the form the training programs take (tuples of ints,
hashable: `jaxboost.engine.training.StaticSettings`), empty where the setting
constrains nothing, so that unconstrained fits compile the programs they
always did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

_MONOTONE = "monotone_constraints"
# monotone_constraints_method's values (LightGBM's names; "advanced" not built)
MONOTONE_METHODS = ("basic", "intermediate")
_INTERACTION = "interaction_constraints"


def _column(setting: str, feature: Any, n_features: int | None, names: Sequence[str] | None) -> int:
    """``feature`` (an index or a column name) as a column index in
    ``[0, n_features)`` (``n_features`` None: not known yet, names unresolved
    and returned as -1); else a ValueError naming ``setting`` and the fix."""
    if isinstance(feature, str):
        if n_features is None:
            return -1
        if names is None:
            raise ValueError(
                f"{setting}: the column name {feature!r} needs X with column names "
                "(a pandas or polars frame); give column indices instead"
            )
        if feature not in names:
            raise ValueError(
                f"{setting}: no column named {feature!r} in X (columns: {list(names)})"
            )
        return list(names).index(feature)
    if isinstance(feature, (int, np.integer)) and not isinstance(feature, bool):
        index = int(feature)
        if index < 0 or (n_features is not None and index >= n_features):
            bound = "" if n_features is None else f" below {n_features}, X's column count"
            raise ValueError(
                f"{setting}: column index {index} out of range: give indices from 0{bound}"
            )
        return index
    raise ValueError(f"{setting}: expected column indices (int) or names (str), got {feature!r}")


def _direction(value: Any, where: str) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value in (-1, 0, 1):
        return int(value)
    raise ValueError(
        f"{_MONOTONE}: {where} is {value!r}; expected -1 (decreasing), 0 (free) or +1 (increasing)"
    )


def monotone_directions(
    setting: Any,
    n_features: int | None = None,
    names: Sequence[str] | None = None,
    n_outputs: int = 1,
) -> tuple[int, ...]:
    """``monotone_constraints`` as one direction (-1, 0, +1) per column,
    ``()`` where it constrains nothing (None, or all 0).

    ``setting``: None, a sequence of ``n_features`` directions, or a mapping
    from column names or indices to directions (the others 0).  With
    ``n_features`` None only the values are checked (before fit sees X).
    Raises ValueError naming the setting and the fix.
    """
    if setting is None:
        return ()
    if isinstance(setting, Mapping):
        directions = {}
        for feature, value in setting.items():
            column = _column(_MONOTONE, feature, n_features, names)
            directions[column] = _direction(value, f"the entry {feature!r}")
        if n_features is None:
            return ()
        listed = [directions.get(column, 0) for column in range(n_features)]
    elif isinstance(setting, (str, bytes)) or not isinstance(setting, (Sequence, np.ndarray)):
        raise TypeError(
            f"{_MONOTONE}: expected a list of -1/0/+1 per column or a dict by column, "
            f"got {setting!r}"
        )
    else:
        listed = [_direction(value, f"entry {i}") for i, value in enumerate(setting)]
        if n_features is not None and len(listed) != n_features:
            raise ValueError(
                f"{_MONOTONE}: {len(listed)} directions for {n_features} columns of X: give "
                "one per column (0 for a free one), or a dict by column"
            )
    if not any(listed):
        return ()
    if n_outputs > 1:
        raise ValueError(
            f"{_MONOTONE}: monotone constraints apply to models of one output; this one has "
            f"{n_outputs} (a vector-output loss or n_outputs): fit one model per output, "
            f"or drop {_MONOTONE}"
        )
    return tuple(listed)


def interaction_sets(
    setting: Any, n_features: int | None = None, names: Sequence[str] | None = None
) -> tuple[tuple[int, ...], ...]:
    """``interaction_constraints`` as sorted tuples of column indices, ``()``
    for None.  ``setting``: a list of lists of column indices or names.
    With ``n_features`` None only the form is checked.  Raises ValueError
    naming the setting and the fix."""
    if setting is None:
        return ()
    if isinstance(setting, (str, bytes, Mapping)) or not isinstance(setting, Sequence):
        raise TypeError(
            f"{_INTERACTION}: expected a list of lists of columns, such as [[0, 1], [2, 3]], "
            f"got {setting!r}"
        )
    sets = []
    for number, group in enumerate(setting):
        if isinstance(group, (str, bytes, Mapping)) or not isinstance(
            group, (Sequence, set, np.ndarray)
        ):
            raise TypeError(
                f"{_INTERACTION}: set {number} is {group!r}; expected a list of columns, "
                "such as [[0, 1], [2, 3]]"
            )
        if len(group) == 0:
            raise ValueError(f"{_INTERACTION}: set {number} is empty; give its columns or drop it")
        sets.append(tuple(sorted({_column(_INTERACTION, f, n_features, names) for f in group})))
    if not sets:
        raise ValueError(
            f"{_INTERACTION}: no set given; give sets of columns, or None for no constraint"
        )
    return tuple(sets) if n_features is not None else ()


def constrains_order(setting: Any) -> bool:
    """Whether a ``monotone_constraints`` setting constrains any column."""
    if setting is None:
        return False
    values = setting.values() if isinstance(setting, Mapping) else setting
    return any(value != 0 for value in values)

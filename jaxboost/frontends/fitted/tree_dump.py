"""A fitted model's trees as rows of nodes, as text and as JSON
(docs/explain.md, "Trees as tables and text").

The trees are read through `jaxboost.engine.node_table` (the one reader
of their layout) and described in the user's units, exactly as prediction
applies them: a row goes to the left child where ``float32(x) <=
threshold`` (X is cast to float32 before the trees see it; thresholds are
float32 values, given here as the float64 numbers equal to them), to the
side ``missing_direction`` names where ``x`` is missing (NaN); at a split
on a categorical column, where its category is among the ``threshold``'s
labels, and a missing value or a category unseen in fit goes the missing
side.  Nodes are named as LightGBM names them: ``"{tree}-S{k}"`` the
``k``-th split of a depth-first walk (left side first), ``"{tree}-L{j}"``
leaf ``j`` (`jaxboost.Booster.apply`'s leaf index, ``forest_.leaf_value``'s
row).
"""

from __future__ import annotations

import json
from typing import Any

import jax
import numpy as np

from ...engine.categorical import is_categorical_node
from ...engine.node_table import node_places, node_table

DUMP_FORMATS = ("text", "json")


def fitted_booster(model: Any) -> Any:
    """The fitted `jaxboost.Booster` of ``model``: itself, or an
    estimator's ``booster_``; a RuntimeError when it is not fitted."""
    booster = getattr(model, "booster_", model)
    if not hasattr(booster, "forest_"):
        raise RuntimeError("model: not fitted yet: call fit(X, y) first")
    return booster


def feature_names_of(booster: Any) -> list[str]:
    """The fitted columns' names (a frame's), else ``f0, f1, ...``."""
    names = getattr(booster, "feature_names_in_", None)
    if names is None:
        return [f"f{index}" for index in range(booster.n_features_in_)]
    return [str(name) for name in names]


def check_tree_index(booster: Any, tree_index: Any) -> None:
    """``tree_index`` names one of the booster's trees, or a TypeError or
    ValueError says what it may be."""
    n_trees = int(np.asarray(booster.forest_.feature).shape[0])
    if isinstance(tree_index, bool) or not isinstance(tree_index, (int, np.integer)):
        raise TypeError(f"tree_index: expected an integer, got {tree_index!r}")
    if not 0 <= tree_index < n_trees:
        raise ValueError(f"tree_index: expected an index in [0, {n_trees}), got {tree_index}")


def trees_and_outputs(
    booster: Any, output: int | None, trees: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The trees to describe (``trees``, default all) and the output whose
    values each shows, or None for all of them: one output, that one; one
    tree per output, each tree's own (with ``output``, only its trees);
    vector leaves, ``output`` (None: every output)."""
    n_outputs, per_round = int(booster.n_outputs_), int(booster.trees_per_round_)
    n_trees = int(np.asarray(booster.forest_.feature).shape[0])
    if output is not None and (
        isinstance(output, bool)
        or not isinstance(output, (int, np.integer))
        or not 0 <= output < n_outputs
    ):
        raise ValueError(
            f"output: expected an output index in [0, {n_outputs}) or None, got {output!r}"
        )
    every = np.arange(n_trees) if trees is None else np.asarray(trees, np.int64)
    if n_outputs == 1:
        return every, np.zeros(every.size, np.int64)
    if per_round == n_outputs:  # one tree per output: tree t adds to output t % n_outputs
        own = every % n_outputs
        if output is not None and trees is not None and np.any(own != output):
            raise ValueError(
                f"output: tree {int(every[own != output][0])} adds to output "
                f"{int(own[own != output][0])} only (one tree per output, tree t to output "
                f"t % {n_outputs}); leave output=None"
            )
        keep = np.ones(every.size, bool) if output is None else own == output
        return every[keep], own[keep]
    if output is None:
        return every, None
    return every, np.full(every.size, int(output))


def _category_labels(table: Any, codes_left: np.ndarray) -> tuple:
    """The labels (fitted values) of ``table`` whose codes are among
    ``codes_left`` (bool, ``(256,)``), as plain Python values."""
    in_set = codes_left[np.clip(table.codes, 0, codes_left.size - 1)]
    return tuple(v.item() if isinstance(v, np.generic) else v for v in table.values[in_set])


def node_columns(booster: Any, output: int | None = None, trees=None) -> dict[str, np.ndarray]:
    """One entry per node of the chosen trees (`trees_and_outputs`), trees
    in order, each tree's nodes depth-first: `trees_to_dataframe`'s columns,
    and ``feature_index``, ``is_leaf``, ``output`` (the output shown) and
    ``node`` (the node's row in `jaxboost.engine.node_table.NodeTable`)."""
    tree_indices, outputs = trees_and_outputs(booster, output, trees)
    forest = jax.tree.map(lambda leaf: np.asarray(leaf)[tree_indices], booster.forest_)
    if forest.leaf_cover is None:  # (older model files: no covers)
        forest = forest._replace(leaf_cover=np.full(forest.leaf_weight.shape, np.nan, np.float32))
    table, names = node_table(forest), feature_names_of(booster)
    places = node_places(table)
    tree, node = np.nonzero(places.order >= 0)
    walk = np.lexsort((places.order[tree, node], tree))
    tree, node = tree[walk], node[walk]
    is_split = table.left[tree, node] >= 0
    splits_before = np.cumsum(is_split) - is_split
    first_of_tree = np.searchsorted(tree, tree)
    split_number = splits_before - splits_before[first_of_tree]

    label = np.full(table.left.shape, None, object)  # (T, N) each node's name
    prefix = np.char.add(tree_indices[tree].astype(str), np.where(is_split, "-S", "-L"))
    number = np.where(is_split, split_number, places.leaf[tree, node])
    label[tree, node] = np.char.add(prefix, number.astype(str)).astype(object)
    label = np.concatenate([label, np.full((label.shape[0], 1), None, object)], 1)  # (-1: None)

    feature = table.feature[tree, node]
    threshold = table.threshold[tree, node].astype(np.float64).astype(object)
    decision = np.where(is_split, "<=", None).astype(object)
    tables = {table_.column: table_ for table_ in getattr(booster, "categories_", None) or []}
    bit = np.arange(256, dtype=np.uint32)
    for row in np.nonzero(is_split & np.isin(feature, list(tables)))[0]:
        category = tables[int(feature[row])]
        if table.category_left is not None and is_categorical_node(
            table.category_left[tree[row], node[row]]
        ):
            words = table.category_left[tree[row], node[row]]
            codes_left = ((words[bit >> 5] >> (bit & 31)) & 1) == 1
        else:  # (a threshold on the codes)
            codes_left = bit.astype(np.float32) <= table.threshold[tree[row], node[row]]
        threshold[row], decision[row] = _category_labels(category, codes_left), "=="
    threshold[~is_split] = np.nan

    value = table.value[tree, node].astype(np.float64)  # (M, K)

    def split_or_none(values):
        return np.where(is_split, values, None).astype(object)

    columns = {
        "tree_index": tree_indices[tree],
        "node_depth": places.depth[tree, node] + 1,
        "node_index": label[tree, node],
        "left_child": label[tree, table.left[tree, node]],
        "right_child": label[tree, table.right[tree, node]],
        "parent_index": label[tree, places.parent[tree, node]],
        "split_feature": split_or_none(np.asarray(names, object)[feature]),
        "split_gain": np.where(is_split, table.gain[tree, node], np.nan).astype(np.float64),
        "threshold": threshold,
        "decision_type": decision,
        "missing_direction": split_or_none(
            np.where(table.missing_left[tree, node], "left", "right")
        ),
        "missing_type": split_or_none(np.full(tree.size, "NaN")),
    }
    if outputs is None:
        for k in range(value.shape[1]):
            columns[f"value_{k}"] = np.where(is_split, np.nan, value[:, k])
    else:
        columns["value"] = np.where(is_split, np.nan, value[np.arange(tree.size), outputs[tree]])
    columns["weight"] = table.cover[tree, node]
    columns["count"] = table.weight[tree, node]
    columns["feature_index"] = np.where(is_split, feature, -1)
    columns["is_leaf"] = ~is_split
    columns["output"] = np.full(tree.size, -1) if outputs is None else outputs[tree]
    columns["node"] = node
    return columns


_EXTRA_COLUMNS = ("feature_index", "is_leaf", "output", "node")


def trees_to_dataframe(model: Any, output: int | None = None):
    """Every tree as rows of a pandas DataFrame, one per node, in LightGBM's
    ``trees_to_dataframe`` shape (docs/explain.md).

    Columns: ``tree_index``, ``node_depth`` (1 at the root), ``node_index``
    (``"3-S0"`` a split, ``"3-L5"`` a leaf), ``left_child``,
    ``right_child``, ``parent_index``, ``split_feature`` (the column's
    name), ``split_gain``, ``threshold`` (a float, or at a categorical split
    a tuple of the labels going left), ``decision_type`` (``"<="`` or
    ``"=="``), ``missing_direction`` (``"left"``/``"right"``: missing
    values, and unseen categories), ``missing_type`` (``"NaN"``),
    ``value`` (a leaf's value, learning rate included; NaN at splits),
    ``weight`` (the training hessians' sum, XGBoost's cover; NaN in model
    files older than covers) and ``count`` (the training rows' sample
    weights summed: the row count when unweighted); missing (None or NaN)
    where a column does not apply.

    Args:
      model: a fitted `jaxboost.Booster`, or an estimator (its ``booster_``).
      output: with several outputs, the output whose leaf values ``value``
        holds.  None: one tree per output, each tree's own (tree ``t`` adds
        to output ``t % n_outputs``); vector leaves, every output, as
        columns ``value_0``, ``value_1``, ...  With one tree per output an
        ``output`` keeps only its trees.
    """
    try:
        import pandas as pd
    except ImportError as error:
        raise ImportError("trees_to_dataframe needs pandas: pip install pandas") from error
    columns = node_columns(fitted_booster(model), output)
    for name in _EXTRA_COLUMNS:
        del columns[name]
    return pd.DataFrame(columns)


def _plain(value: Any) -> Any:
    """A JSON-ready number: floats as Python floats, non-finite ones kept."""
    return float(value)


def _label_text(label: Any) -> str:
    if isinstance(label, float) and label.is_integer():
        return str(int(label))
    return repr(label)


def _number(value: float) -> str:
    return str(np.float32(value))  # (the shortest text float32 reads back exactly)


def _condition(columns: dict, row: int) -> str:
    name = columns["split_feature"][row]
    if columns["decision_type"][row] == "==":
        labels = ", ".join(_label_text(label) for label in columns["threshold"][row])
        return f"{name} in {{{labels}}}"
    return f"{name} <= {_number(columns['threshold'][row])}"


def _leaf_values(columns: dict, row: int) -> list[float] | float:
    if "value" in columns:
        return float(columns["value"][row])
    keys = sorted((key for key in columns if key.startswith("value_")), key=lambda k: int(k[6:]))
    return [float(columns[key][row]) for key in keys]


def _text(columns: dict, heading: str) -> str:
    lines = [
        heading,
        (
            "(yes: float32(x) <= threshold, or the category is in the set; "
            "missing values and categories unseen in fit go the missing side)"
        ),
    ]
    for row in range(columns["node_index"].size):
        indent = "  " * (int(columns["node_depth"][row]) - 1)
        name = columns["node_index"][row].split("-", 1)[1]
        counts = f"weight={columns['weight'][row]:.6g} count={columns['count'][row]:.6g}"
        if columns["is_leaf"][row]:
            value = _leaf_values(columns, row)
            shown = (
                _number(value)
                if isinstance(value, float)
                else "[" + ", ".join(_number(v) for v in value) + "]"
            )
            lines.append(f"{indent}{name}: leaf={shown} {counts}")
            continue
        left, right = (columns[key][row].split("-", 1)[1] for key in ("left_child", "right_child"))
        missing = left if columns["missing_direction"][row] == "left" else right
        lines.append(
            f"{indent}{name}: [{_condition(columns, row)}] yes={left} no={right} "
            f"missing={missing} gain={columns['split_gain'][row]:.6g} {counts}"
        )
    return "\n".join(lines) + "\n"


def _json_node(columns: dict, row: int, rows: dict[str, int]) -> dict:
    counts = {"weight": _plain(columns["weight"][row]), "count": _plain(columns["count"][row])}
    if columns["is_leaf"][row]:
        leaf = int(columns["node_index"][row].rsplit("L", 1)[1])
        return {"leaf_index": leaf, "leaf_value": _leaf_values(columns, row), **counts}
    threshold = columns["threshold"][row]
    categorical = columns["decision_type"][row] == "=="
    return {
        "split_index": int(columns["node_index"][row].rsplit("S", 1)[1]),
        "split_feature": int(columns["feature_index"][row]),
        "feature_name": columns["split_feature"][row],
        "split_gain": _plain(columns["split_gain"][row]),
        "threshold": list(threshold) if categorical else _plain(threshold),
        "decision_type": columns["decision_type"][row],
        "default_left": bool(columns["missing_direction"][row] == "left"),
        "missing_type": "NaN",
        **counts,
        "left_child": _json_node(columns, rows[columns["left_child"][row]], rows),
        "right_child": _json_node(columns, rows[columns["right_child"][row]], rows),
    }


def dump_tree(
    model: Any, tree_index: int = 0, format: str = "text", output: int | None = None
) -> str:
    """Tree ``tree_index`` of the model as text or JSON (docs/explain.md).

    ``format="text"``: one line a node, indented by depth, as XGBoost's
    text dump: ``S0: [bmi <= 0.0099555] yes=S1 no=S2 missing=S1 gain=...``,
    leaves ``L3: leaf=-12.5``.  ``format="json"``: LightGBM's
    ``dump_model`` tree, nested: ``{"tree_index", "round", "output",
    "num_leaves", "tree_structure": {"split_index", "split_feature"
    (index), "feature_name", "threshold" (a number, or the list of labels
    going left), "decision_type", "default_left", ..., "left_child",
    "right_child"}}``, leaves ``{"leaf_index", "leaf_value", ...}``.

    Args:
      model: a fitted `jaxboost.Booster`, or an estimator (its ``booster_``).
      tree_index: the tree, counting every tree (with one tree per output,
        ``trees_per_round_`` a round: tree ``t`` is round ``t //
        n_outputs``'s tree of output ``t % n_outputs``).
      output: vector leaves: the output shown (None: all, as lists).
    """
    if format not in DUMP_FORMATS:
        raise ValueError(f"format: expected one of {list(DUMP_FORMATS)}, got {format!r}")
    booster = fitted_booster(model)
    check_tree_index(booster, tree_index)
    columns = node_columns(booster, output, trees=[int(tree_index)])
    round_index = int(tree_index) // int(booster.trees_per_round_)
    shown = int(columns["output"][0])
    if format == "text":
        heading = f"tree {tree_index} (round {round_index}"
        heading += f", output {shown})" if booster.n_outputs_ > 1 and shown >= 0 else ")"
        return _text(columns, heading)
    rows = {name: row for row, name in enumerate(columns["node_index"])}
    return json.dumps(
        {
            "tree_index": int(tree_index),
            "round": round_index,
            "output": shown if shown >= 0 else None,
            "num_leaves": int(columns["is_leaf"].sum()),
            "tree_structure": _json_node(columns, 0, rows),
        },
        indent=1,
    )

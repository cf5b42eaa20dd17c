"""A fitted model as an XGBoost JSON model file (XGBoost >= 3.1's schema,
``doc/model.schema``): ``xgboost.Booster(model_file=path)`` predicts its
raw scores (float32 rounding), and gives its SHAP values.

Splits: jaxboost sends ``x <= threshold`` left, XGBoost ``x <
split_condition``; the condition is the next float32 above the threshold,
so both send every float32 the same way.  Missing values go the learned
direction (``default_left``).  A categorical split lists the categories
that go right (XGBoost's ``split_type`` 1), missing values and categories
unseen in fit going left, the missing direction (`export_trees`).

The initial score is XGBoost's ``base_score``: the loss's objective where
XGBoost knows it (``OBJECTIVES``: then ``predict`` gives the same
response-scale predictions), else ``reg:squarederror`` with the raw initial
score, whose ``predict`` gives raw scores whatever the loss (the file's
``jaxboost_objective`` attribute says so).  Covers are XGBoost's
``sum_hessian``.  Per-row offsets (``init_score``) are not part of a model:
add them to ``predict(..., output_margin=True)``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ...losses.metadata import metadata_of
from .export_trees import ExportTree, export_trees, fitted_state, rounds_of

_ROOT_PARENT = 2147483647  # XGBoost's "no parent"
_REG = {"reg_loss_param": {"scale_pos_weight": "1"}}

# jaxboost loss name -> (XGBoost objective, base_score of the raw initial score)
OBJECTIVES = {
    "squared_error": ("reg:squarederror", lambda raw: raw),
    "binary_logloss": ("binary:logistic", lambda raw: 1 / (1 + np.exp(-raw))),
    "softmax_cross_entropy": ("multi:softprob", lambda raw: raw),
    "poisson": ("count:poisson", np.exp),
}


def _objective(name: str, n_outputs: int) -> dict:
    if name == "multi:softprob":
        return {"name": name, "softmax_multiclass_param": {"num_class": str(n_outputs)}}
    if name == "count:poisson":
        return {"name": name, "poisson_regression_param": {"max_delta_step": "0.7"}}
    return {"name": name, **_REG}


def _tree(tree: ExportTree, index: int, n_features: int) -> dict:
    """One tree's JSON object."""
    split = tree.left >= 0
    # x <= threshold (jaxboost) is x < the next float32 up (XGBoost)
    # (a split that only separates missing values, x <= inf, is x < inf:
    # the same for every value but +inf itself, which XGBoost sends right)
    condition = np.nextafter(tree.threshold, np.float32(np.inf), dtype=np.float32)
    condition = np.where(split, np.where(tree.categorical, 0.0, condition), tree.value)
    nodes = np.flatnonzero(tree.categorical)
    listed = [np.sort(tree.right_values[node]).tolist() for node in nodes]
    sizes = [len(values) for values in listed]
    return {
        "base_weights": np.where(split, tree.mean, tree.value).astype(np.float32).tolist(),
        "categories": [value for values in listed for value in values],
        "categories_nodes": nodes.tolist(),
        "categories_segments": np.cumsum([0, *sizes[:-1]]).astype(int).tolist() if sizes else [],
        "categories_sizes": sizes,
        "default_left": (split & tree.missing_left).astype(int).tolist(),
        "id": index,
        "left_children": tree.left.tolist(),
        "loss_changes": tree.gain.tolist(),
        "parents": np.where(tree.parent < 0, _ROOT_PARENT, tree.parent).tolist(),
        "right_children": tree.right.tolist(),
        "split_conditions": condition.astype(np.float32).tolist(),
        "split_indices": np.where(split, tree.feature, 0).tolist(),
        "split_type": tree.categorical.astype(int).tolist(),
        "sum_hessian": tree.cover.astype(np.float32).tolist(),
        "tree_param": {
            "num_deleted": "0",
            "num_feature": str(n_features),
            "num_nodes": str(len(tree.left)),
            "size_leaf_vector": "1",
        },
    }


# XGBoost's type code of an int64 category list in its ``cats`` section
_INT64 = 15


def _category_encoding(booster: Any, n_features: int) -> dict | None:
    """XGBoost's ``cats`` section: each categorical column of labels
    (strings or integers: a frame's categories, a text column) lists them in the order
    whose positions the trees hold, so XGBoost maps a frame's own category
    codes onto them by label (a dtype holding categories the fit never
    saw, or in another order, reads as the fit did).  Columns of numbers
    (their values are the trees' categories) and the others list none."""
    encodings = [{"offsets": [], "values": []} for _ in range(n_features)]
    segments, order = [0] * (n_features + 1), [[] for _ in range(n_features)]
    for table in getattr(booster, "categories_", None) or []:
        labels = np.asarray(table.values)
        if labels.dtype.kind in "iuf":
            continue
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in labels):
            # a frame's categories of integers: XGBoost's int64 (type 15) list
            numbers = [int(label) for label in labels]
            encodings[table.column] = {"type": _INT64, "values": numbers}
            order[table.column] = sorted(range(len(numbers)), key=numbers.__getitem__)
        elif all(isinstance(label, str) for label in labels):
            encoded = [label.encode("utf-8") for label in labels]
            encodings[table.column] = {
                "offsets": np.cumsum([0] + [len(label) for label in encoded]).tolist(),
                "values": [byte for label in encoded for byte in label],
            }
            order[table.column] = sorted(range(len(encoded)), key=encoded.__getitem__)
    if not any(order):
        return None
    for column in range(n_features):
        segments[column + 1] = segments[column] + len(order[column])
    return {
        "enc": encodings,
        "feature_segments": segments,
        "sorted_idx": [index for column in order for index in column],
    }


def xgboost_model(model: Any) -> dict:
    """The XGBoost JSON model (a dict) of a fitted Booster or estimator."""
    booster = fitted_state(model)
    n_features, n_outputs = int(booster.n_features_in_), int(booster.n_outputs_)
    trees = export_trees(booster)
    stated = metadata_of(booster.loss_)
    loss_name = stated.name if stated.declared else None
    objective, base_score = OBJECTIVES.get(loss_name, ("reg:squarederror", None))
    if objective == "multi:softprob" and n_outputs < 2:
        objective, base_score = "reg:squarederror", None
    note = f"XGBoost's {objective}: predict() gives jaxboost's predict()"
    if base_score is None:
        note = (
            f"jaxboost loss {loss_name or 'a custom loss'!r} unknown to XGBoost: written as "
            "reg:squarederror with the raw initial score; predict() gives raw scores"
        )
        base_score = OBJECTIVES["squared_error"][1]
    start = base_score(np.asarray(booster.base_score_, np.float64))
    tables = getattr(booster, "categories_", None) or []
    types = ["float"] * n_features
    for table in tables:
        types[table.column] = "c"
    names = getattr(booster, "feature_names_in_", None)
    _check_feature_names(names)
    trees_per_round = len(trees) // max(rounds_of(booster), 1)
    cats = _category_encoding(booster, n_features)
    learner = {
        "attributes": {"jaxboost_objective": note},
        "feature_names": [] if names is None else [str(name) for name in names],
        "feature_types": types if tables else [],
        "gradient_booster": {
            "model": {
                **({"cats": cats} if cats else {}),
                "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": str(len(trees))},
                "iteration_indptr": list(range(0, len(trees) + 1, max(trees_per_round, 1))),
                "tree_info": [tree.output for tree in trees],
                "trees": [_tree(tree, i, n_features) for i, tree in enumerate(trees)],
            },
            "name": "gbtree",
        },
        "learner_model_param": {
            "base_score": "[" + ",".join(repr(float(v)) for v in start) + "]",
            "boost_from_average": "0",
            "num_class": str(n_outputs if objective == "multi:softprob" else 0),
            "num_feature": str(n_features),
            "num_target": str(1 if objective == "multi:softprob" else n_outputs),
        },
        "objective": _objective(objective, n_outputs),
    }
    return {"learner": learner, "version": [3, 1, 0]}


def save_xgboost(model: Any, path: str | os.PathLike) -> None:
    """Write a fitted Booster or estimator as an XGBoost JSON model file."""
    with open(path, "w") as file:
        json.dump(xgboost_model(model), file)


def _check_feature_names(names) -> None:
    """Refuse column names XGBoost refuses (it then rejects every DMatrix)."""
    for name in () if names is None else names:
        if any(mark in str(name) for mark in "[]<"):
            raise ValueError(
                "format='xgboost': XGBoost does not accept feature names containing "
                f"'[', ']' or '<' (column {str(name)!r}); rename the columns before fit, "
                "e.g. X.columns = [str(c).replace('[', '(').replace(']', ')').replace('<', 'lt') "
                "for c in X.columns]"
            )

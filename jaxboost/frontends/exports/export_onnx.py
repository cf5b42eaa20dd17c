"""A fitted model as an ONNX model of ``ai.onnx.ml`` tree ensembles: ONNX
Runtime gives its raw scores (float32 rounding), missing values included.

The graph takes ``X`` ``(n_rows, n_features)`` float32 (NaN for missing,
categories as `export_trees` writes them) and gives ``raw_score``
``(n_rows, n_outputs)``: the initial score plus every tree's value.  Splits
keep jaxboost's rule, ``x <= threshold`` (``BRANCH_LEQ``) goes to the true
branch, and missing values go the learned way
(``nodes_missing_value_tracks_true``).  A model without categorical splits
is one ``TreeEnsembleRegressor`` (ai.onnx.ml opset 3, what onnxmltools
writes for XGBoost and LightGBM); one with them a ``TreeEnsemble`` (opset
5), whose ``BRANCH_MEMBER`` nodes send the categories listed to the true
branch and the rest, unseen ones and missing values, to the false one.
Per-row offsets (``init_score``) are not part of the model: add them to its
output.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .export_trees import ExportTree, export_trees, fitted_state

MODE_LEQ, MODE_MEMBER = 0, 6  # TreeEnsemble's nodes_modes


def _regressor(trees: list[ExportTree], n_outputs: int, init_score: np.ndarray):
    """One ``TreeEnsembleRegressor`` node (opset 3), its attributes per node."""
    from onnx import helper

    nodes: dict[str, list] = {key: [] for key in ("tree", "node", "feature", "mode", "value")}
    nodes.update(true=[], false=[], missing=[])
    targets: dict[str, list] = {"tree": [], "node": [], "id": [], "weight": []}
    for index, tree in enumerate(trees):
        split = tree.left >= 0
        nodes["tree"] += [index] * len(split)
        nodes["node"] += list(range(len(split)))
        nodes["feature"] += np.where(split, tree.feature, 0).tolist()
        nodes["mode"] += ["BRANCH_LEQ" if s else "LEAF" for s in split]
        nodes["value"] += np.where(split, tree.threshold, 0).astype(np.float32).tolist()
        nodes["true"] += np.maximum(tree.left, 0).tolist()
        nodes["false"] += np.maximum(tree.right, 0).tolist()
        nodes["missing"] += (split & tree.missing_left).astype(int).tolist()
        leaves = np.flatnonzero(~split)
        targets["tree"] += [index] * len(leaves)
        targets["node"] += leaves.tolist()
        targets["id"] += [tree.output] * len(leaves)
        targets["weight"] += tree.value[leaves].tolist()
    return helper.make_node(
        "TreeEnsembleRegressor",
        ["X"],
        ["raw_score"],
        domain="ai.onnx.ml",
        n_targets=n_outputs,
        aggregate_function="SUM",
        post_transform="NONE",
        base_values=np.asarray(init_score, np.float32).tolist(),
        nodes_treeids=nodes["tree"],
        nodes_nodeids=nodes["node"],
        nodes_featureids=nodes["feature"],
        nodes_modes=nodes["mode"],
        nodes_values=nodes["value"],
        nodes_truenodeids=nodes["true"],
        nodes_falsenodeids=nodes["false"],
        nodes_missing_value_tracks_true=nodes["missing"],
        target_treeids=targets["tree"],
        target_nodeids=targets["node"],
        target_ids=targets["id"],
        target_weights=targets["weight"],
    )


def _ensemble(trees: list[ExportTree], n_outputs: int):
    """One ``TreeEnsemble`` node (opset 5): splits and leaves numbered apart,
    a tree without splits as one split whose both branches reach its leaf."""
    from onnx import helper, numpy_helper

    node: dict[str, list] = {key: [] for key in ("feature", "mode", "split", "missing")}
    node.update(true=[], true_leaf=[], false=[], false_leaf=[])
    roots, members, leaf_target, leaf_weight = [], [], [], []
    for tree in trees:
        split = tree.left >= 0
        split_number = np.cumsum(split) - 1 + len(node["feature"])  # where each split goes
        leaf_number = np.cumsum(~split) - 1 + len(leaf_target)
        number = np.where(split, split_number, leaf_number)
        roots.append(len(node["feature"]))
        leaf_target += [tree.output] * int((~split).sum())
        leaf_weight += tree.value[~split].tolist()
        if not split[0]:  # a leaf alone
            node["feature"].append(0)
            node["mode"].append(MODE_LEQ)
            node["split"].append(0.0)
            node["missing"].append(0)
            node["true"].append(int(number[0]))
            node["false"].append(int(number[0]))
            node["true_leaf"].append(1)
            node["false_leaf"].append(1)
            continue
        for i in np.flatnonzero(split):
            left, right = tree.left[i], tree.right[i]
            node["feature"].append(int(tree.feature[i]))
            if tree.categorical[i]:  # listed categories: the true branch (jaxboost's right)
                node["mode"].append(MODE_MEMBER)
                node["split"].append(0.0)
                node["missing"].append(0)
                members += [*np.sort(tree.right_values[i]).astype(np.float32).tolist(), np.nan]
                left, right = right, left
            else:
                node["mode"].append(MODE_LEQ)
                node["split"].append(float(tree.threshold[i]))
                node["missing"].append(int(tree.missing_left[i]))
            node["true"].append(int(number[left]))
            node["true_leaf"].append(int(not split[left]))
            node["false"].append(int(number[right]))
            node["false_leaf"].append(int(not split[right]))
    return helper.make_node(
        "TreeEnsemble",
        ["X"],
        ["tree_sum"],
        domain="ai.onnx.ml",
        n_targets=n_outputs,
        aggregate_function=1,  # SUM
        post_transform=0,  # NONE
        tree_roots=roots,
        nodes_featureids=node["feature"],
        nodes_modes=numpy_helper.from_array(np.asarray(node["mode"], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.asarray(node["split"], np.float32)),
        nodes_missing_value_tracks_true=node["missing"],
        nodes_truenodeids=node["true"],
        nodes_trueleafs=node["true_leaf"],
        nodes_falsenodeids=node["false"],
        nodes_falseleafs=node["false_leaf"],
        membership_values=numpy_helper.from_array(np.asarray(members, np.float32)),
        leaf_targetids=leaf_target,
        leaf_weights=numpy_helper.from_array(np.asarray(leaf_weight, np.float32)),
    )


def onnx_model(model: Any) -> Any:
    """The ONNX model (an ``onnx.ModelProto``) of a fitted Booster or estimator."""
    from onnx import TensorProto, helper, numpy_helper

    booster = fitted_state(model)
    n_features, n_outputs = int(booster.n_features_in_), int(booster.n_outputs_)
    trees = export_trees(booster)
    init_score = np.asarray(booster.base_score_, np.float32).reshape(1, n_outputs)
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])]
    outputs = [helper.make_tensor_value_info("raw_score", TensorProto.FLOAT, [None, n_outputs])]
    if not any(tree.categorical.any() for tree in trees):
        graph = helper.make_graph(
            [_regressor(trees, n_outputs, init_score[0])], "jaxboost", inputs, outputs
        )
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
        return helper.make_model(graph, opset_imports=opsets, ir_version=8)
    add = helper.make_node("Add", ["tree_sum", "init_score"], ["raw_score"])
    graph = helper.make_graph(
        [_ensemble(trees, n_outputs), add],
        "jaxboost",
        inputs,
        outputs,
        initializer=[numpy_helper.from_array(init_score, "init_score")],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def save_onnx(model: Any, path: str | os.PathLike) -> None:
    """Write a fitted Booster or estimator as an ONNX model file."""
    try:
        import onnx
    except ImportError as error:
        raise ImportError(
            "save(format='onnx') needs the onnx package: pip install onnx (or jaxboost[explain])"
        ) from error
    onnx.save(onnx_model(model), os.fspath(path))

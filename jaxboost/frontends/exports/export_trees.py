"""A fitted model's trees as other libraries number them: what the XGBoost
and ONNX writers (`export_xgboost`, `export_onnx`) share.

Each exported tree has one output: a tree of a one-tree-per-output model
is its output's tree, and a vector-leaf tree becomes one tree per output
with its splits and that output's leaf values (their sum is the vector
tree's scores, and each output's SHAP values are the vector tree's, as
both weigh nodes by the same covers).  A tree's nodes are the ones a row
can reach, numbered breadth first from the root (0), a split's children
side by side (`jaxboost.engine.node_table.breadth_first`: XGBoost's
predictor finds the right child next to the left one).

A categorical split's sets are written as category values, not codes:
the column's numbers (non-negative integers) for a numeric column, else a
label's position in the fitted labels (a pandas category column's codes
when its categories are the fitted ones).  A category unseen in fit follows
the split's missing direction in jaxboost; XGBoost and ONNX send a value
outside the listed set one fixed way, so each categorical split is written
with the missing direction left (its children swapped where jaxboost sends
missing values right) and lists the categories going right: unseen ones
then go the missing way.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from ...engine.node_table import breadth_first, child_share, node_table


class ExportTree(NamedTuple):
    """One tree for one output, ``n`` nodes, root 0 (numpy arrays)."""

    output: int
    left: np.ndarray  # (n,) int32, -1 at leaves
    right: np.ndarray  # (n,) int32, -1 at leaves
    feature: np.ndarray  # (n,) int32
    threshold: np.ndarray  # (n,) float32: x <= threshold goes left
    missing_left: np.ndarray  # (n,) bool
    categorical: np.ndarray  # (n,) bool: a categorical split (missing_left there)
    right_values: list  # (n,) each categorical split's category values going right, else None
    cover: np.ndarray  # (n,) float64 training hessian sums
    gain: np.ndarray  # (n,) float32, 0 at leaves
    value: np.ndarray  # (n,) float32 leaf values, 0 at splits
    mean: np.ndarray  # (n,) float64 the cover-weighted mean of the leaves below

    @property
    def parent(self) -> np.ndarray:
        """``(n,)`` int32 each node's parent, -1 at the root."""
        parent = np.full(len(self.left), -1, np.int32)
        split = np.flatnonzero(self.left >= 0)
        parent[self.left[split]] = split
        parent[self.right[split]] = split
        return parent


def fitted_state(model: Any) -> Any:
    """The Booster behind ``model`` (an estimator's ``booster_``), fitted."""
    booster = getattr(model, "booster_", model)
    if not hasattr(booster, "forest_"):
        raise RuntimeError("model: not fitted yet; call fit(X, y) first")
    return booster


def _category_values(booster: Any) -> dict[int, np.ndarray]:
    """``{column: (2, n_labels) int64}``: per categorical column, each
    fitted category's value as written (module docstring) over its code."""
    values = {}
    for table in getattr(booster, "categories_", None) or []:
        labels = np.asarray(table.values)
        if labels.dtype.kind in "iuf":
            numbers = labels.astype(np.float64)
            if not np.all((numbers >= 0) & (numbers == np.round(numbers)) & (numbers < 2**24)):
                raise ValueError(
                    f"categorical column {table.column}: its categories "
                    f"{labels[:5].tolist()}... are not all integers in [0, 2^24), "
                    "and XGBoost and ONNX read a category as such a number: recode the "
                    "column's categories as integers 0, 1, ... before fit"
                )
            ids = numbers.astype(np.int64)
        else:  # labels: their position, a pandas frame's category codes
            ids = np.arange(len(labels), dtype=np.int64)
        values[table.column] = np.stack([ids, np.asarray(table.codes, np.int64)])
    return values


def _codes_left(bitset: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: whether each code is in the bitset ``(8,)`` uint32."""
    word = bitset[np.clip(codes, 0, 255) // 32].astype(np.int64)
    return ((word >> (np.clip(codes, 0, 255) % 32)) & 1).astype(bool)


def export_trees(model: Any) -> list[ExportTree]:
    """A fitted model's trees, one output each, in round order (a round's
    trees by output)."""
    booster = fitted_state(model)
    forest = jax.tree.map(np.asarray, booster.forest_)
    if forest.leaf_cover is None:
        raise ValueError(
            "model: its trees hold no covers (the training hessian sums XGBoost's "
            "sum_hessian holds): it was saved by a jaxboost older than model format 5; "
            "fit it again with this jaxboost to export it"
        )
    table = node_table(forest)
    swapped = np.zeros(table.left.shape, bool)
    if table.category_left is not None:  # the unlisted side (left) goes the missing way
        categorical = (table.left >= 0) & table.category_left.any(axis=2)
        swapped = categorical & ~table.missing_left
        table = table._replace(
            left=np.where(swapped, table.right, table.left),
            right=np.where(swapped, table.left, table.right),
            missing_left=table.missing_left | categorical,
        )
    n_outputs = int(booster.n_outputs_)
    per_output_trees = int(booster.trees_per_round_) > 1
    categories = _category_values(booster)
    shares = child_share(table)
    trees = []
    for tree in range(table.left.shape[0]):
        nodes = breadth_first(table, tree)
        number = np.full(table.left.shape[1], -1, np.int32)
        number[nodes] = np.arange(len(nodes), dtype=np.int32)
        left, right = table.left[tree, nodes], table.right[tree, nodes]
        split = left >= 0
        feature = table.feature[tree, nodes]
        categorical = np.zeros(len(nodes), bool)
        right_values = [None] * len(nodes)
        if table.category_left is not None:
            bitsets = table.category_left[tree, nodes]
            categorical = split & bitsets.any(axis=1)
            for i in np.flatnonzero(categorical):
                ids, codes = categories[int(feature[i])]
                goes_left = _codes_left(bitsets[i], codes)
                right_values[i] = ids[goes_left if swapped[tree, nodes[i]] else ~goes_left]
        common = {
            "left": np.where(split, number[np.maximum(left, 0)], -1),
            "right": np.where(split, number[np.maximum(right, 0)], -1),
            "feature": feature,
            "threshold": table.threshold[tree, nodes],
            "missing_left": table.missing_left[tree, nodes],
            "categorical": categorical,
            "right_values": right_values,
            "cover": _covers(table, tree, nodes, shares),
            "gain": table.gain[tree, nodes],
        }
        outputs = [tree % n_outputs] if per_output_trees else range(n_outputs)
        for output in outputs:
            value = np.where(split, 0, table.value[tree, nodes, output]).astype(np.float32)
            mean = _means(common["left"], common["right"], common["cover"], value)
            trees.append(ExportTree(output=output, value=value, mean=mean, **common))
    return trees


def _covers(table, tree: int, nodes: np.ndarray, shares: tuple) -> np.ndarray:
    """``(len(nodes),)`` the covers written for ``tree``'s ``nodes`` (parents
    before children): the training hessian sums where every split's
    children's covers sum to a positive number; else, so that a reader's
    TreeSHAP (child cover / parent cover) weighs each split as jaxboost's
    does (`jaxboost.engine.node_table.child_share`: sample weights where
    the covers cannot), the root's cover (or weight) times the shares
    along each node's path (a loss of zero curvature: quantile, absolute
    error, where every cover is 0)."""
    left, right = table.left[tree], table.right[tree]
    cover = table.cover[tree]
    split = left[nodes] >= 0
    children = np.concatenate([left[nodes][split], right[nodes][split]])
    root = cover[nodes[0]]
    if np.all(np.isfinite(cover[children]) & (cover[children] > 0)) and root > 0:
        return cover[nodes]
    written = np.zeros(cover.shape, np.float64)
    weight = table.weight[tree, nodes[0]]
    written[nodes[0]] = next((v for v in (root, weight) if np.isfinite(v) and v > 0), 1.0)
    for node in nodes[split]:
        written[left[node]] = written[node] * shares[0][tree, node]
        written[right[node]] = written[node] * shares[1][tree, node]
    return written[nodes]


def _means(left, right, cover, value) -> np.ndarray:
    """``(n,)`` float64 every node's leaves' mean weighted by their covers,
    filled bottom up."""
    split = left >= 0
    depth = np.zeros(len(left), np.int32)
    for _ in range(len(left)):  # at most the depth passes; stops when settled
        deeper = depth.copy()
        deeper[left[split]] = depth[split] + 1
        deeper[right[split]] = depth[split] + 1
        if (deeper == depth).all():
            break
        depth = deeper
    mean = value.astype(np.float64)
    for level in range(int(depth.max()), -1, -1):
        nodes = np.flatnonzero(split & (depth == level))
        l_cover, r_cover = cover[left[nodes]], cover[right[nodes]]
        total = l_cover + r_cover
        safe = np.where(total > 0, total, 1.0)
        mean[nodes] = np.where(
            total > 0,
            (l_cover * mean[left[nodes]] + r_cover * mean[right[nodes]]) / safe,
            0.5 * (mean[left[nodes]] + mean[right[nodes]]),
        )
    return mean


def rounds_of(model: Any) -> int:
    """The model's number of rounds."""
    return int(fitted_state(model).n_estimators_)

"""SHAP values of a fitted model's raw scores (docs/explain.md).

The trees are read through `jaxboost.engine.node_table` and explained by
`jaxboost.engine.shap`; this module adds the initial score and the rows'
offsets to the expected value, pads the rows to their bucket (nearby sizes
reuse the compiled program) and shapes the result as XGBoost and LightGBM
do: the expected value in the last column.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...engine.node_table import node_table, tree_paths
from ...engine.shap import (
    ShapPaths,
    contributions_on_devices,
    interactions_on_devices,
    shap_paths,
)
from ...engine.tree import Tree
from ..data.offsets import with_offsets

NO_COVERS = (
    "this model's trees hold no covers (the training hessian sums that SHAP values "
    "weigh unseen features by): it was saved by a jaxboost older than model format 5, "
    "or continued from such a model; fit it again with this jaxboost to explain it"
)


def _paths(forest: Tree) -> tuple[ShapPaths, np.ndarray]:
    """The forest's `ShapPaths` (JAX arrays) and its expected value ``(K,)``."""
    if forest.leaf_cover is None:
        raise ValueError(NO_COVERS)
    table = node_table(jax.tree.map(np.asarray, forest))
    paths, expected = shap_paths(table, tree_paths(table))
    return jax.tree.map(jnp.asarray, paths), expected


def _bias(expected, base_score_, init_score: Any, n_rows: int) -> np.ndarray:
    """``(n_rows, K)`` the expected value of the raw scores: the trees'
    plus the initial score plus the rows' offsets."""
    start = np.asarray(expected + np.asarray(base_score_, np.float64), np.float32)
    bias = np.broadcast_to(start, (n_rows, start.shape[0]))
    return with_offsets(bias, init_score, start.shape[0])


def contributions(
    forest: Tree, base_score_: np.ndarray, features: np.ndarray, *, init_score: Any, devices
) -> np.ndarray:
    """``(n_rows, K, n_features + 1)`` float32 SHAP values of the raw
    scores of ``features (n_rows, n_features)``, the expected value last
    (initial score and the rows' offsets ``init_score`` in it): each row
    sums to the raw score.  ``devices``: where to compute (rows sharded)."""
    paths, expected = _paths(forest)
    phi = contributions_on_devices(paths, features, devices)  # (n, F, K)
    bias = _bias(expected, base_score_, init_score, features.shape[0])
    return np.concatenate([np.swapaxes(phi, 1, 2), bias[:, :, None]], axis=2)


def interactions(
    forest: Tree, base_score_: np.ndarray, features: np.ndarray, *, init_score: Any, devices
) -> np.ndarray:
    """``(n_rows, K, n_features + 1, n_features + 1)`` float32 SHAP
    interaction values (XGBoost's ``pred_interactions``): row ``i`` of a
    row's matrix sums to feature ``i``'s contribution, the expected value
    at ``[n_features, n_features]``.  ``devices``: where to compute."""
    n_rows, n_features = features.shape
    paths, expected = _paths(forest)
    pairs = interactions_on_devices(paths, features, devices)  # (n, F, F, K)
    phi = contributions_on_devices(paths, features, devices)  # (n, F, K)
    pairs = np.moveaxis(pairs, 3, 1)  # (n, K, F, F)
    phi = np.swapaxes(phi, 1, 2)  # (n, K, F)
    diagonal = phi - pairs.sum(axis=3)  # (the pairs' own diagonal is 0)
    index = np.arange(n_features)
    pairs[:, :, index, index] = diagonal
    whole = np.zeros(pairs.shape[:2] + (n_features + 1, n_features + 1), np.float32)
    whole[:, :, :n_features, :n_features] = pairs
    whole[:, :, n_features, n_features] = _bias(expected, base_score_, init_score, n_rows)
    return whole

"""Continued training: ``fit(X, y, init_model=model)`` adds rounds to a
fitted model (LightGBM's ``init_model``, XGBoost's ``xgb_model``).

The new rounds start from the model's raw scores on the training rows,
summed round by round in float32 as its fit summed them
(`jaxboost.engine.predict.scores_after_rounds`), number their rounds on
from the model's (the row and column subsamples and the quantisation's
rounding draw by round), and bin the rows by the model's bin edges (its
trees' thresholds are those edges).  So on the same data, with the same
loss and settings, ``n`` rounds and then ``m`` more grow the trees of one
fit of ``n + m`` rounds.  The model's initial score stays; its loss may
differ (the new rounds then minimise the new loss from the model's scores,
and the result predicts through the new loss's link).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...engine.heap_tables import heap_as_tables, heap_leaf_counts
from ...engine.predict import predict_on_devices, scores_after_rounds, tree_depth
from ...engine.tree import Tree
from ...runtime.padding import bucket_size, pad_rows
from ..data.validation import check_continued_columns, warn_names_on_one_side
from ..settings.checks import grows_node_tables, tree_shape
from .monitor import EvalSet


class ContinuedFrom(NamedTuple):
    """What a fit continues from."""

    init_score: np.ndarray  # (K,) float32, the model's
    edges: np.ndarray  # (n_features, k) float32, the model's bin edges
    # (n_rows, K) float32: the training rows' raw scores after the model's
    # rounds (plus fit's init_score)
    start: np.ndarray
    forest: Tree  # the model's trees (numpy)
    train_loss: np.ndarray  # (n_rounds + 1,) the model's
    n_rounds: int
    trees_per_round: int


def fitted_model(init_model: Any) -> Any:
    """The Booster behind ``init_model`` (a Booster or a fitted estimator),
    or a ValueError naming ``init_model``."""
    model = getattr(init_model, "booster_", init_model)
    if not hasattr(model, "forest_"):
        raise ValueError(
            f"init_model: expected a fitted Booster or estimator, got {type(init_model).__name__} "
            "without trees (fit it first, or load one with jaxboost.load)"
        )
    return model


def check_feature_count(model: Any, n_features: int) -> None:
    """``model`` (a fitted Booster) was fitted on ``n_features`` columns, or
    a ValueError naming ``init_model``."""
    if model.n_features_in_ != n_features:
        raise ValueError(
            f"init_model: fitted on {model.n_features_in_} features, X has {n_features}"
        )


def continued_model(init_model: Any, n_features: int | None) -> Any:
    """The fitted Booster ``init_model`` continues (`fitted_model`; None
    without one), fitted on ``n_features`` columns (None: ``X`` is no
    table, which fit's checks refuse)."""
    if init_model is None:
        return None
    model = fitted_model(init_model)
    if n_features is not None:  # (before its categories are looked up by column)
        check_feature_count(model, n_features)
    return model


def _check_tree_shape(forest, settings: Any) -> None:
    """The trees ``settings`` grow have the shape of ``forest``'s (its
    heap's depth, or a node table's leaves); else a ValueError with the fix."""
    max_depth, max_leaves = tree_shape(settings)
    tables = grows_node_tables(settings)
    if forest.left_child is not None:
        n_leaves = forest.leaf_value.shape[-2]
        if not tables or max_leaves != n_leaves:
            raise ValueError(
                f"init_model: its trees are leaf-wise node tables of {n_leaves} leaves; set "
                f"grow_policy='lossguide' and max_leaves={n_leaves} (no monotone or "
                "interaction constraints) to continue it"
            )
        return
    depth = tree_depth(forest)
    if tables:  # (its trees are rewritten as node tables: joined)
        reached = int(np.max(heap_leaf_counts(forest), initial=1))
        if reached > max_leaves:
            raise ValueError(
                f"init_model: its trees (heap trees of depth {depth}) reach up to {reached} "
                f"leaves, more than max_leaves={max_leaves}; set max_leaves >= {reached}, or "
                f"grow_policy='depthwise', max_leaves=None and max_depth={depth}, to continue it"
            )
        return
    if max_depth != depth:
        shown = settings.max_depth if max_depth else "None (leaf-wise: no depth bound)"
        raise ValueError(
            f"init_model: its trees have depth {depth}, max_depth is {shown}: "
            f"set max_depth={depth} to continue it"
        )


def check_compatible(model: Any, settings: Any, n_features: int, names, n_outputs: int) -> None:
    """``model`` can take more rounds of the fit of ``settings`` (their
    ``max_depth``, ``max_bins`` and ``multi_strategy`` attributes) on ``n_features``
    columns named ``names`` (or None) for ``n_outputs`` outputs; else a
    ValueError naming ``init_model`` and the fix."""
    check_feature_count(model, n_features)
    fitted_names = getattr(model, "feature_names_in_", None)
    check_continued_columns(names, fitted_names)
    warn_names_on_one_side(names, fitted_names, "X", model="init_model")
    if model.n_outputs_ != n_outputs:
        raise ValueError(
            f"init_model: has {model.n_outputs_} outputs, this fit {n_outputs}: the loss and "
            "n_outputs must give as many raw scores per row"
        )
    _check_tree_shape(model.forest_, settings)
    value_bins = int(np.shape(model.bin_edges_)[1])
    if int(settings.max_bins) < value_bins:  # (its file would say max_bins is too small)
        raise ValueError(
            f"init_model: its trees use {value_bins} value bins, max_bins is "
            f"{settings.max_bins}: a continued fit bins rows by the model's edges; set "
            f"max_bins={value_bins} (or more) to continue it"
        )
    per_round = model.trees_per_round_
    wanted = n_outputs if settings.multi_strategy == "one_output_per_tree" else 1
    if per_round != wanted:
        raise ValueError(
            f"init_model: grew {per_round} tree(s) per round, multi_strategy="
            f"{settings.multi_strategy!r} grows {wanted}: set the model's multi_strategy"
        )


def continued_from(
    model: Any, features: np.ndarray, offsets: np.ndarray | None, device: jax.Device
) -> ContinuedFrom:
    """What a fit of ``features (n_rows, n_features)`` (with fit's
    ``offsets (n_rows, K)`` or None) continues from, the scores summed on
    ``device``."""
    n_rows, n_outputs = features.shape[0], model.n_outputs_
    init_score = np.asarray(model.base_score_, np.float32)
    first = np.broadcast_to(init_score, (n_rows, n_outputs))
    if offsets is not None:  # in the order a fit with offsets adds them
        first = first + offsets
    forest = jax.tree.map(np.asarray, model.forest_)
    per_round = model.trees_per_round_
    padded_rows = bucket_size(n_rows)  # (nearby sizes reuse the compiled program)
    start = scores_after_rounds(
        jax.tree.map(jnp.asarray, forest),
        jax.device_put(pad_rows(np.ascontiguousarray(first, np.float32), padded_rows), device),
        jax.device_put(pad_rows(features, padded_rows), device),
        per_round,
    )
    return ContinuedFrom(
        init_score=init_score,
        edges=np.asarray(model.bin_edges_, np.float32),
        start=np.asarray(start)[:n_rows],
        forest=forest,
        train_loss=np.asarray(model.train_loss_, np.float64),
        n_rounds=int(model.n_estimators_),
        trees_per_round=per_round,
    )


def with_model_scores(model: Any, eval_sets: list[EvalSet], device: jax.Device) -> list[EvalSet]:
    """``eval_sets`` whose offsets (``fit``'s ``eval_init_score``, or none)
    hold what ``model``'s trees add to their rows too: where a continued
    fit's evaluation starts (the initial score is the model's, added apart)."""
    forest = jax.tree.map(jnp.asarray, model.forest_)
    zero = np.zeros(model.n_outputs_, np.float32)
    sets = []
    for evaluated in eval_sets:
        added = predict_on_devices(forest, zero, np.asarray(evaluated.X, np.float32), [device])
        offset = added if evaluated.offset is None else evaluated.offset + added
        sets.append(evaluated._replace(offset=jnp.asarray(offset)))
    return sets


def joined(continued: ContinuedFrom | None, forest: Tree, train_loss) -> tuple[Tree, list]:
    """The model's trees and training losses followed by a continued fit's
    (``forest``, and ``train_loss``: before its first round, then after
    each); unchanged without ``continued``.  The trees keep covers only
    where the model's trees have them.  At the model's last round the
    value is the continued fit's (its loss, which may be new, at the
    model's scores)."""
    if continued is None:
        return forest, train_loss
    before = continued.forest
    if before.left_child is None and forest.left_child is not None:  # (_check_tree_shape)
        before = heap_as_tables(before, forest.leaf_value.shape[1], continued.edges.shape[1])
        continued = continued._replace(forest=before)
    if continued.forest.leaf_cover is None:  # a model from a file without covers
        forest = forest._replace(leaf_cover=None)  # (none, rather than some trees')
    forest = jax.tree.map(lambda old, new: np.concatenate([old, new]), continued.forest, forest)
    return forest, list(continued.train_loss[:-1]) + list(train_loss)


def joined_evals(continued: ContinuedFrom | None, evals_result: dict) -> dict:
    """``evals_result`` of a continued fit with NaN for the model's rounds
    (its sets and metrics are this fit's): one value per round of the result."""
    if continued is None:
        return evals_result
    before = [float("nan")] * continued.n_rounds
    return {
        name: {metric: before + list(values) for metric, values in per.items()}
        for name, per in evals_result.items()
    }

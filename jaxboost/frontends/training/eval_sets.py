"""Evaluation sets for ``fit``: checked, padded to a bucket of rows (weight
0 on padding), put in group order where they have groups, and placed on the
default device, where `jaxboost.frontends.training.monitor.Monitor` evaluates
them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...engine.groups import GroupBucket
from ...runtime.padding import bucket_size, in_place_on, pad_rows
from ..data.grouping import grouped_eval_set
from ..data.offsets import as_offsets, start_scores
from ..data.validation import as_features, as_targets, as_weights, check_columns, feature_names
from .loss_checks import check_target_domain
from .monitor import EvalSet


def prepare_eval_sets(
    eval_set,
    eval_sample_weight,
    n_features: int,
    loss: Callable,
    eval_groups=None,
    names: list[str] | None = None,
    target_shape: tuple | None = None,
) -> list[EvalSet]:
    """``fit``'s ``eval_set`` (and ``eval_sample_weight``) checked against the
    training data's ``n_features``, column ``names`` (a DataFrame's, else
    None) and ``loss``, padded to bucket sizes and
    placed on the default device; ``eval_groups``: per set, its ``(group,
    qid)`` (`jaxboost.frontends.data.grouping.eval_set_groups`), or None;
    ``target_shape``: the training targets' shape past the rows, which
    each set's ``y`` must have (None: not checked)."""
    if eval_set is None:
        return []
    eval_set = list(eval_set)
    weights = list(eval_sample_weight) if eval_sample_weight is not None else []
    if weights and len(weights) != len(eval_set):
        raise ValueError(
            f"eval_sample_weight: expected one entry per eval_set ({len(eval_set)}), "
            f"got {len(weights)}"
        )
    if weights and eval_groups is not None:
        raise ValueError("eval_sample_weight: evaluation sets with groups take no weights yet")
    sets = []
    for index, pair in enumerate(eval_set):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"eval_set[{index}]: expected a pair (X, y)")
        name = f"validation_{index}"
        X = as_features(pair[0], f"eval_set[{index}] X", finite=True)
        check_columns(feature_names(pair[0]), names, n_features, X.shape[1], f"eval_set[{index}] X")
        y = as_targets(pair[1], X.shape[0], f"eval_set[{index}] y")
        check_target_domain(loss, y, f"eval_set[{index}] y")
        # (after the loss's own rules, which name its columns)
        if target_shape is not None and y.shape[1:] != tuple(target_shape):
            expected = (X.shape[0], *target_shape)
            ravel = "; pass its y.ravel()" if y.shape[1:] == (1,) and not target_shape else ""
            raise ValueError(
                f"eval_set[{index}] y: expected the training y's shape per row, {expected}, "
                f"got {y.shape}{ravel}"
            )
        weight = as_weights(
            weights[index] if weights else None, X.shape[0], f"eval_sample_weight[{index}]"
        )
        if eval_groups is not None:
            X, y, weight, tables = grouped_eval_set(X, y, eval_groups[index], index, loss)
            groups = tuple(GroupBucket(*map(jnp.asarray, table)) for table in tables)
            X = jnp.asarray(pad_rows(X, X.shape[0], aligned=in_place_on(jax.default_backend())))
            sets.append(EvalSet(name, X, jnp.asarray(y), jnp.asarray(weight), groups))
            continue
        sets.append(padded_eval_set(name, X, y, weight))
    return sets


def padded_eval_set(
    name: str, X: np.ndarray, y: np.ndarray, weight: np.ndarray, offsets: np.ndarray | None = None
) -> EvalSet:
    """An evaluation set of checked rows (``X (n_rows, n_features)``
    float32, ``y``, ``weight (n_rows,)``, ``offsets (n_rows, K)`` or None)
    padded to a bucket of rows, weight 0 on the padding, and placed on the
    default device."""
    n_padded = bucket_size(X.shape[0])
    weight = np.concatenate([weight, np.zeros(n_padded - X.shape[0], np.float32)])
    X = jnp.asarray(pad_rows(X, n_padded, aligned=in_place_on(jax.default_backend())))
    y = jnp.asarray(pad_rows(y, n_padded))
    evaluated = EvalSet(name, X, y, jnp.asarray(weight))
    if offsets is None:
        return evaluated
    padded = start_scores(np.zeros(offsets.shape[1], np.float32), offsets, n_padded)
    return evaluated._replace(offset=jnp.asarray(padded))


def with_eval_offsets(
    eval_sets: list[EvalSet],
    given: Sequence[Any] | None,
    eval_set: Any,
    n_outputs: int,
    loss: Any = None,
) -> list[EvalSet]:
    """``eval_sets`` holding ``given`` (``fit``'s ``eval_init_score``: one
    entry per set, each None or the set's offsets), checked against each
    set's rows (``eval_set``: the sets as given; ``loss`` names the
    columns) and padded as the set is."""
    if given is None:
        return eval_sets
    given = list(given)
    if len(given) != len(eval_sets):
        raise ValueError(
            f"eval_init_score: expected one entry per eval_set ({len(eval_sets)}), got "
            f"{len(given)} (None for a set without offsets)"
        )
    sets = []
    for index, (evaluated, offsets, pair) in enumerate(zip(eval_sets, given, eval_set)):
        name = f"eval_init_score[{index}]"
        offsets = as_offsets(offsets, len(pair[0]), n_outputs, name, loss)
        if offsets is not None and evaluated.groups:
            raise ValueError(f"{name}: evaluation sets with groups take no offsets yet")
        if offsets is not None:
            padded = start_scores(np.zeros(n_outputs, np.float32), offsets, evaluated.X.shape[0])
            evaluated = evaluated._replace(offset=jnp.asarray(padded))
        sets.append(evaluated)
    return sets

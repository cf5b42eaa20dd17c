"""Ranking metrics of one query group and the concordance index of survival times.

A query group is padded to ``m`` rows: ``y`` ``(m,)`` relevance labels
(non-negative whole numbers), ``f`` ``(m,)`` scores and ``mask`` ``(m,)``, False
on padding rows, which never change the result.  Rows are ranked by score,
highest first; tied scores keep their row order, as LightGBM's
``std::stable_sort`` in ``src/metric/dcg_calculator.cpp`` and
``src/metric/map_metric.hpp`` does.  A group's metric is a scalar, so a
``(n_groups, m)`` batch is ``jax.vmap`` of it, averaged by the caller (LightGBM
averages over queries; a group of padding only scores 1, so leave such groups
out of the average).

The concordance index measures a whole evaluation set of survival times:
``y`` ``(n, 2)`` holds (time, event), ``raw`` ``(n, 1)`` the predicted log hazard.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

GroupMetric = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]  # (y, f, mask) -> ()


def _check_cutoff(k: int | None, name: str) -> None:
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"{name}: k must be a positive int or None (all rows), got {k!r}")


def _in_score_order(values: jax.Array, f: jax.Array, mask: jax.Array) -> jax.Array:
    """``values`` ``(m,)`` permuted to rank order: real rows by score descending,
    ties in row order, then the padding rows with their values set to 0."""
    padding = jnp.logical_not(mask).astype(jnp.int32)
    values = jnp.where(mask, values, 0.0)
    # lax.sort compares -0.0 equal to 0.0, so negating keeps LightGBM's ties
    _, _, ordered = lax.sort((padding, -f, values), num_keys=2, is_stable=True)
    return ordered


def _top_k(m: int, k: int | None) -> jax.Array:
    """``(m,)`` bool: True at the positions 0..k-1 (all of them for k None)."""
    return jnp.arange(m) < (m if k is None else k)


def ndcg_at(k: int | None) -> GroupMetric:
    """NDCG@k of one query group, as LightGBM's ``ndcg@k``.

    DCG@k is ``sum(gain[r] / log2(2 + r))`` over the top ``k`` ranks ``r``
    (0-based, score descending, ties in row order) with ``gain = 2**y - 1``;
    NDCG divides it by the DCG@k of the rows ranked by label.  A group whose
    labels are all 0 scores 1; ``k`` None or above the group's rows takes all
    of them.

    Args:
      k: the cutoff, a positive int, or None for all rows.
    Returns:
      ``ndcg(y, f, mask) -> ()`` float32, with ``y``, ``f``, ``mask`` ``(m,)``.
    """
    _check_cutoff(k, "ndcg_at")

    def ndcg(y: jax.Array, f: jax.Array, mask: jax.Array) -> jax.Array:
        m = y.shape[0]
        gain = jnp.exp2(y.astype(jnp.float32)) - 1.0
        weight = jnp.where(_top_k(m, k), 1.0 / jnp.log2(2.0 + jnp.arange(m)), 0.0)
        dcg = jnp.sum(_in_score_order(gain, f, mask) * weight)
        # padding gains are 0, so sorting all m gains descending ranks the real ones
        best_gain = -jnp.sort(-jnp.where(mask, gain, 0.0))
        max_dcg = jnp.sum(best_gain * weight)
        return jnp.where(max_dcg > 0, dcg / jnp.where(max_dcg > 0, max_dcg, 1.0), 1.0)

    ndcg.__name__ = f"ndcg_at_{k}"
    return ndcg


def map_at(k: int | None) -> GroupMetric:
    """Average precision@k of one query group, as LightGBM's ``map@k``.

    A row is relevant when its label is above 0.5.  AP@k sums the precision
    ``hits(r) / (r + 1)`` at each relevant rank ``r < k`` (0-based, score
    descending, ties in row order) and divides by ``min(k, n_relevant)``; a
    group without relevant rows scores 1.  ``k`` None takes all rows.

    Args:
      k: the cutoff, a positive int, or None for all rows.
    Returns:
      ``average_precision(y, f, mask) -> ()`` float32, with ``y``, ``f``,
      ``mask`` ``(m,)``.
    """
    _check_cutoff(k, "map_at")

    def average_precision(y: jax.Array, f: jax.Array, mask: jax.Array) -> jax.Array:
        m = y.shape[0]
        relevant = jnp.logical_and(mask, y > 0.5).astype(jnp.float32)
        ranked = _in_score_order(relevant, f, mask)
        precision = jnp.cumsum(ranked) / (1.0 + jnp.arange(m))
        summed = jnp.sum(jnp.where(_top_k(m, k), ranked * precision, 0.0))
        n_relevant = jnp.sum(relevant)
        cutoff = n_relevant if k is None else jnp.minimum(n_relevant, k)
        return jnp.where(n_relevant > 0, summed / jnp.maximum(cutoff, 1.0), 1.0)

    average_precision.__name__ = f"map_at_{k}"
    return average_precision


def concordance_index(
    y: jax.Array, raw: jax.Array, weight: jax.Array, *, block_rows: int = 128
) -> jax.Array:
    """Harrell's concordance index of predicted log hazards ``raw[:, 0]``.

    The pair (i, j) is comparable when row i has an event and ``t_i < t_j``, or
    ``t_i == t_j`` and row j is censored; it is concordant when
    ``risk_i > risk_j``, and exactly tied risks count one half (scikit-survival's
    ``concordance_index_censored``, which ties risks within 1e-8).  Pairs weigh
    ``w_i * w_j``: unit weights give scikit-survival's value, weight 0 leaves a
    padding row out, and an integer weight counts as that many copies of a row.
    NaN when no pair is comparable.

    Costs ``n**2`` pair tests, ``block_rows`` rows against all ``n`` at a time:
    memory ``O(n * block_rows)``.

    Args:
      y: ``(n, 2)`` float, (time, event), event 1 for an observed event and 0
        for a censored time.
      raw: ``(n, 1)`` or ``(n,)`` predicted log hazard (``predict_raw``'s);
        higher is a shorter survival.
      weight: ``(n,)`` non-negative row weights.
      block_rows: rows compared with all others at a time.
    Returns:
      ``()`` float32.
    """
    time = y[:, 0]
    event = y[:, 1] > 0.5
    risk = jnp.reshape(raw, (raw.shape[0], -1))[:, 0]
    weight = weight.astype(jnp.float32)

    def pair_sums(row):
        time_i, event_i, risk_i, weight_i = row
        comparable = event_i & ((time_i < time) | ((time_i == time) & ~event))
        pair_weight = jnp.where(comparable, weight_i * weight, 0.0)
        credit = jnp.where(risk_i > risk, 1.0, jnp.where(risk_i == risk, 0.5, 0.0))
        return jnp.sum(pair_weight * credit), jnp.sum(pair_weight)

    concordant, comparable = lax.map(
        pair_sums, (time, event, risk, weight), batch_size=max(1, min(block_rows, time.shape[0]))
    )
    return jnp.sum(concordant) / jnp.sum(comparable)

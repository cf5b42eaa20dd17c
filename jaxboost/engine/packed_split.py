"""The split search on packed bins: only the bins each feature uses.

Padded histograms are ``(n_features, n_nodes, n_bins, C)``: every feature
padded to the bins of the feature with the most.  Data with many features of
few distinct values (flags, counts, one-hot columns, LightGBM's ranking data:
300 features, half of them with at most 9 values) then spends most of a
level's sums and split search on empty bins.  Packed, the kernels sum every
feature into its own bins only (`jaxboost.kernels.interfaces.SlotLayout`:
``(n_slots, n_nodes, C)``, feature after feature, each one's value bins and
then its missing bin), and the search reads every ``(feature, threshold)``
candidate in order from there: the same candidates in the same order (a
threshold at or past a feature's last used bin gains what its last used bin
gains, and comes after it) with the same sums, so the same splits as
`jaxboost.engine.split.find_best_splits`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kernels.interfaces import SlotLayout
from .constraints import bounded_split_gain
from .split import _GAIN_NOISE, SplitChoice, child_check, estimated_row_rule, gain_functions

# pack when the packed candidates are at most this share of the padded ones
_WORTH_PACKING = 0.6
# and the padded ones are at least this many: below, a level's search costs
# little either way, while the packed program compiles in about twice the
# time (its search twice, missing values or not) and its shape follows the
# data's distinct values (a cross-validation's folds and its refit on all
# rows each compiled their own: diabetes' 10 features pack to 1,024
# candidates on 2/3 of the rows, 1,152 on all)
_PACKED_LEAST = 4096


class PackedBins(NamedTuple):
    """The candidate splits of packed bins, ``(n_candidates,)`` each, in
    ``(feature, threshold)`` order; the tail past the real candidates is
    padding (``valid`` False); and where each feature's bins lie in a node's
    histograms (`slot_layout`)."""

    feature: jax.Array  # int32
    threshold: jax.Array  # int32: value bins <= threshold go left
    valid: jax.Array  # bool
    # (n_features + 1,) int32: feature f's value bins and then its missing bin
    # are slots slot_start[f] .. slot_start[f + 1] - 1
    slot_start: jax.Array
    # (n_features,) bool: the features that may have missing values in the
    # training rows (all, unless known)
    has_missing: jax.Array


def packed_bins(edges: np.ndarray) -> PackedBins | None:
    """The packed candidates of bin ``edges`` ``(n_features, n_value_bins)``
    (``+inf`` past a feature's used bins), padded so that similar data share
    programs; None where packing would not save enough, or where the padded
    candidates are few (`_PACKED_LEAST`)."""
    n_features, n_value_bins = edges.shape
    if n_features * n_value_bins < _PACKED_LEAST:
        return None
    used = np.isfinite(edges).sum(axis=1) + 1  # a feature's value bins
    n_candidates = int(used.sum())
    # padded to a multiple of 1/8 of the leading power of two (at most 12.5%
    # more): nearby data share programs
    step = max(128, 1 << max(n_candidates.bit_length() - 4, 0))
    padded = -(-n_candidates // step) * step
    if padded > _WORTH_PACKING * n_features * n_value_bins:
        return None
    feature = np.repeat(np.arange(n_features, dtype=np.int32), used)
    starts = np.repeat(np.cumsum(used) - used, used)
    threshold = (np.arange(n_candidates) - starts).astype(np.int32)
    fill = padded - n_candidates
    return PackedBins(
        feature=np.concatenate([feature, np.zeros(fill, np.int32)]),
        threshold=np.concatenate([threshold, np.zeros(fill, np.int32)]),
        valid=np.arange(padded) < n_candidates,
        slot_start=np.concatenate([[0], np.cumsum(used + 1)]).astype(np.int32),
        has_missing=np.ones(n_features, bool),
    )


def slot_layout(packed: PackedBins) -> SlotLayout:
    """The histograms' layout of ``packed``: one slot per candidate and one
    per feature's missing bin, the candidates' padding as padding slots."""
    n_slots = packed.feature.shape[0] + packed.slot_start.shape[0] - 1
    return SlotLayout(packed.slot_start, n_slots, packed.has_missing)


def find_best_packed_splits(
    hist: jax.Array,
    packed: PackedBins,
    n_outputs: int,
    reg_lambda: float,
    min_child_weight: float,
    min_split_gain: float,
    feature_mask: jax.Array | None = None,
    min_child_samples: float = 0.0,
    node_mask: jax.Array | None = None,
    monotone: tuple[jax.Array, jax.Array, jax.Array] | None = None,
    rows_per_hessian: jax.Array | None = None,
    node_rows: jax.Array | None = None,
) -> SplitChoice:
    """`jaxboost.engine.split.find_best_splits` of every node of a
    level over the ``packed`` candidates (one slice of features: all).

    Where no node of the level has missing values (every missing bin 0, as
    on dense data), only the candidates that send missing values right are
    searched: one that sends them left gains exactly as much and comes after
    it, so it is never chosen.  (On ``rank.train`` that halves the search.)

    Args:
      hist: ``(n_slots, n_nodes, C)`` histograms laid out as
        ``slot_layout(packed)``: running sums over each feature's value bins,
        then its missing bin.
      node_mask, monotone, rows_per_hessian, node_rows: as
        `jaxboost.engine.split.find_best_splits`'s.
    """
    missing = hist[packed.slot_start[1:] - 1]  # (F, N, C)
    allowed = packed.valid
    if feature_mask is not None:
        allowed = allowed & feature_mask[packed.feature]
    if node_mask is not None:  # (P, N): per node
        allowed = allowed[:, None] & node_mask[packed.feature]
    settings = (n_outputs, reg_lambda, min_child_weight, min_split_gain)
    settings += (min_child_samples, rows_per_hessian)

    def search(directions: int) -> Callable[[], SplitChoice]:
        return lambda: _search(
            hist, missing, packed, allowed, settings, directions, monotone, node_rows
        )

    return lax.cond(jnp.all(missing == 0), search(1), search(2))


def _search(
    hist: jax.Array,
    missing: jax.Array,
    packed: PackedBins,
    allowed: jax.Array,
    settings: tuple,
    directions: int,
    monotone: tuple[jax.Array, jax.Array, jax.Array] | None = None,
    node_rows: jax.Array | None = None,
) -> SplitChoice:
    """The best of the ``allowed`` ``(P,)`` (or per node ``(P, N)``) candidates of ``hist``
    ``(S, N, C)`` (``missing`` ``(F, N, C)``: its missing bins), sending
    missing values right, and with ``directions`` 2 also left."""
    n_outputs, reg_lambda, min_child_weight, min_split_gain, *rows = settings
    # the last value bin's running sum, and the missing bin: (F, N, C)
    total = hist[packed.slot_start[1:] - 2] + missing
    left = hist[packed.slot_start[packed.feature] + packed.threshold]  # (P, N, C)
    candidate_total = total[packed.feature]
    if node_rows is not None and rows[1] is None:
        rows = estimated_row_rule(candidate_total, node_rows[None, :], n_outputs, rows[0])
    score, split_gain = gain_functions(n_outputs, reg_lambda, min_child_weight, *rows)
    lefts = (left, left + missing[packed.feature])[:directions]  # missing right, left
    middle = values = None
    if monotone is None:
        gain = jnp.stack([split_gain(side, candidate_total) for side in lefts], axis=2)
    else:
        direction, lower, upper = monotone
        child_ok = child_check(n_outputs, min_child_weight, *rows)
        bounds = (direction[packed.feature][:, None], lower[None, :], upper[None, :])
        pairs = [
            bounded_split_gain(side, candidate_total, child_ok, reg_lambda, *bounds)
            for side in lefts
        ]
        gain = jnp.stack([pair[0] for pair in pairs], axis=2)
        middle = jnp.stack([pair[1] for pair in pairs], axis=2)
        values = jnp.stack([pair[2] for pair in pairs], axis=2)  # (P, N, directions, 2)
    per_candidate = allowed[:, None, None] if allowed.ndim == 1 else allowed[:, :, None]
    gain = jnp.where(per_candidate, gain, -jnp.inf)  # (P, N, directions)
    parent_score = 0.5 * score(total).max(axis=0)  # (N,)
    return _first_best(gain, parent_score, packed, min_split_gain, middle, values)


def _first_best(
    gain: jax.Array,
    parent_score: jax.Array,
    packed: PackedBins,
    min_split_gain: float,
    middle: jax.Array | None = None,
    values: jax.Array | None = None,
) -> SplitChoice:
    """Every node's first candidate within float32 noise of its best ``gain``
    ``(P, N, directions)`` (lowest candidate, then missing values right), as
    `jaxboost.engine.split.find_best_splits` chooses; with ``middle`` (as
    ``gain``) and ``values`` (``(P, N, directions, 2)``), the chosen candidate's."""
    n_nodes = gain.shape[1]
    top_gain = jnp.max(gain, axis=(0, 2))
    tie_tolerance = _GAIN_NOISE * (jnp.abs(top_gain) + parent_score)
    is_tie = gain >= (top_gain - tie_tolerance)[None, :, None]
    order = lax.broadcasted_iota(jnp.int32, gain.shape, 0) * 2 + lax.broadcasted_iota(
        jnp.int32, gain.shape, 2
    )
    no_candidate = jnp.iinfo(jnp.int32).max  # only where gains are NaN
    first = jnp.min(jnp.where(is_tie, order, no_candidate), axis=(0, 2))  # (N,)
    found = first != no_candidate
    first = jnp.where(found, first, 0)
    candidate, missing_left = first // 2, first % 2
    best_gain = jnp.where(found, gain[candidate, jnp.arange(n_nodes), missing_left], -jnp.inf)
    noise = _GAIN_NOISE * parent_score
    do_split = jnp.isfinite(best_gain) & (best_gain > min_split_gain) & (best_gain > noise)
    return SplitChoice(
        feature=packed.feature[candidate],
        threshold_bin=packed.threshold[candidate],
        missing_left=missing_left.astype(bool),
        gain=jnp.where(do_split, best_gain, 0.0),
        do_split=do_split,
        middle=None if middle is None else middle[candidate, jnp.arange(n_nodes), missing_left],
        child_values=None
        if values is None
        else values[candidate, jnp.arange(n_nodes), missing_left],
    )

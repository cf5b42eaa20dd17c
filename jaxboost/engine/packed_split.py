"""The split search on packed bins: only the bins each feature uses.

Histograms are ``(n_features, n_nodes, n_bins, C)``: every feature padded to
the bins of the feature with the most.  Data with many features of few
distinct values (flags, counts, one-hot columns, LightGBM's ranking data:
300 features, half of them with at most 9 values) spends most of a level's
split search on empty bins.  The packed search gathers the used bins of
every feature into one axis, ``(feature, threshold)`` in order, and searches
those: the same candidates in the same order (a threshold at or past a
feature's last used bin gains what its last used bin gains, and comes after
it), so the same splits as :func:`jaxboost.engine.split.find_best_splits`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .split import _GAIN_NOISE, SplitChoice, gain_functions

# pack when the packed candidates are at most this share of the padded ones
_WORTH_PACKING = 0.6


class PackedBins(NamedTuple):
    """The candidate splits of packed bins, ``(n_candidates,)`` each, in
    ``(feature, threshold)`` order; the tail past the real candidates is
    padding (``valid`` False)."""

    feature: jax.Array  # int32
    threshold: jax.Array  # int32: value bins <= threshold go left
    valid: jax.Array  # bool


def packed_bins(edges: np.ndarray) -> PackedBins | None:
    """The packed candidates of bin ``edges`` ``(n_features, n_value_bins)``
    (``+inf`` past a feature's used bins), padded so that similar data share
    programs; None where packing would not save enough."""
    n_features, n_value_bins = edges.shape
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
    )


def find_best_packed_splits(
    hist: jax.Array,
    packed: PackedBins,
    n_outputs: int,
    reg_lambda: float,
    min_child_weight: float,
    min_split_gain: float,
    feature_mask: jax.Array | None = None,
    cumulative: bool = False,
) -> SplitChoice:
    """:func:`jaxboost.engine.split.find_best_splits` of every node of a
    level over the ``packed`` candidates (one slice of features: all).

    Args:
      hist: ``(n_features, n_nodes, n_bins, C)`` histograms, the last bin
        the missing one (value bins cumulative where ``cumulative``).
    """
    n_nodes = hist.shape[1]
    score, split_gain = gain_functions(n_outputs, reg_lambda, min_child_weight)
    values = hist[:, :, :-1, :]
    if not cumulative:
        values = jnp.cumsum(values, axis=2)
    missing = hist[:, :, -1, :]  # (F, N, C)
    total = values[:, :, -1, :] + missing  # (F, N, C)
    left = values[packed.feature, :, packed.threshold, :]  # (P, N, C)
    candidate_missing = missing[packed.feature]
    candidate_total = total[packed.feature]
    # axis 2: 0 = missing values go right, 1 = left
    gain = jnp.stack(
        [
            split_gain(left, candidate_total),
            split_gain(left + candidate_missing, candidate_total),
        ],
        axis=2,
    )  # (P, N, 2)
    allowed = packed.valid
    if feature_mask is not None:
        allowed = allowed & feature_mask[packed.feature]
    gain = jnp.where(allowed[:, None, None], gain, -jnp.inf)
    parent_score = 0.5 * score(total).max(axis=0)  # (N,)
    top_gain = jnp.max(gain, axis=(0, 2))
    tie_tolerance = _GAIN_NOISE * (jnp.abs(top_gain) + parent_score)
    is_tie = gain >= (top_gain - tie_tolerance)[None, :, None]
    order = jax.lax.broadcasted_iota(jnp.int32, gain.shape, 0) * 2 + jax.lax.broadcasted_iota(
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
    )

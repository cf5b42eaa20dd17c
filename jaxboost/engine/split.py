"""Best split of every node of a level, from its histograms.

The histogram's last axis holds ``[grad (K), hess (K)]`` summed over rows.  The gain is the decrease of the second-order approximation of the loss,
``0.5 * (S(L) + S(R) - S(parent))`` with ``S = sum_k G_k^2 / (H_k + lambda)``.
Friedman's first-order criterion (least squares on the pseudo-residuals) is the
same formula with the hessian replaced by the sample weight, which the caller
does by putting the weight in the hessian slots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .categorical import CategoricalSearch, candidate_sums, chosen_bitsets
from .constraints import bounded_split_gain

_GAIN_NOISE = 1e-6


class SplitChoice(NamedTuple):
    """The split chosen for each node of a level; every field is ``(n_nodes,)``."""

    feature: jax.Array  # int32
    threshold_bin: jax.Array  # int32: value bins <= threshold_bin go left
    missing_left: jax.Array  # bool: the missing bin goes left
    gain: jax.Array  # float32, 0 where the node does not split
    do_split: jax.Array  # bool
    # float32, with monotone constraints: the midpoint of the chosen split's
    # children's values (jaxboost.engine.constraints), else None
    middle: jax.Array | None = None
    # (n_nodes, 8) uint32, with categorical features: the bins sent left
    # (jaxboost.engine.categorical), all zero at numeric splits; else None
    category_left: jax.Array | None = None
    # (n_nodes, 2) float32, with monotone constraints: the chosen split's
    # left and right children's values, else None
    child_values: jax.Array | None = None


# outputs summed term by term up to this many (see sum_over_outputs)
UNROLLED_OUTPUTS = 16


def sum_over_outputs(values: jax.Array) -> jax.Array:
    """``values.sum(axis=-1)``, as a sum of the last axis' slices when it is
    short.  XLA on CPU turns every reduction over the short output axis of the
    split search into a separate pass over the histograms (six per level);
    written as additions, they fuse into the passes that compute the gains
    (a 10-class level: about 3x faster)."""
    n_terms = values.shape[-1]
    if n_terms > UNROLLED_OUTPUTS:
        return jnp.sum(values, axis=-1)
    total = values[..., 0]
    for k in range(1, n_terms):
        total = total + values[..., k]
    return total


def node_score(grad_sum: jax.Array, hess_sum: jax.Array, reg_lambda: float) -> jax.Array:
    """``sum_k G_k^2 / (H_k + lambda)`` over the last axis, 0 where ``H + lambda <= 0``."""
    denominator = hess_sum + reg_lambda
    safe = jnp.where(denominator > 0, denominator, 1.0)
    return sum_over_outputs(jnp.where(denominator > 0, grad_sum**2 / safe, 0.0))


# the gradient unit's exponent is clamped to this: 2^-126 .. 2^126 are normal
# float32 numbers
_UNIT_EXPONENT_LIMIT = 126


def gradient_unit(grad: jax.Array, axis_name: str | None) -> jax.Array:
    """A power of two ``u``, the same on every shard, that brings the largest
    ``|grad|`` over all shards into ``[0.5, 1)``: the split search runs on
    ``u * grad``, with ``min_split_gain`` times ``u^2`` (multiplied by ``u``
    twice: ``u^2`` itself may not be a float32).

    Gains square sums of gradients: in float32, sums beyond about 1e19 (targets
    of scale 1e17 under squared error, or weights that large) overflow and sums
    below about 1e-19 underflow, and either way no node would split.  A power of
    two scales exactly, so the splits chosen are those of the unscaled
    gradients wherever those are finite.

    Args:
      grad: ``(n_rows, K)`` float32 weighted gradients of one shard.
    Returns:
      A float32 scalar ``2^k``, ``|k| <= 126``; 1 where every gradient is 0
      or one is not finite.
    """
    # max(|grad|) as the largest bit pattern of |grad|: the order of
    # non-negative floats (NaN above inf).  XLA's CPU backend compiles this
    # integer reduction to a tenth of the code of max(grad) and -min(grad)
    # (their NaN checks; about 7% of a small fit's trees' program) and runs
    # it 3 to 4 times slower (0.5 ms against 0.15 ms on 500k rows, once a tree)
    magnitude = lax.bitcast_convert_type(jnp.abs(grad), jnp.int32)
    peak = lax.bitcast_convert_type(jnp.max(magnitude), jnp.float32)
    if axis_name is not None:
        peak = lax.pmax(peak, axis_name)
    return unit_for_peak(peak)


def unit_for_peak(peak: jax.Array) -> jax.Array:
    """`gradient_unit` of gradients whose largest ``|grad|`` over all
    shards is ``peak`` (a float32 scalar)."""
    _, exponent = jnp.frexp(peak)  # peak = m 2^exponent, m in [0.5, 1)
    exponent = jnp.clip(-exponent, -_UNIT_EXPONENT_LIMIT, _UNIT_EXPONENT_LIMIT)
    unit = jnp.ldexp(jnp.float32(1.0), exponent)
    return jnp.where(jnp.isfinite(peak) & (peak > 0), unit, jnp.float32(1.0))


def _identity(value: jax.Array) -> jax.Array:
    return value


def _first_of_one_slice(order: jax.Array, gain: jax.Array, *extra: jax.Array) -> tuple:
    return (order, gain, *extra)


def first_across_shards(axis_name: str) -> Callable:
    """``pick_first`` for `find_best_splits` over the shards of
    ``axis_name``: every shard's ``(order, gain, *extra)`` per node (``extra``:
    further float32 values of the candidate), gathered in one
    ``all_gather``; the lowest order wins, with the values of the shard that
    holds it."""

    def pick_first(order: jax.Array, gain: jax.Array, *extra: jax.Array) -> tuple:
        floats = [lax.bitcast_convert_type(value, jnp.int32) for value in (gain, *extra)]
        packed = jnp.stack([order, *floats])  # (2 + len(extra), N)
        every = lax.all_gather(packed, axis_name)  # (shards, 2 + len(extra), N)
        winner = jnp.argmin(every[:, 0], axis=0)  # (N,)
        chosen = jnp.take_along_axis(every, winner[None, None, :], axis=0)[0]
        values = (lax.bitcast_convert_type(chosen[i], jnp.float32) for i in range(1, len(packed)))
        return (chosen[0], *values)

    return pick_first


# with a node's rows estimated, a child needs at least this share of them: an
# empty child's hessian sum is float32 rounding of its node's, at most
# 3 * 2^-24 of it (two roundings of the running sums and one addition)
_LEAST_ROW_SHARE = 2.0**-20


def child_check(
    n_outputs: int, min_child_weight, min_child_samples=0.0, rows_per_hessian=None
) -> Callable:
    """``child_ok(stats) -> (...)`` bool: a child's ``[grad (K), hess (K)]``
    weighs at least ``min_child_weight`` and, with ``rows_per_hessian``,
    holds at least ``max(ceil(min_child_samples), 1)`` rows as its hessian
    sum times ``rows_per_hessian`` counts them, rounded.

    ``rows_per_hessian`` (broadcast against ``stats[..., 0]``): where every
    row of positive weight adds the same amount to the hessian sums (a
    constant hessian, or the first-order criterion's unit weights), one
    over that amount, and the count is exact (to float32 rounding); else
    each node's rows over its hessian sum (`estimated_row_rule`), an
    estimate.  None: no row rule."""

    least_hessian = min_child_weight
    if rows_per_hessian is not None:
        # rows >= max(ceil(min_child_samples), 1) for a count rounded to an
        # integer (half a row of margin for the float32 sums' rounding), as
        # one bound on the hessian sum with min_child_weight's: one compare
        # a child, as without the row rule
        least_rows = jnp.maximum(jnp.ceil(min_child_samples), 1.0) - 0.5
        counted = rows_per_hessian > 0
        least_rows_hessian = jnp.where(
            counted, least_rows / jnp.where(counted, rows_per_hessian, 1.0), jnp.inf
        )
        least_hessian = jnp.maximum(min_child_weight, least_rows_hessian)

    def child_ok(stats):
        return sum_over_outputs(stats[..., n_outputs : 2 * n_outputs]) >= least_hessian

    return child_ok


def estimated_row_rule(
    total: jax.Array, node_rows: jax.Array, n_outputs: int, min_child_samples
) -> tuple[jax.Array, jax.Array]:
    """``(min_child_samples, rows_per_hessian)`` for `child_check` where a
    node's rows of positive weight are counted and its children's are not:
    LightGBM's ``cnt_factor``, the node's rows over its hessian sum, so a
    child's rows are estimated as its share of the node's hessian times the
    node's rows (exact where those rows have equal hessians).  A child
    needs at least ``2^-20`` of its node's rows besides, so that one whose
    hessian sum is float32 rounding (an empty one) never passes.

    Args:
      total: ``(..., C)`` the nodes' ``[grad (K), hess (K)]`` sums, laid out
        as the candidates' sums (``(F, N, 1, C)``, ``(P, N, C)``).
      node_rows: the nodes' rows of positive weight, broadcast against
        ``total[..., 0]`` (``(1, N, 1)``, ``(1, N)``).
    Returns:
      Both broadcast against ``total[..., 0]``; ``rows_per_hessian`` 0 where
      a node's hessian sum is not positive (no child of it passes).
    """
    hess_total = sum_over_outputs(total[..., n_outputs : 2 * n_outputs])
    rows = node_rows.astype(jnp.float32)
    positive = hess_total > 0
    per_hessian = jnp.where(positive, rows / jnp.where(positive, hess_total, 1.0), 0.0)
    return jnp.maximum(min_child_samples, rows * _LEAST_ROW_SHARE), per_hessian


def gain_functions(
    n_outputs: int, reg_lambda, min_child_weight, min_child_samples=0.0, rows_per_hessian=None
) -> tuple[Callable, Callable]:
    """``score(stats) -> (...)`` (`node_score` of a histogram cell's
    ``[grad (K), hess (K)]``) and ``split_gain(left, total) ->
    (...)``: half the score gained by splitting ``total`` into ``left`` and
    the rest, ``-inf`` where a child fails `child_check`."""

    def score(stats):
        return node_score(stats[..., :n_outputs], stats[..., n_outputs : 2 * n_outputs], reg_lambda)

    child_ok = child_check(n_outputs, min_child_weight, min_child_samples, rows_per_hessian)

    def split_gain(left, total):
        right = total - left
        gain = 0.5 * (score(left) + score(right) - score(total))
        return jnp.where(child_ok(left) & child_ok(right), gain, -jnp.inf)

    return score, split_gain


def find_best_splits(
    hist: jax.Array,
    n_outputs: int,
    reg_lambda: float,
    min_child_weight: float,
    min_split_gain: float,
    feature_mask: jax.Array | None = None,
    first_feature: jax.Array | int = 0,
    reduce_max: Callable[[jax.Array], jax.Array] = _identity,
    pick_first: Callable = _first_of_one_slice,
    cumulative: bool = False,
    min_child_samples: float = 0.0,
    node_mask: jax.Array | None = None,
    monotone: tuple[jax.Array, jax.Array, jax.Array] | None = None,
    categorical: CategoricalSearch | None = None,
    rows_per_hessian: jax.Array | None = None,
    node_rows: jax.Array | None = None,
) -> SplitChoice:
    """Choose a feature, a threshold and a missing-value direction per node.

    The histograms may hold a slice of the features (from ``first_feature``)
    when the search is split between devices:
    ``reduce_max`` (``lax.pmax``) then combines per-node maxima across the
    slices, and ``pick_first(order, gain)`` (`first_across_shards`)
    the slices' first tied candidates, each ``(n_nodes,)``, into the overall
    first and its gain; both are the identity for one slice, and every slice
    returns the same choice.

    Args:
      hist: ``(n_features, n_nodes, n_bins, 2 * n_outputs)`` histograms; the
        last bin is the missing bin.
      feature_mask: ``(n_features,)`` bool, the features this tree may use
        (column subsampling, and padding features); None allows all.
      cumulative: the value bins of ``hist`` already hold running sums (bin
        ``b``: bins ``0..b``), as the native kernel returns them; the missing
        bin is plain either way.
      node_mask: ``(n_features, n_nodes)`` bool, the features each node may
        use (interaction constraints), or None.
      rows_per_hessian: where every row adds the same to the hessian sums,
        the rows a unit of them holds (`child_check`: the rows counted
        exactly), or None.
      node_rows: ``(n_nodes,)`` the nodes' rows of positive weight, or
        None: with ``rows_per_hessian`` None, no row rule; else each
        child's rows are estimated from its share of its node's hessian
        sum (`estimated_row_rule`).
      monotone: ``(direction (n_features,) int32, lower (n_nodes,), upper
        (n_nodes,))`` (`jaxboost.engine.constraints`, one output), or None.
    Returns:
      A `SplitChoice` (``feature`` numbered among all features).  A
      node splits when its best gain exceeds ``min_split_gain`` (and float32
      noise) and both children have hessian sum (summed over outputs) at least
      ``min_child_weight`` and, with ``rows_per_hessian`` or ``node_rows``,
      a row and at least ``min_child_samples`` rows (counted or estimated).
      (Without, a child of zero weight still never splits off: its weighted
      sums are 0, so the split gains exactly 0.)
    """
    n_value_bins = hist.shape[2] - 1
    left_values = hist[:, :, :-1, :]  # (F, N, Bv, C): rows of bins <= b
    if not cumulative:
        left_values = jnp.cumsum(left_values, axis=2)
    missing = hist[:, :, -1:, :]  # (F, N, 1, C)
    total = left_values[:, :, -1:, :] + missing
    if categorical is not None:
        plain = hist[:, :, :-1, :]
        if cumulative:
            plain = jnp.concatenate([plain[:, :, :1], jnp.diff(plain, axis=2)], axis=2)
        category_sums, category_ok, category_order = candidate_sums(plain, n_outputs, categorical)
        is_categorical = categorical.is_categorical[:, None, None, None]
        left_values = jnp.where(is_categorical, category_sums, left_values)

    if node_rows is not None and rows_per_hessian is None:
        min_child_samples, rows_per_hessian = estimated_row_rule(
            total, node_rows[None, :, None], n_outputs, min_child_samples
        )
    score, split_gain = gain_functions(
        n_outputs, reg_lambda, min_child_weight, min_child_samples, rows_per_hessian
    )

    # the candidates each node may take, (F, N, Bv) broadcast; None: all (one
    # select for every mask)
    allowed = None
    if categorical is not None:
        allowed = category_ok | ~categorical.is_categorical[:, None, None]
    if feature_mask is not None:
        allowed = _both(allowed, feature_mask[:, None, None])
    if node_mask is not None:
        allowed = _both(allowed, node_mask[:, :, None])
    # axis 3: 0 = missing values go right, 1 = missing values go left.  Each
    # direction's gains straight from the running sums, so that XLA computes
    # both in one pass and never writes out the children's sums
    lefts = (left_values, left_values + missing)
    middle = values = None
    if monotone is None:
        gain = jnp.stack([split_gain(left, total) for left in lefts], axis=3)
    else:
        direction, lower, upper = monotone
        child_ok = child_check(n_outputs, min_child_weight, min_child_samples, rows_per_hessian)
        bounds = (direction[:, None, None], lower[None, :, None], upper[None, :, None])
        pairs = [bounded_split_gain(left, total, child_ok, reg_lambda, *bounds) for left in lefts]
        gain = jnp.stack([pair[0] for pair in pairs], axis=3)
        middle = jnp.stack([pair[1] for pair in pairs], axis=3)
        values = jnp.stack([pair[2] for pair in pairs], axis=3)  # (F, N, Bv, 2, 2)
    if allowed is not None:
        gain = jnp.where(allowed[..., None], gain, -jnp.inf)
    # every real feature's total is the node's: padding features' are 0
    parent_score = 0.5 * score(total)[:, :, 0].max(axis=0)
    top_gain = jnp.max(gain, axis=(0, 2, 3))  # (N,)
    if reduce_max is not _identity:  # (one collective for both)
        parent_score, top_gain = reduce_max(jnp.stack([parent_score, top_gain]))
    # Gains within float32 rounding of the best are ties: take the first of
    # them (lowest feature, then threshold, then direction), so the choice
    # does not depend on the order in which shards summed the histograms.
    tie_tolerance = _GAIN_NOISE * (jnp.abs(top_gain) + parent_score)
    found, at = _first_tie(gain, top_gain - tie_tolerance)  # at: this slice's position
    local_gain = jnp.where(found, _candidate_value(gain, *at), -jnp.inf)
    no_candidate = jnp.iinfo(jnp.int32).max  # only where gains are NaN
    feature_at, bin_at, left_at = first_feature + at[0], at[1], at[2]  # among all features
    order = (feature_at * n_value_bins + bin_at) * 2 + left_at
    # the candidate's position travels with it, bit for bit (nothing to
    # divide back); where no shard has one, shard 0's zeros: feature 0, bin 0
    position = [
        lax.bitcast_convert_type(index, jnp.float32) for index in (feature_at, bin_at, left_at)
    ]
    extra = []
    if middle is not None:
        extra.extend([_candidate_value(middle, *at), *_candidate_value(values, *at).T])
    if categorical is not None:
        bits = chosen_bitsets(category_order, categorical.one_hot, at[0], at[1])
        bits = jnp.where(categorical.is_categorical[at[0]][:, None], bits, 0)
        # as float32 words, so that the shards' pick carries them bit for bit
        extra.extend(lax.bitcast_convert_type(bits, jnp.float32).T)
    _, best_gain, *chosen = pick_first(
        jnp.where(found, order, no_candidate), local_gain, *position, *extra
    )
    feature, threshold_bin, missing_left = (
        lax.bitcast_convert_type(index, jnp.int32) for index in chosen[:3]
    )
    chosen = chosen[3:]
    best_middle = best_values = None
    if middle is not None:
        best_middle = chosen.pop(0)
        best_values = jnp.stack([chosen.pop(0), chosen.pop(0)], axis=1)
    category_left = None
    if categorical is not None:
        category_left = lax.bitcast_convert_type(jnp.stack(chosen, axis=1), jnp.uint32)
    # a pure node's gain is float32 rounding noise around 0: ignore gains below
    # a tiny fraction of the node's own score
    noise = _GAIN_NOISE * parent_score
    do_split = jnp.isfinite(best_gain) & (best_gain > min_split_gain) & (best_gain > noise)
    return SplitChoice(
        feature=feature.astype(jnp.int32),
        threshold_bin=threshold_bin.astype(jnp.int32),
        missing_left=missing_left.astype(bool),
        gain=jnp.where(do_split, best_gain, 0.0),
        do_split=do_split,
        middle=best_middle,
        category_left=None
        if category_left is None
        else jnp.where(do_split[:, None], category_left, jnp.uint32(0)),
        child_values=best_values,
    )


def _candidate_value(per_candidate: jax.Array, feature, threshold_bin, missing_left) -> jax.Array:
    """Each node's candidate's value, ``(N, ...)``, of ``per_candidate (F,
    N, Bv, 2, ...)`` (indices in range: no wrapping of negative ones, no
    clamping)."""
    nodes = jnp.arange(per_candidate.shape[1])
    return per_candidate.at[feature, nodes, threshold_bin, missing_left].get(
        mode="promise_in_bounds", wrap_negative_indices=False
    )


def _both(mask: jax.Array | None, other: jax.Array) -> jax.Array:
    """``mask & other``, or ``other`` where ``mask`` is None."""
    return other if mask is None else mask & other


def _first_tie(gain: jax.Array, least: jax.Array) -> tuple:
    """Every node's first candidate (lowest feature, then threshold, then
    missing direction) of ``gain (F, N, Bv, 2)`` at least ``least (N,)``.

    Returns ``(found, (feature, threshold_bin, missing_left))``, each
    ``(N,)`` int32: whether a node has one (not where its gains are NaN), and
    its position (0s without).  Found feature by feature, then within the
    feature's ``threshold * 2 + missing_left``: no division of a flat index.
    """
    n_features, n_nodes, n_value_bins, _ = gain.shape
    per_feature = gain.reshape(n_features, n_nodes, n_value_bins * 2)
    no_candidate = jnp.iinfo(jnp.int32).max
    within = lax.broadcasted_iota(jnp.int32, (1, 1, n_value_bins * 2), 2)
    is_tie = per_feature >= least[None, :, None]
    first_within = jnp.min(jnp.where(is_tie, within, no_candidate), axis=2)  # (F, N)
    features = lax.broadcasted_iota(jnp.int32, (n_features, 1), 0)
    feature = jnp.min(jnp.where(first_within != no_candidate, features, no_candidate), axis=0)
    found = feature != no_candidate
    feature = jnp.where(found, feature, 0)
    first = first_within.at[feature, jnp.arange(n_nodes)].get(
        mode="promise_in_bounds", wrap_negative_indices=False
    )
    first = jnp.where(found, first, 0)
    return found, (feature, first >> 1, first & 1)

"""The initial score ``F0 = argmin_c sum_i w_i loss(y_i, c)``, for any loss.

A jitted minimisation, not a closed form per loss: one output uses the same
safeguarded scalar minimiser as line-search leaves (so absolute and pinball
losses get the exact weighted median / quantile); vector outputs take Newton
directions (full hessian, pseudo-inverse) each followed by a line search.

A scalar search started at 0 stops at the first stationary point it finds.
For a redescending loss (Tukey's biweight, Welsch) whose targets lie far from
0 that is a flat stretch where every row's gradient is 0: the trees would then
learn nothing.  So with 1-D targets, where the loss at their weighted median
(to within 2^-16 of their range) is lower than at that first result, by
more than rounding, the search runs again from the median, and F0 is the
result of lower loss.  A convex loss is lowest at the first result: for it F0
is that result and the second search does not run; one declared convex (the
catalogue's, ``losses._declare``) compiles neither the median nor the loop.

:func:`initial_score_on_host` runs the same search for one output from the
host, on a small compiled program of the loss's sums
(:func:`jaxboost.engine.round_programs.slope_sums_program`): the program a
new loss compiles is then a fraction of :func:`initial_score`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kernels.leaf_sums import LEAF_KERNELS, LeafKernels
from .derivatives import Loss, grad_hess, sample_loss
from .leaves import (
    across_shards,
    host_while_loop,
    line_search_leaf_values,
    minimise_scalar,
    newton_leaf_values,
    search_start,
    searched_derivatives,
)

_MAX_NEWTON_ROUNDS = 30
_STEP_TOLERANCE = 1e-6
# the search runs again from the median only where the loss there is lower
# than at the first search's result by more than this fraction of it (more
# than the rounding of the two sums)
_BETTER_BY = 1e-5
# the median start: bins of the histogram of the targets it is read from
_MEDIAN_BINS = 2**16


def initial_score(
    loss: Loss,
    y: jax.Array,
    weight: jax.Array,
    n_outputs: int,
    axis_name: str | None = None,
    kernels: LeafKernels = LEAF_KERNELS["reference"],
) -> jax.Array:
    """The constant raw score that minimises the weighted training loss.

    Args:
      y: ``(n_rows,)`` or ``(n_rows, n_targets)`` targets (one shard).
      weight: ``(n_rows,)`` sample weights, 0 for padding rows.
      kernels: the line search's (:data:`jaxboost.kernels.leaf_sums.LEAF_KERNELS`).
    Returns:
      ``(n_outputs,)`` float32.
    """
    n_rows = weight.shape[0]
    all_in_one_leaf = jnp.zeros(n_rows, jnp.int32)
    zeros = jnp.zeros((n_rows, n_outputs), jnp.float32)
    if n_outputs == 1:
        direction = jnp.ones((1, 1), jnp.float32)

        def search_from(start: jax.Array) -> jax.Array:
            """``(1,)`` minimiser found by the line search from ``start (1,)``."""
            step = line_search_leaf_values(
                loss, y, zeros + start, weight, all_in_one_leaf, direction, axis_name, kernels
            )
            return start + step[0]

        if y.ndim != 1 or getattr(loss, "convex", False):
            return search_from(jnp.zeros(1, jnp.float32))
        median = _rough_median(y, weight, axis_name, kernels)
        loss_at_median = _total_loss(loss, y, weight, median, axis_name)

        def unfinished(state):
            searches, _, best_loss = state
            margin = jnp.where(jnp.isfinite(best_loss), _BETTER_BY * jnp.abs(best_loss), 0.0)
            median_lower = jnp.isfinite(loss_at_median) & (loss_at_median < best_loss - margin)
            return (searches == 0) | ((searches == 1) & median_lower)

        def search(state):
            """From 0 first, then from the median; the lower loss is kept."""
            searches, best, best_loss = state
            found = search_from(jnp.where(searches == 0, 0.0, median))
            found_loss = _total_loss(loss, y, weight, found, axis_name)
            found_loss = jnp.where(jnp.isnan(found_loss), jnp.inf, found_loss)
            keep = (searches == 0) | (found_loss < best_loss)
            return (
                searches + 1,
                jnp.where(keep, found, best),
                jnp.where(keep, found_loss, best_loss),
            )

        start = (0, jnp.zeros(1, jnp.float32), jnp.float32(jnp.inf))
        return lax.while_loop(unfinished, search, start)[1]

    def not_converged(state):
        score, step_norm, rounds = state
        big_step = step_norm > _STEP_TOLERANCE * (1.0 + jnp.linalg.norm(score))
        return big_step & (rounds < _MAX_NEWTON_ROUNDS)

    def newton_round(state):
        score, _, rounds = state
        raw = zeros + score
        grad, hess = grad_hess(loss, y, raw, full_hessian=True)
        grad, hess = grad * weight[:, None], hess * weight[:, None, None]
        direction = newton_leaf_values(grad, hess, all_in_one_leaf, 1, 0.0, axis_name, kernels)
        step = line_search_leaf_values(
            loss, y, raw, weight, all_in_one_leaf, direction, axis_name, kernels
        )
        return score + step[0], jnp.linalg.norm(step), rounds + 1

    start = (jnp.zeros(n_outputs, jnp.float32), jnp.float32(jnp.inf), 0)
    score, _, _ = lax.while_loop(not_converged, newton_round, start)
    return score


def _rough_median(
    y: jax.Array, weight: jax.Array, axis_name: str | None, kernels: LeafKernels
) -> jax.Array:
    """``(1,)`` float32: a weighted median of ``y (n_rows,)`` over all shards,
    to within ``(max y - min y) / 2^16``: the middle of the bin that holds
    the middle weight in a histogram of ``y`` with ``2^16`` equal bins."""
    kept = weight > 0
    low = jnp.min(jnp.where(kept, y, jnp.inf))
    high = jnp.max(jnp.where(kept, y, -jnp.inf))
    if axis_name is not None:
        low, high = lax.pmin(low, axis_name), lax.pmax(high, axis_name)
    width = jnp.where(high > low, (high - low) / _MEDIAN_BINS, 1.0)
    bin_of_row = jnp.clip((y - low) / width, 0, _MEDIAN_BINS - 1).astype(jnp.int32)
    in_bin = across_shards(kernels.leaf_sums(weight[None], bin_of_row, _MEDIAN_BINS), axis_name)
    reached = jnp.cumsum(in_bin[:, 0])
    middle = jnp.argmax(reached >= 0.5 * reached[-1])
    return jnp.reshape(low + (middle + 0.5) * width, (1,))


def _total_loss(
    loss: Loss, y: jax.Array, weight: jax.Array, score: jax.Array, axis_name: str | None
) -> jax.Array:
    """``sum_i w_i loss(y_i, score)`` over all shards; ``score (1,)``."""
    raw = jnp.broadcast_to(score, (weight.shape[0], 1))
    return across_shards(jnp.sum(weight * sample_loss(loss, y, raw)), axis_name)


# the points the host search evaluates per call (its program's one shape):
# the line search's grid (jaxboost.engine.leaves._SEARCH_POINTS) and a
# bracket's two ends
_HOST_POINTS = 2


def initial_score_on_host(
    sums_at: Callable[[np.ndarray], np.ndarray], y: np.ndarray, weight: np.ndarray, convex: bool
) -> tuple[np.ndarray, np.float32]:
    """:func:`initial_score` for one output, its search driven from the host.

    Args:
      sums_at: ``scores (2,) float32 -> (2, 5) float32``: at every row's score
        equal to each of ``scores``, the weighted sums over all rows of the
        loss's slope, curvature, absolute slope, value and 1 (a compiled
        program's call).
      y: ``(n_rows,)`` or ``(n_rows, n_targets)`` float32 targets (all rows:
        the median start reads them).
      weight: ``(n_rows,)`` float32 weights, 0 for padding rows.
      convex: the loss is declared convex (one search, from 0).
    Returns:
      ``(F0 (1,) float32, the weighted mean loss at F0)``.
    """
    with np.errstate(all="ignore"):  # float32 overflow and NaN, as in a program: no warnings
        return _initial_score_on_host(sums_at, y, weight, convex)


def _initial_score_on_host(sums_at, y, weight, convex) -> tuple[np.ndarray, np.float32]:
    direction = np.ones((1, 1), np.float32)
    no_penalty = np.zeros((1, 1), np.float32)

    def sums_at_point(score: np.float32) -> np.ndarray:
        return sums_at(np.full(_HOST_POINTS, score, np.float32))[0]

    def search_from(start: np.float32) -> np.float32:
        def derivatives(steps):  # (1, 2) -> four (1, 2)
            sums = sums_at(start + steps[0])
            return searched_derivatives(sums[:, :3].T[None], no_penalty, steps, xp=np)

        at_start = sums_at_point(start)
        leaf_weight = at_start[4:5]
        active, initial_scale, resolution = search_start(
            at_start[0:1], at_start[1:2], leaf_weight, leaf_weight * abs(start), direction, xp=np
        )
        step = minimise_scalar(
            derivatives, active, initial_scale, None, resolution, xp=np, loop=host_while_loop
        )
        return np.float32(start + step[0])

    def total_loss(score: np.float32) -> np.float32:
        value = sums_at_point(score)[3]
        return np.float32(np.inf) if np.isnan(value) else value

    best = search_from(np.float32(0.0))
    if y.ndim == 1 and not convex:
        median = _rough_median_on_host(y, weight)
        loss_at_median = sums_at_point(median)[3]
        best_loss = total_loss(best)
        margin = _BETTER_BY * abs(best_loss) if np.isfinite(best_loss) else 0.0
        if np.isfinite(loss_at_median) and loss_at_median < best_loss - margin:
            found = search_from(median)
            if total_loss(found) < best_loss:
                best = found
    at_best = sums_at_point(best)
    return np.array([best], np.float32), np.float32(at_best[3] / at_best[4])


def _rough_median_on_host(y: np.ndarray, weight: np.ndarray) -> np.float32:
    """:func:`_rough_median` of all rows, on the host."""
    kept = weight > 0
    low, high = np.min(y[kept]), np.max(y[kept])
    width = (high - low) / np.float32(_MEDIAN_BINS) if high > low else np.float32(1.0)
    bin_of_row = np.clip((y - low) / width, 0, _MEDIAN_BINS - 1).astype(np.int32)
    reached = np.cumsum(np.bincount(bin_of_row, weights=weight, minlength=_MEDIAN_BINS))
    middle = np.argmax(reached >= 0.5 * reached[-1])
    return np.float32(low + (middle + np.float32(0.5)) * width)

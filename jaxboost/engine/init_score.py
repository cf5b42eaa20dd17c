"""The initial score ``F0 = argmin_c sum_i w_i loss(y_i, c)``, for any loss.

A jitted minimisation, not a closed form per loss: one output uses the same
safeguarded scalar minimiser as line-search leaves (so absolute and pinball
losses get the exact weighted median / quantile); vector outputs take a line
search along each output, then Newton directions in coordinates scaled by
the hessian's diagonal, each followed by a line search, until a scale-free
test says they converged (`vector_initial_score`; where they do not,
the fit warns).  A loss that declares ``init`` (a distribution: the moments
of its targets, `losses.declare`) starts the vector search there, so that it
is near the minimum on any target scale; the search still refines it.  One
output needs no start: its scalar search is exact from 0 or the median.

A scalar search started at 0 stops at the first stationary point it finds.
For a redescending loss (Tukey's biweight, Welsch) whose targets lie far from
0 that is a flat stretch where every row's gradient is 0: the trees would then
learn nothing.  So with 1-D targets, where the loss at their weighted median
(to within 2^-16 of their range) is lower than at that first result, by
more than rounding, the search runs again from the median, and F0 is the
result of lower loss.  A convex loss is lowest at the first result: for it F0
is that result and the second search does not run; one declared convex (the
catalogue's, ``losses._declare``) compiles neither the median nor the loop.

`initial_score_on_host` runs the same search for one output from the
host, on a small compiled program of the loss's sums
(`jaxboost.engine.round_programs.slope_sums_program`): the program a
new loss compiles is then a fraction of `initial_score`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kernels.leaf_sums import LEAF_KERNELS, LeafKernels
from ..losses.metadata import metadata_of
from .derivatives import Loss, sample_loss
from .leaves import across_shards, leaf_totals
from .line_search import (
    host_while_loop,
    line_search_leaf_values,
    minimise_scalar,
    search_start,
    searched_derivatives,
)

_MAX_NEWTON_ROUNDS = 30
# a vector search has converged where the Newton decrement is below this
# fraction of the rows' spread of losses (float32 sums of a million rows
# resolve about 1e-12 of it): the score is then within about 2e-5 of the
# loss's width from the minimum before that round's step, far closer after
_DECREMENT_TOLERANCE = 1e-9
_FLOAT32_EPS = float(np.finfo(np.float32).eps)
# eigenvalues of the scaled hessian below this fraction of the largest are
# float32 noise on a singular one (softmax), as in leaves.solve_newton
_EIGEN_CUTOFF = 1e-4
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
      kernels: the line search's (`jaxboost.kernels.leaf_sums.LEAF_KERNELS`).
    Returns:
      ``(n_outputs,)`` float32.
    """
    return searched_initial_score(loss, y, weight, n_outputs, axis_name, kernels)[0]


def searched_initial_score(
    loss: Loss,
    y: jax.Array,
    weight: jax.Array,
    n_outputs: int,
    axis_name: str | None = None,
    kernels: LeafKernels = LEAF_KERNELS["reference"],
) -> tuple[jax.Array, jax.Array]:
    """`initial_score` and whether its search converged (a scalar bool;
    always True for one output, whose scalar search ends at its tolerance)."""
    if n_outputs > 1:
        start = declared_start(loss, y, weight, n_outputs, axis_name)
        found = vector_initial_score(loss, y, weight, n_outputs, axis_name, kernels, start)
        return found.score, found.converged
    return _scalar_initial_score(loss, y, weight, axis_name, kernels), jnp.asarray(True)


def declared_start(
    loss: Loss, y: jax.Array, weight: jax.Array, n_outputs: int, axis_name: str | None
) -> jax.Array | None:
    """``(n_outputs,)`` float32: the loss's declared ``init(y, weight)`` (a
    distribution's moments of the targets) on all rows of all shards, 0
    where it is not finite; None where the loss declares none."""
    init = metadata_of(loss).init
    if init is None:
        return None
    if axis_name is not None:  # the moments of all rows, not of one shard's
        y = lax.all_gather(y, axis_name, tiled=True)
        weight = lax.all_gather(weight, axis_name, tiled=True)
    start = jnp.reshape(jnp.asarray(init(y, weight), jnp.float32), (n_outputs,))
    return jnp.where(jnp.isfinite(start), start, 0.0)


def _scalar_initial_score(loss, y, weight, axis_name, kernels) -> jax.Array:
    """`initial_score` for one output: ``(1,)`` float32."""
    n_rows = weight.shape[0]
    all_in_one_leaf = jnp.zeros(n_rows, jnp.int32)
    zeros = jnp.zeros((n_rows, 1), jnp.float32)
    direction = jnp.ones((1, 1), jnp.float32)

    def search_from(start: jax.Array) -> jax.Array:
        """``(1,)`` minimiser found by the line search from ``start (1,)``."""
        step = line_search_leaf_values(
            loss, y, zeros + start, weight, all_in_one_leaf, direction, axis_name, kernels
        )
        return start + step[0]

    if y.ndim != 1 or metadata_of(loss).convex:
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


class VectorSearch(NamedTuple):
    """The state and result of `vector_initial_score`."""

    score: jax.Array  # (K,) float32
    # scalar bool: a Newton round's decrement was below its tolerance, or
    # its step below float32 resolution of the score
    converged: jax.Array
    # scalar bool: a Newton round's line search raised the loss (not taken)
    stuck: jax.Array
    steps: jax.Array  # scalar int32: coordinate steps and Newton rounds run


def vector_initial_score(
    loss: Loss,
    y: jax.Array,
    weight: jax.Array,
    n_outputs: int,
    axis_name: str | None = None,
    kernels: LeafKernels = LEAF_KERNELS["reference"],
    start: jax.Array | None = None,
) -> VectorSearch:
    """`initial_score` for ``n_outputs >= 2``: a start, then Newton rounds.

    The start is ``start (K,)`` where given, else 0; for a loss not declared
    convex, one coordinate step per output follows, each a line search along
    that output from the current score or, where the loss is lower there,
    from it with that output at the targets' median (`_target_medians`):
    a redescending loss (a Student-t location) far from its targets is flat
    and concave at 0, where Newton steps go astray.  A Newton round takes the
    full-hessian step in coordinates scaled by the hessian's diagonal
    (`_scaled_newton`), so that outputs of unlike scale (a mean of 1e6
    and the log of a standard deviation) weigh alike, then a line search.
    The search has converged when the Newton decrement (twice the decrease
    the quadratic model predicts) is below ``_DECREMENT_TOLERANCE`` of the
    rows' spread of losses, ``sum_i w_i |loss_i - mean loss|`` (both in the
    loss's units, so the test means the same at any target location and
    scale), or when a Newton step cannot change the float32 score; it stops
    there, after ``_MAX_NEWTON_ROUNDS`` rounds, or where a line search would
    raise the loss or finds no step.  Coordinate steps and Newton rounds share one loop and
    one line search: one compiled copy of each.

    Args:
      y, weight, axis_name, kernels: as `initial_score`.
      start: ``(K,)`` float32 the search starts from, or None (0).
    """
    n_rows = weight.shape[0]
    all_in_one_leaf = jnp.zeros(n_rows, jnp.int32)
    score = jnp.zeros(n_outputs, jnp.float32) if start is None else start
    n_coordinate_steps = 0 if metadata_of(loss).convex else n_outputs
    medians = None
    if n_coordinate_steps:
        medians = _target_medians(y, weight, n_outputs, axis_name, kernels)

    def unfinished(state: VectorSearch):
        newton_rounds = state.steps - n_coordinate_steps
        return ~state.converged & ~state.stuck & (newton_rounds < _MAX_NEWTON_ROUNDS)

    def search_step(state: VectorSearch) -> VectorSearch:
        newton, loss_sum, decrement, spread = _newton_step(
            loss, y, weight, state.score, axis_name, kernels
        )
        origin, direction, at_origin = state.score, newton, loss_sum
        if n_coordinate_steps:
            coordinate = state.steps < n_coordinate_steps
            output = jnp.minimum(state.steps, n_outputs - 1)
            direction = jnp.where(coordinate, jax.nn.one_hot(output, n_outputs), newton)
            if medians is not None:
                moved = origin.at[output].set(medians[output])
                at_moved = _total_loss(loss, y, weight, moved, axis_name)
                lower = coordinate & (at_moved < _finite_or_inf(loss_sum))
                origin = jnp.where(lower, moved, origin)
                at_origin = jnp.where(lower, at_moved, loss_sum)
        raw = jnp.broadcast_to(origin, (n_rows, n_outputs))
        step = line_search_leaf_values(
            loss, y, raw, weight, all_in_one_leaf, direction[None], axis_name, kernels
        )[0]
        # a loss not convex along the line can be higher at the search's
        # result (by more than the rounding of the two sums, summed apart)
        at_step = _total_loss(loss, y, weight, origin + step, axis_name)
        margin = _BETTER_BY * (jnp.abs(at_origin) + spread)
        rose = ~(at_step <= _finite_or_inf(at_origin) + margin)
        newton_round = state.steps >= n_coordinate_steps
        # a Newton step that cannot change the float32 score: nothing is left to find
        settled = jnp.all(jnp.abs(newton) <= 2 * _FLOAT32_EPS * jnp.abs(origin))
        converged = (decrement <= _DECREMENT_TOLERANCE * spread) | settled
        return VectorSearch(
            score=jnp.where(rose, origin, origin + step),
            converged=newton_round & converged,
            stuck=newton_round & (rose | jnp.all(step == 0)),
            steps=state.steps + 1,
        )

    no = jnp.asarray(False)
    return lax.while_loop(unfinished, search_step, VectorSearch(score, no, no, jnp.int32(0)))


def _newton_step(loss, y, weight, score, axis_name, kernels):
    """At every row's score ``score (K,)``: ``(direction (K,), loss_sum,
    decrement, spread)``, `_scaled_newton`'s direction and decrement,
    the weighted loss sum and the rows' spread of losses ``sum_i w_i |loss_i -
    mean loss|``, over all shards."""
    n_rows = weight.shape[0]
    # JAX's gradient, as the line search's slopes (not grad_hess's kink
    # averaging, whose step is a fraction of the largest output: it would
    # blur an output of smaller scale, a log scale beside a mean of 1e6)
    row_loss, grad = jax.vmap(jax.value_and_grad(loss, argnums=1), in_axes=(0, None))(y, score)
    hess = jax.vmap(jax.hessian(loss, argnums=1), in_axes=(0, None))(y, score)
    all_in_one_leaf = jnp.zeros(n_rows, jnp.int32)
    totals = leaf_totals(
        kernels,
        grad * weight[:, None],
        hess * weight[:, None, None],
        weight,
        all_in_one_leaf,
        1,
        axis_name,
        row_loss=row_loss,
    )
    deviation = jnp.abs(row_loss - totals.loss[0] / totals.weight[0])
    spread = _sum_rows(kernels, jnp.where(weight > 0, weight * deviation, 0.0), axis_name)
    direction, decrement = _scaled_newton(totals.grad[0], totals.hess[0])
    return direction, totals.loss[0], decrement, spread


def _sum_rows(kernels: LeafKernels, values: jax.Array, axis_name) -> jax.Array:
    """The sum over all rows and shards of ``values (n_rows,)``."""
    leaf_of_row = jnp.zeros(values.shape[0], jnp.int32)
    return across_shards(kernels.leaf_sums(values[None], leaf_of_row, 1), axis_name)[0, 0]


def _target_medians(y, weight, n_outputs, axis_name, kernels) -> jax.Array | None:
    """``(K,)`` a start per output read from the targets: their rough median
    (`_rough_median`) for 1-D targets, column ``k``'s for output ``k``
    where ``y`` has one column per output; else None."""
    if y.ndim == 1:
        return jnp.broadcast_to(_rough_median(y, weight, axis_name, kernels), (n_outputs,))
    if y.shape[1] != n_outputs:
        return None
    return lax.map(lambda column: _rough_median(column, weight, axis_name, kernels)[0], y.T)


def _scaled_newton(grad_sum: jax.Array, hess_sum: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(direction (K,), decrement)``: the Newton step ``-H^+ g`` for the
    summed ``grad_sum (K,)`` and ``hess_sum (K, K)``, taken where ``H`` is
    scaled to a unit diagonal (``D^-1/2 H D^-1/2``) and with the magnitudes
    of its eigenvalues (a descent direction where ``H`` is indefinite);
    eigenvalues below ``_EIGEN_CUTOFF`` of the largest (softmax's, along
    which moving every score alike changes nothing) count as the largest.
    ``decrement = -g . direction``, where ``H`` is positive definite twice the
    loss decrease the quadratic model predicts."""
    diagonal = jnp.abs(jnp.diagonal(hess_sum))
    largest = jnp.max(diagonal)
    # (an output without curvature takes the largest's scale)
    usable = (diagonal > 0) & jnp.isfinite(diagonal)
    scale = lax.rsqrt(jnp.where(usable, diagonal, jnp.where(largest > 0, largest, 1.0)))
    scaled_grad = scale * grad_sum
    eigenvalues, eigenvectors = jnp.linalg.eigh(scale[:, None] * hess_sum * scale[None, :])
    magnitude = jnp.abs(eigenvalues)
    largest_magnitude = jnp.max(magnitude)
    keep = magnitude > jnp.maximum(_EIGEN_CUTOFF * largest_magnitude, 1e-30)
    # a dropped direction takes the largest curvature: a short step the line
    # search lengthens, and a decrement that counts its slope (an output
    # without curvature, a scale on constant targets, is not stationary)
    flat = 1.0 / jnp.where(largest_magnitude > 0, largest_magnitude, 1.0)
    inverse = jnp.where(keep, 1.0 / jnp.where(keep, magnitude, 1.0), flat)
    projected = eigenvectors.T @ scaled_grad
    direction = -scale * (eigenvectors @ (inverse * projected))
    return direction, jnp.sum(inverse * jnp.square(projected))


def _finite_or_inf(value: jax.Array) -> jax.Array:
    """``value``, NaN read as infinite (a loss undefined there is no lower)."""
    return jnp.where(jnp.isnan(value), jnp.inf, value)


def not_converged_message(loss_name: str, score: np.ndarray, mean_loss: float) -> str:
    """The warning for a vector search (`vector_initial_score`) that
    stopped without converging at ``score (K,)``, of weighted mean training
    loss ``mean_loss``, for the loss called ``loss_name``."""
    values = ", ".join(f"{value:.6g}" for value in np.asarray(score, np.float64))
    return (
        f"loss {loss_name!r}: the search for the initial score stopped before it converged "
        f"(at [{values}], mean training loss {mean_loss:.6g}, after at most "
        f"{_MAX_NEWTON_ROUNDS} Newton rounds); the loss may have no minimum over constant scores (a scale "
        "that shrinks without bound on constant targets) or be flat there. base_score_ "
        "may not minimise the training loss: base_score=[...], one number per output, "
        "sets it"
    )


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
    """``sum_i w_i loss(y_i, score)`` over all shards; ``score (K,)``."""
    raw = jnp.broadcast_to(score, (weight.shape[0], score.shape[0]))
    return across_shards(jnp.sum(weight * sample_loss(loss, y, raw)), axis_name)


# the points the host search evaluates per call (its program's one shape):
# the line search's grid (jaxboost.engine.line_search._SEARCH_POINTS) and a
# bracket's two ends
_HOST_POINTS = 2


def initial_score_on_host(
    sums_at: Callable[[np.ndarray], np.ndarray], y: np.ndarray, weight: np.ndarray, convex: bool
) -> tuple[np.ndarray, np.float32]:
    """`initial_score` for one output, its search driven from the host.

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
    """`_rough_median` of all rows, on the host."""
    kept = weight > 0
    low, high = np.min(y[kept]), np.max(y[kept])
    width = (high - low) / np.float32(_MEDIAN_BINS) if high > low else np.float32(1.0)
    bin_of_row = np.clip((y - low) / width, 0, _MEDIAN_BINS - 1).astype(np.int32)
    reached = np.cumsum(np.bincount(bin_of_row, weights=weight, minlength=_MEDIAN_BINS))
    middle = np.argmax(reached >= 0.5 * reached[-1])
    return np.float32(low + (middle + np.float32(0.5)) * width)

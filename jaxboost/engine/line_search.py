"""A line search per leaf: each leaf's step along a direction minimising the
loss over its rows, and Armijo's backtracking safeguard for Newton steps.

All leaves are searched at once; sums over rows are summed over shards with
``psum`` so every shard gets the same values.  The same scalar minimiser
also gives the initial score (one "leaf" holding every row).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..kernels.leaf_sums import LEAF_KERNELS, LeafKernels
from .derivatives import Loss, directional_derivatives, sample_loss
from .leaves import across_shards, score_magnitude, sum_by_leaf, sum_rows

_BRACKET_STEPS = 64
_SEARCH_STEPS = 64
# points evaluated per search iteration (one sum over rows and shards)
_SEARCH_POINTS = 2
# search iterations over all rows before a curvature-free search narrows to the
# rows whose slope still changes inside the bracket, at most 1/_NARROW_FRACTION
# of a shard's rows (and at least _NARROW_MIN_ROWS)
_NARROW_AFTER = 2
_NARROW_FRACTION = 16
_NARROW_MIN_ROWS = 64
_RELATIVE_TOLERANCE = 1e-7
# a leaf's step is searched at least to this fraction of its rows' mean score
# magnitude (the learning rate then scales the step; float32 scores resolve
# about 1.2e-7 of their magnitude)
_STEP_RESOLUTION = 1e-5
_FLAT_SLOPE = 1e-5
_ARMIJO_C = 1e-4
_ARMIJO_HALVINGS = 20
_FLOAT32_EPS = float(jnp.finfo(jnp.float32).eps)


class _SearchState(NamedTuple):
    """The shrinking search of `minimise_scalar`, each ``(m,)`` but ``step``."""

    lower: jax.Array  # the bracket's ends
    upper: jax.Array
    newton: jax.Array  # the next Newton point (where use_newton)
    step_size: jax.Array  # the last step's size (or the bracket's width)
    use_newton: jax.Array  # bool
    step: jax.Array  # iterations so far (scalar int32)


def _bracket(derivatives, active, initial_scale, xp=jnp, loop=lax.while_loop):
    """``(lower, upper, solvable)``: brackets of each root of the slope, by
    doubling steps from ``[-initial_scale, initial_scale]``."""

    def unbracketed(state):
        _, _, lower_rising, upper_rising, _ = state
        return active & (lower_rising | ~upper_rising)

    def bracket_cond(state):
        evaluations = state[-1]
        return (evaluations == 0) | (xp.any(unbracketed(state)) & (evaluations <= _BRACKET_STEPS))

    def bracket_step(state):
        # move the ends the last evaluation found on the wrong side (none
        # before the first), then evaluate the slope there
        lower, upper, lower_rising, upper_rising, evaluations = state
        lower_bad = active & lower_rising
        upper_bad = active & ~upper_rising
        width = upper - lower
        # an end with the wrong slope lies beyond the root: it becomes the other end
        lower, upper = (
            xp.where(lower_bad, lower - 2 * width, xp.where(upper_bad, upper, lower)),
            xp.where(upper_bad, upper + 2 * width, xp.where(lower_bad, lower, upper)),
        )
        ends_rising = derivatives(xp.stack([lower, upper], axis=1))[2]
        return lower, upper, ends_rising[:, 0], ends_rising[:, 1], evaluations + 1

    # (slopes that need no move before the first evaluation)
    start = (-initial_scale, initial_scale, xp.zeros_like(active), xp.ones_like(active), 0)
    lower, upper, lower_rising, upper_rising, _ = loop(bracket_cond, bracket_step, start)
    return lower, upper, active & ~lower_rising & upper_rising


def _unconverged(state: _SearchState, solvable, width_tolerance, xp=jnp) -> jax.Array:
    """``(m,)`` bool: problems whose bracket and step are above tolerance
    (``width_tolerance``, or float32 resolution of the ends)."""
    resolution = _FLOAT32_EPS * xp.maximum(xp.abs(state.lower), xp.abs(state.upper))
    tolerance = xp.maximum(width_tolerance, resolution)
    return solvable & (state.upper - state.lower > tolerance) & (state.step_size > tolerance)


def _search(
    derivatives, state: _SearchState, unconverged, stop_at=None, xp=jnp, loop=lax.while_loop
) -> _SearchState:
    """Shrink the brackets until every problem converges, or (``stop_at``) until
    that many iterations have run and no unconverged problem takes Newton steps."""
    fractions = xp.arange(1, _SEARCH_POINTS + 1, dtype=state.lower.dtype) / (_SEARCH_POINTS + 1)

    def search_cond(state):
        running = unconverged(state)
        go_on = xp.any(running) & (state.step < _SEARCH_STEPS)
        if stop_at is None:
            return go_on
        return go_on & ((state.step < stop_at) | xp.any(running & state.use_newton))

    def search_step(state):
        lower, upper = state.lower, state.upper
        grid = lower[:, None] + (upper - lower)[:, None] * fractions
        first = xp.where(state.use_newton, state.newton, grid[:, 0])
        points = xp.concatenate([first[:, None], grid[:, 1:]], axis=1)
        slope, curvature, is_rising, settled = derivatives(points)
        upper = xp.minimum(upper, xp.min(xp.where(is_rising, points, xp.inf), axis=1))
        # (a non-monotone rounding of the sums must not cross the ends)
        below = ~is_rising & (points < upper[:, None])
        lower = xp.maximum(lower, xp.max(xp.where(below, points, -xp.inf), axis=1))
        start, curved = points[:, 0], curvature[:, 0] > 0
        next_newton = start - slope[:, 0] / xp.where(curved, curvature[:, 0], 1.0)
        # (a Newton step onto an end of the bracket is kept: the other points
        # still shrink the bracket, and a vanishing step ends the search)
        inside = (next_newton >= lower) & (next_newton <= upper)
        # a slope that is zero up to the rounding of its sum: this last step
        # (within that rounding) ends the search
        next_use_newton = curved & (inside | settled[:, 0])
        next_newton = xp.clip(next_newton, lower, upper)
        step_size = xp.where(next_use_newton, xp.abs(next_newton - start), upper - lower)
        step_size = xp.where(next_use_newton & settled[:, 0], 0.0, step_size)
        return _SearchState(lower, upper, next_newton, step_size, next_use_newton, state.step + 1)

    return loop(search_cond, search_step, state)


def minimise_scalar(
    derivatives: Callable[[jax.Array], tuple[jax.Array, jax.Array, jax.Array, jax.Array]],
    active: jax.Array,
    initial_scale: jax.Array,
    narrow: Callable[[jax.Array, jax.Array], tuple[jax.Array, Callable]] | None = None,
    resolution: jax.Array | float = jnp.inf,
    xp=jnp,
    loop: Callable = lax.while_loop,
) -> jax.Array:
    """Minimise many convex one-dimensional functions at once.

    Brackets the root of the (monotone) derivative by doubling steps, then
    shrinks the bracket with ``_SEARCH_POINTS`` evaluations per iteration: a
    grid that cuts it into ``_SEARCH_POINTS + 1`` equal pieces (threefold with
    two points, where bisection halves it), the first grid point replaced by
    the previous Newton step where the second derivative is positive and that
    step stays inside the bracket.  The search ends when the bracket or the
    Newton step is below a fraction of the first bracket (``resolution``
    where that is smaller) or below float32 resolution of its ends, or, with
    a positive second derivative, when the slope at the first point is zero
    up to the rounding of its sum (the Newton step from there is the result).
    Every iteration is one sum over rows and shards (one collective), so two
    points per sum take a pinball loss from about 24 iterations to 15; more
    points cost more work over the rows than the iterations they save.  On a
    flat stretch of the function (the weighted median of an even number of
    points) it converges to the smallest minimiser, i.e. the inverted-CDF
    weighted quantile for pinball losses.

    With ``narrow``, a search still running after ``_NARROW_AFTER``
    iterations without Newton steps (a piecewise-linear loss) asks
    ``narrow(lower, upper)`` for ``(fits, derivatives)``: where ``fits`` (a
    scalar bool, the same on every shard), the rest of the search uses the
    returned ``derivatives``, which must agree with ``derivatives`` inside the
    brackets (see `line_search_leaf_values`: the rows whose slope cannot
    change there are summed once).

    Args:
      derivatives: ``t (m, P) -> (phi'(t), phi''(t), rising, settled)``, each
        ``(m, P)``, summed over rows and shards; ``rising`` is ``phi'(t) >= 0``
        up to the rounding of the sum (a flat stretch counts as rising);
        ``settled`` is ``phi'(t) == 0`` up to that rounding (where ``phi'' > 0``
        it ends the search at ``t``).
      active: ``(m,)`` bool; inactive problems (empty leaves) return 0.
      initial_scale: ``(m,)`` positive first bracket half-width.
      narrow: optional, as above.
      resolution: ``(m,)`` or a scalar: the search resolves the minimisers
        at least this finely.  The first bracket's size is an absolute guess
        (1 for a function without curvature), so a minimiser of scale 1e-9
        needs it.
      xp, loop: the array module and while loop the search runs on:
        ``jax.numpy`` and ``lax.while_loop`` inside a program, or ``numpy``
        and `host_while_loop` on the host, where ``derivatives`` is then
        a compiled program's call (float32 arrays in and out; no ``narrow``).
    Returns:
      ``(m,)`` float32 minimisers; 0 where inactive or where no bracket was
      found (a function that is flat or decreasing everywhere).
    """
    lower, upper, solvable = _bracket(derivatives, active, initial_scale, xp, loop)
    # a fraction of the first bracket, or finer where the caller asks
    width_tolerance = xp.minimum(
        _RELATIVE_TOLERANCE * xp.maximum(upper - lower, 1e-3 * initial_scale), resolution
    )
    unconverged = functools.partial(
        _unconverged, solvable=solvable, width_tolerance=width_tolerance, xp=xp
    )
    no_newton = xp.zeros_like(active)
    state = _SearchState(lower, upper, lower, xp.full_like(lower, xp.inf), no_newton, 0)
    if narrow is None:
        state = _search(derivatives, state, unconverged, xp=xp, loop=loop)
    else:
        state = _search(derivatives, state, unconverged, stop_at=_NARROW_AFTER)

        def narrowed_search(state):
            fits, narrowed = narrow(state.lower, state.upper)
            return lax.cond(
                fits,
                lambda state: _search(narrowed, state, unconverged),
                lambda state: _search(derivatives, state, unconverged),
                state,
            )

        state = lax.cond(jnp.any(unconverged(state)), narrowed_search, lambda state: state, state)
    # Bisection (a piecewise-linear function) returns the bracket's lower end:
    # within float32 rounding of the minimising data point and below it; a
    # bracket that holds 0 returns 0 exactly, so that rows tied at a kink (a
    # median of 0 on zero-inflated targets) stay tied, where the gradient
    # takes the middle of their subdifferential (jaxboost.engine.derivatives)
    bisected = xp.where((state.lower <= 0) & (state.upper >= 0), 0.0, state.lower)
    return xp.where(solvable, xp.where(state.use_newton, state.newton, bisected), 0.0)


def host_while_loop(cond: Callable, body: Callable, state):
    """``lax.while_loop``'s meaning in Python, for searches run on the host."""
    while cond(state):
        state = body(state)
    return state


def line_search_leaf_values(
    loss: Loss,
    y: jax.Array,
    raw: jax.Array,
    weight: jax.Array,
    leaf_of_row: jax.Array,
    direction: jax.Array,
    axis_name: str | None = None,
    kernels: LeafKernels = LEAF_KERNELS["reference"],
    leaf_weight: jax.Array | None = None,
    score_sum: jax.Array | None = None,
    narrow: bool = False,
    start: tuple[jax.Array, jax.Array] | None = None,
    reg_lambda: float | jax.Array = 0.0,
) -> jax.Array:
    """``t_j = argmin_t sum_{i in leaf j} w_i loss(y_i, raw_i + t d_j) + reg_lambda/2 |t d_j|^2``
    for all leaves.

    With one output and ``d_j = 1`` this is Friedman's line search: the exact
    weighted median / quantile of the leaf for absolute and pinball losses.
    Such a piecewise-linear search needs about 15 sums; with ``narrow``, after
    the first few over all rows it sums only the rows whose slope still
    changes inside their leaf's bracket (gathered from every shard, so the
    rest of the search runs without collectives) plus a constant for the
    others (`_rows_changing_in_brackets`).  That is more code to
    compile, and pays only for losses without curvature.

    Args:
      y: ``(n_rows,)`` or ``(n_rows, n_targets)``.
      raw: ``(n_rows, K)`` current raw scores.
      weight: ``(n_rows,)`` sample weights (0 for padding rows).
      leaf_of_row: ``(n_rows,)`` int32.
      direction: ``(n_leaves, K)`` search direction of each leaf.
      kernels: how values go from leaves to rows and are summed back
        (`jaxboost.kernels.leaf_sums.LEAF_KERNELS`).
      leaf_weight: ``(n_leaves,)`` each leaf's summed ``weight`` where the
        caller has it (`LeafTotals`); else summed here (one more pass
        over the rows and one more collective).
      score_sum: ``(n_leaves,)`` each leaf's summed ``weight * mean_k |raw|``
        where the caller has it (`LeafTotals` ``score``); else summed
        here, with ``leaf_weight``.  The search resolves each leaf's step at
        least to ``_STEP_RESOLUTION`` of its rows' mean score magnitude, so
        that targets of scale 1e-9 get leaf values about as exact, relatively,
        as targets of scale 1.
      narrow: narrow the search to the rows whose slope changes, as above
        (static).
      start: ``(slope, curvature)``, each ``(n_leaves,)``: every leaf's first
        and second derivative at step 0 where the caller has them (the leaf
        totals' gradient and hessian along ``direction``); they only set the
        first bracket.  Else computed here (one more pass and collective).
      reg_lambda: the L2 penalty on each leaf's value (XGBoost's lambda, as
        in `solve_newton`): a loss that falls without bound in a leaf
        (log loss on a leaf of one class) then has a finite minimiser, of size about
        ``log(leaf weight / reg_lambda)`` there, instead of the step at which
        float32 slopes underflow (17 to 90).  0: the leaf's loss alone.
    Returns:
      ``(n_leaves, K)`` leaf values ``t_j d_j``.
    """
    n_leaves = direction.shape[0]
    rows = _LeafRows(y, raw, weight, leaf_of_row)
    slope_sums = functools.partial(_slope_sums, loss, kernels, direction, n_leaves)
    # d/dt of reg_lambda/2 |t d|^2 is penalty * t; its second derivative, penalty
    penalty = (reg_lambda * jnp.sum(jnp.square(direction), axis=1))[:, None]

    def derivatives(steps, rows=rows, axis_name=axis_name, offset=0.0):
        """``steps (n_leaves, P)`` -> slope, curvature, rising, settled, each
        ``(n_leaves, P)``; ``offset`` ``(n_leaves, 3, 1)`` is added to the sums."""
        sums = slope_sums(rows, steps, axis_name) + offset
        return searched_derivatives(sums, penalty, steps)

    def narrow_rows(lower, upper):
        fits, changing, constant_sums = _rows_changing_in_brackets(
            loss, kernels, direction, rows, axis_name, lower, upper
        )
        offset = constant_sums[:, :, None]
        return fits, functools.partial(derivatives, rows=changing, axis_name=None, offset=offset)

    if leaf_weight is None or score_sum is None:
        per_row = jnp.stack([weight, weight * score_magnitude(raw)], axis=1)
        leaf_weight, score_sum = sum_rows(kernels, per_row, leaf_of_row, n_leaves, axis_name).T
    if start is None:  # (the penalty included)
        slope, curvature, _, _ = derivatives(jnp.zeros((n_leaves, 1), raw.dtype))
        slope, curvature = slope[:, 0], curvature[:, 0]
    else:
        slope, curvature = start[0], start[1] + penalty[:, 0]
    active, initial_scale, resolution = search_start(
        slope, curvature, leaf_weight, score_sum, direction
    )
    step = minimise_scalar(
        derivatives, active, initial_scale, narrow_rows if narrow else None, resolution
    )
    return step[:, None] * direction


def searched_derivatives(sums, penalty, steps, xp=jnp):
    """What `minimise_scalar` asks of a line search at ``steps (n_leaves,
    P)``: slope, curvature, rising, settled, each ``(n_leaves, P)``, from the
    leaves' ``sums (n_leaves, 3, P)`` of slope, curvature and absolute slope
    and the L2 ``penalty (n_leaves, 1)`` (see `line_search_leaf_values`)."""
    slope_sum = sums[:, 0] + penalty * steps
    curvature_sum = sums[:, 1] + penalty
    abs_slope_sum = sums[:, 2] + xp.abs(penalty * steps)
    # a slope that is zero up to float32 rounding of the sum is zero; where
    # the function is piecewise linear (no curvature), that flat stretch
    # counts as rising (pinball losses): this keeps the smallest minimiser
    settled = xp.abs(slope_sum) <= _FLAT_SLOPE * abs_slope_sum
    rising = (slope_sum >= 0) | (settled & (curvature_sum <= 0))
    return slope_sum, curvature_sum, rising, settled


def search_start(slope, curvature, leaf_weight, score_sum, direction, xp=jnp):
    """``(active, initial_scale, resolution)`` of the leaves' line searches
    (`minimise_scalar`'s, each ``(n_leaves,)``) from their slope and
    curvature at step 0, weight and score sums (``(n_leaves,)`` each) and
    ``direction (n_leaves, K)``."""
    newton = xp.abs(slope) / xp.where(curvature > 0, curvature, 1.0)
    # start from the Newton step's scale, capped: a vanishing curvature (a loss
    # that saturates far from its minimum) gives absurd Newton steps, and the
    # bracket grows geometrically anyway
    initial_scale = xp.where(curvature > 0, xp.clip(2.0 * newton, 1e-4, 1.0), 1.0)
    active = (leaf_weight > 0) & xp.any(direction != 0, axis=1)
    score_scale = score_sum / xp.where(leaf_weight > 0, leaf_weight, 1.0)
    largest = xp.max(xp.abs(direction), axis=1)
    resolution = _STEP_RESOLUTION * score_scale / xp.where(largest > 0, largest, 1.0)
    return active, initial_scale, resolution


class _LeafRows(NamedTuple):
    """The rows a line search sums over: ``y (n, ...)``, ``raw (n, K)``,
    ``weight (n,)``, ``leaf_of_row (n,)`` int32."""

    y: jax.Array
    raw: jax.Array
    weight: jax.Array
    leaf_of_row: jax.Array


def _row_derivatives(loss, kernels, direction, rows: _LeafRows, steps):
    """Each row's first and second derivative along its leaf's ``direction``
    ``(n_leaves, K)`` at its leaf's ``steps (n_leaves, P)``: two ``(P, n)``."""
    row_direction = kernels.rows_of_leaves(direction, rows.leaf_of_row).T

    def at(row_step):  # (n,) -> two (n,)
        moved = rows.raw + row_step[:, None] * row_direction
        return directional_derivatives(loss, rows.y, moved, row_direction)

    # points lead, rows follow: each point's rows are contiguous for the loss
    return jax.vmap(at)(kernels.rows_of_leaves(steps, rows.leaf_of_row))


def _rows_changing_in_brackets(loss, kernels, direction, rows: _LeafRows, axis_name, lower, upper):
    """Split the rows at the brackets ``[lower, upper]`` ``(n_leaves,)`` of their
    leaves' steps.

    A row whose slope is the same at both ends of its bracket and whose
    curvature is zero at both adds a constant to its leaf's sums inside the
    bracket (for a convex loss its slope cannot change in between): a pinball
    row whose kink lies outside.  Those constants are summed once; the other
    rows of every shard are gathered, at most ``1 / _NARROW_FRACTION`` of the
    shard's rows (at least ``_NARROW_MIN_ROWS``).

    Returns:
      ``fits`` (scalar bool, the same on every shard: no shard had more
      changing rows than that); the changing rows of all shards, ``shards x
      capacity`` rows (unused ones with weight 0); ``(n_leaves, 3)`` the
      constant rows' slope, curvature (0) and absolute slope sums.
    """
    n_leaves = direction.shape[0]
    ends = jnp.stack([lower, upper], axis=1)
    slope, curvature = _row_derivatives(loss, kernels, direction, rows, ends)
    constant = (slope[0] == slope[1]) & (curvature[0] == 0) & (curvature[1] == 0)
    constant = constant | (rows.weight == 0)
    terms = jnp.stack([slope[0], jnp.zeros_like(rows.weight), jnp.abs(slope[0])])
    constant_terms = jnp.where(constant, terms * rows.weight, 0.0)
    constant_sums = sum_by_leaf(kernels, constant_terms, rows.leaf_of_row, n_leaves, None)
    capacity = max(_NARROW_MIN_ROWS, rows.weight.shape[0] // _NARROW_FRACTION)
    kept, n_changing = kernels.first_true_rows(~constant, capacity)
    changing = _LeafRows(
        rows.y[kept],
        rows.raw[kept],
        jnp.where(jnp.arange(capacity) < n_changing, rows.weight[kept], 0.0),
        rows.leaf_of_row[kept],
    )
    # the shards that overflow ride in an extra row of the sums: one collective
    overflow = jnp.zeros((1, 3), constant_sums.dtype).at[0, 0].set(n_changing > capacity)
    constant_sums = jnp.concatenate([constant_sums, overflow])
    if axis_name is not None:
        constant_sums = lax.psum(constant_sums, axis_name)
        changing = _gather_rows(changing, axis_name)
    return constant_sums[-1, 0] == 0, changing, constant_sums[:-1]


def _gather_rows(rows, axis_name):
    """Every shard's ``rows`` (a pytree of ``(n, ...)`` arrays of 32-bit types),
    concatenated in shard order: one ``all_gather`` of their bits as columns."""
    parts, structure = jax.tree.flatten(rows)
    columns = [
        lax.bitcast_convert_type(part, jnp.uint32).reshape(part.shape[0], -1) for part in parts
    ]
    every = lax.all_gather(jnp.concatenate(columns, axis=1), axis_name, tiled=True)
    gathered, start = [], 0
    for part, column in zip(parts, columns, strict=True):
        bits = every[:, start : start + column.shape[1]].reshape(-1, *part.shape[1:])
        gathered.append(lax.bitcast_convert_type(bits, part.dtype))
        start += column.shape[1]
    return jax.tree.unflatten(structure, gathered)


def _slope_sums(loss, kernels, direction, n_leaves, rows: _LeafRows, steps, axis_name):
    """``(n_leaves, 3, P)``: every leaf's weighted slope, curvature and absolute
    slope sums at its ``steps (n_leaves, P)``, over its rows and shards."""
    slope, curvature = _row_derivatives(loss, kernels, direction, rows, steps)
    sums = kernels.slope_sums(slope, curvature, rows.weight, rows.leaf_of_row, n_leaves)
    return across_shards(sums, axis_name).reshape(n_leaves, 3, steps.shape[1])


def armijo_backtrack(
    loss: Loss,
    y: jax.Array,
    raw: jax.Array,
    weight: jax.Array,
    leaf_of_row: jax.Array,
    step: jax.Array,
    grad_sum: jax.Array,
    axis_name: str | None = None,
    kernels: LeafKernels = LEAF_KERNELS["reference"],
    base: jax.Array | None = None,
) -> jax.Array:
    """Shrink each leaf's step until it decreases that leaf's loss (Armijo).

    ``sum_{i in leaf} w_i loss(y_i, raw_i + s v) <= base + c s <G, v>`` with
    ``s`` halved up to ``_ARMIJO_HALVINGS`` times; a leaf that never satisfies
    it gets 0, so a round never increases the training loss.

    Args:
      raw: ``(n_rows, K)``; step: ``(n_leaves, K)`` proposed leaf values;
      grad_sum: ``(n_leaves, K)`` weighted gradient sums at ``raw``.
      base: ``(n_leaves,)`` each leaf's weighted loss at ``raw`` where the
        caller has it (`LeafTotals`); else summed here.
    Returns:
      ``(n_leaves, K)`` accepted leaf values.
    """
    n_leaves = step.shape[0]

    def leaf_loss(scale):
        moved = raw + kernels.rows_of_leaves(scale[:, None] * step, leaf_of_row).T
        row_loss = weight * sample_loss(loss, y, moved)
        return sum_by_leaf(kernels, row_loss[None, :], leaf_of_row, n_leaves, axis_name)[:, 0]

    if base is None:
        base = leaf_loss(jnp.zeros(n_leaves))
    slope = jnp.minimum(jnp.sum(grad_sum * step, axis=1), 0.0)

    def accepted(scale):
        return leaf_loss(scale) <= base + _ARMIJO_C * scale * slope

    def unfinished(state):
        _, ok, halvings = state
        return jnp.any(~ok) & (halvings < _ARMIJO_HALVINGS)

    def halve(state):
        scale, ok, halvings = state
        scale = jnp.where(ok, scale, 0.5 * scale)
        return scale, ok | accepted(scale), halvings + 1

    scale = jnp.ones(n_leaves)
    scale, ok, _ = lax.while_loop(unfinished, halve, (scale, accepted(scale), 0))
    return jnp.where(ok, scale, 0.0)[:, None] * step

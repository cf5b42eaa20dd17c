"""Per-sample gradients and hessians of a loss, by automatic differentiation.

A loss is ``loss(y, f) -> scalar`` for one sample: ``y`` one target (a scalar,
or a vector for multi-target losses) and ``f`` the raw score, a scalar when the
model has one output and a vector of ``n_outputs`` scores otherwise.  The engine
keeps raw scores as ``(n_rows, n_outputs)`` arrays; this module handles the
scalar/vector convention in one place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..losses.metadata import metadata_of
from ..runtime.lifted_values import bound
from ..runtime.program_cache import without_values

Loss = Callable[[jax.Array, jax.Array], jax.Array]


def sample_loss(loss: Loss, y: jax.Array, raw: jax.Array) -> jax.Array:
    """Loss of every row.

    Args:
      y: ``(n_rows,)`` or ``(n_rows, n_targets)`` targets.
      raw: ``(n_rows, n_outputs)`` raw scores.
    Returns:
      ``(n_rows,)`` per-sample loss values.
    """
    if raw.shape[1] == 1:
        return jax.vmap(loss)(y, raw[:, 0])
    return jax.vmap(loss)(y, raw)


def grad_hess(
    loss: Loss, y: jax.Array, raw: jax.Array, full_hessian: bool = False
) -> tuple[jax.Array, jax.Array]:
    """Gradient and hessian of the loss with respect to the raw score, per row.

    The gradient is `row_gradient`'s: at a kink (``|y - f|`` at ``f =
    y``) the middle of the subdifferential, not the one side JAX picks.

    Args:
      y: ``(n_rows,)`` or ``(n_rows, n_targets)`` targets.
      raw: ``(n_rows, n_outputs)`` raw scores.
      full_hessian: return the full ``(n_outputs, n_outputs)`` hessian per row
        instead of its diagonal.
    Returns:
      ``grad (n_rows, n_outputs)`` and ``hess (n_rows, n_outputs)``, or
      ``hess (n_rows, n_outputs, n_outputs)`` when ``full_hessian``.
    """
    grad = row_gradient(loss, y, raw)
    if raw.shape[1] == 1:
        hess = jax.vmap(jax.hessian(loss, argnums=1))(y, raw[:, 0])
        hess = hess[:, None, None] if full_hessian else hess[:, None]
        return grad, hess
    hess = jax.vmap(jax.hessian(loss, argnums=1))(y, raw)
    if not full_hessian:
        hess = jnp.diagonal(hess, axis1=1, axis2=2)
    return grad, hess


# a kink is looked for this far (relative to the score) on either side of it:
# 128 float32 ulps, far beyond rounding, far below any split's resolution
_KINK_STEP = 2.0**-16
# the gradient jumps (a kink) where its one-sided limits differ by more than
# this fraction of their size: a continuous gradient's differ by its third
# derivative times the step cubed, or by rounding (about 1e-7); the step is
# relative to the score, so a unit-scale loss far from 0 (log-cosh at |f| >
# 5000) can still be taken for a kink where its curvature changes
_KINK_JUMP = 1e-3


def row_gradient(loss: Loss, y: jax.Array, raw: jax.Array) -> jax.Array:
    """``(n_rows, n_outputs)`` gradient of the loss at every row's raw score,
    the middle of the subdifferential where the loss has a kink.

    At a kink JAX differentiates one branch: ``|y - f|`` at ``f = y`` has
    gradient -1, so targets tied with the score (zero-inflated data at a
    median of 0) look like targets above it, and no split separates them.
    Rows whose gradient jumps within ``_KINK_STEP`` of their score take the
    mean of its one-sided limits (0 for ``|y - f|``, ``0.5 - alpha`` for the
    pinball loss), as a subgradient method would; elsewhere the gradient is
    JAX's, also where only the hessian jumps (an asymmetric log-cosh at
    ``r = 0``, Huber's loss at ``|r| = delta``), whose gradient is
    continuous.  A loss declared ``smooth`` (its gradient continuous: the
    catalogue's smooth losses) skips the two extra evaluations.
    """
    scalar = raw.shape[1] == 1
    f = raw[:, 0] if scalar else raw
    grad = jax.vmap(jax.grad(loss, argnums=1))(y, f)
    if metadata_of(loss).smooth:
        return grad[:, None] if scalar else grad
    step_shape = (-1,) if scalar else (-1, 1)
    magnitude = jnp.max(jnp.abs(f).reshape(f.shape[0], -1), axis=1).reshape(step_shape)
    step = jnp.maximum(_KINK_STEP * magnitude, jnp.finfo(f.dtype).tiny)
    above, above_limit = _one_sided(loss, y, f, f + step)
    below, below_limit = _one_sided(loss, y, f, f - step)
    size = jnp.abs(above) + jnp.abs(below) + jnp.abs(grad)
    kink = jnp.abs(above_limit - below_limit) > _KINK_JUMP * size
    kink &= jnp.isfinite(above_limit) & jnp.isfinite(below_limit)
    grad = jnp.where(kink, 0.5 * (above_limit + below_limit), grad)
    return grad[:, None] if scalar else grad


def _one_sided(
    loss: Loss, y: jax.Array, f: jax.Array, point: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The gradient at ``point`` (``f`` plus or minus a step, the shape of
    ``f``), and that gradient carried back to ``f`` along the hessian at
    ``point``: the one-sided limit at ``f`` to second order in the step, so
    that a gradient that is continuous at ``f`` (only its slope jumps) has
    equal limits on both sides."""
    # exact where the two are within a factor of 2 (Sterbenz's lemma): the
    # step as it was taken, not as it was asked
    offset = f - point
    grad_fn = jax.grad(loss, argnums=1)

    def one_row(y_row, point_row, offset_row):
        return jax.jvp(lambda score: grad_fn(y_row, score), (point_row,), (offset_row,))

    grad, change = jax.vmap(one_row)(y, point, offset)
    return grad, grad + change


def directional_derivatives(
    loss: Loss, y: jax.Array, raw: jax.Array, direction: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """First and second derivative of ``t -> loss(y, raw + t * direction)`` at 0.

    The second derivative is exact (a Hessian-vector product), for any
    ``n_outputs``.

    Args:
      y: ``(n_rows,)`` or ``(n_rows, n_targets)`` targets.
      raw: ``(n_rows, n_outputs)`` raw scores.
      direction: ``(n_rows, n_outputs)`` direction of every row.
    Returns:
      ``(n_rows,)`` first and ``(n_rows,)`` second directional derivatives.
    """
    scalar = raw.shape[1] == 1

    def one_row(y_row, raw_row, direction_row):
        f, d = (raw_row[0], direction_row[0]) if scalar else (raw_row, direction_row)
        grad_fn = jax.grad(loss, argnums=1)
        grad, hess_d = jax.jvp(lambda point: grad_fn(y_row, point), (f,), (d,))
        return jnp.sum(grad * d), jnp.sum(hess_d * d)

    return jax.vmap(one_row)(y, raw, direction)


class HessianProbe(NamedTuple):
    """What a loss's hessian is like near the initial score."""

    # curvature on most rows: Newton leaves and second-order gains can use it
    informative: bool
    # some row's hessian, as Newton steps use it (its diagonal, or the full
    # matrix), has negative curvature: a non-convex loss, whose Newton steps
    # can overshoot, so leaf values need Armijo's check
    negative: bool
    # the probed rows' mean hessian diagonal entry (negative ones as 0) of
    # the output where it is smallest (of those where it is positive): the
    # loss's scale, which the default reg_lambda is measured against; NaN
    # where not measured (a declared loss, unless asked)
    mean_hessian: float = float("nan")
    # that output's index
    output: int = 0


# an eigenvalue below this fraction of the row's largest (in magnitude) is
# negative curvature, not float32 rounding of a singular matrix (softmax's)
_NEGATIVE_EIGENVALUE = 1e-5
# float32's epsilon: a hessian below it times |gradient| / |score| is rounding
_CURVED_STEP = 2.0**-23


def probe_hessian(
    loss: Loss, y: jax.Array, raw: jax.Array, full_hessian: bool = False, measure: bool = False
) -> HessianProbe:
    """The hessian's shape on a sample of rows.

    A loss whose hessian is zero almost everywhere (absolute, pinball, a ramp)
    must not drive Newton steps or second-order split gains: every child would
    fail ``min_child_weight``.  Losses declare this with a
    ``hessian_informative`` attribute; undeclared ones are probed here.
    Negative curvature is probed for every loss not declared ``convex``
    (the catalogue's Gaussian likelihood in (mean, log scale) has a full
    hessian that is indefinite on every row with a residual).

    Args:
      y: ``(n_rows, ...)`` a sample of targets; raw: ``(n_rows, K)`` scores.
      full_hessian: Newton steps use the full ``K x K`` hessian (else its
        diagonal): negative curvature is then a negative eigenvalue.
      measure: a declared loss's rows are evaluated too, for ``mean_hessian``.
    """
    if is_declared(loss) and not measure:
        return declared_probe(loss)
    structure, values = without_values(loss)
    grad, hess = _probe_rows(structure, values or (), y, raw, full_hessian and raw.shape[1] > 1)
    return hessian_probe_of(loss, np.asarray(raw), np.asarray(grad), np.asarray(hess))


def is_declared(loss: Loss) -> bool:
    """Whether ``loss`` declares its hessian's shape (informative or not,
    and convex), so that it needs no probe."""
    stated = metadata_of(loss)
    return stated.hessian_informative is not None and stated.convex


def declared_probe(loss: Loss) -> HessianProbe:
    """The `HessianProbe` a loss that `is_declared` declares."""
    return HessianProbe(informative=bool(loss.hessian_informative), negative=False)


def hessian_probe_of(
    loss: Loss, raw: np.ndarray, grad: np.ndarray, hess: np.ndarray
) -> HessianProbe:
    """`probe_hessian`'s answer from rows' scores ``raw (n, K)``, the loss's
    gradients ``(n, K)`` and hessians ``(n, K)`` (diagonal) or ``(n, K, K)``
    there (numpy): the share of rows with a usable diagonal entry, curved
    either way (informative from one half, unless declared: a row of
    negative curvature is the Armijo safeguard's, a row of none has nothing
    for Newton), any negative curvature (a negative diagonal entry, or
    eigenvalue of a full hessian), and the mean diagonal entry; a loss
    that `is_declared` keeps its declared shape."""
    diagonal = hess if hess.ndim == 2 else np.diagonal(hess, axis1=1, axis2=2)
    with np.errstate(all="ignore"):
        # curved: a Newton step |g| / h within float32's reach of the score's
        # magnitude (a loss evaluated in float64 keeps hessians of 1e-30 that
        # float32 rounds to 0, and that would give absurd Newton steps)
        reach = np.abs(diagonal) * (1.0 + np.abs(raw)) > _CURVED_STEP * np.abs(grad)
        curved_share = np.mean(np.any((diagonal != 0) & reach, axis=1))
        if hess.ndim == 2:
            negative = bool(np.any(hess < 0))
        else:
            finite = np.all(np.isfinite(hess.reshape(hess.shape[0], -1)), axis=1)
            eigenvalues = np.linalg.eigvalsh(hess[finite].astype(np.float64))  # ascending
            scale = np.max(np.abs(eigenvalues), axis=1, initial=0.0)
            negative = bool(np.any(eigenvalues[:, 0] < -_NEGATIVE_EIGENVALUE * scale))
        mean_hessian, output = _smallest_mean_hessian(diagonal)
    if is_declared(loss):
        return declared_probe(loss)._replace(mean_hessian=mean_hessian, output=output)
    declared = metadata_of(loss).hessian_informative
    informative = bool(curved_share >= 0.5) if declared is None else bool(declared)
    return HessianProbe(informative, negative, mean_hessian, output)


def _smallest_mean_hessian(diagonal: np.ndarray) -> tuple[float, int]:
    """The smallest positive of the outputs' mean finite hessian entries
    (negative ones as 0) over the rows of ``diagonal (n, K)``, and its
    output; where none is positive, the mean of all (0 or NaN) and 0.  One
    output's small hessian (a Gaussian's mean, 1e-4 per row, beside its log
    scale's 2) must not hide in a mean over outputs."""
    finite = np.isfinite(diagonal)
    clipped = np.where(finite, np.maximum(diagonal, 0.0), 0.0).astype(np.float64)
    counts = np.sum(finite, axis=0)
    with np.errstate(all="ignore"):
        means = np.sum(clipped, axis=0) / counts
    positive = np.flatnonzero(means > 0)
    if positive.size == 0:
        total = int(np.sum(counts))
        return (float(np.sum(clipped)) / total if total else float("nan")), 0
    output = int(positive[np.argmin(means[positive])])
    return float(means[output]), output


def compile_probe(loss: Loss, y: jax.Array, n_outputs: int, full_hessian: bool = False) -> None:
    """Compiles `probe_hessian`'s program for targets shaped as ``y`` and
    float32 scores of ``n_outputs`` (for a later call that does not)."""
    if is_declared(loss):
        return
    raw = jax.ShapeDtypeStruct((y.shape[0], n_outputs), jnp.float32)
    target = jax.ShapeDtypeStruct(y.shape, jnp.float32)
    structure, values = without_values(loss)
    full = full_hessian and n_outputs > 1
    _probe_rows.lower(structure, values or (), target, raw, full).compile()


@functools.partial(jax.jit, static_argnums=(0, 4))
def _probe_rows(
    loss: Loss, values: tuple, y: jax.Array, raw: jax.Array, full_hessian: bool
) -> tuple[jax.Array, jax.Array]:
    """`grad_hess` as one compiled program (run op by op, a loss's
    derivatives compiled some 30 small programs on a first fit, about 0.6 s),
    with the lifted ``values`` of ``loss`` where it is a structure
    (`jaxboost.runtime.program_cache.without_values`)."""
    with bound(loss, values):
        return grad_hess(loss, y, raw, full_hessian=full_hessian)

"""Regression losses on the identity link.

Each loss takes one target ``y`` (scalar) and one raw score ``f`` (scalar, the
prediction itself) and returns a scalar.  They are elementwise, so arrays of
the same shape work too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ._declare import Loss, declare, finite_number, loss_factory


@declare(hessian_informative=True, name="squared_error", link="identity", convex=True, smooth=True)
def squared_error(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Half squared error ``0.5 (y - f)^2``.

    Args:
      y: target, scalar.
      f: raw score (the prediction), scalar.
    Returns:
      scalar loss; gradient ``f - y``, hessian ``1``.
    """
    return 0.5 * jnp.square(jnp.asarray(y) - f)


@declare(name="absolute_error", link="identity", hessian_informative=False, convex=True)
def absolute_error(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Absolute error ``|y - f|``.

    Args:
      y: target, scalar.
      f: raw score (the prediction), scalar.
    Returns:
      scalar loss; gradient ``sign(f - y)``, hessian ``0`` away from ``f = y``.
    """
    return jnp.abs(jnp.asarray(y) - f)


@loss_factory
def huber(delta: float = 1.0) -> Loss:
    """Huber loss: quadratic within ``delta`` of the target, linear beyond.

    ``0.5 d^2`` if ``|d| <= delta`` else ``delta (|d| - 0.5 delta)``, with
    ``d = f - y``.

    Args:
      delta: positive threshold between the quadratic and linear parts.
    Returns:
      a declared loss ``loss(y, f)`` on scalars; gradient ``clip(f - y, -delta,
      delta)``, hessian ``1`` inside the threshold and ``0`` outside.
    """
    delta = finite_number("huber", "delta", delta)
    if not delta > 0:
        raise ValueError(f"huber: delta must be > 0, got {delta!r}")
    delta = float(delta)

    # curvature only within delta of the target: on targets far larger than
    # delta (prices, counts in thousands) most rows have none, so the engine
    # probes it on the data (hessian_informative=None)
    @declare(
        name="huber",
        link="identity",
        params={"delta": delta},
        convex=True,
        hessian_informative=None,
        smooth=True,
    )
    def huber_loss(y: ArrayLike, f: ArrayLike) -> jax.Array:
        abs_diff = jnp.abs(f - jnp.asarray(y))
        return jnp.where(
            abs_diff <= delta, 0.5 * jnp.square(abs_diff), delta * (abs_diff - 0.5 * delta)
        )

    return huber_loss


@loss_factory
def quantile(alpha: float) -> Loss:
    """Pinball loss for the ``alpha`` quantile.

    ``alpha (y - f)`` if ``y >= f`` else ``(1 - alpha) (f - y)``.

    Args:
      alpha: quantile level in ``(0, 1)``; ``0.5`` gives half the absolute error.
    Returns:
      a declared loss ``loss(y, f)`` on scalars; gradient ``-alpha`` where
      ``y > f`` and ``1 - alpha`` where ``y < f``, hessian ``0``.
    """
    alpha = finite_number("quantile", "alpha", alpha)
    if not 0 < alpha < 1:
        raise ValueError(f"quantile: alpha must be in (0, 1), got {alpha!r}")
    alpha = float(alpha)

    @declare(
        name="quantile",
        link="identity",
        hessian_informative=False,
        params={"alpha": alpha},
        convex=True,
    )
    def quantile_loss(y: ArrayLike, f: ArrayLike) -> jax.Array:
        diff = jnp.asarray(y) - f
        return jnp.where(diff >= 0, alpha * diff, (alpha - 1.0) * diff)

    return quantile_loss


@jax.custom_jvp
def _log_cosh_of(diff: jax.Array) -> jax.Array:
    """``log(cosh(diff))`` as ``|d| + softplus(-2 |d|) - log 2``: no overflow
    for large ``|d|``.  Its derivative is given as ``tanh(d)``: differentiated
    as written, it is ``1 - 2 sigmoid(-2 |d|)``, which float32 rounds to 0 for
    ``|d| < 3e-8`` (targets of size 1e-8 then got a tenth of the splits)."""
    abs_diff = jnp.abs(diff)
    return abs_diff + jax.nn.softplus(-2.0 * abs_diff) - jnp.log(2.0)


@_log_cosh_of.defjvp
def _log_cosh_jvp(primals, tangents):
    (diff,), (tangent,) = primals, tangents
    return _log_cosh_of(diff), jnp.tanh(diff) * tangent


# curvature only within about 1 of the target (sech^2 of the residual): as
# for huber, the engine probes it on the data
@declare(name="log_cosh", link="identity", convex=True, hessian_informative=None, smooth=True)
def log_cosh(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Log-cosh loss ``log(cosh(f - y))``.

    Computed as ``|d| + softplus(-2 |d|) - log 2`` with ``d = f - y``, which
    does not overflow for large ``|d|``, and differentiated as ``tanh(d)``,
    exact for tiny ``|d|`` too.

    Args:
      y: target, scalar.
      f: raw score (the prediction), scalar.
    Returns:
      scalar loss; gradient ``tanh(f - y)``, hessian ``1 - tanh(f - y)^2``.
    """
    return _log_cosh_of(f - jnp.asarray(y))

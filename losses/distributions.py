"""Negative log-likelihoods of distributions, up to terms free of the score.

Count and positive-valued targets use a log link (``mean = exp(f)``);
`gaussian_nll` takes two raw scores per row, the mean and the log of the
standard deviation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ._declare import Loss, declare, loss_factory


@declare(name="poisson", link="exp", target_domain="non_negative", convex=True, smooth=True)
def poisson(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Poisson deviance on the log scale: ``exp(f) - y f``.

    Args:
      y: non-negative count, scalar.
      f: raw score, the log of the mean, scalar.
    Returns:
      scalar loss; gradient ``exp(f) - y``, hessian ``exp(f)``. Link: exp.
    """
    return jnp.exp(f) - jnp.asarray(y) * f


@declare(name="gamma", link="exp", target_domain="positive", convex=True, smooth=True)
def gamma(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Gamma deviance on the log scale: ``y exp(-f) + f``.

    Args:
      y: positive target, scalar.
      f: raw score, the log of the mean, scalar.
    Returns:
      scalar loss; gradient ``1 - y exp(-f)``, hessian ``y exp(-f)``. Link: exp.
    """
    return jnp.asarray(y) * jnp.exp(-f) + f


@loss_factory
def tweedie(power: float = 1.5) -> Loss:
    """Tweedie deviance on the log scale for ``1 < power < 2``.

    ``-y exp((1 - power) f) / (1 - power) + exp((2 - power) f) / (2 - power)``.

    Args:
      power: variance power in ``(1, 2)`` (compound Poisson-gamma).
    Returns:
      a declared loss ``loss(y, f)`` with ``y >= 0`` and ``f`` the scalar log
      of the mean; gradient ``-y exp((1 - power) f) + exp((2 - power) f)``.
      Link: exp.
    """
    if not 1 < power < 2:
        raise ValueError(f"tweedie: power must be in (1, 2), got {power!r}")
    power = float(power)

    @declare(
        name="tweedie",
        link="exp",
        params={"power": power},
        target_domain="non_negative",
        convex=True,
        smooth=True,
    )
    def tweedie_loss(y: ArrayLike, f: ArrayLike) -> jax.Array:
        y = jnp.asarray(y)
        mean_to_1mp = jnp.exp((1.0 - power) * f)
        mean_to_2mp = jnp.exp((2.0 - power) * f)
        return -y * mean_to_1mp / (1.0 - power) + mean_to_2mp / (2.0 - power)

    return tweedie_loss


@declare(name="gaussian_nll", link="mean_scale", n_outputs=2, smooth=True)
def gaussian_nll(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Gaussian negative log-likelihood with a learned scale.

    ``log_scale + 0.5 ((y - mean) exp(-log_scale))^2``, dropping ``0.5 log(2 pi)``.

    Args:
      y: target, scalar.
      f: ``(2,)`` raw scores ``(mean, log_scale)``, ``log_scale`` the log of
        the standard deviation.
    Returns:
      scalar loss. Link: mean_scale, ``(mean, exp(log_scale))``.
    """
    f = jnp.asarray(f)
    mean, log_scale = f[..., 0], f[..., 1]
    return log_scale + 0.5 * jnp.square((jnp.asarray(y) - mean) * jnp.exp(-log_scale))

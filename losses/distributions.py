"""Negative log-likelihoods of distributions, up to terms free of the score.

Count and positive-valued targets use a log link (``mean = exp(f)``);
`gaussian_nll` takes two raw scores per row, the mean and the log of the
standard deviation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ._declare import Loss, declare, finite_number, loss_factory


@declare(
    hessian_informative=True,
    name="poisson",
    link="exp",
    target_domain="non_negative",
    convex=True,
    smooth=True,
)
def poisson(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Poisson deviance on the log scale: ``exp(f) - y f``.

    Args:
      y: non-negative count, scalar.
      f: raw score, the log of the mean, scalar.
    Returns:
      scalar loss; gradient ``exp(f) - y``, hessian ``exp(f)``. Link: exp.
    """
    return jnp.exp(f) - jnp.asarray(y) * f


@declare(
    hessian_informative=True,
    name="gamma",
    link="exp",
    target_domain="positive",
    convex=True,
    smooth=True,
)
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
    power = finite_number("tweedie", "power", power)
    if not 1 < power < 2:
        raise ValueError(f"tweedie: power must be in (1, 2), got {power!r}")
    power = float(power)

    @declare(
        hessian_informative=True,
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


def _gaussian_init(y: ArrayLike, weight: ArrayLike) -> jax.Array:
    """``(2,)``: the targets' weighted mean and the log of their weighted
    standard deviation (``y (n,)``, ``weight (n,)``, 0 on padding rows), the
    Gaussian's maximum-likelihood start; targets of no spread start at log
    scale 0 (their likelihood has no maximum: the search then says so)."""
    y, weight = jnp.asarray(y, jnp.float32), jnp.asarray(weight, jnp.float32)
    total = jnp.maximum(jnp.sum(weight), jnp.finfo(jnp.float32).tiny)
    mean = jnp.sum(weight * y) / total
    variance = jnp.sum(weight * jnp.square(y - mean)) / total
    log_scale = 0.5 * jnp.log(jnp.where(variance > 0, variance, 1.0))
    return jnp.stack([mean, log_scale])


def _gaussian_fisher(f: ArrayLike) -> jax.Array:
    """``(2, 2)``: the Fisher information of ``(mean, log_scale)`` at ``f (2,)``,
    ``diag(exp(-2 log_scale), 2)`` (NGBoost's ``Normal`` metric)."""
    log_scale = jnp.asarray(f)[1]
    return jnp.diag(jnp.stack([jnp.exp(-2.0 * log_scale), jnp.asarray(2.0, log_scale.dtype)]))


def _gaussian_sampler(key: jax.Array, f: ArrayLike, n: int) -> jax.Array:
    """``(n,)`` draws from the Gaussian of raw scores ``f (2,)``."""
    f = jnp.asarray(f)
    return f[0] + jnp.exp(f[1]) * jax.random.normal(key, (n,), f.dtype)


@declare(
    hessian_informative=True,
    name="gaussian_nll",
    link="mean_scale",
    n_outputs=2,
    smooth=True,
    init=_gaussian_init,
    fisher=_gaussian_fisher,
    sampler=_gaussian_sampler,
)
def gaussian_nll(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Gaussian negative log-likelihood with a learned scale.

    ``log_scale + 0.5 ((y - mean) exp(-log_scale))^2``, dropping ``0.5 log(2 pi)``.

    Args:
      y: target, scalar.
      f: ``(2,)`` raw scores ``(mean, log_scale)``, ``log_scale`` the log of
        the standard deviation.
    Returns:
      scalar loss. Link: mean_scale, ``(mean, exp(log_scale))``.

    Declares its start (the targets' weighted mean and log standard
    deviation), its Fisher information ``diag(exp(-2 log_scale), 2)`` and a
    sampler, so ``hessian="auto"`` trains it by Fisher scoring (NGBoost's
    natural gradients: Duan et al., 2020, "NGBoost: Natural Gradient Boosting
    for Probabilistic Prediction").
    """
    f = jnp.asarray(f)
    mean, log_scale = f[..., 0], f[..., 1]
    return log_scale + 0.5 * jnp.square((jnp.asarray(y) - mean) * jnp.exp(-log_scale))

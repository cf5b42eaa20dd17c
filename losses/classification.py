"""Classification losses on raw scores (log-odds or per-class logits).

Binary losses take a label ``y`` in ``{0, 1}`` and a scalar log-odds ``f``;
`softmax_cross_entropy` takes an integer class label ``y`` (stored as a
float) and a vector ``f`` of ``K`` logits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ._declare import Loss, declare, finite_number, loss_factory


@declare(
    hessian_informative=True,
    name="binary_logloss",
    link="sigmoid",
    target_domain="probability",
    convex=True,
    smooth=True,
)
def binary_logloss(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Binary cross-entropy on the log-odds: ``softplus(f) - y f``.

    Equals ``-(y log p + (1 - y) log(1 - p))`` with ``p = sigmoid(f)``.

    Args:
      y: label in ``{0, 1}`` (or a probability), scalar.
      f: raw score, the log-odds of ``y = 1``, scalar.
    Returns:
      scalar loss; gradient ``p - y``, hessian ``p (1 - p)``. Link: sigmoid.
    """
    return jax.nn.softplus(f) - jnp.asarray(y) * f


@declare(
    hessian_informative=True,
    name="exponential",
    link="sigmoid2",
    target_domain="binary",
    convex=True,
    smooth=True,
)
def exponential(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Exponential (AdaBoost) loss ``exp(-(2 y - 1) f)``.

    Args:
      y: label in ``{0, 1}``, scalar.
      f: raw score, scalar; it estimates half the log-odds.
    Returns:
      scalar loss. Link: sigmoid2, ``p = sigmoid(2 f)``.
    """
    return jnp.exp(-(2.0 * jnp.asarray(y) - 1.0) * f)


@declare(
    hessian_informative=True,
    name="softmax_cross_entropy",
    link="softmax",
    n_outputs="n_classes",
    target_domain="class",
    convex=True,
    smooth=True,
)
def softmax_cross_entropy(y: ArrayLike, f: ArrayLike) -> jax.Array:
    """Multiclass cross-entropy ``logsumexp(f) - f[y]``.

    Args:
      y: class label in ``{0, ..., K - 1}``, scalar (an integer stored as a float).
      f: ``(K,)`` raw scores (logits), one per class.
    Returns:
      scalar loss; gradient ``p - one_hot(y)``, hessian ``diag(p) - p p^T``
      with ``p = softmax(f)``. Link: softmax.
    """
    f = jnp.asarray(f)
    # A one-hot product rather than f[y], so that the loss is a smooth function of f.
    label = jax.nn.one_hot(jnp.asarray(y).astype(jnp.int32), f.shape[-1], dtype=f.dtype)
    return jax.nn.logsumexp(f, axis=-1) - jnp.sum(label * f, axis=-1)


@loss_factory
def focal(gamma: float = 2.0) -> Loss:
    """Binary focal loss on the log-odds.

    ``-(y (1 - p)^gamma log p + (1 - y) p^gamma log(1 - p))`` with
    ``p = sigmoid(f)``; ``gamma = 0`` gives `binary_logloss`.  The powers
    are taken as ``exp(gamma log_sigmoid(.))`` so the loss stays finite and
    twice differentiable for any log-odds.

    Args:
      gamma: non-negative focusing parameter; larger values down-weight
        well-classified samples.
    Returns:
      a declared loss ``loss(y, f)`` with ``y`` in ``{0, 1}`` and ``f`` the
      scalar log-odds. Link: sigmoid.
    """
    gamma = finite_number("focal", "gamma", gamma)
    if not gamma >= 0:
        raise ValueError(f"focal: gamma must be >= 0, got {gamma!r}")
    gamma = float(gamma)

    @declare(
        hessian_informative=True,
        name="focal",
        link="sigmoid",
        params={"gamma": gamma},
        target_domain="probability",
        smooth=True,
    )
    def focal_loss(y: ArrayLike, f: ArrayLike) -> jax.Array:
        y = jnp.asarray(y)
        log_p = jax.nn.log_sigmoid(f)
        log_1mp = jax.nn.log_sigmoid(-f)
        positive = jnp.exp(gamma * log_1mp) * log_p
        negative = jnp.exp(gamma * log_p) * log_1mp
        return -(y * positive + (1.0 - y) * negative)

    return focal_loss

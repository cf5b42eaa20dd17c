"""Ranking losses on one query group.

Each loss is ``loss(y, f, mask) -> scalar`` on one query whose rows are
padded to ``m``: ``y`` ``(m,)`` relevance labels, ``f`` ``(m,)`` raw scores,
``mask`` ``(m,)`` bool, False on padding rows.  Padding rows never enter the
value, whatever their ``y`` and ``f``, and get gradient and hessian 0; a
query of one real row has loss 0.  The engine sums the loss over queries.
Each loss's ``row_derivatives(y, f, mask)`` gives the gradient and the
hessian's diagonal, ``(m,)`` each, in closed form; the pairwise ones build
``(m, m)`` pair matrices (``[i, j]``: row ``i`` has the higher label).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ._declare import Loss, declare, loss_factory

# LightGBM's lambdarank_truncation_level default: pairs with a row in the top 30
LIGHTGBM_TRUNCATION = 30


def _masked_log_softmax(x: jax.Array, mask: jax.Array) -> jax.Array:
    """``(m,)`` log-softmax of ``x`` over the real rows (0 on padding rows)."""
    top = jax.lax.stop_gradient(jnp.max(jnp.where(mask, x, -jnp.inf)))
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    shifted = jnp.where(mask, x - top, 0.0)
    # + 1 where no row is real, so that an all-padding group gives 0, not -inf
    total = jnp.sum(jnp.where(mask, jnp.exp(shifted), 0.0)) + ~jnp.any(mask)
    return jnp.where(mask, shifted - jnp.log(total), 0.0)


def _listnet_parts(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """Target and predicted top-one probabilities ``(m,)``, 0 on padding."""
    mask = jnp.asarray(mask, bool)
    f = jnp.asarray(f)
    y = jnp.asarray(y, f.dtype)
    target = jnp.where(mask, jnp.exp(_masked_log_softmax(y, mask)), 0.0)
    return target, _masked_log_softmax(f, mask)


def _listnet_derivatives(
    y: ArrayLike, f: ArrayLike, mask: ArrayLike
) -> tuple[jax.Array, jax.Array]:
    """ListNet's gradient ``q - p`` and hessian diagonal ``q (1 - q)``, ``(m,)``."""
    target, log_q = _listnet_parts(y, f, mask)
    q = jnp.where(jnp.asarray(mask, bool), jnp.exp(log_q), 0.0)
    return q - target, q * (1.0 - q)


@declare(
    name="listnet",
    link="identity",
    convex=True,
    smooth=True,
    per="group",
    row_derivatives=_listnet_derivatives,
)
def listnet(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> jax.Array:
    """ListNet: cross-entropy of the top-one probabilities of one query.

    ``-sum_i p_i log q_i`` over the real rows, with ``p = softmax(y)`` (the
    top-one probability of ListNet with ``phi = exp``) and ``q = softmax(f)``,
    both over the real rows.

    Args:
      y: ``(m,)`` relevance labels.
      f: ``(m,)`` raw scores.
      mask: ``(m,)`` bool, False on padding rows.
    Returns:
      scalar loss; gradient ``q - p``, hessian ``diag(q) - q q^T``.
    """
    target, log_q = _listnet_parts(y, f, mask)
    return -jnp.sum(target * log_q)


def _higher_pairs(y: jax.Array, mask: jax.Array) -> jax.Array:
    """``(m, m)`` bool: rows ``i`` and ``j`` real and ``y_i > y_j``."""
    return mask[:, None] & mask[None, :] & (y[:, None] > y[None, :])


def _pair_derivatives(weight: jax.Array, p: jax.Array, sigma: float) -> tuple[jax.Array, jax.Array]:
    """Row gradient and hessian diagonal ``(m,)`` of ``sum weight_ij softplus(-sigma
    (f_i - f_j))``, given ``p = sigmoid(-sigma (f_i - f_j))``, both ``(m, m)``."""
    lam = sigma * weight * p
    curvature = sigma**2 * weight * p * (1.0 - p)
    return lam.sum(axis=0) - lam.sum(axis=1), curvature.sum(axis=0) + curvature.sum(axis=1)


@loss_factory
def ranknet(sigma: float = 1.0) -> Loss:
    """RankNet: pairwise logistic loss of one query.

    ``sum log(1 + exp(-sigma (f_i - f_j)))`` over the pairs of real rows with
    ``y_i > y_j``.

    Args:
      sigma: positive slope of the logistic.
    Returns:
      a declared group loss ``loss(y, f, mask)`` with ``y``, ``f``, ``mask``
      ``(m,)``; its ``row_derivatives`` are exact, in ``O(m^2)``.
    """
    if not sigma > 0:
        raise ValueError(f"ranknet: sigma must be > 0, got {sigma!r}")
    sigma = float(sigma)

    def parts(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array]:
        mask = jnp.asarray(mask, bool)
        f = jnp.where(mask, f, 0.0)  # padding scores, whatever they are, stay out
        return _higher_pairs(jnp.asarray(y), mask).astype(f.dtype), f[:, None] - f[None, :]

    def derivatives(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array]:
        weight, delta = parts(y, f, mask)
        return _pair_derivatives(weight, jax.nn.sigmoid(-sigma * delta), sigma)

    @declare(
        name="ranknet",
        link="identity",
        params={"sigma": sigma},
        convex=True,
        smooth=True,
        per="group",
        row_derivatives=derivatives,
    )
    def ranknet_loss(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> jax.Array:
        weight, delta = parts(y, f, mask)
        return jnp.sum(weight * jax.nn.softplus(-sigma * delta))

    return ranknet_loss


def _rank(x: jax.Array, mask: jax.Array) -> jax.Array:
    """``(m,)`` 0-based rank of each real row by ``x`` descending, ties by
    position (a stable sort), among the real rows."""
    position = jnp.arange(x.shape[0])
    tie_ahead = (x[None, :] == x[:, None]) & (position[None, :] < position[:, None])
    ahead = (x[None, :] > x[:, None]) | tie_ahead  # [i, j]: row j ranks before row i
    return jnp.sum(ahead & mask[None, :], axis=1)


def _lambdarank_pairs(
    y: jax.Array, f: jax.Array, mask: jax.Array, k: int | None, sigma: float, norm: bool
) -> tuple[jax.Array, jax.Array]:
    """LightGBM's pair weights and probabilities, ``(m, m)`` each.

    ``weight[i, j]`` is ``delta_ndcg`` after both of LightGBM's
    normalisations (0 where the pair is not counted), ``p[i, j] =
    sigmoid(-sigma (f_i - f_j))``: the pair's lambda is ``-sigma weight p``.
    """
    top = f.shape[0] if k is None else k
    labels = jnp.where(mask, y, 0.0)
    gain = jnp.where(mask, jnp.exp2(labels) - 1.0, 0.0)
    rank, ideal_rank = _rank(f, mask), _rank(labels, mask)
    max_dcg = jnp.sum(jnp.where(mask & (ideal_rank < top), gain / jnp.log2(2.0 + ideal_rank), 0.0))
    inverse_max_dcg = jnp.where(max_dcg > 0, 1.0 / jnp.where(max_dcg > 0, max_dcg, 1.0), 0.0)
    discount = 1.0 / jnp.log2(2.0 + rank)
    counted = _higher_pairs(labels, mask) & (jnp.minimum(rank[:, None], rank[None, :]) < top)
    delta = f[:, None] - f[None, :]
    weight = (
        (gain[:, None] - gain[None, :])
        * jnp.abs(discount[:, None] - discount[None, :])
        * inverse_max_dcg
    )
    if norm:  # LightGBM skips this in a query whose scores are all equal
        spread = jnp.max(jnp.where(mask, f, -jnp.inf)) != jnp.min(jnp.where(mask, f, jnp.inf))
        weight = jnp.where(spread, weight / (0.01 + jnp.abs(delta)), weight)
    weight = jnp.where(counted, weight, 0.0)
    p = jax.nn.sigmoid(-sigma * delta)
    if norm:
        sum_lambdas = jnp.sum(2.0 * sigma * weight * p)
        safe = jnp.where(sum_lambdas > 0, sum_lambdas, 1.0)
        weight = weight * jnp.where(sum_lambdas > 0, jnp.log2(1.0 + safe) / safe, 1.0)
    return weight, p


@loss_factory
def lambdarank(k: int | None = LIGHTGBM_TRUNCATION, sigma: float = 1.0, norm: bool = True) -> Loss:
    """LambdaRank for NDCG@k, with LightGBM's gradients and hessians.

    Real rows are ranked by ``f`` descending (ties by position).  A pair of
    real rows with labels ``y_i > y_j``, one of them in the top ``k``, gets
    the weight ``w_ij = (gain_i - gain_j) |D(rank_i) - D(rank_j)| /
    maxDCG@k``, with ``gain = 2^y - 1`` and ``D(r) = 1 / log2(2 + r)``; with
    ``norm``, divided by ``0.01 + |f_i - f_j|`` (unless all real scores are
    equal) and all scaled by ``log2(1 + L) / L``, ``L`` the sum over pairs of
    ``2 sigma w_ij p_ij``, ``p_ij = sigmoid(-sigma (f_i - f_j))``.  The loss
    is the surrogate ``sum w_ij log(1 + exp(-sigma (f_i - f_j)))`` with the
    weights held fixed (``stop_gradient``): its gradient and hessian diagonal,
    and ``row_derivatives``, are those of LightGBM's ``lambdarank`` objective
    (``GetGradientsForOneQuery``; LightGBM reads ``p`` off a table, about
    3e-5 apart).  A query whose labels are all 0 gives 0.

    Args:
      k: truncation level, a positive int, LightGBM's
        ``lambdarank_truncation_level`` (default 30, as LightGBM's); None
        counts every pair and the whole query's max DCG.
      sigma: positive slope of the logistic, LightGBM's ``sigmoid``.
      norm: LightGBM's ``lambdarank_norm``.
    Returns:
      a declared group loss ``loss(y, f, mask)`` with ``y`` ``(m,)`` relevance
      grades (small non-negative integers), ``f`` and ``mask`` ``(m,)``.
    """
    if k is not None and (isinstance(k, bool) or int(k) != k or k < 1):
        raise ValueError(f"lambdarank: k must be a positive int or None, got {k!r}")
    if not sigma > 0:
        raise ValueError(f"lambdarank: sigma must be > 0, got {sigma!r}")
    k = None if k is None else int(k)
    sigma, norm = float(sigma), bool(norm)

    def pairs(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array]:
        mask = jnp.asarray(mask, bool)
        f = jnp.where(mask, f, 0.0)  # padding scores, whatever they are, stay out
        return _lambdarank_pairs(jnp.asarray(y, f.dtype), f, mask, k, sigma, norm)

    def derivatives(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array]:
        return _pair_derivatives(*pairs(y, f, mask), sigma)

    # convex: the surrogate is, for its fixed weights, and the hessian is >= 0
    @declare(
        name="lambdarank",
        link="identity",
        params={"k": k, "sigma": sigma, "norm": norm},
        target_domain="class",  # whole grades >= 0, as LightGBM requires
        convex=True,
        smooth=True,
        per="group",
        row_derivatives=derivatives,
    )
    def lambdarank_loss(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> jax.Array:
        weight, _ = pairs(y, jax.lax.stop_gradient(f), mask)
        f = jnp.where(jnp.asarray(mask, bool), f, 0.0)
        delta = f[:, None] - f[None, :]
        return jnp.sum(jax.lax.stop_gradient(weight) * jax.nn.softplus(-sigma * delta))

    return lambdarank_loss

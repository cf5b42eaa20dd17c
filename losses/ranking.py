"""Ranking losses on one query group.

Each loss is ``loss(y, f, mask) -> scalar`` on one query whose rows are
padded to ``m``: ``y`` ``(m,)`` relevance labels, ``f`` ``(m,)`` raw scores,
``mask`` ``(m,)`` bool, False on padding rows.  Padding rows never enter the
value, whatever their ``y`` and ``f``, and get gradient and hessian 0; a
query of one real row has loss 0.  The engine sums the loss over queries.
Each loss's ``row_derivatives(y, f, mask)`` gives the gradient and the
hessian's diagonal, ``(m,)`` each, in closed form; RankNet builds ``(m, m)``
pair matrices (``[i, j]``: row ``i`` has the higher label), LambdaRank
``(k, m)`` ones (the top ``k`` rows against all).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ._declare import Loss, declare, finite_number, loss_factory

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
    hessian_informative=True,
    name="listnet",
    link="identity",
    target_domain="relevance",
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
    sigma = finite_number("ranknet", "sigma", sigma)
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
        hessian_informative=True,
        name="ranknet",
        link="identity",
        params={"sigma": sigma},
        target_domain="relevance",
        convex=True,
        smooth=True,
        per="group",
        row_derivatives=derivatives,
    )
    def ranknet_loss(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> jax.Array:
        weight, delta = parts(y, f, mask)
        return jnp.sum(weight * jax.nn.softplus(-sigma * delta))

    return ranknet_loss


class _TopPairs(NamedTuple):
    """LambdaRank's pairs of one query: the row at each of the top ``kk``
    positions paired with every row ranked after it, ``(kk, m)``; or, for a
    query ranked by comparison, every row paired with every row (``top``
    None: row ``i`` at index ``i``), ``(m, m)``."""

    top: jax.Array | None  # (kk,) int32: the row at each top position; None: every row
    weight: jax.Array  # (kk, m): delta NDCG after LightGBM's normalisations, 0 if not counted
    p: jax.Array  # (kk, m): sigmoid(-sigma (f_high - f_low))
    sign: jax.Array  # (kk, m): +1 where the top row has the higher label, else -1


# queries at most this wide are ranked by comparing every pair of rows (m^2
# comparisons, no sort and no scatter: the fastest on CPU at LightGBM's query
# sizes, benchmarks/README.md), wider ones by a sort (m log m)
COMPARED_WIDTH = 128


def descending_positions(key: jax.Array) -> jax.Array:
    """``(m,) int32``: each row's position when the rows are sorted by ``key``
    descending, ties in row order (a stable sort's): the rows of a greater
    key plus the rows of an equal key before it.  ``O(m^2)``, no sort."""
    m = key.shape[0]
    row = jnp.arange(m)
    before = (key[None, :] > key[:, None]) | (
        (key[None, :] == key[:, None]) & (row[None, :] < row[:, None])
    )
    return jnp.sum(before, axis=1, dtype=jnp.int32)


def _discount(position: jax.Array, dtype) -> jax.Array:
    """``1 / log2(2 + position)``, NDCG's discount at each (0-based) position."""
    return 1.0 / jnp.log2(2.0 + position.astype(dtype))


def _lambdarank_pairs(
    y: jax.Array, f: jax.Array, mask: jax.Array, k: int | None, sigma: float, norm: bool
) -> _TopPairs:
    """LightGBM's pairs (``GetGradientsForOneQuery``): real rows ranked by
    ``f`` descending (a stable sort: ties by position), every pair of
    different labels with one row in the top ``k`` counted once, as the
    higher-ranked row's.  ``O(k m)`` memory and time plus a sort, or, up to
    `COMPARED_WIDTH` rows (or with ``k`` None), ``O(m^2)`` by comparison."""
    m = f.shape[0]
    kk = m if k is None else min(k, m)
    labels = jnp.where(mask, y, 0.0)
    gain = jnp.where(mask, jnp.exp2(labels) - 1.0, 0.0)
    key = jnp.where(mask, f, -jnp.inf)  # padding last
    if k is None or m <= COMPARED_WIDTH:
        position = descending_positions(key)
        # the ideal order: gains descending (padding's are 0, never counted)
        ideal = descending_positions(gain)
        max_dcg = jnp.sum(jnp.where(ideal < kk, gain * _discount(ideal, f.dtype), 0.0))
        top = None
        high = position  # the position of each pair's first row
        high_f, high_label, high_gain, high_mask = f, labels, gain, mask
    else:
        order = jnp.argsort(-key, stable=True)
        position = jnp.zeros(m, jnp.int32).at[order].set(jnp.arange(m, dtype=jnp.int32))
        ideal_gain = -jnp.sort(-gain)[:kk]
        max_dcg = jnp.sum(ideal_gain * _discount(jnp.arange(kk), f.dtype))
        top = order[:kk].astype(jnp.int32)
        high = jnp.arange(kk, dtype=jnp.int32)
        high_f, high_label, high_gain, high_mask = f[top], labels[top], gain[top], mask[top]
    inverse_max_dcg = jnp.where(max_dcg > 0, 1.0 / jnp.where(max_dcg > 0, max_dcg, 1.0), 0.0)
    high_label, high_gain = high_label[:, None], high_gain[:, None]
    later = (position[None, :] > high[:, None]) & (high < kk)[:, None]
    counted = later & high_mask[:, None] & mask[None, :] & (high_label != labels[None, :])
    sign = jnp.where(high_label > labels[None, :], 1.0, -1.0)
    delta = (high_f[:, None] - f[None, :]) * sign  # f_high - f_low
    weight = (
        jnp.abs(high_gain - gain[None, :])
        * jnp.abs(_discount(high, f.dtype)[:, None] - _discount(position, f.dtype)[None, :])
        * inverse_max_dcg
    )
    if norm:  # LightGBM skips this in a query whose scores are all equal
        spread = jnp.max(key) != jnp.min(jnp.where(mask, f, jnp.inf))
        weight = jnp.where(spread, weight / (0.01 + jnp.abs(delta)), weight)
    weight = jnp.where(counted, weight, 0.0)
    p = jax.nn.sigmoid(-sigma * delta)
    if norm:
        sum_lambdas = jnp.sum(2.0 * sigma * weight * p)
        safe = jnp.where(sum_lambdas > 0, sum_lambdas, 1.0)
        weight = weight * jnp.where(sum_lambdas > 0, jnp.log2(1.0 + safe) / safe, 1.0)
    return _TopPairs(top, weight, p, sign)


def _by_first_row(values: jax.Array, top: jax.Array | None) -> jax.Array:
    """``(m,)``: ``values (kk, m)`` summed over each pair's second row, at its
    first row (``top``'s, or row ``i`` for ``top`` None)."""
    if top is None:
        return values.sum(axis=1)
    return jnp.zeros(values.shape[1], values.dtype).at[top].add(values.sum(axis=1))


def _top_pair_derivatives(pairs: _TopPairs, sigma: float) -> tuple[jax.Array, jax.Array]:
    """Row gradient and hessian diagonal ``(m,)``: each pair's lambda
    ``sigma w p`` lowers the higher row's gradient and raises the lower's."""
    lam = sigma * pairs.weight * pairs.p * pairs.sign  # + where the top row is the higher
    curvature = sigma**2 * pairs.weight * pairs.p * (1.0 - pairs.p)
    grad = lam.sum(axis=0) - _by_first_row(lam, pairs.top)
    hess = curvature.sum(axis=0) + _by_first_row(curvature, pairs.top)
    return grad, hess


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

    def pairs(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> _TopPairs:
        mask = jnp.asarray(mask, bool)
        f = jnp.where(mask, f, 0.0)  # padding scores, whatever they are, stay out
        return _lambdarank_pairs(jnp.asarray(y, f.dtype), f, mask, k, sigma, norm)

    def derivatives(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array]:
        return _top_pair_derivatives(pairs(y, f, mask), sigma)

    # convex: the surrogate is, for its fixed weights, and the hessian is >= 0
    @declare(
        hessian_informative=True,
        name="lambdarank",
        link="identity",
        params={"k": k, "sigma": sigma, "norm": norm},
        target_domain="grade",  # whole grades 0 to 30, as LightGBM's default label_gain
        convex=True,
        smooth=True,
        per="group",
        row_derivatives=derivatives,
    )
    def lambdarank_loss(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> jax.Array:
        fixed = pairs(y, jax.lax.stop_gradient(f), mask)
        f = jnp.where(jnp.asarray(mask, bool), f, 0.0)
        high = f if fixed.top is None else f[fixed.top]
        delta = (high[:, None] - f[None, :]) * fixed.sign  # f_high - f_low
        return jnp.sum(jax.lax.stop_gradient(fixed.weight) * jax.nn.softplus(-sigma * delta))

    return lambdarank_loss

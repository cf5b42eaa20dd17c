"""Survival losses on one stratum.

A loss is ``loss(y, f, mask) -> scalar`` on one stratum whose rows are padded
to ``m``: ``y`` ``(m, 2)``, each row ``(time, event)`` with ``time > 0`` and
``event`` 1 for an observed event, 0 for a censored row; ``f`` ``(m,)`` the
log hazard ratio; ``mask`` ``(m,)`` bool, False on padding rows, which never
enter the value and get gradient and hessian 0.  The engine sums the loss
over strata.

Rows are taken in time order (padding last), a risk set ``{j : t_j >= t_i}``
being a suffix of that order from its tie block's first row, so tied times
are in each other's risk sets (Breslow).  A stratum already in time order
(as the engine gives them: ``row_order``) is not sorted again, so that a
round costs ``O(m)``; any other is sorted, ``O(m log m)``.

The gradient and hessian (``row_derivatives``) sum the risk sets in float64,
shifted by the largest score: exact for scores spread by up to about 700.
The loss's value sums them in float32 (JAX differentiates it, and its
derivatives must stay float32), with each score raised to at least the
largest minus 40: a risk set whose every score lies more than 40 below the
largest (a hazard ratio of 4e-18) is taken at that floor.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from ._declare import declare

# the loss's value takes scores at least this far below the largest: its
# second derivatives divide by risk-set sums squared, which float32 holds down
# to about exp(-43)
_VALUE_FLOOR = -40.0


class _Order(NamedTuple):
    """A stratum's time order (padding last): integer tables, no scores."""

    order: jax.Array  # (m,) int32: sorted position -> row
    block_start: jax.Array  # (m,) int32: the first position of the row's tie block
    block_end: jax.Array  # (m,) int32: its last position


def _time_order(time: jax.Array) -> _Order:
    """`_Order` of the times ``(m,)`` (``+inf`` on padding); a sort only
    where they are not in order already."""
    m = time.shape[0]
    positions = jnp.arange(m, dtype=jnp.int32)
    in_order = jnp.all(time[1:] >= time[:-1])
    order = lax.cond(
        in_order, lambda: positions, lambda: jnp.argsort(time, stable=True).astype(jnp.int32)
    )
    time = time[order]
    changes = time[1:] != time[:-1]
    first = jnp.concatenate([jnp.ones(1, bool), changes])
    last = jnp.concatenate([changes, jnp.ones(1, bool)])
    block_start = lax.cummax(jnp.where(first, positions, 0))
    block_end = lax.cummin(jnp.where(last, positions, m - 1), reverse=True)
    return _Order(order, block_start, block_end)


def _stratum(y: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array, _Order]:
    """``(mask, event (m,) in the rows' order, 0 on padding, time order)``."""
    mask = jnp.asarray(mask, bool)
    y = jnp.asarray(y)
    time = jnp.where(mask, y[:, 0], jnp.inf)
    event = jnp.where(mask, y[:, 1], 0.0)
    return mask, event, _time_order(time)


def _cox_derivatives(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """Cox's gradient and hessian diagonal, ``(m,)`` each, ``O(m)`` on rows in
    time order (float64 sums; not differentiated).

    ``g_k = -event_k + exp(f_k) A_k`` and ``h_k = exp(f_k) A_k - exp(2 f_k)
    B_k``, with ``A_k = sum 1 / S_i`` and ``B_k = sum 1 / S_i^2`` over the
    events ``i`` with ``t_i <= t_k``.
    """
    dtype = jnp.result_type(f)
    mask, event, time_order = _stratum(y, mask)
    with jax.enable_x64(True):
        f = jnp.asarray(f, jnp.float64)
        top = jnp.max(jnp.where(mask, f, -jnp.inf))
        order = time_order.order
        scale = jnp.where(mask, jnp.exp(f - top), 0.0)[order]  # exp(f - max f), sorted
        is_event = (event > 0)[order]
        sorted_event = event.astype(jnp.float64)[order]
        risk = jnp.cumsum(scale[::-1])[::-1][time_order.block_start]
        safe_risk = jnp.where(is_event, risk, 1.0)
        inverse = jnp.where(is_event, sorted_event / safe_risk, 0.0)
        first = scale * jnp.cumsum(inverse)[time_order.block_end]
        second = scale * scale * jnp.cumsum(inverse / safe_risk)[time_order.block_end]
        grad = jnp.zeros_like(first).at[order].set(first - sorted_event)
        hess = jnp.zeros_like(first).at[order].set(first - second)
        return (
            jnp.where(mask, grad, 0.0).astype(dtype),
            jnp.where(mask, hess, 0.0).astype(dtype),
        )


def _time_of(y: np.ndarray) -> np.ndarray:
    """The rows' times: the engine gives each stratum's rows in this order."""
    return np.asarray(y)[:, 0]


@declare(
    hessian_informative=True,
    name="cox",
    link="identity",
    target_domain="time_event",
    convex=True,
    smooth=True,
    per="group",
    row_derivatives=_cox_derivatives,
    row_order=_time_of,
)
def cox(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> jax.Array:
    """Cox proportional hazards: negative Breslow partial log-likelihood.

    ``-sum_{i event} (f_i - log S_i)`` over the real rows, with ``S_i = sum
    exp(f_j)`` over the real rows with ``t_j >= t_i`` (ties included).

    Args:
      y: ``(m, 2)``, each row ``(time, event)``: ``time > 0``, ``event`` 1 if
        the event was observed, 0 if censored.
      f: ``(m,)`` raw scores, the log hazard ratios.
      mask: ``(m,)`` bool, False on padding rows.
    Returns:
      scalar loss; a stratum of one real row gives 0.
    """
    mask, event, time_order = _stratum(y, mask)
    f = jnp.asarray(f)
    top = lax.stop_gradient(jnp.max(jnp.where(mask, f, -jnp.inf)))  # (any shift will do)
    shifted = jnp.maximum(jnp.where(mask, f, top) - top, _VALUE_FLOOR)[time_order.order]
    scale = jnp.where(mask[time_order.order], jnp.exp(shifted), 0.0)
    risk = jnp.cumsum(scale[::-1])[::-1]  # 0 from the first padding row on
    log_risk = jnp.log(jnp.where(risk > 0, risk, 1.0))[time_order.block_start]
    is_event = (event > 0)[time_order.order]
    terms = event[time_order.order] * (shifted - jnp.where(is_event, log_risk, 0.0))
    return -jnp.sum(jnp.where(is_event, terms, 0.0))

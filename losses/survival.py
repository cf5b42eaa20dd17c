"""Survival losses on one stratum.

A loss is ``loss(y, f, mask) -> scalar`` on one stratum whose rows are padded
to ``m``: ``y`` ``(m, 2)``, each row ``(time, event)`` with ``time > 0`` and
``event`` 1 for an observed event, 0 for a censored row; ``f`` ``(m,)`` the
log hazard ratio; ``mask`` ``(m,)`` bool, False on padding rows, which never
enter the value and get gradient and hessian 0.  The engine sums the loss
over strata.  Rows are sorted by time once, ``O(m log m)``; a risk set
``{j : t_j >= t_i}`` is a suffix of that order, taken from its tie block's
first row, so tied times are in each other's risk sets (Breslow).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from ._declare import declare


def _sorted_stratum(
    y: ArrayLike, f: ArrayLike, mask: ArrayLike
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """The stratum sorted by time, padding rows first.

    Returns ``order`` (``(m,)``, sorted position -> row), then in sorted
    order: ``f`` (0 on padding), ``event`` (0 on padding), the log of each
    row's risk-set sum ``log S = log sum_{t_j >= t_i} exp(f_j)`` and the
    sorted times (padding ``-inf``), all ``(m,)``.
    """
    mask = jnp.asarray(mask, bool)
    f = jnp.where(mask, f, 0.0)
    y = jnp.asarray(y, f.dtype)
    # padding sorts first: no real row's risk set (a suffix) reaches it
    time = jnp.where(mask, y[:, 0], -jnp.inf)
    order = jnp.argsort(time, stable=True)
    time, f_sorted = time[order], f[order]
    event = jnp.where(mask, y[:, 1], 0.0)[order]
    # log-space suffix sums: no overflow, and no underflow of S where every
    # score in a risk set lies far below the stratum's largest
    log_suffix = jax.lax.cumlogsumexp(f_sorted, reverse=True)
    block_start = jnp.searchsorted(time, time, side="left")
    return order, f_sorted, event, log_suffix[block_start], time


def _cox_derivatives(y: ArrayLike, f: ArrayLike, mask: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """Cox's gradient and hessian diagonal, ``(m,)`` each, in ``O(m log m)``.

    ``g_k = -event_k + exp(f_k) A_k`` and ``h_k = exp(f_k) A_k - exp(2 f_k)
    B_k``, with ``A_k = sum 1 / S_i`` and ``B_k = sum 1 / S_i^2`` over the
    events ``i`` with ``t_i <= t_k``.  ``A`` and ``B`` are cumulative
    log-sum-exps, so ``exp(f_k) A_k`` (at most the number of events, as
    ``exp(f_k) <= S_i``) never overflows.
    """
    order, f_sorted, event, log_risk, time = _sorted_stratum(y, f, mask)
    is_event = event > 0
    log_a = jax.lax.cumlogsumexp(jnp.where(is_event, -log_risk, -jnp.inf))
    log_b = jax.lax.cumlogsumexp(jnp.where(is_event, -2.0 * log_risk, -jnp.inf))
    block_end = jnp.searchsorted(time, time, side="right") - 1
    first = jnp.exp(f_sorted + log_a[block_end])
    grad = -event + first
    hess = first - jnp.exp(2.0 * f_sorted + log_b[block_end])
    real = jnp.asarray(mask, bool)
    grad = jnp.zeros_like(grad).at[order].set(grad)
    hess = jnp.zeros_like(hess).at[order].set(hess)
    return jnp.where(real, grad, 0.0), jnp.where(real, hess, 0.0)


@declare(
    name="cox",
    link="identity",
    convex=True,
    smooth=True,
    per="group",
    row_derivatives=_cox_derivatives,
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
    _, f_sorted, event, log_risk, _ = _sorted_stratum(y, f, mask)
    return -jnp.sum(event * (f_sorted - log_risk))

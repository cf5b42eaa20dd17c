"""The initial score ``F0 = argmin_c sum_i w_i loss(y_i, c)``, for any loss.

A jitted minimisation, not a closed form per loss: one output uses the same
safeguarded scalar minimiser as line-search leaves (so absolute and pinball
losses get the exact weighted median / quantile); vector outputs take Newton
directions (full hessian, pseudo-inverse) each followed by a line search.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .derivatives import Loss, grad_hess
from .leaf_sums import LEAF_KERNELS, LeafKernels
from .leaves import line_search_leaf_values, newton_leaf_values

_MAX_NEWTON_ROUNDS = 30
_STEP_TOLERANCE = 1e-6


def initial_score(
    loss: Loss,
    y: jax.Array,
    weight: jax.Array,
    n_outputs: int,
    axis_name: str | None = None,
    kernels: LeafKernels = LEAF_KERNELS["reference"],
) -> jax.Array:
    """The constant raw score that minimises the weighted training loss.

    Args:
      y: ``(n_rows,)`` or ``(n_rows, n_targets)`` targets (one shard).
      weight: ``(n_rows,)`` sample weights, 0 for padding rows.
      kernels: the line search's (:data:`jaxboost.leaf_sums.LEAF_KERNELS`).
    Returns:
      ``(n_outputs,)`` float32.
    """
    n_rows = weight.shape[0]
    all_in_one_leaf = jnp.zeros(n_rows, jnp.int32)
    zeros = jnp.zeros((n_rows, n_outputs), jnp.float32)
    if n_outputs == 1:
        direction = jnp.ones((1, 1), jnp.float32)
        return line_search_leaf_values(
            loss, y, zeros, weight, all_in_one_leaf, direction, axis_name, kernels
        )[0]

    def not_converged(state):
        score, step_norm, rounds = state
        big_step = step_norm > _STEP_TOLERANCE * (1.0 + jnp.linalg.norm(score))
        return big_step & (rounds < _MAX_NEWTON_ROUNDS)

    def newton_round(state):
        score, _, rounds = state
        raw = zeros + score
        grad, hess = grad_hess(loss, y, raw, full_hessian=True)
        grad, hess = grad * weight[:, None], hess * weight[:, None, None]
        direction = newton_leaf_values(grad, hess, all_in_one_leaf, 1, 0.0, axis_name)
        step = line_search_leaf_values(
            loss, y, raw, weight, all_in_one_leaf, direction, axis_name, kernels
        )
        return score + step[0], jnp.linalg.norm(step), rounds + 1

    start = (jnp.zeros(n_outputs, jnp.float32), jnp.float32(jnp.inf), 0)
    score, _, _ = lax.while_loop(not_converged, newton_round, start)
    return score

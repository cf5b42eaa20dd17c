"""A round's leaf values from its tree's leaf sums: Newton steps (diagonal,
full or Fisher hessians, with Armijo's safeguard and a line search for
leaves without a Newton step), a line search per leaf, or joint Newton
leaves; called inside the training programs (`jaxboost.engine.training`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax

from ..kernels.leaf_sums import LEAF_KERNELS
from .derivatives import sample_loss
from .groups import loss_sum
from .joint_newton import leaf_hessian, solve_joint
from .leaves import LeafTotals, solve_newton
from .line_search import line_search_leaf_values

if TYPE_CHECKING:  # (the training module imports this one)
    from .training import NumericSettings, StaticSettings


def leaf_values(
    cfg, hyper, data, raw, totals, leaf_of_row, output_mask, axis_name, information=None
):
    """``((2^D, K) leaf values, n_stuck)``: the values (learning rate not
    applied) from the leaves' ``totals`` (`jaxboost.engine.leaves.LeafTotals`
    of the masked outputs), and the number of leaves left at 0 for want of a
    line search (only in a loss-free program, ``cfg.loss`` None, or one
    without ``cfg.searches_stuck_leaves``: Newton leaves whose regularised
    hessian is not positive; else 0).

    ``output_mask`` ``(K,)`` restricts the tree to some outputs (one tree per
    output) or is all ones; ``information`` ``(K,)`` or None as in
    `_newton_values`.
    """
    newton = _newton_values(totals, hyper.reg_lambda, information)
    grad_sum = totals.grad
    if cfg.n_outputs == 1 or cfg.multi_strategy == "one_output_per_tree":
        direction = jnp.broadcast_to(output_mask, newton.shape)
    else:
        # search along the Newton direction, or the negative gradient where the
        # hessian carries no information
        has_newton = jnp.any(newton != 0, axis=1, keepdims=True)
        grad_norm = jnp.linalg.norm(grad_sum, axis=1, keepdims=True)
        direction = jnp.where(has_newton, newton, -grad_sum / jnp.maximum(grad_norm, 1e-30))

    def line_search() -> jax.Array:
        return line_search_leaf_values(
            cfg.loss,
            data.y,
            raw,
            data.weight,
            leaf_of_row,
            direction,
            axis_name,
            LEAF_KERNELS[cfg.leaf_kernels],
            leaf_weight=totals.weight,
            score_sum=totals.score,
            narrow=_narrows(cfg),
            start=_derivatives_along(totals, direction),
            reg_lambda=_line_search_penalty(cfg, hyper),
        )

    none_stuck = jnp.int32(0)
    if cfg.leaf_method == "line_search":
        return line_search(), none_stuck
    if cfg.leaf_method == "joint_newton":
        return _joint_newton(cfg, hyper, data, raw, totals, leaf_of_row, axis_name), none_stuck
    if cfg.grouped:  # (no line search: a group loss's leaves are not separable)
        return newton, none_stuck
    # Newton leaves: a leaf whose regularised hessian is not positive has no
    # Newton step; it falls back to a line search instead of staying at 0 (the
    # search runs only in rounds where such a leaf exists).
    stuck = jnp.all(newton == 0, axis=1) & jnp.any(grad_sum != 0, axis=1)
    if cfg.loss is None or not cfg.searches_stuck_leaves:  # its caller runs such rounds again
        return newton, jnp.sum(stuck.astype(jnp.int32))
    values = lax.cond(
        jnp.any(stuck),
        lambda: jnp.where(stuck[:, None], line_search(), newton),
        lambda: newton,
    )
    return values, none_stuck


def _newton_values(
    totals: LeafTotals, reg_lambda: jax.Array, information: jax.Array | None
) -> jax.Array:
    """``(n_leaves, K)`` Newton leaf values ``-(H + lambda D)^-1 G`` from the
    leaves' sums, ``D = diag(information (K,))`` (the identity where None),
    solved in units where ``D`` is the identity: outputs whose information
    per row differs by orders of magnitude (a Gaussian's mean on targets of
    sd 1000 beside its log scale) are then alike to the eigenvalue cutoff of
    `jaxboost.engine.leaves.solve_newton`, which would drop the smaller."""
    if information is None:
        return solve_newton(totals.grad, totals.hess, reg_lambda)
    root = jnp.sqrt(information)
    if totals.hess.ndim == 3:
        hess = totals.hess / (root[:, None] * root[None, :])
    else:
        hess = totals.hess / information
    return solve_newton(totals.grad / root, hess, reg_lambda) / root


def _joint_newton(cfg, hyper, data, raw, totals, leaf_of_row, axis_name) -> jax.Array:
    """``(2^D, 1)`` leaf values by one Newton step on all leaves at once
    (`jaxboost.engine.joint_newton`), for one output."""
    if cfg.grouped:

        def objective(f):
            return loss_sum(cfg.loss, data.y, f[:, None], data.groups)
    else:

        def objective(f):
            return jnp.sum(data.weight * sample_loss(cfg.loss, data.y, f[:, None]))

    n_leaves = totals.grad.shape[0]
    hessian = leaf_hessian(objective, raw[:, 0], data.weight > 0, leaf_of_row, n_leaves, axis_name)
    return solve_joint(hessian, totals.grad[:, 0], hyper.reg_lambda)[:, None]


def _narrows(cfg: StaticSettings) -> bool:
    """Whether a line search narrows to the rows whose slope still changes
    (`jaxboost.engine.line_search.line_search_leaf_values`): for a loss
    without curvature on a fit of many rows.  On a small fit
    (``cfg.fast_compile``) its passes over the rows cost little, and the
    narrowed search is about a fifth of the training program's compile."""
    return cfg.narrow_line_search and not cfg.fast_compile


def _line_search_penalty(cfg: StaticSettings, hyper: NumericSettings) -> jax.Array | float:
    """The L2 penalty line-search leaves add to their leaf's loss.

    ``reg_lambda`` for a loss with curvature, as its Newton leaves have it: the
    search then finds what Newton steps on the penalised loss converge to, and
    a leaf whose loss falls without bound (log loss, exponential or Poisson on
    a leaf of one class or of zeros) gets a finite value.  0 for a loss
    without curvature (absolute, pinball): its leaves are the exact weighted
    median or quantile, as XGBoost's and LightGBM's are.
    """
    return 0.0 if cfg.narrow_line_search else hyper.reg_lambda


def _derivatives_along(totals: LeafTotals, direction: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Every leaf's first and second derivative along its ``direction``
    ``(n_leaves, K)`` from its gradient and hessian sums: two ``(n_leaves,)``
    (a diagonal hessian counts as the full one)."""
    slope = jnp.sum(totals.grad * direction, axis=1)
    if totals.hess.ndim == 3:
        return slope, jnp.einsum("lk,lkj,lj->l", direction, totals.hess, direction)
    return slope, jnp.sum(totals.hess * jnp.square(direction), axis=1)


def diagonal_hessian(hess_diag: jax.Array, full: bool) -> jax.Array:
    """``(n_leaves, K)`` diagonal hessian sums, as ``(n_leaves, K, K)`` (0 off
    the diagonal) where the hessian is ``full``."""
    if not full:
        return hess_diag
    return hess_diag[:, :, None] * jnp.eye(hess_diag.shape[1], dtype=hess_diag.dtype)

"""The gradient and hessian training grows its trees from, for a loss at
given scores: what a user compares with a loss's closed-form derivatives.

It runs a round's own steps (`jaxboost.engine.derivatives.grad_hess`,
or `jaxboost.engine.groups.group_grad_hess` for a group loss, then
`jaxboost.engine.training.tree_statistics`) in one program, with the
float64 retry of ``loss_dtype="auto"``.  It lives among the front ends, not
in ``jaxboost.losses``: the engine imports the catalogue, so the catalogue
cannot import the engine.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ... import losses as loss_catalogue
from ...engine.derivatives import grad_hess
from ...engine.fisher import fisher_grad_hess
from ...engine.groups import group_grad_hess
from ...engine.round_checks import float64_message
from ...engine.round_losses import count_not_finite
from ...engine.training import HESSIAN_MODES, HESSIANS, tree_statistics
from ...runtime.precision import LOSS_DTYPES, in_float32, loss_in
from ...runtime.user_warning import warn
from ..data.grouping import fit_groups, place_groups
from ..data.validation import as_targets, as_weights
from ..settings.checks import choice, finite_number
from .loss_checks import check_group_loss, check_loss, check_target_domain


@in_float32
def derivatives(
    loss: Any,
    y: Any,
    f: Any,
    *,
    sample_weight: Any = None,
    hessian: str = "diag",
    hessian_mode: str = "raw",
    hessian_floor: float = 0.0,
    loss_dtype: str = "auto",
    group: Any = None,
    qid: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every row's gradient and hessian of ``loss`` at the raw scores ``f``,
    as a boosting round computes them before growing its trees.

    That is: ``jax.grad`` of the loss in ``f``, except at a kink (``|y - f|``
    at ``f = y``), where it is the middle of the subdifferential; the hessian
    (its diagonal, or the full matrix with ``hessian="full"``), raised as
    ``hessian_mode`` says; both times ``sample_weight``.  With
    ``loss_dtype="auto"``, scores where some row's derivatives are not
    finite in float32 are differentiated in float64, as training does (and
    says so in a warning); rows not finite either way stay NaN or infinite,
    where training would stop.

    Args:
      loss: a catalogue name, a declared loss, an optax function or any
        ``loss(y, f)``, as ``Booster(loss=...)`` takes it; a group loss
        ``loss(y, f, mask)`` takes its groups from ``group`` or ``qid``
        (default: all rows one group).
      y: ``(n_rows,)`` or ``(n_rows, n_targets)`` targets.
      f: ``(n_rows,)`` raw scores of a loss of one output, or
        ``(n_rows, n_outputs)``.
      sample_weight: ``(n_rows,)`` non-negative weights (default ones).
      hessian: ``"diag"``, ``"full"`` or ``"fisher"`` (the Fisher
        information, full: `jaxboost.engine.fisher`), as the Booster's (a
        group loss's hessian is its diagonal).
      hessian_mode: ``"raw"``, ``"clip"`` or ``"abs"``, as the Booster's.
      hessian_floor: the floor of ``hessian_mode``.
      loss_dtype: ``"auto"``, ``"float32"`` or ``"float64"``, as the Booster's.
      group: a group loss's group sizes, in row order, as ``Booster.fit`` takes them.
      qid: a group loss's group id per row (instead of ``group``).
    Returns:
      ``(grad, hess)`` float32 numpy arrays, ``grad`` of the shape of ``f``
      and ``hess`` too, or ``(n_rows, n_outputs, n_outputs)`` for a 2-D ``f``
      with ``hessian="full"`` or ``"fisher"``.
    """
    scores, one_dimensional = _as_scores(f)
    n_rows, n_outputs = scores.shape
    targets = as_targets(y, n_rows)
    weight = as_weights(sample_weight, n_rows)
    setting = choice("hessian", hessian, HESSIANS)
    full = setting == "full"
    choice("hessian_mode", hessian_mode, HESSIAN_MODES)
    floor = finite_number("hessian_floor", hessian_floor)
    choice("loss_dtype", loss_dtype, LOSS_DTYPES)
    given_weight = None if sample_weight is None else weight
    loss, groups = _checked_loss(loss, targets, given_weight, n_outputs, setting, group, qid)

    def run(dtype: str):
        inputs = (loss_in(loss, dtype), targets, scores, weight, full, hessian_mode, floor)
        if groups is None:
            return _per_sample(*inputs, fisher=setting == "fisher")
        return _grouped(*inputs, groups)

    grad, hess, n_not_finite = run("float64" if loss_dtype == "float64" else "float32")
    if n_not_finite and loss_dtype == "auto":
        wide_grad, wide_hess, wide_not_finite = run("float64")
        if not wide_not_finite:
            warn(float64_message("the gradient or hessian is", "at these scores"))
            grad, hess = wide_grad, wide_hess
    if one_dimensional:
        return grad[:, 0], hess.reshape(n_rows)
    return grad, hess


def _checked_loss(
    loss: Any,
    targets: np.ndarray,
    given_weight: np.ndarray | None,
    n_outputs: int,
    hessian: str,
    group: Any,
    qid: Any,
) -> tuple[Any, Any]:
    """``loss`` resolved and tried on ``targets`` and ``n_outputs``, and the
    groups of a group loss (``group`` or ``qid``; None for a per-sample
    loss), which refuses ``hessian="fisher"``."""
    loss = loss_catalogue.resolve(loss)
    check_target_domain(loss, targets)
    settings = {"leaf_method": "auto", "armijo": None, "n_outputs": n_outputs}
    groups = fit_groups(loss, group, qid, targets, given_weight, settings)
    if groups is None:
        check_loss(loss, targets, n_outputs)
        return loss, None
    check_group_loss(loss, targets)
    if hessian == "fisher":
        raise ValueError(
            "hessian='fisher': the Fisher information of a per-sample distribution; "
            "a group loss takes hessian='diag'"
        )
    return loss, groups


def _as_scores(f: Any) -> tuple[np.ndarray, bool]:
    """``f`` as ``(n_rows, n_outputs)`` finite float32 scores, and whether
    it was 1-D."""
    scores = np.asarray(f, dtype=np.float32)
    if scores.ndim not in (1, 2) or scores.shape[0] == 0:
        raise ValueError(
            f"f: expected raw scores of shape (n_rows,) or (n_rows, n_outputs), got {scores.shape}"
        )
    not_finite = ~np.isfinite(scores.reshape(scores.shape[0], -1)).all(axis=1)
    if not_finite.any():
        row = int(np.argmax(not_finite))
        raise ValueError(f"f: scores must be finite; row {row} is {scores[row]}")
    return (scores[:, None], True) if scores.ndim == 1 else (scores, False)


def _per_sample(loss, y, scores, weight, full, mode, floor, fisher=False):
    """``(grad, hess, rows not finite)`` of a per-sample loss, as numpy
    (``fisher``: the Fisher information as its hessian, full)."""

    def program(y, raw, weight):
        if fisher:
            grad, hess = fisher_grad_hess(loss, y, raw)
        else:
            grad, hess = grad_hess(loss, y, raw, full_hessian=full)
        n_not_finite = count_not_finite(grad, hess, weight, None)
        return (*tree_statistics(grad, hess, weight, mode, floor), n_not_finite)

    grad, hess, n_not_finite = jax.jit(program)(y, scores, weight)
    return np.asarray(grad), np.asarray(hess), int(n_not_finite)


def _grouped(loss, y, scores, weight, full, mode, floor, groups):
    """``(grad, hess, rows not finite)`` of a group loss (its hessian's
    diagonal: ``full`` does not apply), as numpy in the input's row order."""
    placed = place_groups(groups, 1, weight)
    placed_weight = np.where(placed.present, weight[placed.gather], 0.0).astype(np.float32)

    def program(y, raw, weight, buckets):
        grad, hess = group_grad_hess(loss, y, raw, buckets)
        n_not_finite = count_not_finite(grad, hess, weight, None)  # 0 on padding
        return (*tree_statistics(grad, hess, weight, mode, floor), n_not_finite)

    grad, hess, n_not_finite = jax.jit(program)(
        y[placed.gather], scores[placed.gather], placed_weight, placed.buckets
    )
    rows = placed.gather[placed.present]
    grad_out = np.empty_like(scores)
    hess_out = np.empty_like(scores)
    grad_out[rows] = np.asarray(grad)[placed.present]
    hess_out[rows] = np.asarray(hess)[placed.present]
    return grad_out, hess_out, int(n_not_finite)

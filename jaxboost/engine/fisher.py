"""The Fisher information of a distribution's raw scores, per row: the
hessian of ``hessian="fisher"`` (Fisher scoring, NGBoost's natural gradients).

A distributional loss is a negative log-likelihood ``-log p(y | f)`` of the
raw scores ``f (K,)`` of a row.  Its observed hessian depends on ``y``: the
Gaussian's in its log standard deviation is ``2 r^2 / sigma^2``, near 0 on
rows with small residuals ``r``, where Newton steps ``-g / h`` run away and the
scale collapses.  Its expectation over ``y`` from the model, the Fisher
information ``F(f) = E_y[grad grad^T] = E_y[hessian]``, is positive
semi-definite and free of the row's own target; leaves then solve ``-F^-1 G``
(NGBoost's natural gradient, with Newton's leaf sums).  Three sources, best
first:

- the loss's declared ``fisher(f) -> (K, K)`` (a closed form: exact);
- its declared ``sampler(key, f, n) -> (n, ...)``: ``E_y[grad grad^T]``
  estimated from ``FISHER_DRAWS`` draws of ``y`` per row, keyed by
  `FISHER_KEY` and the bits of the row's target: a fit is deterministic (on
  any number of devices), and rows' errors are independent, so a leaf's sum
  averages them (one key for all rows would give a location-scale family the
  same standardised draws on every row: one error, shared by the whole fit);
- else the empirical Fisher ``grad grad^T`` at the row's own target: rank one
  per row, its sum over a leaf's rows estimates the leaf's Fisher information
  only where the model fits (it is the outer product of the observed
  gradients, so it is large where the model is wrong, not where the
  distribution is sharp).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..losses.metadata import metadata_of
from ..runtime.precision import loss_scale
from .derivatives import Loss, row_gradient

# draws of y per row for a sampled Fisher information: its relative error per
# entry is about sqrt(2 / FISHER_DRAWS) (18% at 64; a leaf's sum over its rows
# averages the rows' errors down, as they are independent given the rows' scores)
FISHER_DRAWS = 64
# the key of every row's draws, in every round: a fit is deterministic
FISHER_KEY = 0

FISHER_SOURCES = ("declared", "sampled", "empirical")


def fisher_source(loss: Loss) -> str:
    """Where ``loss``'s Fisher information comes from: its declared
    ``fisher``, its declared ``sampler``, or the empirical ``grad grad^T``."""
    if metadata_of(loss).fisher is not None:
        return "declared"
    if metadata_of(loss).sampler is not None:
        return "sampled"
    return "empirical"


def declares_fisher(loss: Loss) -> bool:
    """Whether ``loss`` declares its Fisher information (``fisher``) or a way
    to estimate it (``sampler``): ``hessian="auto"`` then means Fisher scoring."""
    return fisher_source(loss) != "empirical"


def resolved_hessian(setting: str, loss: Loss) -> str:
    """The engine's ``hessian`` for a Booster's ``setting``: ``"auto"`` is
    ``"fisher"`` for a loss that `declares_fisher`, else ``"diag"``."""
    if setting != "auto":
        return setting
    return "fisher" if declares_fisher(loss) else "diag"


def fisher_grad_hess(loss: Loss, y: jax.Array, raw: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Every row's gradient ``(n_rows, K)`` (`row_gradient`'s) and Fisher
    information ``(n_rows, K, K)`` at the raw scores ``raw (n_rows, K)``
    (targets ``y (n_rows, ...)``), from `fisher_source`."""
    grad = row_gradient(loss, y, raw)
    source = fisher_source(loss)
    if source == "declared":
        return grad, declared_fisher(loss, raw)
    if source == "sampled":
        return grad, sampled_fisher(loss, y, raw, FISHER_DRAWS)
    return grad, grad[:, :, None] * grad[:, None, :]


def _row_scores(raw: jax.Array) -> jax.Array:
    """The scores as the loss takes them: ``(n_rows,)`` for one output, else
    ``raw (n_rows, K)`` itself."""
    return raw[:, 0] if raw.shape[1] == 1 else raw


def declared_fisher(loss: Loss, raw: jax.Array) -> jax.Array:
    """``(n_rows, K, K)``: the loss's declared ``fisher`` at every row's
    score, times the factor its values carry (a scaled float64 loss's)."""
    n_rows, n_outputs = raw.shape
    info = jax.vmap(loss.fisher)(_row_scores(raw))
    info = jnp.reshape(info, (n_rows, n_outputs, n_outputs)).astype(raw.dtype)
    return info * loss_scale(loss)


def sampled_fisher(loss: Loss, y: jax.Array, raw: jax.Array, n_draws: int) -> jax.Array:
    """``(n_rows, K, K)``: ``E_y[grad grad^T]`` at every row's score, from
    ``n_draws`` draws of the loss's ``sampler``, keyed by `FISHER_KEY` and
    the bits of the row's target ``y (n_rows, ...)`` (its first entry)."""
    base = jax.random.key(FISHER_KEY)
    n_outputs = raw.shape[1]
    grad_fn = jax.grad(loss, argnums=1)

    def one_row(target, score):
        first = jnp.reshape(target, (-1,))[0].astype(jnp.float32)
        key = jax.random.fold_in(base, jax.lax.bitcast_convert_type(first, jnp.uint32))
        draws = loss.sampler(key, score, n_draws)
        grads = jax.vmap(grad_fn, in_axes=(0, None))(draws, score)
        grads = jnp.reshape(grads, (n_draws, n_outputs)).astype(raw.dtype)
        return grads.T @ grads / n_draws

    return jax.vmap(one_row)(y, _row_scores(raw))


def check_distribution(loss: Loss, y: np.ndarray, weight: np.ndarray, n_outputs: int) -> None:
    """Raises a ValueError naming ``init``, ``fisher`` or ``sampler`` where the
    loss declares one whose value is unusable: ``init`` not ``(K,)`` finite
    scores on targets ``y (n, ...)`` and weights ``weight (n,)``; ``fisher``
    not a finite symmetric positive semi-definite ``(K, K)`` matrix at the
    start; ``sampler`` not ``(n, ...)`` finite draws shaped as a row of ``y``.
    Runs on the host, once per fit, on a few rows."""
    init = metadata_of(loss).init
    start = np.zeros(n_outputs, np.float32)
    if init is not None:
        start = _call("init", init, jnp.asarray(y), jnp.asarray(weight))
        if start.shape != (n_outputs,) or not np.all(np.isfinite(start)):
            raise ValueError(
                f"init: expected {n_outputs} finite raw scores (one per output) from "
                f"init(y, weight), got {_describe(start)}"
            )
    score = jnp.asarray(start[0] if n_outputs == 1 else start, jnp.float32)
    fisher = metadata_of(loss).fisher
    if fisher is not None:
        info = _call("fisher", fisher, score)
        if info.size == n_outputs * n_outputs:
            info = info.reshape(n_outputs, n_outputs)
        if info.shape != (n_outputs, n_outputs) or not _is_fisher(info):
            raise ValueError(
                f"fisher: expected a finite symmetric positive semi-definite {n_outputs} x "
                f"{n_outputs} matrix from fisher(f) at f = {start.tolist()}, got "
                f"{_describe(info)}"
            )
    sampler = metadata_of(loss).sampler
    if sampler is not None:
        draws = _call("sampler", sampler, jax.random.key(FISHER_KEY), score, 4)
        row_shape = tuple(np.shape(y)[1:])
        if draws.shape != (4, *row_shape) or not np.all(np.isfinite(draws)):
            raise ValueError(
                f"sampler: expected sampler(key, f, 4) to give 4 finite draws of shape "
                f"{(4, *row_shape)} (n, then a target row's shape), got {_describe(draws)}"
            )


def _call(argument: str, function: Callable, *args) -> np.ndarray:
    """``function(*args)`` as a numpy array; an exception it raises becomes a
    ValueError naming the declared ``argument``."""
    try:
        return np.asarray(function(*args), np.float64)
    except Exception as error:  # the user's function: any failure is theirs to see
        raise ValueError(f"{argument}: the declared function failed: {error!r:.300}") from error


def _is_fisher(info: np.ndarray) -> bool:
    """Whether ``info (K, K)`` is finite, symmetric and positive
    semi-definite, to float32 rounding."""
    if not np.all(np.isfinite(info)):
        return False
    size = max(float(np.max(np.abs(info))), np.finfo(np.float32).tiny)
    if np.max(np.abs(info - info.T)) > 1e-5 * size:
        return False
    return bool(np.linalg.eigvalsh(0.5 * (info + info.T))[0] >= -1e-5 * size)


def _describe(values: np.ndarray) -> str:
    """Shape and (a few) values, for an error message."""
    return f"shape {values.shape}: {np.array2string(values.ravel()[:6], precision=4)}"


def information_per_row(hess_diag: jax.Array, weight: jax.Array, axis_name) -> jax.Array:
    """``(K,)``: the rows' mean Fisher information per output, ``sum_i
    F_i,kk / sum_i w_i`` over all shards, from the weighted diagonals
    ``hess_diag (n_rows, K)`` and ``weight (n_rows,)`` (1 where not positive
    and finite).

    ``hessian="fisher"`` measures ``reg_lambda`` in these units (``lambda
    d_k`` for output ``k``: a prior worth ``lambda`` rows), in the split gains
    and the leaf values alike, so that a Gaussian's mean (information
    ``1 / sigma^2`` per row) learns at the same pace on targets of any scale.
    """
    sums = jnp.concatenate([jnp.sum(hess_diag, axis=0), jnp.sum(weight)[None]])
    if axis_name is not None:
        sums = jax.lax.psum(sums, axis_name)
    per_row = sums[:-1] / sums[-1]
    return jnp.where(jnp.isfinite(per_row) & (per_row > 0), per_row, 1.0)

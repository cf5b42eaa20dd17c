"""Predictions of a distribution loss's model as distributions: the numpyro
distribution of every row, its quantiles and draws.

A model trained on a distribution loss (`jaxboost.losses.distribution`, or
`gaussian_nll`, read as the Normal family) predicts, per row, the
parameters of a distribution; these functions turn its raw scores
``(n_rows, K)`` into that distribution, batch shape ``(n_rows,)``.

Quantiles come from the family's ``icdf`` where numpyro has one (Normal,
LogNormal), else from its ``cdf`` by bisection: on the whole numbers for a
count family (the q-quantile is the least ``k`` with ``cdf(k) >= q``), on the
reals within a bracket doubled until it holds every quantile otherwise, to
float32's resolution.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...losses import negative_binomial
from ...losses.distribution_loss import as_distribution_loss
from ...losses.metadata import metadata_of
from ...losses.student_t import student_t_cdf

# bisection steps: float32 brackets shrink to their last bit in fewer
_BISECTION_STEPS = 64
# bracket doublings: past 2^128 float32 overflows
_MAX_DOUBLINGS = 128


def distribution_loss_of(loss: Any, what: str) -> Any:
    """The distribution loss of a model's ``loss_``; a ValueError naming
    ``what`` was asked and the fix where it is not one."""
    found = as_distribution_loss(loss)
    if found is not None:
        return found
    name = metadata_of(loss).name
    raise ValueError(
        f"{what}: the model's loss {name!r} predicts no distribution; fit it with a "
        "distribution loss, losses.distribution(...) (e.g. loss='distribution:normal') or "
        "gaussian_nll (a model file saved with a custom numpyro family: load it with "
        "jaxboost.load(path, loss=that_loss))"
    )


def predict_distribution(loss: Any, raw: np.ndarray) -> Any:
    """The numpyro distribution of raw scores ``(n_rows, K)`` (``(n_rows,)``
    for one output) under the distribution loss ``loss``: batch shape ``(n_rows,)``."""
    return loss.distribution_of(jnp.asarray(raw, jnp.float32))


def checked_levels(q: Any) -> np.ndarray:
    """``q`` as a 1-D float array of levels in (0, 1); a ValueError otherwise."""
    levels = np.atleast_1d(np.asarray(q, dtype=np.float64))
    if levels.ndim != 1 or levels.size == 0 or not np.all((levels > 0) & (levels < 1)):
        raise ValueError(f"q: expected quantile levels in (0, 1), one number or a list, got {q!r}")
    return levels


def quantiles(dist: Any, q: Sequence[float] | float) -> np.ndarray:
    """Quantiles ``(n_rows, len(q))`` of ``dist`` (batch shape ``(n_rows,)``)
    at levels ``q`` in (0, 1), by ``icdf`` or else by bisection on ``cdf``."""
    levels = checked_levels(q)
    grid = jnp.asarray(levels, jnp.float32)[:, None]  # (len(q), 1): broadcasts over rows
    try:
        values = dist.icdf(grid)
    except (NotImplementedError, ImportError):  # numpyro asks tensorflow-probability for some
        values = _bisect(dist, grid, _support(dist))
    values = jnp.broadcast_to(values, (levels.size, *dist.batch_shape))
    if _support(dist) == "count":
        # (a rate of 0 puts all mass on 0; its cdf below 0 is NaN, not 0)
        values = jnp.maximum(values, 0.0)
    return np.asarray(values, np.float64).T


def _cdf(dist: Any, x: jax.Array) -> jax.Array:
    """``dist.cdf(x)``, with the zero-inflated families' mixture written out,
    and the Student-t's and negative binomial's accurate at any df and
    concentration."""
    if type(dist).__name__ == "StudentT":
        return student_t_cdf((x - dist.loc) / dist.scale, dist.df)
    if type(dist).__name__ == "NegativeBinomial2":
        return negative_binomial.cdf(dist, x)
    try:
        return dist.cdf(x)
    except NotImplementedError:
        gate, base = getattr(dist, "gate", None), getattr(dist, "base_dist", None)
        if gate is None or base is None:
            raise
        return jnp.where(x >= 0, gate + (1.0 - gate) * base.cdf(x), 0.0)


def _support(dist: Any) -> str:
    """``"count"``, ``"positive"``, ``"unit"`` or ``"real"``."""
    name = type(dist.support).__name__.lstrip("_")
    return {
        "IntegerNonnegative": "count",
        "Positive": "positive",
        "UnitInterval": "unit",
    }.get(name, "real")


@functools.partial(jax.jit, static_argnames="support")
def _bisect(dist: Any, grid: jax.Array, support: str) -> jax.Array:
    """Quantiles ``(len(q), n_rows)`` at ``grid (len(q), 1)`` by bisection on
    the cdf of ``dist`` (a pytree: one compiled program per family and shape)."""
    shape = (grid.shape[0], *dist.batch_shape)

    def below(x):  # the quantile lies above x
        return _cdf(dist, x) < grid

    def outside(state):  # the bracket misses some quantile
        low, high, doublings = state
        missed = jnp.any(below(high))
        if support == "real":
            missed |= jnp.any(~below(low))
        return missed & (doublings < _MAX_DOUBLINGS)

    def widen(state):
        low, high, doublings = state
        high = jnp.where(below(high), 2.0 * high, high)
        if support == "real":
            low = jnp.where(below(low), low, 2.0 * low)
        return low, high, doublings + 1

    def halve(_, bracket):
        low, high = bracket
        middle = 0.5 * (low + high)
        if support == "count":
            middle = jnp.floor(middle)
        up = below(middle)
        return jnp.where(up, middle, low), jnp.where(up, high, middle)

    low = jnp.full(shape, -1.0 if support in ("real", "count") else 0.0)
    low, high, _ = lax.while_loop(outside, widen, (low, jnp.ones(shape), 0))
    return lax.fori_loop(0, _BISECTION_STEPS, halve, (low, high))[1]


def sample(dist: Any, n: int, random_state: Any = None) -> np.ndarray:
    """``n`` draws per row ``(n_rows, n)`` of ``dist``; ``random_state``: an
    int seed, a numpy ``Generator``, or None (a fresh seed)."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n: expected a positive whole number of draws per row, got {n!r}")
    seed = np.random.default_rng(random_state).integers(np.iinfo(np.int32).max)
    draws = dist.sample(jax.random.PRNGKey(int(seed)), (int(n),))  # (n, n_rows)
    return np.asarray(draws, np.float64).T


def pit(dist: Any, y: Any, random_state: Any = 0) -> np.ndarray:
    """Probability integral transform ``F_i(y_i)`` ``(n_rows,)`` of targets
    ``y (n_rows,)`` under ``dist``: uniform on (0, 1) where the predicted
    distributions are calibrated.  Count families take the randomised PIT,
    ``F(y - 1) + v (F(y) - F(y - 1))`` with ``v`` uniform (Czado, Gneiting
    and Held 2009), drawn from ``random_state``."""
    y = np.asarray(y, np.float64)
    if y.ndim != 1 or y.shape[0] != dist.batch_shape[0]:
        raise ValueError(
            f"y: expected one uncensored target per row, shape ({dist.batch_shape[0]},), got "
            f"shape {y.shape}; for (time, event) targets pass the observed rows' times, "
            "y[y[:, 1] == 1, 0], with their rows of X"
        )
    upper = np.asarray(_cdf(dist, jnp.asarray(y, jnp.float32)), np.float64)
    if _support(dist) != "count":
        return upper
    lower = np.asarray(_cdf(dist, jnp.asarray(y - 1.0, jnp.float32)), np.float64)
    uniform = np.random.default_rng(random_state).uniform(size=y.shape)
    return lower + uniform * (upper - lower)

"""The engine computes in float32, whatever JAX's 64-bit mode says.

Scores, histograms, leaf values and the compiled programs are float32 by
design.  A user who turned ``jax_enable_x64`` on for other work would get
float64 arrays in some places (an array built without a dtype, a Python float
meeting a traced value) and programs that do not type-check inside JAX.  Every
public entry point that runs JAX code runs it with the mode off, and leaves
the user's setting as it was.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
import numpy as np

F = TypeVar("F", bound=Callable)


def in_float32(function: F) -> F:
    """``function`` run with JAX's 64-bit mode off (not for generators: the
    mode would stay off in the caller's code between items)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(False):
            return function(*args, **kwargs)

    return wrapper


LOSS_DTYPES = ("auto", "float32", "float64")


class Float64Loss:
    """A per-sample loss evaluated in float64: ``loss(y, f)`` on float32
    arguments, its value (and so its derivatives) computed in float64, times
    ``scale``, and returned as float32.

    For losses that overflow in float32 where they do not in float64
    (``log(cosh(f - y))`` at residuals beyond 89, as XGBoost's and LightGBM's
    numpy objectives compute them): only the loss's own arithmetic is float64;
    the gradients and hessians it hands the engine, the trees, histograms and
    predictions stay float32.  JAX's 64-bit mode is switched on while the loss
    is traced, inside a program traced with it off.  The declared attributes
    (``link``, ``convex``, ...) are the wrapped loss's.

    ``scale``, a power of two at most 1 (`float32_scale`), brings a loss
    whose values or gradients are beyond float32 (``cosh(f - y)`` at
    residuals beyond 89, squared errors of targets of 1e20) into its range:
    the engine then fits ``scale * loss``, the same trees where the settings
    in its units are scaled too (`jaxboost.frontends.booster`'s
    ``reg_lambda``, ``min_child_weight``, ...), and the reported losses are
    divided by it.
    """

    def __init__(self, loss: Callable, scale: float = 1.0):
        self.loss = loss
        self.scale = float(scale)

    def __call__(self, y, f, *mask):
        with jax.enable_x64(True):
            value = self.loss(_as_float64(y), _as_float64(f), *mask)
            if self.scale != 1.0:
                value = value * self.scale
            return jnp.asarray(value).astype(jnp.float32)

    def __getattr__(self, name: str):
        if name == "loss":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.loss, name)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Float64Loss) and other.loss == self.loss and other.scale == self.scale
        )

    def __hash__(self) -> int:
        return hash((Float64Loss, self.loss, self.scale))


def _as_float64(values):
    values = jnp.asarray(values)
    return values.astype(jnp.float64) if jnp.issubdtype(values.dtype, jnp.floating) else values


def loss_in(loss: Callable, dtype: str, scale: float = 1.0) -> Callable:
    """``loss`` as the engine evaluates it in ``dtype`` (``"float32"``: itself),
    times ``scale`` (float64 only: see `Float64Loss`)."""
    return Float64Loss(loss, scale) if dtype == "float64" else loss


def loss_scale(loss: Callable) -> float:
    """The factor the engine's values of ``loss`` carry (1 but for a scaled
    `Float64Loss`): reported losses are divided by it."""
    return loss.scale if isinstance(loss, Float64Loss) else 1.0


# a scaled loss's weighted sums over rows, and its gradient's, start below
# 2^100: float32 holds 2^128, and the initial score's search and the first
# rounds move the scores
_SCALED_PEAK_EXPONENT = 100


def rows_in_float64(
    loss: Callable, y: np.ndarray, score: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every row's loss ``(n_rows,)`` and the largest ``|gradient|`` of its
    scores ``(n_rows,)``, in float64, at the raw score ``score (K,)``
    (on the host: once, where a fit's initial score overflows float32)."""
    with jax.enable_x64(True):
        y64 = jnp.asarray(y, jnp.float64)
        f64 = jnp.broadcast_to(jnp.asarray(score, jnp.float64), (y.shape[0], score.shape[0]))
        f64 = f64[:, 0] if score.shape[0] == 1 else f64
        values, grads = jax.vmap(jax.value_and_grad(loss, argnums=1))(y64, f64)
        peak_grad = jnp.abs(grads).reshape(y.shape[0], -1).max(axis=1)
        return np.asarray(values, np.float64), np.asarray(peak_grad, np.float64)


def peak_exponent(values: np.ndarray, peak_grad: np.ndarray, weight: np.ndarray) -> int | None:
    """``e`` with ``2^e`` at least the weighted sum over rows of ``max(|loss|,
    |gradient|)`` (``rows_in_float64``'s); None where a row of positive weight
    is not finite or the sum overflows float64."""
    kept = weight > 0
    peak = np.maximum(np.abs(values), peak_grad)[kept]
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.sum(weight[kept].astype(np.float64) * peak))
    if not np.isfinite(total):
        return None
    return int(np.frexp(total)[1]) if total > 0 else 0


def float32_scale(exponent: int) -> float:
    """The power of two ``s <= 1`` that brings sums of ``2^exponent``
    (`peak_exponent`, the largest over processes) below
    ``2^_SCALED_PEAK_EXPONENT``."""
    return float(2.0 ** min(0, _SCALED_PEAK_EXPONENT - exponent))

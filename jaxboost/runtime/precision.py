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
    arguments, its value (and so its derivatives) computed in float64 and
    returned as float32.

    For losses that overflow in float32 where they do not in float64
    (``log(cosh(f - y))`` at residuals beyond 89, as XGBoost's and LightGBM's
    numpy objectives compute them): only the loss's own arithmetic is float64;
    the gradients and hessians it hands the engine, the trees, histograms and
    predictions stay float32.  JAX's 64-bit mode is switched on while the loss
    is traced, inside a program traced with it off.  The declared attributes
    (``link``, ``convex``, ...) are the wrapped loss's.
    """

    def __init__(self, loss: Callable):
        self.loss = loss

    def __call__(self, y, f, *mask):
        with jax.enable_x64(True):
            value = self.loss(_as_float64(y), _as_float64(f), *mask)
            return jnp.asarray(value).astype(jnp.float32)

    def __getattr__(self, name: str):
        if name == "loss":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.loss, name)

    def __eq__(self, other) -> bool:
        return isinstance(other, Float64Loss) and other.loss == self.loss

    def __hash__(self) -> int:
        return hash((Float64Loss, self.loss))


def _as_float64(values):
    values = jnp.asarray(values)
    return values.astype(jnp.float64) if jnp.issubdtype(values.dtype, jnp.floating) else values


def loss_in(loss: Callable, dtype: str) -> Callable:
    """``loss`` as the engine evaluates it in ``dtype`` (``"float32"``: itself)."""
    return Float64Loss(loss) if dtype == "float64" else loss

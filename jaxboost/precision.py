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

F = TypeVar("F", bound=Callable)


def in_float32(function: F) -> F:
    """``function`` run with JAX's 64-bit mode off (not for generators: the
    mode would stay off in the caller's code between items)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(False):
            return function(*args, **kwargs)

    return wrapper

"""Caches of compiled programs: one program per argument shape, a bounded number alive.

XLA's CPU backend maps every compiled program's kernels into memory one by
one: about 380 mappings for a training program, 90 for an initial score's.
Linux allows a process 65530 (``vm.max_map_count``), and near that limit
XLA fails to load a kernel and then segfaults in the unwinder (see
``benchmarks/README.md``).  A ``jax.jit`` function keeps a program for every
argument shape it has ever seen, so a factory cached on its settings alone
never frees anything: a process that fits many data shapes (a grid search, a
test suite) grows without bound.  `one_program_per_shape` caches a
factory's jitted function on its settings *and* the arguments' shapes, so
each cache entry holds one compiled program and the least recently used are
dropped past ``maxsize``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

# programs alive per factory, at most: a training program maps ~380 regions,
# so 32 of them stay well under the 65530 a process may hold
LIVE_PROGRAMS = 32


def argument_signature(*args: Any) -> tuple:
    """The shape and dtype of every leaf of ``args``: what, beside the static
    settings, decides which compiled program a jitted call runs."""
    return tuple(
        (tuple(np.shape(leaf)), str(getattr(leaf, "dtype", type(leaf).__name__)))
        for leaf in jax.tree.leaves(args)
    )


def one_program_per_shape(
    maxsize: int = LIVE_PROGRAMS,
) -> Callable[[Callable[..., Callable]], Callable[..., Callable]]:
    """Decorator for a factory ``(*settings) -> jitted function``.

    The decorated factory takes the same hashable settings and returns a
    caller ``(*args) -> result`` that runs the factory's function built for
    those settings and ``args``' shapes; at most ``maxsize`` such functions,
    each with the one program compiled for its shapes, stay alive (least
    recently used dropped).  ``cache_info`` and ``cache_clear`` are those of
    the underlying ``functools.lru_cache``.
    """

    def decorate(factory: Callable[..., Callable]) -> Callable[..., Callable]:
        @functools.lru_cache(maxsize=maxsize)
        def program(settings: tuple, signature: tuple) -> Callable:
            del signature  # a cache key only: the function compiles once, for it
            return factory(*settings)

        @functools.wraps(factory)
        def bind(*settings: Any) -> Callable:
            def call(*args: Any):
                return program(settings, argument_signature(*args))(*args)

            def compiled_for(*args: Any) -> Callable:
                """The jitted function ``call`` runs for arguments shaped as
                ``args``: called many times on such arguments, it skips
                reading their shapes on every call."""
                return program(settings, argument_signature(*args))

            call.compiled_for = compiled_for
            return call

        bind.cache_info = program.cache_info
        bind.cache_clear = program.cache_clear
        return bind

    return decorate

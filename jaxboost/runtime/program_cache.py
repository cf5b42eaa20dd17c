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
dropped past ``maxsize``.  `values_as_input` caches a loss's programs on
its structure, with its numbers passed on every call
(`jaxboost.runtime.lifted_values`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .precision import Float64Loss
from .same_function import SameComputation

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


def values_as_input(factory: Callable[..., Callable]) -> Callable[..., Callable]:
    """Decorator, over `one_program_per_shape`, for a factory whose jitted
    function takes a loss's lifted values first (``(values, *args)``) and
    traces its body under `jaxboost.runtime.lifted_values.bound`.

    The decorated factory takes the same settings; a setting that is, or
    holds as ``.loss``, a keyed loss with a structure
    (`jaxboost.runtime.same_function.SameComputation`) is replaced by that
    structure, so that the factory's programs are cached on it and serve
    every value, and the caller it returns passes the loss's values on
    every call.  Settings without one pass through (``values`` is ``()``).
    """

    @functools.wraps(factory)
    def bind(*settings: Any) -> Callable:
        split = [without_values(setting) for setting in settings]
        values = next((values for _, values in split if values is not None), ())
        call = factory(*(setting for setting, _ in split))

        def run(*args: Any):
            return call(values, *args)

        def compiled_for(*args: Any) -> Callable:
            return _WithValues(call.compiled_for(values, *args), values)

        run.compiled_for = compiled_for
        return run

    bind.cache_info = factory.cache_info
    bind.cache_clear = factory.cache_clear
    return bind


class _WithValues:
    """A jitted function of ``(values, *args)`` called as one of ``args``."""

    def __init__(self, jitted: Callable, values: tuple):
        self.jitted = jitted
        self.values = values

    def __call__(self, *args: Any) -> Any:
        return self.jitted(self.values, *args)

    def lower(self, *args: Any) -> Any:
        return self.jitted.lower(self.values, *args)


def without_values(setting: Any) -> tuple[Any, tuple | None]:
    """``(setting with its keyed loss's structure in the loss's place, the
    loss's values)``; ``(setting, None)`` where it holds no structure.  The
    loss is ``setting`` itself, the loss a
    `jaxboost.runtime.precision.Float64Loss` wraps, or a settings
    dataclass's ``loss``."""
    if isinstance(setting, SameComputation):
        if setting.structure is None:
            return setting, None
        return setting.structure, setting.values
    if isinstance(setting, Float64Loss):
        inner, values = without_values(setting.loss)
        return (setting, None) if values is None else (Float64Loss(inner, setting.scale), values)
    if dataclasses.is_dataclass(setting) and not isinstance(setting, type):
        loss = getattr(setting, "loss", None)
        if loss is None:
            return setting, None
        inner, values = without_values(loss)
        return (
            (setting, None)
            if values is None
            else (dataclasses.replace(setting, loss=inner), values)
        )
    return setting, None

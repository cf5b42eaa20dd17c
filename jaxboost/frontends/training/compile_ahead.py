"""A fit's loss programs compiled on a background thread while it computes others.

A fit with a loss new to the process waits for XLA to compile the loss's
programs: the initial score's sums, the hessian probe's (on a small fit,
the rounds' derivatives program) and the rounds' (about 0.15, 0.25 and
0.3 s on one core of a 2-core machine; tracing and lowering are a small
part).  All but the first depend only on the loss and on array shapes
known as soon as the rows are placed, so they are compiled here, on
another core, while this thread compiles and runs the initial score's
program and the bin edges.  The program the fit then calls finds the
compiled executable in JAX's cache and does not compile again.

Speculative where the fit's settings are not known yet: the derivatives
program is compiled for a loss that needs no probe only when the rounds
will probably run round by round
(`jaxboost.engine.round_programs.runs_round_by_round`: Newton leaves, no
Armijo safeguard).  A wrong guess wastes one background compile, never a
result; any error on the background thread is dropped (the fit raises its
own, with its message, where it calls the program).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ...engine.derivatives import compile_probe, is_declared
from ...engine.fisher import resolved_hessian
from ...engine.round_programs import derivatives_program
from ...losses.metadata import metadata_of
from ...runtime.workarounds import FAST_COMPILE_ROWS
from .hessian_probe import derivatives_settings, probe_targets, probes_on_rows

_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxboost-compile")


def _in_background(compile_one: Callable[[], Any]) -> concurrent.futures.Future:
    """``compile_one()`` on the pool's thread, with JAX's 64-bit mode off as
    the fit has it (the mode is per thread), its errors dropped."""

    def run() -> None:
        try:
            with jax.enable_x64(False):
                compile_one()
        except Exception:  # noqa: BLE001, S110  the fit's own call raises it, with its message
            pass

    return _POOL.submit(run)


def start_loss_programs(
    settings,
    loss: Callable,
    n_outputs: int,
    targets: np.ndarray,
    placed_rows: tuple[jax.Array, jax.Array],
    rows_per_shard: int,
) -> concurrent.futures.Future | None:
    """Starts compiling the program a fit of ``settings`` probes
    ``loss`` (as evaluated in float32) with, or will probably run its rounds'
    derivatives on: `jaxboost.frontends.training.hessian_probe.probe_fit`'s
    arguments.  Returns the compile's future (None: nothing to compile)."""
    y_rows, weight_rows = placed_rows
    hessian = resolved_hessian(settings.hessian, loss)
    if probes_on_rows(y_rows.shape[0], n_outputs, hessian):
        if is_declared(loss) and not _probably_round_by_round(settings, loss, y_rows.shape[0]):
            return None
        derivatives = derivatives_settings(loss, n_outputs, hessian, rows_per_shard)
        program = derivatives_program(derivatives, y_rows.sharding.mesh)
        raw = jax.ShapeDtypeStruct(
            (y_rows.shape[0], n_outputs), np.float32, sharding=y_rows.sharding
        )
        return _in_background(
            lambda: (
                program.compiled_for(y_rows, weight_rows, raw)
                .lower(y_rows, weight_rows, raw)
                .compile()
            )
        )
    probe = probe_targets(targets)
    return _in_background(
        lambda: compile_probe(loss, probe, n_outputs, full_hessian=hessian == "full")
    )


def _probably_round_by_round(settings, loss: Callable, n_rows: int) -> bool:
    """Whether a fit of ``n_rows`` rows will probably take its rounds'
    derivatives from `derivatives_program`: Newton leaves (asked, or
    ``"auto"`` on a loss not declared flat), no Armijo safeguard asked, a
    small fit."""
    newton = settings.leaf_method == "newton" or (
        settings.leaf_method == "auto" and metadata_of(loss).hessian_informative is not False
    )
    return newton and settings.armijo is not True and n_rows <= FAST_COMPILE_ROWS

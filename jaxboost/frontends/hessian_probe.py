"""What a fit's loss's hessian is like at the initial score: the probe that
settles ``leaf_method="auto"``, ``split_criterion="auto"`` and ``armijo=None``.

A small fit on one process (at most
`jaxboost.runtime.workarounds.FAST_COMPILE_ROWS` rows) probes with the
rounds' own derivatives program, so a new loss compiles one program fewer;
other fits evaluate a program of the loss's derivatives on about
``PROBE_ROWS`` rows.  Both read the same rows: evenly spaced over the data
(a file sorted by target must not decide).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..engine.derivatives import (
    HessianProbe,
    declared_probe,
    hessian_probe_of,
    is_declared,
    probe_hessian,
)
from ..engine.round_programs import derivatives_program
from ..engine.training import StaticSettings
from ..runtime.distributed import fetch, global_rows
from ..runtime.padding import bucket_size, pad_rows
from ..runtime.workarounds import FAST_COMPILE_ROWS

# rows on which an undeclared loss's hessian is probed, at most
PROBE_ROWS = 1024
# a small fit's rows' hessian entries, at most, fetched for the probe on the
# host (else the sampled probe's program): 16 MB of float32
_FETCHED_ENTRIES = 2**22
# rows per device from which programs of vector outputs compile with
# jaxboost.runtime.workarounds' options: below it they slow the split
# search more than they speed the sums over outputs (bench_multiclass.py)
VECTOR_OPTIONS_ROWS = 32768


def derivatives_settings(
    loss: Callable, n_outputs: int, hessian: str, rows_per_shard: int
) -> StaticSettings:
    """The settings of a small fit's `derivatives_program`
    (`jaxboost.engine.round_programs.loss_settings` of its rounds')."""
    return StaticSettings(
        loss=loss,
        n_outputs=n_outputs,
        max_depth=0,
        hessian=hessian,
        vector_row_options=n_outputs > 1 and rows_per_shard >= VECTOR_OPTIONS_ROWS,
        fast_compile=True,
    )


def probes_on_rows(n_rows: int, n_outputs: int, hessian: str) -> bool:
    """Whether a fit of ``n_rows`` rows (all processes) probes with its
    derivatives program (`probe_fit`)."""
    entries = n_outputs * (n_outputs if hessian in ("full", "fisher") else 1)
    return (
        jax.process_count() == 1
        and n_rows <= FAST_COMPILE_ROWS
        and n_rows * entries <= _FETCHED_ENTRIES
    )


def probe_rows(n_rows: int) -> np.ndarray:
    """The indices of the (at most about ``PROBE_ROWS``) rows probed."""
    return np.arange(0, n_rows, -(-n_rows // PROBE_ROWS))


def probe_targets(targets: np.ndarray) -> np.ndarray:
    """The probed rows of ``targets``, padded to a bucket's size (the
    sampled probe's program is compiled per bucket)."""
    probe = targets[probe_rows(targets.shape[0])]
    return pad_rows(probe, bucket_size(probe.shape[0]))


def probe_fit(
    loss: Callable,
    targets: np.ndarray,
    init_score: np.ndarray,
    hessian: str,
    placed_rows: tuple[jax.Array, jax.Array],
    rows_per_shard: int,
    measure: bool = False,
) -> HessianProbe:
    """The loss's `HessianProbe` at the initial score.

    Args:
      loss: as the engine evaluates it.
      targets: ``(n_rows, ...)`` this process's targets (host).
      init_score: ``(K,)`` the initial score.
      hessian: the Booster's ``hessian`` setting.
      placed_rows: the targets and weights on the devices (padded, sharded).
      rows_per_shard: their rows per device.
      measure: a declared loss's hessian is evaluated too, for its
        ``mean_hessian`` (a small fit's rounds' own program: no compilation).
    """
    if is_declared(loss) and not measure:
        return declared_probe(loss)
    n_rows, n_outputs = targets.shape[0], init_score.shape[0]
    y_rows, weight_rows = placed_rows
    if not probes_on_rows(y_rows.shape[0], n_outputs, hessian):
        probe = probe_targets(targets)
        return probe_hessian(
            loss,
            jnp.asarray(probe),
            jnp.broadcast_to(init_score, (probe.shape[0], n_outputs)),
            full_hessian=hessian == "full",
            measure=measure,
        )
    mesh = y_rows.sharding.mesh
    settings = derivatives_settings(loss, n_outputs, hessian, rows_per_shard)
    raw = np.broadcast_to(init_score, (y_rows.shape[0], n_outputs)).astype(np.float32)
    grad, hess, *_ = derivatives_program(settings, mesh)(
        y_rows, weight_rows, global_rows(mesh, raw)
    )
    grad, hess = fetch((grad, hess))
    kept = probe_rows(n_rows)
    return hessian_probe_of(loss, raw[kept], np.asarray(grad)[kept], np.asarray(hess)[kept])

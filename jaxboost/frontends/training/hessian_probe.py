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

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Jaxpr, Literal

from ...engine.derivatives import (
    HessianProbe,
    declared_probe,
    hessian_probe_of,
    is_declared,
    probe_hessian,
)
from ...engine.round_programs import derivatives_program
from ...engine.training import StaticSettings
from ...runtime.distributed import fetch, global_rows
from ...runtime.padding import bucket_size, pad_rows
from ...runtime.workarounds import FAST_COMPILE_ROWS

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


def _flows_from_inputs(jaxpr: Jaxpr) -> list[bool]:
    """Per output of ``jaxpr``, whether its value may depend on an input: an
    equation with an input that may depends as a whole (its sub-programs
    are not looked into), so False is a proof and True a maybe."""
    dependent = set(jaxpr.invars)
    for equation in jaxpr.eqns:
        if any(not isinstance(v, Literal) and v in dependent for v in equation.invars):
            dependent.update(equation.outvars)
    return [not isinstance(v, Literal) and v in dependent for v in jaxpr.outvars]


def hessian_is_constant(loss: Callable, y_row: np.ndarray, n_outputs: int) -> bool:
    """Whether ``loss``'s hessian in the score depends on neither the target
    nor the score (squared error's), proven on its traced program, and
    every diagonal entry is positive: every row of weight 1 then has the
    same hessian.  ``y_row``: one row of the targets (its shape and dtype).
    Remembered per loss (tracing costs some 20 ms, a small fit's tenth)."""
    key = (loss, np.shape(y_row), np.asarray(y_row).dtype.str, n_outputs)
    try:
        return _constant_hessian(key)
    except TypeError:  # an unhashable loss: traced every time
        return _constant_hessian.__wrapped__(key)


@functools.lru_cache(maxsize=64)
def _constant_hessian(key: tuple) -> bool:
    loss, shape, dtype, n_outputs = key
    # (NumPy zeros: JAX's would each compile a program)
    score = np.zeros((n_outputs,) if n_outputs > 1 else (), np.float32)
    target = np.zeros(shape, dtype)
    hessian = jax.hessian(loss, argnums=1)
    try:
        program = jax.make_jaxpr(hessian)(target, score)
    except Exception:  # noqa: BLE001  (a loss that does not trace on one row: not known)
        return False
    if any(_flows_from_inputs(program.jaxpr)):
        return False
    # (one program: evaluated op by op, the hessian's some 20 operations
    # compiled one by one, 0.5 to 1 s of a first fit)
    diagonal = np.diag(np.atleast_2d(np.asarray(jax.jit(hessian)(target, score), np.float64)))
    return bool(np.all(np.isfinite(diagonal) & (diagonal > 0)))


def rows_from_hessian(
    cfg: StaticSettings, loss: Callable, targets: np.ndarray, weight: np.ndarray | None
) -> bool:
    """`StaticSettings.rows_from_hessian`: whether every row of positive
    weight adds the same to the split search's second statistic, so that
    ``min_child_samples`` reads the rows off its sums exactly (nothing counted): the
    first-order criterion's weights or a constant hessian
    (`hessian_is_constant`), every weight 0 or 1, one process, statistics
    neither quantised nor Fisher-scaled."""
    if not cfg.count_rows or cfg.grouped or cfg.grad_quant_bins or cfg.hessian == "fisher":
        return False
    if jax.process_count() > 1:  # (the flag must agree between processes)
        return False
    if weight is not None and not np.all((weight == 0) | (weight == 1)):
        return False
    if cfg.split_criterion == "first_order":
        return True
    return hessian_is_constant(loss, targets[0], cfg.n_outputs)

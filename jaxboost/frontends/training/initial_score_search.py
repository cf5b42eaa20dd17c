"""A fit's initial score searched on its placed rows: the program
dispatched (`start_init_score`: a group loss's from 0, one output's on
the host for few rows, else on the devices), then fetched and checked
finite (`finite_init_score`), in float64 where float32 overflows (the
``loss_dtype`` setting), the loss scaled by a power of two where even
float64's sums leave float32's range (`jaxboost.runtime.precision`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from ...engine.init_score import initial_score_on_host, not_converged_message
from ...engine.round_checks import float64_message, not_finite_init_error, scaled_message
from ...engine.round_programs import slope_sums_program
from ...engine.training_programs import (
    group_loss_at_score_program,
    init_score_program,
    loss_at_score_program,
)
from ...kernels.registry import kernels_for
from ...losses._declare import DeclaredLoss
from ...losses.classification import softmax_cross_entropy as _catalogue_softmax
from ...losses.metadata import metadata_of
from ...losses.regression import quantile as _catalogue_quantile
from ...runtime.distributed import fetch, gather, replicated
from ...runtime.precision import float32_scale, loss_in, peak_exponent, rows_in_float64
from ...runtime.same_function import plain
from ...runtime.user_warning import warn
from ...runtime.workarounds import FAST_COMPILE_ROWS
from ..data.offsets import OffsetLoss
from .computation_keys import keyed_loss


def start_init_score(
    loss, n_outputs: int, mesh, y: jax.Array, weight: jax.Array, given, groups=None
):
    """Dispatches the initial score's program (the ``given`` one's, ``(K,)``
    or None, training loss): ``(init_score, init_loss, converged)``, arrays
    to fetch, ``converged`` False where a vector search stopped at its
    budget (`jaxboost.engine.init_score.vector_initial_score`).  A group
    loss (``groups``: its tables on the devices) starts
    from 0, as LightGBM's and XGBoost's ranking objectives do (ranking
    and Cox losses do not change when every score moves by one number).
    One output on at most ``FAST_COMPILE_ROWS`` rows searches from the host
    (the catalogue's quantile loss takes its closed form, `quantile_init_score`);
    more rows, or vector outputs, in one program (the catalogue's softmax
    cross-entropy takes its closed form, `softmax_init_score`)."""
    init_score = given
    if groups is not None:
        score = np.zeros(1, np.float32) if init_score is None else init_score
        loss_at = group_loss_at_score_program(loss, len(groups), mesh)
        return score, loss_at(y, groups, replicated(mesh, score)), True
    if init_score is None:
        small = y.shape[0] <= FAST_COMPILE_ROWS
        if small and n_outputs == 1 and jax.process_count() == 1:
            alpha = _catalogue_quantile_alpha(loss)
            host_y, host_weight = np.asarray(fetch(y)), np.asarray(fetch(weight))
            if alpha is not None and y.ndim == 1 and np.any(host_weight > 0):
                # closed form: no program
                return *quantile_init_score(host_y, host_weight, alpha), True
            # a small program of the loss's sums, the search on the host
            sums = slope_sums_program(loss, mesh)
            found = initial_score_on_host(
                lambda scores: np.asarray(sums(y, weight, scores)),
                host_y,
                host_weight,
                bool(metadata_of(loss).convex),
            )
            return *found, True
        if n_outputs > 1 and jax.process_count() == 1 and _is_catalogue_softmax(loss):
            host_y, host_weight = np.asarray(fetch(y)), np.asarray(fetch(weight))
            found = softmax_init_score(host_y, host_weight, n_outputs)
            if found is not None:  # closed form: no program (a vector search compiles ~1 s)
                return *found, True
        platform = mesh.devices.flat[0].platform
        program = init_score_program(loss, n_outputs, mesh, kernels_for(platform).leaf)
        return program(y, weight)
    loss_at = loss_at_score_program(loss, mesh)
    return init_score, loss_at(y, weight, replicated(mesh, init_score)), True


# the code of the catalogue's quantile loss (`jaxboost.losses.quantile`):
# a loss that runs it is that loss, of the alpha its closure holds
_QUANTILE_CODE = _catalogue_quantile(0.5).__wrapped__.__code__


def _catalogue_quantile_alpha(loss) -> float | None:
    """The ``alpha`` of the catalogue's quantile loss ``loss`` (keyed or
    not, in float32 and unscaled), read from the closure its computation
    reads; None for any other loss (a user's, one with offsets, in float64)."""
    declared = plain(loss)  # (a wrapper forwards attributes: the type, not __wrapped__)
    if not isinstance(declared, DeclaredLoss):
        return None
    fn = declared.__wrapped__
    if getattr(fn, "__code__", None) is not _QUANTILE_CODE or fn.__closure__ is None:
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
    return float(cells["alpha"].cell_contents)


def quantile_init_score(
    y: np.ndarray, weight: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.float32]:
    """The initial score of the quantile loss at ``alpha`` on ``y (n_rows,)``
    of ``weight (n_rows,)`` (0 for padding rows), in closed form: the
    weighted ``alpha``-quantile of ``y``, the smallest target whose rows
    at or below it hold at least ``alpha`` of the weight (where the
    loss is flat between two targets, the lower, as the search finds);
    ``(F0 (1,) float32, the weighted mean loss at F0)``, as
    `jaxboost.engine.init_score.initial_score_on_host` returns."""
    kept = weight > 0
    targets, kept_weight = y[kept], weight[kept].astype(np.float64)
    order = np.argsort(targets, kind="stable")
    reached = np.cumsum(kept_weight[order])
    # (a cumulative weight within rounding of alpha's share: the lower target)
    share = alpha * reached[-1] * (1 - 1e-9)
    at = min(int(np.searchsorted(reached, share)), targets.shape[0] - 1)
    score = np.float32(targets[order][at])
    diff = targets.astype(np.float64) - np.float64(score)
    pinball = np.where(diff >= 0, alpha * diff, (alpha - 1.0) * diff)
    mean_loss = np.float32(np.sum(kept_weight * pinball) / np.sum(kept_weight))
    return np.array([score], np.float32), mean_loss


def _is_catalogue_softmax(loss) -> bool:
    """Whether ``loss`` is the catalogue's softmax cross-entropy (keyed or
    not, in float32 and unscaled: a wrapper, such as offsets or float64's,
    is not)."""
    return plain(loss) is _catalogue_softmax


def softmax_init_score(
    y: np.ndarray, weight: np.ndarray, n_classes: int
) -> tuple[np.ndarray, np.float32] | None:
    """The initial score of softmax cross-entropy on labels ``y (n_rows,)``
    of ``weight (n_rows,)`` (0 for padding rows), in closed form: the log of
    each class's share of the weight, less their mean (softmax reads the
    scores up to a constant: the search's minimiser, up to one);
    ``(F0 (K,) float32, the weighted mean loss at F0)``, or None where a
    class has no weight (the minimum is at an infinite score: the search
    reports it) or ``y`` is not one label per row."""
    if y.ndim != 1:
        return None
    labels = y.astype(np.int64)
    kept = weight > 0
    if np.any(labels[kept] != y[kept]) or np.any((labels[kept] < 0) | (labels[kept] >= n_classes)):
        return None
    share = np.bincount(labels[kept], weights=weight[kept].astype(np.float64), minlength=n_classes)
    if not np.all(share > 0):
        return None
    share = share / share.sum()
    log_share = np.log(share)
    mean_loss = np.float32(-np.sum(share * log_share))  # the labels' entropy
    return (log_share - log_share.mean()).astype(np.float32), mean_loss


def finite_init_score(
    loss, n_outputs, mesh, y, weight, given, setting: str, pending, groups=None, rows=None
):
    """The initial score, its training loss, the loss's dtype and scale:
    ``"float32"``, or ``"float64"`` where ``setting`` (the
    ``loss_dtype``) asks for it or, ``"auto"``, where the loss is finite at
    the initial score only in float64; there the loss is scaled by a power of
    two (`jaxboost.runtime.precision.Float64Loss`) where its values or
    gradients are beyond float32 even so.  ``given``, ``groups`` as for
    `start_init_score`, ``pending`` its result, in float64 where
    ``setting`` asks for it, else in float32; ``rows``: this process's
    ``(targets, weight)`` on the host, for the scale and the error.  Warns,
    naming the loss, where the search for the initial score did not converge."""
    init_score, init_loss, converged = fetch(pending)
    finite = _finite(init_score, init_loss)
    dtype, scale = ("float64" if setting == "float64" else "float32"), 1.0
    tries = ([1.0] if setting == "auto" else []) + ([None] if setting != "float32" else [])
    for wide_scale in tries:
        if finite or (wide_scale is None and (groups is not None or rows is None)):
            break
        if wide_scale is None:  # a power of two that brings the sums within float32
            wide_scale = _float32_scale(loss, rows, _scale_score(rows, given, n_outputs))
            if wide_scale is None or wide_scale == 1.0:
                break
        wide = loss_in(loss, "float64", wide_scale)
        wide_score, wide_loss, wide_converged = fetch(
            start_init_score(wide, n_outputs, mesh, y, weight, given, groups)
        )
        if _finite(wide_score, wide_loss):
            scaled = "" if wide_scale == 1.0 else scaled_message(wide_scale)
            if setting == "auto":
                widened = float64_message("the training loss is", "at the initial score")
                warn(widened + (f"; {scaled}" if scaled else ""))
            elif scaled:
                warn(f"loss: {scaled}")
            init_score, init_loss = wide_score, float(wide_loss) / wide_scale
            finite, dtype, scale = True, "float64", wide_scale
            converged = wide_converged
    if finite and not converged:
        name = metadata_of(loss).name
        warn(not_converged_message(name, init_score, float(init_loss)))
    if not finite:
        tried = "float32 and float64" if setting == "auto" else setting
        rows = rows if groups is None else None  # (a group loss has no row's loss)
        score = init_score if rows is None else _scale_score(rows, given, n_outputs)
        raise not_finite_init_error(loss, rows, score, float(init_loss), tried)
    return init_score, init_loss, dtype, scale


def _finite(score, loss) -> bool:
    return bool(np.all(np.isfinite(score)) and np.isfinite(loss))


def _scale_score(rows, given, n_outputs: int) -> np.ndarray:
    """``(K,)`` float64: where a loss's scale is measured: the given initial
    score, else the targets' weighted median (one output), else 0."""
    if given is not None:
        return np.asarray(given, np.float64)
    y, weight = rows
    if n_outputs == 1 and y.ndim == 1:
        order = np.argsort(y)
        reached = np.cumsum(weight[order], dtype=np.float64)
        return np.array([y[order][np.searchsorted(reached, 0.5 * reached[-1])]], np.float64)
    return np.zeros(n_outputs, np.float64)


def _float32_scale(loss, rows, score: np.ndarray) -> float | None:
    """`jaxboost.runtime.precision.float32_scale` of ``loss`` at
    ``score`` over every process's rows, or None where some row's loss or
    gradient is not finite in float64 there."""
    y, weight = rows
    exponent = peak_exponent(*rows_in_float64(loss, y, score), weight)
    # exponents, not sums, cross processes (gathered 64-bit values may be cut to 32)
    no_scale = np.iinfo(np.int32).max
    gathered = gather(np.array([no_scale if exponent is None else exponent], np.int32))
    largest = int(np.max(gathered))
    return None if largest == no_scale else float32_scale(largest)


def search_rows(
    loss: Callable,
    targets: np.ndarray,
    offsets: np.ndarray,
    n_outputs: int,
    widths: tuple[int, ...] | None,
) -> tuple[Callable, np.ndarray]:
    """The loss and the ``(n_rows, T + K)`` float32 rows the initial score's
    search runs on (`OffsetLoss`), keyed as a fit's loss is (``widths``: a
    group loss's padded group lengths, else None)."""
    columns = targets.reshape(targets.shape[0], -1)
    rows = np.concatenate([columns, offsets], axis=1).astype(np.float32)
    wrapped = OffsetLoss(loss, n_outputs, targets.ndim - 1)
    return keyed_loss(wrapped, rows.shape[1:], n_outputs, widths), rows

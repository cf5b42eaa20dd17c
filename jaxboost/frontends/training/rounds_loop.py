"""The boosting rounds of a fit, a chunk of rounds per device program, with
the host's checks between chunks (`jaxboost.engine.round_checks`).

A round whose derivatives or loss were not finite runs again with the loss
evaluated in float64 (``loss_dtype="auto"``), one that raised the training
loss (a subsampled round's: its in-bag rows' loss) with Armijo's safeguard
(``armijo=None``); the rounds before it are run
again from the chunk's start (the same trees: every program is
deterministic) and kept.  Where nothing is left to try, the fit stops with an
error naming the round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from ...engine.metrics import Metric, per_sample
from ...engine.round_checks import (
    Event,
    first_event,
    float64_message,
    loss_rose_message,
    not_finite_error,
)
from ...engine.training import NumericSettings, ShardData, StaticSettings
from ...losses.catalogue import is_catalogue_loss
from ...runtime.distributed import first_process_value
from ...runtime.precision import Float64Loss, loss_in, loss_scale
from ...runtime.same_function import plain
from ...runtime.user_warning import warn
from .monitor import Monitor
from .round_by_round import chunk_program, fused_chunk_program


class Safeguards(NamedTuple):
    """The Booster's settings that say what a round that went wrong may do."""

    armijo: bool | None  # None: switched on after a round that raised the loss
    loss_dtype: str  # "auto": float64 after a round that was not finite in float32
    # a rise of the training loss is looked for (armijo None or False); off
    # for group losses, whose value (lambdarank's weights) may change by round
    watch_rises: bool = True


class RoundsResult(NamedTuple):
    settings: StaticSettings  # as the last rounds ran
    chunks: list  # Tree pytrees of numpy arrays, (n_trees, ...) each
    train_loss: list[float]  # before the first round, then after each kept round


def dtype_of(loss: Callable) -> str:
    """``"float64"`` for a loss the engine evaluates in float64, else ``"float32"``."""
    return "float64" if isinstance(loss, Float64Loss) else "float32"


def metric_in(metric: Metric, loss: Callable, dtype: str, scale: float = 1.0) -> Metric:
    """``metric``, the training loss's (``eval_metric="loss"``) evaluated in
    ``dtype`` and times ``scale`` (the monitor divides its values by it)."""
    inner = metric.per_sample
    inner = inner.loss if isinstance(inner, Float64Loss) else inner
    if inner is None or inner is not loss:
        return metric
    return per_sample(metric.name, loss_in(loss, dtype, scale))


def scaled_settings(hyper: NumericSettings, scale: float, split_criterion: str) -> NumericSettings:
    """``hyper`` for the loss times ``scale`` (a power of two): the settings in
    the loss's units scaled with it, so that the trees are those of the
    loss itself.  Hessian sums, Newton leaves' ``reg_lambda`` and second-order
    gains scale by ``scale``; first-order gains (squared gradient sums over
    weights) by ``scale^2``, and their ``min_child_weight`` counts weights."""
    if scale == 1.0:
        return hyper
    first_order = split_criterion == "first_order"
    return hyper._replace(
        reg_lambda=np.float32(hyper.reg_lambda * scale),
        min_child_weight=hyper.min_child_weight
        if first_order
        else np.float32(hyper.min_child_weight * scale),
        min_split_gain=np.float32(hyper.min_split_gain * scale * (scale if first_order else 1.0)),
        hessian_floor=np.float32(hyper.hessian_floor * scale),
    )


def run_rounds(
    cfg: StaticSettings,
    hyper: NumericSettings,
    mesh: Any,
    data: ShardData,
    edges: jax.Array,
    raw: jax.Array,
    seed: np.uint32,
    monitor: Monitor,
    init_loss: float,
    loss: Callable,
    n_rounds: int,
    safeguards: Safeguards,
    first_round: int = 0,
) -> RoundsResult:
    """Up to ``n_rounds`` rounds from the raw scores ``raw`` (sharded on
    rows), watched by ``monitor``; ``loss`` is the user's (``cfg.loss`` may
    be it in float64).  The programs number the rounds from ``first_round``
    (a continued fit's: its draws are those of one longer fit); the monitor
    from 0."""
    rounds = _Rounds(cfg, hyper, mesh, data, edges, seed, monitor, loss, safeguards)
    rounds.round_offset = int(first_round)
    return rounds.run(raw, float(init_loss), n_rounds)


class _Rounds:
    """The state of a fit's loop over chunks: the program and its settings
    (changed by a remedy), and the warnings still to give."""

    def __init__(self, cfg, hyper, mesh, data, edges, seed, monitor, loss, safeguards):
        self.cfg, self.hyper, self.mesh, self.data = cfg, hyper, mesh, data
        self.edges, self.seed, self.monitor, self.loss = edges, seed, monitor, loss
        self.safeguards = safeguards
        self.program = chunk_program(cfg, mesh)
        self.warned_of_rise = False
        self.widened: str | None = None  # the float64 line, said once its round passed
        self.round_offset = 0  # the programs' number of the fit's first round

    def run(self, raw: jax.Array, init_loss: float, n_rounds: int) -> RoundsResult:
        chunks, train_loss = [], [init_loss]
        first_round = 0
        while first_round < n_rounds:
            n_active = min(self.cfg.rounds_per_chunk, n_rounds - first_round)
            raw, trees, chunk_loss, n_active = self._chunk(raw, first_round, n_active, train_loss)
            if not n_active:
                continue
            trees = jax.tree.map(lambda leaf, n=n_active: _flatten_rounds(leaf[:n]), trees)
            # process 0's evaluation sets and callbacks decide for every process
            kept, stop = first_process_value(
                self.monitor.after_chunk(trees, chunk_loss, first_round)
            )
            n_trees = int(kept) * self.cfg.trees_per_round
            chunks.append(jax.tree.map(lambda leaf, n=n_trees: leaf[:n], trees))
            train_loss.extend(float(value) for value in chunk_loss[: int(kept)])
            first_round += n_active
            if bool(stop):
                break
        return RoundsResult(self.cfg, chunks, train_loss)

    def _dispatch(self, raw, first_round: int, n_active: int):
        """One chunk's program, its trees and losses fetched (blocking before
        the next dispatch: queued collective programs can deadlock on CPU
        devices).  The scores stay on the devices: fetched, they would come
        back as host arrays, for which the program would compile again."""
        raw, trees, chunk_loss, n_not_finite, n_stuck, in_bag = self.program(
            self.data,
            self.edges,
            raw,
            self.round_offset + first_round,
            n_active,
            self.seed,
            self.hyper,
        )
        n_stuck = None if n_stuck is None else n_stuck[:n_active]
        # the loss's own values, where the engine's carry a scale
        scale = loss_scale(self.cfg.loss)
        chunk_loss = np.asarray(chunk_loss[:n_active], np.float64) / scale
        if in_bag is not None:
            in_bag = np.asarray(in_bag[:n_active], np.float64) / scale
        return raw, trees, chunk_loss, n_not_finite[:n_active], n_stuck, in_bag

    def _chunk(self, raw, first_round: int, n_active: int, train_loss: list[float]):
        """``(raw, trees, chunk_loss, n_kept)``: the chunk's rounds up to the
        first that went wrong (whose remedy then applies from there on)."""
        start_raw = raw
        raw, trees, chunk_loss, n_not_finite, n_stuck, in_bag = self._dispatch(
            raw, first_round, n_active
        )
        switch_on_rise = (
            self.safeguards.armijo is None and not self.cfg.armijo and self.safeguards.watch_rises
        )
        event = first_event(
            chunk_loss, n_not_finite, train_loss[-1], switch_on_rise, n_stuck, in_bag
        )
        if event is None:
            self._say_after_clean_chunk(
                chunk_loss, n_not_finite, in_bag, first_round, train_loss[-1]
            )
            return raw, trees, chunk_loss, n_active
        if event.index:  # (what the kept rounds have to say)
            kept = slice(event.index)
            self._say_after_clean_chunk(
                chunk_loss[kept],
                n_not_finite[kept],
                None if in_bag is None else in_bag[kept],
                first_round,
                train_loss[-1],
            )
        if event.kind == "stuck_leaves":  # the fused program, with its line search
            remedied, program = self.cfg, fused_chunk_program(self.cfg, self.mesh)
        else:
            remedied = self._remedy(event, first_round)
            program = chunk_program(remedied, self.mesh)
        if event.index:  # the rounds before the event, again (the same trees)
            raw, trees, chunk_loss, *_ = self._dispatch(start_raw, first_round, event.index)
        else:
            raw = start_raw
        self.cfg, self.program = remedied, program
        dtype = dtype_of(remedied.loss)
        self.monitor.metrics = [metric_in(m, self.loss, dtype) for m in self.monitor.metrics]
        return raw, trees, chunk_loss, event.index

    def _remedy(self, event: Event, first_round: int) -> StaticSettings:
        """The settings that run the round of ``event`` again (Armijo's
        safeguard on after a rise, the loss in float64 after non-finite
        values); raises where nothing is left to try."""
        if event.kind == "loss_rose":
            warn(loss_rose_message(event, first_round, True))
            return dataclasses.replace(self.cfg, armijo=True)
        if self.safeguards.loss_dtype == "auto" and not isinstance(self.cfg.loss, Float64Loss):
            what = "gradient or hessian is" if event.n_rows else "training loss is"
            where = f"at round {first_round + event.index + 1}"
            self.widened = float64_message("the " + what, where)
            return dataclasses.replace(self.cfg, loss=loss_in(self.loss, "float64"))
        loss = plain(self.loss)
        catalogue = loss.name if is_catalogue_loss(loss) else None
        raise not_finite_error(event, first_round, catalogue, self.cfg.hessian == "fisher")

    def _say_after_clean_chunk(self, chunk_loss, n_not_finite, in_bag, first_round, loss_before):
        """The float64 line once its round has passed; with ``armijo=False``,
        one warning at the first round that raised the loss (``in_bag``: as
        in `first_event`)."""
        if self.widened is not None:
            warn(self.widened)
            self.widened = None
        elif (
            self.safeguards.armijo is False
            and self.safeguards.watch_rises
            and not self.warned_of_rise
        ):
            rise = first_event(
                chunk_loss, n_not_finite, loss_before, watch_rises=True, in_bag=in_bag
            )
            if rise is not None:
                warn(loss_rose_message(rise, first_round, False))
                self.warned_of_rise = True


def _flatten_rounds(leaf: np.ndarray) -> np.ndarray:
    """``(n_rounds, trees_per_round, ...)`` -> ``(n_rounds * trees_per_round, ...)``."""
    return leaf.reshape((-1,) + leaf.shape[2:])

"""A chunk of rounds run one round at a time, on a small program per loss
and a loss-free tree program (`jaxboost.engine.round_programs`), or
as one fused program; which one, `chunk_program` decides.

Both take and give what `jaxboost.engine.training.train_chunk_program`
does (its in-bag losses last), plus the leaves per round that needed a line
search the round-by-round programs do not run (None from the fused program):
the rounds loop
(`jaxboost.frontends.rounds_loop`) runs such a round again on the fused
program.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh

from ..engine.round_programs import (
    derivatives_program,
    empty_record,
    loss_free,
    loss_settings,
    runs_round_by_round,
    tree_round_program,
)
from ..engine.training import StaticSettings, judges_rises_in_bag, train_chunk_program
from ..runtime.distributed import fetch, replicated


def chunk_program(cfg: StaticSettings, mesh: Mesh) -> Callable:
    """``(data, edges, raw, first_round, n_active, seed, hyper) -> (raw,
    trees, train_loss, n_not_finite, n_stuck, in_bag)``, all but ``raw``
    fetched to the host (see `jaxboost.engine.training.train_chunk_program`).

    Round by round where the settings allow it (`runs_round_by_round`)
    and the fit is small (``cfg.fast_compile``: at most
    `jaxboost.runtime.workarounds.FAST_COMPILE_ROWS` rows of all
    shards): there compiling the fused program is what a fit with a new
    loss waits for, and a round's two dispatches cost little beside its
    work.  Else the fused program, whose one dispatch per chunk pays on many
    rows.
    """
    if runs_round_by_round(cfg) and cfg.fast_compile:
        return RoundByRound(cfg, mesh)
    return fused_chunk_program(cfg, mesh)


def fused_chunk_program(cfg: StaticSettings, mesh: Mesh) -> Callable:
    """`chunk_program`'s fused program, whatever the fit's size."""
    fused = train_chunk_program(cfg, mesh)

    def run_fused(*args):
        raw, trees, train_loss, n_not_finite, in_bag = fused(*args)
        trees, train_loss, n_not_finite, in_bag = fetch((trees, train_loss, n_not_finite, in_bag))
        return raw, trees, train_loss, n_not_finite, None, in_bag

    return run_fused


class RoundByRound:
    """Runs rounds on `derivatives_program` and `tree_round_program`.

    The trees and counts of a chunk's rounds stay on the devices (a
    `RoundRecord`) and are fetched once per chunk; the derivatives
    at a chunk's last scores (taken for its last training loss) are kept
    for the next chunk's first round.  A subsampled fit's derivatives come
    with the in-bag losses of the round they start
    (`jaxboost.engine.training.judges_rises_in_bag`).
    """

    def __init__(self, cfg: StaticSettings, mesh: Mesh):
        self.cfg = cfg
        self.derivatives = derivatives_program(loss_settings(cfg), mesh)
        self.tree_round = tree_round_program(loss_free(cfg), mesh)
        self.judged_in_bag = judges_rises_in_bag(cfg)
        # queued collective programs can deadlock on CPU devices: several
        # devices wait for each program before the next
        self.blocking = mesh.size > 1
        self._kept: tuple | None = None  # (raw, its round, its derivatives)
        # (placed as the program places its record: else the second round's
        # placement differs from the first's, and the program compiles twice)
        self.empty_record = jax.tree.map(lambda zeros: replicated(mesh, zeros), empty_record(cfg))

    def _wait(self, outputs):
        """``outputs``, waited for where several devices run the programs."""
        return jax.block_until_ready(outputs) if self.blocking else outputs

    def _bag(self, data, round_index: int, seed, hyper) -> tuple:
        """`derivatives_program`'s ``bag`` argument for round ``round_index``,
        as a tuple of the arguments after ``raw``."""
        if not self.judged_in_bag:
            return ()
        return ((data.row_id, np.int32(round_index), seed, hyper.subsample),)

    def __call__(self, data, edges, raw, first_round: int, n_active: int, seed, hyper):
        """Rounds ``first_round .. first_round + n_active - 1`` from ``raw``: as
        `chunk_program`'s program."""
        bag = self._bag(data, first_round, seed, hyper)
        derivatives = self.derivatives.compiled_for(data.y, data.weight, raw, *bag)
        kept = self._kept
        if kept is not None and kept[0] is raw and kept[1] == first_round:
            at_raw = kept[2]
        else:
            at_raw = self._wait(derivatives(data.y, data.weight, raw, *bag))
        record = self.empty_record
        tree_round = None
        for slot in range(n_active):
            arguments = (data, edges, raw, *at_raw, record, first_round, slot, seed, hyper)
            tree_round = tree_round or self.tree_round.compiled_for(*arguments)
            raw, record = self._wait(tree_round(*arguments))
            bag = self._bag(data, first_round + slot + 1, seed, hyper)
            at_raw = self._wait(derivatives(data.y, data.weight, raw, *bag))
        self._kept = (raw, first_round + n_active, at_raw)
        record, last_loss = fetch((record, at_raw[3]))
        train_loss, in_bag = _chunk_losses(record.loss_before, last_loss, n_active)
        return raw, record.trees, train_loss, record.n_not_finite, record.n_stuck, in_bag


def _chunk_losses(loss_before: np.ndarray, last_loss, n_active: int):
    """``(train_loss (n_active,), in_bag)``: each round's training loss
    after it and (``in_bag``, ``(n_active, 2)``, or None) its in-bag loss
    before and after it, from the `RoundRecord`'s losses at each round's
    start and ``last_loss``, the derivatives program's at the chunk's last
    scores."""
    if loss_before.ndim == 1:
        return np.append(loss_before[1:n_active], np.float32(last_loss)), None
    last_loss = np.asarray(last_loss)
    train_loss = np.append(loss_before[1:n_active, 0], last_loss[0])
    after = np.append(loss_before[1:n_active, 2], last_loss[2])
    return train_loss, np.stack([loss_before[:n_active, 1], after], axis=1)

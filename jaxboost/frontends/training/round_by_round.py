"""A chunk of rounds run one round at a time, on a small program per loss
and a loss-free tree program (`jaxboost.engine.round_programs`), or
as one fused program; which one, `chunk_program` decides.

Both take what `jaxboost.engine.training_programs.train_chunk_program` does and
give what it does: with the leaves per round that needed a line search the
program did not run (the round-by-round programs and a fused program that
leaves such searches out; None from the one that runs them) before its
in-bag losses.  The rounds loop (`jaxboost.frontends.training.rounds_loop`)
runs such a round again on the fused program that searches,
`fused_chunk_program`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh

from ...engine.round_losses import judges_rises_in_bag
from ...engine.round_programs import (
    derivatives_program,
    empty_record,
    in_bag_program,
    loss_free,
    loss_settings,
    runs_round_by_round,
    tree_round_program,
)
from ...engine.training import StaticSettings
from ...engine.training_programs import train_chunk_program
from ...runtime.distributed import fetch, replicated


def chunk_program(cfg: StaticSettings, mesh: Mesh) -> Callable:
    """``(data, edges, raw, first_round, n_active, seed, hyper) -> (raw,
    trees, train_loss, n_not_finite, n_stuck, in_bag)``, all but ``raw``
    fetched to the host (see `jaxboost.engine.training_programs.train_chunk_program`).

    Round by round where the settings allow it (`runs_round_by_round`)
    and the fit is small (``cfg.fast_compile``: at most
    `jaxboost.runtime.workarounds.FAST_COMPILE_ROWS` rows of all
    shards): there compiling the fused program is what a fit with a new
    loss waits for, and a round's two dispatches cost little beside its
    work.  Else the fused program, whose one dispatch per chunk pays on many
    rows; for the same settings it leaves out the line search of leaves
    without a Newton step, which it reports as the round-by-round
    programs do (the search is about a third of its compile and runs in
    few fits).
    """
    if runs_round_by_round(cfg) and cfg.fast_compile:
        return RoundByRound(cfg, mesh)
    if runs_round_by_round(cfg):
        return fused_chunk_program(dataclasses.replace(cfg, searches_stuck_leaves=False), mesh)
    return fused_chunk_program(cfg, mesh)


def fused_chunk_program(cfg: StaticSettings, mesh: Mesh) -> Callable:
    """`chunk_program`'s fused program, whatever the fit's size: as
    ``cfg`` says, with the line search of leaves without a Newton step
    (their count None) or without (counted)."""
    fused = train_chunk_program(cfg, mesh)

    def run_fused(*args):
        raw, *outputs = fused(*args)
        trees, train_loss, n_not_finite, n_stuck, in_bag = fetch(tuple(outputs))
        if cfg.searches_stuck_leaves:
            n_stuck = None
        return raw, trees, train_loss, n_not_finite, n_stuck, in_bag

    return run_fused


class RoundByRound:
    """Runs rounds on `derivatives_program` and `tree_round_program`.

    The trees and counts of a chunk's rounds stay on the devices (a
    `RoundRecord`) and are fetched once per chunk; the derivatives
    at a chunk's last scores (taken for its last training loss) are kept
    for the next chunk's first round.  A subsampled fit's tree program
    records its rounds' in-bag losses from the rows' losses the derivatives
    come with (`jaxboost.engine.round_losses.judges_rises_in_bag`), and
    `in_bag_program` those after the chunk's last round.
    """

    def __init__(self, cfg: StaticSettings, mesh: Mesh):
        self.cfg, self.mesh = cfg, mesh
        self.derivatives = derivatives_program(loss_settings(cfg), mesh)
        self.tree_round = tree_round_program(loss_free(cfg), mesh)
        self.judged_in_bag = judges_rises_in_bag(cfg)
        # queued collective programs can deadlock on CPU devices: several
        # devices wait for each program before the next
        self.blocking = mesh.size > 1
        self._kept: tuple | None = None  # (raw, its derivatives)
        # (placed as the program places its record: else the second round's
        # placement differs from the first's, and the program compiles twice)
        self.empty_record = jax.tree.map(lambda zeros: replicated(mesh, zeros), empty_record(cfg))

    def _wait(self, outputs):
        """``outputs``, waited for where several devices run the programs."""
        return jax.block_until_ready(outputs) if self.blocking else outputs

    def __call__(self, data, edges, raw, first_round: int, n_active: int, seed, hyper):
        """Rounds ``first_round .. first_round + n_active - 1`` from ``raw``: as
        `chunk_program`'s program."""
        derivatives = self.derivatives.compiled_for(data.y, data.weight, raw)
        at_raw = self._kept[1] if self._kept is not None and self._kept[0] is raw else None
        if at_raw is None:
            at_raw = self._wait(derivatives(data.y, data.weight, raw))
        record = self.empty_record
        tree_round = None
        for slot in range(n_active):
            arguments = (data, edges, raw, *at_raw, record, first_round, slot, seed, hyper)
            tree_round = tree_round or self.tree_round.compiled_for(*arguments)
            raw, record = self._wait(tree_round(*arguments))
            at_raw = self._wait(derivatives(data.y, data.weight, raw))
        self._kept = (raw, at_raw)
        last_in_bag = None
        if self.judged_in_bag:  # (the last round's rows after it)
            draw = (np.int32(first_round + n_active), seed, hyper.subsample)
            last_in_bag = in_bag_program(self.mesh)(at_raw[4], data.weight, data.row_id, *draw)
        record, last_loss, last_in_bag = fetch((record, at_raw[3], last_in_bag))
        train_loss, in_bag = _chunk_losses(record.loss_before, last_loss, last_in_bag, n_active)
        return raw, record.trees, train_loss, record.n_not_finite, record.n_stuck, in_bag


def _chunk_losses(loss_before: np.ndarray, last_loss, last_in_bag, n_active: int):
    """``(train_loss (n_active,), in_bag)``: each round's training loss
    after it and (``in_bag``, ``(n_active, 2)``, or None) its in-bag loss
    before and after it, from the `RoundRecord`'s losses at each round's
    start and ``last_loss`` and ``last_in_bag`` (or None), those at the
    chunk's last scores."""
    if last_in_bag is None:
        return np.append(loss_before[1:n_active], np.float32(last_loss)), None
    train_loss = np.append(loss_before[1:n_active, 0], np.float32(last_loss))
    after = np.append(loss_before[1:n_active, 2], np.asarray(last_in_bag)[1])
    return train_loss, np.stack([loss_before[:n_active, 1], after], axis=1)

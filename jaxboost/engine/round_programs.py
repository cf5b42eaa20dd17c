"""The programs of a fit run round by round: a small one per loss, a large
one per shape that no loss is part of.

`jaxboost.engine.training_programs.train_chunk_program` compiles a chunk of
rounds, loss included, into one program: the fastest way to run many rounds,
but a new loss means compiling all of it again (binning aside, almost
nothing in it depends on the loss).  Here a round is two programs:

- `derivatives_program`: the loss's gradients, hessians and value at
  the current scores (the only program a new loss compiles), and
- `tree_round_program`: the trees from those derivatives and the
  updated scores (`jaxboost.engine.training.grow_round` with no loss),
  compiled once per shape and setting for every loss.

A subsampled fit takes its rounds' in-bag losses from the rows' losses the
derivatives program gives (in the tree program, and after a chunk's last
round in `in_bag_program`), so that a new loss still compiles one program.

A round whose Newton leaves needed a line search (a leaf whose regularised
hessian is not positive) is reported, not searched: that needs the loss, so
its caller runs such a round with the fused program.  Only settings whose
rounds need nothing else of the loss run this way
(`runs_round_by_round`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from ..runtime.devices import ROWS, collective_axis
from ..runtime.lifted_values import bound
from ..runtime.program_cache import one_program_per_shape, values_as_input
from ..runtime.workarounds import fast_compile_options, vector_output_compiler_options
from .categorical import BITSET_WORDS
from .derivatives import Loss, directional_derivatives, sample_loss
from .round_losses import count_not_finite, in_bag_losses, judges_rises_in_bag, mean_loss
from .training import StaticSettings, grow_round, round_derivatives
from .training_programs import data_specs
from .tree import Tree


def runs_round_by_round(cfg: StaticSettings) -> bool:
    """Whether ``cfg``'s rounds need the loss only through the rows'
    derivatives and training loss: a per-sample loss with Newton leaves and
    no Armijo safeguard (line searches, Armijo's and joint Newton evaluate
    the loss inside the tree's round)."""
    return cfg.leaf_method == "newton" and not cfg.armijo and not cfg.grouped


def loss_free(cfg: StaticSettings) -> StaticSettings:
    """``cfg`` without its loss: the settings of the tree program."""
    return dataclasses.replace(cfg, loss=None)


def loss_settings(cfg: StaticSettings) -> StaticSettings:
    """``cfg``'s settings that the derivatives program depends on, the
    others at their defaults (so that trees of another depth share it)."""
    return StaticSettings(
        loss=cfg.loss,
        n_outputs=cfg.n_outputs,
        max_depth=0,
        hessian=cfg.hessian,
        vector_row_options=cfg.vector_row_options,
        fast_compile=cfg.fast_compile,
    )


def _compiler_options(cfg: StaticSettings, mesh: Mesh) -> dict | None:
    """`jax.jit`'s ``compiler_options`` for ``cfg``'s programs."""
    platform = mesh.devices.flat[0].platform
    options = vector_output_compiler_options(platform) if cfg.vector_row_options else {}
    options = {**options, **fast_compile_options(platform)}
    return options or None


@values_as_input
@one_program_per_shape()
def derivatives_program(cfg: StaticSettings, mesh: Mesh) -> Callable:
    """``(y, weight, raw (n_rows, K)) -> (grad, hess, n_not_finite,
    train_loss, row_loss)``, jitted and sharded on rows: every row's
    unweighted gradient ``(n_rows, K)`` and hessian ``(n_rows, K[, K])`` at
    ``raw`` (`jaxboost.engine.training.round_derivatives`), the rows of
    positive weight whose derivatives are not finite, the weighted mean
    loss (scalars, over all shards) and every row's loss ``(n_rows,)``, of
    which a subsampled fit's rounds take their in-bag losses
    (`tree_round_program`, `in_bag_program`: no loss of their own)."""
    axis_name = collective_axis(mesh)

    def derivatives(values, y, weight, raw):
        with bound(cfg, values):
            grad, hess = round_derivatives(cfg, y, raw)
            n_not_finite = count_not_finite(grad, hess, weight, axis_name)
            row_loss = sample_loss(cfg.loss, y, raw)
            total = mean_loss(cfg.loss, y, weight, raw, axis_name)
        return grad, hess, n_not_finite, total, row_loss

    sharded = jax.shard_map(
        derivatives,
        mesh=mesh,
        in_specs=(P(), P(ROWS), P(ROWS), P(ROWS)),
        out_specs=(P(ROWS), P(ROWS), P(), P(), P(ROWS)),
        check_vma=False,
    )
    return jax.jit(sharded, compiler_options=_compiler_options(cfg, mesh))


@one_program_per_shape()
def in_bag_program(mesh: Mesh) -> Callable:
    """``(row_loss, weight, row_id, round_index, seed, fraction) -> (2,)``,
    jitted and sharded on rows: `jaxboost.engine.training.in_bag_losses`
    of `derivatives_program`'s ``row_loss``; shared by every loss."""
    axis_name = collective_axis(mesh)

    def chunk_in_bag_losses(row_loss, weight, row_id, *draw):
        return in_bag_losses(row_loss, weight, row_id, draw, axis_name)

    sharded = jax.shard_map(
        chunk_in_bag_losses,
        mesh=mesh,
        in_specs=(P(ROWS), P(ROWS), P(ROWS), P(), P(), P()),
        out_specs=P(),
        check_vma=False,
    )
    platform = mesh.devices.flat[0].platform
    return jax.jit(sharded, compiler_options=fast_compile_options(platform) or None)


class RoundRecord(NamedTuple):
    """What a chunk's rounds leave for the host, one slot per round: the
    trees ``(rounds_per_chunk, trees_per_round, ...)``, and ``(rounds_per_chunk,)``
    the training loss before each round (``(rounds_per_chunk, 3)``, then
    its two `jaxboost.engine.training.in_bag_losses`, where
    `jaxboost.engine.training.judges_rises_in_bag`), the rows whose
    derivatives were not finite at its start and its leaves that needed a
    line search."""

    trees: Tree
    loss_before: jax.Array
    n_not_finite: jax.Array
    n_stuck: jax.Array


def empty_record(cfg: StaticSettings) -> RoundRecord:
    """A `RoundRecord` of ``cfg.rounds_per_chunk`` rounds of zeros (numpy)."""
    rounds, n_trees = cfg.rounds_per_chunk, cfg.trees_per_round
    n_internal, n_nodes = cfg.tree_nodes
    nodes = (rounds, n_trees, n_internal)
    children = np.zeros(nodes, np.int32) if cfg.node_tables else None
    trees = Tree(
        feature=np.zeros(nodes, np.int32),
        threshold=np.zeros(nodes, np.float32),
        threshold_bin=np.zeros(nodes, np.int32),
        missing_left=np.zeros(nodes, bool),
        split_gain=np.zeros(nodes, np.float32),
        leaf_value=np.zeros((rounds, n_trees, n_nodes, cfg.n_outputs), np.float32),
        leaf_weight=np.zeros((rounds, n_trees, n_nodes), np.float32),
        category_left=None
        if cfg.categorical is None
        else np.zeros((*nodes, BITSET_WORDS), np.uint32),
        leaf_cover=np.zeros((rounds, n_trees, n_nodes), np.float32),
        left_child=children,
        right_child=children,
    )
    losses = np.zeros((rounds, 3) if judges_rises_in_bag(cfg) else rounds, np.float32)
    return RoundRecord(trees, losses, np.zeros(rounds, np.int32), np.zeros(rounds, np.int32))


@one_program_per_shape()
def tree_round_program(cfg: StaticSettings, mesh: Mesh) -> Callable:
    """``(data, edges, raw, grad, hess, n_not_finite, loss_before, row_loss,
    record, first_round, slot, seed, hyper) -> (raw, record)``, jitted and
    sharded: round ``first_round + slot``'s trees from the rows' derivatives
    and what `derivatives_program` said of them
    (`jaxboost.engine.training.grow_round`), written into slot ``slot``
    of ``record`` (a `RoundRecord`, replicated), with the round's in-bag
    losses where `jaxboost.engine.training.judges_rises_in_bag`.
    ``cfg.loss`` must be None (`loss_free`), so every loss shares the
    program."""
    if cfg.loss is not None:
        raise ValueError("tree_round_program: settings without a loss (loss_free(cfg))")
    axis_name = collective_axis(mesh)
    judged_in_bag = judges_rises_in_bag(cfg)

    def tree_round(
        data, edges, raw, grad, hess, n_not_finite, loss_before, row_loss, record, *rest
    ):
        first, slot, seed, hyper = rest
        if judged_in_bag:
            draw = (first + slot, seed, hyper.subsample)
            in_bag = in_bag_losses(row_loss, data.weight, data.row_id, draw, axis_name)
            loss_before = jnp.concatenate([loss_before[None], in_bag])
        trees, raw, n_stuck = grow_round(
            cfg, hyper, data, edges, raw, grad, hess, first + slot, seed, axis_name
        )

        def put(kept: jax.Array, new: jax.Array) -> jax.Array:
            # (lax's update: slot is in range, jnp's would wrap negative slots)
            return jax.lax.dynamic_update_index_in_dim(kept, new, slot, 0)

        record = RoundRecord(
            jax.tree.map(put, record.trees, trees),
            put(record.loss_before, loss_before),
            put(record.n_not_finite, n_not_finite),
            put(record.n_stuck, n_stuck),
        )
        return raw, record

    replicated = RoundRecord(P(), P(), P(), P())
    sharded = jax.shard_map(
        tree_round,
        mesh=mesh,
        in_specs=(data_specs(cfg), P(), P(ROWS), P(ROWS), P(ROWS), P(), P(), P(ROWS))
        + (replicated, P(), P(), P(), P()),
        out_specs=(P(ROWS), replicated),
        check_vma=False,
    )
    return jax.jit(sharded, compiler_options=_compiler_options(cfg, mesh))


@values_as_input
@one_program_per_shape()
def slope_sums_program(loss: Loss, mesh: Mesh) -> Callable:
    """``(y, weight, scores (P,)) -> (P, 5)``, jitted and sharded: at every
    row's raw score equal to each of ``scores``, the weighted sums over all
    rows of the loss's slope, curvature (the line search's,
    `jaxboost.engine.derivatives.directional_derivatives`), absolute
    slope, value and 1, for one output: what
    `jaxboost.engine.init_score.initial_score_on_host` asks for."""
    axis_name = collective_axis(mesh)

    def slope_sums(values, y, weight, scores):
        with bound(loss, values):
            return sums(y, weight, scores)

    def sums(y, weight, scores):
        def sums_at(score):
            raw = jnp.broadcast_to(score, (weight.shape[0], 1))
            slope, curvature = directional_derivatives(loss, y, raw, jnp.ones_like(raw))
            value = sample_loss(loss, y, raw)
            terms = jnp.stack([slope, curvature, jnp.abs(slope), value, jnp.ones_like(value)])
            return jnp.sum(weight * terms, axis=1)

        totals = jax.vmap(sums_at)(scores)
        return jax.lax.psum(totals, axis_name) if axis_name is not None else totals

    sharded = jax.shard_map(
        slope_sums, mesh=mesh, in_specs=(P(), P(ROWS), P(ROWS), P()), out_specs=P(), check_vma=False
    )
    platform = mesh.devices.flat[0].platform
    return jax.jit(sharded, compiler_options=fast_compile_options(platform) or None)

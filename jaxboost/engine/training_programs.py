"""The training programs, compiled once per shape and structure
(`jaxboost.runtime.program_cache`): the fused chunk of rounds, the initial
score's search, the loss at a score (per sample, per group) and the binning
of rows; each shards its rows over a mesh.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from ..kernels.leaf_sums import LEAF_KERNELS
from ..runtime.devices import ROWS, collective_axis
from ..runtime.lifted_values import bound
from ..runtime.program_cache import one_program_per_shape, values_as_input
from ..runtime.workarounds import fast_compile_options, vector_output_compiler_options
from .binning import apply_bins, apply_bins_native
from .derivatives import Loss
from .groups import GroupBucket, mean_group_loss
from .init_score import searched_initial_score
from .round_losses import (
    mean_loss_at,
)
from .training import (
    ShardData,
    StaticSettings,
    _train_chunk,
)


def data_specs(cfg: StaticSettings) -> ShardData:
    """How `ShardData` is sharded: on rows, group tables on groups."""
    groups = tuple(GroupBucket(P(ROWS), P(ROWS), P(ROWS)) for _ in cfg.group_widths)
    return ShardData(
        bins=P(None, ROWS),
        y=P(ROWS),
        weight=P(ROWS),
        row_id=P(ROWS),
        groups=groups,
        packed=P(),
        columns=P(),
    )


@values_as_input
@one_program_per_shape()
def train_chunk_program(cfg: StaticSettings, mesh: Mesh) -> Callable:
    """``(data, edges, raw, first_round, n_active, seed, hyper) -> (raw, trees,
    train_loss, n_not_finite, n_stuck, in_bag)`` (see `_train_chunk`),
    jitted and sharded; trees have a leading ``(rounds_per_chunk,
    trees_per_round)`` axis.  Rounds at or after ``n_active`` are skipped (no
    work; zeros the caller discards), so the last, partial chunk reuses the
    program, and so does a fit with another ``n_estimators``; so does
    another value of the loss's numbers (`values_as_input`)."""
    axis_name = collective_axis(mesh)

    def train_chunk(values, *args):
        with bound(cfg, values):
            return _train_chunk(cfg, axis_name, *args)

    sharded = jax.shard_map(
        train_chunk,
        mesh=mesh,
        in_specs=(P(), data_specs(cfg), P(), P(ROWS), P(), P(), P(), P()),
        out_specs=(P(ROWS), P(), P(), P(), P(), P()),
        check_vma=False,
    )
    platform = mesh.devices.flat[0].platform
    options = vector_output_compiler_options(platform) if cfg.vector_row_options else {}
    options = {**options, **fast_compile_options(platform)}
    return jax.jit(sharded, compiler_options=options or None)


# the targets and weights alone, sharded on rows: the initial score needs no
# bins, so that it can run while the host computes the bin edges
_TARGET_SPECS = (P(ROWS), P(ROWS))


@values_as_input
@one_program_per_shape()
def init_score_program(
    loss: Loss,
    n_outputs: int,
    mesh: Mesh,
    leaf_kernels: str = "reference",
) -> Callable:
    """``(y, weight) -> (F0 (K,), train_loss at F0, converged)``, jitted and
    sharded (``y``, ``weight``: the rows of `ShardData`; ``converged``
    as in `jaxboost.engine.init_score.searched_initial_score`);
    ``leaf_kernels`` as in `StaticSettings`."""
    axis_name = collective_axis(mesh)

    def initial_score(values, y, weight):
        kernels = LEAF_KERNELS[leaf_kernels]
        with bound(loss, values):
            found = searched_initial_score(loss, y, weight, n_outputs, axis_name, kernels)
            score, converged = found
            return score, mean_loss_at(loss, y, weight, score, axis_name), converged

    sharded = jax.shard_map(
        initial_score,
        mesh=mesh,
        in_specs=(P(), *_TARGET_SPECS),
        out_specs=(P(), P(), P()),
        check_vma=False,
    )
    platform = mesh.devices.flat[0].platform
    options = vector_output_compiler_options(platform) if n_outputs > 1 else {}
    options = {**options, **fast_compile_options(platform)}
    return jax.jit(sharded, compiler_options=options or None)


@values_as_input
@one_program_per_shape()
def loss_at_score_program(loss: Loss, mesh: Mesh) -> Callable:
    """``(y, weight, score (K,)) -> train_loss at score``, jitted and sharded:
    the first training loss of a fit whose initial score is given."""
    axis_name = collective_axis(mesh)

    def loss_at_score(values, y, weight, score):
        with bound(loss, values):
            return mean_loss_at(loss, y, weight, score, axis_name)

    sharded = jax.shard_map(
        loss_at_score,
        mesh=mesh,
        in_specs=(P(), *_TARGET_SPECS, P()),
        out_specs=P(),
        check_vma=False,
    )
    return jax.jit(sharded)


@values_as_input
@one_program_per_shape()
def group_loss_at_score_program(loss: Loss, n_buckets: int, mesh: Mesh) -> Callable:
    """``(y, groups, score (1,)) -> loss per group at score``, jitted and
    sharded: a group loss's first training loss (its initial score is 0 or
    the given ``base_score``)."""
    axis_name = collective_axis(mesh)

    def group_loss_at_score(values, y, groups, score):
        raw = jnp.broadcast_to(score, (y.shape[0], 1))
        with bound(loss, values):
            return mean_group_loss(loss, y, raw, groups, axis_name)

    group_specs = tuple(GroupBucket(P(ROWS), P(ROWS), P(ROWS)) for _ in range(n_buckets))
    sharded = jax.shard_map(
        group_loss_at_score,
        mesh=mesh,
        in_specs=(P(), P(ROWS), group_specs, P()),
        out_specs=P(),
        check_vma=False,
    )
    return jax.jit(sharded)


@one_program_per_shape()
def bin_rows_program(mesh: Mesh, native: bool = False) -> Callable:
    """``(X (n_rows, n_features) sharded on rows, edges) -> bins (n_features,
    n_rows)`` sharded on rows: every device bins its own rows (``native``:
    with the native CPU kernel, each shard stored by tiles of rows as the
    native histogram and routing kernels read it, see
    `jaxboost.engine.binning.tile_bins`)."""
    sharded = jax.shard_map(
        apply_bins_native if native else apply_bins,
        mesh=mesh,
        in_specs=(P(ROWS), P()),
        out_specs=P(None, ROWS),
        check_vma=False,
    )
    return jax.jit(sharded)

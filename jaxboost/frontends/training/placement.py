"""A fit's rows on the devices: padded, sharded (a group loss's groups whole
on one device), binned there (`jaxboost.frontends.training.row_binning`), and the
initial score searched with them (`jaxboost.frontends.training.initial_score_search`).

``settings``: the fit's settings record
(`jaxboost.frontends.settings.settings_table.settings_record`: ``devices``,
``max_bins``, ``random_state``, ``loss_dtype``, ``base_score``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from ...engine.groups import GroupBucket
from ...engine.metrics import Metric
from ...engine.training import ShardData
from ...runtime.devices import check_devices, default_training_devices, make_mesh
from ...runtime.distributed import (
    RowLayout,
    fetch,
    first_process_value,
    gather,
    gather_same_shape,
    global_rows,
    row_layout,
)
from ...runtime.precision import loss_in
from ..data.grouping import (
    GroupedRows,
    GroupPlacement,
    agreed_shapes,
    place_groups,
    placement_shapes,
)
from ..data.offsets import start_scores
from ..settings.checks import draw_seed, given_base_score
from .compile_ahead import start_loss_programs
from .computation_keys import group_widths
from .continued import ContinuedFrom
from .initial_score_search import finite_init_score, search_rows, start_init_score
from .monitor import EvalSet
from .row_binning import bin_edges, shard_rows, trained_columns


class FitInputs(NamedTuple):
    """``fit``'s arguments, checked and converted."""

    features: np.ndarray  # (n_rows, n_features) float32, NaN for missing
    targets: np.ndarray  # (n_rows,) or (n_rows, n_targets) float32
    weight: np.ndarray  # (n_rows,) float32
    names: list[str] | None  # the columns' names of a DataFrame
    loss: Callable
    eval_sets: list[EvalSet]
    metrics: list[Metric]
    n_outputs: int
    groups: GroupedRows | None  # a group loss's groups, else None
    offsets: np.ndarray | None = None  # (n_rows, n_outputs) float32: fit's init_score
    continued: ContinuedFrom | None = None  # init_model's rounds, to continue from
    # the categorical columns' codes (jaxboost.frontends.data.categories), or None
    categories: list | None = None


class PlacedRows(NamedTuple):
    """The training rows on the devices, and what was computed with them."""

    mesh: Any  # jax.sharding.Mesh of the training devices
    layout: RowLayout
    data: ShardData  # sharded on rows, binned
    edges: np.ndarray  # (n_features, k) bin edges
    seed: np.uint32
    init_score: np.ndarray  # (n_outputs,) float32
    init_loss: float
    loss_dtype: str  # "float32" or "float64", as the loss is evaluated
    # the columns trained on (ShardData.columns: the splittable ones), or None: all
    columns: np.ndarray | None
    # the power of two the engine's loss values carry (precision.Float64Loss)
    loss_scale: float = 1.0
    # (n_placed, n_outputs) float32 scores the rounds start from, rows in
    # placed order; None: init_score on every row
    start: np.ndarray | None = None

    @property
    def training_edges(self) -> np.ndarray:
        """The bin edges of the columns trained on."""
        return self.edges if self.columns is None else self.edges[self.columns]


def training_devices(settings, n_rows: int, groups: GroupedRows | None) -> list:
    """The devices a fit of ``n_rows`` rows (``groups``: a group loss's)
    trains on: the ``devices`` setting, else the default ones."""
    devices = check_devices(settings.devices)
    if devices is None:
        devices = default_training_devices(n_rows)
        if groups is not None and jax.process_count() == 1:
            # no more devices than the largest group fills (with several
            # processes: all, the same mesh on each)
            fills = n_rows // int(groups.sizes.max())
            devices = devices[: max(1, min(len(devices), fills))]
    return devices


def group_placement(
    groups: GroupedRows, mesh, weight: np.ndarray
) -> tuple[GroupPlacement, RowLayout]:
    """This process's groups placed whole on its devices, and where its rows
    sit among all processes': with several, in the shapes that hold every
    process's groups, rows numbered after the processes before it."""
    n_shards = mesh.local_mesh.size
    placement = place_groups(groups, n_shards, weight)
    first_row = 0
    if jax.process_count() > 1:
        counts = gather(np.array([groups.order.shape[0]], np.int64))
        first_row = int(np.sum(counts[: jax.process_index()]))
        agreed = agreed_shapes(placement_shapes(placement, n_shards), gather_same_shape)
        placement = place_groups(groups, n_shards, weight, agreed, first_row)
    return placement, RowLayout(first_row=first_row, n_padded=placement.gather.shape[0])


def init_search_rows(settings, n_rows: int) -> int:
    """The rows of a per-sample fit of ``n_rows`` rows (this process's) that
    the initial score's program searches: every process's, each padded to
    `row_layout`'s count."""
    mesh = make_mesh(training_devices(settings, n_rows, None))
    return row_layout(n_rows, mesh).n_padded * jax.process_count()


def place_rows(settings, inputs: FitInputs) -> PlacedRows:
    """The rows sharded over the devices and binned there, the bin edges,
    the seed, and the initial score (computed on the devices while this
    process computes the bin edges)."""
    mesh = make_mesh(training_devices(settings, inputs.features.shape[0], inputs.groups))
    # offsets of the initial score's search: a continued model's scores, or fit's init_score
    offsets = inputs.offsets if inputs.continued is None else inputs.continued.start
    placement, layout, features, targets, offsets, weight = _placed_order(inputs, mesh, offsets)
    # the uint32 the hashes take; one drawn (random_state None or a
    # generator) differs between processes: process 0's counts
    seed = np.uint32(first_process_value(draw_seed(settings.random_state)))
    y_rows, weight_rows = target_rows(mesh, layout, targets, weight)
    group_tables = None
    if placement is not None:
        group_tables = tuple(
            GroupBucket(*(global_rows(mesh, table) for table in bucket))
            for bucket in placement.buckets
        )
    search = _score_search(settings, inputs, mesh, layout, targets, offsets, y_rows)
    if placement is None and settings.loss_dtype != "float64":
        # the probe and rounds programs compile on other cores meanwhile
        rows_per_shard = layout.n_padded // mesh.local_mesh.size
        _compile_ahead(settings, inputs, (y_rows, weight_rows), rows_per_shard)
    first_dtype = "float64" if settings.loss_dtype == "float64" else "float32"
    pending_init = start_init_score(
        loss_in(search.loss, first_dtype),
        inputs.n_outputs,
        mesh,
        search.y,
        weight_rows,
        search.given,
        group_tables,
    )
    if jax.process_count() > 1:  # the edges' gather runs collectives of its own
        pending_init = fetch(pending_init)
    edges = bin_edges(settings, inputs, seed, layout.first_row)
    columns = trained_columns(settings, inputs, edges, mesh)
    # fetched before the binning program is queued behind it
    init_score, init_loss, loss_dtype, loss_scale = finite_init_score(
        search.loss,
        inputs.n_outputs,
        mesh,
        search.y,
        weight_rows,
        search.given,
        settings.loss_dtype,
        pending_init,
        group_tables,
        rows=(search.targets if placement is None else inputs.targets, inputs.weight),
    )
    start = None
    if inputs.continued is not None:
        start, init_score = offsets, inputs.continued.init_score
    elif offsets is not None:
        start = start_scores(init_score, offsets, offsets.shape[0])
    data = shard_rows(
        mesh,
        layout,
        features if columns is None else features[:, columns],
        edges if columns is None else edges[columns],
        y_rows,
        weight_rows,
        placement,
        group_tables or (),
        columns,
        categorical=bool(inputs.categories),
    )
    return PlacedRows(
        mesh=mesh,
        layout=layout,
        data=data,
        edges=edges,
        seed=seed,
        init_score=init_score,
        init_loss=init_loss,
        loss_dtype=loss_dtype,
        columns=columns,
        loss_scale=loss_scale,
        start=start,
    )


class _ScoreSearch(NamedTuple):
    """What the initial score is searched with: the loss, the targets on
    the devices and on the host, and the given score (or None)."""

    loss: Callable
    y: Any
    targets: np.ndarray
    given: np.ndarray | None


def _score_search(settings, inputs: FitInputs, mesh, layout, targets, offsets, y_rows):
    """The initial score's search of the placed ``targets`` (on the devices:
    ``y_rows``): with ``offsets``, the loss at every row's score plus its
    offset; a continued fit's, at the continued scores themselves."""
    given = given_base_score(settings.base_score, inputs.n_outputs)
    if offsets is None:
        return _ScoreSearch(inputs.loss, y_rows, inputs.targets, given)
    if inputs.continued is not None:
        given = np.zeros(inputs.n_outputs, np.float32)
    loss, search_targets = _with_offsets(inputs, targets, offsets)
    return _ScoreSearch(
        loss, global_rows(mesh, search_targets, layout.n_padded), search_targets, given
    )


def _placed_order(inputs: FitInputs, mesh, offsets: np.ndarray | None) -> tuple:
    """``(placement, layout, features, targets, offsets, weight)`` in the
    order the rows are placed: their own (placement None), or a group
    loss's, every group whole on one device (`place_groups`; padding rows
    of weight 0)."""
    features, targets, weight = inputs.features, inputs.targets, inputs.weight
    if inputs.groups is None:
        return None, row_layout(features.shape[0], mesh), features, targets, offsets, weight
    placement, layout = group_placement(inputs.groups, mesh, weight)
    gather = placement.gather
    offsets = None if offsets is None else offsets[gather]
    weight = np.where(placement.present, weight[gather], 0.0).astype(np.float32)
    return placement, layout, features[gather], targets[gather], offsets, weight


def _compile_ahead(settings, inputs: FitInputs, rows: tuple, rows_per_shard: int) -> None:
    """Starts compiling the probe's or rounds' derivatives programs
    (`jaxboost.frontends.training.compile_ahead`) on ``rows`` (targets and weights
    on the devices)."""
    start_loss_programs(
        settings, inputs.loss, inputs.n_outputs, inputs.targets, rows, rows_per_shard
    )


def _with_offsets(inputs: FitInputs, targets: np.ndarray, offsets: np.ndarray):
    """``(loss, targets)`` whose loss at a score is ``inputs.loss`` at the
    score plus each row's offset (`jaxboost.frontends.training.initial_score_search.search_rows`)."""
    widths = None if inputs.groups is None else group_widths(inputs.groups.sizes)
    return search_rows(inputs.loss, targets, offsets, inputs.n_outputs, widths=widths)


def target_rows(
    mesh, layout: RowLayout, y: np.ndarray, weight: np.ndarray
) -> tuple[jax.Array, jax.Array]:
    """This process's targets and weights padded to ``layout.n_padded``
    (copies of row 0, weight 0), sharded on rows over ``mesh``."""
    n_padded = layout.n_padded
    weight = np.concatenate([weight, np.zeros(n_padded - weight.shape[0], np.float32)])
    return global_rows(mesh, y, n_padded), global_rows(mesh, weight)

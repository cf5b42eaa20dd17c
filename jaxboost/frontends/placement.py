"""A fit's rows on the devices: padded, sharded (a group loss's groups whole
on one device), binned there, and the initial score computed with them.

``settings``: the fit's settings record
(`jaxboost.frontends.settings_table.settings_record`: ``devices``,
``max_bins``, ``random_state``, ``loss_dtype``, ``base_score``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from ..engine.binning import fit_bin_edges, splittable_columns, trim_unused_bins
from ..engine.groups import GroupBucket
from ..engine.init_score import initial_score_on_host, not_converged_message
from ..engine.metrics import Metric
from ..engine.packed_split import packed_bins
from ..engine.round_checks import float64_message, not_finite_init_error, scaled_message
from ..engine.round_programs import slope_sums_program
from ..engine.training import (
    ShardData,
    bin_rows_program,
    group_loss_at_score_program,
    init_score_program,
    loss_at_score_program,
)
from ..kernels.registry import kernels_for
from ..runtime.devices import (
    check_devices,
    default_training_devices,
    make_mesh,
    memory_per_device,
)
from ..runtime.distributed import (
    RowLayout,
    fetch,
    first_process_value,
    gather,
    gather_same_shape,
    global_rows,
    replicated,
    row_layout,
)
from ..runtime.precision import float32_scale, loss_in, peak_exponent, rows_in_float64
from ..runtime.user_warning import warn
from ..runtime.workarounds import FAST_COMPILE_ROWS
from .categories import category_edges
from .compile_ahead import start_loss_programs
from .computation_keys import group_widths
from .continued import ContinuedFrom
from .grouping import (
    GroupedRows,
    GroupPlacement,
    agreed_shapes,
    place_groups,
    placement_shapes,
)
from .monitor import EvalSet
from .offsets import search_rows, start_scores
from .settings import (
    UNMONITORED_ROUNDS_PER_CHUNK,
    check_histogram_memory,
    draw_seed,
    given_base_score,
    tree_shape,
)


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
    # the categorical columns' codes (jaxboost.frontends.categories), or None
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
    group_tables = None
    # the uint32 the hashes take; one drawn (random_state None or a
    # generator) differs between processes: process 0's counts
    seed = np.uint32(first_process_value(draw_seed(settings.random_state)))
    y_rows, weight_rows = target_rows(mesh, layout, targets, weight)
    if placement is not None:
        group_tables = tuple(
            GroupBucket(*(global_rows(mesh, table) for table in bucket))
            for bucket in placement.buckets
        )
    given = given_base_score(settings.base_score, inputs.n_outputs)
    search_loss, search_y, search_targets = inputs.loss, y_rows, inputs.targets
    if offsets is not None:  # the loss at every row's score plus its offset
        if inputs.continued is not None:  # (the loss at the continued scores themselves)
            given = np.zeros(inputs.n_outputs, np.float32)
        search_loss, search_targets = _with_offsets(inputs, targets, offsets)
        search_y = global_rows(mesh, search_targets, layout.n_padded)
    if placement is None and settings.loss_dtype != "float64":
        # the probe and rounds programs compile on other cores meanwhile
        rows_per_shard = layout.n_padded // mesh.local_mesh.size
        _compile_ahead(settings, inputs, (y_rows, weight_rows), rows_per_shard)
    first_dtype = "float64" if settings.loss_dtype == "float64" else "float32"
    pending_init = start_init_score(
        loss_in(search_loss, first_dtype),
        inputs.n_outputs,
        mesh,
        search_y,
        weight_rows,
        given,
        group_tables,
    )
    if jax.process_count() > 1:  # the edges' gather runs collectives of its own
        pending_init = fetch(pending_init)
    edges = _bin_edges(settings, inputs, seed, layout.first_row)
    columns = _trained_columns(settings, inputs, edges, mesh)
    if columns is not None:
        features = features[:, columns]
    # fetched before the binning program is queued behind it
    init_score, init_loss, loss_dtype, loss_scale = finite_init_score(
        search_loss,
        inputs.n_outputs,
        mesh,
        search_y,
        weight_rows,
        given,
        settings.loss_dtype,
        pending_init,
        group_tables,
        rows=(search_targets if placement is None else inputs.targets, inputs.weight),
    )
    start = None
    if inputs.continued is not None:
        start, init_score = offsets, inputs.continued.init_score
    elif offsets is not None:
        start = start_scores(init_score, offsets, offsets.shape[0])
    data = shard_rows(
        mesh,
        layout,
        features,
        edges if columns is None else edges[columns],
        y_rows,
        weight_rows,
        placement,
        group_tables or (),
        columns,
        categorical=bool(inputs.categories),
    )
    return PlacedRows(
        mesh,
        layout,
        data,
        edges,
        seed,
        init_score,
        init_loss,
        loss_dtype,
        columns,
        loss_scale,
        start,
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
    (`jaxboost.frontends.compile_ahead`) on ``rows`` (targets and weights
    on the devices)."""
    start_loss_programs(
        settings, inputs.loss, inputs.n_outputs, inputs.targets, rows, rows_per_shard
    )


def _with_offsets(inputs: FitInputs, targets: np.ndarray, offsets: np.ndarray):
    """``(loss, targets)`` whose loss at a score is ``inputs.loss`` at the
    score plus each row's offset (`jaxboost.frontends.offsets.search_rows`)."""
    widths = None if inputs.groups is None else group_widths(inputs.groups.sizes)
    return search_rows(inputs.loss, targets, offsets, inputs.n_outputs, widths=widths)


def _trained_columns(settings, inputs: FitInputs, edges: np.ndarray, mesh) -> np.ndarray | None:
    """The columns trained on: those that can split (a constant column has
    no split: the trees are the same without it; None: all), after
    checking their histograms fit in the devices' memory."""
    columns = None
    if jax.process_count() == 1:
        columns = splittable_columns(edges, inputs.features)
    one_per_tree = settings.multi_strategy == "one_output_per_tree"
    rounds_per_chunk = settings.rounds_per_chunk or UNMONITORED_ROUNDS_PER_CHUNK
    max_depth, max_leaves = tree_shape(settings)
    check_histogram_memory(
        max_depth,
        inputs.features.shape[1] if columns is None else len(columns),
        edges.shape[1] + 1,
        1 if one_per_tree else inputs.n_outputs,
        memory_per_device(mesh.local_devices),
        max_leaves=max_leaves,
        n_outputs=inputs.n_outputs,
        trees_per_chunk=int(rounds_per_chunk) * (inputs.n_outputs if one_per_tree else 1),
    )
    return columns


def _bin_edges(settings, inputs: FitInputs, seed: np.uint32, first_row: int) -> np.ndarray:
    """The features' bin edges (`jaxboost.engine.binning`): a continued
    fit's model's (its trees' thresholds are those edges), else fitted on
    ``inputs.features`` (rows from ``first_row`` of all processes'), a
    categorical column's one bin per code."""
    if inputs.continued is not None:
        return inputs.continued.edges
    edges = fit_bin_edges(
        inputs.features,
        int(settings.max_bins),
        seed=seed,
        first_row=first_row,
        gather=gather,
        weight=inputs.weight,
    )
    if inputs.categories:  # one bin per category code
        edges = category_edges(edges, inputs.categories)
    return trim_unused_bins(edges)


def target_rows(
    mesh, layout: RowLayout, y: np.ndarray, weight: np.ndarray
) -> tuple[jax.Array, jax.Array]:
    """This process's targets and weights padded to ``layout.n_padded``
    (copies of row 0, weight 0), sharded on rows over ``mesh``."""
    n_padded = layout.n_padded
    weight = np.concatenate([weight, np.zeros(n_padded - weight.shape[0], np.float32)])
    return global_rows(mesh, y, n_padded), global_rows(mesh, weight)


def shard_rows(
    mesh,
    layout: RowLayout,
    features: np.ndarray,
    edges: np.ndarray,
    y: jax.Array,
    weight: jax.Array,
    placement: GroupPlacement | None = None,
    groups: tuple[GroupBucket, ...] = (),
    columns: np.ndarray | None = None,
    categorical: bool = False,
) -> ShardData:
    """Pad this process's rows to ``layout.n_padded`` (copies of row 0),
    place each shard on its device and bin it there; ``y`` and ``weight``
    are `target_rows`'; ``edges`` the bin edges (which also give
    the split search's packed bins); ``placement``: a group loss's groups
    (the rows already in its order), ``groups`` their tables on the devices;
    ``columns``: the data's columns that ``features`` and ``edges`` hold;
    ``categorical``: no packed bins (the packed split search has no category
    sets)."""
    n_padded = layout.n_padded
    row_id = (layout.first_row + np.arange(n_padded)).astype(np.uint32)
    if placement is not None:
        row_id = placement.row_number
    # the float features live on the devices only until they are binned
    native = kernels_for(mesh.devices.flat[0].platform).native
    bins = bin_rows_program(mesh, native)(
        global_rows(mesh, features, n_padded), replicated(mesh, edges)
    )
    row_id = global_rows(mesh, row_id)
    packed = None if categorical else packed_bins(edges)
    if packed is not None and jax.process_count() == 1:
        # the kernels sum a feature without missing values unclamped
        # (jaxboost/kernels/native/hist_layout.h)
        packed = packed._replace(has_missing=np.isnan(features).any(axis=0))
    packed = None if packed is None else jax.tree.map(lambda a: replicated(mesh, a), packed)
    columns = None if columns is None else replicated(mesh, columns)
    return ShardData(bins, y, weight, row_id, groups, packed, columns)


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
    One output on at most ``FAST_COMPILE_ROWS`` rows searches from the host;
    more rows, or vector outputs, in one program."""
    init_score = given
    if groups is not None:
        score = np.zeros(1, np.float32) if init_score is None else init_score
        loss_at = group_loss_at_score_program(loss, len(groups), mesh)
        return score, loss_at(y, groups, replicated(mesh, score)), True
    if init_score is None:
        small = y.shape[0] <= FAST_COMPILE_ROWS
        if small and n_outputs == 1 and jax.process_count() == 1:
            # a small program of the loss's sums, the search on the host
            sums = slope_sums_program(loss, mesh)
            found = initial_score_on_host(
                lambda scores: np.asarray(sums(y, weight, scores)),
                np.asarray(fetch(y)),
                np.asarray(fetch(weight)),
                bool(getattr(loss, "convex", False)),
            )
            return *found, True
        platform = mesh.devices.flat[0].platform
        program = init_score_program(loss, n_outputs, mesh, kernels_for(platform).leaf)
        return program(y, weight)
    loss_at = loss_at_score_program(loss, mesh)
    return init_score, loss_at(y, weight, replicated(mesh, init_score)), True


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
        name = getattr(loss, "name", getattr(loss, "__name__", "loss"))
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

"""A fit's rows binned: the features' bin edges (fitted on every
process's rows, a categorical column's one bin per code, or a continued
model's), the columns trained on (those that can split), and each
device's shard of rows binned on that device (`jaxboost.engine.binning`);
`jaxboost.frontends.training.placement` places the rows.  ``inputs``: the fit's
checked inputs (`jaxboost.frontends.training.placement.FitInputs`).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ...engine.binning import fit_bin_edges, splittable_columns, trim_unused_bins
from ...engine.groups import GroupBucket
from ...engine.packed_split import packed_bins
from ...engine.training import ShardData
from ...engine.training_programs import bin_rows_program
from ...kernels.registry import kernels_for
from ...runtime.devices import memory_per_device
from ...runtime.distributed import RowLayout, gather, global_rows, replicated
from ..data.categories import category_edges
from ..data.grouping import GroupPlacement
from ..settings.checks import (
    UNMONITORED_ROUNDS_PER_CHUNK,
    check_histogram_memory,
    grows_node_tables,
    tree_shape,
)


def bin_edges(settings, inputs: Any, seed: np.uint32, first_row: int) -> np.ndarray:
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


def trained_columns(settings, inputs: Any, edges: np.ndarray, mesh) -> np.ndarray | None:
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
        0 if grows_node_tables(settings) else max_depth,  # (node tables: by the leaves)
        inputs.features.shape[1] if columns is None else len(columns),
        edges.shape[1] + 1,
        1 if one_per_tree else inputs.n_outputs,
        memory_per_device(mesh.local_devices),
        max_leaves=max_leaves,
        n_outputs=inputs.n_outputs,
        trees_per_chunk=int(rounds_per_chunk) * (inputs.n_outputs if one_per_tree else 1),
    )
    return columns


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

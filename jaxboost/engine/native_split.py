"""The split search of a level as one native call on CPU.

`jaxboost.engine.split.find_best_splits` (and its packed form,
`jaxboost.engine.packed_split.find_best_packed_splits`) is hundreds of XLA
operations per level, compiled once per level of every tree program: most of
a program's compile, and on small tables most of a round.  The C++ kernel
(``kernels/native/split_search.cc``) makes the same choice, bit for bit —
the same gains in the same float32 operations, the same first candidate
within float32 noise of the best — in one loop per node.

It covers the CPU's common case (`covers`): the native histogram kernel's
running sums, padded or packed, numeric features, and categorical ones
(padded: `jaxboost.engine.categorical`'s set splits, the categories sorted
as its native sort does), without monotone or interaction constraints, at
most 16 outputs, all histograms on one device (several devices sum them
first).  Everything else keeps the XLA search.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..kernels.native_library import load
from .categorical import BITSET_WORDS, CategoricalSearch
from .packed_split import PackedBins
from .split import UNROLLED_OUTPUTS, SplitChoice

# row rules of the kernel: none, every row's hessian the same, estimated
_NO_ROWS, _ROWS_PER_HESSIAN, _ESTIMATED_ROWS = 0, 1, 2


def covers(
    histogram_kernel: str, n_outputs: int, constraints, categorical, quantised: bool
) -> bool:
    """Whether the native search makes a level's choice: the native
    histogram kernel's float32 running sums, numeric features or categorical
    ones sorted by the native kernel (``categorical``: a `CategoricalSearch`
    or None), no constraints, and outputs the XLA search sums term by term."""
    return (
        histogram_kernel == "native"
        and not quantised
        and constraints is None
        and (categorical is None or categorical.native_order)
        and n_outputs <= UNROLLED_OUTPUTS
    )


def native_best_splits(
    hist: jax.Array,
    n_outputs: int,
    reg_lambda,
    min_child_weight,
    min_split_gain,
    feature_mask: jax.Array | None = None,
    min_child_samples=0.0,
    rows_per_hessian: jax.Array | None = None,
    node_rows: jax.Array | None = None,
    packed: PackedBins | None = None,
    categorical: CategoricalSearch | None = None,
) -> SplitChoice:
    """`jaxboost.engine.split.find_best_splits` with ``cumulative=True``
    (or, with ``packed``, `jaxboost.engine.packed_split.find_best_packed_splits`)
    of one slice holding every feature, in one native call.

    Args:
      hist: ``(n_features, n_nodes, n_bins, 2K)`` float32 running sums over
        the value bins, then the missing bin; with ``packed``, ``(n_slots,
        n_nodes, 2K)`` laid out as `jaxboost.engine.packed_split.slot_layout`.
      feature_mask, min_child_samples, rows_per_hessian, node_rows,
        categorical: as `jaxboost.engine.split.find_best_splits`'s (with
        ``categorical``, padded histograms of at most 256 value bins).
    """
    load()
    if categorical is not None and packed is not None:
        raise ValueError("the native split search takes categorical features padded, not packed")
    if packed is None:
        n_features, n_nodes = hist.shape[:2]
        slot_start = jnp.zeros(n_features + 1, jnp.int32)
    else:
        n_features, n_nodes = packed.slot_start.shape[0] - 1, hist.shape[1]
        slot_start = jnp.asarray(packed.slot_start, jnp.int32)
    # 0: not used, 1: numeric, 2: category sets, 3: one category against the rest
    feature_ok = jnp.ones(n_features, jnp.uint8)
    if categorical is not None:
        kind = jnp.where(categorical.one_hot, 3, 2)
        feature_ok = jnp.where(categorical.is_categorical, kind, 1).astype(jnp.uint8)
    if feature_mask is not None:
        feature_ok = jnp.where(feature_mask, feature_ok, 0).astype(jnp.uint8)
    row_rule = _NO_ROWS
    rows = jnp.zeros(n_nodes, jnp.float32)
    if rows_per_hessian is not None:
        row_rule = _ROWS_PER_HESSIAN
    elif node_rows is not None:
        row_rule, rows = _ESTIMATED_ROWS, node_rows.astype(jnp.float32)
    settings = jnp.stack(
        [
            jnp.asarray(value, jnp.float32)
            for value in (
                reg_lambda,
                min_child_weight,
                min_split_gain,
                min_child_samples,
                0.0 if rows_per_hessian is None else rows_per_hessian,
                0.0 if categorical is None else categorical.cat_smooth,
                0.0 if categorical is None else categorical.max_cat_threshold,
            )
        ]
    )
    per_node = jax.ShapeDtypeStruct((n_nodes,), jnp.int32)
    results = (
        per_node,
        per_node,
        per_node,
        jax.ShapeDtypeStruct((n_nodes,), jnp.float32),
        per_node,
        jax.ShapeDtypeStruct((n_nodes, BITSET_WORDS), jnp.uint32),
    )
    call = jax.ffi.ffi_call("jaxboost_split_search", results, vmap_method="sequential")
    feature, threshold_bin, missing_left, gain, do_split, category_left = call(
        hist,
        feature_ok,
        slot_start,
        rows,
        settings,
        n_outputs=n_outputs,
        packed=int(packed is not None),
        row_rule=row_rule,
    )
    return SplitChoice(
        feature=feature,
        threshold_bin=threshold_bin,
        missing_left=missing_left.astype(bool),
        gain=gain,
        do_split=do_split.astype(bool),
        category_left=None if categorical is None else category_left,
    )

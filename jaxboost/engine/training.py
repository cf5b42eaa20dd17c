"""The boosting program: rounds of (gradients, tree, leaf values, update).

Everything here runs inside ``jit`` on one shard of rows under ``shard_map``
over the 1-D ``"rows"`` mesh; sums over rows are combined with ``psum``.
``check_vma=False``: with it on (JAX 0.10), ``jax.grad`` inside the shard with
respect to a replicated value (the initial score broadcast to the rows) sums
the cotangent over shards, which would add other shards' gradients to each
row's; every cross-shard sum here is an explicit ``psum``.  A
chunk of rounds is one program (``lax.scan``), so the host dispatches one
collective program per chunk and blocks between chunks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..kernels.leaf_sums import LEAF_KERNELS
from .bestfirst import grow_best_first
from .categorical import CategoricalSettings, categorical_search
from .constraints import clip_to_bounds, tree_constraints
from .derivatives import Loss, grad_hess, sample_loss
from .fisher import fisher_grad_hess, information_per_row
from .groups import GroupBucket, group_grad_hess
from .leaves import across_shards, leaf_columns, totals_from_sums
from .line_search import armijo_backtrack
from .neighbours import ordered_leaves
from .packed_split import PackedBins
from .quantise import quantise_split_stats
from .round_leaves import diagonal_hessian, leaf_values
from .round_losses import (
    count_not_finite,
    in_bag_losses,
    in_bag_pairs,
    judges_rises_in_bag,
    training_loss,
)
from .sampling import feature_mask, row_mask
from .split import gradient_unit
from .tree import Tree, TreeParams, grow_tree

LEAF_METHODS = ("newton", "line_search", "joint_newton")
SPLIT_CRITERIA = ("second_order", "first_order")
# "fisher": the full K x K Fisher information in place of the hessian (engine.fisher)
HESSIANS = ("diag", "full", "fisher")
HESSIAN_MODES = ("raw", "clip", "abs")
MULTI_STRATEGIES = ("multi_output_tree", "one_output_per_tree")


@dataclass(frozen=True)
class StaticSettings:
    """Static settings of a training program (hashable: programs are cached on it)."""

    loss: Loss
    n_outputs: int
    max_depth: int
    leaf_method: str = "newton"
    split_criterion: str = "second_order"
    hessian: str = "diag"
    multi_strategy: str = "multi_output_tree"
    rounds_per_chunk: int = 100
    hessian_mode: str = "raw"
    armijo: bool = False
    # a name in jaxboost.kernels.histogram_kernels.HISTOGRAM_KERNELS: "native" or "packed" on CPU,
    # "reference" elsewhere (see jaxboost.kernels.registry)
    histogram_kernel: str = "reference"
    # a name in jaxboost.kernels.leaf_sums.LEAF_KERNELS, for the line search: "native"
    # on CPU when the native kernels build, "reference" elsewhere
    leaf_kernels: str = "reference"
    # 0: split statistics in float32; else the integer levels they are
    # quantised to each round (jaxboost.engine.quantise, LightGBM's
    # num_grad_quant_bins)
    grad_quant_bins: int = 0
    # the loss has no curvature on most rows (pinball): its line searches
    # take no L2 penalty and, on a fit of many rows (not fast_compile),
    # narrow to the rows whose slope still changes (jaxboost.engine.line_search,
    # jaxboost.engine.round_leaves)
    narrow_line_search: bool = False
    # rows are drawn each round (subsample < 1); the fraction itself is
    # NumericSettings.subsample.  False skips the draw (a hash of every row
    # of every round)
    subsampled: bool = True
    # compile with jaxboost.runtime.workarounds.vector_output_compiler_options: vector
    # outputs on enough rows per device that the rows' sums over the outputs
    # outweigh the split search's (which those options slow down)
    vector_row_options: bool = False
    # a small fit (at most jaxboost.runtime.workarounds.FAST_COMPILE_ROWS
    # rows): runs round by round where its settings allow
    # (jaxboost.frontends.training.round_by_round)
    fast_compile: bool = False
    # a group loss (losses' per="group"): the widths of the shards' group
    # buckets (jaxboost.engine.groups), one table of ShardData.groups each;
    # () for a per-sample loss
    group_widths: tuple[int, ...] = ()
    # the data's columns, of which ShardData.columns are trained on (their
    # column subsamples are drawn among all, as without the others); 0: the
    # bins' own count
    all_features: int = 0
    # children must hold min_child_samples rows (min_child_samples > 0): the
    # histogram kernel counts every node's rows, and the split search
    # estimates its children's from their hessian sums (exact with
    # rows_from_hessian, which counts nothing; jaxboost.engine.split)
    count_rows: bool = False
    # every row of positive weight adds the same to the second split
    # statistic (a hessian that depends on neither target nor score, or the
    # first-order criterion's weights, with every weight 0 or 1): the rows
    # are read off its sums, exactly
    # (jaxboost.frontends.training.hessian_probe.rows_from_hessian)
    rows_from_hessian: bool = False
    # per column of the data (all_features of them): -1, 0 or +1, the
    # monotone constraints (jaxboost.engine.constraints); () for none
    monotone: tuple[int, ...] = ()
    # how the monotone bounds are found: "basic" or "intermediate"
    # (jaxboost.engine.constraints, jaxboost.engine.neighbours)
    monotone_method: str = "basic"
    # sets of the data's column indices that may share a path; () for none
    interaction: tuple[tuple[int, ...], ...] = ()
    # the categorical columns and their split settings
    # (jaxboost.engine.categorical; unpacked bins with them), or None
    categorical: CategoricalSettings | None = None
    # grow_policy="lossguide": the leaves of each tree, grown best-first as
    # node tables (jaxboost.engine.bestfirst) within depth max_depth (0: no
    # bound), or under monotone or interaction constraints chosen within
    # the depth-max_depth heap (jaxboost.engine.leafwise); 0: depth-wise
    max_leaves: int = 0
    # Newton leaves without a Newton step (a regularised hessian that is not
    # positive) fall back to a line search in the program; False: they are
    # counted instead, and the caller runs their round again on the program
    # that searches (jaxboost.frontends.training.round_by_round): the rarely
    # run search is a third of the fused program's compile (benchmarks/README.md)
    searches_stuck_leaves: bool = True

    @property
    def grouped(self) -> bool:
        return bool(self.group_widths)

    @property
    def node_tables(self) -> bool:
        """Leaf-wise trees without constraints: grown by
        `jaxboost.engine.bestfirst` as node tables of ``max_leaves``, their
        depth bounded by ``max_depth`` (0: by the leaves alone)."""
        return bool(self.max_leaves) and not self.monotone and not self.interaction

    @property
    def tree_nodes(self) -> tuple[int, int]:
        """``(internal nodes, leaves)`` of each tree."""
        n_leaves = self.max_leaves if self.node_tables else 2**self.max_depth
        return n_leaves - 1, n_leaves

    @property
    def trees_per_round(self) -> int:
        return self.n_outputs if self.multi_strategy == "one_output_per_tree" else 1


class NumericSettings(NamedTuple):
    """Numeric settings, passed to the programs as traced float32 scalars so
    that changing them (a grid search) reuses the compiled programs."""

    learning_rate: float
    reg_lambda: float
    min_child_weight: float
    min_split_gain: float
    subsample: float
    colsample_bytree: float
    hessian_floor: float
    # least rows of positive weight in a child (with StaticSettings.count_rows)
    min_child_samples: float = 0.0


class ShardData(NamedTuple):
    """The training rows of one shard (the full arrays are sharded on rows)."""

    bins: jax.Array  # (n_features, n_rows) uint8
    y: jax.Array  # (n_rows,) or (n_rows, n_targets)
    weight: jax.Array  # (n_rows,) float32, 0 on padding rows
    row_id: jax.Array  # (n_rows,) uint32 global row numbers (they fix the subsamples)
    # a group loss's groups in this shard (jaxboost.engine.groups), else ()
    groups: tuple[GroupBucket, ...] = ()
    # the features' used bins, replicated (jaxboost.engine.packed_split), or
    # None: the split search takes every bin
    packed: PackedBins | None = None
    # (n_features,) int32, replicated: the data's columns that ``bins`` hold
    # (the splittable ones, jaxboost.engine.binning.splittable_columns), or
    # None: all of them
    columns: jax.Array | None = None


def stabilise_hessian(hess: jax.Array, mode: str, floor: float) -> jax.Array:
    """Per-row hessians made usable for non-convex losses.

    ``"raw"`` keeps them; ``"clip"`` raises them to at least ``floor``;
    ``"abs"`` takes ``max(|h|, floor)``.  A full ``(n_rows, K, K)`` hessian has
    its diagonal treated.
    """
    if mode == "raw":
        return hess

    def treat(diagonal):
        if mode == "abs":
            diagonal = jnp.abs(diagonal)
        return jnp.maximum(diagonal, floor)

    if hess.ndim == 2:
        return treat(hess)
    diagonal = jnp.diagonal(hess, axis1=1, axis2=2)
    eye = jnp.eye(hess.shape[-1], dtype=bool)
    return jnp.where(eye, treat(diagonal)[:, :, None] * eye, hess)


def tree_statistics(
    grad: jax.Array, hess: jax.Array, weight: jax.Array, mode: str, floor: float
) -> tuple[jax.Array, jax.Array]:
    """The gradients ``(n_rows, K)`` and hessians ``(n_rows, K[, K])`` a
    round's trees are grown from: the rows' own, hessians made usable
    (`stabilise_hessian`'s ``mode`` and ``floor``), both times the
    rows' ``weight (n_rows,)``."""
    hess = stabilise_hessian(hess, mode, floor)
    grad = grad * weight[:, None]
    hess = hess * (weight[:, None, None] if hess.ndim == 3 else weight[:, None])
    return grad, hess


def _second_split_stat(cfg: StaticSettings, hess_diag, weight) -> jax.Array:
    """``(n_rows, K)``: the statistic the split search pairs with the
    gradients, the hessians or (Friedman's first-order criterion) the weights.

    No weight column besides: gradients and hessians are weighted, so a child
    of zero weight has ``G = H = 0`` and its split gains exactly 0, which never
    splits; summing the weight too would only slow the histograms.
    """
    if cfg.split_criterion == "first_order":
        return jnp.broadcast_to(weight[:, None], hess_diag.shape)
    return hess_diag


def _rows_per_hessian(second: jax.Array, weight: jax.Array, axis_name) -> jax.Array:
    """The rows a unit of the split search's hessian sums holds, where every
    row of positive ``weight`` has the same ``second (n_rows, K)`` summed
    over outputs (`StaticSettings.rows_from_hessian`): one over that
    amount, 0 when no row has weight."""
    per_row = jnp.max(jnp.where(weight > 0, jnp.sum(second, axis=1), 0.0))
    if axis_name is not None:
        per_row = lax.pmax(per_row, axis_name)
    return jnp.where(per_row > 0, 1.0 / jnp.where(per_row > 0, per_row, 1.0), 0.0)


def _unscaled_gain(gain: jax.Array, unit: jax.Array) -> jax.Array:
    """Split gains ``(n_nodes,)`` of gradients times ``unit`` (see
    `jaxboost.engine.split.gradient_unit`) in the gradients' own units, clipped
    to float32's positive range where a node splits: a gain > 0 is what marks
    a split (`jaxboost.frontends.fitted.inspection`), even one that underflows unscaled."""
    finfo = jnp.finfo(jnp.float32)
    return jnp.where(gain > 0, jnp.clip(gain / unit / unit, finfo.tiny, finfo.max), 0.0)


def _grow_one(
    cfg, hyper, data, raw, grad, hess, output_mask, edges, features, round_index, seed, axis_name
):
    """One tree fitted to the outputs in ``output_mask``: ``(Tree, update
    (n_rows, K), n_stuck)`` (see `leaf_values`)."""
    hess_diag = jnp.diagonal(hess, axis1=1, axis2=2) if hess.ndim == 3 else hess
    one_output = cfg.multi_strategy == "one_output_per_tree" and cfg.n_outputs > 1
    if one_output:
        index = jnp.argmax(output_mask)
        grad_split = lax.dynamic_slice_in_dim(grad, index, 1, axis=1)
        hess_split = lax.dynamic_slice_in_dim(hess_diag, index, 1, axis=1)
    else:
        grad_split, hess_split = grad, hess_diag
    information = None
    if cfg.hessian == "fisher":  # reg_lambda in rows' information (information_per_row)
        information = information_per_row(hess_diag, data.weight, axis_name)
        searched = information
        if one_output:
            searched = lax.dynamic_slice_in_dim(information, index, 1)
        # G^2 / (H + lambda d) = (G / sqrt(d))^2 / (H / d + lambda); the
        # leaves' sums stay unscaled (_newton_values scales them)
        grad_search, hess_search = grad_split * lax.rsqrt(searched), hess_split / searched
    else:
        grad_search, hess_search = grad_split, hess_split
    # the split search on gradients in a unit where their squared sums stay
    # within float32 (exact: a power of two), paired with [hess or weight]
    second = _second_split_stat(cfg, hess_search, data.weight)
    scale = None
    if cfg.grad_quant_bins:
        unit, stats, scale = quantise_split_stats(
            grad_search, second, data.row_id, round_index, seed, cfg.grad_quant_bins, axis_name
        )
    else:
        unit = gradient_unit(grad_search, axis_name)
        stats = jnp.concatenate([grad_search * unit, second], axis=1)
    rows_per_hessian = row_positive = None
    if cfg.count_rows and cfg.rows_from_hessian:
        rows_per_hessian = _rows_per_hessian(second, data.weight, axis_name)
    elif cfg.count_rows:  # (this round's subsample: out-of-bag rows have weight 0)
        row_positive = data.weight > 0
    params = TreeParams(
        cfg.max_depth,
        hyper.reg_lambda,
        hyper.min_child_weight,
        hyper.min_split_gain * unit * unit,
        cfg.histogram_kernel,
        hyper.min_child_samples,
        max_leaves=cfg.max_leaves,
        rows_per_hessian=rows_per_hessian,
    )
    # the sums of the outputs this tree fits: summed by the last routing pass
    # (the native kernel's: no pass of their own), then one psum
    per_row = leaf_columns(
        grad_split if one_output else grad,
        hess_split if one_output else hess,
        data.weight,
        # (the Armijo check's losses at the start)
        row_loss=sample_loss(cfg.loss, data.y, raw) if cfg.armijo else None,
        # (the line search's resolution: the scores' magnitude)
        raw=raw if cfg.leaf_method == "line_search" else None,
    )
    constraints = tree_constraints(
        cfg.monotone,
        cfg.interaction,
        cfg.all_features or data.bins.shape[0],
        data.columns,
        cfg.monotone_method,
    )
    categorical = categorical_search(
        cfg.categorical,
        cfg.all_features or data.bins.shape[0],
        data.columns,
        native_order=cfg.histogram_kernel == "native",
    )
    # (what both growers take beside the rows, statistics and settings)
    shared = {
        "stats_scale": scale,
        "leaf_columns": per_row.columns,
        "leaf_sums": LEAF_KERNELS[cfg.leaf_kernels].leaf_sums,
        "categorical": categorical,
        "row_positive": row_positive,
    }
    tree_inputs = (data.bins, stats, edges, params, axis_name, features)
    if cfg.node_tables:  # (the front ends keep constraints on grow_tree)
        native = cfg.histogram_kernel == "native"
        grown = grow_best_first(*tree_inputs, native=native, **shared)
    else:
        grown = grow_tree(*tree_inputs, packed=data.packed, constraints=constraints, **shared)
    structure, leaf_of_row, sums = grown[:3]
    structure = structure._replace(split_gain=_unscaled_gain(structure.split_gain, unit))
    totals = totals_from_sums(across_shards(sums, axis_name), per_row)
    if one_output:  # the tree's output's sums in its column, 0 in the others
        totals = totals._replace(
            grad=totals.grad * output_mask,
            hess=diagonal_hessian(totals.hess * output_mask, full=hess.ndim == 3),
        )
    values, n_stuck = leaf_values(
        cfg, hyper, data, raw, totals, leaf_of_row, output_mask, axis_name, information
    )
    values = hyper.learning_rate * values
    if cfg.armijo:
        values = armijo_backtrack(
            cfg.loss,
            data.y,
            raw,
            data.weight,
            leaf_of_row,
            values,
            totals.grad,
            axis_name,
            LEAF_KERNELS[cfg.leaf_kernels],
            base=totals.loss,
        )
    if constraints is not None and constraints.monotone is not None:
        # whatever computed them, the leaves stay within their bounds (in the
        # search's units: gradients times unit), which makes trees monotone
        if constraints.intermediate:  # (grown[3]: the leaves' boxes)
            values = ordered_leaves(constraints.monotone, grown[3], values)
        else:
            bounds = grown[3]
            scale_back = hyper.learning_rate / unit
            values = clip_to_bounds(values, bounds.lower * scale_back, bounds.upper * scale_back)
    # the scores take the values as stored (rounded), so that a continued
    # fit, which adds the stored ones, starts from them bit for bit: the
    # select keeps XLA's CPU backend from fusing the learning rate's multiply
    # into the update as one FMA (an optimization_barrier is removed first)
    values = jnp.where(jnp.isnan(values), jnp.nan, values)
    tree = Tree(
        *structure[:5],
        leaf_value=values,
        leaf_weight=totals.weight,
        category_left=structure.category_left,
        leaf_cover=_leaf_cover(totals.hess),
        left_child=getattr(structure, "left_child", None),
        right_child=getattr(structure, "right_child", None),
    )
    return tree, values[leaf_of_row], n_stuck


def _leaf_cover(hess: jax.Array) -> jax.Array:
    """``(n_leaves,)`` the leaves' summed hessians ``(n_leaves, K[, K])``
    as one cover each: the trace over the tree's outputs (a one-output
    tree's others are 0 here), XGBoost's cover for one output."""
    if hess.ndim == 3:
        return jnp.trace(hess, axis1=1, axis2=2)
    return jnp.sum(hess, axis=1)


def round_derivatives(
    cfg: StaticSettings, y: jax.Array, raw: jax.Array, groups: tuple[GroupBucket, ...] = ()
):
    """Every row's unweighted gradient ``(n_rows, K)`` and hessian
    ``(n_rows, K[, K])`` at the scores ``raw (n_rows, K)`` (a group loss's
    over its ``groups``, `ShardData`'s; ``hessian="fisher"``: the Fisher
    information ``(n_rows, K, K)``, `jaxboost.engine.fisher`)."""
    if cfg.grouped:
        return group_grad_hess(cfg.loss, y, raw, groups)
    if cfg.hessian == "fisher":
        return fisher_grad_hess(cfg.loss, y, raw)
    return grad_hess(cfg.loss, y, raw, full_hessian=cfg.hessian == "full")


def boost_round(
    cfg: StaticSettings,
    hyper: NumericSettings,
    data: ShardData,
    edges: jax.Array,
    raw: jax.Array,
    round_index: jax.Array,
    seed: jax.Array,
    axis_name,
):
    """One boosting round on one shard.

    Args:
      edges: ``(n_features, max_bins)`` bin edges (replicated).
      raw: ``(n_rows, K)`` current raw scores of the shard.
      round_index, seed: int32 scalars that fix this round's subsamples.
    Returns:
      ``(trees, raw, n_not_finite, n_stuck)``: the round's trees, stacked
      ``(trees_per_round, ...)``, the updated ``(n_rows, K)`` raw scores (of
      every row, in bag or not), the number of rows (of all shards, of
      positive weight) whose gradient or hessian is NaN or infinite, and the
      leaves left at 0 for want of a line search (`grow_round`).
    """
    grad, hess = round_derivatives(cfg, data.y, raw, data.groups)
    n_not_finite = count_not_finite(grad, hess, data.weight, axis_name)
    trees, raw, n_stuck = grow_round(
        cfg, hyper, data, edges, raw, grad, hess, round_index, seed, axis_name
    )
    return trees, raw, n_not_finite, n_stuck


def grow_round(
    cfg: StaticSettings,
    hyper: NumericSettings,
    data: ShardData,
    edges: jax.Array,
    raw: jax.Array,
    grad: jax.Array,
    hess: jax.Array,
    round_index: jax.Array,
    seed: jax.Array,
    axis_name,
):
    """A round's trees from the rows' unweighted ``grad (n_rows, K)`` and
    ``hess (n_rows, K[, K])`` at ``raw``: `boost_round` after the
    derivatives.  With ``cfg.loss`` None the program needs no loss (Newton
    leaves only); it then counts the leaves that needed a line search, as
    it does without ``cfg.searches_stuck_leaves``.

    Returns:
      ``(trees, raw, n_stuck)``: as `boost_round`, and the leaves left
      at 0 for want of a line search (summed over the round's trees).
    """
    if cfg.subsampled:
        in_bag = row_mask(data.row_id, round_index, seed, hyper.subsample)
        data = data._replace(weight=jnp.where(in_bag, data.weight, 0.0))
    features = feature_mask(
        cfg.all_features or data.bins.shape[0], round_index, seed, hyper.colsample_bytree
    )
    if data.columns is not None:  # the draw among all columns, of those trained on
        features = features[data.columns]
    grad, hess = tree_statistics(grad, hess, data.weight, cfg.hessian_mode, hyper.hessian_floor)
    grow = functools.partial(
        _grow_one,
        cfg,
        hyper,
        data,
        raw,
        grad,
        hess,
        edges=edges,
        features=features,
        round_index=round_index,
        seed=seed,
        axis_name=axis_name,
    )
    if cfg.trees_per_round == 1:
        tree, update, n_stuck = grow(jnp.ones(cfg.n_outputs, jnp.float32))
        return jax.tree.map(lambda leaf: leaf[None], tree), raw + update, n_stuck

    def grow_output(output: jax.Array):
        """Tree ``output``, its update of that output alone, ``(n_rows,)``
        (it leaves the other outputs at 0), and its stuck leaves."""
        tree, update, n_stuck = grow(jax.nn.one_hot(output, cfg.n_outputs, dtype=jnp.float32))
        return tree, lax.dynamic_index_in_dim(update, output, axis=1, keepdims=False), n_stuck

    # (summing the (K, n_rows, K) updates instead took XLA on CPU 10x longer)
    trees, updates, n_stuck = lax.map(grow_output, jnp.arange(cfg.n_outputs))
    return trees, raw + updates.T, jnp.sum(n_stuck)


def _train_chunk(
    cfg: StaticSettings, axis_name, data: ShardData, edges, raw, first_round, n_active, seed, hyper
):
    """Rounds ``[first_round, first_round + rounds_per_chunk)`` of one shard, those
    at or after ``n_active`` skipped; ``(raw, trees, train_loss (rounds_per_chunk,),
    n_not_finite (rounds_per_chunk,), n_stuck (rounds_per_chunk,), in_bag)``,
    ``n_not_finite`` the rows whose derivatives were not finite at the start
    of each round and ``n_stuck`` the leaves it left at 0 for want of a line
    search (`boost_round`; 0 with ``cfg.searches_stuck_leaves``),
    ``in_bag`` each round's in-bag loss before and after it
    ``(rounds_per_chunk, 2)`` (`in_bag_pairs`) where `judges_rises_in_bag`,
    else None.

    Each round's training loss is evaluated at the start of the next round,
    on the scores its gradients are taken at, so that XLA can share the
    loss's forward pass with the derivatives'; the last active round's loss is
    evaluated once after the scan.  So are the in-bag losses.
    """
    judged_in_bag = judges_rises_in_bag(cfg)

    def bag_losses(raw, round_index):
        row_loss = sample_loss(cfg.loss, data.y, raw)
        draw = (round_index, seed, hyper.subsample)
        return in_bag_losses(row_loss, data.weight, data.row_id, draw, axis_name)

    def one_round(raw, chunk_round):
        traced = []  # boost's outputs as traced, for skip's shapes

        def boost(raw):
            loss_before = training_loss(cfg, data, raw, axis_name)
            bag_before = bag_losses(raw, round_index) if judged_in_bag else None
            trees, new_raw, n_not_finite, n_stuck = boost_round(
                cfg, hyper, data, edges, raw, round_index, seed, axis_name
            )
            outputs = (trees, new_raw, loss_before, n_not_finite, n_stuck, bag_before)
            traced.append(outputs)
            return outputs

        def skip(raw):  # a round past n_active: no work, zeros (discarded)
            # the shapes of boost's trace (cond traces it first), else traced here
            outputs = traced[-1] if traced else jax.eval_shape(boost, raw)
            trees, _, *at_start = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), outputs)
            return trees, raw, *at_start

        round_index = first_round + chunk_round
        # every shard takes the same branch: n_active is the same everywhere
        trees, raw, *at_start = lax.cond(chunk_round < n_active, boost, skip, raw)
        return raw, (trees, *at_start)

    raw, (trees, loss_before, n_not_finite, n_stuck, bag_before) = lax.scan(
        one_round, raw, jnp.arange(cfg.rounds_per_chunk)
    )
    # round i's loss is the one before round i + 1; the last active round's, now
    last_loss = training_loss(cfg, data, raw, axis_name)
    loss_after = jnp.concatenate([loss_before[1:], last_loss[None]])
    rounds = jnp.arange(cfg.rounds_per_chunk)
    train_loss = jnp.where(rounds == n_active - 1, last_loss, loss_after)
    in_bag = None
    if judged_in_bag:
        in_bag = in_bag_pairs(bag_before, bag_losses(raw, first_round + n_active), n_active)
    return raw, trees, train_loss, n_not_finite, n_stuck, in_bag

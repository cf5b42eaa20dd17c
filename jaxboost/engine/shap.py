"""Exact path-dependent TreeSHAP (Lundberg et al. 2018), one path at a time.

A tree's prediction is the sum over its leaves' paths of ``v * prod_j
o_j(x)``, where ``o_j(x)`` is 1 where ``x`` takes the path's side at split
``j``.  Path-dependent TreeSHAP replaces the unknown features' tests by
their cover shares ``z_j`` (`jaxboost.engine.node_table.child_share`), so
each path is a game of its own: ``v(S) = v * prod_{j in S} o_j *
prod_{j not in S} z_j`` over the path's features (splits on one feature
merged: their ``o`` and ``z`` multiply), and the tree's Shapley values are
the sums of the paths'.  In such a product game feature ``i`` receives

    phi_i = v (o_i - z_i) sum_k k! (m - 1 - k)! / m! * e_k(i),

``e_k(i)`` the coefficient of ``t^k`` in ``prod_{j != i} (z_j + o_j t)``
(GPUTreeShap's formulation, Mitchell et al. 2022).  Here ``m`` counts every
step of the padded path: a padding step or a merged-away duplicate has ``o
= z = 1``, a player that changes no coalition's value and so no Shapley
value.  The polynomial is built once per path and row, and each feature's
factor divided out of it (exactly: ``o`` is 0 or 1).

Interactions follow XGBoost: ``Phi_ij = (phi_i | j present - phi_i | j
absent) / 2``, which in a product game is ``v (o_i - z_i) (o_j - z_j) / 2``
times the same sum over the path without ``i`` and ``j``; the diagonal is
what makes each row sum to ``phi_i``.

Rows are laid out last (``(..., n_rows)``) so that every step is an
elementwise operation over rows; a program walks the trees with a
``lax.scan`` over each batch of rows.  On CPUs the native kernel
(``native/shap.cc``, `forest_contributions_native`,
`forest_interactions_native`) computes them instead, about ten times faster; this module's XLA program
is its reference (and what GPUs run).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ..kernels.native_library import load
from ..kernels.registry import kernels_for
from ..runtime.devices import ROWS, make_mesh
from ..runtime.padding import bucket_size, in_place_on, pad_rows
from ..runtime.program_cache import one_program_per_shape
from .categorical import bin_goes_left, is_categorical_node
from .node_table import NodeTable, TreePaths

# rows per batch: a batch's (paths, steps, rows) arrays stay in cache
DEFAULT_BATCH_ROWS = 256
# below this many rows per device, one device explains them (as prediction)
_MIN_ROWS_PER_DEVICE = 8_192


class ShapPaths(NamedTuple):
    """Every tree's paths as TreeSHAP reads them, leading ``(n_trees,)``
    axis; ``(T, P, S)`` per step unless said."""

    node: jax.Array  # int32 the split (a node of the tree's table), -1 on padding
    feature: jax.Array  # int32 the split's feature
    threshold: jax.Array  # float32 (+inf on padding steps)
    missing_left: jax.Array  # bool (True on padding steps)
    category_left: jax.Array | None  # (T, P, S, 8) uint32 or None
    goes_right: jax.Array  # bool: the path's side
    group: jax.Array  # int32 the step holding this step's feature's group
    zero_share: jax.Array  # float32 the group's product of shares at its step, else 1
    value: jax.Array  # (T, P, K) float32 leaf values


def shap_paths(table: NodeTable, paths: TreePaths) -> tuple[ShapPaths, np.ndarray]:
    """`ShapPaths` (numpy) of a `jaxboost.engine.node_table.NodeTable`'s
    paths (`jaxboost.engine.node_table.tree_paths`), with the steps that
    split on one feature grouped at the first of them, and ``(K,)`` float64
    the forest's expected value (the sum over paths of ``v * prod share``)."""
    n_trees, _, n_steps = paths.node.shape
    trees = np.arange(n_trees)[:, None, None]
    node = np.maximum(paths.node, 0)
    valid = paths.node >= 0
    # group: the first valid step with the same feature (valid steps only)
    same = (paths.feature[..., :, None] == paths.feature[..., None, :]) & valid[..., None, :]
    group = np.where(valid, np.argmax(same, axis=-1), np.arange(n_steps))
    share = paths.share
    # product of the group's shares at the group's step (shares may be 0: multiply)
    zero_share = np.ones(paths.share.shape)
    for step in range(n_steps):
        members = group == step
        zero_share[..., step] = np.prod(np.where(members, share, 1.0), axis=-1)
    expected = np.einsum("tpk,tp->k", paths.value.astype(np.float64), np.prod(share, axis=-1))
    category_left = None
    if table.category_left is not None:
        category_left = np.where(valid[..., None], table.category_left[trees, node], 0)
    return ShapPaths(
        node=paths.node,
        feature=paths.feature,
        threshold=np.where(valid, table.threshold[trees, node], np.inf).astype(np.float32),
        missing_left=np.where(valid, table.missing_left[trees, node], True),
        category_left=category_left,
        goes_right=paths.goes_right,
        group=group.astype(np.int32),
        zero_share=zero_share.astype(np.float32),
        value=paths.value,
    ), expected


def _goes_right(tree: ShapPaths, X_T: jax.Array) -> jax.Array:
    """``(P, S, n)`` bool: whether each row goes right at each step's split
    (`jaxboost.engine.predict.leaf_of_rows`'s test)."""
    value = X_T[tree.feature]  # (P, S, n)
    is_missing, missing_right = jnp.isnan(value), ~tree.missing_left[..., None]
    value_goes_right = value > tree.threshold[..., None]
    if tree.category_left is not None:
        node_set = tree.category_left[:, :, None, :]  # (P, S, 1, 8)
        code = jnp.clip(jnp.nan_to_num(value), 0, 255).astype(jnp.int32)
        value_goes_right = jnp.where(
            is_categorical_node(node_set), ~bin_goes_left(node_set, code), value_goes_right
        )
    return jnp.where(is_missing, missing_right, value_goes_right)


def _one_fractions(tree: ShapPaths, X_T: jax.Array) -> jax.Array:
    """``(P, S, n)`` float32 ``o``: 1 where a row takes the path's side at
    every split of the step's group (1 at steps that hold no group)."""
    fails = _goes_right(tree, X_T) != tree.goes_right[..., None]
    n_steps = fails.shape[1]
    failed = jnp.zeros((fails.shape[0], fails.shape[2]), jnp.int32)  # (P, n) bit per group
    for step in range(n_steps):
        failed = failed | (fails[:, step].astype(jnp.int32) << tree.group[:, step, None])
    bits = (failed[:, None, :] >> jnp.arange(n_steps, dtype=jnp.int32)[None, :, None]) & 1
    return (bits == 0).astype(jnp.float32)


def _product(o: list, z: list) -> list:
    """Coefficients (ascending powers of ``t``) of ``prod_j (z_j + o_j t)``."""
    coef = [jnp.ones_like(o[0])]
    for o_j, z_j in zip(o, z):
        middle = [z_j * coef[k] + o_j * coef[k - 1] for k in range(1, len(coef))]
        coef = [z_j * coef[0], *middle, o_j * coef[-1]]
    return coef


def _divide(coef: list, o_j, z_j) -> list:
    """The quotient of ``coef`` by ``z_j + o_j t`` (``o_j`` 0 or 1; a zero
    factor gives zeros: its player's terms vanish anyway)."""
    degree = len(coef) - 1
    by_z = [c / jnp.where(z_j == 0, 1.0, z_j) for c in coef[:degree]]
    by_t = [None] * degree  # synthetic division by (t + z_j)
    by_t[degree - 1] = coef[degree]
    for k in range(degree - 1, 0, -1):
        by_t[k - 1] = coef[k] - z_j * by_t[k]
    return [jnp.where(o_j == 1, t, z) for t, z in zip(by_t, by_z)]


def _weighted(quotient: list, n_players: int):
    """``sum_k quotient_k k! (n - 1 - k)! / n!``: the Shapley weights of the
    coalitions of the other ``n - 1`` players, summed."""
    total = 0.0
    for k, q in enumerate(quotient):
        total = total + q * (math.factorial(k) * math.factorial(n_players - 1 - k))
    return total / math.factorial(n_players)


def _tree_contributions(tree: ShapPaths, X_T: jax.Array, n_features: int) -> jax.Array:
    """``(n_features, K, n)`` one tree's Shapley values of ``X_T (F, n)``."""
    o = _one_fractions(tree, X_T)
    n_steps = o.shape[1]
    o_list = [o[:, s] for s in range(n_steps)]
    z_list = [tree.zero_share[:, s, None] for s in range(n_steps)]
    coef = _product(o_list, z_list)
    phi = []
    for s in range(n_steps):
        weight = _weighted(_divide(coef, o_list[s], z_list[s]), n_steps)
        phi.append((o_list[s] - z_list[s]) * weight)
    per_step = jnp.stack(phi, axis=1).reshape(-1, X_T.shape[1])  # (P S, n)
    # each step's value to its feature and outputs: a product with a
    # (F, K, P S) matrix, faster on CPUs than XLA's scatter of rows
    one_hot = tree.feature.reshape(-1) == jnp.arange(n_features)[:, None]  # (F, P S)
    value = jnp.repeat(tree.value, n_steps, axis=0).T  # (K, P S)
    to_features = jnp.where(one_hot[:, None, :], value[None], 0.0)
    return jnp.einsum("fkq,qn->fkn", to_features, per_step, precision=lax.Precision.HIGHEST)


def _tree_interactions(tree: ShapPaths, X_T: jax.Array, n_features: int) -> jax.Array:
    """``(n_features, n_features, K, n)`` one tree's off-diagonal Shapley
    interaction values (0 on the diagonal)."""
    o = _one_fractions(tree, X_T)
    n_steps = o.shape[1]
    o_list = [o[:, s] for s in range(n_steps)]
    z_list = [tree.zero_share[:, s, None] for s in range(n_steps)]
    coef = _product(o_list, z_list)
    pairs, firsts, seconds = [], [], []
    for j in range(n_steps):
        without_j = _divide(coef, o_list[j], z_list[j])
        for i in range(n_steps):
            if i == j:
                continue
            weight = _weighted(_divide(without_j, o_list[i], z_list[i]), n_steps - 1)
            pairs.append((o_list[i] - z_list[i]) * (o_list[j] - z_list[j]) * weight / 2)
            firsts.append(tree.feature[:, i])
            seconds.append(tree.feature[:, j])
    if not pairs:  # paths of one step: no pairs
        return jnp.zeros((n_features, n_features) + tree.value.shape[-1:] + X_T.shape[1:])
    per_pair = jnp.stack(pairs, axis=1)  # (P, pairs, n)
    per_output = per_pair[:, :, None, :] * tree.value[:, None, :, None]
    flat = per_output.reshape((-1,) + per_output.shape[2:])
    index = (jnp.stack(firsts, axis=1) * n_features + jnp.stack(seconds, axis=1)).reshape(-1)
    # two steps of one group never pair (the group sits at one step, the other has o = z = 1)
    whole = jnp.zeros((n_features * n_features,) + flat.shape[1:], flat.dtype).at[index].add(flat)
    return whole.reshape((n_features, n_features) + flat.shape[1:])


def _forest_program(per_tree, shape: tuple, paths: ShapPaths, X: jax.Array, batch_rows: int):
    """``per_tree``'s values ``(*shape, rows)`` summed over the trees, for
    ``X (n, F)`` in batches of rows: ``(n, *shape)``."""
    n_rows, n_features = X.shape
    n_batches = -(-n_rows // batch_rows)
    padded = jnp.pad(X, ((0, n_batches * batch_rows - n_rows), (0, 0)))
    batches = padded.reshape(n_batches, batch_rows, n_features)

    def one_batch(X_batch):
        X_T = X_batch.T

        def add_tree(total, tree):
            return total + per_tree(tree, X_T, n_features), None

        start = jnp.zeros((*shape, batch_rows), jnp.float32)
        return lax.scan(add_tree, start, paths)[0]

    result = lax.map(one_batch, batches)  # (n_batches, ..., batch_rows)
    result = jnp.moveaxis(result, -1, 1)  # (n_batches, batch_rows, ...)
    return result.reshape((-1,) + result.shape[2:])[:n_rows]


@functools.partial(jax.jit, static_argnames="batch_rows")
def forest_contributions(
    paths: ShapPaths, X: jax.Array, batch_rows: int = DEFAULT_BATCH_ROWS
) -> jax.Array:
    """``(n_rows, n_features, K)`` float32 Shapley values of the raw scores
    of ``X (n_rows, n_features)`` (NaN missing), summed over the trees; the
    expected value (`shap_paths`) is apart."""
    shape = (X.shape[1], paths.value.shape[-1])
    return _forest_program(_tree_contributions, shape, paths, X, batch_rows)


@functools.partial(jax.jit, static_argnames="batch_rows")
def forest_interactions(
    paths: ShapPaths, X: jax.Array, batch_rows: int = DEFAULT_BATCH_ROWS
) -> jax.Array:
    """``(n_rows, n_features, n_features, K)`` float32 off-diagonal Shapley
    interaction values, summed over the trees (the diagonal is 0: the
    caller completes it from the contributions)."""
    shape = (X.shape[1], X.shape[1], paths.value.shape[-1])
    return _forest_program(_tree_interactions, shape, paths, X, batch_rows)


def _native_call(target: str, shape: tuple, paths: ShapPaths, X: jax.Array) -> jax.Array:
    load()
    result = jax.ShapeDtypeStruct(shape, jnp.float32)
    call = jax.ffi.ffi_call(target, result, vmap_method="sequential")
    category_left = paths.category_left
    if category_left is None:
        category_left = jnp.zeros(0, jnp.uint32)
    return call(
        X,
        paths.node,
        paths.feature,
        paths.threshold,
        paths.missing_left,
        paths.goes_right,
        paths.group,
        paths.zero_share,
        paths.value,
        category_left.astype(jnp.uint32),
    )


@jax.jit
def forest_contributions_native(paths: ShapPaths, X: jax.Array) -> jax.Array:
    """`forest_contributions` by the native CPU kernel (``native/shap.cc``):
    the same values (its weights in float64), about ten times faster."""
    shape = (*X.shape, paths.value.shape[-1])
    return _native_call("jaxboost_shap_contributions", shape, paths, X)


@jax.jit
def forest_interactions_native(paths: ShapPaths, X: jax.Array) -> jax.Array:
    """`forest_interactions` by the native CPU kernel (``native/shap.cc``)."""
    shape = (*X.shape, X.shape[1], paths.value.shape[-1])
    return _native_call("jaxboost_shap_interactions", shape, paths, X)


@one_program_per_shape()
def _sharded_program(mesh, explain) -> jax.stages.Wrapped:
    """``explain`` (one of this module's forest functions) with the rows
    sharded over ``mesh``."""
    sharded = jax.shard_map(
        explain, mesh=mesh, in_specs=(P(), P(ROWS)), out_specs=P(ROWS), check_vma=False
    )
    return jax.jit(sharded)


def _on_devices(native, reference, paths: ShapPaths, X: np.ndarray, devices) -> np.ndarray:
    """``native`` (on CPUs where the native kernels build) or ``reference``
    of ``X`` (numpy), the rows padded to their bucket and sharded over
    ``devices`` when there are enough."""
    n_rows = X.shape[0]
    n_devices = len(devices) if n_rows >= _MIN_ROWS_PER_DEVICE * len(devices) else 1
    padded = pad_rows(X, bucket_size(n_rows, n_devices), aligned=in_place_on(devices[0].platform))
    platforms = {device.platform for device in devices}
    explain = native if len(platforms) == 1 and kernels_for(platforms.pop()).native else reference
    if n_devices == 1:
        values = explain(jax.device_put(paths, devices[0]), jax.device_put(padded, devices[0]))
    else:
        mesh = make_mesh(devices[:n_devices])
        rows = jax.device_put(padded, NamedSharding(mesh, P(ROWS)))
        values = _sharded_program(mesh, explain)(paths, rows)
    return np.array(values[:n_rows])


def contributions_on_devices(
    paths: ShapPaths, X: np.ndarray, devices: list[jax.Device]
) -> np.ndarray:
    """``(n_rows, n_features, K)`` float32 `forest_contributions` of ``X``
    (numpy) on ``devices`` (see `_on_devices`)."""
    return _on_devices(forest_contributions_native, forest_contributions, paths, X, devices)


def interactions_on_devices(
    paths: ShapPaths, X: np.ndarray, devices: list[jax.Device]
) -> np.ndarray:
    """``(n_rows, n_features, n_features, K)`` float32 `forest_interactions`
    of ``X`` (numpy) on ``devices``."""
    return _on_devices(forest_interactions_native, forest_interactions, paths, X, devices)

"""Apply a padded forest to raw float features: a jitted ``vmap`` over trees.

On CPUs the native kernel walks the trees instead, about 4x faster; this
module's XLA program is its reference.  `predict_on_devices` calls it from
the host (`predict_forest_host`, through ctypes on the host arrays): no
program to compile at any batch size, and a few tens of microseconds of
fixed cost a call (``benchmarks/bench_predict.py --batch-sizes``).  Elsewhere a batch runs as
chunks of the few sizes of `jaxboost.runtime.padding.CHUNK_ROWS`, one
program each.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ..kernels.native_library import host_library, load
from ..kernels.registry import kernels_for
from ..runtime.devices import ROWS, make_mesh
from ..runtime.padding import CHUNK_ROWS, bucket_size, in_chunks, in_place_on, pad_rows
from ..runtime.program_cache import one_program_per_shape
from .categorical import bin_goes_left, is_categorical_node
from .tree import Tree

# rows per batch: a batch's rows stay in cache while every tree walks them
DEFAULT_BATCH_ROWS = 1_024
# below this many rows per device, one device predicts (sharding costs more)
_MIN_ROWS_PER_DEVICE = 8_192


def tree_depth(forest: Tree) -> int:
    """Depth ``D`` of the trees (their internal-node axis has ``2^D - 1`` entries)."""
    return (forest.feature.shape[-1] + 1).bit_length() - 1


def _goes_right(tree: Tree, node: jax.Array, value: jax.Array) -> jax.Array:
    """``(n_rows,)`` bool: each row's ``value`` goes right at its ``node``."""
    # (traced in the plain test's operand order: the same program without sets)
    is_missing, missing_right = jnp.isnan(value), ~tree.missing_left[node]
    value_goes_right = value > tree.threshold[node]
    if tree.category_left is not None:  # categorical nodes: codes in the set go left
        node_set = tree.category_left[node]  # (n_rows, 8)
        code = jnp.clip(jnp.nan_to_num(value), 0, 255).astype(jnp.int32)
        value_goes_right = jnp.where(
            is_categorical_node(node_set), ~bin_goes_left(node_set, code), value_goes_right
        )
    return jnp.where(is_missing, missing_right, value_goes_right)


def _table_leaf_of_rows(tree: Tree, X: jax.Array) -> jax.Array:
    """`leaf_of_rows` of a node-table tree (``tree.left_child``): every row
    walks its own path until a leaf (``~j``), at most ``L - 1`` steps."""
    n_rows, n_features = X.shape
    values = X.reshape(-1)
    row_start = jnp.arange(n_rows, dtype=jnp.int32) * n_features

    def step(node):
        at = jnp.maximum(node, 0)
        right = _goes_right(tree, at, values[row_start + tree.feature[at]])
        below = jnp.where(right, tree.right_child[at], tree.left_child[at])
        return jnp.where(node >= 0, below, node)

    node = lax.while_loop(lambda node: jnp.any(node >= 0), step, jnp.zeros(n_rows, jnp.int32))
    return ~node


def leaf_of_rows(tree: Tree, X: jax.Array) -> jax.Array:
    """Leaf reached by every row in one tree.

    Walks ``D`` levels with gathers, no branches: ``node = 2 node + 1 + right``.
    Each row's value is read from the flattened rows (``row * n_features +
    feature``): a 1-D gather, about twice as fast on CPU as
    ``take_along_axis`` on the 2-D array.

    Args:
      tree: one tree (no leading axis).
      X: ``(n_rows, n_features)`` float32, NaN for missing.
    Returns:
      ``(n_rows,)`` int32 leaf index in ``[0, 2^D)`` (a node table's: ``[0, L)``).
    """
    if tree.left_child is not None:
        return _table_leaf_of_rows(tree, X)
    depth = tree_depth(tree)
    n_rows, n_features = X.shape
    values = X.reshape(-1)
    row_start = jnp.arange(n_rows, dtype=jnp.int32) * n_features
    node = jnp.zeros(n_rows, jnp.int32)
    for _ in range(depth):
        goes_right = _goes_right(tree, node, values[row_start + tree.feature[node]])
        node = 2 * node + 1 + goes_right.astype(jnp.int32)
    return node - (2**depth - 1)


def _forest_sum(forest: Tree, X_batch: jax.Array) -> jax.Array:
    def one_tree(tree: Tree) -> jax.Array:
        return tree.leaf_value[leaf_of_rows(tree, X_batch)]

    return jnp.sum(jax.vmap(one_tree)(forest), axis=0)


@functools.partial(jax.jit, static_argnames="batch_rows")
def predict_forest(
    forest: Tree, init_score: jax.Array, X: jax.Array, batch_rows: int = DEFAULT_BATCH_ROWS
) -> jax.Array:
    """Raw scores ``F0 + sum_t tree_t(x)`` in batches of rows.

    Args:
      forest: trees stacked on a leading ``(n_trees,)`` axis.
      init_score: ``(K,)``.
      X: ``(n_rows, n_features)`` float32.
    Returns:
      ``(n_rows, K)`` float32.
    """
    n_rows, n_features = X.shape
    batch_rows = max(1, min(batch_rows, n_rows))
    n_batches = -(-n_rows // batch_rows)
    padded = jnp.pad(X, ((0, n_batches * batch_rows - n_rows), (0, 0)))
    batches = padded.reshape(n_batches, batch_rows, n_features)
    raw = lax.map(functools.partial(_forest_sum, forest), batches)
    return raw.reshape(-1, raw.shape[-1])[:n_rows] + init_score


@jax.jit
def predict_forest_native(forest: Tree, init_score: jax.Array, X: jax.Array) -> jax.Array:
    """`predict_forest` by the native CPU kernel (``native/predict.cc``):
    the same arguments and ``(n_rows, K)`` raw scores (summed over trees in
    float64, so they agree with the reference to float32 rounding)."""
    if forest.left_child is not None:  # node tables: the XLA walk (the host's is native)
        return predict_forest(forest, init_score, X)
    load()
    n_outputs = forest.leaf_value.shape[-1]
    result = jax.ShapeDtypeStruct((X.shape[0], n_outputs), jnp.float32)
    call = jax.ffi.ffi_call("jaxboost_predict_forest", result, vmap_method="sequential")
    category_left = forest.category_left
    if category_left is None:
        category_left = jnp.zeros(0, jnp.uint32)
    raw = call(
        X,
        forest.feature,
        forest.threshold,
        forest.missing_left,
        forest.leaf_value,
        category_left.astype(jnp.uint32),
    )
    return raw + init_score


@functools.cache
def _host_walk() -> Callable[..., int]:
    """The native kernel's host entry point (``JaxboostPredictForestHost``)."""
    function = host_library().JaxboostPredictForestHost
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    function.argtypes = [pointer, size, size, *[pointer] * 5, size, size, size, size]
    function.argtypes += [pointer, pointer, ctypes.c_char_p, size]
    function.restype = ctypes.c_int
    return function


@functools.cache
def _walkers(n_threads: int) -> ThreadPoolExecutor:
    """Threads that walk parts of a batch at once (ctypes releases the GIL)."""
    return ThreadPoolExecutor(n_threads, thread_name_prefix="jaxboost-predict")


def predict_forest_host(
    forest: Tree, init_score: np.ndarray, X: np.ndarray, n_threads: int = 1
) -> np.ndarray:
    """`predict_forest_native`'s scores, walked by the native kernel called
    from the host on host arrays: no XLA program, so no compile at any batch
    size, and no dispatch.

    Args:
      forest: trees stacked on a leading ``(n_trees,)`` axis (host or CPU arrays).
      init_score: ``(K,)``.
      X: ``(n_rows, n_features)`` float32.
      n_threads: threads that walk equal parts of the rows side by side.
    Returns:
      ``(n_rows, K)`` float32.
    """
    X = np.ascontiguousarray(X, np.float32)
    n_rows, n_features = X.shape
    feature = np.ascontiguousarray(forest.feature, np.int32)
    threshold = np.ascontiguousarray(forest.threshold, np.float32)
    missing_left = np.ascontiguousarray(forest.missing_left, np.bool_)
    leaf_value = np.ascontiguousarray(forest.leaf_value, np.float32)
    sets = forest.category_left
    sets = np.zeros(0, np.uint32) if sets is None else np.ascontiguousarray(sets, np.uint32)
    n_trees, n_internal = feature.shape
    n_outputs = leaf_value.shape[-1]
    if leaf_value.shape[:2] != (n_trees, n_internal + 1) or threshold.shape != feature.shape:
        raise ValueError("jaxboost predict: tree arrays disagree")
    children = None  # node tables: (n_trees, n_internal, 2) [left, right]
    if forest.left_child is not None:
        children = np.ascontiguousarray(
            np.stack([forest.left_child, forest.right_child], axis=-1), np.int32
        )
        if children.shape != (n_trees, n_internal, 2):
            raise ValueError("jaxboost predict: tree arrays disagree")
    raw = np.empty((n_rows, n_outputs), np.float32)
    walk = _host_walk()
    child_pointer = None if children is None else children.ctypes.data
    trees = [a.ctypes.data for a in (feature, threshold, missing_left, leaf_value, sets)]
    shape = (sets.size, n_trees, n_internal, n_outputs)

    def part(start: int, stop: int) -> bytes | None:
        error = ctypes.create_string_buffer(200)
        rows = X.ctypes.data + start * n_features * 4
        out = raw.ctypes.data + start * n_outputs * 4
        failed = walk(
            rows, stop - start, n_features, *trees, *shape, child_pointer, out, error, 200
        )
        return error.value if failed else None

    n_parts = max(1, min(n_threads, n_rows))
    bounds = [n_rows * k // n_parts for k in range(n_parts + 1)]
    if len(bounds) == 2:
        errors = [part(0, n_rows)]
    else:
        errors = list(_walkers(len(bounds) - 1).map(part, bounds[:-1], bounds[1:]))
    for error in errors:
        if error is not None:
            raise ValueError(error.decode())
    return raw + np.asarray(init_score, np.float32)


def _walks_on_host(devices: Sequence[jax.Device]) -> bool:
    """Whether the native kernel walks the trees on the host: CPU devices
    where it builds."""
    return all(device.platform == "cpu" for device in devices) and kernels_for("cpu").native


def _predict_function(devices: Sequence[jax.Device]):
    """The native kernel on CPUs where it builds, else the XLA program."""
    platforms = {device.platform for device in devices}
    native = len(platforms) == 1 and kernels_for(platforms.pop()).native
    return predict_forest_native if native else predict_forest


@one_program_per_shape()
def _sharded_predict_program(mesh, predict) -> jax.stages.Wrapped:
    """``predict`` (either function) with the rows sharded over ``mesh``."""
    sharded = jax.shard_map(
        predict,
        mesh=mesh,
        in_specs=(P(), P(), P(ROWS)),
        out_specs=P(ROWS),
        check_vma=False,
    )
    return jax.jit(sharded)


def predict_on_devices(
    forest: Tree, init_score: np.ndarray, X: np.ndarray, devices: Sequence[jax.Device]
) -> np.ndarray:
    """Raw scores of ``X``'s rows, sharded over ``devices`` when there are enough rows.

    On CPUs with the native kernel the host walks the trees
    (`predict_forest_host`, one thread per device), compiling nothing.
    Elsewhere one device takes the rows in chunks of the sizes of
    `jaxboost.runtime.padding.CHUNK_ROWS` (a program each, whatever the
    batch's size); a batch of `_MIN_ROWS_PER_DEVICE` rows per device or more
    is padded to its bucket and split between the devices, each of which
    applies the whole forest to its rows.

    Args:
      forest: trees stacked on a leading ``(n_trees,)`` axis.
      init_score: ``(K,)``.
      X: ``(n_rows, n_features)`` float32.
      devices: this process's devices to use.
    Returns:
      ``(n_rows, K)`` float32.
    """
    n_rows = X.shape[0]
    n_devices = len(devices) if n_rows >= _MIN_ROWS_PER_DEVICE * len(devices) else 1
    if _walks_on_host(devices):
        return predict_forest_host(forest, init_score, X, n_threads=n_devices)
    aligned = in_place_on(devices[0].platform)
    predict = _predict_function(devices)
    if n_devices == 1:
        forest, init_score = jax.device_put((forest, init_score), devices[0])
        return in_chunks(
            lambda rows: predict(forest, init_score, jax.device_put(rows, devices[0])),
            X,
            aligned=aligned,
        )
    padded = pad_rows(X, bucket_size(n_rows, n_devices), aligned=aligned)
    mesh = make_mesh(devices)
    rows = jax.device_put(padded, NamedSharding(mesh, P(ROWS)))
    raw = _sharded_predict_program(mesh, predict)(forest, init_score, rows)
    return np.asarray(raw)[:n_rows]


@functools.cache
def _link_programs(link, row_shape: tuple, dtype: np.dtype) -> dict:
    """``link``'s program compiled ahead for rows of ``row_shape`` and
    ``dtype``, one per chunk size of `jaxboost.runtime.padding.CHUNK_ROWS`
    (compiled objects, held here: JAX's cache may be cleared without
    making them stale)."""
    jitted = jax.jit(link)
    return {
        size: jitted.lower(jax.ShapeDtypeStruct((size, *row_shape), dtype)).compile()
        for size in CHUNK_ROWS
    }


def apply_link(link, raw: np.ndarray) -> np.ndarray:
    """``link(raw)`` for raw scores ``(n_rows, ...)``, by one program per
    chunk size of `jaxboost.runtime.padding.CHUNK_ROWS`, all compiled at a
    link's first call for rows of that shape: later batches of any size
    compile nothing."""
    programs = _link_programs(link, raw.shape[1:], np.dtype(raw.dtype))
    return in_chunks(lambda rows: programs[rows.shape[0]](rows), raw)


@functools.partial(jax.jit, static_argnames="trees_per_round")
def round_increments(forest: Tree, X: jax.Array, trees_per_round: int = 1) -> jax.Array:
    """What each round adds to the raw scores.

    Args:
      forest: ``n_rounds * trees_per_round`` stacked trees, in round order.
      X: ``(n_rows, n_features)`` float32.
    Returns:
      ``(n_rounds, n_rows, K)`` float32.
    """

    def one_tree(tree: Tree) -> jax.Array:
        return tree.leaf_value[leaf_of_rows(tree, X)]

    per_tree = jax.vmap(one_tree)(forest)  # (n_trees, n_rows, K)
    n_trees, n_rows, n_outputs = per_tree.shape
    per_round = per_tree.reshape(n_trees // trees_per_round, trees_per_round, n_rows, n_outputs)
    return per_round.sum(axis=1)


@functools.partial(jax.jit, static_argnames="trees_per_round")
def scores_after_rounds(
    forest: Tree, start: jax.Array, X: jax.Array, trees_per_round: int = 1
) -> jax.Array:
    """``start`` plus every round's trees, added round by round in float32
    as a fit adds them (``raw + round's values``): a continued fit's start
    is then bit for bit the scores one longer fit had after those rounds.

    Args:
      forest: ``n_rounds * trees_per_round`` stacked trees, in round order.
      start: ``(n_rows, K)`` float32 scores before the first round.
      X: ``(n_rows, n_features)`` float32.
    Returns:
      ``(n_rows, K)`` float32.
    """
    n_rounds = forest.feature.shape[0] // trees_per_round
    rounds = jax.tree.map(
        lambda leaf: leaf.reshape(n_rounds, trees_per_round, *leaf.shape[1:]), forest
    )

    def add_round(raw: jax.Array, trees: Tree) -> tuple[jax.Array, None]:
        # one tree per output adds its output alone (the others' values are 0)
        values = jax.vmap(lambda tree: tree.leaf_value[leaf_of_rows(tree, X)])(trees)
        return raw + jnp.sum(values, axis=0), None

    return lax.scan(add_round, start, rounds)[0]

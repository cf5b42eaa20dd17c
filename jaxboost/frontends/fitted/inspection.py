"""Inspecting a fitted forest: feature importances, node weights, partial dependence.

Every function here is a pure function of a `jaxboost.engine.tree.Tree`
forest (fields with a leading ``(n_trees,)`` axis).  A node *splits* when its
``split_gain > 0``: the grower records gain 0 exactly at the nodes that do not
split (``threshold = +inf``, every row sent left), while a node that does split
may still have ``threshold = +inf`` when it separates missing values from the
rest, so the threshold cannot tell the two apart.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...engine.categorical import is_categorical_node
from ...engine.predict import tree_depth
from ...engine.tree import Tree

IMPORTANCE_TYPES = ("gain", "split")
# bound on the (trees, grid points, nodes) floats held at once by partial_dependence
_PD_BLOCK_FLOATS = 1 << 22


def feature_importances(forest: Tree, n_features: int, importance_type: str = "gain") -> np.ndarray:
    """Importance of every feature, normalised to sum to 1.

    Args:
      forest: trees stacked on a leading ``(n_trees,)`` axis (or a single tree).
      n_features: length of the result; every split feature must be below it.
      importance_type: ``"gain"`` (total ``split_gain`` of the splits on the
        feature) or ``"split"`` (number of splits on the feature).
    Returns:
      ``(n_features,)`` float64, summing to 1, or all zeros when no node splits.
      Only nodes with ``split_gain > 0`` count.
    """
    if importance_type not in IMPORTANCE_TYPES:
        raise ValueError(
            f"importance_type: expected one of {list(IMPORTANCE_TYPES)}, got {importance_type!r}"
        )
    if int(n_features) < 1:
        raise ValueError(f"n_features: expected a positive integer, got {n_features}")
    feature = np.asarray(forest.feature).reshape(-1)
    gain = np.asarray(forest.split_gain, dtype=np.float64).reshape(-1)
    splits = gain > 0
    if splits.any() and feature[splits].max() >= n_features:
        raise ValueError(
            f"n_features: the forest splits on feature {feature[splits].max()}, "
            f"expected n_features > {feature[splits].max()}, got {n_features}"
        )
    amount = gain[splits] if importance_type == "gain" else np.ones(int(splits.sum()))
    totals = np.bincount(feature[splits], weights=amount, minlength=int(n_features))
    total = totals.sum()
    return totals / total if total > 0 else totals


def node_weights(forest: Tree) -> np.ndarray:
    """Training sample weight reaching every internal node.

    Sums ``leaf_weight`` bottom-up: in heap order node ``i``'s children are
    ``2i+1`` and ``2i+2``, so each level is the pairwise sum of the one below;
    in a node table (``forest.left_child``) children follow their parent.

    Args:
      forest: ``leaf_weight`` of shape ``(..., 2^D)`` (e.g. ``(n_trees, 2^D)``).
    Returns:
      ``(..., 2^D - 1)`` float64 internal-node weights in heap order (a node
      table's: ``(..., L - 1)`` in its order).
    """
    weight = np.asarray(forest.leaf_weight, dtype=np.float64)
    if forest.left_child is not None:
        return _table_node_weights(forest, weight)
    leading = weight.shape[:-1]
    levels = []
    while weight.shape[-1] > 1:
        weight = weight.reshape(leading + (-1, 2)).sum(axis=-1)
        levels.append(weight)
    if not levels:
        return np.zeros(leading + (0,))
    return np.concatenate(levels[::-1], axis=-1)


def _table_node_weights(forest: Tree, leaf_weight: np.ndarray) -> np.ndarray:
    """`node_weights` of node tables ``(..., L - 1)``: children after parents."""
    left, right = np.asarray(forest.left_child), np.asarray(forest.right_child)
    internal = np.zeros(left.shape)

    def weight_of(child):  # (...,) an internal node's weight, or a leaf's
        inner = np.take_along_axis(internal, np.maximum(child, 0)[..., None], -1)[..., 0]
        leaf = np.take_along_axis(leaf_weight, np.maximum(~child, 0)[..., None], -1)[..., 0]
        return np.where(child >= 0, inner, leaf)

    for node in reversed(range(left.shape[-1])):
        internal[..., node] = weight_of(left[..., node]) + weight_of(right[..., node])
    return internal


def _table_partial_dependence(
    tree: Tree, all_weight: jax.Array, features: jax.Array, points: jax.Array
) -> jax.Array:
    """`_tree_partial_dependence` of a node table (``tree.left_child``):
    each point's reach flows from node 0 down the children, which follow
    their parents; ``all_weight``: the internal nodes' then the leaves'."""
    n_internal = tree.feature.shape[0]

    def place(child):  # an internal node's or a leaf's place in all_weight
        return jnp.where(child >= 0, child, n_internal + ~child)

    left_place, right_place = place(tree.left_child), place(tree.right_child)
    left_weight, right_weight = all_weight[left_place], all_weight[right_place]
    go_left = _left_shares(tree, left_weight, left_weight + right_weight, features, points)
    reach = jnp.zeros((points.shape[0], all_weight.shape[0]), jnp.float32).at[:, 0].set(1.0)

    def flow(node, reach):
        here, share = reach[:, node], go_left[:, node]
        reach = reach.at[:, left_place[node]].add(here * share)
        return reach.at[:, right_place[node]].add(here * (1 - share))

    reach = lax.fori_loop(0, n_internal, flow, reach)
    return reach[:, n_internal:] @ tree.leaf_value


def _left_shares(tree, left_weight, parent_weight, features, points) -> jax.Array:
    """``(P, N)`` the share of each point's reach that goes left at each
    node: 1 or 0 where the node splits on a target feature, else the
    training weight's share (everything left where no row reached)."""
    share_left = jnp.where(
        parent_weight > 0, left_weight / jnp.where(parent_weight > 0, parent_weight, 1.0), 1.0
    )
    is_target = tree.feature[:, None] == features[None, :]  # (N, n_targets)
    goes_left = points[:, None, :] <= tree.threshold[None, :, None]  # (P, N, n_targets)
    if tree.category_left is not None:  # categorical nodes: codes in the set go left
        goes_left = jnp.where(
            is_categorical_node(tree.category_left)[None, :, None],
            _codes_go_left(tree.category_left, points),
            goes_left,
        )
    target_left = jnp.any(is_target & goes_left, axis=-1).astype(jnp.float32)
    return jnp.where(jnp.any(is_target, axis=-1), target_left, share_left)  # (P, N)


def _tree_partial_dependence(
    tree: Tree, all_weight: jax.Array, features: jax.Array, points: jax.Array
) -> jax.Array:
    """Friedman's weighted traversal of one tree for every grid point.

    Args:
      tree: one tree.
      all_weight: ``(2^(D+1) - 1,)`` training weight of every node, heap order.
      features: ``(n_targets,)`` int32 target features.
      points: ``(n_points, n_targets)`` float32 grid points.
    Returns:
      ``(n_points, K)`` the tree's partial dependence at every point.
    """
    if tree.left_child is not None:
        return _table_partial_dependence(tree, all_weight, features, points)
    depth = tree_depth(tree)
    left_weight, right_weight = all_weight[1::2], all_weight[2::2]  # children of 0..2^D-2
    # a node no training row reaches has no preference: send everything left
    left = _left_shares(tree, left_weight, left_weight + right_weight, features, points)
    reach = jnp.ones((points.shape[0], 1), jnp.float32)
    for level in range(depth):
        left_of_level = left[:, 2**level - 1 : 2 ** (level + 1) - 1]
        reach = jnp.stack([reach * left_of_level, reach * (1 - left_of_level)], axis=-1)
        reach = reach.reshape(points.shape[0], -1)
    return reach @ tree.leaf_value


def _codes_go_left(category_left: jax.Array, points: jax.Array) -> jax.Array:
    """Whether each grid point's value, read as a category code, is in each
    node's set: ``category_left (N, 8)`` uint32, ``points (P, n_targets)``
    -> ``(P, N, n_targets)`` bool."""
    code = jnp.clip(points, 0, 255).astype(jnp.int32)
    bit = jnp.arange(256, dtype=jnp.uint32)
    in_set = ((category_left[:, bit >> 5] >> (bit & 31)) & 1) == 1  # (N, 256)
    return jnp.moveaxis(in_set[:, code], 0, 1)


@functools.partial(jax.jit, static_argnames="block_trees")
def _forest_partial_dependence(
    forest: Tree, all_weight: jax.Array, features: jax.Array, points: jax.Array, block_trees: int
) -> jax.Array:
    """Sum of the trees' partial dependence, ``block_trees`` trees at a time.

    ``forest`` and ``all_weight`` have ``n_blocks * block_trees`` trees; padding
    trees have zero leaves.  Returns ``(n_points, K)``.
    """

    def one_block(total, block):
        trees, weight = block
        one = functools.partial(_tree_partial_dependence, features=features, points=points)
        return total + jnp.sum(jax.vmap(one)(trees, weight), axis=0), None

    blocks = jax.tree.map(
        lambda leaf: leaf.reshape((-1, block_trees) + leaf.shape[1:]), (forest, all_weight)
    )
    start = jnp.zeros((points.shape[0], forest.leaf_value.shape[-1]), jnp.float32)
    total, _ = lax.scan(one_block, start, blocks)
    return total


def feature_indices(
    features: int | str | Sequence[int | str], names: Sequence[str] | None
) -> list[int]:
    """``features`` as column indices: one index or column name, or a sequence
    of them (names need ``names``, the columns seen in fit)."""
    listed = [features] if isinstance(features, (int, np.integer, str)) else list(features)
    indices = []
    for feature in listed:
        if isinstance(feature, str):
            if names is None or feature not in names:
                raise ValueError(
                    f"features: no column named {feature!r} was seen in fit"
                    + (f" (columns: {list(names)})" if names is not None else "")
                )
            indices.append(list(names).index(feature))
        elif isinstance(feature, (int, np.integer)) and not isinstance(feature, bool):
            indices.append(int(feature))
        else:
            raise TypeError(
                f"features: expected column indices (int) or names (str), got {feature!r}"
            )
    return indices


def _check_grid(features: Sequence[int], grid: Sequence) -> tuple[list[int], list[np.ndarray]]:
    features = [int(feature) for feature in np.atleast_1d(np.asarray(features))]
    if len(features) not in (1, 2):
        raise ValueError(f"features: expected 1 or 2 feature indices, got {features}")
    if min(features) < 0 or len(set(features)) != len(features):
        raise ValueError(f"features: expected distinct non-negative indices, got {features}")
    if len(grid) != len(features):
        raise ValueError(
            f"grid: expected one 1-D array per feature ({len(features)}), got {len(grid)}"
        )
    axes = [np.asarray(values, dtype=np.float32) for values in grid]
    for values in axes:
        if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)):
            raise ValueError(
                f"grid: expected non-empty 1-D arrays of finite values, got shape {values.shape}"
            )
    return features, axes


def partial_dependence(
    forest: Tree, init_score, features: Sequence[int], grid: Sequence
) -> np.ndarray:
    """Partial dependence of the raw score on one or two features.

    Friedman (2001, §8.2): walk every tree; at a node splitting on a target
    feature follow the branch the grid value takes; at a node splitting on
    another feature take both children, weighted by their share of the training
    weight that reached the node.  Per tree this is the weight with which each
    leaf is reached (a product over the levels), dotted with the leaf values.

    Args:
      forest: trees stacked on a leading ``(n_trees,)`` axis.
      init_score: ``(K,)`` the raw score before the first tree.
      features: 1 or 2 distinct feature indices.
      grid: one 1-D array of finite values per feature (category codes
        for a feature the forest splits on as categories).
    Returns:
      ``(len(grid[0]), K)`` or ``(len(grid[0]), len(grid[1]), K)`` float32 on
      the raw score scale.
    """
    features, axes = _check_grid(features, grid)
    forest = jax.tree.map(np.asarray, forest)
    if forest.feature.ndim == 1:
        forest = jax.tree.map(lambda leaf: leaf[None], forest)
    init_score = np.asarray(init_score, dtype=np.float32).reshape(-1)
    n_trees, n_outputs = forest.feature.shape[0], forest.leaf_value.shape[-1]
    if init_score.shape != (n_outputs,):
        raise ValueError(f"init_score: expected shape ({n_outputs},), got {init_score.shape}")
    mesh = np.meshgrid(*axes, indexing="ij")
    points = np.stack([axis.reshape(-1) for axis in mesh], axis=-1)  # (P, n_targets)
    all_weight = np.concatenate([node_weights(forest), forest.leaf_weight], axis=-1)

    n_leaves = forest.leaf_value.shape[-2]
    block_trees = max(1, min(n_trees, _PD_BLOCK_FLOATS // (points.shape[0] * n_leaves)))
    padding = -n_trees % block_trees
    if padding:  # zero-leaf trees that add nothing
        forest = jax.tree.map(
            lambda leaf: np.concatenate([leaf, np.zeros_like(leaf[:padding])]), forest
        )
        all_weight = np.concatenate([all_weight, np.zeros_like(all_weight[:padding])])
    total = _forest_partial_dependence(
        jax.tree.map(jnp.asarray, forest),
        jnp.asarray(all_weight, jnp.float32),
        jnp.asarray(features, jnp.int32),
        jnp.asarray(points),
        block_trees,
    )
    shape = tuple(axis.size for axis in axes) + (n_outputs,)
    return (np.asarray(total) + init_score).reshape(shape)


def grid_from_data(
    X, feature: int, grid_resolution: int = 50, percentiles: tuple[float, float] = (0.05, 0.95)
) -> np.ndarray:
    """Grid of values of one feature, as scikit-learn's partial dependence builds it.

    The sorted distinct values when there are fewer than ``grid_resolution`` of
    them, else ``grid_resolution`` evenly spaced values between the given
    percentiles (fractions in ``[0, 1]``).  Missing values (NaN) are ignored.

    Args:
      X: ``(n_rows, n_features)`` numeric.
      feature: column index.
    Returns:
      ``(n_values,)`` float32 (the precision the trees compare in).
    """
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise ValueError(f"X: expected a 2-D array (n_rows, n_features), got shape {X.shape}")
    if not 0 <= int(feature) < X.shape[1]:
        raise ValueError(f"feature: expected an index in [0, {X.shape[1]}), got {feature}")
    low, high = percentiles
    if not 0 <= low < high <= 1:
        raise ValueError(f"percentiles: expected 0 <= low < high <= 1, got {percentiles}")
    if int(grid_resolution) < 2:
        raise ValueError(f"grid_resolution: expected an integer >= 2, got {grid_resolution}")
    column = X[:, int(feature)]
    column = column[~np.isnan(column)]
    if column.size == 0:
        raise ValueError(f"X: feature {feature} has no non-missing value")
    distinct = np.unique(column)
    if distinct.size < grid_resolution:
        return distinct
    bounds = np.quantile(column.astype(np.float64), [low, high])
    if bounds[0] == bounds[1]:
        raise ValueError(
            f"percentiles: {percentiles} of feature {feature} are equal ({bounds[0]}); widen them"
        )
    return np.linspace(bounds[0], bounds[1], int(grid_resolution)).astype(np.float32)

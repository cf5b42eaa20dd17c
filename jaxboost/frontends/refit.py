"""Joint refit of every leaf value of a grown forest with an optax optimizer.

Once the trees are grown their splits route each row to one leaf per tree, so
the raw scores ``F(x_i) = F0 + sum_t leaf_value[t, leaf_t(x_i)]`` are a
differentiable (linear) function of the leaf values.  Boosting chose each
tree's leaves greedily, one round at a time; `refit_leaves` instead
minimises the training objective over all leaves of all trees at once,
starting from the boosted values, e.g. with L-BFGS.

The optimisation runs as one jitted program under ``shard_map`` over the
``"rows"`` mesh: each shard sums the loss and its gradient over its own rows
and a ``psum`` combines them, so every shard takes the same optimizer steps.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .. import losses as loss_catalogue
from ..engine.derivatives import Loss, sample_loss
from ..engine.neighbours import ordered_forest
from ..engine.predict import leaf_of_rows
from ..engine.tree import Tree
from ..runtime.devices import ROWS, make_mesh
from ..runtime.precision import in_float32

if TYPE_CHECKING:  # optax is imported when a refit runs: 0.3 s less at every import
    import optax
from ..losses.metadata import metadata_of
from ..runtime.program_cache import one_program_per_shape
from .booster import Booster
from .data.validation import as_targets, as_weights
from .settings.constraints import constrains_order, monotone_directions
from .training.computation_keys import keyed_loss, keyed_optimizer
from .training.loss_checks import check_loss, check_target_domain


class RefitData(NamedTuple):
    """One shard of the rows to refit on (padding rows have weight 0)."""

    X: jax.Array  # (n_rows, n_features) float32, NaN for missing
    y: jax.Array  # (n_rows,) or (n_rows, n_targets) float32
    weight: jax.Array  # (n_rows,) float32


_DATA_SPECS = RefitData(X=P(ROWS), y=P(ROWS), weight=P(ROWS))


@jax.jit
def leaves_of_forest(forest: Tree, X: jax.Array) -> jax.Array:
    """Leaf reached by every row in every tree.

    Args:
      forest: trees stacked on a leading ``(n_trees,)`` axis.
      X: ``(n_rows, n_features)`` float32, NaN for missing.
    Returns:
      ``(n_trees, n_rows)`` int32 leaf indices in ``[0, 2^D)``.
    """
    return jax.vmap(leaf_of_rows, in_axes=(0, None))(forest, X)


def forest_raw_scores(
    leaf_value: jax.Array, leaf_index: jax.Array, init_score: jax.Array
) -> jax.Array:
    """Raw scores ``F0 + sum_t leaf_value[t, leaf_index[t, i]]``.

    A scan over trees, so memory stays ``O(n_rows * K)`` whatever the number of
    trees (and the gradient is one scatter-add per tree).

    Args:
      leaf_value: ``(n_trees, 2^D, K)`` float32.
      leaf_index: ``(n_trees, n_rows)`` int32.
      init_score: ``(K,)`` float32.
    Returns:
      ``(n_rows, K)`` float32.
    """

    def add_tree(raw, tree):
        values, index = tree
        return raw + values[index], None

    start = jnp.broadcast_to(init_score, (leaf_index.shape[1], leaf_value.shape[-1]))
    raw, _ = lax.scan(add_tree, start, (leaf_value, leaf_index))
    return raw


def _stores_value_and_grad(state: Any) -> bool:
    """Whether the optimizer keeps the objective's value and gradient in its
    state (L-BFGS and other line searches), to be reused by the next step."""
    import optax

    try:
        return optax.tree.get(state, "value") is not None and (
            optax.tree.get(state, "grad") is not None
        )
    except (KeyError, ValueError):
        return False


def _sharded_objective(
    loss: Loss,
    data: RefitData,
    leaf_index: jax.Array,
    init_score: jax.Array,
    start: jax.Array,
    trainable: jax.Array,
    l2: jax.Array,
) -> Callable[[jax.Array], jax.Array]:
    """``leaf_value (n_trees, 2^D, K) -> scalar``: the weighted mean loss over
    all shards plus the L2 penalty; entries where ``trainable`` is False keep
    their ``start`` value, get zero gradient and no penalty."""
    total_weight = lax.psum(jnp.sum(data.weight), ROWS)

    def local_loss_sum(leaf_value):
        raw = forest_raw_scores(leaf_value, leaf_index, init_score)
        return jnp.sum(data.weight * sample_loss(loss, data.y, raw))

    # The psum sits outside differentiation: the forward pass sums value and
    # gradient over shards, the backward pass only scales that gradient.
    @jax.custom_vjp
    def loss_sum(leaf_value):
        return lax.psum(local_loss_sum(leaf_value), ROWS)

    def loss_sum_fwd(leaf_value):
        value, grad = jax.value_and_grad(local_loss_sum)(leaf_value)
        return lax.psum(value, ROWS), lax.psum(grad, ROWS)

    loss_sum.defvjp(loss_sum_fwd, lambda grad, cotangent: (cotangent * grad,))

    def objective(params):
        leaf_value = jnp.where(trainable, params, start)
        penalty = l2 * jnp.sum(jnp.where(trainable, jnp.square(params), 0.0))
        return loss_sum(leaf_value) / total_weight + penalty

    return objective


def _minimise(
    objective: Callable[[jax.Array], jax.Array],
    optimizer: optax.GradientTransformationExtraArgs,
    start: jax.Array,
    steps: int,
) -> tuple[jax.Array, jax.Array]:
    """``steps`` optimizer steps from ``start`` in one ``lax.scan``.

    Returns the final parameters and ``(steps + 1,)`` objective values: before
    each step, then at the result.
    """
    import optax

    state = optimizer.init(start)
    if _stores_value_and_grad(state):
        value_and_grad = optax.value_and_grad_from_state(objective)
    else:
        value_and_grad = lambda params, state: jax.value_and_grad(objective)(params)

    def step(carry, _):
        params, state = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = optimizer.update(
            grad, state, params, value=value, grad=grad, value_fn=objective
        )
        return (optax.apply_updates(params, updates), state), value

    (params, _), values = lax.scan(step, (start, state), None, length=steps)
    return params, jnp.append(values, objective(params))


def _refit(
    loss: Loss,
    optimizer: optax.GradientTransformationExtraArgs,
    steps: int,
    data: RefitData,
    forest: Tree,
    init_score: jax.Array,
    trainable_outputs: jax.Array,
    l2: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The refit on one shard of rows (inside ``shard_map``).

    Args:
      data: this shard's rows.
      forest: the trees, ``leaf_value`` ``(n_trees, 2^D, K)`` the start.
      init_score: ``(K,)``.
      trainable_outputs: ``(n_trees, K)`` bool, the outputs each tree may move.
      l2: scalar penalty.
    Returns:
      ``(leaf_value (n_trees, 2^D, K), objective (steps + 1,))``, the same on
      every shard.
    """
    start = forest.leaf_value
    leaf_index = leaves_of_forest(forest, data.X)  # once, outside the loop
    rows_per_leaf = jax.vmap(
        lambda index: jax.ops.segment_sum(
            (data.weight > 0).astype(jnp.float32), index, start.shape[1]
        )
    )(leaf_index)
    reached = lax.psum(rows_per_leaf, ROWS) > 0  # (n_trees, 2^D)
    trainable = reached[:, :, None] & trainable_outputs[:, None, :]
    objective = _sharded_objective(loss, data, leaf_index, init_score, start, trainable, l2)
    params, values = _minimise(objective, optimizer, start, steps)
    return jnp.where(trainable, params, start), values


@one_program_per_shape()
def refit_program(
    loss: Loss, optimizer: optax.GradientTransformationExtraArgs, steps: int, mesh: Mesh
) -> Callable:
    """``(data, forest, init_score, trainable_outputs, l2) -> (leaf_value, objective)``,
    jitted and sharded over the rows of ``data``."""
    sharded = jax.shard_map(
        functools.partial(_refit, loss, optimizer, steps),
        mesh=mesh,
        in_specs=(_DATA_SPECS, P(), P(), P(), P()),
        out_specs=(P(), P()),
        check_vma=False,
    )
    return jax.jit(sharded)


@functools.cache
def _default_optimizer() -> optax.GradientTransformationExtraArgs:
    # one instance, so that the compiled program is reused across calls
    import optax

    return optax.lbfgs()


def _shard_rows(mesh: Mesh, X: np.ndarray, y: np.ndarray, weight: np.ndarray) -> RefitData:
    """Pad rows to a multiple of the mesh size (copies of row 0, weight 0) and
    place each shard on its device."""
    extra = -X.shape[0] % mesh.size
    if extra:
        X = np.concatenate([X, np.repeat(X[:1], extra, axis=0)])
        y = np.concatenate([y, np.repeat(y[:1], extra, axis=0)])
        weight = np.concatenate([weight, np.zeros(extra, np.float32)])
    sharding = NamedSharding(mesh, P(ROWS))
    return RefitData(*(jax.device_put(array, sharding) for array in (X, y, weight)))


def _trainable_outputs(model: Booster) -> np.ndarray:
    """``(n_trees, K)`` bool: a tree of a one-output-per-tree model moves only
    its own output (trees of a round are in output order); vector-leaf trees
    move all of them."""
    n_trees = model.forest_.leaf_value.shape[0]
    per_round = model.trees_per_round_
    if per_round == 1:
        return np.ones((n_trees, model.n_outputs_), bool)
    return np.tile(np.eye(per_round, model.n_outputs_, dtype=bool), (n_trees // per_round, 1))


def _monotone_leaves(model: Booster, leaf_value) -> jax.Array:
    """A monotone model's refitted ``leaf_value`` ``(n_trees, 2^D, 1)``
    clipped, tree by tree, to bounds from the values of the leaves that touch
    (`jaxboost.engine.neighbours.ordered_forest`): exactly monotone again."""
    names = getattr(model, "feature_names_in_", None)
    direction = monotone_directions(model.monotone_constraints, int(model.n_features_in_), names)
    forest = jax.tree.map(np.asarray, model.forest_)._replace(leaf_value=np.asarray(leaf_value))
    return ordered_forest(forest, jnp.asarray(direction, jnp.int32), int(model.max_bins))


@in_float32
def refit_leaves(
    model: Booster,
    X: Any,
    y: Any,
    sample_weight: Any = None,
    *,
    loss: str | Callable | None = None,
    optimizer: optax.GradientTransformation | None = None,
    steps: int = 100,
    l2: float = 0.0,
) -> Booster:
    """A copy of ``model`` whose leaf values jointly minimise a training objective.

    Minimises ``sum_i w_i loss(y_i, F(x_i)) / sum_i w_i + l2 * sum(leaf_value^2)``
    over the leaf values of all trees at once, from their current values; the
    splits, ``base_score_`` and everything else stay as they are.  Leaves that
    no row (of positive weight) reaches keep their value, as do the outputs a
    tree of a ``one_output_per_tree`` model does not predict.

    Args:
      model: a fitted `Booster`; it is not modified.
      X: ``(n_rows, n_features)`` features, NaN for missing (the training rows,
        or new data to fine-tune on).
      y: ``(n_rows,)`` or ``(n_rows, n_targets)`` targets.
      sample_weight: ``(n_rows,)`` non-negative weights (default: ones).
      loss: the per-sample loss ``loss(y, f)`` to minimise, or a catalogue
        name; default ``model.loss_``.  The returned model's ``loss_`` is this
        loss, so ``predict`` applies its link.
      optimizer: any optax ``GradientTransformation``, e.g. ``optax.adam(1e-2)``;
        default ``optax.lbfgs()``.  Line-search optimizers get ``value``,
        ``grad`` and ``value_fn`` in ``update`` and reuse the value and
        gradient stored in their state.
      steps: optimizer steps (one jitted ``lax.scan`` over them).
      l2: penalty on the squared leaf values (of the leaves that can move).
    Returns:
      a new fitted Booster (``model``'s settings, a new ``model_``) with new
      ``forest_.leaf_value`` ``(n_trees, 2^D, K)`` and ``refit_loss_``
      ``(steps + 1,)``: the objective before each step, then at the result.
    """
    features, targets, weight, user_loss, loss, optimizer = _checked_arguments(
        model, X, y, sample_weight, loss=loss, optimizer=optimizer, steps=steps, l2=l2
    )
    mesh = make_mesh(model.devices)
    data = _shard_rows(mesh, features, targets, weight)
    replicated = NamedSharding(mesh, P())
    forest = jax.device_put(jax.tree.map(np.asarray, model.forest_), replicated)
    import optax

    # keyed on what its init and update compute (a schedule reading a global
    # that has changed is a new program)
    optimizer = keyed_optimizer(
        optax.with_extra_args_support(optimizer),
        jax.ShapeDtypeStruct(np.shape(model.forest_.leaf_value), jnp.float32),
    )
    program = refit_program(loss, optimizer, int(steps), mesh)
    leaf_value, objective = program(
        data,
        forest,
        jax.device_put(np.asarray(model.base_score_, np.float32), replicated),
        jax.device_put(_trainable_outputs(model), replicated),
        jax.device_put(np.float32(l2), replicated),
    )
    objective = _checked_objective(objective)

    if constrains_order(getattr(model, "monotone_constraints", None)):
        # the refitted leaves put back in order along the constrained columns
        leaf_value = _monotone_leaves(model, leaf_value)
    refitted = copy.copy(model)  # (its settings; the model is a new one)
    refitted.model_ = model.model_.replace(
        forest_=model.forest_._replace(leaf_value=np.asarray(leaf_value)),
        loss_=user_loss,
        refit_loss_=objective,
    )
    return refitted


def _checked_arguments(model, X, y, sample_weight, *, loss, optimizer, steps, l2) -> tuple:
    """`refit_leaves`' arguments checked: ``(features, targets, weight,
    the loss as given, the loss keyed, the optimizer)``."""
    if not isinstance(model, Booster):
        raise TypeError(f"model: expected a fitted jaxboost Booster, got {type(model).__name__}")
    features = model._features_for_predict(X)  # checks fitted, feature count and names
    targets = as_targets(y, features.shape[0])
    weight = as_weights(sample_weight, features.shape[0])
    loss = model.loss_ if loss is None else loss_catalogue.resolve(loss)
    if metadata_of(loss).per == "group":
        raise ValueError(
            f"loss: refit_leaves minimises a per-sample loss; {loss.name!r} is a group loss "
            "(pass loss= a per-sample one to refit with it)"
        )
    check_target_domain(loss, targets)
    # the programs are reused exactly for the same computation
    user_loss = loss
    loss = keyed_loss(loss, targets.shape[1:], int(model.n_outputs_))
    check_loss(loss, targets, int(model.n_outputs_))
    if optimizer is None:
        optimizer = _default_optimizer()
    if not (
        callable(getattr(optimizer, "init", None)) and callable(getattr(optimizer, "update", None))
    ):
        raise TypeError(
            f"optimizer: expected an optax GradientTransformation (init, update), got {optimizer!r}"
        )
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps: expected a non-negative integer, got {steps!r}")
    if not (np.isfinite(l2) and l2 >= 0):
        raise ValueError(f"l2: expected a finite non-negative penalty, got {l2!r}")
    return features, targets, weight, user_loss, loss, optimizer


def _checked_objective(objective) -> np.ndarray:
    """The refit's objective before each step and at the end, or an error
    where it is not finite: at the start (the loss does not suit the model),
    or after a step (the optimizer diverged)."""
    objective = np.asarray(objective)
    if not np.isfinite(objective[0]):
        raise ValueError(
            f"loss: the objective at the model's current leaf values is {objective[0]} "
            "(not finite); check that the loss suits the targets and the model's outputs"
        )
    bad = np.flatnonzero(~np.isfinite(objective))
    if bad.size:
        raise FloatingPointError(
            f"optimizer: the objective became {objective[bad[0]]} after step {bad[0]}: "
            "the optimizer diverged; lower its learning rate or raise l2"
        )
    return objective

"""A fit's loss and metrics keyed on what they compute, before any program runs.

The training, initial-score, derivative and metric programs are cached on the
loss and metric objects they call; `keyed_loss` and
`keyed_metrics` hand them `jaxboost.runtime.same_function.SameComputation`
objects, traced at this fit's shapes, so that a program is reused exactly
when the computation is the same (see that module).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from ..engine.metrics import Metric, group_metric, per_sample
from ..runtime.same_function import SameComputation, plain, same_computation

# rows of the group a group loss is traced on for its key
_KEY_GROUP_ROWS = 8


def sample_arguments(target_row: tuple[int, ...], n_outputs: int) -> tuple:
    """The shapes of ``(y, f)`` for a per-sample function: one row's target
    ``target_row`` and its ``()`` or ``(n_outputs,)`` raw scores."""
    f_shape = () if n_outputs == 1 else (n_outputs,)
    return (
        jax.ShapeDtypeStruct(target_row, jnp.float32),
        jax.ShapeDtypeStruct(f_shape, jnp.float32),
    )


def group_arguments(target_row: tuple[int, ...]) -> tuple:
    """The shapes of ``(y, f, mask)`` for a group loss of a few rows."""
    m = _KEY_GROUP_ROWS
    return (
        jax.ShapeDtypeStruct((m, *target_row), jnp.float32),
        jax.ShapeDtypeStruct((m,), jnp.float32),
        jax.ShapeDtypeStruct((m,), jnp.bool_),
    )


def keyed_loss(
    loss: Callable, target_row: tuple[int, ...], n_outputs: int, grouped: bool
) -> SameComputation:
    """``loss`` keyed at one row's (or a group's) shapes."""
    arguments = group_arguments(target_row) if grouped else sample_arguments(target_row, n_outputs)
    return same_computation(loss, *arguments)


def keyed_metrics(
    metrics: Sequence[Metric],
    loss: SameComputation,
    target_row: tuple[int, ...],
    n_outputs: int,
) -> list[Metric]:
    """``metrics`` with their per-sample functions keyed; the training loss
    (``eval_metric="loss"``) is ``loss`` itself.  Built-in metrics of whole
    sets and ranking metrics are the library's own functions: left as they are."""
    arguments = sample_arguments(target_row, n_outputs)
    keyed = []
    for metric in metrics:
        if metric.per_group is not None:
            if plain(metric.per_group) is plain(loss):
                metric = group_metric(metric.name, loss, metric.greater_is_better)
            keyed.append(metric)
            continue
        if metric.per_sample is None:
            keyed.append(metric)
            continue
        fn = metric.per_sample
        fn = loss if plain(fn) is plain(loss) else same_computation(fn, *arguments)
        keyed.append(
            per_sample(metric.name, fn)._replace(
                greater_is_better=metric.greater_is_better,
                outputs=metric.outputs,
                target_domain=metric.target_domain,
            )
        )
    return keyed

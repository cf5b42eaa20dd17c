"""A fit's loss and metrics keyed on what they compute, before any program runs.

The training, initial-score, derivative and metric programs are cached on the
loss and metric objects they call; `keyed_loss` and
`keyed_metrics` hand them `jaxboost.runtime.same_function.SameComputation`
objects, traced at the shapes this fit's programs call them with, so that a
program is reused exactly when the computation is the same (see that
module).  A group loss is traced at every padded group length the fit runs
(its training groups' and its evaluation sets'): a trace at one length does
not see what the loss computes at others (a top-k loss with k = 10 and one
with k = 20 are the same loss on groups of 8 rows), and at the padding
check's group (`jaxboost.frontends.training.padding_check`).  The loss also carries
its structure and lifted values (`jaxboost.runtime.lifted_values`): the
programs that take the values are cached on the structure, so a new value
of a number the loss reads compiles nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...engine.fisher import FISHER_DRAWS
from ...engine.metrics import Metric, group_metric, per_sample
from ...losses.metadata import metadata_of
from ...runtime.distributed import gather_same_shape
from ...runtime.same_function import (
    Part,
    SameComputation,
    is_library_function,
    plain,
    same_computation,
    same_parts,
)
from ..data.grouping import group_width
from .monitor import EvalSet
from .padding_check import PROBE_WIDTH


def sample_arguments(target_row: tuple[int, ...], n_outputs: int) -> tuple:
    """The shapes of ``(y, f)`` for a per-sample function: one row's target
    ``target_row`` and its ``()`` or ``(n_outputs,)`` raw scores."""
    f_shape = () if n_outputs == 1 else (n_outputs,)
    return (
        jax.ShapeDtypeStruct(target_row, jnp.float32),
        jax.ShapeDtypeStruct(f_shape, jnp.float32),
    )


def group_arguments(target_row: tuple[int, ...], width: int) -> tuple:
    """The shapes of ``(y, f, mask)`` for a group loss on a group padded to
    ``width`` rows."""
    return (
        jax.ShapeDtypeStruct((width, *target_row), jnp.float32),
        jax.ShapeDtypeStruct((width,), jnp.float32),
        jax.ShapeDtypeStruct((width,), jnp.bool_),
    )


_WIDTH_BITS = 33  # group widths are powers of two up to 2**32


def group_widths(sizes: np.ndarray, eval_sets: Sequence[EvalSet] = ()) -> tuple[int, ...]:
    """The padded lengths a fit runs a group loss at: its groups' of
    ``sizes`` (`jaxboost.frontends.data.grouping.group_width`) and its
    evaluation sets' groups', on every process (called by all of them)."""
    widths = {group_width(int(size)) for size in np.unique(sizes)}
    for evaluated in eval_sets:
        widths.update(int(bucket.mask.shape[-1]) for bucket in evaluated.groups)
    # with several processes, every process's: the programs run each width
    # any process has (`jaxboost.frontends.data.grouping.agreed_shapes`),
    # and a lifted loss must be traced at each
    found = np.zeros(_WIDTH_BITS, np.uint8)
    found[[width.bit_length() - 1 for width in widths]] = 1
    every = gather_same_shape(found).max(axis=0)
    return tuple(1 << bit for bit in np.flatnonzero(every))


def searches_from_init(loss: Callable, n_outputs: int, widths: tuple[int, ...] | None) -> bool:
    """Whether the initial score's program calls the loss's declared ``init``
    (a per-sample loss of several outputs: `jaxboost.engine.init_score`)."""
    return widths is None and n_outputs > 1 and metadata_of(loss).init is not None


def keyed_loss(
    loss: Callable,
    target_row: tuple[int, ...],
    n_outputs: int,
    widths: tuple[int, ...] | None = None,
    init_rows: int | None = None,
) -> SameComputation:
    """``loss`` keyed at one row's shapes, or, ``widths`` given (a group
    loss), at a group's of each of those padded lengths (`group_widths`).
    Its declared ``fisher`` and ``sampler`` are keyed at one row's scores,
    as `jaxboost.engine.fisher` calls them, and its ``init`` (where
    `searches_from_init`) at ``init_rows`` rows, the initial score's
    program's (every process's, padded)."""
    if widths is None:
        calls = [sample_arguments(target_row, n_outputs)]
    else:
        # (and at the padding check's group: jaxboost.frontends.training.padding_check)
        widths = sorted({*widths, PROBE_WIDTH})
        calls = [group_arguments(target_row, width) for width in widths]
    parts = _parts(loss, target_row, n_outputs, init_rows)
    return same_computation(loss, calls, parts, lifted=True)


def _stand_in_objective(params: jax.Array) -> jax.Array:
    """The objective a line-search optimizer's ``update`` is traced with for
    its key (the refit's own objective is keyed by its loss)."""
    return jnp.sum(jnp.square(params))


def keyed_optimizer(optimizer: Any, params: jax.ShapeDtypeStruct) -> SameComputation:
    """An optax ``GradientTransformationExtraArgs`` keyed on what its
    ``init`` and ``update`` compute at ``params``' shape, as
    `jaxboost.frontends.refit` calls them: a schedule or setting that reads
    a global is a new optimizer once the global changes, and two optimizer
    objects built alike share their programs."""
    state = jax.eval_shape(optimizer.init, params)
    value = jax.ShapeDtypeStruct((), params.dtype)

    def update(grad, state, params, value):
        return optimizer.update(
            grad, state, params, value=value, grad=grad, value_fn=_stand_in_objective
        )

    parts = [
        Part("init", optimizer.init, (params,)),
        Part("update", update, (params, state, params, value)),
    ]
    return same_parts(optimizer, parts)


def _parts(
    loss: Callable, target_row: tuple[int, ...], n_outputs: int, init_rows: int | None
) -> list[Part]:
    """The declared functions of ``loss`` the programs call, with the shapes
    they call them at."""
    _, score = sample_arguments(target_row, n_outputs)
    parts = []
    fisher = metadata_of(loss).fisher
    if fisher is not None:  # jaxboost.engine.fisher.declared_fisher, per row
        parts.append(Part("fisher", fisher, (score,)))
    sampler = metadata_of(loss).sampler
    if sampler is not None:  # sampled_fisher, per row

        def draws(key, f):
            return sampler(key, f, FISHER_DRAWS)

        key = jax.eval_shape(lambda: jax.random.key(0))
        parts.append(Part("sampler", draws, (key, score), static=(FISHER_DRAWS,)))
    init = metadata_of(loss).init
    if init is not None and init_rows is not None:  # init_score.declared_start
        rows = (
            jax.ShapeDtypeStruct((init_rows, *target_row), jnp.float32),
            jax.ShapeDtypeStruct((init_rows,), jnp.float32),
        )
        parts.append(Part("init", init, rows))
    return parts


def keyed_metrics(
    metrics: Sequence[Metric],
    loss: SameComputation,
    target_row: tuple[int, ...],
    n_outputs: int,
    eval_sets: Sequence[EvalSet] = (),
) -> list[Metric]:
    """``metrics`` with their per-sample and group functions keyed (a group
    function at the padded lengths of ``eval_sets``' groups); the training
    loss (``eval_metric="loss"``) is ``loss`` itself.  Built-in metrics of
    whole sets and the library's ranking metrics are its own functions:
    left as they are."""
    arguments = sample_arguments(target_row, n_outputs)
    keyed = []
    for metric in metrics:
        if metric.per_group is not None:
            fn = metric.per_group
            if plain(fn) is plain(loss):
                metric = group_metric(metric.name, loss, metric.greater_is_better)
            elif not is_library_function(plain(fn)):
                widths = sorted({int(b.mask.shape[-1]) for s in eval_sets for b in s.groups})
                calls = [group_arguments(target_row, width) for width in widths]
                metric = metric._replace(per_group=same_computation(fn, calls, lifted=True))
            keyed.append(metric)
            continue
        if metric.per_sample is None:
            keyed.append(metric)
            continue
        fn = metric.per_sample
        if plain(fn) is not plain(loss):
            fn = same_computation(fn, [arguments], lifted=True)
        else:
            fn = loss
        keyed.append(
            per_sample(metric.name, fn)._replace(
                greater_is_better=metric.greater_is_better,
                outputs=metric.outputs,
                target_domain=metric.target_domain,
            )
        )
    return keyed

"""A fit's inputs, from the arguments (`FitArguments`, their categorical
columns coded: `jaxboost.frontends.data.categories.coded_data`) to the one
checked record the trainer takes (`jaxboost.frontends.training.placement.FitInputs`):
every array checked and converted, the groups and evaluation sets, the
constraints, the loss and metrics resolved and tried on their shapes, the
offsets and what an ``init_model`` continues from.  With several processes
the checks run on every one (a failure in one stops them all rather than
hanging them).

``settings``: a holder of the Booster's settings as attributes (a
`jaxboost.Booster`, or `jaxboost.frontends.settings.settings_table.settings_record`'s
frozen record of one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from ... import losses as loss_catalogue
from ...engine.fisher import check_distribution
from ...engine.metrics import Metric, resolve_metric
from ...losses.metadata import metadata_of
from ...runtime.devices import check_devices
from ...runtime.distributed import gather, on_every_process
from ..data.grouping import eval_set_groups, fit_groups
from ..data.offsets import as_offsets
from ..data.validation import (
    as_features,
    as_targets,
    as_weights,
    check_not_all_constant,
)
from ..settings.checks import whole_number
from .computation_keys import group_widths, keyed_loss, keyed_metrics, searches_from_init
from .continued import check_compatible, continued_from, fitted_model, with_model_scores
from .eval_sets import prepare_eval_sets, with_eval_offsets
from .loss_checks import (
    check_group_loss,
    check_loss,
    check_metric,
    check_target_domain,
    check_target_spread,
    check_unbounded_targets,
)
from .placement import FitInputs, init_search_rows
from .program_settings import check_all_settings, constraint_settings


class FitArguments(NamedTuple):
    """``fit``'s data arguments, as given (``X`` and the evaluation sets'
    with their categorical columns coded:
    `jaxboost.frontends.data.categories.coded_data`)."""

    X: Any
    y: Any
    sample_weight: Any
    eval_set: Any
    eval_sample_weight: Any
    eval_metric: Any
    early_stopping_rounds: Any
    group: Any = None
    qid: Any = None
    eval_group: Any = None
    eval_qid: Any = None
    init_score: Any = None
    eval_init_score: Any = None
    init_model: Any = None


def n_outputs_of(settings: Any, loss: Callable, y: np.ndarray) -> int:
    """The raw scores per row: the ``n_outputs`` setting, else what ``loss``
    declares (``"n_classes"``: of all processes' labels ``y``)."""
    if settings.n_outputs is not None:
        if int(settings.n_outputs) < 1:
            raise ValueError(f"n_outputs: expected a positive integer, got {settings.n_outputs}")
        return int(settings.n_outputs)
    declared = metadata_of(loss).n_outputs
    if declared == "n_classes":
        # the largest label of all processes' rows
        n_classes = int(np.max(gather(np.max(y, keepdims=True)))) + 1
        if n_classes < 2:
            raise ValueError(
                f"y: the loss {metadata_of(loss).name!r} scores classes 0 to "
                "max(y) and needs at least two; every label here is 0"
            )
        return n_classes
    if declared == "n_targets":  # one score per column of 2-D targets
        return int(y.shape[1]) if y.ndim == 2 else 1
    return int(declared)


def checked_inputs(settings: Any, arguments: FitArguments, names: list[str] | None):
    """``fit``'s arguments checked and converted (no collectives):
    ``(features, targets, weight, feature names, loss, eval sets, metrics,
    groups)``; ``names``: ``X``'s column names (None for an array)."""
    X, y, sample_weight, eval_set, eval_sample_weight, eval_metric = arguments[:6]
    early_stopping_rounds = arguments.early_stopping_rounds
    check_all_settings(settings)
    if early_stopping_rounds is not None:
        try:
            whole_number("early_stopping_rounds", early_stopping_rounds)
        except ValueError as error:
            raise ValueError(f"{error} (None turns early stopping off)") from None
    features = as_features(X, finite=True, refuse_subnormal=True)
    targets = as_targets(y, features.shape[0])
    weight = as_weights(sample_weight, features.shape[0])
    loss = loss_catalogue.resolve(settings.loss, settings.loss_params)
    check_target_domain(loss, targets)
    check_target_spread(loss, targets, weight)
    group_settings = {key: getattr(settings, key) for key in ("leaf_method", "armijo", "n_outputs")}
    given_weight = None if sample_weight is None else weight
    grouped = fit_groups(
        loss, arguments.group, arguments.qid, targets, given_weight, group_settings
    )
    eval_groups = eval_set_groups(arguments.eval_group, arguments.eval_qid, eval_set, loss)
    eval_sets = prepare_eval_sets(
        eval_set,
        eval_sample_weight,
        features.shape[1],
        loss,
        eval_groups,
        names,
        target_shape=targets.shape[1:],
    )
    if early_stopping_rounds is not None and not eval_sets:
        raise ValueError("early_stopping_rounds: needs at least one eval_set")
    several = isinstance(eval_metric, (list, tuple)) and not isinstance(eval_metric, Metric)
    metric_specs = eval_metric if several else [eval_metric or "loss"]
    metrics = [resolve_metric(spec, loss) for spec in metric_specs]
    return features, targets, weight, names, loss, eval_sets, metrics, grouped


def fit_inputs(
    settings: Any, arguments: FitArguments, names: list[str] | None, categories: list | None
) -> FitInputs:
    """``fit``'s arguments (``X``'s column ``names``, None for an array;
    its categorical columns coded by ``categories``) checked and converted,
    with several processes on every one (a failure in one stops them all
    rather than hanging them), and the loss and metrics tried on their shapes."""
    features, targets, weight, names, loss, eval_sets, metrics, grouped = on_every_process(
        lambda: checked_inputs(settings, arguments, names)
    )
    check_not_all_constant(features, gather=gather)
    n_outputs = n_outputs_of(settings, loss, targets)
    # (after n_outputs: labels all 0 are refused there as one class)

    def check_targets_and_constraints() -> None:
        check_unbounded_targets(loss, targets, weight)
        constraint_settings(settings, features.shape[1], names, n_outputs)

    on_every_process(check_targets_and_constraints)
    # programs are reused exactly for the same computation: keyed by
    # tracing, at the shapes the programs call them with
    widths = None if grouped is None else group_widths(grouped.sizes, eval_sets)
    init_rows = None
    if searches_from_init(loss, n_outputs, widths):
        init_rows = init_search_rows(settings, features.shape[0])
    given_loss = loss  # (its parameter names: offsets' messages)
    loss = keyed_loss(loss, targets.shape[1:], n_outputs, widths=widths, init_rows=init_rows)
    metrics = keyed_metrics(metrics, loss, targets.shape[1:], n_outputs, eval_sets)

    def check_loss_and_metrics() -> None:
        if grouped is None:
            check_loss(loss, targets, n_outputs)
            check_distribution(loss, targets, weight, n_outputs)
        else:
            check_group_loss(loss, targets)
        for metric in metrics:
            for evaluated in eval_sets:
                check_metric(metric, np.asarray(evaluated.y), n_outputs)

    def checked_start():
        check_loss_and_metrics()
        return _starting_scores(
            settings, arguments, features, names, n_outputs, eval_sets, given_loss
        )

    offsets, eval_sets, continued = on_every_process(checked_start)
    return FitInputs(
        features,
        targets,
        weight,
        names,
        loss,
        eval_sets,
        metrics,
        n_outputs,
        grouped,
        offsets,
        continued,
        categories,
    )


def _starting_scores(settings: Any, arguments, features, names, n_outputs, eval_sets, loss=None):
    """``fit``'s ``init_score`` checked, ``eval_sets`` with their
    offsets (``eval_init_score``, plus ``init_model``'s trees), and what
    ``init_model`` continues from (or None); ``loss`` names the offsets'
    columns in their errors."""
    offsets = as_offsets(arguments.init_score, features.shape[0], n_outputs, loss=loss)
    eval_sets = with_eval_offsets(
        eval_sets, arguments.eval_init_score, arguments.eval_set, n_outputs, loss
    )
    if arguments.init_model is None:
        return offsets, eval_sets, None
    model = fitted_model(arguments.init_model)
    check_compatible(model, settings, features.shape[1], names, n_outputs)
    device = (check_devices(settings.devices) or jax.local_devices())[0]
    continued = continued_from(model, features, offsets, device)
    return offsets, with_model_scores(model, eval_sets, device), continued

"""``fit_model``: one fit, from ``fit``'s arguments as given to a `Model`.

The categorical columns' categories are fitted once and every argument
coded and checked into one record (`jaxboost.frontends.training.fit_inputs`); the
record is trained on (`jaxboost.frontends.training.trainer.train`), or, where
early stopping holds rows out, sliced into the holdout's first fit
(`jaxboost.frontends.training.holdout`).  `jaxboost.Booster.fit` calls it; nothing
here goes back to a front end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...losses.catalogue import resolve
from ..fitted.model import Model
from ..settings.checks import choice
from ..settings.settings_table import HESSIAN_SETTINGS
from .fit_inputs import FitArguments, category_tables, coded_arguments, fit_inputs
from .holdout import holds_out, train_with_holdout
from .trainer import train


def fit_model(
    settings: Any,
    arguments: FitArguments,
    *,
    callbacks: Sequence[Callable] | None = None,
    verbose: int = 0,
    seen_as: Callable[[Model], Any] | None = None,
) -> Model:
    """The model of ``settings`` (a fit's record:
    `jaxboost.frontends.settings.settings_table.settings_record`) fitted on
    ``arguments`` (``fit``'s, as given); ``callbacks``, ``verbose`` and
    ``seen_as`` as `jaxboost.frontends.training.trainer.train`'s."""
    categories = category_tables(settings, arguments.X, arguments.init_model)
    coded = coded_arguments(arguments, categories)
    hessian = choice("hessian", settings.hessian, HESSIAN_SETTINGS)
    loss = resolve(settings.loss, settings.loss_params)
    held_out = holds_out(settings.early_stopping, hessian, loss, coded._asdict())
    inputs = fit_inputs(settings, coded)._replace(categories=categories)
    watching = {"callbacks": callbacks, "verbose": verbose, "seen_as": seen_as}
    if held_out:
        return train_with_holdout(settings, inputs, **watching)
    return train(
        settings, inputs, early_stopping_rounds=arguments.early_stopping_rounds, **watching
    )

"""``fit_model``: one fit, from ``fit``'s arguments as given to a `Model`.

The data flows one way, each stage handing a record to the next: the
table is read once (`jaxboost.frontends.data.validation.read_table`: its
column names and counts), the model an ``init_model`` continues is checked
against it (`jaxboost.frontends.training.continued.continued_model`), the
categorical columns' categories are fitted once and ``X`` and the
evaluation sets coded by them (`jaxboost.frontends.data.categories.coded_data`),
and every argument is then checked and converted into one record
(`jaxboost.frontends.training.fit_inputs`).  The record is trained on
(`jaxboost.frontends.training.trainer.train`), or, where early stopping
holds rows out, sliced into the holdout's first fit
(`jaxboost.frontends.training.holdout`).  `jaxboost.Booster.fit` calls it;
nothing here goes back to a front end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...losses.catalogue import resolve
from ..data.categories import coded_data
from ..data.validation import read_table
from ..fitted.model import Model
from ..settings.checks import choice
from ..settings.settings_table import HESSIAN_SETTINGS
from .continued import continued_model
from .fit_inputs import FitArguments, fit_inputs
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
    table = read_table(arguments.X, arguments.eval_set)
    init_model = continued_model(arguments.init_model, table.n_features)
    max_bins = int(settings.max_bins)
    spec = settings.categorical_features
    coded = coded_data(arguments.X, arguments.eval_set, spec, max_bins, table, init_model)
    arguments = arguments._replace(X=coded.X, eval_set=coded.eval_set, init_model=init_model)
    hessian = choice("hessian", settings.hessian, HESSIAN_SETTINGS)
    loss = resolve(settings.loss, settings.loss_params)
    held_out = holds_out(settings.early_stopping, hessian, loss, arguments._asdict())
    inputs = fit_inputs(settings, arguments, table.names, coded.tables)
    watching = {"callbacks": callbacks, "verbose": verbose, "seen_as": seen_as}
    if held_out:
        return train_with_holdout(settings, inputs, **watching)
    return train(
        settings, inputs, early_stopping_rounds=arguments.early_stopping_rounds, **watching
    )

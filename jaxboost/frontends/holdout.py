"""Early stopping on rows held out of the fit (``early_stopping=True``, or
``"auto"`` for a Fisher-scored distribution loss: the reasons are
`jaxboost.frontends.distribution_defaults`'): `HOLDOUT_FRACTION` of the
rows, drawn by the fit's seed, are left out of a first fit, which stops
when their likelihood (the first metric) has not improved for `PATIENCE`
rounds (scikit-learn's ``HistGradientBoosting*(early_stopping="auto")``
does the same above 10,000 rows); then all rows are fitted for the rounds
it chose.  Both fits are `jaxboost.frontends.trainer.train`'s.  All rows
are checked and their categories fitted once, before the split (errors
name the user's rows), for the second fit; the first fit's inputs are the
kept rows checked again, coded by their own categories (as a fit of those
rows alone: the models are those of the two fits before `train` was one
function).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ..losses.catalogue import resolve
from .fit_inputs import FitArguments, category_tables, coded_arguments, fit_inputs
from .loss_checks import unbounded_targets_problem
from .model import Model
from .settings import draw_seed
from .trainer import train

# the share of rows the automatic early stopping holds out, and its patience
HOLDOUT_FRACTION = 0.2
PATIENCE = 10
# fewer rows than this: no holdout (too few to measure a likelihood on)
HOLDOUT_MIN_ROWS = 20


def holdout_rows(n_rows: int, seed: int) -> np.ndarray:
    """``(n_rows,)`` bool: the `HOLDOUT_FRACTION` of rows held out (at least
    one), drawn by ``seed``."""
    n_held = max(1, round(HOLDOUT_FRACTION * n_rows))
    held = np.zeros(n_rows, bool)
    held[np.random.default_rng(seed).permutation(n_rows)[:n_held]] = True
    return held


def _rows(values: Any, rows: np.ndarray) -> Any:
    """``values``' rows ``rows`` (a pandas or polars frame's by position, by
    its own indexing: its names and column types stay); None stays None."""
    if values is None:
        return None
    if hasattr(values, "iloc"):
        return values.iloc[rows]
    if type(values).__module__.split(".")[0] == "polars":
        return values[rows]
    return np.asarray(values)[rows]


def train_with_holdout(
    settings: Any,
    arguments: FitArguments,
    coded: FitArguments,
    categories: list | None,
    *,
    callbacks: Any = None,
    verbose: int = 0,
    seen_as: Callable[[Model], Any] | None = None,
) -> Model:
    """The model of all rows of ``arguments`` (as given; ``coded``: with
    the codes of their categorical columns, ``categories``) for the rounds the held-out
    rows choose: a fit of the other rows watching the held-out ones' first
    metric (the loss unless ``arguments.eval_metric``), stopped after
    `PATIENCE` rounds without improvement; then a fit of all rows for its
    best round count.  ``best_iteration_`` and ``evals_result_`` are the
    first fit's.  ``callbacks``, ``verbose`` and ``seen_as`` (as
    `jaxboost.frontends.trainer.train`'s) watch the second."""
    settings = dataclasses.replace(settings, early_stopping=False)
    X, y, sample_weight, init_score = (
        arguments.X,
        arguments.y,
        arguments.sample_weight,
        arguments.init_score,
    )
    n_rows = int(np.shape(X)[0])
    small = n_rows < HOLDOUT_MIN_ROWS
    # (the second fit has no evaluation set: its eval_metric is the probe's)
    given = coded if small else coded._replace(eval_metric=None)
    inputs = fit_inputs(settings, given)._replace(categories=categories)
    watching = {"callbacks": callbacks, "verbose": verbose, "seen_as": seen_as}
    if small:
        return train(settings, inputs, **watching)
    held = holdout_rows(n_rows, int(draw_seed(settings.random_state)))
    kept = np.flatnonzero(~held)
    held = np.flatnonzero(held)
    loss = resolve(settings.loss, settings.loss_params)
    kept, held = _events_kept(loss, y, sample_weight, kept, held)
    probe_arguments = FitArguments(
        _rows(X, kept),
        _rows(y, kept),
        _rows(sample_weight, kept),
        eval_set=[(_rows(X, held), _rows(y, held))],
        eval_sample_weight=None if sample_weight is None else [_rows(sample_weight, held)],
        eval_metric=arguments.eval_metric,
        early_stopping_rounds=PATIENCE,
        init_score=_rows(init_score, kept),
        eval_init_score=None if init_score is None else [_rows(init_score, held)],
    )
    probe_categories = category_tables(settings, probe_arguments.X)
    probe_inputs = fit_inputs(settings, coded_arguments(probe_arguments, probe_categories))
    probe = train(
        settings,
        probe_inputs._replace(categories=probe_categories),
        early_stopping_rounds=PATIENCE,
        seen_as=seen_as,
    )
    rounds = max(1, int(probe.best_iteration_ or probe.n_estimators_))
    model = train(dataclasses.replace(settings, n_estimators=rounds), inputs, **watching)
    return model.replace(best_iteration_=probe.best_iteration_, evals_result_=probe.evals_result_)


def _events_kept(
    loss: Any, y: Any, sample_weight: Any, kept: np.ndarray, held: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(kept, held)`` rows, with one held-out row traded for a kept one
    where the kept rows' targets leave ``loss`` (the setting) without a
    finite minimiser (`jaxboost.frontends.loss_checks.unbounded_targets_problem`:
    the few counts above 0 all held out, the fit part all 0; a fit of all
    rows without any is refused before)."""
    targets = np.asarray(_rows(y, np.arange(len(kept) + len(held))), np.float64)
    weight = np.ones(len(targets)) if sample_weight is None else np.asarray(sample_weight)
    loss = resolve(loss)
    if unbounded_targets_problem(loss, targets[kept], weight[kept]) is None:
        return kept, held
    other = (targets[held] != targets[kept][weight[kept] > 0][0]) & (weight[held] > 0)
    if not np.any(other):
        return kept, held
    trade = int(np.argmax(other))
    kept, held = kept.copy(), held.copy()
    kept[0], held[trade] = held[trade], kept[0]
    return np.sort(kept), np.sort(held)

"""Early stopping on rows held out of the fit (``early_stopping=True``, or
``"auto"`` for a Fisher-scored distribution loss): `HOLDOUT_FRACTION` of
the rows, drawn by the fit's seed, are left out of a first fit, which
stops when their likelihood (the first metric) has not improved for
`PATIENCE` rounds (scikit-learn's
``HistGradientBoosting*(early_stopping="auto")`` does the same above 10,000
rows); then all rows are fitted for the rounds it chose.  Both fits are
`jaxboost.frontends.training.trainer.train`'s, of the one checked record of all
rows (checked, and their categories fitted, once: errors name the user's
rows); the first fit's rows are a slice of it.

Why a distribution's fit holds rows out by default: its scale learns from
the training rows' residuals, which shrink as the trees fit those rows;
after a few tens of rounds at learning rate 0.1 and depth 6 the predicted
scale is that of the training residuals, far below the held-out ones, and
the held-out likelihood collapses on a few hundred rows
(benchmarks/bench_distributional.py: diabetes' held-out NLL 92 against 5.6
for a constant scale).  Rounds chosen on held-out rows adapt to the data's
size and noise, on any target scale (with the prior of
`jaxboost.frontends.settings.regularisation_defaults`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ...engine.fisher import resolved_hessian
from ...losses.catalogue import resolve
from ...runtime.same_function import plain
from ..fitted.model import Model
from ..settings.checks import check_early_stopping, draw_seed
from .computation_keys import keyed_loss, searches_from_init
from .eval_sets import padded_eval_set
from .loss_checks import check_metric, unbounded_targets_problem
from .placement import FitInputs, init_search_rows
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


def holds_out(setting: Any, hessian_setting: str, loss: Any, given: dict[str, Any]) -> bool:
    """Whether a fit stops on rows held out of it: ``setting`` True, or
    ``"auto"`` for a loss that ``hessian_setting`` scores by its Fisher
    information; never when ``given`` (fit's arguments) holds an
    ``eval_set``, ``early_stopping_rounds``, groups or an ``init_model``
    (the user's own watching, or rounds added to a model), nor on several
    processes (each holds only its own rows)."""
    check_early_stopping(setting)
    if setting is False:
        return False
    if setting == "auto" and resolved_hessian(hessian_setting, loss) != "fisher":
        return False
    watched = ("eval_set", "early_stopping_rounds", "group", "qid", "init_model")
    if any(given.get(name) is not None for name in watched):
        if setting is True:
            raise ValueError(
                "early_stopping=True holds out rows of its own; it does not take "
                f"{[name for name in watched if given.get(name) is not None]}: set "
                "early_stopping=False to watch your eval_set or add rounds to a model"
            )
        return False
    return jax.process_count() == 1


def train_with_holdout(
    settings: Any,
    inputs: FitInputs,
    *,
    callbacks: Any = None,
    verbose: int = 0,
    seen_as: Callable[[Model], Any] | None = None,
) -> Model:
    """The model of all rows of ``inputs`` (checked, their categories
    coded) for the rounds the held-out rows choose: a fit of the other rows
    watching the held-out ones' first metric (``inputs.metrics``: the loss
    unless fit's ``eval_metric``), stopped after `PATIENCE` rounds without
    improvement; then a fit of all rows for its best round count.
    ``best_iteration_`` and ``evals_result_`` are the first fit's.
    ``callbacks``, ``verbose`` and ``seen_as`` (as
    `jaxboost.frontends.training.trainer.train`'s) watch the second."""
    settings = dataclasses.replace(settings, early_stopping=False)
    watching = {"callbacks": callbacks, "verbose": verbose, "seen_as": seen_as}
    n_rows = int(inputs.features.shape[0])
    if n_rows < HOLDOUT_MIN_ROWS:
        return train(settings, inputs, **watching)
    held = holdout_rows(n_rows, int(draw_seed(settings.random_state)))
    kept, held = np.flatnonzero(~held), np.flatnonzero(held)
    loss = resolve(settings.loss, settings.loss_params)
    kept, held = _events_kept(loss, inputs.targets, inputs.weight, kept, held)
    probe = train(
        settings,
        _held_out(settings, inputs, kept, held),
        early_stopping_rounds=PATIENCE,
        seen_as=seen_as,
    )
    rounds = max(1, int(probe.best_iteration_ or probe.n_estimators_))
    model = train(dataclasses.replace(settings, n_estimators=rounds), inputs, **watching)
    return model.replace(best_iteration_=probe.best_iteration_, evals_result_=probe.evals_result_)


def _held_out(settings: Any, inputs: FitInputs, kept: np.ndarray, held: np.ndarray) -> FitInputs:
    """The first fit's inputs: the rows ``kept`` of ``inputs``, watching
    the rows ``held`` as its one evaluation set (its metrics checked on
    them)."""
    offsets = inputs.offsets
    watched = padded_eval_set(
        "validation_0",
        inputs.features[held],
        inputs.targets[held],
        inputs.weight[held],
        None if offsets is None else offsets[held],
    )
    for metric in inputs.metrics:
        check_metric(metric, inputs.targets[held], inputs.n_outputs)
    loss = inputs.loss
    if searches_from_init(plain(loss), inputs.n_outputs, None):  # keyed at its rows' count
        init_rows = init_search_rows(settings, len(kept))
        loss = keyed_loss(
            plain(loss), inputs.targets.shape[1:], inputs.n_outputs, init_rows=init_rows
        )
    return inputs._replace(
        features=inputs.features[kept],
        targets=inputs.targets[kept],
        weight=inputs.weight[kept],
        offsets=None if offsets is None else offsets[kept],
        loss=loss,
        eval_sets=[watched],
    )


def _events_kept(
    loss: Any, targets: np.ndarray, weight: np.ndarray, kept: np.ndarray, held: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(kept, held)`` rows, with one held-out row traded for a kept one
    where the kept rows' targets leave ``loss`` (the setting) without a
    finite minimiser (`jaxboost.frontends.training.loss_checks.unbounded_targets_problem`:
    the few counts above 0 all held out, the fit part all 0; a fit of all
    rows without any is refused before)."""
    targets = np.asarray(targets, np.float64)
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

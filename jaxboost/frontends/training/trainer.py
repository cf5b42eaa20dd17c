"""``train``: one fit, from its settings and checked inputs to a `Model`.

The rows are placed on the devices and binned there, and the initial
score found (`jaxboost.frontends.training.placement`); the loss's hessian is probed
and the programs' settings resolved (`jaxboost.frontends.training.program_settings`);
the rounds run a chunk per device program, watched between chunks
(`jaxboost.frontends.training.rounds_loop`, `jaxboost.frontends.training.monitor`); the
trees kept (cut at the best round where early stopping found one) become
the model.  Nothing here goes back to a front end: the Booster, the
estimators and the holdout's two fits (`jaxboost.frontends.training.holdout`) all
call `train`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from ...engine.tree import Tree
from ...runtime.distributed import global_rows, on_any_process, replicated
from ...runtime.same_function import plain
from ...runtime.user_warning import warn
from ..data.offsets import round_start
from ..fitted.model import Model
from .continued import joined, joined_evals
from .monitor import Monitor
from .placement import FitInputs, PlacedRows, place_rows
from .program_settings import fit_settings
from .rounds_loop import RoundsResult, Safeguards, dtype_of, metric_in, run_rounds


def train(
    settings: Any,
    inputs: FitInputs,
    *,
    early_stopping_rounds: int | None = None,
    callbacks: Sequence[Callable] | None = None,
    verbose: int = 0,
    seen_as: Callable[[Model], Any] | None = None,
) -> Model:
    """The model of ``settings.n_estimators`` rounds grown on ``inputs``
    (``inputs.continued``: rounds added to an ``init_model``'s).

    Args:
      settings: the fit's settings record
        (`jaxboost.frontends.settings.settings_table.settings_record`).
      inputs: the checked inputs (`jaxboost.frontends.training.fit_inputs.fit_inputs`).
      early_stopping_rounds: stop when the first metric on the last
        evaluation set has not improved for this many rounds; the model
        keeps the best round.
      callbacks, verbose: as ``Booster.fit``'s.
      seen_as: what a callback sees as ``env.model`` of the rounds so far
        (the front end holding them); default the `Model` itself.
    """
    placed = place_rows(settings, inputs)
    # the watched chunk on every process if any watches the rounds
    # (processes running different programs abort in the collectives)
    monitored = on_any_process(bool(inputs.eval_sets or callbacks or verbose))
    cfg, hyper = fit_settings(settings, inputs, placed, monitored=monitored)
    eval_sets = inputs.eval_sets
    if placed.columns is not None:  # the trees' features number the columns trained on
        eval_sets = [s._replace(X=s.X[:, placed.columns]) for s in eval_sets]

    def model_so_far(forest: Tree, train_loss: list[float]) -> Any:
        model = Model(**_model_fields(inputs, placed, forest, train_loss))
        return model if seen_as is None else seen_as(model)

    monitor = Monitor(
        model_so_far,
        eval_sets,
        [
            metric_in(metric, inputs.loss, placed.loss_dtype, placed.loss_scale)
            for metric in inputs.metrics
        ],
        placed.init_score,
        cfg.trees_per_round,
        int(settings.n_estimators),
        early_stopping_rounds,
        callbacks or (),
        int(verbose),
        init_loss=float(placed.init_loss),
    )
    raw = round_start(placed.init_score, placed.start, placed.layout.n_padded)
    rounds = run_rounds(
        cfg,
        hyper,
        placed.mesh,
        placed.data,
        replicated(placed.mesh, placed.training_edges),
        global_rows(placed.mesh, raw),
        placed.seed,
        monitor,
        placed.init_loss,
        inputs.loss,
        int(settings.n_estimators),
        Safeguards(
            settings.armijo if inputs.groups is None else False,
            settings.loss_dtype,
            # (a ranking loss's weights change every round: its value may rise)
            watch_rises=inputs.groups is None,
        ),
        first_round=0 if inputs.continued is None else inputs.continued.n_rounds,
    )
    return _kept_model(inputs, placed, rounds, monitor, early_stopping_rounds)


def _model_fields(inputs: FitInputs, placed: PlacedRows, forest: Tree, train_loss) -> dict:
    """The model's fields that prediction and ``save`` read, of the trees
    ``forest`` (features numbered as trained on) and the training loss
    before and after each of its rounds."""
    if placed.columns is not None:  # the data's column numbers, at nodes that split
        splits = forest.split_gain > 0
        forest = forest._replace(
            feature=np.where(splits, placed.columns[forest.feature], forest.feature)
        )
    forest, train_loss = joined(inputs.continued, forest, train_loss)
    fields = {
        "forest_": forest,
        "base_score_": placed.init_score,
        "bin_edges_": placed.edges,
        "loss_": plain(inputs.loss),
        "n_outputs_": inputs.n_outputs,
        "n_features_in_": inputs.features.shape[1],
        "n_estimators_": len(train_loss) - 1,
        "train_loss_": np.asarray(train_loss),
        "categories_": inputs.categories,
    }
    if inputs.names is not None:
        fields["feature_names_in_"] = inputs.names
    if inputs.continued is not None:
        fields["init_model_rounds_"] = inputs.continued.n_rounds
    return fields


def _kept_model(
    inputs: FitInputs,
    placed: PlacedRows,
    rounds: RoundsResult,
    monitor: Monitor,
    early_stopping_rounds: int | None,
) -> Model:
    """The model of the rounds' trees and losses (cut at the best round
    when early stopping found one), with the training record."""
    cfg, chunks, train_loss = rounds
    forest = jax.tree.map(lambda *parts: np.concatenate(parts), *chunks)
    if early_stopping_rounds is not None and monitor.best_iteration is not None:
        n_rounds = monitor.best_iteration
        forest = jax.tree.map(lambda leaf: leaf[: n_rounds * cfg.trees_per_round], forest)
        train_loss = train_loss[: n_rounds + 1]
    evals_result = joined_evals(inputs.continued, monitor.evals_result)
    _warn_infinite_crps(evals_result)
    best_iteration = monitor.best_iteration
    if inputs.continued is not None and best_iteration is not None:
        best_iteration += inputs.continued.n_rounds
    return Model(
        **_model_fields(inputs, placed, forest, train_loss),
        evals_result_=evals_result,
        best_iteration_=best_iteration,
        best_score_=monitor.best_score,
        leaf_method_=cfg.leaf_method,  # what "auto" resolved to
        split_criterion_=cfg.split_criterion,
        armijo_=cfg.armijo,
        loss_dtype_=dtype_of(cfg.loss),
    )


def _warn_infinite_crps(evals_result: dict) -> None:
    """Warns where an evaluation set's ``"crps"`` was infinite in some round:
    a Student-t's CRPS is infinite where its predicted ``df <= 1`` (no mean),
    and early stopping on it compares infinities."""
    for set_name, per in evals_result.items():
        values = np.asarray(per.get("crps", []), np.float64)
        infinite = int(np.sum(np.isposinf(values)))
        if infinite:
            warn(
                f"eval_metric 'crps': infinite on {set_name} in {infinite} of {values.size} "
                "rounds: the predicted Student-t has df <= 1 on some rows, where the CRPS is "
                "infinite (the distribution has no mean), and early stopping cannot rank "
                "those rounds; use eval_metric='nll'"
            )
            return

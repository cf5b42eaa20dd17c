"""``Booster``: the Python shell around the jitted boosting program.

Validation, the programs' settings, dispatching chunks of rounds, watching
them (evaluation, early stopping, callbacks), keeping the forest and
predicting; the rows' placement on the devices, binning and the initial
score are `jaxboost.frontends.placement`'s.  Nothing here loops over
rows, nodes or features.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import losses as loss_catalogue
from ..engine.derivatives import HessianProbe
from ..engine.fisher import check_distribution, resolved_hessian
from ..engine.groups import bucket_widths
from ..engine.leaf_index import leaf_indices_on
from ..engine.metrics import Metric, resolve_metric
from ..engine.predict import apply_link, predict_on_devices, round_increments
from ..engine.quantise import check_quantisation
from ..engine.training import (
    HESSIAN_MODES,
    LEAF_METHODS,
    MULTI_STRATEGIES,
    SPLIT_CRITERIA,
    NumericSettings,
    StaticSettings,
)
from ..engine.tree import Tree
from ..kernels.registry import kernels_for
from ..losses.catalogue import is_catalogue_loss
from ..runtime.devices import (
    check_devices,
    device_keys,
    devices_from_keys,
)
from ..runtime.distributed import (
    first_process_value,
    gather,
    global_rows,
    on_any_process,
    on_every_process,
    replicated,
    stops_when_a_process_leaves,
)
from ..runtime.padding import bucket_size, in_place_on, pad_rows
from ..runtime.precision import in_float32, loss_in
from ..runtime.same_function import plain
from ..runtime.user_warning import warn
from ..runtime.workarounds import FAST_COMPILE_ROWS
from . import distribution_predict, explain
from .categories import (
    CategoryColumn,
    categorical_columns,
    categorical_settings,
    category_grid,
    check_not_monotone,
    continued_categories,
    encode_categories,
    fit_categories,
    frame_category_columns,
)
from .computation_keys import group_widths, keyed_loss, keyed_metrics, searches_from_init
from .constraints import interaction_sets, monotone_directions
from .continued import (
    check_compatible,
    check_feature_count,
    continued_from,
    fitted_model,
    joined,
    joined_evals,
    with_model_scores,
)
from .distribution_defaults import (
    POINT_REG_LAMBDA,
    fit_with_holdout,
    heavy_min_child_weight_message,
    holds_out,
    mean_positive_weight,
    resolved_min_child_weight,
    resolved_reg_lambda,
    small_hessian_message,
    small_weight_message,
)
from .eval_sets import prepare_eval_sets
from .export import export_model
from .grouping import (
    eval_set_groups,
    fit_groups,
)
from .hessian_probe import VECTOR_OPTIONS_ROWS, probe_fit, rows_from_hessian
from .inspection import (
    feature_importances,
    feature_indices,
    grid_from_data,
    partial_dependence,
)
from .loss_checks import (
    check_group_loss,
    check_loss,
    check_metric,
    check_target_domain,
    check_target_spread,
    check_unbounded_targets,
)
from .loss_params import nested_params, pop_nested, set_nested
from .model_fields import MODEL_FIELDS
from .model_file import save_model
from .monitor import Monitor
from .offsets import as_offsets, round_start, with_eval_offsets, with_offsets
from .placement import FitInputs, PlacedRows, init_search_rows, place_rows
from .rounds_loop import Safeguards, dtype_of, metric_in, run_rounds, scaled_settings
from .settings import (
    MONITORED_ROUNDS_PER_CHUNK,
    UNMONITORED_ROUNDS_PER_CHUNK,
    choice,
    least_child_rows,
    tree_leaves,
    whole_number,
)
from .settings_table import (
    BOOSTER,
    HESSIAN_SETTINGS,
    check_settings,
    checked,
    settings_of,
    takes_settings,
)
from .validation import (
    as_features,
    as_targets,
    as_weights,
    check_columns,
    check_not_all_constant,
    column_count,
    feature_names,
)


class _FitArguments(NamedTuple):
    """``fit``'s data arguments, as given."""

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


def _second_order_without_curvature(min_child_weight: float) -> str:
    """The warning for ``split_criterion="second_order"`` with a loss whose
    hessian is zero on most rows: gains ``G^2 / (H + lambda)`` of children
    whose hessian sums ``H`` are 0."""
    if min_child_weight > 0:
        what = (
            f"its children's hessian sums are 0, below min_child_weight={min_child_weight:g}, "
            "so no node splits and the model stays constant"
        )
    else:
        what = "splits are then chosen by G^2 / reg_lambda, whatever the rows in each child"
    return (
        "split_criterion='second_order' with a loss whose hessian is zero on most rows "
        f"(absolute, pinball): {what}; split_criterion='auto' or 'first_order' splits on "
        "the gradients (Friedman's least squares)"
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


@takes_settings(BOOSTER)
class Booster:
    """Gradient-boosted trees for any JAX loss ``loss(y, f) -> scalar`` of one
    sample, or ``loss(y, f, mask)`` of one group of rows.

    Args:
      (the settings of `jaxboost.frontends.settings_table`: each with its
      default and meaning in ``help(Booster)`` and the API reference)
    """

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The settings by name, as scikit-learn's ``get_params``; ``deep``
        adds the catalogue loss's parameters ``loss__<name>`` (`loss_params`)."""
        params = {setting.name: getattr(self, setting.name) for setting in settings_of(BOOSTER)}
        return {**params, **nested_params(self)} if deep else params

    def set_params(self, **params: Any) -> Booster:
        """Sets settings by name, as scikit-learn's ``set_params`` (and the
        loss's parameters as ``loss__<name>``); returns ``self``.  An unknown
        name is a ValueError naming it."""
        nested = pop_nested(params)
        names = {setting.name for setting in settings_of(BOOSTER)}
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"{name}: not a setting of Booster; its settings: {sorted(names)}")
            setattr(self, name, value)
        set_nested(self, nested)
        return self

    def __getstate__(self) -> dict[str, Any]:
        # jax.Device objects do not pickle: they travel as (platform, id)
        return {**self.__dict__, "devices": device_keys(self.devices)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({**state, "devices": devices_from_keys(state["devices"])})

    # -- configuration -------------------------------------------------------
    def _n_outputs(self, loss: Callable, y: np.ndarray) -> int:
        if self.n_outputs is not None:
            if int(self.n_outputs) < 1:
                raise ValueError(f"n_outputs: expected a positive integer, got {self.n_outputs}")
            return int(self.n_outputs)
        declared = getattr(loss, "n_outputs", 1)
        if declared == "n_classes":
            # the largest label of all processes' rows
            n_classes = int(np.max(gather(np.max(y, keepdims=True)))) + 1
            if n_classes < 2:
                raise ValueError(
                    f"y: the loss {getattr(loss, 'name', 'loss')!r} scores classes 0 to "
                    "max(y) and needs at least two; every label here is 0"
                )
            return n_classes
        if declared == "n_targets":  # one score per column of 2-D targets
            return int(y.shape[1]) if y.ndim == 2 else 1
        return int(declared)

    def _hessian_for(self, loss: Callable) -> str:
        """The ``hessian`` setting for ``loss``, ``"auto"`` settled."""
        hessian = resolved_hessian(choice("hessian", self.hessian, HESSIAN_SETTINGS), loss)
        if hessian == "fisher" and getattr(loss, "per", "sample") == "group":
            raise ValueError(
                "hessian='fisher': the Fisher information of a per-sample distribution; "
                "a group loss takes hessian='diag' (or 'auto')"
            )
        return hessian

    def _config(
        self,
        loss: Callable,
        n_outputs: int,
        monitored: bool,
        hessian: HessianProbe,
        platform: str,
        rows_per_shard: int,
        n_rows: int,
        weight_scale: float = 1.0,
    ) -> tuple[StaticSettings, NumericSettings]:
        """The static program settings, and the numeric ones passed as values;
        ``hessian`` (the loss's, probed at the initial score) settles what
        ``"auto"`` and ``armijo=None`` leave open; a default ``reg_lambda``
        is measured against its mean hessian times ``weight_scale`` (the
        rows' mean positive weight)."""
        leaf_method, split_criterion = self.leaf_method, self.split_criterion
        if leaf_method == "newton" and not hessian.informative:
            warn(
                "leaf_method='newton' with a loss whose hessian is zero on most rows "
                "(absolute, pinball): each leaf's value is then its gradient sum / "
                "reg_lambda, a step that grows with the leaf's size; leaf_method='auto' "
                "or 'line_search' finds each leaf's minimiser"
            )
        if split_criterion == "second_order" and not hessian.informative:
            weight = resolved_min_child_weight(checked(self, "min_child_weight"))
            warn(_second_order_without_curvature(float(weight)))
        if leaf_method == "auto":
            leaf_method = "newton" if hessian.informative else "line_search"
        if leaf_method == "joint_newton" and n_outputs > 1:
            raise ValueError(
                f"leaf_method: 'joint_newton' fits models of one output, this one has {n_outputs}"
            )
        if split_criterion == "auto":
            split_criterion = "second_order" if hessian.informative else "first_order"
        armijo = self.armijo
        if armijo is None:
            armijo = leaf_method == "line_search" or hessian.negative
        chunk = self.rounds_per_chunk
        if chunk is None:
            chunk = MONITORED_ROUNDS_PER_CHUNK if monitored else UNMONITORED_ROUNDS_PER_CHUNK
        cfg = StaticSettings(
            loss=loss,
            n_outputs=n_outputs,
            max_depth=int(self.max_depth),
            leaf_method=choice("leaf_method", leaf_method, LEAF_METHODS),
            split_criterion=choice("split_criterion", split_criterion, SPLIT_CRITERIA),
            hessian=self._hessian_for(loss),
            multi_strategy=choice("multi_strategy", self.multi_strategy, MULTI_STRATEGIES),
            rounds_per_chunk=int(chunk),
            hessian_mode=choice("hessian_mode", self.hessian_mode, HESSIAN_MODES),
            armijo=bool(armijo),
            histogram_kernel=kernels_for(platform).histogram,
            leaf_kernels=kernels_for(platform).leaf,
            grad_quant_bins=(
                check_quantisation(self.num_grad_quant_bins, rows_per_shard)
                if self.use_quantized_grad
                else 0
            ),
            narrow_line_search=not hessian.informative,
            subsampled=bool(self._hyper().subsample < 1.0),
            vector_row_options=n_outputs > 1 and rows_per_shard >= VECTOR_OPTIONS_ROWS,
            fast_compile=n_rows <= FAST_COMPILE_ROWS,
            count_rows=bool(self._hyper().min_child_samples > 0),
            max_leaves=tree_leaves(self.grow_policy, self.max_leaves, int(self.max_depth)),
        )
        hyper = self._hyper()
        mean_hessian = hessian.mean_hessian if hessian.informative else np.nan
        if np.isfinite(weight_scale) and weight_scale > 0:
            mean_hessian *= weight_scale
        if self.min_child_weight is None and cfg.hessian != "fisher":  # (scaled as reg_lambda)
            weight = resolved_min_child_weight(None, mean_hessian)
            hyper = hyper._replace(min_child_weight=np.float32(weight))
        if self.reg_lambda is None:  # (a distribution's prior; a small hessian's rows)
            reg_lambda = resolved_reg_lambda(None, cfg.hessian, mean_hessian)
            # (weights of 0.01 in float32 take 0.99999998: no warning)
            if reg_lambda < 0.999 * POINT_REG_LAMBDA and cfg.hessian != "fisher":
                warn(
                    small_hessian_message(
                        mean_hessian,
                        reg_lambda,
                        float(hyper.min_child_weight),
                        self._hessian_of(hessian, n_outputs, weight_scale),
                        weight_given=self.min_child_weight is not None,
                    )
                )
            hyper = hyper._replace(reg_lambda=np.float32(reg_lambda))
        return cfg, hyper

    @staticmethod
    def _hessian_of(hessian: HessianProbe, n_outputs: int, weight_scale: float) -> str:
        """What a measured mean hessian is of, for the warnings: `` (output
        0 of 2, times sample_weight, of mean 0.01)``, or nothing."""
        of = [f"output {hessian.output} of {n_outputs}"] if n_outputs > 1 else []
        if weight_scale != 1.0:
            of.append(f"times sample_weight, of mean {weight_scale:.3g}")
        return f" ({', '.join(of)})" if of else ""

    def _check_settings(self) -> None:
        """The settings checked before any work: a ValueError (a TypeError for
        ``devices`` of the wrong type) names the first one out of range."""
        check_settings(self, BOOSTER)
        # (the checks that weigh several settings together)
        tree_leaves(self.grow_policy, self.max_leaves, int(self.max_depth))
        self._hyper()
        self._given_init_score(None)

    def _given_init_score(self, n_outputs: int | None) -> np.ndarray | None:
        """``base_score`` as ``(n_outputs,)`` float32 (None: not given), after
        checking it is one finite number or one per output (``n_outputs``
        None: not known yet, the count is not checked)."""
        if self.base_score is None:
            return None
        score = None
        try:
            if np.ndim(self.base_score) <= 1:
                score = np.asarray(self.base_score, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            pass
        fits = score is not None and score.size >= 1 and bool(np.all(np.isfinite(score)))
        if fits and n_outputs is not None:
            fits = score.size in (1, n_outputs)
        if not fits:
            count = "" if n_outputs is None else f" ({n_outputs} here)"
            raise ValueError(
                f"base_score: expected a finite number or one per output{count}, "
                f"got {self.base_score!r}"
            )
        return score if n_outputs is None else np.broadcast_to(score, (n_outputs,)).copy()

    def _hyper(self) -> NumericSettings:
        """The numeric settings, checked, as float32 scalars."""
        hyper = NumericSettings(
            learning_rate=checked(self, "learning_rate"),
            reg_lambda=resolved_reg_lambda(checked(self, "reg_lambda"), ""),
            min_child_weight=resolved_min_child_weight(checked(self, "min_child_weight")),
            min_split_gain=checked(self, "min_split_gain"),
            subsample=checked(self, "subsample"),
            colsample_bytree=checked(self, "colsample_bytree"),
            hessian_floor=checked(self, "hessian_floor"),
            min_child_samples=least_child_rows(
                self.min_child_samples, bool(self.use_quantized_grad)
            ),
        )
        return NumericSettings(*(np.float32(value) for value in hyper))

    # -- data ----------------------------------------------------------------
    def _checked_inputs(self, arguments: _FitArguments):
        """``fit``'s arguments checked and converted (no collectives):
        ``(features, targets, weight, feature names, loss, eval sets, metrics,
        groups)``."""
        X, y, sample_weight, eval_set, eval_sample_weight, eval_metric = arguments[:6]
        early_stopping_rounds = arguments.early_stopping_rounds
        self._check_settings()
        if early_stopping_rounds is not None:
            try:
                whole_number("early_stopping_rounds", early_stopping_rounds)
            except ValueError as error:
                raise ValueError(f"{error} (None turns early stopping off)") from None
        features = as_features(X, finite=True, refuse_subnormal=True)
        targets = as_targets(y, features.shape[0])
        weight = as_weights(sample_weight, features.shape[0])
        loss = loss_catalogue.resolve(self.loss, self.loss_params)
        check_target_domain(loss, targets)
        check_target_spread(loss, targets, weight)
        settings = {key: getattr(self, key) for key in ("leaf_method", "armijo", "n_outputs")}
        given_weight = None if sample_weight is None else weight
        grouped = fit_groups(loss, arguments.group, arguments.qid, targets, given_weight, settings)
        eval_groups = eval_set_groups(arguments.eval_group, arguments.eval_qid, eval_set, loss)
        eval_sets = prepare_eval_sets(
            eval_set,
            eval_sample_weight,
            features.shape[1],
            loss,
            eval_groups,
            feature_names(X),
            target_shape=targets.shape[1:],
        )
        if early_stopping_rounds is not None and not eval_sets:
            raise ValueError("early_stopping_rounds: needs at least one eval_set")
        several = isinstance(eval_metric, (list, tuple)) and not isinstance(eval_metric, Metric)
        metric_specs = eval_metric if several else [eval_metric or "loss"]
        metrics = [resolve_metric(spec, loss) for spec in metric_specs]
        return features, targets, weight, feature_names(X), loss, eval_sets, metrics, grouped

    # -- training ------------------------------------------------------------
    @in_float32
    @stops_when_a_process_leaves
    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        *,
        eval_set: Sequence[tuple[Any, Any]] | None = None,
        eval_sample_weight: Sequence[Any] | None = None,
        eval_metric: str | Callable | Sequence[str | Callable] | None = None,
        early_stopping_rounds: int | None = None,
        callbacks: Sequence[Callable] | None = None,
        verbose: bool | int = False,
        group: Any = None,
        qid: Any = None,
        eval_group: Sequence[Any] | None = None,
        eval_qid: Sequence[Any] | None = None,
        init_score: Any = None,
        eval_init_score: Sequence[Any] | None = None,
        init_model: Any = None,
    ) -> Booster:
        """Grow up to ``n_estimators`` rounds of trees.

        With several processes (`jaxboost.runtime.distributed.initialize`),
        ``X``, ``y`` and ``sample_weight`` are this process's rows, and every
        process ends with the model of all rows.

        Args:
          X: ``(n_rows, n_features)`` numbers, NaN for missing (numpy, JAX,
            pandas: the column names are kept in ``feature_names_in_``).
          y: ``(n_rows,)`` or ``(n_rows, n_targets)``.
          sample_weight: ``(n_rows,)`` non-negative weights.
          eval_set: ``[(X, y), ...]`` evaluated after every round; their
            metrics go to ``evals_result_["validation_<i>"]``.
          eval_metric: a name (``"loss"``, the default: the training loss;
            ``"rmse"``, ``"mae"``, ``"logloss"``, ``"error"``, ``"auc"``,
            ``"mlogloss"``, ``"merror"``, a loss catalogue name), a function
            ``metric(y, f)`` of one sample, a function ``metric(y, f, mask)``
            of one group declared ``per="group"`` (averaged over the set's
            groups), or a list of them.
          early_stopping_rounds: stop when the first metric on the last
            evaluation set has not improved for this many rounds; the model
            keeps the best round (``best_iteration_``).
          callbacks: functions ``callback(env)`` called after every round with a
            `jaxboost.frontends.monitor.CallbackEnv`; returning True stops.
          verbose: print progress every ``verbose`` rounds (True: every round).
          group: for a group loss (``losses.lambdarank()``, ``losses.cox``, a
            function declared ``per="group"``), the sizes of the groups of
            consecutive rows (LightGBM's ``group``); or
          qid: one group id per row, rows in any order (XGBoost's ``qid``).
            A group loss given neither takes all rows as one group.
          eval_group: the groups of each ``eval_set`` as sizes (one entry per set).
          eval_qid: or as ids.
          init_score: per-row offsets, ``(n_rows,)`` or ``(n_rows,
            n_outputs)`` raw scores added before the loss (LightGBM's
            ``init_score``, XGBoost's ``base_margin``: ``log(exposure)`` for
            a Poisson loss); ``init_score_`` then minimises the loss given
            them, and ``predict_raw(X, init_score=...)`` adds new rows'.
          eval_init_score: the offsets of each ``eval_set`` (one entry per
            set, None for a set without).
          init_model: a fitted Booster or estimator to add ``n_estimators``
            rounds to (docs/tabular.md): the result holds its trees and the
            new ones, binned by its bin edges and coded by its categories
            (``categorical_features`` must name its categorical columns).
        Returns:
          ``self``.
        """
        self._check_settings()
        categories = self._fit_categories(X, init_model)
        coded_X = encode_categories(X, categories)
        if eval_set is not None:
            n_features = column_count(X)
            eval_set = [
                (encode_categories(Xe, categories, n_features, f"eval_set[{i}] X"), *rest)
                for i, (Xe, *rest) in enumerate(eval_set)
            ]
        arguments = _FitArguments(
            coded_X,
            y,
            sample_weight,
            eval_set,
            eval_sample_weight,
            eval_metric,
            early_stopping_rounds,
            group,
            qid,
            eval_group,
            eval_qid,
            init_score,
            eval_init_score,
            init_model,
        )
        data = ("X", "y", "sample_weight")
        given = {k: v for k, v in arguments._asdict().items() if k not in data}
        given.update(callbacks=callbacks, verbose=verbose)
        hessian = choice("hessian", self.hessian, HESSIAN_SETTINGS)
        if holds_out(
            self.early_stopping, hessian, loss_catalogue.resolve(self.loss, self.loss_params), given
        ):
            # (errors name the user's rows, before the split renumbers them)
            _, targets, _, _, checked_loss, *_ = self._checked_inputs(arguments)
            n_outputs = self._n_outputs(checked_loss, targets)
            as_offsets(init_score, len(targets), n_outputs, loss=checked_loss)
            # (no eval_set here: the fits on the rows' parts code their categories)
            return fit_with_holdout(self, X, y, sample_weight, given)
        inputs = self._fit_inputs(arguments)._replace(categories=categories)
        placed = place_rows(self, inputs)
        # the watched chunk on every process if any watches the rounds
        # (processes running different programs abort in the collectives)
        monitored = on_any_process(bool(inputs.eval_sets or callbacks or verbose))
        cfg, hyper = self._fit_settings(inputs, placed, monitored=monitored)
        eval_sets = inputs.eval_sets
        if placed.columns is not None:  # the trees' features number the columns trained on
            eval_sets = [s._replace(X=s.X[:, placed.columns]) for s in eval_sets]
        monitor = Monitor(
            functools.partial(self._model_so_far, inputs, placed),
            eval_sets,
            [
                metric_in(metric, inputs.loss, placed.loss_dtype, placed.loss_scale)
                for metric in inputs.metrics
            ],
            placed.init_score,
            cfg.trees_per_round,
            int(self.n_estimators),
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
            int(self.n_estimators),
            Safeguards(
                self.armijo if inputs.groups is None else False,
                self.loss_dtype,
                # (a ranking loss's weights change every round: its value may rise)
                watch_rises=inputs.groups is None,
            ),
            first_round=0 if inputs.continued is None else inputs.continued.n_rounds,
        )
        self._keep_fit(inputs, placed, rounds, monitor, early_stopping_rounds)
        return self

    def _fit_inputs(self, arguments: _FitArguments) -> FitInputs:
        """``fit``'s arguments checked and converted, with several processes
        on every one (a failure in one stops them all rather than hanging
        them), and the loss and metrics tried on their shapes."""
        features, targets, weight, names, loss, eval_sets, metrics, grouped = on_every_process(
            lambda: self._checked_inputs(arguments)
        )
        check_not_all_constant(features, gather=gather)
        n_outputs = self._n_outputs(loss, targets)
        # (after n_outputs: labels all 0 are refused there as one class)
        on_every_process(lambda: check_unbounded_targets(loss, targets, weight))
        on_every_process(lambda: self._constraints(features.shape[1], names, n_outputs))
        # programs are reused exactly for the same computation: keyed by
        # tracing, at the shapes the programs call them with
        widths = None if grouped is None else group_widths(grouped.sizes, eval_sets)
        init_rows = None
        if searches_from_init(loss, n_outputs, widths):
            init_rows = init_search_rows(self, features.shape[0])
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

        on_every_process(check_loss_and_metrics)
        offsets, eval_sets, continued = on_every_process(
            lambda: self._starting_scores(
                arguments, features, names, n_outputs, eval_sets, given_loss
            )
        )
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
        )

    def _starting_scores(self, arguments, features, names, n_outputs, eval_sets, loss=None):
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
        check_compatible(model, vars(self), features.shape[1], names, n_outputs)
        device = (check_devices(self.devices) or jax.local_devices())[0]
        continued = continued_from(model, features, offsets, device)
        return offsets, with_model_scores(model, eval_sets, device), continued

    def _fit_settings(
        self, inputs: FitInputs, placed: PlacedRows, monitored: bool
    ) -> tuple[StaticSettings, NumericSettings]:
        """The training programs' settings, after probing the loss's hessian
        at the initial score (process 0's probe decides for every process)."""
        targets, n_outputs = inputs.targets, inputs.n_outputs
        loss = loss_in(inputs.loss, placed.loss_dtype, placed.loss_scale)
        mesh = placed.mesh
        rows_per_shard = placed.layout.n_padded // mesh.local_mesh.size
        platform = mesh.devices.flat[0].platform
        n_rows = placed.layout.n_padded * jax.process_count()  # of all processes
        if inputs.groups is not None:  # Newton leaves (no line search on groups yet)
            hessian = HessianProbe(informative=True, negative=False)
            cfg, hyper = self._config(
                loss, n_outputs, monitored, hessian, platform, rows_per_shard, n_rows
            )
            cfg = dataclasses.replace(cfg, group_widths=bucket_widths(placed.data.groups))
            self._check_weight_scale(inputs.weight, hyper)
            return self._with_columns(cfg, inputs, placed), hyper
        # a default reg_lambda is measured against a user loss's hessian (the
        # catalogue's keep XGBoost's hessian units; Fisher scoring counts rows)
        hessian_setting = self._hessian_for(loss)
        # (and min_child_weight's, and a given one weighed against it)
        measure = hessian_setting != "fisher" and not is_catalogue_loss(plain(inputs.loss))
        hessian = probe_fit(
            loss,
            targets,
            placed.init_score,
            hessian_setting,
            (placed.data.y, placed.data.weight),
            rows_per_shard,
            measure=measure,
        )
        # (a leaf's hessian sums weigh each row's hessian by its weight)
        weight_scale = mean_positive_weight(inputs.weight)
        informative, negative, mean_hessian, output, weight_scale = first_process_value(
            (*hessian, np.float64(weight_scale))
        )
        hessian = HessianProbe(
            bool(informative),
            bool(negative),
            float(mean_hessian) / placed.loss_scale if measure else float("nan"),
            int(output),
        )
        cfg, hyper = self._config(
            loss,
            n_outputs,
            monitored,
            hessian,
            platform,
            rows_per_shard,
            n_rows,
            float(weight_scale),
        )
        self._check_weight_scale(inputs.weight, hyper)
        if measure and self.min_child_weight is not None and cfg.split_criterion == "second_order":
            rows = float(np.count_nonzero(inputs.weight > 0))
            message = heavy_min_child_weight_message(
                float(hyper.min_child_weight),
                hessian.mean_hessian * float(weight_scale) * rows,
                self._hessian_of(hessian, n_outputs, 1.0),
            )
            if message is not None:
                warn(message)
        hyper = scaled_settings(hyper, placed.loss_scale, cfg.split_criterion)
        # (the loss as given: its hessian's shape is the scaled one's)
        from_hessian = rows_from_hessian(cfg, inputs.loss, targets, inputs.weight)
        cfg = dataclasses.replace(cfg, rows_from_hessian=from_hessian)
        return self._with_columns(cfg, inputs, placed), hyper

    @staticmethod
    def _check_weight_scale(weight: np.ndarray, hyper: NumericSettings) -> None:
        """Warns where ``weight`` is so small that ``reg_lambda`` or
        ``min_child_weight`` swamp the weighted hessian sums."""
        message = small_weight_message(
            mean_positive_weight(weight), float(hyper.reg_lambda), float(hyper.min_child_weight)
        )
        if message is not None:
            warn(message)

    def _fit_categories(self, X: Any, init_model: Any = None) -> list[CategoryColumn] | None:
        """The categorical columns' categories and codes, None without any:
        ``init_model``'s where it is given (its codes mean the same
        categories); with several processes, of all processes' rows."""
        several = jax.process_count() > 1  # (each process then takes part in the exchange)
        if (
            self.categorical_features is None
            and not frame_category_columns(X)
            and init_model is None
            and not several
        ):
            return None
        names = feature_names(X)
        table = names is not None or np.ndim(X) == 2
        if not table and not several:
            return None  # fit's input checks refuse X by name

        def chosen_columns() -> list[int]:
            if not table:
                return []  # (on every process, which then refuse X alike)
            n_features = len(names) if names is not None else np.shape(X)[1]
            return categorical_columns(self.categorical_features, X, n_features, names)

        columns = on_every_process(chosen_columns)
        if init_model is not None:
            model = fitted_model(init_model)
            if table:  # (before its categories are looked up by column)
                check_feature_count(model, len(names) if names is not None else np.shape(X)[1])
            old_tables = getattr(model, "categories_", None)
            on_every_process(lambda: continued_categories(old_tables, columns, names))
            return old_tables or None
        return fit_categories(X, columns, names, int(self.max_bins)) or None

    def _constraints(self, n_features: int, names, n_outputs: int) -> dict:
        """The monotone and interaction constraints as column indices (see
        `jaxboost.frontends.constraints`), StaticSettings' fields."""
        monotone = monotone_directions(self.monotone_constraints, n_features, names, n_outputs)
        return {
            "monotone": monotone,
            "interaction": interaction_sets(self.interaction_constraints, n_features, names),
            # (unconstrained fits keep the programs they always compiled)
            "monotone_method": self.monotone_constraints_method if monotone else "basic",
        }

    def _with_columns(self, cfg: StaticSettings, inputs: FitInputs, placed: PlacedRows):
        """``cfg`` with the constraints, and knowing all columns' count where
        only some are trained on."""
        n_features = inputs.features.shape[1]
        constraints = self._constraints(n_features, inputs.names, inputs.n_outputs)
        cfg = dataclasses.replace(cfg, **constraints)
        if inputs.categories:
            columns = [table.column for table in inputs.categories]
            check_not_monotone(constraints["monotone"], columns, inputs.names)
            cfg = dataclasses.replace(
                cfg, categorical=categorical_settings(self, inputs.categories)
            )
        if placed.columns is None:
            return cfg
        return dataclasses.replace(cfg, all_features=n_features)

    @staticmethod
    def _fitted_model(inputs: FitInputs, placed: PlacedRows, forest: Tree, train_loss) -> dict:
        """The fitted attributes that prediction and ``save`` read, of the
        trees ``forest`` (features numbered as trained on) and the training
        loss before and after each of its rounds."""
        if placed.columns is not None:  # the data's column numbers, at nodes that split
            splits = forest.split_gain > 0
            forest = forest._replace(
                feature=np.where(splits, placed.columns[forest.feature], forest.feature)
            )
        forest, train_loss = joined(inputs.continued, forest, train_loss)
        fitted = {
            "forest_": forest,
            "init_score_": placed.init_score,
            "bin_edges_": placed.edges,
            "loss_": plain(inputs.loss),
            "n_outputs_": inputs.n_outputs,
            "n_features_in_": inputs.features.shape[1],
            "n_estimators_": len(train_loss) - 1,
            "train_loss_": np.asarray(train_loss),
            "categories_": inputs.categories,
        }
        if inputs.names is not None:
            fitted["feature_names_in_"] = inputs.names
        if inputs.continued is not None:
            fitted["init_model_rounds_"] = inputs.continued.n_rounds
        return fitted

    def _model_so_far(
        self, inputs: FitInputs, placed: PlacedRows, forest: Tree, train_loss: list[float]
    ) -> Booster:
        """A Booster of this one's settings holding the rounds grown so far
        (``forest``, ``train_loss`` as for `_fitted_model`): what a
        callback sees as ``env.model``; this Booster keeps its own fit."""
        model = type(self).__new__(type(self))
        settings = {key: value for key, value in vars(self).items() if not key.endswith("_")}
        model.__dict__.update(settings)
        model.__dict__.update(self._fitted_model(inputs, placed, forest, train_loss))
        return model

    def _keep_fit(self, inputs, placed, rounds, monitor, early_stopping_rounds):
        """Sets the fitted attributes from the rounds' trees and losses (cut
        at the best round when early stopping found one)."""
        cfg, chunks, train_loss = rounds
        forest = jax.tree.map(lambda *parts: np.concatenate(parts), *chunks)
        if early_stopping_rounds is not None and monitor.best_iteration is not None:
            n_rounds = monitor.best_iteration
            forest = jax.tree.map(lambda leaf: leaf[: n_rounds * cfg.trees_per_round], forest)
            train_loss = train_loss[: n_rounds + 1]
        for field in MODEL_FIELDS:  # (a field this fit does not set is not kept stale)
            self.__dict__.pop(field.name, None)
        self.__dict__.update(self._fitted_model(inputs, placed, forest, train_loss))
        self.evals_result_ = joined_evals(inputs.continued, monitor.evals_result)
        _warn_infinite_crps(self.evals_result_)
        self.best_iteration_ = monitor.best_iteration
        if inputs.continued is not None and monitor.best_iteration is not None:
            self.best_iteration_ += inputs.continued.n_rounds
        self.best_score_ = monitor.best_score
        self.leaf_method_ = cfg.leaf_method  # what "auto" resolved to
        self.split_criterion_ = cfg.split_criterion
        self.armijo_ = cfg.armijo
        self.loss_dtype_ = dtype_of(cfg.loss)

    # -- prediction ----------------------------------------------------------
    @property
    def trees_per_round_(self) -> int:
        """Trees grown per round: ``n_outputs`` with one tree per output, else 1."""
        self._check_fitted()
        return self.forest_.feature.shape[0] // max(self.n_estimators_, 1)

    @property
    def feature_importances_(self) -> np.ndarray:
        """``(n_features,)`` share of the total split gain of each feature."""
        return self.feature_importance("gain")

    def feature_importance(self, importance_type: str = "gain") -> np.ndarray:
        """``(n_features,)`` importances, by ``"gain"`` or ``"split"`` count, summing to 1."""
        self._check_fitted()
        return feature_importances(self.forest_, self.n_features_in_, importance_type)

    @in_float32
    def partial_dependence(
        self, X: Any, features: int | str | Sequence[int | str], grid_resolution: int = 50
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Partial dependence of the raw score on one or two features, computed
        from the forest by Friedman's weighted tree traversal (2001, section 8.2).

        Args:
          X: ``(n_rows, n_features)`` data whose percentiles set the grid; on
            a categorical column the grid is its categories seen in fit and
            present in ``X`` (as scikit-learn's for categorical features).
          features: one or two feature indices, or column names of a pandas
            fit (one feature may be given alone).
        Returns:
          ``(grid, values)``: one grid array per feature (a categorical
          column's category values or labels), and values of shape
          ``(len(grid[0]), [len(grid[1]),] n_outputs)``.
        """
        features_array = self._features_for_predict(X)
        features = feature_indices(features, getattr(self, "feature_names_in_", None))
        tables = {table.column: table for table in getattr(self, "categories_", None) or []}
        grid, points = [], []  # what the user reads, and the values the trees compare
        for feature in features:
            if feature in tables:
                categories, codes = category_grid(X, tables[feature])
                grid.append(categories)
                points.append(codes.astype(np.float32))
            else:
                grid.append(grid_from_data(features_array, feature, grid_resolution))
                points.append(grid[-1])
        values = partial_dependence(self.forest_, self.init_score_, features, points)
        return grid, np.asarray(values)

    def save(self, path, format: str = "jaxboost") -> None:
        """Write the model to a versioned JSON file (see `jaxboost.load`), or
        with ``format="xgboost"`` / ``"onnx"`` a file XGBoost / ONNX Runtime
        read (docs/explain.md, "Serve")."""
        self._check_fitted()
        if format == "jaxboost":
            return save_model(self, path)
        export_model(self, path, format)

    def _check_fitted(self) -> None:
        if not hasattr(self, "forest_"):
            raise RuntimeError("this Booster is not fitted yet: call fit(X, y) first")

    def _features_for_predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        got = column_count(X)
        if got is None:
            got = as_features(X).shape[1]  # (refuses X by name unless it is 2-D)
        # the columns before their categories are looked up by position
        names = feature_names(X)
        check_columns(names, getattr(self, "feature_names_in_", None), self.n_features_in_, got)
        return as_features(encode_categories(X, getattr(self, "categories_", None)))

    def _trees(self, iteration_range: tuple[int, int] | None) -> Tree:
        start, end = iteration_range or (0, self.n_estimators_)
        if not 0 <= start <= end <= self.n_estimators_:
            raise ValueError(
                f"iteration_range: expected 0 <= start <= end <= {self.n_estimators_}, "
                f"got {iteration_range}"
            )
        # host arrays: the native walk reads them in place (no transfer a
        # call), the XLA programs take them as they take jnp arrays
        if (start, end) == (0, self.n_estimators_):
            return jax.tree.map(np.asarray, self.forest_)
        # sliced on the host: a device array's slice compiles a program per
        # range (staged_predict asks for every one)
        rows = slice(start * self.trees_per_round_, end * self.trees_per_round_)
        return jax.tree.map(lambda leaf: np.asarray(leaf)[rows], self.forest_)

    def _shape_raw(self, raw: np.ndarray) -> np.ndarray:
        return raw[..., 0] if self.n_outputs_ == 1 else raw

    @in_float32
    def predict_raw(
        self, X: Any, iteration_range: tuple[int, int] | None = None, init_score: Any = None
    ) -> np.ndarray:
        """Raw scores ``F(x)``: ``(n_rows,)``, or ``(n_rows, n_outputs)`` when
        ``n_outputs > 1``.  ``iteration_range=(start, end)`` uses only the trees
        of rounds ``start`` to ``end - 1`` (the initial score is always in).
        ``init_score``: the rows' offsets, ``(n_rows,)`` or ``(n_rows,
        n_outputs)``, added (as fit's ``init_score``).
        Columns are read by position: a DataFrame's names must be the fitted
        ones in the fitted order (a ValueError names the difference)."""
        features = self._features_for_predict(X)
        trees = self._trees(iteration_range)
        devices = check_devices(self.devices) or jax.local_devices()
        raw = predict_on_devices(trees, np.asarray(self.init_score_), features, devices)
        return self._shape_raw(with_offsets(raw, init_score, self.n_outputs_, self.loss_))

    @in_float32
    def apply(self, X: Any, iteration_range: tuple[int, int] | None = None) -> np.ndarray:
        """``(n_rows, n_trees)`` int32: the leaf each row reaches in every tree
        (of the rounds in ``iteration_range``; ``trees_per_round_`` trees a
        round, in round order), as scikit-learn's ``apply`` and LightGBM's
        ``pred_leaf``.  Leaf ``j`` is ``forest_.leaf_value[tree, j]``: ``j``
        in ``[0, 2^max_depth)``, whose bits from the most significant are
        the row's path (0 left, 1 right); see `jaxboost.engine.leaf_index`."""
        features = self._features_for_predict(X)
        devices = check_devices(self.devices) or jax.local_devices()
        return leaf_indices_on(self._trees(iteration_range), features, devices[0])

    @in_float32
    def predict_contributions(self, X: Any, init_score: Any = None) -> np.ndarray:
        """SHAP values of the raw scores: exact path-dependent TreeSHAP
        (Lundberg et al. 2018), unseen features averaged over the trees'
        training hessian sums (XGBoost's covers; docs/explain.md).

        ``(n_rows, n_features + 1)``, or ``(n_rows, n_outputs, n_features +
        1)`` when ``n_outputs > 1``, float32: each feature's contribution,
        then the expected value (the initial score and the rows' offsets
        ``init_score``, as in `predict_raw`, included), so each row sums to
        `predict_raw`, as XGBoost's ``pred_contribs`` and LightGBM's
        ``pred_contrib``."""
        features = self._features_for_predict(X)
        devices = check_devices(self.devices) or jax.local_devices()
        values = explain.contributions(
            self.forest_, self.init_score_, features, init_score=init_score, devices=devices
        )
        return values[:, 0] if self.n_outputs_ == 1 else values

    @in_float32
    def predict_interactions(self, X: Any, init_score: Any = None) -> np.ndarray:
        """SHAP interaction values of the raw scores (XGBoost's
        ``pred_interactions``): ``(n_rows, n_features + 1, n_features + 1)``,
        or with an ``n_outputs`` axis second when ``n_outputs > 1``, float32.
        Entry ``[i, j]`` (``i != j``) is half the change feature ``j``
        makes to feature ``i``'s contribution, ``[i, i]`` the rest of it,
        so row ``i`` sums to `predict_contributions`' column ``i``; the
        expected value is at ``[n_features, n_features]``."""
        features = self._features_for_predict(X)
        devices = check_devices(self.devices) or jax.local_devices()
        values = explain.interactions(
            self.forest_, self.init_score_, features, init_score=init_score, devices=devices
        )
        return values[:, 0] if self.n_outputs_ == 1 else values

    @in_float32
    def _link(self, raw: np.ndarray) -> np.ndarray:
        name = getattr(self.loss_, "link", "identity")
        if name == "identity":
            return raw
        # in chunks of a few sizes: a batch of any size compiles nothing new
        return apply_link(loss_catalogue.links.get(name), raw)

    def predict(
        self, X: Any, iteration_range: tuple[int, int] | None = None, init_score: Any = None
    ) -> np.ndarray:
        """Predictions on the response scale, through the loss's declared link
        (identity when the loss declares none); ``init_score`` as in `predict_raw`."""
        return self._link(self.predict_raw(X, iteration_range, init_score))

    def _distribution(self, X: Any, what: str, iteration_range=None, init_score=None) -> Any:
        self._check_fitted()
        loss = distribution_predict.distribution_loss_of(self.loss_, what)
        raw = self.predict_raw(X, iteration_range, init_score)
        return distribution_predict.predict_distribution(loss, raw)

    def predict_distribution(
        self, X: Any, iteration_range: tuple[int, int] | None = None, init_score: Any = None
    ) -> Any:
        """The predicted distribution of every row, for a distribution loss
        (`jaxboost.losses.distribution`, `gaussian_nll`): a numpyro
        distribution of batch shape ``(n_rows,)`` (``.mean``, ``.variance``,
        ``.cdf``, ``.log_prob``, its parameters as attributes: ``.loc``);
        ``init_score``: the rows' offsets, as in `predict_raw` (a model fitted
        with offsets, ``log(exposure)``, needs the new rows')."""
        return self._distribution(X, "predict_distribution", iteration_range, init_score)

    def predict_quantiles(
        self,
        X: Any,
        q: Sequence[float] | float,
        iteration_range: tuple[int, int] | None = None,
        init_score: Any = None,
    ) -> np.ndarray:
        """Quantiles ``(n_rows, len(q))`` of the predicted distributions at
        levels ``q`` in (0, 1) (docs/distributions.md: how they are computed);
        ``init_score`` as in `predict_distribution`."""
        levels = distribution_predict.checked_levels(q)
        dist = self._distribution(X, "predict_quantiles", iteration_range, init_score)
        return distribution_predict.quantiles(dist, levels)

    def sample(
        self, X: Any, n: int, random_state: Any = None, init_score: Any = None
    ) -> np.ndarray:
        """``n`` draws ``(n_rows, n)`` from every row's predicted distribution;
        ``random_state``: an int, a numpy ``Generator`` or None (a fresh seed);
        ``init_score`` as in `predict_distribution`."""
        dist = self._distribution(X, "sample", init_score=init_score)
        return distribution_predict.sample(dist, n, random_state)

    def staged_predict_raw(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """Raw scores after each round, one array per round; ``init_score``
        as in `predict_raw`."""
        for raw in self._staged_raw(X):
            yield self._shape_raw(with_offsets(raw, init_score, self.n_outputs_, self.loss_))

    @in_float32
    def _staged_raw(self, X: Any) -> np.ndarray:
        """``(n_rounds, n_rows, K)`` raw scores after each round."""
        features = self._features_for_predict(X)
        per_round = self.trees_per_round_
        aligned = in_place_on(jax.default_backend())
        padded = pad_rows(features, bucket_size(features.shape[0]), aligned=aligned)
        increments = round_increments(self._trees(None), jnp.asarray(padded), per_round)
        staged = np.asarray(jnp.cumsum(increments, axis=0) + self.init_score_)
        return staged[:, : features.shape[0]]

    def staged_predict(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """Response-scale predictions after each round; ``init_score`` as in
        `predict_raw`."""
        for raw in self.staged_predict_raw(X, init_score):
            yield self._link(raw)

"""A fit's settings as its programs take them: the static part that keys
the compiled programs (`jaxboost.engine.training.StaticSettings`) and the
numeric part passed as values (`NumericSettings`), with what ``"auto"``,
``armijo=None`` and the defaults left at None resolve to once the loss's
hessian has been probed at the initial score.

``settings`` is any holder of `jaxboost.frontends.settings.settings_table`'s
settings as attributes: a `jaxboost.Booster`, or the frozen record
`settings_record` takes of one for a fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ...engine.derivatives import HessianProbe
from ...engine.fisher import resolved_hessian
from ...engine.groups import bucket_widths
from ...engine.quantise import check_quantisation
from ...engine.training import (
    HESSIAN_MODES,
    LEAF_METHODS,
    MULTI_STRATEGIES,
    SPLIT_CRITERIA,
    NumericSettings,
    StaticSettings,
)
from ...kernels.registry import kernels_for
from ...losses.catalogue import is_catalogue_loss
from ...losses.metadata import metadata_of
from ...runtime.distributed import first_process_value
from ...runtime.precision import loss_in
from ...runtime.same_function import plain
from ...runtime.user_warning import warn
from ...runtime.workarounds import FAST_COMPILE_ROWS
from ..data.categories import categorical_settings, check_not_monotone
from ..settings.checks import (
    MONITORED_ROUNDS_PER_CHUNK,
    UNMONITORED_ROUNDS_PER_CHUNK,
    choice,
    given_base_score,
    least_child_rows,
    tree_shape,
)
from ..settings.constraints import interaction_sets, monotone_directions
from ..settings.regularisation_defaults import (
    POINT_REG_LAMBDA,
    heavy_min_child_weight_message,
    mean_positive_weight,
    resolved_min_child_weight,
    resolved_reg_lambda,
    small_hessian_message,
    small_weight_message,
)
from ..settings.settings_table import BOOSTER, HESSIAN_SETTINGS, check_settings, checked
from .hessian_probe import VECTOR_OPTIONS_ROWS, probe_fit, rows_from_hessian
from .placement import FitInputs, PlacedRows
from .rounds_loop import scaled_settings


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


def check_all_settings(settings: Any) -> None:
    """The settings checked before any work: a ValueError (a TypeError for
    ``devices`` of the wrong type) names the first one out of range."""
    check_settings(settings, BOOSTER)
    # (the checks that weigh several settings together)
    tree_shape(settings)
    numeric_settings(settings)
    given_base_score(settings.base_score, None)


def hessian_setting(settings: Any, loss: Callable) -> str:
    """The ``hessian`` setting of ``settings`` for ``loss``, ``"auto"`` settled."""
    hessian = resolved_hessian(choice("hessian", settings.hessian, HESSIAN_SETTINGS), loss)
    if hessian == "fisher" and metadata_of(loss).per == "group":
        raise ValueError(
            "hessian='fisher': the Fisher information of a per-sample distribution; "
            "a group loss takes hessian='diag' (or 'auto')"
        )
    return hessian


def program_config(
    settings: Any,
    loss: Callable,
    n_outputs: int,
    monitored: bool,
    probe: HessianProbe,
    platform: str,
    rows_per_shard: int,
    n_rows: int,
    weight_scale: float = 1.0,
) -> tuple[StaticSettings, NumericSettings]:
    """The static program settings, and the numeric ones passed as values;
    ``probe`` (the loss's hessian, probed at the initial score) settles what
    ``"auto"`` and ``armijo=None`` leave open; a default ``reg_lambda``
    is measured against its mean hessian times ``weight_scale`` (the
    rows' mean positive weight)."""
    leaf_method, split_criterion = settings.leaf_method, settings.split_criterion
    if leaf_method == "newton" and not probe.informative:
        warn(
            "leaf_method='newton' with a loss whose hessian is zero on most rows "
            "(absolute, pinball): each leaf's value is then its gradient sum / "
            "reg_lambda, a step that grows with the leaf's size; leaf_method='auto' "
            "or 'line_search' finds each leaf's minimiser"
        )
    if split_criterion == "second_order" and not probe.informative:
        weight = resolved_min_child_weight(checked(settings, "min_child_weight"))
        warn(_second_order_without_curvature(float(weight)))
    if leaf_method == "auto":
        leaf_method = "newton" if probe.informative else "line_search"
    if leaf_method == "joint_newton" and n_outputs > 1:
        raise ValueError(
            f"leaf_method: 'joint_newton' fits models of one output, this one has {n_outputs}"
        )
    if split_criterion == "auto":
        split_criterion = "second_order" if probe.informative else "first_order"
    armijo = settings.armijo
    if armijo is None:
        armijo = leaf_method == "line_search" or probe.negative
    chunk = settings.rounds_per_chunk
    if chunk is None:
        chunk = MONITORED_ROUNDS_PER_CHUNK if monitored else UNMONITORED_ROUNDS_PER_CHUNK
    max_depth, max_leaves = tree_shape(settings)
    cfg = StaticSettings(
        loss=loss,
        n_outputs=n_outputs,
        max_depth=max_depth,
        leaf_method=choice("leaf_method", leaf_method, LEAF_METHODS),
        split_criterion=choice("split_criterion", split_criterion, SPLIT_CRITERIA),
        hessian=hessian_setting(settings, loss),
        multi_strategy=choice("multi_strategy", settings.multi_strategy, MULTI_STRATEGIES),
        rounds_per_chunk=int(chunk),
        hessian_mode=choice("hessian_mode", settings.hessian_mode, HESSIAN_MODES),
        armijo=bool(armijo),
        histogram_kernel=kernels_for(platform).histogram,
        leaf_kernels=kernels_for(platform).leaf,
        grad_quant_bins=(
            check_quantisation(settings.num_grad_quant_bins, rows_per_shard)
            if settings.use_quantized_grad
            else 0
        ),
        narrow_line_search=not probe.informative,
        subsampled=bool(numeric_settings(settings).subsample < 1.0),
        vector_row_options=n_outputs > 1 and rows_per_shard >= VECTOR_OPTIONS_ROWS,
        fast_compile=n_rows <= FAST_COMPILE_ROWS,
        count_rows=bool(numeric_settings(settings).min_child_samples > 0),
        max_leaves=max_leaves,
    )
    return cfg, _numeric_defaults(settings, cfg.hessian, probe, n_outputs, weight_scale)


def _numeric_defaults(
    settings: Any, hessian: str, probe: HessianProbe, n_outputs: int, weight_scale: float
) -> NumericSettings:
    """The numeric settings, ``min_child_weight`` and ``reg_lambda`` left at
    None measured against ``probe``'s mean hessian times ``weight_scale``
    (``hessian``: the engine's hessian setting, ``"fisher"`` counting rows)."""
    hyper = numeric_settings(settings)
    mean_hessian = probe.mean_hessian if probe.informative else np.nan
    if np.isfinite(weight_scale) and weight_scale > 0:
        mean_hessian *= weight_scale
    if settings.min_child_weight is None and hessian != "fisher":  # (scaled as reg_lambda)
        weight = resolved_min_child_weight(None, mean_hessian)
        hyper = hyper._replace(min_child_weight=np.float32(weight))
    if settings.reg_lambda is None:  # (a distribution's prior; a small hessian's rows)
        reg_lambda = resolved_reg_lambda(None, hessian, mean_hessian)
        # (weights of 0.01 in float32 take 0.99999998: no warning)
        if reg_lambda < 0.999 * POINT_REG_LAMBDA and hessian != "fisher":
            warn(
                small_hessian_message(
                    mean_hessian,
                    reg_lambda,
                    float(hyper.min_child_weight),
                    _hessian_of(probe, n_outputs, weight_scale),
                    weight_given=settings.min_child_weight is not None,
                )
            )
        hyper = hyper._replace(reg_lambda=np.float32(reg_lambda))
    return hyper


def _hessian_of(probe: HessianProbe, n_outputs: int, weight_scale: float) -> str:
    """What a measured mean hessian is of, for the warnings: `` (output
    0 of 2, times sample_weight, of mean 0.01)``, or nothing."""
    of = [f"output {probe.output} of {n_outputs}"] if n_outputs > 1 else []
    if weight_scale != 1.0:
        of.append(f"times sample_weight, of mean {weight_scale:.3g}")
    return f" ({', '.join(of)})" if of else ""


def numeric_settings(settings: Any) -> NumericSettings:
    """The numeric settings, checked, as float32 scalars."""
    hyper = NumericSettings(
        learning_rate=checked(settings, "learning_rate"),
        reg_lambda=resolved_reg_lambda(checked(settings, "reg_lambda"), ""),
        min_child_weight=resolved_min_child_weight(checked(settings, "min_child_weight")),
        min_split_gain=checked(settings, "min_split_gain"),
        subsample=checked(settings, "subsample"),
        colsample_bytree=checked(settings, "colsample_bytree"),
        hessian_floor=checked(settings, "hessian_floor"),
        min_child_samples=least_child_rows(
            settings.min_child_samples, bool(settings.use_quantized_grad)
        ),
    )
    return NumericSettings(*(np.float32(value) for value in hyper))


def fit_settings(
    settings: Any, inputs: FitInputs, placed: PlacedRows, monitored: bool
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
        probe = HessianProbe(informative=True, negative=False)
        cfg, hyper = program_config(
            settings, loss, n_outputs, monitored, probe, platform, rows_per_shard, n_rows
        )
        cfg = dataclasses.replace(cfg, group_widths=bucket_widths(placed.data.groups))
        check_weight_scale(inputs.weight, hyper)
        return _with_columns(settings, cfg, inputs, placed), hyper
    # a default reg_lambda is measured against a user loss's hessian (the
    # catalogue's keep XGBoost's hessian units; Fisher scoring counts rows)
    hessian = hessian_setting(settings, loss)
    # (and min_child_weight's, and a given one weighed against it)
    measure = hessian != "fisher" and not is_catalogue_loss(plain(inputs.loss))
    probe = probe_fit(
        loss,
        targets,
        placed.init_score,
        hessian,
        (placed.data.y, placed.data.weight),
        rows_per_shard,
        measure=measure,
    )
    # (a leaf's hessian sums weigh each row's hessian by its weight)
    weight_scale = mean_positive_weight(inputs.weight)
    informative, negative, mean_hessian, output, weight_scale = first_process_value(
        (*probe, np.float64(weight_scale))
    )
    probe = HessianProbe(
        bool(informative),
        bool(negative),
        float(mean_hessian) / placed.loss_scale if measure else float("nan"),
        int(output),
    )
    cfg, hyper = program_config(
        settings,
        loss,
        n_outputs,
        monitored,
        probe,
        platform,
        rows_per_shard,
        n_rows,
        float(weight_scale),
    )
    check_weight_scale(inputs.weight, hyper)
    if measure and settings.min_child_weight is not None and cfg.split_criterion == "second_order":
        rows = float(np.count_nonzero(inputs.weight > 0))
        message = heavy_min_child_weight_message(
            float(hyper.min_child_weight),
            probe.mean_hessian * float(weight_scale) * rows,
            _hessian_of(probe, n_outputs, 1.0),
        )
        if message is not None:
            warn(message)
    hyper = scaled_settings(hyper, placed.loss_scale, cfg.split_criterion)
    # (the loss as given: its hessian's shape is the scaled one's)
    from_hessian = rows_from_hessian(cfg, inputs.loss, targets, inputs.weight)
    cfg = dataclasses.replace(cfg, rows_from_hessian=from_hessian)
    return _with_columns(settings, cfg, inputs, placed), hyper


def check_weight_scale(weight: np.ndarray, hyper: NumericSettings) -> None:
    """Warns where ``weight`` is so small that ``reg_lambda`` or
    ``min_child_weight`` swamp the weighted hessian sums."""
    message = small_weight_message(
        mean_positive_weight(weight), float(hyper.reg_lambda), float(hyper.min_child_weight)
    )
    if message is not None:
        warn(message)


def constraint_settings(settings: Any, n_features: int, names, n_outputs: int) -> dict:
    """The monotone and interaction constraints as column indices (see
    `jaxboost.frontends.settings.constraints`), StaticSettings' fields."""
    monotone = monotone_directions(settings.monotone_constraints, n_features, names, n_outputs)
    return {
        "monotone": monotone,
        "interaction": interaction_sets(settings.interaction_constraints, n_features, names),
        # (unconstrained fits keep the programs they always compiled)
        "monotone_method": settings.monotone_constraints_method if monotone else "basic",
    }


def _with_columns(settings: Any, cfg: StaticSettings, inputs: FitInputs, placed: PlacedRows):
    """``cfg`` with the constraints, and knowing all columns' count where
    only some are trained on."""
    n_features = inputs.features.shape[1]
    constraints = constraint_settings(settings, n_features, inputs.names, inputs.n_outputs)
    cfg = dataclasses.replace(cfg, **constraints)
    if inputs.categories:
        columns = [table.column for table in inputs.categories]
        check_not_monotone(constraints["monotone"], columns, inputs.names)
        cfg = dataclasses.replace(
            cfg, categorical=categorical_settings(settings, inputs.categories)
        )
    if placed.columns is None:
        return cfg
    return dataclasses.replace(cfg, all_features=n_features)

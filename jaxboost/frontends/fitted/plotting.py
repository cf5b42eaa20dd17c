"""Plots of a fitted model: feature importances, learning curves, partial
dependence, and the calibration of predicted distributions (PIT histogram,
quantile calibration).

matplotlib is optional (the ``plot`` extra); it is imported when a plot is
drawn.  Every function draws on ``ax`` (a new figure's axes when None) and
returns the axes; ``model`` is a fitted `jaxboost.Booster` or estimator
(its ``booster_``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .distribution_predict import pit
from .inspection import feature_importances, feature_indices, grid_from_data, partial_dependence
from .tree_dump import fitted_booster


def pyplot():
    """``matplotlib.pyplot``, or an ImportError naming the ``plot`` extra."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            "plotting needs matplotlib: pip install matplotlib (the `plot` extra)"
        ) from error
    return plt


def axes_or_new(ax):
    """``ax``, or a new figure's axes when None."""
    if ax is None:
        _, ax = pyplot().subplots()
    return ax


def _feature_names(model: Any) -> list[str]:
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        return [f"f{index}" for index in range(model.n_features_in_)]
    return [str(name) for name in names]


def _feature_indices(model: Any, features: int | str | Sequence[int | str]) -> list[int]:
    indices = feature_indices(features, _feature_names(model))
    for index in indices:
        if not 0 <= index < model.n_features_in_:
            raise ValueError(
                f"features: expected indices in [0, {model.n_features_in_}), got {index}"
            )
    return indices


def plot_importance(
    model: Any, importance_type: str = "gain", max_features: int | None = 20, ax=None
):
    """Horizontal bars of the normalised feature importances, largest on top.

    Only features with a non-zero importance are drawn, at most
    ``max_features`` of them (all when None).
    """
    pyplot()
    model = fitted_booster(model)
    importance = feature_importances(model.forest_, model.n_features_in_, importance_type)
    order = np.argsort(-importance, kind="stable")
    order = order[importance[order] > 0][:max_features]
    names = _feature_names(model)
    ax = axes_or_new(ax)
    positions = np.arange(order.size)[::-1]
    ax.barh(positions, importance[order], align="center")
    ax.set_yticks(positions, [names[index] for index in order])
    ax.set_xlabel(f"importance ({importance_type}, normalised)")
    ax.set_title("Feature importance")
    return ax


def plot_learning_curve(model: Any, ax=None):
    """The training loss per round (round 0: the initial score) and every
    metric of ``model.evals_result_`` (``{set_name: {metric: [values]}}``) when
    the model has it.  Curves are aligned on their last round: a curve one
    value shorter than the training loss starts at round 1."""
    pyplot()
    model = fitted_booster(model)
    ax = axes_or_new(ax)
    train_loss = np.asarray(model.train_loss_)
    ax.plot(np.arange(train_loss.size), train_loss, label="train loss")
    evals = getattr(model, "evals_result_", None) or {}
    for set_name, metrics in evals.items():
        for metric, values in metrics.items():
            values = np.asarray(values, dtype=np.float64)
            first = max(0, train_loss.size - values.size)
            ax.plot(first + np.arange(values.size), values, label=f"{set_name} {metric}")
    ax.set_xlabel("boosting round")
    ax.set_ylabel("loss")
    ax.set_title("Learning curve")
    ax.legend()
    return ax


def plot_partial_dependence(
    model: Any,
    X: Any,
    features: int | str | Sequence[int | str],
    ax=None,
    grid_resolution: int = 50,
    output: int = 0,
):
    """Partial dependence of the raw score on one feature (a line per output)
    or on two features (filled contours of output ``output``).

    Args:
      X: ``(n_rows, n_features)`` data the grid is taken from
        (`jaxboost.frontends.fitted.inspection.grid_from_data`; a categorical
        column's grid is its categories, named by the axis's ticks).
      features: one or two feature indices, or names when the model has
        ``feature_names_in_``.
    """
    pyplot()
    model = fitted_booster(model)
    indices = _feature_indices(model, features)
    if len(indices) not in (1, 2):
        raise ValueError(f"features: expected 1 or 2 features, got {features!r}")
    categorical = {table.column for table in getattr(model, "categories_", None) or []}
    if categorical:  # (the model codes the categories; their grid is the categories)
        grid, pd = model.partial_dependence(X, indices, grid_resolution)
    else:
        grid = [grid_from_data(X, index, grid_resolution) for index in indices]
        pd = partial_dependence(model.forest_, model.base_score_, indices, grid)
    # a categorical axis: the categories at 0, 1, ..., named by ticks
    shown = [np.arange(g.size) if i in categorical else g for i, g in zip(indices, grid)]
    names = [_feature_names(model)[index] for index in indices]
    ax = axes_or_new(ax)
    for axis, index, values in zip((ax.xaxis, ax.yaxis), indices, grid):
        if index in categorical:
            axis.set_ticks(np.arange(values.size), labels=[str(v) for v in values])
    grid = shown
    if len(indices) == 1:
        for k in range(pd.shape[-1]):
            label = "partial dependence" if pd.shape[-1] == 1 else f"output {k}"
            ax.plot(grid[0], pd[:, k], label=label)
        ax.set_xlabel(names[0])
        ax.set_ylabel("partial dependence (raw score)")
        if pd.shape[-1] > 1:
            ax.legend()
    else:
        if not 0 <= output < pd.shape[-1]:
            raise ValueError(f"output: expected an index in [0, {pd.shape[-1]}), got {output}")
        contours = ax.contourf(grid[0], grid[1], pd[:, :, output].T)
        ax.figure.colorbar(contours, ax=ax, label="partial dependence (raw score)")
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
    ax.set_title("Partial dependence")
    return ax


def plot_pit(
    model: Any,
    X: Any,
    y: Any,
    bins: int = 10,
    ax=None,
    random_state: Any = 0,
    init_score: Any = None,
):
    """Histogram of the probability integral transform ``F_i(y_i)`` of a
    distribution loss's model (`jaxboost.frontends.fitted.distribution_predict.pit`),
    as densities, with the uniform density 1 of calibrated predictions: a U
    shape means too narrow distributions, a hump too wide, a slope a bias.

    Args:
      model: a fitted `jaxboost.Booster` or `jaxboost.Regressor` of a
        distribution loss.
      X: ``(n_rows, n_features)``; y: ``(n_rows,)`` uncensored targets.
      bins: histogram bins on [0, 1].
      random_state: the randomised PIT's seed (count families).
      init_score: the rows' offsets, as ``predict``'s (``log(exposure)``).
    """
    pyplot()
    values = pit(model.predict_distribution(X, init_score=init_score), y, random_state)
    ax = axes_or_new(ax)
    ax.hist(values, bins=bins, range=(0.0, 1.0), density=True, edgecolor="white")
    ax.axhline(1.0, color="black", linestyle="--", label="calibrated")
    ax.set_xlabel("PIT value F(y)")
    ax.set_ylabel("density")
    ax.set_title("PIT histogram")
    ax.legend()
    return ax


def plot_calibration(
    model: Any,
    X: Any,
    y: Any,
    levels: Sequence[float] | None = None,
    ax=None,
    init_score: Any = None,
):
    """Calibration of predicted quantiles: the fraction of targets below
    each predicted ``q``-quantile against ``q`` (on the diagonal when
    calibrated).

    Args:
      model: a fitted `jaxboost.Booster` or `jaxboost.Regressor` of a
        distribution loss.
      X: ``(n_rows, n_features)``; y: ``(n_rows,)`` uncensored targets.
      levels: quantile levels in (0, 1) (default 0.05, 0.10, ..., 0.95).
      init_score: the rows' offsets, as ``predict``'s (``log(exposure)``).
    """
    pyplot()
    levels = np.linspace(0.05, 0.95, 19) if levels is None else np.asarray(levels, np.float64)
    predicted = model.predict_quantiles(X, levels, init_score=init_score)  # (n_rows, len(q))
    y = np.asarray(y, np.float64)
    if y.shape != predicted.shape[:1]:
        raise ValueError(
            f"y: expected one uncensored target per row of X, shape {predicted.shape[:1]}, got "
            f"shape {y.shape}"
        )
    observed = np.mean(y[:, None] <= predicted, axis=0)
    ax = axes_or_new(ax)
    ax.plot([0, 1], [0, 1], color="black", linestyle="--", label="calibrated")
    ax.plot(levels, observed, marker="o", label="model")
    ax.set_xlabel("quantile level q")
    ax.set_ylabel("fraction of targets below")
    ax.set_title("Quantile calibration")
    ax.legend()
    return ax

"""Plots that explain a fitted model: its SHAP values (a beeswarm summary,
one feature's dependence) and one of its trees (docs/explain.md).

SHAP values are `jaxboost.Booster.predict_contributions`'; the trees are
read through `jaxboost.frontends.fitted.tree_dump`, as `dump_tree` writes them.
A model of several outputs shows one, ``output`` (default 0, named in the
title).  matplotlib is imported when a plot is drawn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data.categories import encode_categories
from ..data.validation import as_features
from .plotting import axes_or_new, pyplot
from .tree_dump import check_tree_index, feature_names_of, fitted_booster, node_columns

MISSING_COLOUR = "#888888"


def _output_index(booster: Any, output: int | None) -> int:
    n_outputs = int(booster.n_outputs_)
    if output is None:
        return 0
    if isinstance(output, bool) or not isinstance(output, (int, np.integer)):
        raise TypeError(f"output: expected an integer, got {output!r}")
    if not 0 <= output < n_outputs:
        raise ValueError(f"output: expected an index in [0, {n_outputs}), got {output}")
    return int(output)


def _output_title(booster: Any, output: int) -> str:
    return f" (output {output} of {booster.n_outputs_})" if booster.n_outputs_ > 1 else ""


def _feature_index(booster: Any, feature: Any) -> int:
    """``feature`` (a column index, or a name of the fitted frame's) as an index."""
    fitted = getattr(booster, "feature_names_in_", None)
    if isinstance(feature, str):
        names = [] if fitted is None else [str(name) for name in fitted]
        if feature not in names:
            known = f"columns: {names}" if names else "the model was fitted without column names"
            raise ValueError(f"feature: no column named {feature!r} ({known})")
        return names.index(feature)
    if isinstance(feature, bool) or not isinstance(feature, (int, np.integer)):
        raise TypeError(f"feature: expected one column index or name, got {feature!r}")
    if not 0 <= feature < booster.n_features_in_:
        raise ValueError(
            f"feature: expected an index in [0, {booster.n_features_in_}), got {feature}"
        )
    return int(feature)


def _shap_and_features(booster: Any, X: Any, output: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n_rows, n_features)`` SHAP values of output ``output`` and the
    features the trees read (categories as codes, NaN where missing or unseen)."""
    values = np.asarray(booster.predict_contributions(X))
    if values.ndim == 3:
        values = values[:, output]
    features = as_features(encode_categories(X, getattr(booster, "categories_", None)))
    return values[:, :-1], features


def _swarm(values: np.ndarray, n_bins: int = 100) -> np.ndarray:
    """``(n_rows, n_columns)`` vertical offsets in ``[-0.4, 0.4]`` that stack
    each column's points of nearby ``values`` (one of ``n_bins`` bins of its
    range) alternately above and below its line: a beeswarm."""
    n_rows, n_columns = values.shape
    low = values.min(axis=0)
    span = values.max(axis=0) - low
    bins = np.round(n_bins * (values - low) / np.where(span > 0, span, 1.0)).astype(np.int64)
    key = (bins + (n_bins + 1) * np.arange(n_columns)).reshape(-1)
    walk = np.argsort(key, kind="stable")
    first = np.searchsorted(key[walk], key[walk])  # each point's bin's first point
    layer = np.empty(key.size, np.int64)
    layer[walk] = np.arange(key.size) - first
    offset = (-(-layer // 2) * np.where(layer % 2 == 1, 1, -1)).reshape(n_rows, n_columns)
    most = np.abs(offset).max(axis=0)
    return 0.4 * offset / np.maximum(most, 1)


def _colour_scale(features: np.ndarray) -> np.ndarray:
    """Each column's values in [0, 1] between its 5th and 95th percentiles
    (NaN stays NaN), the colours of a beeswarm."""
    scaled = np.full(features.shape, np.nan)
    for column in range(features.shape[1]):  # (the shown features only, at most max_display)
        values = features[:, column].astype(np.float64)
        present = values[~np.isnan(values)]
        if not present.size:
            continue
        low, high = np.percentile(present, [5, 95])
        if high <= low:
            low, high = present.min(), present.max()
        spread = high - low if high > low else 1.0
        scaled[:, column] = np.clip((values - low) / spread, 0.0, 1.0)
    return scaled


def plot_shap_summary(
    model: Any, X: Any, max_display: int = 20, output: int | None = None, ax=None
):
    """SHAP summary (beeswarm): one row of points per feature, most
    important (mean |SHAP value|) on top, a point per row of ``X`` at its
    SHAP value, coloured by the row's value of the feature (5th to 95th
    percentile, blue low, red high; a categorical column by its category's
    code; grey where missing).

    Args:
      model: a fitted `jaxboost.Booster` or estimator.
      X: ``(n_rows, n_features)`` rows to explain, as ``predict`` takes them.
      max_display: the most features drawn.
      output: with several outputs, the output explained (default 0).
    """
    plt = pyplot()
    booster = fitted_booster(model)
    output = _output_index(booster, output)
    if isinstance(max_display, bool) or not isinstance(max_display, (int, np.integer)):
        raise TypeError(f"max_display: expected a positive integer, got {max_display!r}")
    if max_display < 1:
        raise ValueError(f"max_display: expected a positive integer, got {max_display}")
    values, features = _shap_and_features(booster, X, output)
    importance = np.abs(values).mean(axis=0)
    shown = np.argsort(-importance, kind="stable")[:max_display]
    line = np.arange(shown.size)[::-1]  # the most important feature on top
    x = values[:, shown]
    y = line[None, :] + _swarm(x)
    colour = _colour_scale(features[:, shown])
    missing = np.isnan(colour)
    ax = axes_or_new(ax)
    ax.axvline(0.0, color="#999999", linewidth=0.8, zorder=0)
    points = ax.scatter(
        x[~missing], y[~missing], c=colour[~missing], cmap="coolwarm", vmin=0, vmax=1, s=12
    )
    if missing.any():
        ax.scatter(x[missing], y[missing], color=MISSING_COLOUR, s=12, label="missing")
        ax.legend(loc="lower right")
    bar = plt.colorbar(points, ax=ax, ticks=[0, 1], aspect=40)
    bar.ax.set_yticklabels(["low", "high"])
    bar.set_label("feature value")
    names = feature_names_of(booster)
    ax.set_yticks(line, [names[index] for index in shown])
    ax.set_ylim(-0.7, shown.size - 0.3)
    ax.set_xlabel("SHAP value (raw score)")
    ax.set_title("SHAP values" + _output_title(booster, output))
    return ax


def plot_shap_dependence(
    model: Any, X: Any, feature: int | str, output: int | None = None, ax=None
):
    """SHAP dependence: each row's SHAP value of ``feature`` against its
    value of it; a categorical column's categories side by side, named by
    the ticks; rows missing the feature (or of a category unseen in fit)
    in grey at the left.

    Args:
      model: a fitted `jaxboost.Booster` or estimator.
      X: ``(n_rows, n_features)`` rows to explain, as ``predict`` takes them.
      feature: a column index, or its name when the model has ``feature_names_in_``.
      output: with several outputs, the output explained (default 0).
    """
    pyplot()
    booster = fitted_booster(model)
    output = _output_index(booster, output)
    names = feature_names_of(booster)
    index = _feature_index(booster, feature)
    values, features = _shap_and_features(booster, X, output)
    x, y = features[:, index].astype(np.float64), values[:, index]
    missing = np.isnan(x)
    tables = {table.column: table for table in getattr(booster, "categories_", None) or []}
    ax = axes_or_new(ax)
    if index in tables:
        table = tables[index]
        codes = np.arange(table.n_codes)
        labels = [
            ", ".join(_label(v) for v in table.values[table.codes == code].tolist())
            for code in codes
        ]
        where_missing = -1.0
        ax.set_xticks(np.concatenate([[-1], codes]), ["missing/unseen", *labels])
    else:
        present = x[~missing]
        low, high = (present.min(), present.max()) if present.size else (0.0, 1.0)
        where_missing = low - 0.05 * (high - low if high > low else 1.0)
    ax.axhline(0.0, color="#999999", linewidth=0.8, zorder=0)
    ax.scatter(x[~missing], y[~missing], s=12)
    if missing.any():
        ax.scatter(
            np.full(int(missing.sum()), where_missing),
            y[missing],
            color=MISSING_COLOUR,
            s=12,
            label="missing",
        )
        ax.legend()
    ax.set_xlabel(names[index])
    ax.set_ylabel(f"SHAP value of {names[index]}")
    ax.set_title("SHAP dependence" + _output_title(booster, output))
    return ax


def _label(value: Any) -> str:
    """A category label as shown: integral numbers without ".0"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _node_text(columns: dict, row: int, precision: int, max_labels: int = 6) -> str:
    if columns["is_leaf"][row]:
        key = "value" if "value" in columns else None
        if key is not None:
            shown = f"{columns['value'][row]:.{precision}g}"
        else:
            keys = sorted((k for k in columns if k.startswith("value_")), key=lambda k: int(k[6:]))
            shown = "[" + ", ".join(f"{columns[k][row]:.{precision}g}" for k in keys) + "]"
        return f"{columns['node_index'][row].split('-', 1)[1]}\n{shown}"
    name = columns["split_feature"][row]
    if columns["decision_type"][row] == "==":
        labels = [_label(label) for label in columns["threshold"][row]]
        if len(labels) > max_labels:
            labels = labels[:max_labels] + [f"... ({len(labels)})"]
        return f"{name} in\n{{{', '.join(labels)}}}"
    return f"{name} <= {columns['threshold'][row]:.{precision}g}"


def plot_tree(
    model: Any,
    tree_index: int = 0,
    output: int | None = None,
    ax=None,
    precision: int = 4,
    fontsize: float | None = None,
):
    """Tree ``tree_index`` drawn top down: a box per node (a split's
    condition, by column name and a categorical column's labels; a leaf's
    name and value), its left child's edge marked "yes", the right "no",
    and ", missing" on the side missing values and unseen categories take.

    Numbers are rounded to ``precision`` significant digits; `dump_tree`
    gives them exactly.  ``tree_index`` and ``output`` as `dump_tree`'s
    (vector leaves: every output's value unless ``output`` is given).
    """
    from matplotlib.collections import LineCollection

    pyplot()
    booster = fitted_booster(model)
    check_tree_index(booster, tree_index)
    columns = node_columns(booster, output, trees=[int(tree_index)])
    rows = {name: row for row, name in enumerate(columns["node_index"])}
    n_nodes, is_leaf = columns["is_leaf"].size, columns["is_leaf"]
    x = np.zeros(n_nodes)
    x[is_leaf] = np.arange(int(is_leaf.sum()))  # leaves left to right, in walk order
    children = {}
    for row in np.nonzero(~is_leaf)[0][::-1]:  # (children come after their parent)
        left, right = rows[columns["left_child"][row]], rows[columns["right_child"][row]]
        x[row] = 0.5 * (x[left] + x[right])
        children[row] = (left, right)
    y = -(columns["node_depth"] - 1).astype(np.float64)
    ax = axes_or_new(ax)
    size = fontsize or max(5.0, 10.0 - np.log2(max(int(is_leaf.sum()), 1)))  # (wide trees: smaller)
    segments, edge_labels = [], []
    for row, (left, right) in children.items():
        missing_left = columns["missing_direction"][row] == "left"
        for child, word, takes_missing in (
            (left, "yes", missing_left),
            (right, "no", not missing_left),
        ):
            segments.append([(x[row], y[row]), (x[child], y[child])])
            text = word + (", missing" if takes_missing else "")
            edge_labels.append(((x[row] + x[child]) / 2, (y[row] + y[child]) / 2, text))
    ax.add_collection(LineCollection(segments, colors="#555555", linewidths=1.0, zorder=1))
    for mid_x, mid_y, text in edge_labels:
        ax.text(mid_x, mid_y, text, ha="center", va="center", fontsize=size * 0.8, color="#333333")
    for row in range(n_nodes):
        colour = "#e8f4e8" if is_leaf[row] else "#e8eef8"
        ax.text(
            x[row],
            y[row],
            _node_text(columns, row, precision),
            ha="center",
            va="center",
            fontsize=size,
            zorder=2,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": colour, "edgecolor": "#555555"},
        )
    ax.set_xlim(-0.7, max(x.max(), 0.0) + 0.7)
    ax.set_ylim(y.min() - 0.5, 0.5)
    ax.set_axis_off()
    title = f"tree {tree_index} (round {int(tree_index) // int(booster.trees_per_round_)}"
    shown = int(columns["output"][0])
    title += f", output {shown})" if booster.n_outputs_ > 1 and shown >= 0 else ")"
    ax.set_title(title)
    return ax

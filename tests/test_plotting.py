"""Tests of ``jaxboost.frontends.fitted.plotting``: each plot returns the Axes it drew, with the
expected bars, lines or contours, and saves to a PNG."""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt

import jaxboost  # (configures the CPU devices before JAX starts)
from jaxboost import Booster, losses
from jaxboost.frontends.fitted.inspection import feature_importances
from jaxboost.frontends.fitted.plotting import (
    plot_importance,
    plot_learning_curve,
    plot_partial_dependence,
)


def _data(seed=0, n_rows=400, n_features=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] + 0.1 * rng.normal(size=n_rows)
    return X, y.astype(np.float32)


@pytest.fixture(scope="module")
def model():
    X, y = _data()
    fitted = Booster(loss=losses.squared_error, n_estimators=20, max_depth=3).fit(X, y)
    return fitted, X


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _saved(ax, path) -> bool:
    ax.figure.savefig(path)
    return path.exists() and path.stat().st_size > 0


def test_plot_importance_draws_one_bar_per_used_feature(model, tmp_path):
    fitted, _ = model
    used = int(np.count_nonzero(feature_importances(fitted.forest_, 4, "split")))
    ax = plot_importance(fitted, importance_type="split")
    assert isinstance(ax, matplotlib.axes.Axes)
    assert len(ax.patches) == used
    assert _saved(ax, tmp_path / "importance.png")
    ax = plot_importance(fitted, max_features=2)
    assert len(ax.patches) == 2
    # bars are sorted: the largest importance is drawn on top
    widths = [patch.get_width() for patch in sorted(ax.patches, key=lambda p: -p.get_y())]
    assert widths == sorted(widths, reverse=True)


def test_plot_importance_labels_with_feature_names(model):
    fitted, _ = model
    fitted.feature_names_in_ = np.array(["a", "b", "c", "d"])
    try:
        _, ax = plt.subplots()
        assert plot_importance(fitted, ax=ax) is ax
        labels = {tick.get_text() for tick in ax.get_yticklabels()}
        assert labels <= {"a", "b", "c", "d"} and "a" in labels
        ax = plot_partial_dependence(fitted, _data()[0], "b")
        assert ax.get_xlabel() == "b"
    finally:
        del fitted.feature_names_in_


def test_plot_learning_curve_draws_train_and_eval_curves(model, tmp_path):
    fitted, _ = model
    ax = plot_learning_curve(fitted)
    assert isinstance(ax, matplotlib.axes.Axes)
    assert len(ax.get_lines()) == 1
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), fitted.train_loss_)
    n_rounds = fitted.train_loss_.size - 1
    fitted.evals_result_ = {
        "valid_0": {"l2": list(np.linspace(2, 1, n_rounds)), "l1": list(np.ones(n_rounds))},
        "valid_1": {"l2": list(np.linspace(3, 1, n_rounds + 1))},
    }
    try:
        ax = plot_learning_curve(fitted)
    finally:
        del fitted.evals_result_
    lines = ax.get_lines()
    assert len(lines) == 4
    assert lines[1].get_xdata()[0] == 1 and lines[3].get_xdata()[0] == 0
    assert _saved(ax, tmp_path / "curve.png")


def test_plot_partial_dependence_one_feature_is_a_line(model, tmp_path):
    fitted, X = model
    ax = plot_partial_dependence(fitted, X, 0, grid_resolution=10)
    assert isinstance(ax, matplotlib.axes.Axes)
    assert len(ax.get_lines()) == 1 and ax.get_lines()[0].get_xdata().size == 10
    assert _saved(ax, tmp_path / "pd1.png")


def test_plot_partial_dependence_two_features_is_a_contour(model, tmp_path):
    fitted, X = model
    ax = plot_partial_dependence(fitted, X, [0, 1], grid_resolution=8)
    assert isinstance(ax, matplotlib.axes.Axes)
    assert len(ax.get_lines()) == 0 and len(ax.collections) >= 1
    assert _saved(ax, tmp_path / "pd2.png")
    with pytest.raises(ValueError, match="features"):
        plot_partial_dependence(fitted, X, [0, 1, 2])
    with pytest.raises(ValueError, match="features"):
        plot_partial_dependence(fitted, X, 7)


def test_plot_partial_dependence_draws_a_line_per_output():
    X, _ = _data(seed=1)
    labels = (X[:, 0] > 0).astype(np.float32) + (X[:, 1] > 0.5)
    fitted = Booster(loss=losses.softmax_cross_entropy, n_estimators=20, max_depth=1).fit(X, labels)
    ax = plot_partial_dependence(fitted, X, 1, grid_resolution=6)
    assert len(ax.get_lines()) == 3


def test_an_estimator_is_plotted_as_its_booster(model):
    pytest.importorskip("sklearn")
    fitted, X = model
    regressor = jaxboost.Regressor(n_estimators=20, max_depth=3).fit(X, fitted.predict(X))
    booster = regressor.booster_
    widths = [patch.get_width() for patch in plot_importance(regressor).patches]
    assert widths == [patch.get_width() for patch in plot_importance(booster).patches]
    np.testing.assert_array_equal(
        plot_learning_curve(regressor).get_lines()[0].get_ydata(), booster.train_loss_
    )
    line = plot_partial_dependence(regressor, X, 0, grid_resolution=5).get_lines()[0]
    np.testing.assert_array_equal(line.get_ydata(), booster.partial_dependence(X, 0, 5)[1][:, 0])


def test_plotting_an_unfitted_model_fails_clearly():
    with pytest.raises(RuntimeError, match="not fitted"):
        plot_importance(Booster())

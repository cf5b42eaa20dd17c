"""Plots of a fitted model (`jaxboost.plotting`): feature importances,
learning curves, partial dependence, a distribution loss's calibration
(PIT histogram, quantile calibration), SHAP values (summary, dependence)
and a tree; and a tree as text or JSON, every tree as a table
(`dump_tree`, `trees_to_dataframe`: no matplotlib needed).

matplotlib is optional (the ``plot`` extra); it is imported when a plot is
drawn.  Every function draws on ``ax`` (a new figure's axes when None) and
returns the axes.
"""

from .frontends.fitted.explain_plots import plot_shap_dependence, plot_shap_summary, plot_tree
from .frontends.fitted.plotting import (
    plot_calibration,
    plot_importance,
    plot_learning_curve,
    plot_partial_dependence,
    plot_pit,
)
from .frontends.fitted.tree_dump import dump_tree, trees_to_dataframe

__all__ = [
    "dump_tree",
    "plot_calibration",
    "plot_importance",
    "plot_learning_curve",
    "plot_partial_dependence",
    "plot_pit",
    "plot_shap_dependence",
    "plot_shap_summary",
    "plot_tree",
    "trees_to_dataframe",
]

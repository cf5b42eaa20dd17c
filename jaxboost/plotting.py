"""Plots of a fitted model (`jaxboost.plotting`): feature importances,
learning curves, partial dependence.

matplotlib is optional (the ``plot`` extra); it is imported when a plot is
drawn.  Every function draws on ``ax`` (a new figure's axes when None) and
returns the axes.
"""

from .frontends.plotting import plot_importance, plot_learning_curve, plot_partial_dependence

__all__ = ["plot_importance", "plot_learning_curve", "plot_partial_dependence"]

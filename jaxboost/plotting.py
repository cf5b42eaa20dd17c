"""Plots of a fitted model (`jaxboost.plotting`): feature importances,
learning curves, partial dependence, and a distribution loss's calibration
(PIT histogram, quantile calibration).

matplotlib is optional (the ``plot`` extra); it is imported when a plot is
drawn.  Every function draws on ``ax`` (a new figure's axes when None) and
returns the axes.
"""

from .frontends.plotting import (
    plot_calibration,
    plot_importance,
    plot_learning_curve,
    plot_partial_dependence,
    plot_pit,
)

__all__ = [
    "plot_calibration",
    "plot_importance",
    "plot_learning_curve",
    "plot_partial_dependence",
    "plot_pit",
]

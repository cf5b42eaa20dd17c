"""The defaults of ``reg_lambda`` and ``min_child_weight`` left at None,
measured in the loss's hessian, and the warnings where the given ones (or
the weights) make the trees barely fit.

A Fisher-scored fit (a distribution's likelihood) measures ``reg_lambda``
as `DISTRIBUTION_PRIOR_ROWS` rows' information
(`jaxboost.engine.fisher.information_per_row`): on a leaf of ``n`` rows the
step shrinks by ``n / (n + 5)``, much on the small leaves where a
distribution's scale overfits, little on the hundreds-of-rows leaves of
large data (its rounds are chosen on held-out rows:
`jaxboost.frontends.training.holdout`).  Otherwise ``reg_lambda`` is XGBoost's 1,
but for a loss not from the catalogue at most `POINT_PRIOR_ROWS` rows'
hessian at the initial score.
"""

from __future__ import annotations

import numpy as np

# reg_lambda of a Fisher-scored fit left at None: a prior worth 5 rows
DISTRIBUTION_PRIOR_ROWS = 5.0
# reg_lambda left at None otherwise: 1 (XGBoost's), but for a loss not from
# the catalogue at most the hessian of this many rows at the initial score.
# 1 is worth 1 row of squared error, 4 of a balanced log loss, 100 of a log
# loss of 1% positives or a Poisson mean of 0.01: those keep 1; a loss of
# hessian 1e-4 per row (a relative error on targets near 100) would
# otherwise carry a prior of 10^4 rows and barely train
POINT_REG_LAMBDA = 1.0
POINT_PRIOR_ROWS = 100.0
# min_child_weight left at None: 1e-3, scaled as reg_lambda's default is
# (POINT_REG_LAMBDA to POINT_PRIOR_ROWS rows' hessian): a tenth of a row's
POINT_MIN_CHILD_WEIGHT = 1e-3


def resolved_reg_lambda(
    setting: float | None, hessian: str, mean_hessian: float = float("nan")
) -> float:
    """``reg_lambda`` as given, or for None its default: `DISTRIBUTION_PRIOR_ROWS`
    where the engine's ``hessian`` is ``"fisher"``, else `POINT_REG_LAMBDA`,
    at most `POINT_PRIOR_ROWS` times ``mean_hessian`` (the rows' mean
    weighted hessian at the initial score, of the output where it is
    smallest; NaN: not measured)."""
    if setting is not None:
        return setting
    if hessian == "fisher":
        return DISTRIBUTION_PRIOR_ROWS
    if np.isfinite(mean_hessian) and mean_hessian > 0:
        return min(POINT_REG_LAMBDA, POINT_PRIOR_ROWS * mean_hessian)
    return POINT_REG_LAMBDA


def resolved_min_child_weight(setting: float | None, mean_hessian: float = float("nan")) -> float:
    """``min_child_weight`` as given, or for None `POINT_MIN_CHILD_WEIGHT`
    scaled as `resolved_reg_lambda` scales `POINT_REG_LAMBDA` outside
    Fisher scoring: at most a tenth of ``mean_hessian`` (NaN: not measured)."""
    if setting is not None:
        return setting
    scale = resolved_reg_lambda(None, "", mean_hessian) / POINT_REG_LAMBDA
    return POINT_MIN_CHILD_WEIGHT * scale


def small_hessian_message(
    mean_hessian: float,
    reg_lambda: float,
    min_child_weight: float,
    output: str = "",
    weight_given: bool = False,
) -> str:
    """The warning of a default ``reg_lambda`` and ``min_child_weight``
    measured against a small ``mean_hessian`` (of the ``output`` named,
    where the loss has several): it names both, the values taken (a
    ``min_child_weight`` given, ``weight_given``, as what it asks for) and
    the way out."""
    message = (
        f"reg_lambda: the loss's mean hessian{output} at the initial score is "
        f"{mean_hessian:.3g} per row, so reg_lambda={POINT_REG_LAMBDA:g} would weigh as much "
        f"as {POINT_REG_LAMBDA / mean_hessian:.3g} rows"
    )
    if not weight_given:
        message += (
            f" and min_child_weight={POINT_MIN_CHILD_WEIGHT:g} ask for "
            f"{POINT_MIN_CHILD_WEIGHT / mean_hessian:.3g} rows per child; the defaults take "
            f"the hessian of {POINT_PRIOR_ROWS:g} rows, reg_lambda={reg_lambda:.3g}, and of "
            f"{POINT_MIN_CHILD_WEIGHT * POINT_PRIOR_ROWS:g} rows, "
            f"min_child_weight={min_child_weight:.3g}"
        )
    else:
        message += (
            f"; the default takes the hessian of {POINT_PRIOR_ROWS:g} rows, "
            f"reg_lambda={reg_lambda:.3g}; min_child_weight={min_child_weight:g} asks for "
            f"{min_child_weight / mean_hessian:.3g} rows per child"
        )
    return message + (
        ". Pass reg_lambda and min_child_weight to set them in hessian units (XGBoost's)"
    )


def heavy_min_child_weight_message(min_child_weight: float, hessian_sum: float, output: str = ""):
    """The warning of a ``min_child_weight`` given above half ``hessian_sum``,
    the loss's hessian summed over every row at the initial score (of the
    ``output`` named): no node can split in round 1, each child needing it;
    None where it is not."""
    if not (np.isfinite(hessian_sum) and 2 * min_child_weight > hessian_sum):
        return None
    return (
        f"min_child_weight: {min_child_weight:g} is more than half the loss's hessian summed "
        f"over every row at the initial score{output}, {hessian_sum:.3g}: each child of a "
        "split needs min_child_weight, so the first tree cannot split. It is a hessian sum "
        "(XGBoost's units): lower it, or leave it None (scaled to the loss's hessian)"
    )


def mean_positive_weight(weight: np.ndarray) -> float:
    """The mean of the positive entries of ``weight`` (NaN: none)."""
    positive = weight[weight > 0]
    return float(np.mean(positive, dtype=np.float64)) if positive.size else float("nan")


def small_weight_message(
    mean_weight: float, reg_lambda: float, min_child_weight: float
) -> str | None:
    """The warning of ``sample_weight`` so small (``mean_weight``, the rows'
    mean positive weight) that ``reg_lambda`` or ``min_child_weight`` (sums
    of weighted hessians, XGBoost's units) weigh as more than
    `POINT_PRIOR_ROWS` rows of unit weight: the trees barely fit (diabetes'
    squared error, weights 1e-6: the constant's error), as in XGBoost and
    LightGBM.  None where the weights are large enough (or NaN)."""
    if not mean_weight > 0:
        return None
    rows = max(reg_lambda, min_child_weight) / mean_weight
    if not rows > POINT_PRIOR_ROWS * 1.001:  # (float32 weights of 1e-2 round below it)
        return None
    return (
        f"sample_weight: the rows' mean positive weight is {mean_weight:.3g}, and "
        f"reg_lambda={reg_lambda:.3g} and min_child_weight={min_child_weight:.3g} are sums of "
        f"weighted hessians: they weigh as much as {reg_lambda / mean_weight:.3g} and "
        f"{min_child_weight / mean_weight:.3g} rows, and the trees barely fit. Scale the "
        "weights up (e.g. sample_weight / sample_weight.mean()): their scale does not change "
        "the loss's minimiser, only how reg_lambda and min_child_weight weigh"
    )

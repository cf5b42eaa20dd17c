"""Evaluation metrics on raw scores, by catalogue name or as a plain JAX function.

A metric maps ``(y, raw, weight) -> scalar`` over a whole evaluation set, with
``raw`` the ``(n_rows, K)`` raw scores.  A plain function ``metric(y, f)`` of one
sample (the same signature as a loss) is averaged with the sample weights.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import losses as loss_catalogue
from ..losses.distribution_loss import as_distribution_loss
from ..losses.metadata import metadata_of
from ..runtime.lifted_values import bound
from ..runtime.program_cache import without_values
from ..runtime.workarounds import vector_output_compiler_options
from .derivatives import sample_loss
from .group_metrics import concordance_index, map_at, ndcg_at
from .groups import group_count, loss_sum
from .scoring_rules import crps_of


class Metric(NamedTuple):
    name: str
    fn: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]  # (y, raw (n, K), weight)
    greater_is_better: bool = False
    # the models it measures: "one" output (regression, binary), "several"
    # (classes), or "any" (a per-sample function, checked on the shapes)
    outputs: str = "any"
    # a per-sample metric's function of one sample, else None
    per_sample: Callable | None = None
    # the targets it measures, a key of losses' TARGET_DOMAINS; None: the
    # per-sample function's declared target_domain, else "any"
    target_domain: str | None = None
    # a metric of query groups: its function of one group, fn(y, f, mask)
    # (jaxboost.engine.groups), averaged over the set's groups; fn unused
    per_group: Callable | None = None


def _weighted_mean(values: jax.Array, weight: jax.Array) -> jax.Array:
    return jnp.sum(values * weight) / jnp.sum(weight)


@functools.lru_cache(maxsize=256)
def per_sample(name: str, fn: Callable) -> Metric:
    """A metric that averages ``fn(y, f)`` of one sample with the sample weights
    (cached, so the same function gives the same, already compiled, metric)."""

    def metric(y, raw, weight):
        return _weighted_mean(sample_loss(fn, y, raw), weight)

    return Metric(name, metric, per_sample=fn)


def metric(fn: Callable, *, name: str | None = None, greater_is_better: bool = False) -> Metric:
    """An evaluation metric from a plain function ``fn(y, f)`` of one sample,
    averaged with the sample weights (as ``eval_metric=fn`` is), or from a
    function ``fn(y, f, mask)`` of one group declared ``per="group"``,
    averaged over the set's groups.

    Args:
      fn: ``fn(y, f) -> scalar`` for one sample, as a loss (or of one group).
      name: its key in ``evals_result_`` (default: the function's name).
      greater_is_better: a score to maximise (accuracy, say), so that early
        stopping keeps the round where it is highest; a plain function given
        as ``eval_metric`` is minimised.
    """
    if not callable(fn):
        raise TypeError(f"metric: expected a function fn(y, f) of one sample, got {fn!r}")
    name = name or getattr(fn, "__name__", "metric")
    if metadata_of(fn).per == "group":  # fn(y, f, mask) of one query group
        return group_metric(name, fn, bool(greater_is_better))
    named = per_sample(name, fn)
    return named._replace(greater_is_better=bool(greater_is_better))


def _by_group(y, raw, weight):
    raise TypeError("a group metric is evaluated by metric_per_round, on groups")


def group_metric(name: str, fn: Callable, greater_is_better: bool = False, **fields) -> Metric:
    """A metric averaging ``fn(y, f, mask)`` of one group over a set's groups."""
    return Metric(name, _by_group, greater_is_better, outputs="one", per_group=fn, **fields)


def _rmse(y, raw, weight):
    return jnp.sqrt(_weighted_mean((raw[:, 0] - y) ** 2, weight))


def _mae(y, raw, weight):
    return _weighted_mean(jnp.abs(raw[:, 0] - y), weight)


def _binary_error(y, raw, weight):
    return _weighted_mean(((raw[:, 0] > 0) != (y > 0.5)).astype(jnp.float32), weight)


def _multiclass_error(y, raw, weight):
    return _weighted_mean(
        (jnp.argmax(raw, axis=1) != y.astype(jnp.int32)).astype(jnp.float32), weight
    )


def auc(y, raw, weight):
    """Weighted area under the ROC curve of ``raw[:, 0]`` for labels ``y > 0.5``;
    tied scores count one half."""
    score = raw[:, 0]
    positive = y > 0.5
    negative_weight = jnp.where(positive, 0.0, weight)
    order = jnp.argsort(score)
    sorted_score = score[order]
    cumulative = jnp.concatenate([jnp.zeros(1), jnp.cumsum(negative_weight[order])])
    below = cumulative[jnp.searchsorted(sorted_score, score, side="left")]
    at_or_below = cumulative[jnp.searchsorted(sorted_score, score, side="right")]
    credit = below + 0.5 * (at_or_below - below)
    positive_weight = jnp.where(positive, weight, 0.0)
    pairs = jnp.sum(positive_weight) * jnp.sum(negative_weight)
    return jnp.sum(positive_weight * credit) / pairs


_NAMED = {
    "rmse": Metric("rmse", _rmse, outputs="one"),
    "mae": Metric("mae", _mae, outputs="one"),
    "logloss": per_sample("logloss", loss_catalogue.binary_logloss)._replace(outputs="one"),
    "error": Metric("error", _binary_error, outputs="one", target_domain="probability"),
    "auc": Metric("auc", auc, greater_is_better=True, outputs="one", target_domain="probability"),
    "mlogloss": per_sample("mlogloss", loss_catalogue.softmax_cross_entropy)._replace(
        outputs="several"
    ),
    "merror": Metric("merror", _multiclass_error, outputs="several", target_domain="class"),
    "cindex": Metric("cindex", concordance_index, greater_is_better=True, outputs="one"),
}


# scores of a predicted distribution, for distribution losses
_DISTRIBUTION_METRICS = ("nll", "crps")


@functools.lru_cache(maxsize=64)
def distribution_metric(name: str, training_loss: Callable) -> Metric:
    """``"nll"`` (the full negative log-likelihood, constants included) or
    ``"crps"`` (`jaxboost.engine.scoring_rules`) of the distribution a
    distribution loss predicts (cached: one loss, one compiled metric)."""
    loss = as_distribution_loss(training_loss)
    if loss is None:
        name_of_loss = metadata_of(training_loss).name
        raise ValueError(
            f"eval_metric {name!r}: scores a predicted distribution, and the loss "
            f"{name_of_loss!r} is not one; train with losses.distribution(...) (e.g. "
            "loss='distribution:normal') or gaussian_nll, or pick another metric"
        )
    if name == "nll":
        return per_sample("nll", loss)
    if loss.censored:
        raise ValueError(
            "eval_metric 'crps': the CRPS of right-censored targets is not defined here; "
            "use 'nll', the censored likelihood"
        )
    crps = crps_of(loss)

    def mean_crps(y, raw, weight):
        # (a row of weight 0, padding included, counts nothing even where its
        # CRPS is infinite: a Student-t's at df <= 1)
        return jnp.sum(jnp.where(weight > 0, crps(y, raw) * weight, 0.0)) / jnp.sum(weight)

    return Metric("crps", mean_crps, target_domain=loss.target_domain)


# ranking metrics of query groups: "ndcg", "ndcg@5", "map", "map@10"
_RANK_METRIC = re.compile(r"(ndcg|map)(@[1-9][0-9]*)?")


@functools.lru_cache(maxsize=64)
def _rank_metric(name: str) -> Metric:
    """``"ndcg@k"`` / ``"map@k"`` (no ``@k``: every row of a group) as a
    group metric (cached: one name, one compiled metric)."""
    kind, _, k = name.partition("@")
    make = ndcg_at if kind == "ndcg" else map_at
    return group_metric(name, make(int(k) if k else None), True, target_domain="class")


def resolve_metric(metric: str | Callable | Metric, training_loss: Callable) -> Metric:
    """A `Metric` from a name (``"loss"`` is the training loss, ``"nll"`` and
    ``"crps"`` score the distribution a distribution loss predicts; other
    names: the metrics above, then the loss catalogue), a plain per-sample
    function, or a Metric."""
    if isinstance(metric, Metric):
        return metric
    if isinstance(metric, str):
        if metric == "loss":
            if metadata_of(training_loss).per == "group":
                return group_metric("loss", training_loss)
            return per_sample("loss", training_loss)
        if metric in _DISTRIBUTION_METRICS:
            return distribution_metric(metric, training_loss)
        if _RANK_METRIC.fullmatch(metric):
            return _rank_metric(metric)
        if metric in _NAMED:
            return _NAMED[metric]
        try:
            return per_sample(metric, loss_catalogue.get(metric))
        except ValueError:
            known = ["loss", *sorted(_NAMED), *_DISTRIBUTION_METRICS, "ndcg@k", "map@k"]
            raise ValueError(
                f"eval_metric: unknown metric {metric!r}; expected one of {known}, a loss "
                "catalogue name, or a function metric(y, f) of one sample"
            ) from None
    if callable(metric):
        if metadata_of(metric).per == "group":  # declared per="group": of groups
            return group_metric(getattr(metric, "__name__", "metric"), metric)
        return per_sample(getattr(metric, "__name__", "metric"), metric)
    raise TypeError(f"eval_metric: expected a name or a callable, got {metric!r}")


def metric_per_round(
    metric: Metric, y: jax.Array, staged_raw: jax.Array, weight: jax.Array, groups=()
):
    """The metric after every round.

    Args:
      staged_raw: ``(n_rounds, n_rows, K)`` raw scores after each round.
      groups: the set's group tables (`jaxboost.engine.groups.GroupBucket`),
        which a group metric needs.
    Returns:
      ``(n_rounds,)`` float32.
    """
    if metric.per_group is not None and not groups:
        raise ValueError(f"eval_metric {metric.name!r}: needs the evaluation set's groups")
    program = _metric_program(staged_raw.shape[-1] > 1, jax.default_backend())
    metric, values = _without_values(metric)
    return program(metric, values, y, staged_raw, weight, groups)


def _without_values(metric: Metric) -> tuple[Metric, tuple]:
    """``metric`` with its function's structure in the function's place,
    and the function's lifted values (`jaxboost.runtime.lifted_values`: the
    program then serves every value); itself and ``()`` where it has none."""
    if metric.per_group is not None:
        structure, values = without_values(metric.per_group)
        if values is None:
            return metric, ()
        return metric._replace(per_group=structure), values
    if metric.per_sample is None:
        return metric, ()
    structure, values = without_values(metric.per_sample)
    if values is None:
        return metric, ()
    return metric._replace(fn=per_sample(metric.name, structure).fn, per_sample=structure), values


def _metric_per_round(metric: Metric, values: tuple, y, staged_raw, weight, groups):
    function = metric.per_group if metric.per_group is not None else metric.per_sample
    with bound(function, values):
        if metric.per_group is not None:
            count = group_count(groups)
            return jax.vmap(lambda raw: loss_sum(metric.per_group, y, raw, groups) / count)(
                staged_raw
            )
        return jax.vmap(lambda raw: metric.fn(y, raw, weight))(staged_raw)


@functools.cache
def _metric_program(vector: bool, platform: str) -> Callable:
    """The jitted `_metric_per_round` for rows of vector outputs or not,
    on devices of ``platform`` (the default ones, where the monitor evaluates):
    vector outputs' metrics (a softmax's sum over classes) compile with the
    options of `jaxboost.runtime.workarounds` (a 10-class log loss over 100
    rounds of 20k rows: 82 -> 15 ms)."""
    options = vector_output_compiler_options(platform) if vector else None
    return jax.jit(_metric_per_round, static_argnames="metric", compiler_options=options)

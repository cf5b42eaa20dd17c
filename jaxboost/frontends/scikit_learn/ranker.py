"""``Ranker``: the scikit-learn estimator for group losses (learning to rank,
and any loss of a query group), as LightGBM's ``LGBMRanker`` and XGBoost's
``XGBRanker`` are."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import column_or_1d

from ... import losses as loss_catalogue
from ...engine.group_metrics import ndcg_at
from ...engine.groups import GroupBucket, group_count, loss_sum
from ...losses.metadata import metadata_of
from ..data.grouping import check_group_weights, grouped_rows, is_group_loss, place_groups
from ..data.validation import as_weights
from ..settings.settings_table import RANKER, takes_settings
from ..training.loss_checks import target_problem
from .estimators import _BoosterEstimator

# NDCG over every row of a query (LightGBM's "ndcg" without @k): Ranker.score
_NDCG = ndcg_at(None)


@takes_settings(RANKER)
class Ranker(_BoosterEstimator, BaseEstimator):
    """Gradient-boosted trees ranker for any group loss.

    Args:
      (the settings of `jaxboost.frontends.settings.settings_table`: each with its
      default and meaning in ``help(Ranker)`` and the API reference)

    ``fit(X, y, group=sizes)`` or ``fit(X, y, qid=ids)``; evaluation sets
    take ``eval_group`` or ``eval_qid``, and ``eval_metric="ndcg@10"``.  A
    model fitted with offsets (``init_score=``) takes them again in
    ``predict``, ``staged_predict`` and ``score``.

    ``score(X, y, group=..., qid=...)`` is the mean NDCG over the queries (every
    row of each), so that scikit-learn's searches need no scorer: with
    metadata routing on, ``set_fit_request(qid=True)`` and
    ``set_score_request(qid=True)`` pass each split's ``qid`` to both.

    Fitted attributes: ``booster_``, ``n_features_in_``, ``feature_names_in_``
    (DataFrame input), ``n_estimators_``, ``feature_importances_``,
    ``evals_result_``, ``best_iteration_``, ``best_score_``, ``categories_``
    (the categorical columns' categories and codes, None without any).
    """

    def fit(
        self,
        X: Any,
        y: Any,
        group: Any = None,
        qid: Any = None,
        sample_weight: Any = None,
        **fit_params: Any,
    ) -> Ranker:
        """Fit on ``X (n_rows, n_features)`` (NaN for missing), relevance
        grades ``y (n_rows,)`` and the queries, as ``group`` sizes of
        consecutive rows or ``qid`` ids (rows in any order), each query
        weighted by ``sample_weight`` ``(n_rows,)`` (the same on every row of
        a query); ``fit_params`` go to ``Booster.fit``.  Returns ``self``."""
        loss = loss_catalogue.resolve(self.loss, self.loss_params)
        if not is_group_loss(loss):
            name = metadata_of(loss).name
            raise ValueError(
                f"loss: Ranker takes a group loss (losses.lambdarank(), losses.listnet, ...); "
                f"{name!r} is a function of one sample: use Regressor for it"
            )
        if group is None and qid is None:
            raise ValueError("group, qid: Ranker needs the queries (group sizes or qid ids)")
        _, y = self._checked_X(X, reset=True, y=y, y_numeric=True)
        fit_params = self._eval_fit_params(fit_params, _eval_relevance, X)
        self._fit_booster(
            X,
            np.asarray(y, np.float32),
            sample_weight,
            loss,
            None,
            {**fit_params, "group": group, "qid": qid},
        )
        return self

    def predict(self, X: Any, init_score: Any = None, pred_contrib: bool = False) -> np.ndarray:
        """``(n_rows,)`` float64 scores: within a query, higher ranks first;
        plus the rows' offsets ``init_score`` ``(n_rows,)``, as in ``fit``
        (a model fitted with them ranks by offsets and trees together).
        ``pred_contrib=True`` (LightGBM's): their SHAP values instead,
        ``(n_rows, n_features + 1)``, the expected value last (docs/explain.md)."""
        if pred_contrib:
            return self._contributions(X, init_score)
        return self._raw(X, init_score)

    def staged_predict(self, X: Any, init_score: Any = None) -> Iterator[np.ndarray]:
        """`predict` after each boosting round."""
        yield from self._staged_raw(X, init_score)

    def score(
        self,
        X: Any,
        y: Any,
        group: Any = None,
        qid: Any = None,
        sample_weight: Any = None,
        init_score: Any = None,
    ) -> float:
        """Mean NDCG of `predict` over the queries, every row of each
        (LightGBM's ``ndcg`` without ``@k``: gain ``2^y - 1``, a query whose
        labels are all 0 scores 1), each query weighted by ``sample_weight``
        ``(n_rows,)`` (the same on every row of a query; default 1).

        ``X (n_rows, n_features)``, relevance labels ``y (n_rows,)`` (>= 0),
        the queries as ``group`` sizes or ``qid`` ids, and the rows' offsets
        ``init_score``, as in `fit`.  Raises a ValueError naming the argument
        for missing queries or bad labels or weights."""
        raw = self.predict(X, init_score)
        labels = column_or_1d(np.asarray(y, np.float32))
        if labels.shape != raw.shape or not np.all(np.isfinite(labels)):
            raise ValueError(
                f"y: expected {raw.shape[0]} finite relevance labels, one per row of X, got "
                f"shape {labels.shape}"
            )
        problem = target_problem(loss_catalogue.TARGET_DOMAINS["relevance"], labels)
        if problem is not None:
            raise ValueError(f"y: score (NDCG) needs targets {problem}")
        groups = grouped_rows(group, qid, labels.shape[0])
        if groups is None:
            raise ValueError(
                "group, qid: score needs the queries (NDCG is measured within each); in a "
                "scikit-learn search turn metadata routing on "
                "(sklearn.set_config(enable_metadata_routing=True)) and request qid: "
                "Ranker().set_fit_request(qid=True).set_score_request(qid=True), then "
                "search.fit(X, y, qid=qid, groups=qid) with a GroupKFold"
            )
        weight = as_weights(sample_weight, labels.shape[0])
        check_group_weights(groups, weight)
        placement = place_groups(groups, 1, weight)
        order = placement.gather
        return float(_mean_ndcg(labels[order], raw[order, None], placement.buckets))


def _eval_relevance(y: Any, name: str) -> np.ndarray:
    """An evaluation set's relevance labels as float32 (named ``name``)."""
    try:
        return np.asarray(y, np.float32)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: expected numeric relevance labels ({error})") from None


@jax.jit
def _mean_ndcg(y: jax.Array, raw: jax.Array, buckets: tuple[GroupBucket, ...]) -> jax.Array:
    """The weighted mean NDCG over the groups of ``buckets``; ``y (n,)`` and
    ``raw (n, 1)`` in the placement's row order."""
    return loss_sum(_NDCG, y, raw.astype(np.float32), buckets) / group_count(buckets)

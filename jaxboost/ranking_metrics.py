"""Ranking metrics of one query group and the concordance index of survival
times, under their public names (`jaxboost.ranking_metrics`).

`ndcg_at` and `map_at` build a metric ``(y, f, mask) -> scalar`` of one query
group padded to ``m`` rows (``jax.vmap`` it over a batch of groups);
`concordance_index` measures a whole evaluation set of ``(time, event)``
targets.  As ``eval_metric`` they are named ``"ndcg@k"``, ``"map@k"`` and
``"cindex"``.
"""

from .engine.group_metrics import concordance_index, map_at, ndcg_at

__all__ = ["concordance_index", "map_at", "ndcg_at"]

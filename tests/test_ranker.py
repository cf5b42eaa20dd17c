"""The scikit-learn Ranker: a Booster with a group loss, the sklearn way."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone

import jaxboost as jb
from jaxboost import losses


def _queries(n_queries=40, seed=0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 25, size=n_queries)
    n = int(sizes.sum())
    X = rng.normal(size=(n, 5)).astype(np.float32)
    relevance = np.clip(np.round(X[:, 0] + 0.3 * rng.normal(size=n) + 1), 0, 3)
    return X, relevance.astype(np.float32), sizes


def test_the_ranker_is_the_booster_with_its_group_loss():
    X, y, sizes = _queries()
    ranker = jb.Ranker(n_estimators=15, max_depth=3).fit(X, y, group=sizes)
    booster = jb.Booster(loss=losses.lambdarank(), n_estimators=15, max_depth=3)
    booster.fit(X, y, group=sizes)
    np.testing.assert_array_equal(ranker.predict(X), booster.predict_raw(X))
    assert ranker.n_features_in_ == 5 and ranker.feature_importances_.shape == (5,)
    staged = list(ranker.staged_predict(X))
    assert len(staged) == 15
    np.testing.assert_allclose(staged[-1], ranker.predict(X), rtol=1e-5, atol=1e-6)
    # query weights reach the booster
    weight = np.repeat(np.random.default_rng(1).uniform(0.5, 2.0, sizes.size), sizes)
    weighted = jb.Ranker(n_estimators=15, max_depth=3).fit(X, y, group=sizes, sample_weight=weight)
    booster.fit(X, y, weight, group=sizes)
    np.testing.assert_array_equal(weighted.predict(X), booster.predict_raw(X))
    assert not np.array_equal(weighted.predict(X), ranker.predict(X))


def test_the_ranker_takes_qid_eval_sets_and_early_stopping_and_pickles():
    X, y, sizes = _queries()
    Xv, yv, sizes_v = _queries(15, seed=1)
    qid = np.repeat(np.arange(sizes.size), sizes)
    order = np.random.default_rng(2).permutation(y.size)  # rows in any order
    ranker = jb.Ranker(loss="listnet", n_estimators=40, max_depth=3)
    ranker.fit(
        X[order],
        y[order],
        qid=qid[order],
        eval_set=[(Xv, yv)],
        eval_group=[sizes_v],
        eval_metric="ndcg@5",
        early_stopping_rounds=5,
    )
    assert ranker.best_iteration_ is not None
    assert ranker.best_score_ == max(ranker.evals_result_["validation_0"]["ndcg@5"])
    twin = pickle.loads(pickle.dumps(ranker))
    np.testing.assert_array_equal(twin.predict(Xv), ranker.predict(Xv))
    fresh = clone(ranker)
    assert fresh.get_params()["loss"] == "listnet" and not hasattr(fresh, "booster_")


def test_the_ranker_refuses_a_per_sample_loss_and_missing_queries():
    X, y, sizes = _queries(5)
    with pytest.raises(ValueError, match="Ranker takes a group loss"):
        jb.Ranker(loss="squared_error").fit(X, y, group=sizes)
    with pytest.raises(ValueError, match="Ranker needs the queries"):
        jb.Ranker().fit(X, y)

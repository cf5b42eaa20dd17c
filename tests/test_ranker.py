"""The scikit-learn Ranker: a Booster with a group loss, the sklearn way."""

import pickle

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.metrics import ndcg_score
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_val_score

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


def test_the_ranker_takes_the_row_constraints_a_group_loss_fit_reads():
    # LGBMRanker's min_child_samples and constraints: Ranker refused them
    # (TypeError) and fitted at min_child_samples=20 only
    X, y, sizes = _queries()
    settings = {
        "min_child_samples": 40,
        "monotone_constraints": [1, 0, 0, 0, 0],
        "interaction_constraints": [[0, 1], [2, 3, 4]],
    }
    ranker = jb.Ranker(n_estimators=5, max_depth=3, **settings).fit(X, y, group=sizes)
    booster = jb.Booster(loss=losses.lambdarank(), n_estimators=5, max_depth=3, **settings)
    booster.fit(X, y, group=sizes)
    np.testing.assert_array_equal(ranker.predict(X), booster.predict_raw(X))
    default = jb.Ranker(n_estimators=5, max_depth=3).fit(X, y, group=sizes)
    assert not np.array_equal(ranker.predict(X), default.predict(X))


def test_a_ranker_fitted_with_offsets_predicts_and_scores_with_them():
    # predict, staged_predict and score without the offsets ranked by the trees alone
    X, y, sizes = _queries()
    offset = 2.0 * X[:, 1]
    ranker = jb.Ranker(n_estimators=15, max_depth=3).fit(X, y, group=sizes, init_score=offset)
    booster = jb.Booster(loss=losses.lambdarank(), n_estimators=15, max_depth=3)
    booster.fit(X, y, group=sizes, init_score=offset)
    full = booster.predict_raw(X, init_score=offset)
    np.testing.assert_array_equal(ranker.predict(X, init_score=offset), full)
    staged = list(ranker.staged_predict(X, init_score=offset))
    np.testing.assert_allclose(staged[-1], full, rtol=1e-5, atol=1e-5)
    expected = _reference_ndcg(y, full, sizes, np.ones(sizes.size))
    got = ranker.score(X, y, group=sizes, init_score=offset)
    assert got == pytest.approx(expected, rel=1e-5)
    assert ranker.score(X, y, group=sizes) != pytest.approx(expected, rel=1e-3)


def test_the_default_reg_lambda_is_the_boosters_and_a_group_loss_takes_1():
    # (Ranker's default was 1.0 when Booster's became None: one default now)
    assert jb.Ranker().reg_lambda is jb.Booster().reg_lambda is None
    X, y, sizes = _queries()
    default = jb.Ranker(n_estimators=15, max_depth=3).fit(X, y, group=sizes)
    one = jb.Ranker(n_estimators=15, max_depth=3, reg_lambda=1.0).fit(X, y, group=sizes)
    np.testing.assert_array_equal(default.predict(X), one.predict(X))


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


def test_query_names_as_qid_group_rows_as_numbers_do():
    X, y, sizes = _queries()
    by_sizes = jb.Ranker(n_estimators=15, max_depth=3).fit(X, y, group=sizes)  # as above: cached
    names = np.repeat([f"query {i:02d}" for i in range(sizes.size)], sizes)
    by_names = jb.Ranker(n_estimators=15, max_depth=3).fit(X, y, qid=names)
    np.testing.assert_array_equal(by_names.predict(X), by_sizes.predict(X))
    order = np.random.default_rng(2).permutation(y.size)  # rows in any order
    numbers = np.repeat(np.arange(sizes.size), sizes)
    as_objects = names.astype(object)
    expected = by_sizes.score(X[order], y[order], qid=numbers[order])
    assert by_names.score(X[order], y[order], qid=as_objects[order]) == expected
    as_objects[5] = None  # a row without a query
    with pytest.raises(ValueError, match=r"qid: expected one group id per row.*pd.factorize"):
        by_names.score(X, y, qid=as_objects)


def test_the_ranker_refuses_a_per_sample_loss_and_missing_queries():
    X, y, sizes = _queries(5)
    with pytest.raises(ValueError, match="Ranker takes a group loss"):
        jb.Ranker(loss="squared_error").fit(X, y, group=sizes)
    with pytest.raises(ValueError, match="Ranker needs the queries"):
        jb.Ranker().fit(X, y)


def _reference_ndcg(y, scores, sizes, query_weight):
    """Mean NDCG over every row of each query by scikit-learn's ndcg_score on
    the gains 2^y - 1 (a query without relevant rows, or of one row, scores 1)."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    per_query = []
    for start, size in zip(starts, sizes):
        gains, query_scores = 2.0 ** y[start : start + size] - 1, scores[start : start + size]
        # tied scores rank in row order (LightGBM's stable sort): made distinct here
        rank = np.empty(size)
        rank[np.lexsort((np.arange(size), -query_scores))] = np.arange(size)
        relevant = size > 1 and gains.max() > 0
        per_query.append(ndcg_score([gains], [-rank]) if relevant else 1.0)
    return np.average(per_query, weights=query_weight)


def test_score_is_the_mean_ndcg_over_queries():
    X, y, sizes = _queries()
    ranker = jb.Ranker(n_estimators=15, max_depth=3).fit(X, y, group=sizes)  # as above: cached
    # scored on other labels and queries: one without relevant rows (it scores 1), one of one row
    y = y.copy()
    y[sizes[0] : sizes[0] + sizes[1]] = 0.0
    sizes = np.concatenate([[1, sizes[0] - 1], sizes[1:]])
    scores = ranker.predict(X)
    expected = _reference_ndcg(y, scores, sizes, np.ones(sizes.size))
    assert ranker.score(X, y, group=sizes) == pytest.approx(expected, rel=1e-5)
    qid = np.repeat(np.arange(sizes.size), sizes)
    order = np.random.default_rng(3).permutation(y.size)  # rows in any order
    grouped = order[np.argsort(qid[order], kind="stable")]  # ties: rows in their given order
    by_qid = _reference_ndcg(y[grouped], scores[grouped], sizes, np.ones(sizes.size))
    assert ranker.score(X[order], y[order], qid=qid[order]) == pytest.approx(by_qid, rel=1e-5)
    query_weight = np.random.default_rng(4).uniform(0.5, 2.0, sizes.size)
    weighted = _reference_ndcg(y, scores, sizes, query_weight)
    row_weight = np.repeat(query_weight, sizes)
    got = ranker.score(X, y[:, None], group=sizes, sample_weight=row_weight)  # a column is fine
    assert got == pytest.approx(weighted, rel=1e-5) and weighted != pytest.approx(expected)


def test_score_refuses_missing_queries_and_bad_labels_and_weights():
    X, y, sizes = _queries()
    ranker = jb.Ranker(n_estimators=15, max_depth=3).fit(X, y, group=sizes)  # as above: cached
    with pytest.raises(ValueError, match="group, qid: score needs the queries.*set_score_request"):
        ranker.score(X, y)
    with pytest.raises(ValueError, match=r"y: score \(NDCG\) needs targets .* >= 0.*row 4: -1.0"):
        ranker.score(X, np.where(np.arange(y.size) == 4, -1.0, y), group=sizes)
    with pytest.raises(ValueError, match="sample_weight: a group loss weighs whole groups"):
        ranker.score(X, y, group=sizes, sample_weight=np.arange(y.size) + 1.0)


def test_grid_search_scores_rankers_by_ndcg_with_qid_routed_to_each_split():
    X, y, sizes = _queries(30)
    qid = np.repeat(np.arange(sizes.size), sizes)
    folds = GroupKFold(n_splits=2)
    # a numeric setting in the grid: the folds' fits share their compiled programs
    grid = {"learning_rate": [0.05, 0.5]}
    with sklearn.config_context(enable_metadata_routing=True):
        ranker = jb.Ranker(n_estimators=3, max_depth=2)
        ranker.set_fit_request(qid=True).set_score_request(qid=True)
        search = GridSearchCV(ranker, grid, cv=folds, refit=False, error_score="raise")
        search.fit(X, y, qid=qid, groups=qid)
        cross = cross_val_score(ranker, X, y, cv=folds, params={"qid": qid, "groups": qid})
    train, test = next(folds.split(X, y, qid))
    by_hand = jb.Ranker(n_estimators=3, max_depth=2, learning_rate=0.05)
    by_hand.fit(X[train], y[train], qid=qid[train])
    expected = by_hand.score(X[test], y[test], qid=qid[test])
    assert search.cv_results_["split0_test_score"][0] == pytest.approx(expected, rel=1e-6)
    assert 0.5 < expected < 1.0 and search.best_params_["learning_rate"] in (0.05, 0.5)
    assert cross.shape == (2,) and np.all((0.5 < cross) & (cross <= 1.0))


def _shop_queries(n_queries=40, seed=3):
    """Queries whose relevance depends on a set of shops (codes 0..9) and a number."""
    X, _, sizes = _queries(n_queries, seed)
    rng = np.random.default_rng(seed)
    shops = rng.integers(0, 10, X.shape[0])
    X[:, 1] = shops
    relevance = 2.0 * np.isin(shops, [2, 5, 8]) + (X[:, 0] > 0.5)
    return X, relevance.astype(np.float32), sizes


def test_the_ranker_takes_categorical_columns_as_the_booster_does():
    pd = pytest.importorskip("pandas")
    X, y, sizes = _shop_queries()
    settings = {"n_estimators": 6, "max_depth": 3}
    ranker = jb.Ranker(categorical_features=[1], **settings).fit(X, y, group=sizes)
    booster = jb.Booster(loss=losses.lambdarank(), categorical_features=[1], **settings)
    booster.fit(X, y, group=sizes)
    assert ranker.booster_.forest_.category_left.any()
    np.testing.assert_array_equal(ranker.predict(X), booster.predict_raw(X))
    # a pandas category column is categorical anyway, its categories matched by value
    labels = np.array(list("abcdefghij"), dtype=object)[X[:, 1].astype(int)]
    frame = pd.DataFrame({f"x{c}": X[:, c] for c in range(5)})
    frame["x1"] = pd.Categorical(labels, categories=list("abcdefghij"))
    from_frame = jb.Ranker(**settings).fit(frame, y, group=sizes)
    np.testing.assert_array_equal(from_frame.predict(frame), booster.predict_raw(X))
    frame["x1"] = pd.Categorical(labels, categories=list("jihgfedcba"))
    np.testing.assert_array_equal(from_frame.predict(frame), booster.predict_raw(X))
    assert from_frame.score(frame, y, group=sizes) > 0.9


def test_a_lossguide_ranker_grows_trees_of_at_most_max_leaves():
    X, y, sizes = _queries(seed=4)
    settings = {"n_estimators": 5, "max_depth": 4, "grow_policy": "lossguide", "max_leaves": 5}
    ranker = jb.Ranker(**settings).fit(X, y, group=sizes)
    leaves = 1 + np.sum(np.asarray(ranker.booster_.forest_.split_gain) > 0, axis=1)
    assert leaves.max() == 5
    assert all(np.unique(ranker.apply(X)[:, t]).size <= 5 for t in range(5))
    booster = jb.Booster(loss=losses.lambdarank(), **settings).fit(X, y, group=sizes)
    np.testing.assert_array_equal(ranker.predict(X), booster.predict_raw(X))

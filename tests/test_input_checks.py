"""Arguments that used to pass silently (a 1-tree model, dates as epoch
counts, an unsplittable feature, a seed taken modulo 2**32, a JAX runtime
error, a log loss of regression targets) are refused at the boundary, each
error naming the argument and the fix."""

import pickle

import jax
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.engine.binning import SMALLEST_NORMAL, apply_bins, fit_bin_edges
from jaxboost.runtime.devices import check_devices

SMALL = {"n_estimators": 3, "max_depth": 2}


def _data(n_rows: int = 64, n_features: int = 3):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    return X, 2 * X[:, 0] + 0.1 * rng.normal(size=n_rows).astype(np.float32)


# -- early_stopping_rounds -----------------------------------------------------
@pytest.mark.parametrize("rounds", [0, -1, 1.5])
def test_early_stopping_rounds_below_one_or_fractional_is_refused(rounds):
    """0 and -1 used to stop after the first round (a 1-tree model)."""
    X, y = _data()
    message = (
        r"early_stopping_rounds: expected a whole number >= 1, .*None turns early stopping off"
    )
    with pytest.raises(ValueError, match=message):
        jb.Booster(**SMALL).fit(X, y, eval_set=[(X, y)], early_stopping_rounds=rounds)


def test_early_stopping_rounds_of_one_trains():
    X, y = _data()
    model = jb.Booster(**SMALL).fit(X, y, eval_set=[(X, y)], early_stopping_rounds=1)
    assert model.n_estimators_ == 3  # the training set itself keeps improving


# -- polars frames -------------------------------------------------------------
def _polars_columns():
    pl = pytest.importorskip("polars")
    n = 64
    return {
        "Datetime": pl.datetime_range(
            pl.datetime(2020, 1, 1), pl.datetime(2020, 3, 4), "1d", eager=True
        ),
        "Date": pl.date_range(pl.date(2020, 1, 1), pl.date(2020, 3, 4), "1d", eager=True),
        "Duration": pl.Series(np.arange(n), dtype=pl.Duration("ms")),
        "Time": pl.Series(np.arange(n) * 10**9, dtype=pl.Time),
        "Categorical": pl.Series(["a", "b"] * (n // 2), dtype=pl.Categorical),
    }


# (a Categorical or String column is categorical: tests/test_categorical.py)
@pytest.mark.parametrize("kind", ["Datetime", "Date", "Duration", "Time"])
def test_a_polars_date_or_time_column_is_refused_by_name(kind):
    """A polars date/time column used to train on its epoch count, in its own
    time unit; a pandas one is refused by name, and now a polars one too."""
    pl = pytest.importorskip("polars")
    X, y = _data()
    frame = pl.DataFrame({"a": X[:, 0], "b": X[:, 1], "when": _polars_columns()[kind]})
    with pytest.raises(ValueError, match=f"X: column 'when' holds {kind}.*encode it as numbers"):
        jb.Booster(**SMALL).fit(frame, y)


def test_a_numeric_polars_frame_with_nulls_trains_as_numpy_with_nan():
    pl = pytest.importorskip("polars")
    X, y = _data()
    X = X.copy()
    X[::5, 1] = np.nan
    flag = X[:, 2] > 0
    frame = pl.DataFrame(
        {
            "a": X[:, 0],
            "b": pl.Series([None if np.isnan(v) else float(v) for v in X[:, 1]]),
            "c": pl.Series([None if i % 7 == 0 else bool(v) for i, v in enumerate(flag)]),
        }
    )
    as_array = np.stack([X[:, 0], X[:, 1], np.where(np.arange(64) % 7 == 0, np.nan, flag)], 1)
    from_frame = jb.Booster(**SMALL).fit(frame, y)
    from_array = jb.Booster(**SMALL).fit(as_array.astype(np.float32), y)
    np.testing.assert_array_equal(from_frame.predict(frame), from_array.predict(as_array))
    assert from_frame.feature_names_in_ == ["a", "b", "c"]


# -- subnormal feature values --------------------------------------------------
def test_a_feature_of_subnormal_values_is_refused_by_column():
    """Values below 1.2e-38 were binned as 0 by XLA (flush to zero), so the
    feature could not be split on although its bin edges differed."""
    X, y = _data()
    X = X.copy()
    X[:, 1] *= np.float32(1e-40)
    message = r"X: column 1 has values below float32's smallest normal .*row 0.*rescale"
    with pytest.raises(ValueError, match=message):
        jb.Booster(**SMALL).fit(X, y)
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match=r"X: column 1 \('b'\) has values below"):
        jb.Booster(**SMALL).fit(pd.DataFrame(X, columns=["a", "b", "c"]), y)


def test_subnormal_values_rescaled_train_the_model_of_the_unscaled_feature():
    X, y = _data()
    scaled = X.copy()
    scaled[:, 0] *= np.float32(2.0**-100)  # exact, and normal (about 1e-30)
    plain = jb.Booster(**SMALL).fit(X, y)
    rescaled = jb.Booster(**SMALL).fit(scaled, y)
    np.testing.assert_array_equal(plain.predict(X), rescaled.predict(scaled))


def test_a_negative_value_next_to_zero_gets_its_own_bin():
    """An edge between -1.2e-38 and 0 fell at -6e-39, which XLA on CPU reads
    as -0: the zeros shared the negative values' bin."""
    X = np.array([[-1.2e-38], [0.0], [1.0]], np.float32)
    edges = fit_bin_edges(X, 16)
    assert edges[0, 0] == -SMALLEST_NORMAL
    bins = np.asarray(apply_bins(jax.numpy.asarray(X), jax.numpy.asarray(edges)))
    np.testing.assert_array_equal(bins[0], [0, 1, 2])


def test_predict_reads_subnormal_values_as_training_bins_them():
    """Subnormal values at predict time go where 0 goes, as XLA reads them."""
    n = 64
    X = np.stack([np.where(np.arange(n) % 2 == 0, 0.0, 1.5e-38), np.arange(n)], 1)
    X = X.astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32) * 5
    model = jb.Booster(n_estimators=3, max_depth=1, learning_rate=1.0).fit(X, y)
    prediction = model.predict(X)
    np.testing.assert_allclose(prediction, y, atol=1e-3)  # split between 0 and 1.5e-38
    subnormal = X.copy()
    subnormal[:, 0] = np.where(X[:, 0] > 0, 1.5e-38, 1e-40)
    np.testing.assert_array_equal(model.predict(subnormal), prediction)


# -- random_state --------------------------------------------------------------
@pytest.mark.parametrize("random_state", [-1, 2**32, 1.5, True, float("nan"), "0"])
def test_a_random_state_that_is_not_a_uint32_seed_is_refused(random_state):
    """2**32 used to act as 0 and 1.5 as 1."""
    X, y = _data()
    with pytest.raises(
        ValueError, match=r"random_state: expected a whole number in \[0, 4294967295\]"
    ):
        jb.Booster(random_state=random_state, **SMALL).fit(X, y)


def _subsampled(random_state):
    X, y = _data()
    booster = jb.Booster(random_state=random_state, subsample=0.5, **SMALL)
    return booster.fit(X, y).predict(X)


def test_random_state_draws_the_seed_from_a_numpy_random_state_or_generator():
    """A RandomState used to fail with a TypeError that did not name random_state."""
    seed = int(np.random.RandomState(3).randint(2**32, dtype=np.uint32))
    expected = _subsampled(seed)
    np.testing.assert_array_equal(_subsampled(np.random.RandomState(3)), expected)
    drawn = int(np.random.default_rng(3).integers(2**32, dtype=np.uint32))
    np.testing.assert_array_equal(_subsampled(np.random.default_rng(3)), _subsampled(drawn))
    np.testing.assert_array_equal(_subsampled(float(seed)), expected)  # a whole float


def test_random_state_none_draws_a_fresh_seed_from_numpys_global_random_state():
    """None used to act as 0; as in scikit-learn it now draws from np.random."""
    np.random.seed(3)
    first = _subsampled(None)
    np.testing.assert_array_equal(first, _subsampled(np.random.RandomState(3)))
    assert not np.array_equal(_subsampled(None), first)  # the next draw


# -- devices -------------------------------------------------------------------
@pytest.mark.parametrize(
    "devices, error, message",
    [
        ("cpu", TypeError, "expected a list of jax.Device objects"),
        ([0, 1], TypeError, "entry 0 is 0, not a jax.Device"),
        ([], ValueError, "expected at least one jax.Device"),
        (3, TypeError, "expected a list of jax.Device objects"),
    ],
)
def test_devices_that_are_not_jax_devices_are_refused(devices, error, message):
    """They used to fail with an AttributeError or TypeError not naming devices."""
    X, y = _data()
    with pytest.raises(error, match=f"^devices: {message}.*jax.devices"):
        jb.Booster(devices=devices, **SMALL).fit(X, y)


def test_a_device_listed_twice_is_refused():
    """It used to fail inside JAX's runtime ("Number of processed shards")."""
    X, y = _data()
    device = jax.devices()[0]
    with pytest.raises(ValueError, match=r"^devices: .* more than once.*jax.devices\(\)\[:2\]"):
        jb.Booster(devices=[device, device], **SMALL).fit(X, y)


def test_one_device_alone_is_a_list_of_one():
    X, y = _data()
    device = jax.devices()[0]
    assert check_devices(device) == [device]
    assert check_devices(None) is None
    alone = jb.Booster(devices=device, **SMALL).fit(X, y)
    listed = jb.Booster(devices=[device], **SMALL).fit(X, y)
    for got, expected in zip(alone.forest_, listed.forest_):
        np.testing.assert_array_equal(got, expected)
    assert pickle.loads(pickle.dumps(alone)).devices == [device]


def test_two_distinct_devices_are_accepted():
    if len(jax.devices()) < 2:
        pytest.skip("needs 2 devices: run with jaxboost imported before JAX starts")
    assert check_devices(tuple(jax.devices()[:2])) == jax.devices()[:2]


# -- eval_metric target domains ------------------------------------------------
@pytest.mark.parametrize("metric", ["logloss", "auc", "error"])
def test_a_binary_metric_of_regression_targets_is_refused(metric):
    """They used to report numbers such as a log loss of -0.94."""
    X, y = _data()
    y = 20 + 10 * y
    message = (
        f"eval_metric '{metric}': needs targets in \\[0, 1\\].*y is {y[0]:.6g}.* at row 0; "
        "pick a metric"
    )
    with pytest.raises(ValueError, match=message):
        jb.Booster(**SMALL).fit(X, y, eval_set=[(X, y)], eval_metric=metric)


@pytest.mark.parametrize("metric", ["mlogloss", "merror"])
def test_a_multiclass_metric_needs_labels_below_n_outputs(metric):
    X, _ = _data()
    labels = (np.arange(64) % 3).astype(np.float32)
    eval_labels = labels.copy()
    eval_labels[5] = 3  # a class the 3-output model does not score
    booster = jb.Booster(loss="softmax_cross_entropy", **SMALL)
    message = f"eval_metric '{metric}': needs targets that are class labels 0, 1, ..., 2.*row 5"
    with pytest.raises(ValueError, match=message):
        booster.fit(X, labels, eval_set=[(X, eval_labels)], eval_metric=metric)
    booster.fit(X, labels, eval_set=[(X, labels)], eval_metric=metric)  # labels 0..2 pass


def test_a_catalogue_loss_as_metric_needs_its_target_domain():
    X, y = _data()
    with pytest.raises(ValueError, match="eval_metric 'poisson': needs targets that are >= 0"):
        jb.Booster(**SMALL).fit(X, y, eval_set=[(X, y)], eval_metric="poisson")

"""Continued training (``init_model=``, ``warm_start=True``): the trees of
one longer fit bit for bit, from a loaded model too, with offsets, a new
loss, evaluation sets, the estimators, and the errors."""

from pathlib import Path

import numpy as np
import pytest
from run_script import run_script, xla_flags_without

import jaxboost as jb
from jaxboost import losses

SCRIPTS = Path(__file__).parent / "scripts"


def _data(n_rows=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4)).astype(np.float32)
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1])) + 0.3 * rng.normal(size=n_rows)
    return X, y.astype(np.float32)


def _same_trees(one, other) -> bool:
    return all(np.array_equal(a, b) for a, b in zip(one.forest_, other.forest_))


@pytest.mark.parametrize(
    ("loss", "labels", "settings"),
    [
        # the row and column draws, by round
        (losses.squared_error, False, {"subsample": 0.7, "colsample_bytree": 0.75}),
        # the quantisation's rounding, by round
        (losses.binary_logloss, True, {"use_quantized_grad": True}),
        (losses.softmax_cross_entropy, True, {"multi_strategy": "one_output_per_tree"}),
    ],
)
def test_more_rounds_grow_the_trees_of_one_longer_fit(loss, labels, settings):
    X, y = _data()
    if labels:
        y = (
            (y > 0).astype(np.float32)
            if loss is losses.binary_logloss
            else np.digitize(y, [-1, 0, 1])
        )
    settings = {"loss": loss, "max_depth": 3, **settings}
    longer = jb.Booster(n_estimators=10, **settings).fit(X, y)
    first = jb.Booster(n_estimators=4, **settings).fit(X, y)
    continued = jb.Booster(n_estimators=6, **settings).fit(X, y, init_model=first)
    assert continued.n_estimators_ == 10
    assert _same_trees(continued, longer)
    np.testing.assert_array_equal(continued.base_score_, longer.base_score_)
    np.testing.assert_allclose(continued.train_loss_, longer.train_loss_, rtol=1e-6)
    np.testing.assert_array_equal(continued.predict_raw(X), longer.predict_raw(X))


def test_a_loaded_model_continues_and_the_result_round_trips(tmp_path):
    X, y = _data(seed=1)
    longer = jb.Booster(n_estimators=8, max_depth=3).fit(X, y)
    jb.Booster(n_estimators=3, max_depth=3).fit(X, y).save(tmp_path / "first.json")
    first = jb.load(tmp_path / "first.json")
    continued = jb.Booster(n_estimators=5, max_depth=3).fit(X, y, init_model=first)
    assert _same_trees(continued, longer)
    continued.save(tmp_path / "continued.json")
    loaded = jb.load(tmp_path / "continued.json")
    assert loaded.n_estimators_ == 8 and _same_trees(loaded, longer)
    assert loaded.init_model_rounds_ == 3 and not hasattr(longer, "init_model_rounds_")
    again = jb.Booster(n_estimators=2, max_depth=3).fit(X, y, init_model=loaded)
    again.save(tmp_path / "again.json")  # 10 rounds, n_estimators=2: loads
    assert jb.load(tmp_path / "again.json").n_estimators_ == 10


def test_offsets_continue_as_one_longer_fit_with_them():
    X, _ = _data(seed=2)
    rng = np.random.default_rng(2)
    offsets = rng.normal(scale=0.3, size=600).astype(np.float32)
    counts = rng.poisson(np.exp(offsets + 0.4 * np.nan_to_num(X[:, 0]))).astype(np.float32)
    settings = {"loss": losses.poisson, "max_depth": 2}
    longer = jb.Booster(n_estimators=9, **settings).fit(X, counts, init_score=offsets)
    first = jb.Booster(n_estimators=4, **settings).fit(X, counts, init_score=offsets)
    continued = jb.Booster(n_estimators=5, **settings).fit(
        X, counts, init_score=offsets, init_model=first
    )
    assert _same_trees(continued, longer)


def test_a_new_loss_continues_from_the_models_scores():
    X, y = _data(seed=3)
    first = jb.Booster(n_estimators=5, max_depth=3).fit(X, y)
    huber = losses.huber(0.5)
    continued = jb.Booster(huber, n_estimators=3, max_depth=3).fit(X, y, init_model=first)
    assert continued.loss_ is huber and continued.n_estimators_ == 8
    np.testing.assert_array_equal(continued.base_score_, first.base_score_)
    residual = np.abs(first.predict_raw(X).astype(np.float64) - y)
    by_hand = np.mean(np.where(residual <= 0.5, 0.5 * residual**2, 0.5 * (residual - 0.25)))
    # the new rounds' training loss starts at the model's scores
    np.testing.assert_allclose(continued.train_loss_[5], by_hand, rtol=1e-5)
    np.testing.assert_array_equal(continued.train_loss_[:5], first.train_loss_[:5])


def test_the_models_bin_edges_are_kept():
    X, y = _data(seed=4)
    first = jb.Booster(n_estimators=2, max_depth=3).fit(X, y)
    shifted = jb.Booster(n_estimators=2, max_depth=3).fit(2 * X, y, init_model=first)
    np.testing.assert_array_equal(shifted.bin_edges_, first.bin_edges_)
    thresholds = shifted.forest_.threshold[2:][shifted.forest_.split_gain[2:] > 0]
    assert np.isin(thresholds, first.bin_edges_).all()


def test_evaluation_sets_and_early_stopping_count_the_models_rounds():
    X, y = _data(seed=5)
    held_out = [(X[:200] + 0.01, y[:200])]
    longer = jb.Booster(n_estimators=9, max_depth=3).fit(X, y, eval_set=held_out)
    first = jb.Booster(n_estimators=4, max_depth=3).fit(X, y)
    seen = []  # a callback's model holds the model's rounds and those grown so far

    def callback(env):
        seen.append((env.iteration, env.model.n_estimators_))

    continued = jb.Booster(n_estimators=5, max_depth=3).fit(
        X, y, eval_set=held_out, init_model=first, callbacks=[callback]
    )
    assert seen == [(i, 4 + i) for i in range(1, 6)]
    curve = np.asarray(continued.evals_result_["validation_0"]["loss"])
    assert np.isnan(curve[:4]).all()
    np.testing.assert_allclose(
        curve[4:], longer.evals_result_["validation_0"]["loss"][4:], rtol=1e-5
    )
    assert continued.best_iteration_ == longer.best_iteration_ == 9


def test_warm_start_adds_the_missing_rounds():
    X, y = _data(seed=6)
    estimator = jb.Regressor(n_estimators=4, max_depth=3, warm_start=True).fit(X, y)
    first_trees = estimator.booster_.forest_
    estimator.set_params(n_estimators=7).fit(X, y)
    assert estimator.n_estimators_ == 7
    assert _same_trees(
        estimator.booster_, jb.Regressor(n_estimators=7, max_depth=3).fit(X, y).booster_
    )
    np.testing.assert_array_equal(estimator.booster_.forest_.feature[:4], first_trees.feature)
    unchanged = estimator.booster_
    assert estimator.fit(X, y).booster_ is unchanged  # n_estimators reached: nothing to add
    with pytest.raises(ValueError, match="n_estimators: with warm_start=True"):
        estimator.set_params(n_estimators=3).fit(X, y)
    labels = (y > 0).astype(int)
    classifier = jb.Classifier(n_estimators=2, max_depth=2, warm_start=True).fit(X, labels)
    with pytest.raises(ValueError, match="warm_start=True continues a model of the classes"):
        classifier.set_params(n_estimators=3).fit(X, labels + 1)


@pytest.mark.parametrize(
    ("settings", "data", "message"),
    [
        ({}, "unfitted", "init_model: expected a fitted Booster"),
        ({}, "columns", "init_model: fitted on 4 features, X has 3"),
        ({"max_depth": 2}, "same", "init_model: its trees have depth 3.*set max_depth=3"),
        # (a file of this fit would be refused at load: max_bins below its trees' bins)
        ({"max_bins": 8}, "same", r"init_model: its trees use \d+ value bins, max_bins is 8"),
        (
            {"loss": losses.softmax_cross_entropy},
            "classes",
            "init_model: has 1 outputs, this fit 4",
        ),
    ],
)
def test_models_that_cannot_continue_are_refused_by_name(settings, data, message):
    X, y = _data(n_rows=200, seed=7)
    model = jb.Booster(n_estimators=2, max_depth=3)
    if data != "unfitted":
        model.fit(X, y)
    if data == "columns":
        X = X[:, :3]
    if data == "classes":
        y = np.digitize(y, [-1, 0, 1]).astype(np.float32)  # 4 classes
    with pytest.raises(ValueError, match=message):
        jb.Booster(**{"n_estimators": 2, "max_depth": 3, **settings}).fit(X, y, init_model=model)


def test_more_rounds_are_bit_identical_in_optimised_code():
    # at the suite's -O0 XLA contracts nothing: the optimised code, as users run it
    flags = xla_flags_without("--xla_backend_optimization_level", "--xla_cpu_use_fusion_emitters")
    result = run_script(SCRIPTS / "continued_optimised.py", {"XLA_FLAGS": flags})
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]


def test_a_table_with_names_on_one_side_warns_as_predict_does():
    """A model fitted on an array continued on a DataFrame (or the other
    way) takes the columns by position and says so, as `predict` does."""
    pd = pytest.importorskip("pandas")
    X, y = _data(n_rows=200, seed=3)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    settings = {"n_estimators": 2, "max_depth": 2}
    on_array = jb.Booster(**settings).fit(X, y)
    on_frame = jb.Booster(**settings).fit(frame, y)
    with pytest.warns(UserWarning, match="init_model was fitted on an array without them"):
        continued = jb.Booster(**settings).fit(frame, y, init_model=on_array)
    with pytest.warns(UserWarning, match=r"taken by position as \['a', 'b', 'c', 'd'\]"):
        jb.Booster(**settings).fit(X, y, init_model=on_frame)
    # by position: the same trees as continuing on the array
    assert _same_trees(continued, jb.Booster(**settings).fit(X, y, init_model=on_array))

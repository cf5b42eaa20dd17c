"""Evaluation sets, metrics, early stopping, callbacks and progress."""

from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.metrics import Metric, auc
from jaxboost.frontends.training import monitor as monitor_module
from jaxboost.frontends.training.monitor import EvalSet, Monitor, time_left


def _data(seed=0, n_rows=400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.normal(size=n_rows)).astype(np.float32)
    return X, y


def test_eval_metrics_are_recorded_every_round_and_match_predictions():
    X, y = _data()
    X_val, y_val = _data(seed=1, n_rows=200)
    model = jb.Booster(loss="squared_error", n_estimators=12, max_depth=3).fit(
        X, y, eval_set=[(X, y), (X_val, y_val)], eval_metric=["rmse", "loss"]
    )
    assert set(model.evals_result_) == {"validation_0", "validation_1"}
    history = model.evals_result_["validation_1"]
    assert len(history["rmse"]) == 12 and len(history["loss"]) == 12
    expected = np.sqrt(np.mean((model.predict(X_val) - y_val) ** 2))
    assert history["rmse"][-1] == pytest.approx(expected, rel=1e-5)
    # the training set's "loss" metric is the training loss the model records
    np.testing.assert_allclose(
        model.evals_result_["validation_0"]["loss"], model.train_loss_[1:], rtol=1e-5
    )
    staged = list(model.staged_predict(X_val))
    assert history["rmse"][4] == pytest.approx(np.sqrt(np.mean((staged[4] - y_val) ** 2)), rel=1e-5)


def test_a_plain_function_is_a_metric():
    X, y = _data()
    model = jb.Booster(n_estimators=5, max_depth=2).fit(
        X, y, eval_set=[(X, y)], eval_metric=lambda y, f: jnp.abs(y - f)
    )
    (values,) = model.evals_result_["validation_0"].values()
    assert values[-1] == pytest.approx(np.mean(np.abs(model.predict(X) - y)), rel=1e-5)


def test_weighted_auc_matches_scikit_learn():
    rng = np.random.default_rng(0)
    y = (rng.uniform(size=300) < 0.4).astype(np.float32)
    score = np.round(rng.normal(size=300) + y, 1).astype(np.float32)  # ties included
    weight = rng.uniform(0.1, 2.0, 300).astype(np.float32)
    got = float(auc(jnp.asarray(y), jnp.asarray(score)[:, None], jnp.asarray(weight)))
    assert got == pytest.approx(roc_auc_score(y, score, sample_weight=weight), rel=1e-5)


def test_early_stopping_keeps_the_best_round(capsys):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    flip = rng.uniform(size=300) < 0.3
    y[flip] = 1 - y[flip]  # noisy labels: deep trees overfit quickly
    X_val = rng.normal(size=(300, 5)).astype(np.float32)
    y_val = (X_val[:, 0] > 0).astype(np.float32)
    model = jb.Booster(loss="logloss", n_estimators=300, max_depth=6, learning_rate=0.3).fit(
        X, y, eval_set=[(X_val, y_val)], early_stopping_rounds=5, verbose=100
    )
    history = model.evals_result_["validation_0"]["loss"]
    assert len(history) < 300, "training should have stopped early"
    best = int(np.argmin(history)) + 1
    assert model.best_iteration_ == best == model.n_estimators_
    assert len(history) == best + 5
    # the round that stops prints its line, with nothing left to run
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert last_line.startswith(f"[{best + 5:>3}/300]") and last_line.endswith("left ~0.0s")
    assert model.forest_.feature.shape[0] == best
    prediction = model.predict_raw(X_val)
    np.testing.assert_allclose(
        np.mean(np.logaddexp(0, prediction) - y_val * prediction), history[best - 1], rtol=1e-5
    )


def test_auc_is_maximised_by_early_stopping():
    X, y = _data()
    labels = (y > 0).astype(np.float32)
    model = jb.Booster(loss="logloss", n_estimators=40, max_depth=2).fit(
        X, labels, eval_set=[(X, labels)], eval_metric="auc", early_stopping_rounds=40
    )
    history = model.evals_result_["validation_0"]["auc"]
    assert model.best_score_ == max(history)


def test_a_callback_sees_every_round_and_can_stop_training():
    X, y = _data()
    seen = []

    def stop_after_seven(env):
        seen.append((env.iteration, env.train_loss))
        return env.iteration == 7

    model = jb.Booster(n_estimators=50, max_depth=2).fit(X, y, callbacks=[stop_after_seven])
    assert [iteration for iteration, _ in seen] == list(range(1, 8))
    assert model.n_estimators_ == 7 and model.forest_.feature.shape[0] == 7
    np.testing.assert_allclose([loss for _, loss in seen], model.train_loss_[1:])


def test_verbose_prints_rounds_metrics_and_time_left(capsys):
    X, y = _data()
    jb.Booster(n_estimators=6, max_depth=2).fit(X, y, eval_set=[(X, y)], verbose=3)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[3/6]") and "validation_0-loss" in lines[0]
    # one chunk ran every round before the first line: none is left
    assert lines[0].endswith("left ~0.0s")


def test_time_left_leaves_out_the_first_chunk_which_compiled():
    # 96 s for the first chunk of 100 rounds (compiling), 0.5 s for the next
    assert time_left([(100, 96.0)], 200, 300) is None  # no pace known yet
    assert time_left([(100, 96.0), (200, 96.5)], 200, 300) == pytest.approx(0.5)
    assert time_left([(100, 96.0), (200, 96.5)], 250, 300) == pytest.approx(0.25)
    assert time_left([(100, 96.0), (200, 96.5), (250, 96.75)], 250, 300) == pytest.approx(0.25)
    assert time_left([], 300, 300) == 0.0  # every round ran in one chunk
    assert time_left([(100, 96.0)], 150, 150) == 0.0
    assert time_left([], 100, 300) is None


def _watched_fit(monkeypatch, early_stopping_rounds):
    """The lines a Monitor prints over 4 chunks of 10 rounds (of 100) on a
    fake clock: each chunk trains in 0.1 s and is evaluated in 0.01 s, but
    the first chunk's evaluation compiles for 5 s."""
    clock = [0.0]
    monkeypatch.setattr(monitor_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    X_val, y_val = np.zeros((3, 2), np.float32), np.zeros(3, np.float32)
    eval_set = EvalSet("validation_0", X_val, y_val, np.ones(3, np.float32))
    watch = Monitor(
        model_at=None,
        eval_sets=[eval_set],
        metrics=[Metric("loss", fn=None)],
        init_score=np.zeros(1),
        trees_per_round=1,
        n_rounds=100,
        early_stopping_rounds=early_stopping_rounds,
        verbose=10,
    )

    def evaluate(trees):  # (the chunk's number stands for its trees)
        clock[0] += 5.0 if trees == 0 else 0.01
        return [{"loss": np.linspace(1.0, 0.9, 10) - trees}]  # always improving

    monkeypatch.setattr(watch, "_evaluate_chunk", evaluate)
    for chunk in range(4):
        clock[0] += 0.1
        assert watch.after_chunk(chunk, np.ones(10), 10 * chunk) == (10, False)


def test_time_left_is_paced_by_chunks_after_the_first_evaluation_compiled(monkeypatch, capsys):
    _watched_fit(monkeypatch, early_stopping_rounds=None)
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line[:9] for line in lines] == ["[ 10/100]", "[ 20/100]", "[ 30/100]", "[ 40/100]"]
    # no pace before two chunks are watched
    assert "left" not in lines[0] and "left" not in lines[1]
    # 0.11 s a chunk of 10 rounds (training and evaluation), 60 rounds to go
    assert lines[3].endswith(f"left ~{0.011 * 60:.1f}s")


def test_time_left_with_early_stopping_is_an_upper_bound(monkeypatch, capsys):
    _watched_fit(monkeypatch, early_stopping_rounds=50)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith(f"left at most ~{0.011 * 60:.1f}s")


def test_monitoring_does_not_change_the_model():
    X, y = _data()
    plain = jb.Booster(n_estimators=25, max_depth=3).fit(X, y)
    watched = jb.Booster(n_estimators=25, max_depth=3).fit(X, y, eval_set=[(X, y)])
    np.testing.assert_array_equal(plain.predict_raw(X), watched.predict_raw(X))


def test_iteration_range_and_staged_predictions_agree():
    X, y = _data()
    model = jb.Booster(
        loss=losses.softmax_cross_entropy,
        n_estimators=8,
        max_depth=2,
        multi_strategy="one_output_per_tree",
    )
    model.fit(X, np.digitize(y, [-0.5, 0.5]).astype(np.float32))
    staged = list(model.staged_predict_raw(X))
    assert len(staged) == 8
    np.testing.assert_allclose(
        staged[2], model.predict_raw(X, iteration_range=(0, 3)), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(staged[-1], model.predict_raw(X), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="iteration_range"):
        model.predict_raw(X, iteration_range=(0, 9))


def test_bad_monitoring_arguments_are_named():
    X, y = _data()
    with pytest.raises(ValueError, match="early_stopping_rounds"):
        jb.Booster(n_estimators=3).fit(X, y, early_stopping_rounds=2)
    with pytest.raises(ValueError, match="eval_metric"):
        jb.Booster(n_estimators=3).fit(X, y, eval_set=[(X, y)], eval_metric="nope")
    with pytest.raises(ValueError, match=r"eval_set\[0\] X: expected 4 features"):
        jb.Booster(n_estimators=3).fit(X, y, eval_set=[(X[:, :2], y)])
    # a y of shape (n, 1) was blamed on eval_metric 'loss', naming no set
    with pytest.raises(ValueError, match=r"eval_set\[1\] y: .* got \(\d+, 1\); pass its y.ravel"):
        jb.Booster(n_estimators=3).fit(X, y, eval_set=[(X, y), (X, y[:, None])])


@pytest.mark.parametrize("metric", ["rmse", "mae", "logloss", "error", "auc"])
def test_a_one_output_metric_refuses_a_multiclass_model(metric):
    """It used to read the first class's score alone: AUC 0.02 on this data."""
    X, y = _data()
    classes = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.float32)
    booster = jb.Booster(loss="softmax_cross_entropy", n_estimators=2)
    with pytest.raises(ValueError, match=f"eval_metric '{metric}': measures models with one"):
        booster.fit(X, classes, eval_set=[(X, classes)], eval_metric=metric)


@pytest.mark.parametrize("metric", ["mlogloss", "merror"])
def test_a_multiclass_metric_refuses_a_one_output_model(metric):
    X, y = _data()
    labels = (y > np.median(y)).astype(np.float32)
    booster = jb.Booster(loss="binary_logloss", n_estimators=2)
    with pytest.raises(ValueError, match=f"eval_metric '{metric}': measures models with one out"):
        booster.fit(X, labels, eval_set=[(X, labels)], eval_metric=metric)


def test_a_per_sample_metric_of_the_wrong_shape_is_named():
    X, y = _data()
    classes = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.float32)
    booster = jb.Booster(loss="softmax_cross_entropy", n_estimators=2, max_depth=2)
    message = r"eval_metric 'huber': metric\(y, f\) .* f of shape \(3,\) must return a scalar"
    with pytest.raises(ValueError, match=message):
        booster.fit(X, classes, eval_set=[(X, classes)], eval_metric="huber")
    # a per-sample function of the class scores is fine
    booster.fit(X, classes, eval_set=[(X, classes)], eval_metric=lambda y, f: jnp.max(f) - f[0])


def test_a_metric_to_maximise_makes_early_stopping_keep_its_highest_round():
    X, y = _data()
    labels = (y > np.median(y)).astype(np.float32)
    X_val, labels_val = X[:100], labels[:100]

    def accuracy(y, f):
        return jnp.where((f > 0) == (y > 0.5), 1.0, 0.0)

    def fit(eval_metric):
        return jb.Booster(loss="binary_logloss", n_estimators=40, learning_rate=0.3).fit(
            X[100:],
            labels[100:],
            eval_set=[(X_val, labels_val)],
            eval_metric=eval_metric,
            early_stopping_rounds=40,
        )

    maximised = fit(jb.metric(accuracy, greater_is_better=True))
    scores = np.asarray(maximised.evals_result_["validation_0"]["accuracy"])
    assert maximised.best_score_ == scores.max()
    assert maximised.best_iteration_ == int(np.argmax(scores)) + 1
    # the same function given plainly is minimised: the other end
    minimised = fit(accuracy)
    assert minimised.best_score_ == scores.min()
    named = fit(jb.metric(accuracy, name="acc", greater_is_better=True))
    assert list(named.evals_result_["validation_0"]) == ["acc"]


def _rounds_seen_by_callbacks(booster, X, y, **fit_params):
    """``(raw scores of env.model on X, env.model.n_estimators_, the booster's
    own raw scores)`` after each round, and the fitted booster."""
    seen = []

    def record(env):
        own = booster.predict_raw(X) if hasattr(booster, "forest_") else None
        seen.append((env.model.predict_raw(X), env.model.n_estimators_, own))

    booster.fit(X, y, callbacks=[record], **fit_params)
    return seen


def _check_rounds_so_far(seen, model, X):
    assert [n_rounds for _, n_rounds, _ in seen] == list(range(1, model.n_estimators_ + 1))
    for index, (raw, _, _) in enumerate(seen):
        np.testing.assert_array_equal(raw, model.predict_raw(X, iteration_range=(0, index + 1)))


@pytest.mark.parametrize("path", ["round_by_round", "fused"])
def test_a_callbacks_model_holds_the_rounds_grown_so_far_on_a_first_fit_and_a_refit(
    monkeypatch, path
):
    from jaxboost.frontends.training import round_by_round

    if path == "fused":
        monkeypatch.setattr(round_by_round, "runs_round_by_round", lambda cfg: False)
    X, y = _data()
    X[:, 2] = 1.0  # a constant column: the trees number the columns trained on
    booster = jb.Booster(n_estimators=23, max_depth=3)  # chunks of 10, 10 and 3 rounds
    seen = _rounds_seen_by_callbacks(booster, X, y)
    _check_rounds_so_far(seen, booster, X)
    assert seen[0][2] is None  # the booster itself is not fitted until the fit ends
    first = booster.predict_raw(X)
    # a refit on other targets: each round's model is the new fit's, the
    # booster keeps the first fit until the new one ends
    booster.n_estimators = 12
    seen = _rounds_seen_by_callbacks(booster, X, -3.0 * y)
    _check_rounds_so_far(seen, booster, X)
    assert all(np.array_equal(own, first) for _, _, own in seen)
    rmse = [np.sqrt(np.mean((raw + 3.0 * y) ** 2)) for raw, _, _ in seen]
    assert np.all(np.diff(rmse) < 0)


def test_a_callbacks_model_of_several_trees_per_round_predicts_and_saves(tmp_path):
    X, y = _data()
    classes = np.digitize(y, [-0.5, 0.5]).astype(np.float32)
    booster = jb.Booster(
        loss="softmax_cross_entropy",
        n_estimators=6,
        max_depth=2,
        multi_strategy="one_output_per_tree",
    )
    saved = []

    def checkpoint(env):
        path = tmp_path / f"round_{env.iteration}.json"
        env.model.save(path)
        saved.append(path)
        return env.iteration == 4

    booster.fit(X, classes, callbacks=[checkpoint])
    assert booster.n_estimators_ == 4
    for index, path in enumerate(saved):
        np.testing.assert_array_equal(
            jb.load(path).predict(X), booster.predict(X, iteration_range=(0, index + 1))
        )

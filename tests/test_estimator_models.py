"""The estimators' model: ``booster_`` and a saved file carry the feature
names and category maps the estimator was fitted with, ``save`` and
``jaxboost.load`` give back the estimator, and the estimators take their
inputs and peers' arguments as the Booster does."""

import json
import pickle
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_diabetes

import jaxboost as jb
from jaxboost.frontends.fitted.file_format import ModelFileError, document_checksum

SETTINGS = {"n_estimators": 10, "max_depth": 3}


def _diabetes() -> tuple[pd.DataFrame, np.ndarray]:
    """scikit-learn's diabetes data (442 rows) with two category columns:
    ``sex`` as labels, and body-mass index in four labelled bands."""
    data = load_diabetes(as_frame=True)
    X = data.data.copy()
    X["sex"] = pd.Categorical(np.where(X["sex"] > 0, "m", "f"))
    X["bmi_band"] = pd.cut(X["bmi"], 4, labels=["low", "mid", "high", "top"])
    return X, data.target.to_numpy()


@pytest.fixture(scope="module")
def diabetes():
    return _diabetes()


@pytest.fixture(scope="module")
def regressor(diabetes):
    X, y = diabetes
    return jb.Regressor(**SETTINGS).fit(X, y)


def _strictly(call):
    """``call()``, failing on any warning (a names warning means columns by position)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def test_the_estimators_booster_is_the_boosters_model_of_the_frame(diabetes, regressor):
    X, y = diabetes
    booster = regressor.booster_
    assert booster.feature_names_in_ == list(X.columns)
    assert [table.column for table in booster.categories_] == [1, 10]
    assert list(booster.categories_[0].values) == ["f", "m"]
    assert regressor.categories_ is booster.categories_  # one category table
    expected = regressor.predict(X)
    np.testing.assert_array_equal(_strictly(lambda: booster.predict(X)), expected)
    # the reference: a Booster of the same settings fitted on the frame itself
    direct = jb.Booster(**SETTINGS).fit(X, y)
    np.testing.assert_array_equal(direct.predict(X), expected)
    # categories matched by label, whatever the frame's order of them
    relisted = X.assign(sex=X["sex"].cat.reorder_categories(["m", "f"]))
    np.testing.assert_array_equal(booster.predict(relisted), expected)


def test_the_boosters_file_of_an_estimator_predicts_the_frame(diabetes, regressor, tmp_path):
    X, _ = diabetes
    regressor.booster_.save(tmp_path / "booster.json")
    loaded = jb.load(tmp_path / "booster.json")
    assert type(loaded) is jb.Booster  # a Booster's file gives a Booster
    np.testing.assert_array_equal(_strictly(lambda: loaded.predict(X)), regressor.predict(X))


def _same_estimator(loaded, fitted, X):
    """``loaded`` is ``fitted``: class, settings, fitted attributes and predictions."""
    assert type(loaded) is type(fitted)
    params, expected = loaded.get_params(), fitted.get_params()
    if not isinstance(expected["loss"], str):  # a loss object: the Booster's
        params.pop("loss"), expected.pop("loss")
    assert params == expected
    np.testing.assert_array_equal(loaded.feature_names_in_, fitted.feature_names_in_)
    assert loaded.feature_names_in_.dtype == object and loaded.n_features_in_ == X.shape[1]
    assert loaded.n_estimators_ == fitted.n_estimators_
    np.testing.assert_array_equal(loaded.base_score_, fitted.base_score_)
    methods = ["predict"] + ["predict_proba", "decision_function"] * hasattr(fitted, "classes_")
    for method in methods:
        expected = getattr(fitted, method)(X)
        predicted = _strictly(lambda method=method: getattr(loaded, method)(X))
        np.testing.assert_array_equal(predicted, expected)
    np.testing.assert_array_equal(loaded.booster_.predict(X), fitted.booster_.predict(X))


def test_a_saved_regressor_loads_as_the_regressor_and_as_its_pickle(diabetes, regressor, tmp_path):
    X, _ = diabetes
    regressor.save(tmp_path / "regressor.json")
    loaded = jb.load(tmp_path / "regressor.json")
    _same_estimator(loaded, regressor, X)
    _same_estimator(pickle.loads(pickle.dumps(regressor)), regressor, X)
    np.testing.assert_array_equal(
        clone(loaded).fit(X, diabetes[1]).predict(X), regressor.predict(X)
    )


@pytest.mark.parametrize(
    "labels",
    [
        lambda y: np.where(y > 140, "high", "low"),  # strings
        lambda y: np.digitize(y, [100, 200]),  # three integer classes
    ],
    ids=["string labels", "three classes"],
)
def test_a_saved_classifier_keeps_its_classes(diabetes, labels, tmp_path):
    X, y = diabetes
    classifier = jb.Classifier(**SETTINGS).fit(X, labels(y))
    classifier.save(tmp_path / "classifier.json")
    loaded = jb.load(tmp_path / "classifier.json")
    assert loaded.classes_.dtype == classifier.classes_.dtype
    np.testing.assert_array_equal(loaded.classes_, classifier.classes_)
    _same_estimator(loaded, classifier, X)


def test_a_classifiers_own_loss_keeps_its_link_in_the_booster_and_the_file(diabetes, tmp_path):
    X, y = diabetes
    classifier = jb.Classifier(
        loss=lambda label, f: jnp.logaddexp(0.0, f) - label * f, **SETTINGS
    ).fit(X, y > 140)
    # the sigmoid the classifier predicts through is the model's link
    np.testing.assert_array_equal(classifier.booster_.predict(X), classifier.predict_proba(X)[:, 1])
    classifier.save(tmp_path / "custom.json")
    loaded = jb.load(tmp_path / "custom.json")
    _same_estimator(loaded, classifier, X)


def _logloss(label, f):
    return jnp.logaddexp(0.0, f) - label * f


def test_a_classifier_with_its_own_loss_loads_with_it_and_fits_again(diabetes, tmp_path):
    X, y = diabetes
    loss = _logloss  # (no link declared; pickled by name)
    classifier = jb.Classifier(loss=loss, **SETTINGS).fit(X, y > 140)
    classifier.save(tmp_path / "custom.json")
    with pytest.raises(RuntimeError, match=r"jaxboost.load\(path, loss=your_loss\)"):
        jb.load(tmp_path / "custom.json").fit(X, y > 140)
    loaded = jb.load(tmp_path / "custom.json", loss=loss)  # the sigmoid it predicts through
    _same_estimator(loaded, classifier, X)
    assert loaded.get_params()["loss"] is loss
    pickled = pickle.loads(pickle.dumps(classifier))
    for model in (loaded, pickled):  # two rounds more: the pickled estimator's
        model.set_params(warm_start=True, n_estimators=SETTINGS["n_estimators"] + 2)
        model.fit(X, y > 140)
    assert loaded.n_estimators_ == SETTINGS["n_estimators"] + 2
    np.testing.assert_array_equal(loaded.predict_proba(X), pickled.predict_proba(X))


def test_a_saved_ranker_loads_as_the_ranker(diabetes, tmp_path):
    """A saved Ranker loads as the Ranker; its ``booster_`` and model score
    a frame with category and text columns as it does, and the settings a
    Ranker does not take are left at the Booster's defaults."""
    X, y = diabetes
    X = X.assign(bmi_band=X["bmi_band"].astype(str))  # a text column: a category one too
    qid = np.arange(len(y)) // 20
    relevance = np.digitize(y, [100, 150, 200])
    ranker = jb.Ranker(**SETTINGS).fit(X, relevance, qid=qid)
    scores = ranker.predict(X)
    assert [table.column for table in ranker.categories_] == [1, 10]
    np.testing.assert_array_equal(ranker.booster_.predict(X), scores)
    np.testing.assert_array_equal(ranker.booster_.model_.predict(X), scores)
    defaults = jb.Booster().get_params(deep=False)
    left = sorted(set(defaults) - set(jb.Ranker().get_params(deep=False)))
    given = ranker.booster_.get_params(deep=False)
    assert left and {name: given[name] for name in left} == {name: defaults[name] for name in left}
    ranker.save(tmp_path / "ranker.json")
    _same_estimator(jb.load(tmp_path / "ranker.json"), ranker, X)


def test_a_polars_frame_with_a_categorical_column(diabetes, tmp_path):
    pl = pytest.importorskip("polars")
    X, y = diabetes
    columns = {name: X[name].to_numpy() for name in X.columns}
    for name in ("sex", "bmi_band"):
        columns[name] = pl.Series(name, X[name].astype(str).to_numpy()).cast(pl.Categorical)
    frame = pl.DataFrame(columns)
    regressor = jb.Regressor(**SETTINGS).fit(frame, y)
    np.testing.assert_array_equal(regressor.booster_.predict(frame), regressor.predict(frame))
    # the pandas frame's model: the same categories, the same trees
    np.testing.assert_array_equal(
        regressor.predict(frame), jb.Regressor(**SETTINGS).fit(X, y).predict(X)
    )
    regressor.save(tmp_path / "polars.json")
    _same_estimator(jb.load(tmp_path / "polars.json"), regressor, frame)


def test_interval_categories_are_refused_by_save_naming_the_column(diabetes, tmp_path):
    X, y = diabetes
    banded = X.assign(bmi_band=pd.cut(X["bmi"], 4))  # labels are pandas Intervals
    booster = jb.Booster(**SETTINGS).fit(banded, y)
    refused = "column 'bmi_band' has category labels of type"
    with pytest.raises(ValueError, match=f"{refused} Interval"):
        booster.save(tmp_path / "interval.json")
    days = pd.to_timedelta(pd.cut(X["bmi"], 4, labels=False), unit="D")
    dated = X.assign(bmi_band=pd.Categorical(pd.Timestamp("2020-01-01") + days))
    booster = jb.Booster(**SETTINGS).fit(dated, y)
    with pytest.raises(ValueError, match=f"{refused} Timestamp"):
        booster.save(tmp_path / "dated.json")


def _outcome(call):
    """``("value", result)`` or ``("error", its type and message)``."""
    try:
        return "value", call()
    except (TypeError, ValueError) as error:
        return "error", (type(error), str(error))


def _same_outcome(left, right):
    assert left[0] == right[0], (left, right)
    if left[0] == "error":
        assert left[1] == right[1]
    else:
        np.testing.assert_array_equal(left[1], right[1])


def test_a_text_column_meets_the_boosters_answer(diabetes):
    X, y = diabetes
    text = X.assign(bmi_band=X["bmi_band"].astype(str))  # as text, not a category column
    booster = _outcome(lambda: jb.Booster(**SETTINGS).fit(text, y).predict(text))
    estimator = _outcome(lambda: jb.Regressor(**SETTINGS).fit(text, y).predict(text))
    _same_outcome(estimator, booster)
    if booster[0] == "error":  # the column named, not "could not convert string to float"
        assert "'bmi_band'" in booster[1][1]


def test_a_category_column_arriving_as_text_meets_the_boosters_answer(diabetes, regressor):
    X, _ = diabetes
    text = X.assign(sex=X["sex"].astype(str))
    _same_outcome(
        _outcome(lambda: regressor.predict(text)),
        _outcome(lambda: regressor.booster_.predict(text)),
    )


def test_peers_thread_and_verbosity_arguments(diabetes, capsys):
    X, y = diabetes
    silent = jb.Regressor(n_jobs=-1, verbose=-1, **SETTINGS)  # LightGBM's "all cores, quiet"
    assert clone(silent).get_params()["n_jobs"] == -1
    expected = jb.Regressor(**SETTINGS).fit(X, y).predict(X)
    np.testing.assert_array_equal(silent.fit(X, y).predict(X), expected)
    assert capsys.readouterr().out == ""
    one = jb.Regressor(n_jobs=1, verbose=5, **SETTINGS).fit(X, y)
    assert len(one.booster_.devices) == 1
    assert re.findall(r"^\[\s*(\d+)/10\]", capsys.readouterr().out, re.MULTILINE) == ["5", "10"]
    one.fit(X, y, verbose=False)  # fit's keyword wins
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="n_jobs, devices: give one of them"):
        jb.Regressor(n_jobs=2, devices=jax.devices()[:1], **SETTINGS).fit(X, y)
    with pytest.raises(ValueError, match="n_jobs: expected a whole number other than 0"):
        jb.Regressor(n_jobs=0, **SETTINGS).fit(X, y)
    # XGBoost's and LightGBM's log level: info (2) prints progress every round
    jb.Classifier(verbosity=2, n_jobs=1, **SETTINGS).fit(X, y > 140)
    assert len(re.findall(r"^\[\s*\d+/10\]", capsys.readouterr().out, re.MULTILINE)) == 10
    jb.Classifier(verbosity=0, n_jobs=1, **SETTINGS).fit(X, y > 140)
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="verbosity: expected None or a whole number"):
        jb.Regressor(verbosity="info", **SETTINGS).fit(X, y)


def _rewritten(path, change):
    document = json.loads(path.read_text())
    change(document)
    document.pop("checksum")
    document["checksum"] = document_checksum(document)
    path.write_text(json.dumps(document))
    return path


def test_a_version_3_boosters_file_still_loads(diabetes, regressor, tmp_path):
    regressor.booster_.save(tmp_path / "booster.json")
    older = _rewritten(tmp_path / "booster.json", lambda d: d.update({"version": 3}))
    loaded = _strictly(lambda: jb.load(older))
    np.testing.assert_array_equal(loaded.predict(diabetes[0]), regressor.predict(diabetes[0]))


def test_an_estimator_section_is_checked(regressor, tmp_path):
    regressor.save(tmp_path / "model.json")
    text = (tmp_path / "model.json").read_text()
    edited = tmp_path / "edited.json"
    edited.write_text(text.replace('"Regressor"', '"Classifier"'))
    with pytest.raises(ModelFileError, match="checksum: the content does not match"):
        jb.load(edited)
    cases = {
        "an unknown class": (
            lambda d: d["estimator"].update({"class": "os.system"}),
            "estimator.class: expected one of",
        ),
        "too few names": (
            lambda d: d["estimator"]["state"].update({"feature_names_in_": ["age"]}),
            "feature_names_in_: expected null or one name per feature",
        ),
        "a setting of the wrong type": (
            lambda d: d["estimator"]["params"].update({"max_depth": "3"}),
            "estimator.params.max_depth: expected int",
        ),
        "a version 3 file": (lambda d: d.update({"version": 3}), "unexpected keys.*estimator"),
    }
    for change, message in cases.values():
        (tmp_path / "model.json").write_text(text)
        with pytest.raises(ModelFileError, match=message):
            jb.load(_rewritten(tmp_path / "model.json", change))


def test_an_array_of_text_meets_the_boosters_answer(diabetes):
    X, y = diabetes
    text = X.astype({"sex": str, "bmi_band": str}).to_numpy(dtype=object)  # strings at 1, 10
    booster = _outcome(lambda: jb.Booster(**SETTINGS).fit(text, y))
    assert booster[0] == "error" and "categorical_features=[1]" in booster[1][1]
    qid = np.arange(len(y)) // 20
    fits = [
        lambda: jb.Regressor(**SETTINGS).fit(text, y),
        lambda: jb.Classifier(**SETTINGS).fit(text, y > 140),
        lambda: jb.Ranker(**SETTINGS).fit(text, np.digitize(y, [150]), qid=qid),
    ]
    for fit in fits:  # the column named, not "could not convert string to float"
        _same_outcome(_outcome(fit), booster)
    with pytest.raises(ValueError, match=r"\(column 1\).*categorical_features=\[1\]"):
        jb.Regressor(**SETTINGS).fit(text.astype(str), y)
    # an evaluation set as an array: the frame's category columns are its categories
    with_frame = jb.Regressor(**SETTINGS).fit(X, y, eval_set=[(X, y)])
    with pytest.warns(UserWarning, match="does not have .*feature names"):
        with_array = jb.Regressor(**SETTINGS).fit(X, y, eval_set=[(X.to_numpy(dtype=object), y)])
    assert with_array.evals_result_ == with_frame.evals_result_
    numbers = X.drop(columns=["sex", "bmi_band"]).to_numpy()
    strings = numbers.astype(object)
    strings[:, 0] = text[:, 1]
    with pytest.raises(ValueError, match=r"eval_set\[0\] X: .*categorical_features=\[0\]"):
        jb.Regressor(**SETTINGS).fit(numbers, y, eval_set=[(strings, y)])


def test_the_estimators_predict_through_the_models_one_link(diabetes, monkeypatch):
    """`predict`, `staged_predict` and `predict_proba` are the model's
    link of the raw scores (they applied the link themselves), and equal
    ``booster_.predict`` and ``booster_.model_.predict`` on a frame with
    category and text columns (a Ranker's: `test_a_saved_ranker_loads_as_the_ranker`)."""
    from jaxboost.frontends.fitted.model import Model

    X, y = diabetes
    X = X.assign(bmi_band=X["bmi_band"].astype(str))  # a text column: a category one too
    links = []
    link = Model.link
    monkeypatch.setattr(Model, "link", lambda self, raw: links.append(1) or link(self, raw))
    regressor = jb.Regressor(loss="poisson", **SETTINGS).fit(X, y)
    predicted = regressor.predict(X)
    assert links and [table.column for table in regressor.categories_] == [1, 10]
    np.testing.assert_array_equal(predicted, regressor.booster_.predict(X))
    np.testing.assert_allclose(predicted, np.exp(regressor.booster_.predict_raw(X)), rtol=1e-6)
    # (the staged sums add the rounds in another order: float32 rounding apart)
    np.testing.assert_allclose(list(regressor.staged_predict(X))[-1], predicted, rtol=1e-6)
    classifier = jb.Classifier(**SETTINGS).fit(X, y > 140)
    links.clear()
    proba = classifier.predict_proba(X)
    assert links
    np.testing.assert_array_equal(proba[:, 1], classifier.booster_.predict(X))
    for estimator, output in ((regressor, predicted), (classifier, proba[:, 1])):
        np.testing.assert_array_equal(estimator.booster_.model_.predict(X), output)

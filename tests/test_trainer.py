"""`train` (jaxboost.frontends.training.trainer): settings and checked inputs in, a
`Model` out, without going back to a front end; the holdout's two fits
(jaxboost.frontends.training.holdout) are two calls of it."""

import numpy as np
import pandas as pd
import pytest

import jaxboost as jb
from jaxboost.frontends.data import categories as categories_module
from jaxboost.frontends.fitted.model import Model
from jaxboost.frontends.settings.checks import draw_seed
from jaxboost.frontends.settings.settings_table import settings_record
from jaxboost.frontends.training import fit_inputs as fit_inputs_module
from jaxboost.frontends.training.fit_inputs import FitArguments, fit_inputs
from jaxboost.frontends.training.holdout import PATIENCE, holdout_rows
from jaxboost.frontends.training.trainer import train

SMALL = {"n_estimators": 3, "max_depth": 2, "max_bins": 16, "random_state": 0}


def _data(seed=0, n_rows=120):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 3)).astype(np.float32)
    return X, (X[:, 0] + 0.1 * rng.normal(size=n_rows)).astype(np.float32)


def test_train_gives_the_model_that_fit_keeps():
    X, y = _data()
    booster = jb.Booster(**SMALL)
    settings = settings_record(booster)
    arguments = FitArguments(X, y, None, None, None, None, None)
    inputs = fit_inputs(settings, arguments, names=None, categories=None)
    model = train(settings, inputs)
    assert isinstance(model, Model) and not hasattr(booster, "forest_")
    booster.fit(X, y)
    assert set(model.fields()) == set(booster.model_.fields())
    np.testing.assert_array_equal(model.forest_.leaf_value, booster.forest_.leaf_value)
    np.testing.assert_array_equal(model.predict(X), booster.predict(X))


def test_a_record_of_the_settings_is_frozen_for_the_fit():
    booster = jb.Booster(**SMALL)
    settings = settings_record(booster, n_estimators=5)
    booster.set_params(max_depth=4)
    assert (settings.n_estimators, settings.max_depth) == (5, 2)
    with pytest.raises(AttributeError):
        settings.max_depth = 3


def test_a_holdout_fit_enters_fit_once_and_checks_all_rows_once(monkeypatch):
    """The holdout's fits are trainer calls on one checked record:
    ``Booster.fit`` runs once (it ran three times, copies of the Booster
    re-entering it), and the rows are checked and their categories fitted
    once (the kept rows were checked and their categories fitted again)."""
    X, y = _data(n_rows=60)
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "cut": np.array(["x", "y", "z"] * 20)})
    fits, checked, category_fits = [], [], []
    fit = jb.Booster.fit
    check = fit_inputs_module.checked_inputs
    fit_categories = categories_module.fit_categories
    monkeypatch.setattr(
        jb.Booster, "fit", lambda self, *a, **k: fits.append(1) or fit(self, *a, **k)
    )

    def counted(settings, arguments, names):
        checked.append(len(arguments.y))
        return check(settings, arguments, names)

    def counted_categories(X, *args):
        category_fits.append(len(X))
        return fit_categories(X, *args)

    monkeypatch.setattr(fit_inputs_module, "checked_inputs", counted)
    monkeypatch.setattr(categories_module, "fit_categories", counted_categories)
    booster = jb.Booster(loss="gaussian_nll", **{**SMALL, "n_estimators": 4}).fit(frame, y)
    assert len(fits) == 1
    assert checked == [60] and category_fits == [60]
    assert booster.evals_result_ and booster.n_estimators_ >= 1


def test_the_holdouts_first_fit_is_a_fit_of_the_kept_rows_watching_the_held_ones():
    X, y = _data(n_rows=60)
    settings = {**SMALL, "n_estimators": 6, "learning_rate": 0.5}
    booster = jb.Booster(loss="gaussian_nll", early_stopping=True, **settings).fit(X, y)
    held = holdout_rows(60, int(draw_seed(SMALL["random_state"])))
    watched = jb.Booster(loss="gaussian_nll", early_stopping=False, **settings).fit(
        X[~held], y[~held], eval_set=[(X[held], y[held])], early_stopping_rounds=PATIENCE
    )
    np.testing.assert_allclose(
        booster.evals_result_["validation_0"]["loss"],
        watched.evals_result_["validation_0"]["loss"],
        rtol=1e-6,
    )
    assert booster.best_iteration_ == watched.best_iteration_

"""The defaults of a Fisher-scored fit: a prior of 5 rows
(jaxboost.frontends.settings.regularisation_defaults) and rounds chosen on held-out
rows (jaxboost.frontends.training.holdout), only where the user set neither, and
never for a point loss."""

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes
from sklearn.model_selection import KFold

import jaxboost as jb
from jaxboost import losses
from jaxboost.frontends.training.holdout import HOLDOUT_FRACTION, holdout_rows


def _gaussian_nll(y, mean, sd):
    return float(np.mean(np.log(sd) + 0.5 * ((y - mean) / sd) ** 2 + 0.5 * np.log(2 * np.pi)))


def _noisy(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    y = (X[:, 0] + np.exp(0.5 * X[:, 1]) * rng.normal(size=n)).astype(np.float32)
    return X, y


def test_diabetes_held_out_nll_at_defaults_beats_a_constant_gaussian():
    # raw targets (sd 77), 353 training rows: at depth 6 and learning rate 0.1
    # with no prior and 100 rounds the scale overfits (held-out NLL 92)
    X, y = load_diabetes(return_X_y=True)
    train, test = next(KFold(5, shuffle=True, random_state=0).split(X))
    model = jb.Booster(loss=losses.gaussian_nll).fit(X[train], y[train])
    raw = np.asarray(model.predict_raw(X[test]), np.float64)
    nll = _gaussian_nll(y[test], raw[:, 0], np.exp(raw[:, 1]))
    constant = _gaussian_nll(y[test], y[train].mean(), y[train].std())
    assert nll < constant
    assert model.n_estimators_ == model.best_iteration_ < 100


def test_the_defaults_apply_only_where_not_set():
    X, y = _noisy()
    X_test = _noisy(seed=1)[0]
    auto = jb.Booster(loss=losses.gaussian_nll).fit(X, y)
    # the same as setting them: a prior of 5 rows, the holdout's rounds
    rounds = auto.n_estimators_
    given = jb.Booster(
        loss=losses.gaussian_nll, reg_lambda=5.0, n_estimators=rounds, early_stopping=False
    ).fit(X, y)
    np.testing.assert_allclose(auto.predict_raw(X_test), given.predict_raw(X_test), rtol=1e-6)
    # an explicit reg_lambda is kept (holdout still on), explicit False: 100 rounds
    lam = jb.Booster(loss=losses.gaussian_nll, reg_lambda=1.0, early_stopping=False).fit(X, y)
    assert lam.n_estimators_ == 100 and lam.best_iteration_ is None
    five = jb.Booster(loss=losses.gaussian_nll, reg_lambda=5.0, early_stopping=False).fit(X, y)
    assert not np.allclose(lam.predict_raw(X_test), five.predict_raw(X_test))
    # the user's own eval_set: watched as given, no holdout
    watched = jb.Booster(loss=losses.gaussian_nll).fit(X, y, eval_set=[(X_test, X_test[:, 0])])
    assert (
        watched.n_estimators_ == 100 and len(watched.evals_result_["validation_0"]["loss"]) == 100
    )


def test_point_losses_keep_their_defaults():
    X, y = _noisy()
    auto = jb.Booster().fit(X, y)
    given = jb.Booster(reg_lambda=1.0, early_stopping=False).fit(X, y)
    assert auto.n_estimators_ == 100 and auto.best_iteration_ is None
    np.testing.assert_array_equal(auto.predict(X), given.predict(X))
    # the observed hessian asked for: a Newton fit, no holdout
    diag = jb.Booster(loss=losses.gaussian_nll, hessian="diag", n_estimators=20).fit(X, y)
    assert diag.n_estimators_ == 20


def test_early_stopping_true_holds_out_for_any_loss_and_regressor_passes_it():
    X, y = _noisy()
    model = jb.Booster(early_stopping=True, learning_rate=0.5).fit(X, y)
    assert model.n_estimators_ == model.best_iteration_ < 100
    assert model.n_estimators == 100  # the setting is kept
    regressor = jb.Regressor(loss=losses.gaussian_nll).fit(X, y)
    booster = jb.Booster(loss=losses.gaussian_nll).fit(X, y)
    assert regressor.n_estimators_ == booster.n_estimators_
    np.testing.assert_allclose(regressor.predict(X), booster.predict(X), rtol=1e-6)


def test_holdout_rows_are_a_seeded_fifth():
    held = holdout_rows(101, seed=3)
    assert held.sum() == round(HOLDOUT_FRACTION * 101)
    np.testing.assert_array_equal(held, holdout_rows(101, seed=3))
    assert holdout_rows(2, seed=0).sum() == 1


@pytest.mark.parametrize("setting", ["yes", 1, None])
def test_bad_early_stopping_names_the_setting(setting):
    X, y = _noisy(50)
    with pytest.raises(ValueError, match="early_stopping: expected 'auto', True or False"):
        jb.Booster(early_stopping=setting).fit(X, y)


def test_early_stopping_true_with_an_eval_set_says_what_to_do():
    X, y = _noisy(50)
    with pytest.raises(ValueError, match="early_stopping=False to watch your eval_set"):
        jb.Booster(early_stopping=True).fit(X, y, eval_set=[(X, y)])


def test_holdout_slices_a_polars_frame_by_its_rows_keeping_string_columns():
    # the holdout resliced frames through np.asarray: a String column became
    # objects and the frame that fits without the holdout was refused
    pl = pytest.importorskip("polars")
    X, y = _noisy(60)
    cut = np.array(["fair", "good", "ideal"])[np.arange(60) % 3]
    columns = {"a": X[:, 0], "b": X[:, 1], "cut": cut}
    frame, pandas_frame = pl.DataFrame(columns), pd.DataFrame(columns)
    settings = {"n_estimators": 10, "max_depth": 2, "early_stopping": True, "learning_rate": 0.5}
    model = jb.Booster(**settings).fit(frame, y)
    same = jb.Booster(**settings).fit(pandas_frame, y)  # pandas rows: .iloc
    assert list(model.feature_names_in_) == ["a", "b", "cut"]
    assert model.n_estimators_ == same.n_estimators_
    np.testing.assert_allclose(model.predict(frame), same.predict(pandas_frame), rtol=1e-6)


def _counts(n=64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)).astype(np.float32)
    exposure = rng.uniform(1.0, 10.0, size=n)
    return X, rng.poisson(exposure).astype(np.float32), np.log(exposure)


@pytest.mark.parametrize(
    ("family", "offsets", "message"),
    [
        ("poisson", lambda o: o[:-1], r"init_score: expected .* shape \(64,\), got \(63, 1\)"),
        ("poisson", lambda o: np.where(np.arange(64) == 60, np.inf, o), "init_score: row 60 is"),
        (
            "negative_binomial",
            lambda o: o,
            r"init_score: .* shape \(64, 2\), got \(64,\).*np\.c_\[log_exposure, np\.zeros",
        ),
        # the zero-inflated Poisson's rate is its second column: the hint put
        # log(exposure) in the gate's, a model that trained silently wrong
        (
            "zero_inflated_poisson",
            lambda o: o,
            (
                r"\(0: gate, 1: rate\); .* 'rate' column \(1\), zeros in the others: "
                r"np\.c_\[np\.zeros\(n_rows\), log_exposure\]$"
            ),
        ),
        # a loss with no rate or mean: the columns, and no exposure's column
        ("normal", lambda o: o, r"raw score \(0: loc, 1: scale\)$"),
    ],
)
def test_holdout_checks_offsets_against_the_users_rows(family, offsets, message):
    # checked after the split, they named the fit part's rows (51 of 64, row
    # 47 for the user's 60) or gave an IndexError
    X, y, log_exposure = _counts()
    model = jb.Booster(loss=losses.distribution(family), n_estimators=5, max_depth=2)
    with pytest.raises(ValueError, match=message):
        model.fit(X, y, init_score=offsets(log_exposure))


def test_a_count_held_out_alone_is_traded_into_the_fit_part():
    # one count in 64, drawn into the held-out rows: the fit part was all 0,
    # which has no finite minimiser (refused as y, though y has a count)
    from jaxboost.frontends.settings.checks import draw_seed

    X, _, _ = _counts()
    held = np.flatnonzero(holdout_rows(64, int(draw_seed(0))))
    y = np.where(np.arange(64) == held[0], 2.0, 0.0).astype(np.float32)
    model = jb.Booster(
        loss=losses.distribution("poisson"), n_estimators=3, max_depth=2, random_state=0
    ).fit(X, y)
    np.testing.assert_allclose(model.base_score_, [np.log(2.0 / 64)], rtol=1e-4)

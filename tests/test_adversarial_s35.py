"""A user's attacks on what landed with issues 51 and 52 (native
categorical search, LambdaRank by comparison, cached catalogue lifts, the
fused program without its stuck-leaf search, leaf-wise node tables with
``max_depth``): each test states what the user expects and failed before
its fix."""

import warnings

import numpy as np
import pandas as pd
import pytest

import jaxboost as jb


def test_lossguide_with_a_small_max_depth_and_no_max_leaves_grows_within_the_depth():
    # a LightGBM user's grow_policy="lossguide", max_depth=2 (num_leaves left
    # at its default) was refused: "max_leaves: 31 leaves do not fit in trees
    # of max_depth=2", naming a value the user never set; LightGBM grows
    # within the depth, and 2^max_depth leaves are the depth-wise trees
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=120)).astype(np.float32)
    settings = {"n_estimators": 3, "max_depth": 2, "min_child_samples": 0}
    leafwise = jb.Booster(grow_policy="lossguide", **settings).fit(X, y)
    depthwise = jb.Booster(**settings).fit(X, y)
    np.testing.assert_allclose(leafwise.predict_raw(X), depthwise.predict_raw(X), rtol=1e-6)
    assert np.asarray(leafwise.apply(X)).max() <= 3


@pytest.mark.parametrize("estimator", ["Regressor", "Ranker"])
def test_an_estimators_continued_fit_warns_of_names_on_one_side(estimator):
    # the Booster warns where X and init_model have feature names on one side
    # only (the columns are then taken by position); the estimators silenced
    # that warning with their own (scikit-learn's), which a fit never gives
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)).astype(np.float32)
    y = np.clip(np.round(X[:, 0] + 1), 0, 3).astype(np.float32)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    fit = {"group": [30, 30]} if estimator == "Ranker" else {}
    make = getattr(jb, estimator)
    first = make(n_estimators=1, max_depth=2).fit(frame, y, **fit)
    with pytest.warns(UserWarning, match="X does not have feature names, but init_model"):
        make(n_estimators=1, max_depth=2).fit(X, y, init_model=first, **fit)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # names on both sides: no warning
        make(n_estimators=1, max_depth=2).fit(frame, y, init_model=first, **fit)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        # LightGBM's and XGBoost's "no bound" name None
        ({"max_depth": -1}, r"max_depth: .*or None for no bound, got -1"),
        ({"max_depth": 0, "grow_policy": "lossguide"}, r"max_depth: .*None for no bound, got 0"),
        # constrained leaf-wise trees grow within depth 6: 100 leaves never grew
        (
            {"max_leaves": 100, "monotone_constraints": [1, 0, 0]},
            r"max_leaves: .*constraints grow within max_depth \(None: 6, at most 64 leaves\).*set max_depth >= 7",
        ),
    ],
)
def test_a_depth_bound_a_user_of_lightgbm_or_xgboost_would_give_names_the_fix(settings, message):
    X = np.random.default_rng(0).normal(size=(60, 3))
    with pytest.raises(ValueError, match=message):
        jb.Booster(n_estimators=2, **settings).fit(X, X[:, 0])

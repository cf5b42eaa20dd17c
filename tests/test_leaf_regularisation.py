"""reg_lambda in line-search leaves: losses with curvature minimise the leaf's
loss plus reg_lambda/2 v^2 (finite where the loss alone falls without
bound), losses without curvature keep their exact quantile leaves."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses


@pytest.fixture(scope="module")
def classification():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6)).astype(np.float32)
    logit = X[:, 0] - 0.5 * X[:, 1] ** 2 + np.sin(X[:, 2])
    y = (rng.uniform(size=3000) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return X[:2000], y[:2000], X[2000:], y[2000:]


@pytest.mark.parametrize("name", ["binary_logloss", "exponential"])
@pytest.mark.parametrize("subsample", [1.0, 0.7])
def test_line_search_leaves_of_one_class_stay_finite(classification, name, subsample):
    """Depth-6 leaves of one class: the leaf's log loss or exponential loss
    falls without bound, and the unpenalised search stopped where float32
    slopes underflow (3000 rows, 30 rounds: scores of 19 to 90, held-out
    exponential loss 4e25; with subsampling the training loss rose to 5e9
    from the rows each pure sample left out).  The held-out error stays that
    of Newton leaves."""
    X, y, X_test, y_test = classification
    settings = {"n_estimators": 20, "learning_rate": 0.2, "max_depth": 6, "subsample": subsample}
    searched = jb.Booster(loss=name, leaf_method="line_search", **settings).fit(X, y)
    newton = jb.Booster(loss=name, leaf_method="newton", **settings).fit(X, y)
    assert np.all(np.diff(searched.train_loss_) <= 1e-6), np.diff(searched.train_loss_).max()
    raw = searched.predict_raw(X_test)
    assert np.abs(raw).max() < 10
    searched_error = np.mean((raw.reshape(-1) > 0) != (y_test > 0.5))
    newton_error = np.mean((newton.predict_raw(X_test).reshape(-1) > 0) != (y_test > 0.5))
    assert searched_error < newton_error + 0.03, (searched_error, newton_error)


def test_quantile_line_search_leaves_stay_exact_quantiles_with_reg_lambda():
    """XGBoost and LightGBM set pinball leaves to the residuals' quantile
    whatever the L2 penalty; so does reg_lambda=1 (a point loss's default) here."""
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(600, 2)).astype(np.float32)
    y = (3 * X[:, 0] + rng.normal(size=600)).astype(np.float32)
    model = jb.Booster(
        loss=losses.quantile(0.8), n_estimators=1, learning_rate=1.0, max_depth=2, reg_lambda=1.0
    ).fit(X, y)
    assert model.leaf_method_ == "line_search"
    prediction = model.predict_raw(X)
    leaves = np.unique(prediction)
    assert len(leaves) == 4
    for value in leaves:
        rows = y[prediction == value]
        # the inverted-CDF quantile: the smallest target with 80% of the
        # leaf's rows at or below it
        expected = np.sort(rows)[int(np.ceil(0.8 * rows.size)) - 1]
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5)


def test_newton_leaves_for_a_loss_without_curvature_warn():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 2)).astype(np.float32)
    # and its Newton leaves -G / reg_lambda overshoot: Armijo's safeguard goes on, said too
    with (
        pytest.warns(UserWarning, match="training loss rose at round 1"),
        pytest.warns(UserWarning, match="leaf_method='newton' with a loss whose hessian"),
    ):
        jb.Booster(loss="absolute_error", leaf_method="newton", n_estimators=2, max_depth=2).fit(
            X, X[:, 0]
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jb.Booster(loss="absolute_error", n_estimators=2, max_depth=2).fit(X, X[:, 0])


@losses.declare(name="test_relative_log_cosh")
def relative_log_cosh(y, f):
    """log cosh of the relative error (f - y) / y: hessian sech^2 / y^2."""
    r = (f - y) / y
    return jnp.logaddexp(r, -r) - jnp.log(2.0)


def test_a_default_reg_lambda_is_measured_against_a_small_hessian():
    # diabetes' raw targets (25 to 346): the relative error's hessian is about
    # 1e-4 per row, and reg_lambda=1 weighed as much as 10^4 rows
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split

    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    settings = {"loss": relative_log_cosh, "n_estimators": 100, "max_depth": 3}
    with pytest.warns(UserWarning, match=r"reg_lambda: the loss's mean hessian .* is 8\.5.e-05"):
        model = jb.Booster(**settings).fit(X_train, y_train)
    constant = float(model.init_score_[0])

    def mape(prediction):
        return float(np.mean(np.abs(prediction - y_test) / y_test))

    assert mape(np.full_like(y_test, constant)) > 0.44
    assert mape(model.predict(X_test)) < 0.40
    assert model.train_loss_[-1] < 0.5 * model.train_loss_[0]
    # the value taken: 100 rows' hessian at the initial score (numpy)
    residual = (constant - y_train) / y_train
    mean_hessian = np.mean(1 / np.cosh(residual) ** 2 / y_train**2)
    explicit = jb.Booster(reg_lambda=100 * mean_hessian, **settings).fit(X_train, y_train)
    np.testing.assert_allclose(model.predict(X_test), explicit.predict(X_test), rtol=1e-4)
    # declared convex (no probe needed for its shape), it is measured alike
    convex = losses.declare(relative_log_cosh.__wrapped__, name="test_convex_rel", convex=True)
    with pytest.warns(UserWarning, match="reg_lambda: the loss's mean hessian"):
        declared = jb.Booster(**{**settings, "loss": convex}).fit(X_train, y_train)
    np.testing.assert_allclose(declared.predict(X_test), model.predict(X_test), rtol=1e-4)
    # an explicit reg_lambda keeps its plain meaning (hessian units), unwarned
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = jb.Booster(reg_lambda=1.0, **settings).fit(X_train, y_train)
    assert plain.train_loss_[-1] > 0.8 * plain.train_loss_[0]

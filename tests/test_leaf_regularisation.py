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
    constant = float(model.base_score_[0])

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


def test_uniformly_small_sample_weights_warn_naming_the_penalties():
    # reg_lambda and min_child_weight are sums of weighted hessians: weights
    # of 1e-6 leave the squared error's fit at its constant (as in XGBoost)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (2 * X[:, 0] + rng.normal(size=200)).astype(np.float32)
    settings = {"loss": "squared_error", "n_estimators": 5, "max_depth": 2}
    message = (
        r"sample_weight: the rows' mean positive weight is 1e-06, and reg_lambda=1 and "
        r"min_child_weight=0\.001 .* Scale the weights up"
    )
    with pytest.warns(UserWarning, match=message):
        small = jb.Booster(**settings).fit(X, y, sample_weight=np.full(200, 1e-6))
    assert small.train_loss_[-1] > 0.99 * small.train_loss_[0]
    # the way out: the same weights scaled up fit as unit weights do
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unit = jb.Booster(**settings).fit(X, y, sample_weight=np.full(200, 1.0))
        counts = jb.Booster(**settings).fit(X, y, sample_weight=np.arange(200) % 5 + 1.0)
    assert unit.train_loss_[-1] < 0.7 * unit.train_loss_[0]
    assert counts.train_loss_[-1] < 0.7 * counts.train_loss_[0]
    scaled = jb.Booster(**settings).fit(X, y, sample_weight=np.full(200, 1e-6) * 1e6)
    np.testing.assert_allclose(scaled.predict(X), unit.predict(X), rtol=1e-5, atol=1e-5)


def test_a_default_reg_lambda_is_measured_against_the_weighted_hessian():
    # your own squared error (hessian 1) under weights of 1e-4: a leaf's
    # hessian sum is 1e-4 a row, so the default is 100 rows' worth, 0.01
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (2 * X[:, 0] + rng.normal(size=200)).astype(np.float32)
    weight = np.full(200, 1e-4)
    settings = {"loss": lambda y, f: 0.5 * (y - f) ** 2, "n_estimators": 5, "max_depth": 2}
    with pytest.warns(UserWarning, match=r"mean hessian \(times sample_weight, of mean 0\.0001\)"):
        model = jb.Booster(**settings).fit(X, y, sample_weight=weight)
    explicit = jb.Booster(reg_lambda=100 * 1e-4, **settings).fit(X, y, sample_weight=weight)
    np.testing.assert_allclose(model.predict(X), explicit.predict(X), rtol=1e-5, atol=1e-5)


@losses.declare(name="test_own_gaussian", n_outputs=2, link="mean_scale")
def own_gaussian(y, f):
    """A Gaussian's negative log likelihood in (mean, log sd), no Fisher
    information declared: the mean's hessian exp(-2 f[1]), the log sd's
    2 (y - f[0])^2 exp(-2 f[1])."""
    return f[1] + 0.5 * jnp.square((y - f[0]) * jnp.exp(-f[1]))


def test_a_default_reg_lambda_is_measured_on_the_output_of_smallest_hessian():
    # diabetes' raw targets (sd 77): the mean's hessian is 1.7e-4 a row, the
    # log sd's about 2; their mean over outputs (1) left reg_lambda at 1
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    settings = {"loss": own_gaussian, "n_estimators": 20, "max_depth": 2}
    with pytest.warns(UserWarning, match=r"mean hessian \(output 0 of 2\) .* is 0\.000169 per row"):
        model = jb.Booster(**settings).fit(X, y)
    mean_hessian = np.exp(-2 * float(model.base_score_[1]))  # the mean's, every row
    explicit = jb.Booster(reg_lambda=100 * mean_hessian, **settings).fit(X, y)
    np.testing.assert_allclose(model.predict_raw(X), explicit.predict_raw(X), rtol=1e-4)
    plain = jb.Booster(reg_lambda=1.0, **settings).fit(X, y)
    assert model.train_loss_[-1] < plain.train_loss_[-1] - 0.05


def test_a_catalogue_loss_keeps_reg_lambda_one_whatever_its_hessian():
    # a log loss of 1% positives (hessian 0.0099 a row) keeps XGBoost's 1:
    # fit's loss arrives keyed, and was measured as one's own (0.99, warned)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3)).astype(np.float32)
    y = (np.arange(2000) % 100 == 0).astype(np.float32)
    settings = {"loss": "binary_logloss", "n_estimators": 3, "max_depth": 2}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = jb.Booster(**settings).fit(X, y)
    explicit = jb.Booster(reg_lambda=1.0, **settings).fit(X, y)
    np.testing.assert_array_equal(model.predict_raw(X), explicit.predict_raw(X))


def test_a_default_min_child_weight_is_scaled_with_reg_lambda():
    # targets near 1e4: the relative error's hessian is about 1e-8 a row, so
    # min_child_weight=1e-3 asked for 1e5 rows per child and no tree split,
    # at the defaults and with reg_lambda=0 alike (diamonds: MAPE 0.61 for 0.23)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (1e4 * np.exp(0.5 * X[:, 0] + 0.1 * rng.normal(size=200))).astype(np.float32)
    settings = {"loss": relative_log_cosh, "n_estimators": 5, "max_depth": 2}
    message = r"and min_child_weight=0\.001 ask for .* rows per child; .* of 0\.1 rows, min_child"
    with pytest.warns(UserWarning, match=message):
        model = jb.Booster(**settings).fit(X, y)
    assert model.train_loss_[-1] < 0.9 * model.train_loss_[0]  # (unsplit: equal)
    # the values taken: 100 rows' and a tenth of a row's hessian at the initial score (numpy)
    residual = (float(model.base_score_[0]) - y.astype(np.float64)) / y
    mean_hessian = np.mean(1 / np.cosh(residual) ** 2 / y.astype(np.float64) ** 2)
    explicit = jb.Booster(
        reg_lambda=100 * mean_hessian, min_child_weight=0.1 * mean_hessian, **settings
    ).fit(X, y)
    np.testing.assert_allclose(model.predict(X), explicit.predict(X), rtol=1e-4)
    # reg_lambda given: min_child_weight left at None still scales (unwarned)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unpenalised = jb.Booster(reg_lambda=0.0, **settings).fit(X, y)
    assert unpenalised.train_loss_[-1] < 0.9 * unpenalised.train_loss_[0]
    # a given min_child_weight above half the rows' hessian sum: no split, said
    with pytest.warns(UserWarning, match=r"min_child_weight: 0\.001 is more than half"):
        blocked = jb.Booster(reg_lambda=0.0, min_child_weight=1e-3, **settings).fit(X, y)
    assert blocked.train_loss_[-1] == blocked.train_loss_[0]

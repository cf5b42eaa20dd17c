"""Non-convex and flat losses still train, and never make the training loss worse."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb


def cauchy(y, f):
    return jnp.log1p(((f - y) / 0.5) ** 2)


def tukey_biweight(y, f, c=1.5):
    r = jnp.minimum(jnp.abs(f - y) / c, 1.0)
    return c**2 / 6 * (1 - (1 - r**2) ** 3)


def welsch(y, f):
    return 1 - jnp.exp(-0.5 * (f - y) ** 2)


def ramp(y, f):  # piecewise linear: hessian 0 almost everywhere
    return jnp.clip(jnp.abs(f - y), 0.0, 2.0)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(400, 3)).astype(np.float32)
    y = (np.sin(X[:, 0]) + 0.1 * rng.normal(size=400)).astype(np.float32)
    outliers = rng.uniform(size=400) < 0.1
    y[outliers] += rng.normal(scale=20, size=outliers.sum())
    return X, y


@pytest.mark.parametrize("loss", [cauchy, tukey_biweight, welsch, ramp])
def test_line_search_never_increases_the_training_loss(data, loss):
    X, y = data
    model = jb.Booster(
        loss=loss, n_estimators=30, max_depth=3, leaf_method="line_search", learning_rate=0.5
    ).fit(X, y)
    increases = np.diff(model.train_loss_)
    assert np.all(increases <= 1e-6 * model.train_loss_[:-1]), increases.max()
    assert model.train_loss_[-1] < 0.9 * model.train_loss_[0]


@pytest.mark.parametrize("mode", ["clip", "abs"])
def test_stabilised_newton_trains_a_non_convex_loss(data, mode):
    X, y = data
    model = jb.Booster(
        loss=tukey_biweight,
        n_estimators=30,
        max_depth=3,
        leaf_method="newton",
        hessian_mode=mode,
        hessian_floor=1e-2,
        armijo=True,
    ).fit(X, y)
    assert np.all(np.diff(model.train_loss_) <= 1e-6 * model.train_loss_[:-1])
    assert model.train_loss_[-1] < 0.9 * model.train_loss_[0]


def _largest_error_on_the_sine(model, shift=0.0):
    """The model's largest distance from ``sin(x0) + shift``, the data's signal,
    on a grid of x0 in [-1.5, 1.5]."""
    grid = np.column_stack([np.linspace(-1.5, 1.5, 7), np.zeros(7), np.zeros(7)]).astype(np.float32)
    return np.max(np.abs(model.predict(grid) - shift - np.sin(grid[:, 0])))


def test_a_robust_loss_follows_the_signal_not_the_outliers(data):
    X, y = data
    robust = jb.Booster(loss=cauchy, n_estimators=60, max_depth=3).fit(X, y)
    squared = jb.Booster(loss="squared_error", n_estimators=60, max_depth=3).fit(X, y)
    assert _largest_error_on_the_sine(robust) < 0.2
    assert _largest_error_on_the_sine(squared) > 0.5


def test_an_undeclared_flat_hessian_switches_to_first_order_and_line_search(data):
    X, y = data
    model = jb.Booster(loss=ramp, n_estimators=20, max_depth=3).fit(X, y)
    assert (model.leaf_method_, model.split_criterion_) == ("line_search", "first_order")
    assert model.train_loss_[-1] < 0.7 * model.train_loss_[0]
    newton = jb.Booster(loss="squared_error", n_estimators=2, max_depth=3).fit(X, y)
    assert (newton.leaf_method_, newton.split_criterion_) == ("newton", "second_order")


def test_armijo_keeps_newton_from_overshooting(data):
    X, y = data
    # raw Newton steps on Welsch's loss overshoot where its hessian is negative
    guarded = jb.Booster(
        loss=welsch,
        n_estimators=20,
        max_depth=3,
        learning_rate=1.0,
        hessian_mode="abs",
        hessian_floor=1e-3,
        armijo=True,
    ).fit(X, y)
    assert np.all(np.diff(guarded.train_loss_) <= 1e-6 * guarded.train_loss_[:-1])


def test_newton_leaves_without_curvature_fall_back_to_a_line_search():
    """Residuals of 1.5 lie where Welsch's hessian is negative: no Newton step
    exists, and the leaf gets the line search's minimiser instead of 0."""
    import jax.numpy as jnp

    from jaxboost.engine.derivatives import grad_hess
    from jaxboost.engine.leaves import leaf_totals
    from jaxboost.engine.round_leaves import leaf_values
    from jaxboost.engine.training import NumericSettings, ShardData, StaticSettings
    from jaxboost.kernels.leaf_sums import LEAF_KERNELS

    y = jnp.full(8, 1.5)
    raw = jnp.zeros((8, 1))
    grad, hess = grad_hess(welsch, y, raw)
    assert float(hess.sum()) < 0
    cfg = StaticSettings(loss=welsch, n_outputs=1, max_depth=1, leaf_method="newton")
    hyper = NumericSettings(0.1, 0.0, 1e-3, 0.0, 1.0, 1.0, 0.0)
    data = ShardData(
        bins=jnp.zeros((1, 8), jnp.uint8), y=y, weight=jnp.ones(8), row_id=jnp.arange(8)
    )
    leaf_of_row = jnp.zeros(8, jnp.int32)  # every row in leaf 0; leaf 1 is empty
    totals = leaf_totals(LEAF_KERNELS["reference"], grad, hess, data.weight, leaf_of_row, 2, None)
    values, n_stuck = leaf_values(cfg, hyper, data, raw, totals, leaf_of_row, jnp.ones(1), None)
    assert int(n_stuck) == 0  # (searched, not left to a caller)
    np.testing.assert_allclose(np.asarray(values)[:, 0], [1.5, 0.0], atol=1e-5)


def test_a_redescending_loss_trains_on_targets_far_from_zero(data):
    """Shifted by 40, every residual at F0 = 0 would lie on Tukey's flat
    stretch: zero gradients, and trees that learn nothing."""
    X, y = data
    model = jb.Booster(loss=tukey_biweight, n_estimators=40, max_depth=3).fit(X, y + 40.0)
    assert abs(model.base_score_[0] - 40.0) < 1.0, model.base_score_
    assert model.train_loss_[-1] < 0.5 * model.train_loss_[0]
    assert _largest_error_on_the_sine(model, shift=40.0) < 0.3


@pytest.mark.parametrize("loss", [tukey_biweight, welsch])
def test_default_newton_leaves_of_a_non_convex_loss_never_increase_the_loss(data, loss):
    """Their hessians are negative on some rows: Armijo's check comes on by
    itself (without it these fits' training losses grew and the models were
    off by 10 or more)."""
    X, y = data
    model = jb.Booster(loss=loss, n_estimators=40, max_depth=3).fit(X, y)
    assert (model.leaf_method_, model.armijo_) == ("newton", True)
    assert np.all(np.diff(model.train_loss_) <= 1e-6 * model.train_loss_[:-1])
    assert model.train_loss_[-1] < 0.5 * model.train_loss_[0]
    assert _largest_error_on_the_sine(model) < 0.3


def test_a_convex_loss_keeps_plain_newton_leaves(data):
    X, y = data
    log_cosh = lambda y, f: jnp.logaddexp(f - y, y - f) - jnp.log(2.0)
    for loss in (log_cosh, "squared_error"):
        model = jb.Booster(loss=loss, n_estimators=2, max_depth=3).fit(X, y)
        assert (model.leaf_method_, model.armijo_) == ("newton", False)
    # welsch's Newton steps overshoot: with armijo=False the fit says so and goes on
    with pytest.warns(UserWarning, match="armijo=False keeps Armijo's safeguard off"):
        model = jb.Booster(loss=welsch, n_estimators=2, max_depth=3, armijo=False).fit(X, y)
    assert model.armijo_ is False


def test_the_hessian_probe_does_not_depend_on_the_row_order():
    """The probe's rows are spread over the data: sorted by target, the first
    1024 rows (all far below the median) once chose Newton leaves where the
    same rows shuffled chose otherwise.  Tukey's hessian is curved (either
    way) on most rows at the median: Newton leaves, with Armijo's check."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(5000, 3)).astype(np.float32)
    y = (np.sin(X[:, 0]) + 0.1 * rng.normal(size=5000)).astype(np.float32)
    outliers = rng.uniform(size=5000) < 0.1
    y[outliers] += rng.normal(scale=20, size=outliers.sum())
    order = np.argsort(y)
    models = [
        jb.Booster(loss=tukey_biweight, n_estimators=2, max_depth=3).fit(features, targets)
        for features, targets in ((X, y), (X[order], y[order]))
    ]
    chosen = [(model.leaf_method_, model.split_criterion_, model.armijo_) for model in models]
    assert chosen[0] == chosen[1] == ("newton", "second_order", True)


def test_a_full_indefinite_hessian_turns_armijo_on():
    """The catalogue's Gaussian likelihood in (mean, log scale) is declared,
    and not convex: its full 2 x 2 hessian has determinant -2 r^2 exp(-4 s),
    indefinite on every row with a residual.  Declared losses were not
    probed, so full-hessian Newton steps ran unchecked (3000 rows, 40 rounds:
    the training loss went from 1.1 to 1e16); its diagonal is positive and keeps plain Newton."""
    from jaxboost import losses

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4)).astype(np.float32)
    y = X[:, 0] - 0.5 * X[:, 1] ** 2 + rng.normal(size=1500) * (0.3 + np.abs(X[:, 3]))
    # (min_child_samples=0: the halving below is the training loss of unbounded leaves;
    # with 20 it reaches 0.516 of its start)
    settings = {"n_estimators": 20, "learning_rate": 0.2, "max_depth": 4, "min_child_samples": 0}
    full = jb.Booster(loss=losses.gaussian_nll, hessian="full", **settings).fit(X, y)
    assert full.armijo_ is True
    assert np.all(np.diff(full.train_loss_) <= 1e-6 * np.abs(full.train_loss_[:-1]))
    assert full.train_loss_[-1] < 0.5 * full.train_loss_[0]
    diagonal = jb.Booster(loss=losses.gaussian_nll, n_estimators=2, max_depth=2).fit(X, y)
    assert diagonal.armijo_ is False


def test_the_probe_tells_negative_curvature_from_a_singular_full_hessian():
    """softmax's full hessian diag(p) - p p^T is singular: float32 rounding
    of its zero eigenvalue is not negative curvature."""
    from jaxboost import losses
    from jaxboost.engine.derivatives import probe_hessian

    y = jnp.asarray(np.arange(64) % 3, jnp.float32)
    raw = jnp.asarray(np.random.default_rng(1).normal(size=(64, 3)), jnp.float32)
    softmax = lambda y, f: losses.softmax_cross_entropy(y, f)  # undeclared: probed
    assert probe_hessian(softmax, y, raw, full_hessian=True).negative is False
    saddle = lambda y, f: f[0] * f[1] + 0.1 * jnp.sum(f**2)  # eigenvalues 1.2, -0.8
    assert probe_hessian(saddle, y, raw[:, :2], full_hessian=True).negative is True
    assert probe_hessian(saddle, y, raw[:, :2], full_hessian=False).negative is False

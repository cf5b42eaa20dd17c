"""Joint leaf refit: lowers the objective, predictions match it, inputs untouched."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.predict import leaf_of_rows
from jaxboost.engine.tree import Tree
from jaxboost.frontends.refit import leaves_of_forest, refit_leaves

# one step count and one SGD instance throughout, so compiled programs are reused
STEPS = 50
SGD = optax.sgd(1.0)


def _regression(seed=0, n_rows=501, n_features=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    y = (X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=n_rows)).astype(np.float32)
    return X, y


@pytest.fixture(scope="module")
def squared_model():
    X, y = _regression()
    model = jb.Booster(loss="squared_error", n_estimators=30, max_depth=3).fit(X, y)
    return model, X, y


def test_lbfgs_lowers_the_training_loss_and_predictions_match_the_objective(squared_model):
    model, X, y = squared_model
    forest_before = copy.deepcopy(model.forest_)
    raw_before = model.predict_raw(X)

    refitted = refit_leaves(model, X, y, steps=STEPS)

    assert refitted is not model
    assert refitted.refit_loss_.shape == (STEPS + 1,)
    assert refitted.refit_loss_[0] == pytest.approx(model.train_loss_[-1], rel=1e-5)
    assert refitted.refit_loss_[-1] < 0.8 * model.train_loss_[-1]
    assert np.all(np.diff(refitted.refit_loss_) <= 1e-7)  # a line search never goes up
    raw = refitted.predict_raw(X)
    np.testing.assert_allclose(np.mean(0.5 * (y - raw) ** 2), refitted.refit_loss_[-1], rtol=1e-4)
    # only the leaf values moved
    for field in Tree._fields:
        if field != "leaf_value":
            np.testing.assert_array_equal(
                getattr(refitted.forest_, field), getattr(model.forest_, field)
            )
    # the input model is unchanged
    for field in Tree._fields:
        np.testing.assert_array_equal(getattr(model.forest_, field), getattr(forest_before, field))
    np.testing.assert_array_equal(model.predict_raw(X), raw_before)
    assert not hasattr(model, "refit_loss_")


def test_adam_also_lowers_the_loss(squared_model):
    model, X, y = squared_model
    refitted = refit_leaves(model, X, y, optimizer=optax.adam(1e-2), steps=STEPS)
    raw = refitted.predict_raw(X)
    assert np.mean(0.5 * (y - raw) ** 2) < 0.9 * model.train_loss_[-1]


def test_one_sgd_step_follows_the_gradient_of_a_numpy_reference(squared_model):
    model, X, y = squared_model
    refitted = refit_leaves(model, X, y, optimizer=SGD, steps=1)
    residual = y - model.predict_raw(X)
    expected = model.forest_.leaf_value.copy()
    for t in range(expected.shape[0]):
        tree = jax.tree.map(lambda field, t=t: np.asarray(field[t]), model.forest_)
        leaf = np.asarray(leaf_of_rows(tree, X))
        # d/dv mean 0.5 (y - raw)^2 = -sum_{rows in leaf} residual / n
        expected[t, :, 0] += np.bincount(leaf, residual, minlength=expected.shape[1]) / len(y)
    np.testing.assert_allclose(refitted.forest_.leaf_value, expected, atol=1e-6)


RATE = 1.0


def test_an_optimizer_reading_a_global_is_traced_again_when_it_changes(squared_model):
    # a schedule that reads a global: the second call must step at the new
    # rate, not reuse the first call's program (as a fresh process would)
    global RATE
    model, X, y = squared_model
    optimizer = optax.sgd(lambda step: RATE)
    residual = y - model.predict_raw(X)
    step = np.zeros_like(model.forest_.leaf_value)
    for t in range(step.shape[0]):
        tree = jax.tree.map(lambda field, t=t: np.asarray(field[t]), model.forest_)
        leaf = np.asarray(leaf_of_rows(tree, X))
        step[t, :, 0] = np.bincount(leaf, residual, minlength=step.shape[1]) / len(y)
    try:
        for RATE in (1.0, 0.25):
            refitted = refit_leaves(model, X, y, optimizer=optimizer, steps=1)
            expected = model.forest_.leaf_value + RATE * step
            np.testing.assert_allclose(refitted.forest_.leaf_value, expected, atol=1e-6)
    finally:
        RATE = 1.0


def test_a_different_loss_lowers_that_loss(squared_model):
    model, X, y = squared_model
    refitted = refit_leaves(model, X, y, loss="absolute_error", steps=STEPS)
    assert refitted.loss_ is losses.absolute_error
    before = np.mean(np.abs(y - model.predict(X)))
    after = np.mean(np.abs(y - refitted.predict(X)))
    assert after < 0.9 * before
    assert refitted.refit_loss_[-1] == pytest.approx(after, rel=1e-4)


def test_binary_logloss_refit_lowers_the_loss():
    X, y = _regression(seed=1)
    noise = np.random.default_rng(3).logistic(size=len(y))
    labels = (y + noise > 0.3).astype(np.float32)
    model = jb.Booster(loss="binary_logloss", n_estimators=30, max_depth=2).fit(X, labels)
    refitted = refit_leaves(model, X, labels, steps=STEPS)
    raw = refitted.predict_raw(X)
    np.testing.assert_allclose(refitted.predict(X), 1 / (1 + np.exp(-raw)), rtol=1e-5)
    logloss = np.mean(np.logaddexp(0.0, raw) - labels * raw)
    assert logloss < 0.9 * model.train_loss_[-1]
    assert logloss == pytest.approx(refitted.refit_loss_[-1], rel=1e-4)


@pytest.mark.parametrize(
    ("multi_strategy", "n_rounds"), [("multi_output_tree", 30), ("one_output_per_tree", 10)]
)
def test_softmax_with_three_outputs(multi_strategy, n_rounds):
    X, y = _regression(seed=2)
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.float32)
    model = jb.Booster(
        loss="softmax_cross_entropy",
        n_estimators=n_rounds,
        max_depth=2,
        multi_strategy=multi_strategy,
    ).fit(X, labels)
    refitted = refit_leaves(model, X, labels, steps=STEPS)
    assert refitted.forest_.leaf_value.shape == model.forest_.leaf_value.shape == (30, 4, 3)
    proba = refitted.predict(X)
    cross_entropy = -np.mean(np.log(proba[np.arange(len(labels)), labels.astype(int)]))
    assert cross_entropy < 0.8 * model.train_loss_[-1]
    assert cross_entropy == pytest.approx(refitted.refit_loss_[-1], rel=1e-4)
    if multi_strategy == "one_output_per_tree":
        # each tree still moves only its own class's score
        other_class = ~np.tile(np.eye(3, dtype=bool), (n_rounds, 1))
        assert np.all(refitted.forest_.leaf_value.transpose(0, 2, 1)[other_class] == 0)


def test_leaves_no_weighted_row_reaches_keep_their_value_under_l2(squared_model):
    model, X, y = squared_model
    weight = np.zeros(len(y), np.float32)
    weight[:20] = 1.0
    leaf_index = np.asarray(leaves_of_forest(Tree(*model.forest_), X[:20]))
    reached = np.zeros(model.forest_.leaf_value.shape[:2], bool)
    np.put_along_axis(reached, leaf_index, True, axis=1)
    assert not reached.all()

    penalised = refit_leaves(model, X, y, weight, l2=1.0, steps=STEPS)
    np.testing.assert_array_equal(
        penalised.forest_.leaf_value[~reached], model.forest_.leaf_value[~reached]
    )
    assert np.any(penalised.forest_.leaf_value[reached] != model.forest_.leaf_value[reached])
    unpenalised = refit_leaves(model, X, y, weight, steps=STEPS)
    assert np.sum(penalised.forest_.leaf_value**2) < np.sum(unpenalised.forest_.leaf_value**2)


def test_integer_weights_equal_repeated_rows(squared_model):
    model, X, y = squared_model
    weight = np.arange(len(y)) % 3
    weighted = refit_leaves(model, X, y, weight.astype(np.float32), optimizer=SGD, steps=1)
    repeated = refit_leaves(
        model, np.repeat(X, weight, axis=0), np.repeat(y, weight), optimizer=SGD, steps=1
    )
    np.testing.assert_allclose(weighted.refit_loss_, repeated.refit_loss_, rtol=1e-5)
    np.testing.assert_allclose(
        weighted.forest_.leaf_value, repeated.forest_.leaf_value, rtol=1e-4, atol=1e-6
    )


def test_clear_errors(squared_model):
    model, X, y = squared_model
    with pytest.raises(ValueError, match="X: expected 5 features"):
        refit_leaves(model, X[:, :4], y)
    with pytest.raises(ValueError, match="y: expected shape"):
        refit_leaves(model, X, y[:-1])
    with pytest.raises(ValueError, match="sample_weight"):
        refit_leaves(model, X, y, np.ones(3))
    with pytest.raises(ValueError, match="steps"):
        refit_leaves(model, X, y, steps=-1)
    with pytest.raises(ValueError, match="l2"):
        refit_leaves(model, X, y, l2=-1.0)
    with pytest.raises(TypeError, match="optimizer"):
        refit_leaves(model, X, y, optimizer="lbfgs")
    with pytest.raises(TypeError, match="model"):
        refit_leaves("model", X, y)
    with pytest.raises(FloatingPointError, match="diverged"):
        refit_leaves(model, X, y, optimizer=optax.sgd(1e30), steps=1)
    with pytest.raises(ValueError, match="loss: the objective"):
        refit_leaves(
            model, X, y, loss=lambda y, f: jnp.log(-jnp.abs(f - y) - 1), optimizer=SGD, steps=1
        )
    with pytest.raises(RuntimeError, match="not fitted"):
        refit_leaves(jb.Booster(), X, y)
    with pytest.raises(ValueError, match="y: the loss 'poisson' needs targets that are >= 0"):
        refit_leaves(model, X, y - 100.0, loss="poisson")
    with pytest.raises(ValueError, match=r"loss: loss\(y, f\) .* must return a scalar"):
        refit_leaves(model, X, y, loss=lambda y, f: jnp.stack([y - f, f]))

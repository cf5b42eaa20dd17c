"""Losses at the boundary: declared losses pickle, optax losses are adapted,
and a loss that does not fit the data or the settings is refused before training."""

import copy
import functools
import inspect
import pickle
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris

import jaxboost as jb
from jaxboost import losses

SMALL = {"n_estimators": 10, "max_depth": 2}


@functools.cache
def _breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X.astype(np.float32), y.astype(np.float32)


@functools.cache
def _diabetes():
    X, y = load_diabetes(return_X_y=True)
    return X.astype(np.float32), y.astype(np.float32)


@functools.cache
def _iris():
    X, y = load_iris(return_X_y=True)
    return X.astype(np.float32), y.astype(np.float32)


# --- 1. declared losses pickle ------------------------------------------------------


FACTORY_LOSSES = {
    "quantile": lambda: losses.quantile(0.9),
    "huber": lambda: losses.huber(2.0),
    "tweedie": lambda: losses.tweedie(1.3),
    "focal": lambda: losses.focal(2.0),
    "from_optax": lambda: losses.from_optax(optax.losses.huber_loss, delta=2.0),
}


@pytest.mark.parametrize("name", sorted(FACTORY_LOSSES))
def test_a_factory_loss_unpickles_as_the_same_object(name):
    loss = FACTORY_LOSSES[name]()
    assert pickle.loads(pickle.dumps(loss)) is loss
    assert copy.deepcopy(loss) is loss and copy.copy(loss) is loss


def test_catalogue_losses_unpickle_as_themselves_and_keep_their_function_look():
    for name in losses.available():
        loss = losses.get(name, **({"alpha": 0.3} if name == "quantile" else {}))
        assert pickle.loads(pickle.dumps(loss)) is loss
    # they still look like the functions they wrap
    assert losses.quantile(0.9).__name__ == "quantile_loss"
    assert "Half squared error" in losses.squared_error.__doc__
    assert losses.squared_error.__module__ == "jaxboost.losses.regression"
    assert list(inspect.signature(losses.squared_error).parameters) == ["y", "f"]


@losses.declare(name="quartic", link="identity", convex=True)
def quartic(y, f):
    """A module-level declared loss of this test file."""
    return (y - f) ** 4


def test_a_declared_loss_of_ones_own_pickles_by_reference():
    assert pickle.loads(pickle.dumps(quartic)) is quartic
    assert quartic.name == "quartic" and quartic.__doc__.startswith("A module-level")


def _plain_quartic(y, f):
    return (y - f) ** 4


def test_a_declared_wrapper_of_a_module_function_pickles_with_its_metadata():
    declared = losses.declare(name="mine", link="exp", target_domain="positive")(_plain_quartic)
    back = pickle.loads(pickle.dumps(declared))
    assert back.__wrapped__ is _plain_quartic
    assert back.metadata() == declared.metadata()


@pytest.mark.parametrize("name", sorted(FACTORY_LOSSES))
def test_a_fitted_model_with_a_factory_loss_pickles(name):
    X, y = _diabetes()
    loss = FACTORY_LOSSES[name]()
    if loss.target_domain == "probability":
        X, y = _breast_cancer()
    for model in (jb.Regressor(loss=loss, **SMALL), jb.Booster(loss=loss, **SMALL)):
        model.fit(X, y)
        restored = pickle.loads(pickle.dumps(model))
        np.testing.assert_array_equal(restored.predict(X), model.predict(X))
        loss_attr = restored.booster_.loss_ if hasattr(restored, "booster_") else restored.loss_
        assert loss_attr is loss


def test_a_loaded_model_with_a_factory_loss_pickles(tmp_path):
    X, y = _diabetes()
    model = jb.Booster(loss=losses.quantile(0.9), **SMALL).fit(X, y)
    model.save(tmp_path / "model.json")
    loaded = jb.load(tmp_path / "model.json")
    restored = pickle.loads(pickle.dumps(loaded))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))


def test_clone_keeps_a_factory_loss():
    estimator = jb.Regressor(loss=losses.huber(2.0), **SMALL)
    assert clone(estimator).loss is estimator.loss


# --- 2. optax losses passed as they are -----------------------------------------------


def test_an_optax_loss_passed_directly_is_adapted_not_swapped():
    X, y = _breast_cancer()
    settings = {"n_estimators": 30, "max_depth": 3}
    direct = jb.Booster(loss=optax.sigmoid_binary_cross_entropy, **settings).fit(X, y)
    assert np.mean((direct.predict(X) > 0.5) == y) > 0.9
    adapted = losses.from_optax(optax.sigmoid_binary_cross_entropy, link="sigmoid")
    assert direct.loss_ is adapted
    explicit = jb.Booster(loss=adapted, **settings).fit(X, y)
    np.testing.assert_array_equal(direct.predict(X), explicit.predict(X))
    restored = pickle.loads(pickle.dumps(direct))
    np.testing.assert_array_equal(restored.predict(X), direct.predict(X))


def test_a_classifier_takes_an_optax_loss_directly():
    X, y = _breast_cancer()
    model = jb.Classifier(loss=optax.sigmoid_binary_cross_entropy, **SMALL).fit(X, y)
    assert model.score(X, y) > 0.9


def test_optax_integer_label_cross_entropy_trains_on_three_classes():
    X, y = _iris()
    loss = optax.softmax_cross_entropy_with_integer_labels
    model = jb.Booster(loss=loss, n_estimators=20, max_depth=2).fit(X, y)
    assert model.n_outputs_ == 3 and model.loss_.link == "softmax"
    proba = model.predict(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    assert np.mean(np.argmax(proba, axis=1) == y) > 0.9
    reference = jb.Booster(loss=losses.softmax_cross_entropy, n_estimators=20, max_depth=2)
    np.testing.assert_allclose(proba, reference.fit(X, y).predict(X), rtol=1e-4, atol=1e-5)
    classifier = jb.Classifier(loss=loss, n_estimators=20, max_depth=2).fit(X, y)
    assert classifier.score(X, y) > 0.9


def test_optax_one_hot_cross_entropy_takes_its_outputs_from_the_targets_width():
    X, labels = _iris()
    one_hot = np.eye(3, dtype=np.float32)[labels.astype(int)]
    model = jb.Booster(loss=optax.softmax_cross_entropy, **SMALL).fit(X, one_hot)
    assert model.n_outputs_ == 3
    assert np.mean(np.argmax(model.predict(X), axis=1) == labels) > 0.9
    with pytest.raises(
        ValueError,
        match=r"n_outputs: .*3 raw score\(s\) per sample \(one per column of y\), got n_",
    ):
        jb.Booster(loss=optax.softmax_cross_entropy, n_outputs=2, **SMALL).fit(X, one_hot)


def test_from_optax_reads_its_defaults_from_the_table_and_round_trips_through_get():
    integer = losses.from_optax(optax.softmax_cross_entropy_with_integer_labels)
    assert (integer.link, integer.n_outputs, integer.target_domain) == (
        "softmax",
        "n_classes",
        "class",
    )
    assert losses.get(integer.name, **integer.params) is integer
    # the integer-labels option, set against the table, is kept in params
    cast = losses.from_optax(optax.losses.multiclass_hinge_loss, integer_targets=True)
    assert "integer_targets" not in cast.params  # the table's own value
    floats = losses.from_optax(optax.l2_loss, integer_targets=True)
    assert floats.params["integer_targets"] is True
    assert losses.get(floats.name, **floats.params) is floats
    y, f = (
        jnp.array([0.0, 2.0, 1.0]),
        jnp.array([[3.0, 0.0, 0.0], [0.0, 0.0, 3.0], [1.0, 2.0, 0.0]]),
    )
    expected = optax.softmax_cross_entropy_with_integer_labels(f, y.astype(jnp.int32))
    np.testing.assert_allclose(jax.vmap(integer)(y, f), expected, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(losses.softmax_cross_entropy)(y, f), expected, rtol=1e-6)


def test_a_function_of_ones_own_named_like_an_optax_loss_keeps_the_plain_defaults():
    def hinge_loss(predictions, targets):
        return jnp.maximum(0.0, 1.0 - predictions * targets)

    adapted = losses.from_optax(hinge_loss)
    assert (adapted.link, adapted.target_domain, adapted.convex) == ("identity", "any", False)


@pytest.mark.filterwarnings("ignore:The function convex_kl_divergence is deprecated")
def test_every_listed_optax_loss_is_a_scalar_per_sample():
    n, k = 6, 3
    labels = jnp.array([0.0, 1.0, 2.0, 1.0, 0.0, 2.0])
    for name in losses.adapters.OPTAX_LOSSES:
        loss = losses.from_optax(losses.adapters.optax_function(name))
        width = k if loss.n_outputs in ("n_classes", "n_targets") else 1
        f = jnp.linspace(-1.0, 1.0, n * width).reshape(n, width)
        f = f[:, 0] if width == 1 else f
        if loss.n_outputs == "n_targets":
            y = jax.nn.one_hot(labels.astype(int), k)
        elif loss.target_domain == "sign":
            y = 2.0 * (labels > 0) - 1.0
        elif loss.n_outputs == "n_classes":
            y = labels
        else:
            y = (labels > 0).astype(jnp.float32)
        # (jitted: op by op, the losses compiled some 200 small programs)
        values = jax.jit(jax.vmap(loss))(y, f)
        grads = jax.jit(jax.vmap(jax.grad(loss, argnums=1)))(y, f)
        assert values.shape == (n,), name
        assert np.all(np.isfinite(values)) and np.all(np.isfinite(grads)), name
        assert pickle.loads(pickle.dumps(loss)) is loss, name


def test_an_optax_function_that_is_no_per_sample_loss_is_refused():
    X, y = _diabetes()
    with pytest.raises(ValueError, match="loss: optax.kl_divergence is not a loss .*normalised"):
        jb.Booster(loss=optax.losses.kl_divergence, **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="fn: optax.ctc_loss"):
        losses.from_optax(optax.losses.ctc_loss)


def test_an_unlisted_optax_function_gets_the_identity_link_and_one_warning(monkeypatch):
    monkeypatch.setattr(losses.adapters, "_warned_unknown", set())
    unlisted = optax.safe_norm  # not a loss at all, but a function of optax's
    with pytest.warns(UserWarning, match="link of optax.safe_norm is unknown.*link="):
        first = losses.resolve(unlisted)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert losses.resolve(unlisted) is first
    assert (first.link, first.n_outputs) == ("identity", 1)


def test_a_partial_of_an_optax_loss_passes_its_options():
    loss = losses.resolve(functools.partial(optax.losses.huber_loss, delta=2.0))
    assert loss is losses.from_optax(optax.losses.huber_loss, delta=2.0)


def test_resolve_keeps_names_declared_losses_and_plain_callables():
    assert losses.resolve("l2") is losses.squared_error
    assert losses.resolve(losses.huber(2.0)) is losses.huber(2.0)
    plain = lambda y, f: (y - f) ** 2
    assert losses.resolve(plain) is plain
    with pytest.raises(TypeError, match="loss: expected a catalogue name or a callable"):
        losses.resolve(3)


# --- 3. class labels beyond the outputs -----------------------------------------------


def test_class_labels_beyond_n_outputs_are_refused():
    X, y = _iris()
    with pytest.raises(ValueError, match="y: .*n_outputs=2 classes.*row 100: 2.0.*at least 3"):
        jb.Booster(loss=losses.softmax_cross_entropy, n_outputs=2, **SMALL).fit(X, y)
    loss = optax.softmax_cross_entropy_with_integer_labels
    with pytest.raises(ValueError, match="y: .*n_outputs=2 classes.*row 100"):
        jb.Booster(loss=loss, n_outputs=2, **SMALL).fit(X, y)
    # more outputs than labels is fine (a class absent from this sample)
    jb.Booster(loss=losses.softmax_cross_entropy, n_outputs=4, **SMALL).fit(X, y)


# --- 4. a classifier needs a probability link -----------------------------------------


@pytest.mark.parametrize("loss", ["squared_error", "poisson", "absolute_error", "gaussian_nll"])
def test_a_classifier_refuses_a_loss_without_probabilities(loss):
    X, y = _breast_cancer()
    with pytest.raises(ValueError, match="loss: .* link, which does not give class probab.*Regres"):
        jb.Classifier(loss=loss, **SMALL).fit(X, y)


def test_a_classifier_keeps_probability_links_and_undeclared_losses():
    X, y = _breast_cancer()
    for loss in ("logloss", "exponential", losses.focal(2.0)):
        assert jb.Classifier(loss=loss, **SMALL).fit(X, y).score(X, y) > 0.9
    plain = jb.Classifier(loss=lambda y, f: jax.nn.softplus(f) - y * f, **SMALL).fit(X, y)
    proba = plain.predict_proba(X)
    assert proba.min() >= 0 and proba.max() <= 1


# --- 5. the outputs a loss takes against n_outputs -------------------------------------


def test_a_loss_indexing_f_with_one_output_is_told_to_set_n_outputs():
    X, y = _diabetes()
    two_scores = lambda y, f: (y - f[0]) ** 2 + f[1] ** 2
    with pytest.raises(ValueError, match="loss: .*indexes f as a vector: set n_outputs"):
        jb.Booster(loss=two_scores, **SMALL).fit(X, y)
    jb.Booster(loss=two_scores, n_outputs=2, **SMALL).fit(X, y)  # and then it trains


def test_a_loss_indexing_y_is_not_told_about_f():
    X, y = _diabetes()
    with pytest.raises(ValueError, match="loss: .*failed") as error:
        jb.Booster(loss=lambda y, f: (y[0] - f) ** 2, **SMALL).fit(X, y)
    assert "indexes f" not in str(error.value)


def test_a_declared_count_other_than_n_outputs_is_refused():
    X, y = _iris()
    with pytest.raises(ValueError, match="n_outputs: .*one raw score per class, at least 2"):
        jb.Booster(loss=losses.softmax_cross_entropy, n_outputs=1, **SMALL).fit(X, y)
    X, y = _diabetes()
    with pytest.raises(ValueError, match=r"n_outputs: .*'gaussian_nll'.*=2\), got n_outputs=3"):
        jb.Booster(loss=losses.gaussian_nll, n_outputs=3, **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="n_outputs: .*'gaussian_nll'.*set it to 2"):
        jb.Booster(loss=losses.gaussian_nll, n_outputs=1, **SMALL).fit(X, y)


def test_a_regressor_sums_a_one_output_loss_over_several_targets():
    X, y = _diabetes()
    targets = np.stack([y, -y], axis=1) / 100
    for loss in ("squared_error", optax.l2_loss):
        model = jb.Regressor(loss=loss, **SMALL).fit(X, targets)
        assert model.predict(X).shape == (len(y), 2)


# --- 6. numpy in a loss ---------------------------------------------------------------


def test_a_loss_written_with_numpy_is_told_to_use_jax_numpy():
    X, y = _breast_cancer()
    numpy_loss = lambda y, f: np.log(1.0 + np.exp(f)) - y * f
    with pytest.raises(ValueError, match=r"loss: .*calls numpy \(np\.\*\).*jax\.numpy \(jnp\.\*\)"):
        jb.Booster(loss=numpy_loss, **SMALL).fit(X, y)

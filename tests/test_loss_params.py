"""A catalogue loss's parameters as settings: ``loss_params`` and the nested
``loss__<name>`` of ``get_params``/``set_params``, searched by scikit-learn
without compiling for each value."""

import jax
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import jaxboost as jb
from jaxboost import losses

SMALL = {"n_estimators": 5, "max_depth": 2, "learning_rate": 0.3}
_compiles = [0]


def _count(event: str, seconds: float, **_: object) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _compiles[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count)


def _data(n=160):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    y = (3 * X[:, 0] + rng.standard_t(2, n)).astype(np.float32)
    return X, y


def test_the_loss_parameters_are_nested_settings():
    model = jb.Regressor(loss="quantile", **SMALL)
    # a factory's parameter without a default shows None until set
    assert model.get_params()["loss__alpha"] is None
    assert "loss__alpha" not in model.get_params(deep=False)
    model.set_params(loss__alpha=0.9)
    assert model.loss_params == {"alpha": 0.9}
    assert model.get_params()["loss__alpha"] == 0.9
    assert clone(model).loss_params == {"alpha": 0.9}
    # a catalogue loss object shows its own values, loss_params' in their place
    booster = jb.Booster(loss=losses.huber(2.0))
    assert booster.get_params()["loss__delta"] == 2.0
    assert booster.set_params(loss__delta=3.0).get_params()["loss__delta"] == 3.0
    assert booster.loss_params == {"delta": 3.0}
    # a loss and its parameter in one call: the loss first, whatever the order
    ranker = jb.Ranker().set_params(loss__sigma=2.0, loss="ranknet")
    assert ranker.loss == "ranknet" and ranker.loss_params == {"sigma": 2.0}
    # no loss parameters: nothing nested
    assert not any(key.startswith("loss__") for key in jb.Regressor().get_params())


@pytest.mark.parametrize(
    "make, loss, params, reference",
    [
        (jb.Regressor, "quantile", {"alpha": 0.8}, losses.quantile(0.8)),
        (jb.Booster, losses.huber(0.3), {"delta": 1.5}, losses.huber(1.5)),
        (jb.Classifier, "focal", {"gamma": 0.5}, losses.focal(0.5)),
    ],
)
def test_loss_params_fit_the_model_of_the_loss_built_with_them(make, loss, params, reference):
    X, y = _data()
    if make is jb.Classifier:
        y = (y > 0).astype(np.float32)
    model = make(loss=loss, loss_params=params, **SMALL).fit(X, y)
    expected = make(loss=reference, **SMALL).fit(X, y)
    fitted = model if make is jb.Booster else model.booster_
    assert fitted.loss_ is reference  # the catalogue's loss of those parameters
    np.testing.assert_array_equal(model.predict(X), expected.predict(X))


def test_a_search_over_a_loss_parameter_compiles_nothing_for_new_values():
    # (quantile's leaves are line searches at every level: one structure; a
    # value that changes what "auto" settings resolve to compiles that structure)
    X, y = _data()
    search = lambda alphas: GridSearchCV(
        jb.Regressor(loss="quantile", **SMALL), {"loss__alpha": alphas}, cv=2
    ).fit(X, y)
    search([0.3, 0.6])  # compiles the fit's programs (for these shapes)
    before = _compiles[0]
    found = search([0.2, 0.45, 0.8])
    assert _compiles[0] == before
    best = found.best_params_["loss__alpha"]
    refit = jb.Regressor(loss=losses.quantile(best), **SMALL).fit(X, y)
    np.testing.assert_array_equal(found.predict(X), refit.predict(X))


def test_loss_parameters_a_loss_does_not_take_are_refused_naming_them():
    with pytest.raises(
        ValueError,
        match=r"loss__alpha: not a parameter of loss 'huber'.*"
        r"takes \['loss__delta'\]",
    ):
        jb.Regressor(loss="huber").set_params(loss__alpha=0.5)
    with pytest.raises(ValueError, match="loss__d: not a parameter.*only catalogue losses"):
        jb.Booster(loss=lambda y, f: (f - y) ** 2).set_params(loss__d=1.0)
    X, y = _data(40)
    with pytest.raises(ValueError, match=r"loss_params: loss 'binary_logloss' takes no param"):
        jb.Classifier(loss_params={"gamma": 1.0}, **SMALL).fit(X, y > 0)
    with pytest.raises(ValueError, match="loss_params: expected None or a dict"):
        jb.Booster(loss="huber", loss_params=[("delta", 1.0)], **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="loss_params: quantile: alpha must be in"):
        jb.Regressor(loss="quantile", loss_params={"alpha": 1.5}, **SMALL).fit(X, y)

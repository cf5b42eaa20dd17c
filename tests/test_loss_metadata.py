"""Tests of a loss's metadata record (losses/metadata.py): one `LossMetadata`
per loss, the fields a declared loss shows read from it, the defaults an
undeclared function gets, and the wrappers' records."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import jax.numpy as jnp
import numpy as np
import pytest
from jaxboost.losses.metadata import FIELDS, LossMetadata, metadata_of

import jaxboost as jb
from jaxboost import losses
from jaxboost.frontends.fitted.file_loss import MissingLoss
from jaxboost.frontends.scikit_learn.estimator_losses import SumOverTargets, WithLink
from jaxboost.runtime.precision import Float64Loss

_DECLARED = [
    losses.squared_error,
    losses.absolute_error,
    losses.huber(2.0),
    losses.quantile(0.3),
    losses.softmax_cross_entropy,
    losses.gaussian_nll,
    losses.lambdarank(k=5),
    losses.cox,
]


def _pinball(y, f):
    """The median's pinball loss, undeclared: its hessian is 0 almost everywhere."""
    return jnp.abs(y - f)


@pytest.mark.parametrize("loss", _DECLARED, ids=lambda loss: loss.name)
def test_every_declared_field_is_read_from_the_one_record(loss):
    record = metadata_of(loss)
    assert record is loss.loss_metadata and record.declared
    for name in FIELDS:
        assert getattr(loss, name) is getattr(record, name), name
    with pytest.raises(AttributeError):
        loss.link = "exp"  # a declared loss's fields are its record's, which is frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.link = "exp"


def test_a_distribution_records_its_family_and_parameters():
    pytest.importorskip("numpyro")
    loss = losses.distribution("gamma", censored=False)
    record = metadata_of(loss)
    assert (record.family, record.parameter_names, record.censored) == (
        "gamma",
        ("concentration", "rate"),
        False,
    )
    assert record.parameter_links == loss.parameter_links == ("exp", "exp")
    assert record.init is loss.init and record.sampler is loss.sampler
    assert pickle.loads(pickle.dumps(loss)) is loss


def test_params_the_former_name_of_parameter_names_warns_and_gives_the_same_loss():
    numpyro_dists = pytest.importorskip("numpyro.distributions")
    named = losses.distribution(numpyro_dists.Laplace, parameter_names=("loc", "scale"))
    with pytest.warns(FutureWarning, match="use parameter_names="):
        assert losses.distribution(numpyro_dists.Laplace, params=("loc", "scale")) is named
    assert named.params["parameter_names"] == ["loc", "scale"]  # (its factory's arguments)
    assert metadata_of(named).parameter_names == ("loc", "scale")
    with pytest.warns(FutureWarning, match="use parameter_names"):
        assert losses.FAMILIES["gamma"].params == ("concentration", "rate")


def test_an_undeclared_function_gets_the_explicit_defaults():
    record = metadata_of(_pinball)
    assert record == LossMetadata(name="_pinball")
    assert not record.declared and record.hessian_informative is None  # probed on the data
    assert (record.link, record.n_outputs, record.per, record.params) == (
        "identity",
        1,
        "sample",
        {},
    )
    # declaring a function with no arguments states exactly these defaults
    assert losses.declare(_pinball).loss_metadata == dataclasses.replace(record, declared=True)
    signature = inspect.signature(losses.declare).parameters
    for name in FIELDS:
        if name in signature and name not in ("name", "params"):
            assert signature[name].default == getattr(LossMetadata(), name), name


def test_a_declared_function_without_hessian_informative_is_probed_as_an_undeclared_one():
    """``declare`` defaulted ``hessian_informative`` to True while an undeclared
    function's was None (probe): naming a loss then turned a line search into
    Newton leaves of a zero hessian (``-G / lambda``), another model."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (3.0 * X[:, 0] + rng.standard_t(2, size=200)).astype(np.float32)
    settings = {"n_estimators": 3, "max_depth": 2, "learning_rate": 0.5}

    def fitted(loss):
        return jb.Booster(loss=loss, **settings).fit(X, y).predict(X)

    undeclared = fitted(_pinball)
    named = fitted(losses.declare(_pinball, name="pinball"))
    np.testing.assert_allclose(named, undeclared, rtol=1e-6, atol=1e-6)
    # both take line-search leaves: within the median's reach of the catalogue's
    reference = fitted(losses.absolute_error)
    assert np.mean(np.abs(undeclared - y)) < 1.05 * np.mean(np.abs(reference - y))


def test_wrappers_state_the_record_of_what_they_wrap():
    huber = losses.huber(2.0)
    assert metadata_of(Float64Loss(huber, 0.5)) is huber.loss_metadata  # forwarded
    linked = metadata_of(WithLink(_pinball, "sigmoid"))
    assert (linked.link, linked.declared, linked.name) == ("sigmoid", False, "_pinball")
    summed = metadata_of(SumOverTargets(huber))
    # one output per target: a model file does not take the sum for huber itself
    assert (summed.n_outputs, summed.link, summed.convex, summed.declared) == (
        "n_targets",
        "identity",
        True,
        True,
    )
    assert not metadata_of(SumOverTargets(_pinball)).declared
    missing = metadata_of(MissingLoss("sigmoid2", 1))
    assert (missing.link, missing.n_outputs, missing.declared) == ("sigmoid2", 1, True)


def test_a_declared_loss_pickled_with_its_record_loads_with_it():
    declared = losses.declare(lambda y, f: (y - f) ** 4, name="quartic_here", convex=True)
    rebuilt = losses.DeclaredLoss(declared.__wrapped__, **declared.metadata())
    assert rebuilt.loss_metadata == declared.loss_metadata


def test_a_catalogue_name_gives_its_loss_s_record():
    assert metadata_of("binary_logloss") == metadata_of(losses.get("binary_logloss"))
    assert metadata_of("binary_logloss").link == "sigmoid"

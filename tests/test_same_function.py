"""Programs are reused exactly when the computation is the same: a lambda
written again reuses them; a loss or metric that now computes something else,
whatever it reads, gets its own (checked against a fit with the computation
written out)."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.engine.round_programs import (
    derivatives_program,
    slope_sums_program,
    tree_round_program,
)
from jaxboost.engine.training import train_chunk_program
from jaxboost.runtime.same_function import plain, same_computation

_SCALAR = jax.ShapeDtypeStruct((), jnp.float32)
_SETTINGS = {"n_estimators": 8, "max_depth": 2}


def _written(text: str, **namespace):
    """A function from source text, as a notebook cell makes it anew."""
    return eval(text, {"jnp": jnp, "np": np, **namespace})


def _key(fn):
    return same_computation(fn, _SCALAR, _SCALAR)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=300)).astype(np.float32)
    return X, y


def _mean_prediction(loss, data, **settings) -> float:
    X, y = data
    return float(jb.Booster(loss=loss, **_SETTINGS, **settings).fit(X, y).predict(X).mean())


def test_the_same_text_is_the_same_computation():
    first = _key(_written("lambda y, f: jnp.logaddexp(f - y, y - f)"))
    again = _key(_written("lambda y, f: jnp.logaddexp(f - y, y - f)"))
    assert again is first and plain(again) is not None


def test_any_difference_in_what_is_computed_is_another_key():
    base = _key(_written("lambda y, f: 2.0 * jnp.abs(y - f)"))
    for other in (
        _written("lambda y, f: 3.0 * jnp.abs(y - f)"),  # a constant
        _written("lambda y, f: 2.0 * jnp.square(y - f)"),  # a function
        _written("lambda y, f: scale * jnp.abs(y - f)", scale=2.5),  # a global's value
        _written("lambda y, f: 2.0 * jnp.abs(y - f) + 0.0 * w[0]", w=np.ones(3)),
        _written("lambda y, f: 2.0 * jnp.abs(y - f) * jnp.copysign(1.0, c)", c=-0.0),
    ):
        assert _key(other) != base
    # a global with the same value, a copied array: the same computation
    assert _key(_written("lambda y, f: scale * jnp.abs(y - f)", scale=2.0)) == base
    weights = np.arange(3.0)
    text = "lambda y, f: jnp.sum(w * (y - f) ** 2)"
    assert _key(_written(text, w=weights)) == _key(_written(text, w=weights.copy()))
    assert _key(_written(text, w=weights)) != _key(_written(text, w=weights + 1))


def test_numbers_are_compared_at_full_precision_and_sign():
    assert _key(lambda y, f: 0.1 * (y - f) ** 2) != _key(lambda y, f: 0.1000000001 * (y - f) ** 2)
    plus = _key(lambda y, f: (y - f) ** 2 + jnp.copysign(1.0, 0.0))
    minus = _key(lambda y, f: (y - f) ** 2 + jnp.copysign(1.0, -0.0))
    assert plus != minus


def test_an_untraceable_function_is_never_the_same_as_another():
    def broken(y, f):
        raise RuntimeError("not traceable")

    assert _key(broken) != _key(broken)


def test_keys_pickle_as_the_function():
    import operator
    import pickle

    keyed = _key(operator.sub)
    assert pickle.loads(pickle.dumps(keyed)) is operator.sub


def test_a_lambda_written_again_compiles_nothing_and_fits_the_same_model(data):
    X, y = data
    text = "lambda y, f: jnp.sqrt(1.0 + (f - y) ** 2) - 1.0 + 0.0 * 7.25"
    programs = (derivatives_program, slope_sums_program, tree_round_program, train_chunk_program)
    first = jb.Booster(loss=_written(text), **_SETTINGS).fit(X, y)
    compiled = [program.cache_info().misses for program in programs]
    again = jb.Booster(loss=_written(text), **_SETTINGS).fit(X, y)
    assert [program.cache_info().misses for program in programs] == compiled
    np.testing.assert_array_equal(again.predict(X), first.predict(X))


# the losses below all read something outside their code; each is fitted, the
# thing changed, fitted again, and compared with the loss written out


def _asymmetric_reference(weight):
    return lambda y, f: jnp.where(y - f > 0, weight * (y - f) ** 2, (y - f) ** 2)


# a top-level helper reading a global of its module, as a user's script has
_WEIGHT = 1.0


def _asymmetric(r):
    return jnp.where(r > 0, _WEIGHT * r**2, r**2)


@pytest.mark.parametrize("leaf_method", ["newton", "line_search"])  # round by round / fused
def test_a_helper_reading_a_global(data, leaf_method, monkeypatch):
    settings = {"leaf_method": leaf_method}
    first = _mean_prediction(lambda y, f: _asymmetric(y - f), data, **settings)
    monkeypatch.setattr(sys.modules[__name__], "_WEIGHT", 20.0)
    second = _mean_prediction(lambda y, f: _asymmetric(y - f), data, **settings)
    truth = _mean_prediction(_asymmetric_reference(20.0), data, **settings)
    assert second == pytest.approx(truth, abs=1e-6)
    assert abs(second - first) > 0.1


def test_a_class_attribute_in_a_loop(data):
    X, y = data
    below = []

    class Pinball:
        level = 0.5

    for alpha in (0.1, 0.5, 0.9):
        Pinball.level = alpha

        def loss(y, f):
            return jnp.maximum(Pinball.level * (y - f), (Pinball.level - 1) * (y - f))

        model = jb.Booster(loss=loss, leaf_method="line_search", **_SETTINGS).fit(X, y)
        below.append(float(np.mean(y < model.predict(X))))
    assert below == sorted(below) and below[2] - below[0] > 0.5


def test_the_same_loss_object_after_what_it_reads_changed(data):
    scale = np.array([1.0])

    class Weighted:
        power = 2

        def __call__(self, y, f):
            return scale[0] * jnp.abs(y - f) ** self.power

    loss = Weighted()
    base = _mean_prediction(loss, data)
    scale[0] = 5.0  # a captured array changed in place: the same minimiser, larger steps
    assert _mean_prediction(loss, data) != base
    loss.power = 1  # an object's attribute: the median, not the mean
    assert _mean_prediction(loss, data) == pytest.approx(
        _mean_prediction(lambda y, f: 5.0 * jnp.abs(y - f) ** 1, data), abs=1e-6
    )


def test_replaced_code_is_a_new_loss(data):
    def loss(y, f):
        return (y - f) ** 2

    base = _mean_prediction(loss, data)
    loss.__code__ = (lambda y, f: (y - f - 3.0) ** 2).__code__  # as autoreload does
    assert _mean_prediction(loss, data) == pytest.approx(base - 3.0, abs=0.05)


def test_a_captured_negative_zero(data):
    def shifted(sign_of):
        return lambda y, f: (y - f + 3.0 * jnp.copysign(1.0, sign_of)) ** 2

    assert _mean_prediction(shifted(0.0), data) > 2.0
    assert _mean_prediction(shifted(-0.0), data) < -2.0


def test_metrics_follow_what_they_read_and_keep_their_names(data):
    X, y = data
    weight = {"w": 1.0}

    def weighted(y, f):
        return weight["w"] * (y - f) ** 2

    def fit(*metrics):
        return jb.Booster(loss="squared_error", **_SETTINGS).fit(
            X, y, eval_set=[(X, y)], eval_metric=list(metrics)
        )

    first = fit(weighted).evals_result_["validation_0"]["weighted"]
    weight["w"] = 20.0
    second = fit(weighted).evals_result_["validation_0"]["weighted"]
    np.testing.assert_allclose(second, 20.0 * np.asarray(first), rtol=1e-5)

    def other_name(y, f):
        return weight["w"] * (y - f) ** 2

    result = fit(weighted, other_name).evals_result_["validation_0"]
    assert set(result) == {"weighted", "other_name"}
    np.testing.assert_array_equal(result["weighted"], result["other_name"])

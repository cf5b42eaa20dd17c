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
from jaxboost.engine.groups import GroupBucket
from jaxboost.engine.round_programs import (
    derivatives_program,
    slope_sums_program,
    tree_round_program,
)
from jaxboost.engine.training_programs import train_chunk_program
from jaxboost.frontends.training.computation_keys import group_widths, keyed_loss
from jaxboost.frontends.training.monitor import EvalSet
from jaxboost.runtime.same_function import plain, same_computation

_SCALAR = jax.ShapeDtypeStruct((), jnp.float32)
_SETTINGS = {"n_estimators": 8, "max_depth": 2}


def _written(text: str, **namespace):
    """A function from source text, as a notebook cell makes it anew."""
    return eval(text, {"jnp": jnp, "np": np, **namespace})


def _key(fn, lifted: bool = False):
    return same_computation(fn, [(_SCALAR, _SCALAR)], lifted=lifted)


# keyed by its traces, or (lifted) by its structure and lifted numbers
_BOTH_KEYS = pytest.mark.parametrize("lifted", [False, True])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=300)).astype(np.float32)
    return X, y


def _mean_prediction(loss, data, **settings) -> float:
    X, y = data
    return float(jb.Booster(loss=loss, **_SETTINGS, **settings).fit(X, y).predict(X).mean())


@_BOTH_KEYS
def test_the_same_text_is_the_same_computation(lifted):
    first = _key(_written("lambda y, f: jnp.logaddexp(f - y, y - f)"), lifted)
    again = _key(_written("lambda y, f: jnp.logaddexp(f - y, y - f)"), lifted)
    assert again is first and plain(again) is not None


@_BOTH_KEYS
def test_any_difference_in_what_is_computed_is_another_key(lifted):
    base = _key(_written("lambda y, f: 2.0 * jnp.abs(y - f)"), lifted)
    for other in (
        _written("lambda y, f: 3.0 * jnp.abs(y - f)"),  # a constant
        _written("lambda y, f: 2.0 * jnp.square(y - f)"),  # a function
        _written("lambda y, f: scale * jnp.abs(y - f)", scale=2.5),  # a global's value
        _written("lambda y, f: 2.0 * jnp.abs(y - f) + 0.0 * w[0]", w=np.ones(3)),
        _written("lambda y, f: 2.0 * jnp.abs(y - f) * jnp.copysign(1.0, c)", c=-0.0),
    ):
        assert _key(other, lifted) != base
    # a global with the same value, a copied array: the same computation
    assert _key(_written("lambda y, f: scale * jnp.abs(y - f)", scale=2.0), lifted) == base
    weights = np.arange(3.0)
    text = "lambda y, f: jnp.sum(w * (y - f) ** 2)"
    assert _key(_written(text, w=weights), lifted) == _key(_written(text, w=weights.copy()), lifted)
    assert _key(_written(text, w=weights), lifted) != _key(_written(text, w=weights + 1), lifted)


@_BOTH_KEYS
def test_numbers_are_compared_at_full_precision_and_sign(lifted):
    assert _key(lambda y, f: 0.1 * (y - f) ** 2, lifted) != _key(
        lambda y, f: 0.1000000001 * (y - f) ** 2, lifted
    )
    plus = _key(lambda y, f: (y - f) ** 2 + jnp.copysign(1.0, 0.0), lifted)
    minus = _key(lambda y, f: (y - f) ** 2 + jnp.copysign(1.0, -0.0), lifted)
    assert plus != minus


@_BOTH_KEYS
def test_an_untraceable_function_is_never_the_same_as_another(lifted):
    def broken(y, f):
        raise RuntimeError("not traceable")

    assert _key(broken, lifted) != _key(broken, lifted)


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


# a distribution's declared parts reading globals of this module: the
# Fisher information's scale, the sampler's spread, the start of the search
_FISHER_SCALE = 1.0
_DRAW_SPREAD = 1.0
_START = 3.5


def _scaled_fisher(f):
    return _FISHER_SCALE * jb.losses.gaussian_nll.fisher(f)


def _spread_sampler(key, f, n):
    return f[0] + _DRAW_SPREAD * jnp.exp(f[1]) * jax.random.normal(key, (n,))


def _start_at(y, weight):
    return jnp.stack([jnp.sum(weight * y) / jnp.sum(weight), jnp.float32(_START)])


def _gaussian_with(**parts):
    return jb.losses.declare(
        lambda y, f: jb.losses.gaussian_nll(y, f),
        name="gaussian_parts",
        link="mean_scale",
        n_outputs=2,
        smooth=True,
        **parts,
    )


def _periodic_with(**parts):
    # the second output's minima are at 3 + 2 pi k: the start picks one
    return jb.losses.declare(
        lambda y, f: 0.5 * (y - f[0]) ** 2 - jnp.cos(f[1] - 3.0),
        name="periodic_parts",
        n_outputs=2,
        smooth=True,
        **parts,
    )


_PARTS = {
    "fisher": (
        "_FISHER_SCALE",
        lambda: _gaussian_with(fisher=_scaled_fisher),
        lambda: _gaussian_with(fisher=lambda f: 4.0 * jb.losses.gaussian_nll.fisher(f)),
    ),
    "sampler": (
        "_DRAW_SPREAD",
        lambda: _gaussian_with(sampler=_spread_sampler),
        lambda: _gaussian_with(
            sampler=lambda key, f, n: f[0] + 4.0 * jnp.exp(f[1]) * jax.random.normal(key, (n,))
        ),
    ),
    "init": (
        "_START",
        lambda: _periodic_with(init=_start_at),
        lambda: _periodic_with(
            init=lambda y, w: jnp.stack([jnp.sum(w * y) / jnp.sum(w), jnp.float32(9.0)])
        ),
    ),
}


@pytest.mark.parametrize("part", sorted(_PARTS))
def test_a_declared_part_reading_a_global(data, part, monkeypatch):
    X, y = data
    name, declared, written_out = _PARTS[part]
    values = {"_FISHER_SCALE": 4.0, "_DRAW_SPREAD": 4.0, "_START": 9.0}

    def raw(loss):
        return jb.Booster(loss=loss, **_SETTINGS).fit(X, y).predict_raw(X)

    first = raw(declared())
    monkeypatch.setattr(sys.modules[__name__], name, values[name])
    second = raw(declared())
    np.testing.assert_allclose(second, raw(written_out()), rtol=1e-6, atol=1e-6)
    assert np.abs(second - first).max() > 0.1


# a ListNet on each query's top k rows by label: at 8 rows (or fewer) every
# k >= 8 is the same loss
def _top_k_listnet(k):
    def loss(y, f, mask):
        top = jnp.argsort(-jnp.where(mask, y, -jnp.inf))[: min(k, f.shape[0])]
        kept = jnp.zeros(f.shape[0], bool).at[top].set(True) & mask
        target = jax.nn.softmax(jnp.where(kept, y, -jnp.inf))
        log_q = jax.nn.log_softmax(jnp.where(mask, f, -jnp.inf))
        return -jnp.sum(jnp.where(kept, target * log_q, 0.0))

    return loss


def test_group_losses_that_differ_only_on_long_queries():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(180, 3)).astype(np.float32)
    y = np.clip(np.round(X[:, 0] + rng.normal(size=180)) + 2, 0, 4).astype(np.float32)

    def raw(fn):
        loss = jb.losses.declare(fn, per="group", name="top_k_listnet")
        return jb.Booster(loss=loss, **_SETTINGS).fit(X, y, group=[30] * 6).predict_raw(X)

    top_10 = raw(_top_k_listnet(10))
    top_20 = raw(_top_k_listnet(20))
    written_out = raw(lambda y, f, mask: 1.0 * _top_k_listnet(20)(y, f, mask))
    np.testing.assert_allclose(top_20, written_out, rtol=1e-6, atol=1e-6)
    assert np.abs(top_20 - top_10).max() > 0.05


def test_a_group_loss_is_keyed_at_every_length_its_fit_runs():
    mask = jnp.ones((2, 64), bool)
    eval_set = EvalSet("validation_0", None, None, None, (GroupBucket(mask, mask, mask[:, 0]),))
    widths = group_widths(np.array([3, 8, 30, 8]), [eval_set])
    assert widths == (4, 8, 32, 64)
    top_10, top_20 = (jb.losses.declare(_top_k_listnet(k), per="group") for k in (10, 20))
    assert keyed_loss(top_10, (), 1, (4, 8)) == keyed_loss(top_20, (), 1, (4, 8))
    assert keyed_loss(top_10, (), 1, widths) != keyed_loss(top_20, (), 1, widths)


def test_python_called_back_is_keyed_apart_unless_it_is_the_library_s():
    def host_scale(y):
        return np.float32(2.0) * np.ones_like(y)

    def loss(y, f):
        shape = jax.ShapeDtypeStruct(jnp.shape(y), jnp.result_type(y))
        return jax.pure_callback(host_scale, shape, y) * (y - f) ** 2

    assert _key(loss) != _key(loss)  # what host_scale reads is not in the jaxpr
    # a catalogue distribution's init calls the library's moments on the host
    first, again = (keyed_loss(jb.losses.gaussian_nll, (), 2, init_rows=64) for _ in range(2))
    assert again is first

"""A loss's numbers are its programs' inputs: a new value of a number it
reads (bound by ``functools.partial``, a closure, a global, a class
attribute, a captured array) runs the programs of its structure without
compiling them again, and fits the model a fresh fit of that value fits
(checked against a fit after every program cache is cleared)."""

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.engine import derivatives, metrics
from jaxboost.engine.round_programs import derivatives_program, slope_sums_program
from jaxboost.engine.training_programs import (
    group_loss_at_score_program,
    init_score_program,
    loss_at_score_program,
    train_chunk_program,
)
from jaxboost.runtime.lifted_values import bound, lift

_SCALAR = jax.ShapeDtypeStruct((), jnp.float32)
_SETTINGS = {"n_estimators": 8, "max_depth": 2}
_PROGRAMS = (
    derivatives_program,
    slope_sums_program,
    train_chunk_program,
    init_score_program,
    loss_at_score_program,
)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=300)).astype(np.float32)
    return X, y


def _lifted(fn):
    return lift(fn, [(_SCALAR, _SCALAR)], ())


def _cauchy(y, f, c):
    return c**2 / 2 * jnp.log1p(((f - y) / c) ** 2)


def test_values_are_lifted_and_the_rest_is_the_key():
    first, first_values = _lifted(functools.partial(_cauchy, c=2.0))
    second, second_values = _lifted(functools.partial(_cauchy, c=3.0))
    assert first == second and hash(first) == hash(second)
    assert 2.0 in np.concatenate([np.ravel(v) for v in first_values[0]])
    assert 3.0 in np.concatenate([np.ravel(v) for v in second_values[0]])
    # a static parameter (integer_pow's exponent) and the computation stay in the key
    cubed, _ = _lifted(lambda y, f: 2.0 / 2 * jnp.log1p(((f - y) / 2.0) ** 3))
    assert cubed != first
    plus, plus_values = _lifted(lambda y, f: (y - f) ** 2 + jnp.copysign(1.0, 0.0))
    minus, minus_values = _lifted(lambda y, f: (y - f) ** 2 + jnp.copysign(1.0, -0.0))
    assert plus == minus
    assert [np.signbit(v).tolist() for v in plus_values[0]] != [
        np.signbit(v).tolist() for v in minus_values[0]
    ]


def test_a_structure_evaluates_its_values_and_refuses_to_run_without():
    structure, values = _lifted(functools.partial(_cauchy, c=3.0))
    y, f = jnp.arange(4.0), jnp.ones(4)

    def derivatives_of(values, y, f):
        with bound(structure, values):
            return jax.vmap(jax.grad(structure, argnums=1))(y, f)

    reference = jax.vmap(jax.grad(functools.partial(_cauchy, c=3.0), argnums=1))(y, f)
    np.testing.assert_allclose(jax.jit(derivatives_of)(values, y, f), reference, rtol=1e-6)
    with pytest.raises(RuntimeError, match="outside a program handed its values"):
        structure(y[0], f[0])


_FINE = 1.0 + 2.0**-40  # not a float32: float32 rounds it to 1


def _fine_rows(y, f, mask):
    """Derivatives computed in float64 (as Cox's), reading a float64 number."""
    with jax.enable_x64(True):
        shift = (jnp.asarray(_FINE, jnp.float64) - 1.0) * 2.0**40  # 1 in float64, 0 if rounded
        grad = jnp.where(mask, (f.astype(jnp.float64) - y.astype(jnp.float64)) * shift, 0.0)
        grad = grad.astype(f.dtype)
    return grad, jnp.where(mask, 1.0, 0.0).astype(f.dtype)


def test_a_declared_function_computing_in_float64_keeps_its_float64_numbers():
    # a float32 trace holds 8-byte values where the function turns 64-bit
    # mode on: they cross into the program bit for bit and run in 64 bits
    @jb.losses.declare(per="group", row_derivatives=_fine_rows)
    def squares(y, f, mask):
        return 0.5 * jnp.sum(jnp.where(mask, (f - y) ** 2, 0.0))

    group = (
        jax.ShapeDtypeStruct((4,), jnp.float32),
        jax.ShapeDtypeStruct((4,), jnp.float32),
        jax.ShapeDtypeStruct((4,), jnp.bool_),
    )
    structure, values = lift(squares, [group], ())
    y, f, mask = jnp.zeros(4), jnp.arange(4.0), jnp.array([True, True, True, False])

    def rows_of(values, y, f, mask):
        with bound(structure, values):
            return structure.row_derivatives(y, f, mask)

    grad, hess = jax.jit(rows_of)(values, y, f, mask)
    np.testing.assert_array_equal(grad, [0.0, 1.0, 2.0, 0.0])
    np.testing.assert_array_equal(hess, [1.0, 1.0, 1.0, 0.0])


def test_rules_and_callbacks_outside_the_libraries_are_not_lifted():
    scale = 2.0

    @jax.custom_jvp
    def scaled_abs(r):
        return jnp.abs(r)

    @scaled_abs.defjvp
    def _(primals, tangents):  # reads a number the jaxpr does not show
        return jnp.abs(primals[0]), scale * jnp.sign(primals[0]) * tangents[0]

    assert _lifted(lambda y, f: scaled_abs(y - f)) is None

    def called_back(y, f):
        shape = jax.ShapeDtypeStruct((), jnp.float32)
        return jax.pure_callback(lambda r: np.float32(r) ** 2, shape, y - f)

    assert _lifted(called_back) is None
    assert _lifted(lambda y, f: jax.nn.softplus(f - y)) is not None  # JAX's own rule
    assert _lifted(lambda y, f: jb.losses.log_cosh(y, 0.5 * f)) is not None  # the catalogue's


def _misses():
    return [program.cache_info().misses for program in _PROGRAMS]


def _clear_program_caches():
    for program in _PROGRAMS:
        program.cache_clear()
    derivatives._probe_rows.clear_cache()
    jax.clear_caches()


def _fit(loss, data, **settings):
    X, y = data
    return jb.Booster(loss=loss, **_SETTINGS, **settings).fit(X, y).predict(X)


# (the reader of the number, how a value is bound to a loss)
def _by_partial(c):
    return functools.partial(_cauchy, c=c)


def _by_closure(c):
    return lambda y, f: _cauchy(y, f, c)


_C = 1.0


def _by_global(c):
    sys.modules[__name__]._C = c
    return lambda y, f: _cauchy(y, f, _C)


class _Scaled:
    c = 1.0

    def __call__(self, y, f):
        return _cauchy(y, f, self.c)


def _by_class_attribute(c):
    _Scaled.c = c
    return _Scaled()


_CAPTURED = np.ones(1, np.float32)


def _by_captured_array(c):
    _CAPTURED[0] = c  # changed in place
    return lambda y, f: _cauchy(y, f, _CAPTURED[0])


_JITTED_C = 1.0


@jax.jit
def _jitted_cauchy(y, f):  # (JAX caches its trace, with the global it read then)
    return _cauchy(y, f, _JITTED_C)


def _by_jitted_global(c):
    sys.modules[__name__]._JITTED_C = c
    return lambda y, f: _jitted_cauchy(y, f)


_FLOAT64 = {"loss_dtype": "float64"}  # (Float64Loss: the values' float64 trace)


@pytest.mark.parametrize(
    ("binding", "settings"),
    [
        (_by_partial, {}),
        (_by_closure, {}),
        (_by_global, {}),
        (_by_class_attribute, {}),
        (_by_captured_array, {}),
        (_by_jitted_global, {}),
        (_by_partial, _FLOAT64),
        (_by_captured_array, _FLOAT64),
    ],
)
def test_a_new_value_compiles_nothing_and_fits_a_fresh_fit_s_model(data, binding, settings):
    first = _fit(binding(0.5), data, **settings)
    compiled = _misses()
    second = _fit(binding(2.5), data, **settings)
    assert _misses() == compiled  # the first value's programs, run with the second's numbers
    assert np.max(np.abs(second - first)) > 1e-3
    _clear_program_caches()
    fresh = _fit(binding(2.5), data, **settings)
    np.testing.assert_array_equal(second, fresh)


def test_a_value_that_changes_the_hessian_probe_s_answer(data):
    """The probe (Newton or line-search leaves, Armijo) runs per value:
    ``w`` 0 leaves no curvature (line search), ``w`` 1 a squared error."""

    def blend(w):
        return lambda y, f: (1.0 - w) * jnp.abs(y - f) + w * (y - f) ** 2

    flat = _fit(blend(0.0), data)
    curved = _fit(blend(1.0), data)
    _clear_program_caches()
    np.testing.assert_array_equal(curved, _fit(blend(1.0), data))
    _clear_program_caches()
    np.testing.assert_array_equal(flat, _fit(blend(0.0), data))
    X, y = data
    reference = jb.Booster(loss=lambda y, f: (y - f) ** 2, **_SETTINGS).fit(X, y).predict(X)
    np.testing.assert_allclose(curved, reference, atol=1e-5)


def _listnet(y, f, mask, temperature):
    target = jax.nn.softmax(jnp.where(mask, y, -jnp.inf))
    scores = jnp.where(mask, f / temperature, -jnp.inf)
    return -jnp.sum(jnp.where(mask, target * jax.nn.log_softmax(scores), 0.0))


def test_a_group_loss_s_new_value_compiles_nothing_and_fits_a_fresh_fit_s_model():
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 20, size=30)  # groups padded to 2, 4, 8, 16, 32 rows
    X = rng.normal(size=(int(sizes.sum()), 4)).astype(np.float32)
    y = np.clip(np.round(X[:, 0] + rng.normal(size=X.shape[0]) + 1), 0, 3).astype(np.float32)
    programs = (train_chunk_program, group_loss_at_score_program)

    def fit(temperature):
        loss = jb.losses.declare(
            functools.partial(_listnet, temperature=temperature), name="listnet_t", per="group"
        )
        return jb.Booster(loss=loss, **_SETTINGS).fit(X, y, group=sizes).predict(X)

    first = fit(1.0)
    compiled = [program.cache_info().misses for program in programs]
    second = fit(0.25)
    assert [program.cache_info().misses for program in programs] == compiled
    assert np.max(np.abs(second - first)) > 1e-3
    for program in programs:
        program.cache_clear()
    jax.clear_caches()
    np.testing.assert_array_equal(second, fit(0.25))


def _scaled_error(y, f, scale):
    return scale * jnp.abs(y - f) ** 3


def test_metrics_of_a_new_value_compile_nothing_and_report_a_fresh_fit_s_values(data):
    X, y = data
    program = metrics._metric_program(False, jax.default_backend())

    def evaluated(c):
        model = jb.Booster(loss=_by_partial(c), **_SETTINGS)
        scaled_error = functools.partial(_scaled_error, scale=c)
        model.fit(X, y, eval_set=[(X[:100], y[:100])], eval_metric=["loss", scaled_error])
        return model.evals_result_

    evaluated(0.5)
    compiled = program._cache_size()
    second = evaluated(2.5)
    assert program._cache_size() == compiled
    _clear_program_caches()
    program.clear_cache()
    fresh = evaluated(2.5)
    assert second.keys() == fresh.keys()
    for name, values in second.items():
        for metric, per_round in values.items():
            np.testing.assert_array_equal(per_round, fresh[name][metric])


def _shifted_normal(y, f, shift):  # two outputs: the mean (less shift) and the log scale
    return 0.5 * jnp.square((y - f[0] - shift) * jnp.exp(-f[1])) + f[1]


def _shifted_fisher(f, scale_information):
    return jnp.diag(jnp.stack([jnp.exp(-2.0 * f[1]), scale_information]))


def _shifted_start(y, weight, shift):
    mean = jnp.sum(weight * y) / jnp.sum(weight)
    spread = jnp.sum(weight * jnp.square(y - mean)) / jnp.sum(weight)
    return jnp.stack([mean - shift, 0.5 * jnp.log(spread)])


def _shifted_draws(key, f, n, shift):
    return f[0] + shift + jnp.exp(f[1]) * jax.random.normal(key, (n,))


@pytest.mark.parametrize("declared", ["fisher", "sampler"])
def test_a_declared_distribution_s_new_value_compiles_nothing_and_fits_a_fresh_fit_s_model(
    data, declared
):
    """The declared ``fisher``, ``sampler`` and ``init`` read the value too:
    lifted with the loss, run by the same programs."""

    def loss(shift):
        helpers = {"init": functools.partial(_shifted_start, shift=shift)}
        if declared == "fisher":
            helpers["fisher"] = functools.partial(_shifted_fisher, scale_information=1.0 + shift)
        else:
            helpers["sampler"] = functools.partial(_shifted_draws, shift=shift)
        return jb.losses.declare(
            functools.partial(_shifted_normal, shift=shift), n_outputs=2, **helpers
        )

    X, y = data

    def fit(shift):
        model = jb.Booster(loss=loss(shift), **_SETTINGS).fit(X, y)
        return model.predict_raw(X)

    first = fit(0.5)
    compiled = _misses()
    second = fit(2.0)
    assert _misses() == compiled
    assert np.max(np.abs(second - first)) > 1e-3
    _clear_program_caches()
    np.testing.assert_array_equal(second, fit(2.0))


def _pairwise(y, f, mask, sigma):  # a group loss with its own row derivatives
    d = f[:, None] - f[None, :]
    pairs = mask[:, None] & mask[None, :] & (y[:, None] > y[None, :])
    return jnp.sum(jnp.where(pairs, jax.nn.softplus(-sigma * d), 0.0))


def _pairwise_rows(y, f, mask, sigma):
    grad = jax.grad(_pairwise, argnums=1)(y, f, mask, sigma)
    return grad, jnp.where(mask, sigma * sigma * 0.25 * jnp.sum(mask), 0.0)


def test_a_group_loss_s_declared_row_derivatives_read_the_new_value():
    rng = np.random.default_rng(5)
    sizes = rng.integers(2, 9, size=20)
    X = rng.normal(size=(int(sizes.sum()), 3)).astype(np.float32)
    y = np.clip(np.round(X[:, 0] + rng.normal(size=X.shape[0]) + 1), 0, 3).astype(np.float32)

    def fit(sigma):
        loss = jb.losses.declare(
            functools.partial(_pairwise, sigma=sigma),
            per="group",
            row_derivatives=functools.partial(_pairwise_rows, sigma=sigma),
        )
        return jb.Booster(loss=loss, **_SETTINGS).fit(X, y, group=sizes).predict(X)

    first = fit(1.0)
    compiled = train_chunk_program.cache_info().misses
    second = fit(3.0)
    assert train_chunk_program.cache_info().misses == compiled
    assert np.max(np.abs(second - first)) > 1e-3
    train_chunk_program.cache_clear()
    jax.clear_caches()
    np.testing.assert_array_equal(second, fit(3.0))


_ROW_TEMPERATURE = 1.0


def _softmax_rows(y, f, mask):  # a group loss's closed-form derivatives reading a global
    p = jax.nn.softmax(jnp.where(mask, f, -jnp.inf))
    q = jax.nn.softmax(jnp.where(mask, y * _ROW_TEMPERATURE, -jnp.inf))
    return jnp.where(mask, p - q, 0.0), jnp.where(mask, p * (1.0 - p), 0.0)


def test_row_derivatives_reading_a_global_read_its_new_value():
    """The engine reads a loss's declared functions through its record
    (`losses.metadata_of`): the structure's record hands the lifted ones,
    not the functions holding the first fit's numbers."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.normal(size=200) > 0).astype(np.float32)
    qid = np.repeat(np.arange(20), 10)
    loss = jb.losses.declare(
        functools.partial(_listnet, temperature=1.0),
        per="group",
        row_derivatives=_softmax_rows,
        name="listnet_rows",
    )

    def fit(temperature):
        sys.modules[__name__]._ROW_TEMPERATURE = temperature
        settings = {**_SETTINGS, "min_child_samples": 0}
        return jb.Booster(loss=loss, **settings).fit(X, y, qid=qid).predict(X)

    first = fit(1.0)
    second = fit(5.0)
    assert np.max(np.abs(second - first)) > 1e-3
    train_chunk_program.cache_clear()
    jax.clear_caches()
    np.testing.assert_array_equal(second, fit(5.0))


def test_a_catalogue_loss_is_traced_once_and_any_other_loss_every_time(monkeypatch):
    from jaxboost.runtime import lifted_values

    traced = []
    trace = lifted_values._lift
    monkeypatch.setattr(
        lifted_values, "_lift", lambda fn, *args: traced.append(fn) or trace(fn, *args)
    )
    monkeypatch.setattr(lifted_values, "_CATALOGUE_LIFTS", {})
    width = 4
    calls = [
        (
            jax.ShapeDtypeStruct((width,), jnp.float32),
            jax.ShapeDtypeStruct((width,), jnp.float32),
            jax.ShapeDtypeStruct((width,), jnp.bool_),
        )
    ]
    catalogue = jb.losses.lambdarank(k=7)
    user = jb.losses.declare(functools.partial(_listnet, temperature=0.5), name="t", per="group")
    first = [lift(loss, calls, ()) for loss in (catalogue, user)]
    again = [lift(loss, calls, ()) for loss in (catalogue, user)]
    assert traced == [catalogue, user, user]  # the user's may read a changed global
    for before, after in zip(first, again):
        assert before[0] == after[0]
        for values, values_again in zip(before[1], after[1]):
            for value, value_again in zip(values, values_again):
                np.testing.assert_array_equal(value, value_again)

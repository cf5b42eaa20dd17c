"""A lambda written again is the first one: its compiled programs are reused,
unless anything it reads differs."""

import jax.numpy as jnp
import numpy as np

import jaxboost as jb
from jaxboost.engine.round_programs import (
    derivatives_program,
    slope_sums_program,
    tree_round_program,
)
from jaxboost.engine.training import train_chunk_program
from jaxboost.runtime.same_function import canonical


def _written(text: str, **namespace):
    """A function from source text, as a notebook cell makes it anew."""
    return eval(text, {"jnp": jnp, "np": np, **namespace})


def test_the_same_text_gives_the_first_function():
    first = canonical(_written("lambda y, f: jnp.logaddexp(f - y, y - f)"))
    again = canonical(_written("lambda y, f: jnp.logaddexp(f - y, y - f)"))
    assert again is first


def test_any_difference_gives_another_function():
    base = canonical(_written("lambda y, f: 2.0 * jnp.abs(y - f)"))
    for other in (
        _written("lambda y, f: 3.0 * jnp.abs(y - f)"),  # a constant
        _written("lambda y, f: 2.0 * jnp.square(y - f)"),  # a name
        _written("lambda y, f, s=1.0: 2.0 * jnp.abs(y - f)"),  # a default
    ):
        assert canonical(other) is not base
    # the value of a global it reads
    scaled = canonical(_written("lambda y, f: scale * jnp.abs(y - f)", scale=2.0))
    assert canonical(_written("lambda y, f: scale * jnp.abs(y - f)", scale=2.0)) is scaled
    assert canonical(_written("lambda y, f: scale * jnp.abs(y - f)", scale=2.5)) is not scaled
    # an array's values, not its identity
    weights = np.arange(3.0)
    text = "lambda y, f: jnp.sum(w * (y - f) ** 2)"
    first = canonical(_written(text, w=weights))
    assert canonical(_written(text, w=weights.copy())) is first
    assert canonical(_written(text, w=weights + 1)) is not first


def test_closures_compare_their_cells():
    def make(delta):
        return lambda y, f: jnp.where(jnp.abs(y - f) < delta, 0.5 * (y - f) ** 2, delta)

    assert canonical(make(1.0)) is canonical(make(1.0))
    assert canonical(make(1.0)) is not canonical(make(2.0))


def test_a_function_capturing_an_unreadable_object_is_left_alone():
    class Scale:
        value = 2.0

    scale = Scale()
    text = "lambda y, f: scale.value * jnp.abs(y - f)"
    fn = _written(text, scale=scale)
    assert canonical(fn) is fn
    assert canonical(_written(text, scale=scale)) is not fn


def test_a_lambda_written_again_compiles_nothing_and_fits_the_same_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=300)).astype(np.float32)
    text = "lambda y, f: jnp.sqrt(1.0 + (f - y) ** 2) - 1.0 + 0.0 * 7.25"
    settings = {"n_estimators": 5, "max_depth": 2}
    programs = (derivatives_program, slope_sums_program, tree_round_program, train_chunk_program)
    first = jb.Booster(loss=_written(text), **settings).fit(X, y)
    compiled = [program.cache_info().misses for program in programs]
    again = jb.Booster(loss=_written(text), **settings).fit(X, y)
    assert [program.cache_info().misses for program in programs] == compiled
    np.testing.assert_array_equal(again.predict(X), first.predict(X))

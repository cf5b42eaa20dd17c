"""Tests of the program caches: one compiled program per argument shape, a bounded number."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxboost.runtime.program_cache import argument_signature, one_program_per_shape


def _counting_factory(maxsize):
    built = []

    @one_program_per_shape(maxsize)
    def scaled_sum(scale):
        function = jax.jit(lambda x: scale * jnp.sum(x))
        built.append(function)
        return function

    return scaled_sum, built


def test_signature_names_every_leaf_shape_and_dtype():
    signature = argument_signature({"a": np.zeros((3, 2), np.float32)}, (np.int32(1), 2.0))
    assert signature == (((3, 2), "float32"), ((), "int32"), ((), "float"))
    assert argument_signature(np.zeros(3)) != argument_signature(np.zeros(4))
    assert argument_signature(np.zeros(3)) != argument_signature(np.zeros(3, np.float32))


def test_each_program_is_compiled_for_one_shape_and_reused_for_it():
    scaled_sum, built = _counting_factory(maxsize=8)
    assert float(scaled_sum(2.0)(np.ones(3))) == 6.0
    assert float(scaled_sum(2.0)(np.ones(5))) == 10.0
    assert float(scaled_sum(3.0)(np.ones(3))) == 9.0
    assert float(scaled_sum(2.0)(np.full(3, 4.0))) == 24.0  # same settings and shape: reused
    assert len(built) == 3
    assert [function._cache_size() for function in built] == [1, 1, 1]
    info = scaled_sum.cache_info()
    assert (info.hits, info.misses, info.currsize) == (1, 3, 3)


def test_least_recently_used_programs_are_dropped_past_the_bound():
    scaled_sum, built = _counting_factory(maxsize=2)
    for n in (1, 2, 3, 1):
        scaled_sum(1.0)(np.ones(n))
    # n = 1 was dropped when n = 3 came: built again
    assert len(built) == 4 and scaled_sum.cache_info().currsize == 2
    scaled_sum.cache_clear()
    assert scaled_sum.cache_info().currsize == 0

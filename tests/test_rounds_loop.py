"""The loop over chunks of rounds: a chunk after the first compiles nothing."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxboost as jb

_compiles = [0]


def _count(event: str, *_, **__) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _compiles[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count)


def _compiles_of_a_fit(n_estimators: int, constant: float) -> int:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=200)).astype(np.float32)
    loss = eval(f"lambda y, f: jnp.square(f - y) + {constant}", {"jnp": jnp})  # a new loss
    before = _compiles[0]
    jb.Booster(loss=loss, n_estimators=n_estimators, max_depth=2, rounds_per_chunk=2).fit(X, y)
    return _compiles[0] - before


def test_later_chunks_reuse_the_first_chunks_program():
    # the scores a chunk hands the next stay on the devices: as host arrays
    # they made the program compile again for the second chunk
    _compiles_of_a_fit(2, 0.0)  # what a process compiles once, whatever the loss
    one_chunk = _compiles_of_a_fit(2, 1e-30)
    three_chunks = _compiles_of_a_fit(6, 2e-30)
    assert three_chunks == one_chunk

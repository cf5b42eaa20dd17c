"""LambdaRank's ranks by comparison (queries up to
``ranking.COMPARED_WIDTH`` rows): the positions of a stable sort, and the
value and derivatives the sort-based pairs give, on queries with tied
scores, tied labels, padding, one row and labels all equal."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxboost.losses import ranking
from jaxboost.losses.metadata import metadata_of

from jaxboost import losses


def _stable_positions(key: np.ndarray) -> np.ndarray:
    """Each row's position in numpy's stable sort of ``key`` descending."""
    order = np.argsort(-key, kind="stable")
    position = np.empty(len(key), np.int64)
    position[order] = np.arange(len(key))
    return position


@pytest.mark.parametrize(
    "key",
    [
        [0.5, -1.0, 0.5, 2.0, 0.5, -np.inf, -np.inf],  # ties, padding's -inf last
        [0.0, -0.0, 1.0, -0.0, 0.0],  # -0.0 ties with 0.0, as in the sort
        [3.0],
        [1.0, 1.0, 1.0, 1.0],
        list(np.random.default_rng(0).integers(0, 4, 32).astype(float)),
    ],
)
def test_descending_positions_are_those_of_a_stable_sort(key):
    key = np.asarray(key, np.float32)
    found = np.asarray(ranking.descending_positions(jnp.asarray(key)))
    np.testing.assert_array_equal(found, _stable_positions(key))


def _queries(width: int, n: int, seed: int):
    """``n`` queries padded to ``width`` rows with garbage: tied scores and
    labels, one of one row, one of all-equal labels, one of all-zero labels."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, width + 1, n)
    sizes[:4] = [1, width, width, 2]
    mask = np.arange(width)[None, :] < sizes[:, None]
    y = rng.integers(0, 4, (n, width)).astype(np.float32)
    f = np.round(rng.normal(size=(n, width)), 1).astype(np.float32)  # ties
    y[1], y[2, : width // 2] = 2.0, 0.0
    f[3] = 0.7  # every score equal
    f[~mask] = rng.normal(size=(~mask).sum()) * 10
    return jnp.asarray(y), jnp.asarray(f), jnp.asarray(mask)


def _value_and_derivatives(loss, y, f, mask):
    value = jax.vmap(loss)(y, f, mask)
    grad = jax.vmap(jax.grad(loss, argnums=1))(y, f, mask)
    return [value, grad, *jax.vmap(metadata_of(loss).row_derivatives)(y, f, mask)]


@pytest.mark.parametrize("width", [8, 32])
@pytest.mark.parametrize(("k", "sigma", "norm"), [(30, 1.0, True), (3, 2.0, False)])
def test_ranks_by_comparison_equal_those_by_sort(monkeypatch, width, k, sigma, norm):
    loss = losses.lambdarank(k, sigma, norm)
    y, f, mask = _queries(width, 40, seed=width + (k or 0))
    compared = _value_and_derivatives(loss, y, f, mask)
    assert ranking._lambdarank_pairs(y[1], f[1], mask[1], k, sigma, norm).top is None
    monkeypatch.setattr(ranking, "COMPARED_WIDTH", 0)  # every query by the sort
    assert ranking._lambdarank_pairs(y[1], f[1], mask[1], k, sigma, norm).top is not None
    sorted_ = _value_and_derivatives(loss, y, f, mask)
    for by_comparison, by_sort in zip(compared, sorted_):
        np.testing.assert_allclose(by_comparison, by_sort, rtol=2e-6, atol=1e-7)
        assert np.all(np.asarray(by_comparison)[0] == 0.0)  # one row: no pair

"""The fused training program compiles only what its fit needs: a small fit's
line search does not narrow, a Newton fit's program leaves the rarely run
line search of leaves without a Newton step to the program that has it; the
models are the same."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.training import NumericSettings, ShardData, StaticSettings, _train_chunk
from jaxboost.frontends.training import program_settings


def _traced(cfg: StaticSettings, n_rows: int = 64, n_features: int = 3) -> str:
    """The jaxpr of a chunk of ``cfg``'s rounds on one shard (traced, not compiled)."""
    struct = jax.ShapeDtypeStruct
    data = ShardData(
        bins=struct((n_features, n_rows), jnp.uint8),
        y=struct((n_rows,), jnp.float32),
        weight=struct((n_rows,), jnp.float32),
        row_id=struct((n_rows,), jnp.uint32),
    )
    hyper = NumericSettings(*(struct((), jnp.float32) for _ in NumericSettings._fields))
    scalar = struct((), jnp.int32)
    edges, raw = struct((n_features, 15), jnp.float32), struct((n_rows, 1), jnp.float32)

    def chunk(data, edges, raw, first_round, n_active, seed, hyper):
        return _train_chunk(cfg, None, data, edges, raw, first_round, n_active, seed, hyper)

    arguments = (data, edges, raw, scalar, scalar, struct((), jnp.uint32), hyper)
    return str(jax.make_jaxpr(chunk)(*arguments))


def test_a_small_fits_line_search_does_not_narrow():
    # the narrowed search (two more searches in a cond) pays on many rows only
    cfg = StaticSettings(
        loss=losses.quantile(0.3),
        n_outputs=1,
        max_depth=2,
        leaf_method="line_search",
        narrow_line_search=True,
        rounds_per_chunk=1,
    )
    large = _traced(cfg).count(" while[")
    small = _traced(dataclasses.replace(cfg, fast_compile=True)).count(" while[")
    assert small < large


def test_the_program_that_counts_leaves_without_a_newton_step_has_no_search_for_them():
    cfg = StaticSettings(loss=losses.squared_error, n_outputs=1, max_depth=2, rounds_per_chunk=1)
    searching = _traced(cfg)
    counting = _traced(dataclasses.replace(cfg, searches_stuck_leaves=False))
    assert " while[" in searching  # (the line search, in a cond)
    assert " while[" not in counting.split("scan[", 1)[1]


def test_a_small_and_a_large_fits_quantile_trees_are_the_same(monkeypatch):
    # the narrowed search agrees with the full one inside its brackets
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = (X[:, 0] + rng.standard_t(3, size=300)).astype(np.float32)
    settings = {"loss": losses.quantile(0.3), "n_estimators": 8, "max_depth": 2}
    small = jb.Booster(**settings).fit(X, y)
    monkeypatch.setattr(program_settings, "FAST_COMPILE_ROWS", 0)  # fitted as a large fit
    large = jb.Booster(**settings).fit(X, y)
    for name, left, right in zip(small.forest_._fields, small.forest_, large.forest_, strict=True):
        if name in ("leaf_value", "split_gain", "leaf_cover"):
            np.testing.assert_allclose(left, right, rtol=1e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(left, right, err_msg=name)
    # (the quantile of each leaf: a data point's residual, not a penalised step)
    assert np.any(np.asarray(small.forest_.leaf_value) != 0)

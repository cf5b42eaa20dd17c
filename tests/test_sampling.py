"""Row and column subsampling: reproducible, shard-independent, right sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.engine.sampling import feature_mask, row_mask


def test_row_mask_keeps_about_the_fraction_and_depends_on_round_and_seed():
    rows = jnp.arange(100_000)
    mask = np.asarray(row_mask(rows, 3, 7, 0.3))
    assert mask.mean() == pytest.approx(0.3, abs=0.01)
    assert not np.array_equal(mask, np.asarray(row_mask(rows, 4, 7, 0.3)))
    assert not np.array_equal(mask, np.asarray(row_mask(rows, 3, 8, 0.3)))
    np.testing.assert_array_equal(mask, np.asarray(row_mask(rows, 3, 7, 0.3)))
    # a row's draw depends on its global index only, not on how rows are split
    np.testing.assert_array_equal(mask[500:900], np.asarray(row_mask(rows[500:900], 3, 7, 0.3)))


def test_feature_mask_draws_exactly_the_requested_count():
    for round_index in range(5):
        mask = np.asarray(feature_mask(10, round_index, 0, 0.35))
        assert mask.sum() == 4
    assert np.asarray(feature_mask(10, 0, 0, 0.01)).sum() == 1


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(301, 6)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=301)).astype(np.float32)
    return X, y


def test_subsampled_models_are_reproducible_and_seed_dependent():
    X, y = _data()
    settings = {"n_estimators": 10, "max_depth": 3, "subsample": 0.5, "colsample_bytree": 0.5}
    first = jb.Booster(random_state=1, **settings).fit(X, y)
    again = jb.Booster(random_state=1, **settings).fit(X, y)
    other = jb.Booster(random_state=2, **settings).fit(X, y)
    np.testing.assert_array_equal(first.predict_raw(X), again.predict_raw(X))
    assert not np.array_equal(first.predict_raw(X), other.predict_raw(X))


def test_each_tree_splits_only_on_its_drawn_features():
    X, y = _data()
    model = jb.Booster(n_estimators=6, max_depth=3, colsample_bytree=1 / 3, random_state=4).fit(
        X, y
    )
    for round_index in range(6):
        allowed = np.flatnonzero(np.asarray(feature_mask(6, round_index, 4, 1 / 3)))
        split = np.isfinite(model.forest_.threshold[round_index])
        assert set(model.forest_.feature[round_index][split]) <= set(allowed)


def test_subsampling_gives_the_same_model_on_one_or_many_devices():
    if len(jax.devices()) < 2:
        pytest.skip("needs 2 devices: import jaxboost before JAX starts")
    X, y = _data()
    settings = {"n_estimators": 8, "max_depth": 3, "subsample": 0.6, "random_state": 3}
    single = jb.Booster(devices=jax.devices()[:1], **settings).fit(X, y)
    sharded = jb.Booster(**settings).fit(X, y)
    np.testing.assert_array_equal(single.forest_.feature, sharded.forest_.feature)
    np.testing.assert_allclose(single.predict_raw(X), sharded.predict_raw(X), rtol=1e-5, atol=1e-6)


def test_leaves_see_only_the_in_bag_rows():
    X, y = _data()
    model = jb.Booster(n_estimators=1, max_depth=2, subsample=0.5, random_state=0).fit(X, y)
    kept = np.asarray(row_mask(jnp.arange(301), 0, 0, 0.5)).sum()
    assert model.forest_.leaf_weight[0].sum() == pytest.approx(kept)

"""Tests of ``jaxboost.engine.quantise``: ranges, scale, unbiased rounding, the same
integers however the rows are sharded; and quantised training end to end."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.quantise import check_quantisation, quantise_split_stats
from jaxboost.runtime.devices import ROWS, make_mesh


def _split_columns(stats, row_id, round_index, seed, n_levels, axis_name):
    """quantise_split_stats of ``stats`` ``(n_rows, 2)`` [gradient, hessian],
    with the scale in the gradients' own units: ``(quantised, scale)``."""
    unit, quantised, scale = quantise_split_stats(
        stats[:, :1], stats[:, 1:], row_id, round_index, seed, n_levels, axis_name
    )
    return quantised, scale / jnp.stack([unit, jnp.float32(1.0)])


def _quantise(stats, row_id, round_index=0, seed=0, n_levels=4):
    quantised, scale = jax.jit(_split_columns, static_argnames=("n_levels", "axis_name"))(
        jnp.asarray(stats), jnp.asarray(row_id), round_index, seed, n_levels, None
    )
    return np.asarray(quantised), np.asarray(scale)


def test_values_stay_within_their_levels_and_the_peak_sets_the_scale():
    rng = np.random.default_rng(0)
    stats = np.stack([rng.normal(size=5000), -rng.uniform(0, 3, size=5000)], 1).astype(np.float32)
    quantised, scale = _quantise(stats, np.arange(5000, dtype=np.uint32), n_levels=6)
    assert quantised.dtype == np.int32
    np.testing.assert_allclose(scale, np.abs(stats).max(axis=0) / [3, 6], rtol=1e-6)
    assert np.abs(quantised[:, 0]).max() == 3 and np.abs(quantised[:, 1]).max() == 6
    # rounding moves a value by less than one unit
    assert np.all(np.abs(quantised * scale - stats) < scale * (1 + 1e-5))


def test_the_unit_is_gradient_units_and_the_scales_are_in_it():
    from jaxboost.engine.split import gradient_unit

    rng = np.random.default_rng(2)
    grad = (3e4 * rng.normal(size=(2000, 1))).astype(np.float32)
    hess = rng.uniform(0, 5, size=(2000, 1)).astype(np.float32)
    unit, quantised, scale = jax.jit(quantise_split_stats, static_argnums=(5, 6))(
        grad, hess, np.arange(2000, dtype=np.uint32), 0, 0, 4, None
    )
    assert float(unit) == float(gradient_unit(jnp.asarray(grad), None)) == 2.0**-17
    # one unit of the gradient column is worth its peak (in the unit) over 2
    np.testing.assert_allclose(scale, [np.abs(grad).max() * 2.0**-17 / 2, hess.max() / 4])
    scaled = np.concatenate([grad * 2.0**-17, hess], axis=1)
    assert np.all(np.abs(np.asarray(quantised) * np.asarray(scale) - scaled) < np.asarray(scale))


def test_stochastic_rounding_is_unbiased():
    # one value, rounded on 200k rows: the mean of the integers is the value
    n_rows = 200_000
    stats = np.zeros((n_rows, 2), np.float32)
    stats[0] = [1.0, 4.0]  # the peaks: one unit is 0.5 (gradient) and 1.0 (hessian)
    stats[1:] = [0.3, 1.7]
    quantised, scale = _quantise(stats, np.arange(n_rows, dtype=np.uint32), n_levels=4)
    np.testing.assert_allclose(scale, [0.5, 1.0])
    mean = (quantised[1:] * scale).mean(axis=0)
    np.testing.assert_allclose(mean, [0.3, 1.7], atol=4 * 0.5 / np.sqrt(n_rows))
    assert set(np.unique(quantised[1:, 0])) == {0, 1}
    assert set(np.unique(quantised[1:, 1])) == {1, 2}


def test_all_zero_columns_and_zero_rows_stay_zero():
    stats = np.zeros((100, 2), np.float32)
    stats[:50, 0] = np.linspace(-1, 1, 50)
    quantised, scale = _quantise(stats, np.arange(100, dtype=np.uint32))
    assert scale[1] == 1.0 and np.all(quantised[:, 1] == 0)
    assert np.all(quantised[50:] == 0)  # zero rows (padding, out of bag) add nothing


def test_rounding_depends_on_the_round_and_seed_not_on_the_sharding():
    rng = np.random.default_rng(1)
    n_rows = 4096
    stats = rng.normal(size=(n_rows, 2)).astype(np.float32)
    row_id = np.arange(n_rows, dtype=np.uint32)
    whole, whole_scale = _quantise(stats, row_id, round_index=3, seed=7)
    assert not np.array_equal(whole, _quantise(stats, row_id, round_index=4, seed=7)[0])
    assert not np.array_equal(whole, _quantise(stats, row_id, round_index=3, seed=8)[0])
    mesh = make_mesh(jax.devices()[:2])
    sharded = jax.jit(
        jax.shard_map(
            functools.partial(_split_columns, n_levels=4, axis_name=ROWS),
            mesh=mesh,
            in_specs=(P(ROWS), P(ROWS), P(), P()),
            out_specs=(P(ROWS), P()),
            check_vma=False,
        )
    )
    quantised, scale = sharded(jnp.asarray(stats), jnp.asarray(row_id), 3, 7)
    np.testing.assert_array_equal(np.asarray(quantised), whole)
    np.testing.assert_array_equal(np.asarray(scale), whole_scale)


def test_check_quantisation_rejects_bad_levels_and_overflowing_sums():
    assert check_quantisation(4, 1_000_000) == 4
    for bad in (1, 0, 2.5, True, "4"):
        with pytest.raises(ValueError, match="num_grad_quant_bins"):
            check_quantisation(bad, 1000)
    with pytest.raises(ValueError, match="overflow"):
        check_quantisation(1024, 2**21)


def _data(n_rows=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 6)).astype(np.float32)
    logit = 2 * X[:, 0] - X[:, 1] ** 2 + np.sin(3 * X[:, 2])
    y = (rng.uniform(size=n_rows) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return X, y


def _log_loss(model, X, y):
    p = 1 / (1 + np.exp(-np.asarray(model.predict_raw(X)).ravel()))
    return float(np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))))


def test_quantised_training_fits_as_well_as_float_training():
    X, y = _data()
    X_test, y_test = _data(seed=1)
    settings = {"loss": "binary_logloss", "n_estimators": 40, "max_depth": 4}
    exact = jb.Booster(**settings).fit(X, y)
    quantised = jb.Booster(use_quantized_grad=True, **settings).fit(X, y)
    # another model (the splits see rounded sums), as good on held-out rows
    assert not np.array_equal(quantised.forest_.threshold_bin, exact.forest_.threshold_bin)
    exact_loss, quantised_loss = (
        _log_loss(exact, X_test, y_test),
        _log_loss(quantised, X_test, y_test),
    )
    assert quantised_loss < 1.05 * exact_loss
    assert quantised.train_loss_[-1] < 0.8 * quantised.train_loss_[0]
    # reproducible: the rounding is fixed by (row, round, seed)
    again = jb.Booster(use_quantized_grad=True, **settings).fit(X, y)
    np.testing.assert_array_equal(again.predict_raw(X), quantised.predict_raw(X))
    reseeded = jb.Booster(use_quantized_grad=True, random_state=5, **settings).fit(X, y)
    assert not np.array_equal(reseeded.predict_raw(X), quantised.predict_raw(X))


def test_quantised_training_is_the_same_on_one_or_two_devices():
    X, y = _data()
    settings = {"loss": "binary_logloss", "n_estimators": 15, "max_depth": 4}
    one = jb.Booster(use_quantized_grad=True, devices=jax.devices()[:1], **settings).fit(X, y)
    two = jb.Booster(use_quantized_grad=True, devices=jax.devices()[:2], **settings).fit(X, y)
    np.testing.assert_array_equal(one.forest_.feature, two.forest_.feature)
    np.testing.assert_array_equal(one.forest_.threshold_bin, two.forest_.threshold_bin)
    np.testing.assert_allclose(two.predict_raw(X), one.predict_raw(X), rtol=1e-5, atol=1e-6)


def test_quantised_training_with_vector_outputs_and_a_custom_loss():
    X, _ = _data()
    classes = np.digitize(X[:, 0] + X[:, 1], [-1, 0, 1]).astype(np.float32)

    def log_cosh(y, f):  # a custom loss, hessians from JAX
        d = y - f
        return jnp.logaddexp(d, -d)

    smooth = 0.5 * X[:, 0] + 0.2 * np.sin(3 * X[:, 1])
    for loss, target in (("softmax_cross_entropy", classes), (log_cosh, smooth)):
        exact = jb.Booster(loss=loss, n_estimators=20, max_depth=3).fit(X, target)
        quantised = jb.Booster(
            loss=loss, n_estimators=20, max_depth=3, use_quantized_grad=True, num_grad_quant_bins=16
        ).fit(X, target)
        assert quantised.train_loss_[-1] < 1.05 * exact.train_loss_[-1]


def test_the_settings_are_saved_with_the_model(tmp_path):
    X, y = _data(500)
    model = jb.Booster(
        loss="binary_logloss", n_estimators=5, use_quantized_grad=True, num_grad_quant_bins=8
    ).fit(X, y)
    model.save(tmp_path / "model.json")
    loaded = jb.load(tmp_path / "model.json")
    assert (loaded.use_quantized_grad, loaded.num_grad_quant_bins) == (True, 8)
    np.testing.assert_array_equal(loaded.fit(X, y).predict_raw(X), model.predict_raw(X))


def test_bad_quantisation_settings_are_named():
    X, y = _data(200)
    with pytest.raises(ValueError, match="num_grad_quant_bins"):
        jb.Booster(use_quantized_grad=True, num_grad_quant_bins=1, n_estimators=2).fit(X, y)
    # ignored unless quantisation is on, as in LightGBM
    jb.Booster(num_grad_quant_bins=1, n_estimators=2).fit(X, y)


@pytest.mark.parametrize(
    "settings",
    [
        {"loss": "quantile", "split_criterion": "first_order"},  # line-search leaves
        {"loss": "softmax_cross_entropy", "multi_strategy": "one_output_per_tree"},
    ],
    ids=["quantile", "one_output_per_tree"],
)
def test_quantised_training_with_other_algorithms(settings):
    X, _ = _data(2000)
    target = np.digitize(X[:, 0] + X[:, 1], [-1, 0, 1]).astype(np.float32)
    if settings["loss"] == "quantile":
        settings = {**settings, "loss": losses.quantile(0.8)}
        target = X[:, 0] + 0.3 * X[:, 1] ** 2
    # (min_child_samples=0: what "auto" is with quantised gradients, on both sides)
    common = {"n_estimators": 15, "max_depth": 3, "min_child_samples": 0, **settings}
    exact = jb.Booster(**common).fit(X, target)
    quantised = jb.Booster(use_quantized_grad=True, num_grad_quant_bins=16, **common).fit(X, target)
    assert quantised.train_loss_[-1] < 0.8 * quantised.train_loss_[0]
    assert quantised.train_loss_[-1] < 1.02 * exact.train_loss_[-1]

"""Tests of ``jaxboost.engine.split`` against a brute-force numpy search over every split."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.engine.split import find_best_splits

# only the output count shapes the program; the thresholds are traced
_find = jax.jit(find_best_splits, static_argnames=("n_outputs", "cumulative"))

RTOL, ATOL = 1e-4, 1e-5


def _score(stats: np.ndarray, n_outputs: int, reg_lambda: float) -> float:
    """``sum_k G_k^2 / (H_k + lambda)``, a term dropped where ``H_k + lambda <= 0``."""
    total = 0.0
    for k in range(n_outputs):
        grad, hess = stats[k], stats[n_outputs + k]
        if hess + reg_lambda > 0:
            total += grad**2 / (hess + reg_lambda)
    return total


def _brute_force_gains(hist, n_outputs, reg_lambda, min_child_weight):
    """Gain of every (feature, threshold, missing direction) of every node.

    Returns ``(n_nodes, n_features, n_value_bins, 2)`` float64, ``-inf`` where a
    child has too little hessian or no weight; direction 1 = missing goes left.
    """
    hist = np.asarray(hist, np.float64)
    n_features, n_nodes, n_bins, _ = hist.shape
    gains = np.full((n_nodes, n_features, n_bins - 1, 2), -np.inf)
    for node in range(n_nodes):
        for feature in range(n_features):
            node_hist = hist[feature, node]
            parent = node_hist.sum(axis=0)
            for threshold in range(n_bins - 1):
                for missing_left in (0, 1):
                    left = node_hist[: threshold + 1].sum(axis=0)
                    if missing_left:
                        left = left + node_hist[-1]
                    right = parent - left
                    valid = all(
                        child[n_outputs : 2 * n_outputs].sum() >= min_child_weight and child[-1] > 0
                        for child in (left, right)
                    )
                    if valid:
                        gains[node, feature, threshold, missing_left] = 0.5 * (
                            _score(left, n_outputs, reg_lambda)
                            + _score(right, n_outputs, reg_lambda)
                            - _score(parent, n_outputs, reg_lambda)
                        )
    return gains


def _histograms(rng, n_features, n_rows, n_nodes, n_bins, n_outputs, missing_rate=0.15):
    """Histograms of random rows: ``[grad (K), hess (K), weight]`` per row."""
    bins = rng.integers(0, n_bins - 1, size=(n_features, n_rows))
    bins[rng.random((n_features, n_rows)) < missing_rate] = n_bins - 1
    node_of_row = rng.integers(0, n_nodes, size=n_rows)
    signal = (bins[0] >= (n_bins - 1) // 2).astype(float) - 0.5
    grad = rng.normal(size=(n_rows, n_outputs)) + signal[:, None] * np.arange(1, n_outputs + 1)
    hess = rng.uniform(0.2, 1.5, size=(n_rows, n_outputs))
    weight = rng.uniform(0.5, 2.0, size=(n_rows, 1))
    stats = np.concatenate([grad, hess, weight], axis=1)
    hist = np.zeros((n_features, n_nodes, n_bins, stats.shape[1]))
    for feature in range(n_features):
        np.add.at(hist[feature], (node_of_row, bins[feature]), stats)
    return hist.astype(np.float32)


def _run(hist, n_outputs, reg_lambda=1.0, min_child_weight=0.0, min_split_gain=0.0):
    choice = _find(
        jnp.asarray(hist),
        n_outputs=n_outputs,
        reg_lambda=reg_lambda,
        min_child_weight=min_child_weight,
        min_split_gain=min_split_gain,
    )
    return jax.tree.map(np.asarray, choice)


def _check_against_brute_force(hist, n_outputs, reg_lambda, min_child_weight, min_split_gain):
    choice = _run(hist, n_outputs, reg_lambda, min_child_weight, min_split_gain)
    gains = _brute_force_gains(hist, n_outputs, reg_lambda, min_child_weight)
    n_nodes = hist.shape[1]
    for field in choice[:5]:  # (middle: None without monotone constraints)
        assert field.shape == (n_nodes,)
    assert choice.feature.dtype == np.int32 and choice.threshold_bin.dtype == np.int32
    assert choice.missing_left.dtype == bool and choice.do_split.dtype == bool
    for node in range(n_nodes):
        best = gains[node].max()
        expect_split = np.isfinite(best) and best > min_split_gain + 1e-4 * max(abs(best), 1)
        expect_no_split = not np.isfinite(best) or best < min_split_gain - 1e-4 * abs(best)
        if expect_no_split:
            assert not choice.do_split[node], f"node {node}: best gain {best}"
            assert choice.gain[node] == 0.0
            continue
        if not expect_split:
            continue  # too close to min_split_gain to call in float32
        assert choice.do_split[node], f"node {node}: best gain {best}"
        np.testing.assert_allclose(choice.gain[node], best, rtol=RTOL, atol=ATOL)
        chosen = gains[
            node, choice.feature[node], choice.threshold_bin[node], int(choice.missing_left[node])
        ]
        np.testing.assert_allclose(chosen, best, rtol=RTOL, atol=ATOL, err_msg=f"node {node}")
        # where the best candidate is clear, it is the one chosen
        ranked = np.sort(np.unique(gains[node][np.isfinite(gains[node])]))
        if ranked.size == 1 or ranked[-1] - ranked[-2] > 1e-3 * abs(ranked[-1]):
            where = np.argwhere(gains[node] == ranked[-1])
            assert tuple(where[0]) == (
                choice.feature[node],
                choice.threshold_bin[node],
                int(choice.missing_left[node]),
            )
    return choice, gains


# 20 outputs: more than split.py sums term by term
@pytest.mark.parametrize("n_outputs", [1, 3, 20])
@pytest.mark.parametrize("reg_lambda", [0.0, 1.0, 10.0])
def test_matches_brute_force(n_outputs, reg_lambda):
    rng = np.random.default_rng(10 * n_outputs + int(reg_lambda))
    hist = _histograms(rng, n_features=4, n_rows=400, n_nodes=4, n_bins=9, n_outputs=n_outputs)
    choice, _ = _check_against_brute_force(hist, n_outputs, reg_lambda, 0.0, 0.0)
    assert choice.do_split.all()


@pytest.mark.parametrize("n_outputs", [1, 3, 20])
def test_min_child_weight_restricts_the_candidates(n_outputs):
    rng = np.random.default_rng(3 + n_outputs)
    hist = _histograms(rng, n_features=3, n_rows=240, n_nodes=4, n_bins=12, n_outputs=n_outputs)
    for min_child_weight in (5.0 * n_outputs, 20.0 * n_outputs, 60.0 * n_outputs):
        _, gains = _check_against_brute_force(hist, n_outputs, 1.0, min_child_weight, 0.0)
        unconstrained = _brute_force_gains(hist, n_outputs, 1.0, 0.0)
        # the constraint did exclude some otherwise valid candidates
        assert np.isfinite(unconstrained).sum() > np.isfinite(gains).sum()


def test_min_split_gain_is_a_strict_threshold_per_node():
    rng = np.random.default_rng(21)
    hist = _histograms(rng, n_features=3, n_rows=400, n_nodes=4, n_bins=9, n_outputs=1)
    best = _brute_force_gains(hist, 1, 1.0, 0.0).reshape(4, -1).max(axis=1)
    order = np.argsort(best)
    # between the second and third best gains: the two weakest nodes stop splitting
    min_split_gain = float(0.5 * (best[order[1]] + best[order[2]]))
    choice, _ = _check_against_brute_force(hist, 1, 1.0, 0.0, min_split_gain)
    np.testing.assert_array_equal(choice.do_split, best > min_split_gain)
    np.testing.assert_array_equal(choice.gain[~choice.do_split], 0.0)
    choice = _run(hist, 1, min_split_gain=float(best.max()) * 2)
    assert not choice.do_split.any()
    np.testing.assert_array_equal(choice.gain, 0.0)


def test_nodes_without_a_valid_split():
    n_features, n_bins, n_outputs = 2, 6, 3
    hist = np.zeros((n_features, 4, n_bins, 2 * n_outputs + 1), np.float32)
    row = np.array([1.0, -2.0, 0.5, 1.0, 1.0, 1.0, 1.0], np.float32)
    # node 0: empty; node 1: a single row
    hist[0, 1, 2] = row
    hist[1, 1, 4] = row
    # node 2: several rows, but in the same bin of every feature
    hist[0, 2, 3] = 3 * row
    hist[1, 2, n_bins - 1] = 3 * row
    # node 3: a real split, so the level is not trivially empty
    other = np.array([-1.0, 2.0, -0.5, 1.0, 1.0, 1.0, 1.0], np.float32)
    hist[0, 3, 1] = 2 * row
    hist[0, 3, 4] = 2 * other
    hist[1, 3, 0] = 2 * row + 2 * other
    choice, _ = _check_against_brute_force(hist, n_outputs, 1.0, 0.0, 0.0)
    np.testing.assert_array_equal(choice.do_split, [False, False, False, True])
    np.testing.assert_array_equal(choice.gain[:3], 0.0)
    assert choice.feature[3] == 0 and choice.threshold_bin[3] in (1, 2, 3)


def test_pure_node_does_not_split_on_rounding_noise():
    """Rows with identical gradients: every split has gain <= 0 (exactly 0 without lambda)."""
    n_rows, n_bins = 64, 9
    rng = np.random.default_rng(4)
    bins = rng.integers(0, n_bins, size=n_rows)
    stats = np.tile(np.array([0.3, 1.0, 1.0], np.float32), (n_rows, 1))
    hist = np.zeros((1, 1, n_bins, 3), np.float32)
    np.add.at(hist[0, 0], bins, stats)
    for reg_lambda in (0.0, 1.0):
        choice = _run(hist, 1, reg_lambda=reg_lambda)
        assert not choice.do_split[0]
        assert choice.gain[0] == 0.0


def _missing_direction_level(missing_like_high: bool):
    """One feature, bins 0..9; low bins have gradient +1, high bins -1; missing rows
    carry the gradient of the high (or the low) rows."""
    n_bins = 11
    rng = np.random.default_rng(7)
    value_bins = rng.integers(0, 10, size=200)
    grad = np.where(value_bins >= 6, -1.0, 1.0)
    missing_grad = -1.0 if missing_like_high else 1.0
    bins = np.concatenate([value_bins, np.full(40, n_bins - 1)])
    grad = np.concatenate([grad, np.full(40, missing_grad)])
    grad = grad + rng.normal(scale=0.05, size=grad.shape)
    stats = np.stack([grad, np.ones_like(grad), np.ones_like(grad)], axis=1)
    hist = np.zeros((1, 1, n_bins, 3))
    np.add.at(hist[0, 0], bins, stats)
    return hist.astype(np.float32)


@pytest.mark.parametrize("missing_like_high", [True, False])
def test_missing_direction_is_learned(missing_like_high):
    hist = _missing_direction_level(missing_like_high)
    choice, _ = _check_against_brute_force(hist, 1, 1.0, 0.0, 0.0)
    assert choice.do_split[0]
    assert choice.feature[0] == 0
    # the low bins 0..5 go left, the high bins 6..9 go right
    assert choice.threshold_bin[0] == 5
    # missing rows join the high values (right) or the low ones (left)
    assert bool(choice.missing_left[0]) is (not missing_like_high)


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_running_sums_give_the_same_choice(n_outputs):
    # the native kernel hands over running sums over the value bins
    rng = np.random.default_rng(21 + n_outputs)
    hist = _histograms(rng, n_features=5, n_rows=600, n_nodes=8, n_bins=17, n_outputs=n_outputs)
    running = np.concatenate([np.cumsum(hist[:, :, :-1], axis=2), hist[:, :, -1:]], axis=2)
    plain = _run(hist, n_outputs)
    choice = jax.tree.map(
        np.asarray,
        _find(jnp.asarray(running), n_outputs=n_outputs, reg_lambda=1.0, min_child_weight=0.0,
              min_split_gain=0.0, cumulative=True),
    )  # fmt: skip
    for field in ("feature", "threshold_bin", "missing_left", "do_split"):
        np.testing.assert_array_equal(getattr(choice, field), getattr(plain, field), err_msg=field)
    np.testing.assert_allclose(choice.gain, plain.gain, rtol=1e-5)


def test_the_search_split_between_devices_picks_what_the_whole_search_picks():
    # two devices each search half of the features; a tie across the halves
    # (feature 3 a copy of feature 0) must go to the lowest feature
    from functools import partial

    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    from jaxboost.engine.split import first_across_shards

    if len(jax.devices()) < 2:
        pytest.skip("needs 2 devices: jaxboost configures them when imported first")
    rng = np.random.default_rng(31)
    hist = _histograms(rng, n_features=4, n_rows=800, n_nodes=6, n_bins=11, n_outputs=1)[..., :2]
    hist[3, :3] = hist[0, :3]  # nodes 0-2: exact ties between slices
    hist[1, 4] = 0.0  # node 4: an empty feature in the first slice
    whole = _run(hist, 1)
    mesh = Mesh(np.array(jax.devices()[:2]), ("features",))

    def sliced(part):
        first_feature = jax.lax.axis_index("features") * 2
        choice = find_best_splits(
            part, 1, 1.0, 0.0, 0.0,
            first_feature=first_feature,
            reduce_max=partial(jax.lax.pmax, axis_name="features"),
            pick_first=first_across_shards("features"),
        )  # fmt: skip
        return jax.tree.map(lambda leaf: leaf[None], choice)

    program = jax.jit(
        jax.shard_map(sliced, mesh=mesh, in_specs=P("features"), out_specs=P("features"))
    )
    by_device = jax.tree.map(np.asarray, program(jnp.asarray(hist)))
    for field in ("feature", "threshold_bin", "missing_left", "do_split", "gain"):
        for device in range(2):  # every device holds the same choice
            np.testing.assert_array_equal(
                getattr(by_device, field)[device], getattr(whole, field), err_msg=field
            )
    assert np.all(whole.feature[:3] == 0) and whole.do_split.all()


@pytest.mark.parametrize("peak", [3e-36, 1e-19, 0.7, 1.0, 5e12, 2e35])
def test_gradient_unit_is_a_power_of_two_that_brings_the_peak_into_half_to_one(peak):
    from jaxboost.engine.split import gradient_unit

    grad = jnp.asarray([[0.1 * peak], [-peak], [0.0]], jnp.float32)
    unit = float(gradient_unit(grad, None))
    mantissa, _ = np.frexp(unit)
    assert mantissa == 0.5  # a power of two: scaling by it is exact
    assert 0.5 <= np.float32(peak) * unit < 1.0


def test_gradient_unit_of_zero_or_non_finite_gradients_is_one():
    from jaxboost.engine.split import gradient_unit

    assert float(gradient_unit(jnp.zeros((4, 2)), None)) == 1.0
    assert float(gradient_unit(jnp.asarray([[1.0], [jnp.inf]]), None)) == 1.0

"""Tests of the group metrics: NDCG@k and MAP@k against plain loops and LightGBM,
the concordance index against a brute-force double loop of scikit-survival's
definition."""

from __future__ import annotations

import math
import subprocess
import sys

import jax
import jax.numpy as jnp
import lightgbm
import numpy as np
import pytest

from jaxboost.engine.group_metrics import concordance_index, map_at, ndcg_at

CUTOFFS = [1, 3, 5, None, 40]  # 40: above every group's rows


# --- plain references, LightGBM's definitions ---------------------------------------------------


def _ranked_labels(y, f, mask) -> list[float]:
    """The real rows' labels by score descending, ties in row order (a stable sort)."""
    rows = [i for i in range(len(y)) if mask[i]]
    return [float(y[i]) for i in sorted(rows, key=lambda i: -float(f[i]))]


def _ndcg_reference(y, f, mask, k) -> float:
    ranked = _ranked_labels(y, f, mask)
    cut = len(ranked) if k is None else min(k, len(ranked))

    def dcg(labels):
        return sum((2.0**label - 1.0) / math.log2(2.0 + r) for r, label in enumerate(labels[:cut]))

    best = dcg(sorted(ranked, reverse=True))
    return 1.0 if best == 0.0 else dcg(ranked) / best


def _map_reference(y, f, mask, k) -> float:
    ranked = _ranked_labels(y, f, mask)
    n_relevant = sum(label > 0 for label in ranked)
    if n_relevant == 0:
        return 1.0
    cut = len(ranked) if k is None else min(k, len(ranked))
    hits, summed = 0, 0.0
    for r, label in enumerate(ranked[:cut]):
        if label > 0:
            hits += 1
            summed += hits / (r + 1)
    return summed / (n_relevant if k is None else min(k, n_relevant))


def _random_groups(seed: int, n_groups: int = 60, m: int = 12):
    """``(n_groups, m)`` labels in 0..3, integer scores (many ties) and masks with
    padding anywhere; some groups all 0, one group a single row."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, size=(n_groups, m)).astype(np.float32)
    y[rng.random(n_groups) < 0.2] = 0.0
    f = rng.integers(-2, 3, size=(n_groups, m)).astype(np.float32)
    mask = rng.random((n_groups, m)) < 0.75
    mask[:, 0] = True
    mask[0] = False
    mask[0, 3] = True
    return y, f, mask


def _batched(metric):
    return jax.jit(jax.vmap(metric))


# --- NDCG and MAP ------------------------------------------------------------------------------


@pytest.mark.parametrize("k", CUTOFFS)
@pytest.mark.parametrize(
    ("factory", "reference"), [(ndcg_at, _ndcg_reference), (map_at, _map_reference)]
)
def test_group_metric_equals_plain_loops(factory, reference, k):
    y, f, mask = _random_groups(seed=0)
    values = np.asarray(_batched(factory(k))(y, f, mask))
    expected = [reference(y[g], f[g], mask[g], k) for g in range(len(y))]
    assert values.shape == (len(y),)
    np.testing.assert_allclose(values, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("factory", [ndcg_at, map_at])
def test_padding_rows_do_not_change_the_value(factory):
    y, f, mask = _random_groups(seed=1)
    rng = np.random.default_rng(2)
    junk_y = np.where(mask, y, rng.integers(0, 4, size=y.shape)).astype(np.float32)
    junk_f = np.where(mask, f, rng.normal(size=f.shape) * 9).astype(np.float32)
    metric = _batched(factory(3))
    np.testing.assert_array_equal(metric(junk_y, junk_f, mask), metric(y, f, mask))


def test_tied_scores_rank_in_row_order():
    tied = jnp.array([2.0, 2.0, 2.0])
    mask = jnp.array([True, True, True])
    relevant_last = jnp.array([0.0, 0.0, 1.0])
    relevant_first = jnp.array([1.0, 0.0, 0.0])
    assert float(ndcg_at(1)(relevant_last, tied, mask)) == 0.0
    assert float(ndcg_at(1)(relevant_first, tied, mask)) == 1.0
    assert float(map_at(2)(relevant_last, tied, mask)) == 0.0
    np.testing.assert_allclose(map_at(None)(relevant_last, tied, mask), 1.0 / 3.0)


def test_all_zero_labels_and_no_relevant_rows_score_one():
    y = jnp.zeros(5)
    f = jnp.arange(5.0)
    mask = jnp.array([True, True, True, False, False])
    assert float(ndcg_at(3)(y, f, mask)) == 1.0
    assert float(map_at(3)(y, f, mask)) == 1.0


@pytest.mark.parametrize("k", [0, -1, 2.0, True])
def test_a_bad_cutoff_is_refused(k):
    with pytest.raises(ValueError, match="k must be a positive int"):
        ndcg_at(k)
    with pytest.raises(ValueError, match="k must be a positive int"):
        map_at(k)


def _query_data(rng, sizes):
    """Features on a coarse grid (tied scores), labels 0..3 that follow the
    first feature, two queries all 0."""
    n = sum(sizes)
    x = rng.integers(0, 4, size=(n, 3)).astype(np.float64)
    label = np.clip(np.round(x[:, 0] + rng.normal(size=n) * 0.8), 0, 3)
    start = np.cumsum([0, *sizes])
    for g in (1, 4):
        label[start[g] : start[g + 1]] = 0
    return x, label


def test_mean_over_queries_equals_lightgbm_evaluation():
    rng = np.random.default_rng(3)
    train_sizes = rng.integers(3, 15, size=30)
    valid_sizes = np.array([1, 2, *rng.integers(3, 15, size=25)])
    x_train, y_train = _query_data(rng, train_sizes)
    x_valid, y_valid = _query_data(rng, valid_sizes)
    train = lightgbm.Dataset(x_train, y_train, group=train_sizes)
    valid = lightgbm.Dataset(x_valid, y_valid, group=valid_sizes, reference=train)
    params = {"objective": "lambdarank", "metric": ["ndcg", "map"], "eval_at": [1, 3, 5]}
    params |= {"verbose": -1, "min_data_in_leaf": 5, "num_leaves": 4, "num_threads": 1}
    recorded: dict = {}
    booster = lightgbm.train(
        params,
        train,
        num_boost_round=4,
        valid_sets=[valid],
        valid_names=["valid"],
        callbacks=[lightgbm.record_evaluation(recorded)],
    )
    score = booster.predict(x_valid, raw_score=True)
    assert len(np.unique(score)) < len(score) / 2  # many tied scores

    m = int(valid_sizes.max())
    start = np.cumsum([0, *valid_sizes])
    y = np.zeros((len(valid_sizes), m), np.float32)
    f = np.zeros((len(valid_sizes), m), np.float32)
    mask = np.zeros((len(valid_sizes), m), bool)
    for g, size in enumerate(valid_sizes):
        y[g, :size] = y_valid[start[g] : start[g + 1]]
        f[g, :size] = score[start[g] : start[g + 1]]
        mask[g, :size] = True
    for name, factory in [("ndcg", ndcg_at), ("map", map_at)]:
        for k in (1, 3, 5):
            expected = recorded["valid"][f"{name}@{k}"][-1]
            mean = float(jnp.mean(_batched(factory(k))(y, f, mask)))
            assert mean == pytest.approx(expected, abs=1e-6), f"{name}@{k}"


# --- concordance index -------------------------------------------------------------------------


def _cindex_reference(time, event, risk, weight) -> float:
    """scikit-survival's concordance_index_censored, pairs weighted w_i * w_j."""
    concordant = comparable = 0.0
    for i in range(len(time)):
        for j in range(len(time)):
            if not event[i] or i == j:
                continue
            if time[i] < time[j] or (time[i] == time[j] and not event[j]):
                pair = weight[i] * weight[j]
                comparable += pair
                if risk[i] > risk[j]:
                    concordant += pair
                elif risk[i] == risk[j]:
                    concordant += 0.5 * pair
    return concordant / comparable


def _survival_data(seed: int, n: int):
    """Integer times (tied), risks on a coarse grid (tied), a third censored."""
    rng = np.random.default_rng(seed)
    risk = np.round(rng.normal(size=n) * 2) / 2
    time = np.ceil(rng.exponential(np.exp(-risk) * 5)).astype(np.float32)
    event = (rng.random(n) < 0.67).astype(np.float32)
    y = np.stack([time, event], axis=1)
    return y, risk.astype(np.float32)[:, None]


@pytest.mark.parametrize("block_rows", [7, 128])
def test_cindex_equals_the_double_loop_with_padding(block_rows):
    y, raw = _survival_data(seed=4, n=150)
    weight = np.ones(150, np.float32)
    weight[::9] = 0.0  # padding rows: left out
    kept = weight > 0
    expected = _cindex_reference(y[kept, 0], y[kept, 1], raw[kept, 0], np.ones(kept.sum()))
    value = jax.jit(concordance_index, static_argnames="block_rows")(
        jnp.asarray(y), jnp.asarray(raw), jnp.asarray(weight), block_rows=block_rows
    )
    assert value.shape == ()
    assert float(value) == pytest.approx(expected, rel=1e-6)
    assert 0.5 < expected < 1.0


def test_cindex_weights_pairs_and_counts_integer_weights_as_copies():
    y, raw = _survival_data(seed=5, n=60)
    weight = np.random.default_rng(6).integers(0, 4, size=60).astype(np.float32)
    value = float(concordance_index(jnp.asarray(y), jnp.asarray(raw), jnp.asarray(weight)))
    assert value == pytest.approx(_cindex_reference(y[:, 0], y[:, 1], raw[:, 0], weight), rel=1e-6)
    copies = np.repeat(np.arange(60), weight.astype(int))
    expected = _cindex_reference(y[copies, 0], y[copies, 1], raw[copies, 0], np.ones(len(copies)))
    assert value == pytest.approx(expected, rel=1e-6)


def test_cindex_of_a_perfect_and_a_reversed_risk():
    time = np.array([1.0, 2.0, 2.0, 3.0, 5.0], np.float32)
    y = jnp.asarray(np.stack([time, [1, 1, 0, 1, 0]], axis=1).astype(np.float32))
    weight = jnp.ones(5)
    later = jnp.asarray(time + 0.1 * np.arange(5))[:, None]  # the tied times untied
    assert float(concordance_index(y, -later, weight)) == 1.0
    assert float(concordance_index(y, later, weight)) == 0.0
    assert float(concordance_index(y, jnp.zeros((5, 1)), weight)) == 0.5


def test_importing_the_module_needs_no_survival_package():
    code = (
        "import sys, jaxboost.engine.group_metrics; "
        "assert not {'lifelines', 'sksurv'} & set(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_concordance_index_takes_predict_raw_s_one_dimensional_scores():
    rng = np.random.default_rng(8)
    y = np.column_stack([rng.uniform(1, 5, 50), rng.integers(0, 2, 50)]).astype(np.float32)
    risk = rng.normal(size=50).astype(np.float32)
    weight = np.ones(50, np.float32)
    np.testing.assert_array_equal(
        concordance_index(jnp.asarray(y), jnp.asarray(risk), jnp.asarray(weight)),
        concordance_index(jnp.asarray(y), jnp.asarray(risk[:, None]), jnp.asarray(weight)),
    )

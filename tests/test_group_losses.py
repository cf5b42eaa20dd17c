"""Tests of the group losses (ranking, survival): padding, closed-form
derivatives against autodiff, values against brute-force numpy, lambdarank
against LightGBM's loop and LightGBM itself."""

from __future__ import annotations

import functools
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxboost import losses

M = 8  # every group padded to M rows: one compile per loss

LOSSES = {
    "listnet": losses.listnet,
    "ranknet": losses.ranknet(),
    "ranknet_sigma2": losses.ranknet(2.0),
    "lambdarank": losses.lambdarank(),
    "lambdarank_k2": losses.lambdarank(k=2),
    "lambdarank_untruncated_unnormed": losses.lambdarank(k=None, sigma=0.5, norm=False),
    "cox": losses.cox,
}

# (labels, scores) of one query's real rows
RANKING_GROUPS = {
    "distinct": ([3, 1, 0, 2, 4, 1], [0.3, -0.2, 1.0, 0.5, 0.1, -1.2]),
    "tied_labels": ([2, 2, 1, 0, 1, 2, 0], [0.4, 1.3, -0.7, 0.2, 0.9, -0.1, 0.6]),
    "tied_scores": ([3, 1, 2, 0, 1], [0.5, 0.5, 0.1, 0.5, -1.0]),
    "equal_scores": ([1, 3, 0, 2, 0], [0.3] * 5),
    "all_same_labels": ([1, 1, 1, 1], [0.2, -0.4, 0.8, 0.0]),
    "all_zero_labels": ([0, 0, 0], [0.1, 0.7, -0.3]),
    "one_row": ([2], [0.4]),
}

# (times, events, scores) of one stratum's real rows
COX_GROUPS = {
    "distinct_times": (
        [5.0, 1.0, 3.0, 2.0, 4.0, 6.0],
        [1, 0, 1, 1, 0, 1],
        [0.3, -0.2, 1.0, 0.5, 0.1, -1.2],
    ),
    "tied_times": (
        [2.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
        [1, 1, 0, 1, 1, 1, 0],
        [0.4, 1.3, -0.7, 0.2, 0.9, -0.1, 0.6],
    ),
    "all_tied": ([2.0] * 4, [1, 0, 1, 1], [0.2, -0.4, 0.8, 0.0]),
    "all_censored": ([1.0, 2.0, 3.0], [0, 0, 0], [0.1, 0.7, -0.3]),
    "one_event": ([1.5], [1], [0.4]),
    "one_censored": ([1.5], [0], [0.4]),
}


def _real_rows(loss_name: str, group: str) -> tuple[np.ndarray, np.ndarray]:
    """A group's real rows: ``y`` ``(n,)`` or ``(n, 2)`` and ``f`` ``(n,)``, float64."""
    if loss_name == "cox":
        time, event, f = COX_GROUPS[group]
        return np.stack([time, event], axis=1).astype(float), np.asarray(f, float)
    labels, f = RANKING_GROUPS[group]
    return np.asarray(labels, float), np.asarray(f, float)


CASES = [
    (name, group) for name in LOSSES for group in (COX_GROUPS if name == "cox" else RANKING_GROUPS)
]


def _padded(y: np.ndarray, f: np.ndarray, seed: int, scatter: bool):
    """``y``, ``f`` padded to ``M`` rows of garbage, ``mask`` and the positions of
    the real rows (in order): at the front, or scattered among the padding."""
    rng = np.random.default_rng(seed)
    n = len(f)
    where = np.sort(rng.choice(M, n, replace=False)) if scatter else np.arange(n)
    mask = np.zeros(M, bool)
    mask[where] = True
    f_pad = rng.normal(size=M) * 10
    if y.ndim == 2:  # (time, event)
        y_pad = np.stack([rng.uniform(0.5, 7, M), rng.integers(0, 2, M)], axis=1)
    else:
        y_pad = rng.integers(0, 6, M).astype(float)
    y_pad[where], f_pad[where] = y, f
    return y_pad, f_pad, mask, where


@functools.partial(jax.jit, static_argnums=0)
def _evaluate(loss, y, f, mask):
    """Value, autodiff gradient and hessian diagonal, and ``row_derivatives``."""
    grad = jax.grad(loss, argnums=1)(y, f, mask)
    hess = jnp.diagonal(jax.hessian(loss, argnums=1)(y, f, mask))
    return loss(y, f, mask), grad, hess, *loss.row_derivatives(y, f, mask)


def _evaluate64(loss, y, f, mask) -> list[np.ndarray]:
    with jax.enable_x64(True):
        return [np.asarray(out) for out in _evaluate(loss, jnp.asarray(y), jnp.asarray(f), mask)]


# --- every group loss ------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "group"), CASES)
def test_padding_rows_change_neither_value_nor_real_rows_derivatives(name, group):
    loss = LOSSES[name]
    y, f = _real_rows(name, group)
    front = _evaluate64(loss, *_padded(y, f, seed=1, scatter=False)[:3])
    y_pad, f_pad, mask, where = _padded(y, f, seed=2, scatter=True)
    scattered = _evaluate64(loss, y_pad, f_pad, mask)
    np.testing.assert_allclose(scattered[0], front[0], rtol=1e-12, atol=1e-12)
    for front_rows, scattered_rows in zip(front[1:], scattered[1:], strict=True):
        assert np.all(np.isfinite(scattered_rows))
        np.testing.assert_allclose(
            scattered_rows[where], front_rows[: len(f)], rtol=1e-12, atol=1e-12
        )
        assert np.all(scattered_rows[~mask] == 0)


@pytest.mark.parametrize(("name", "group"), CASES)
def test_row_derivatives_equal_autodiff_gradient_and_hessian_diagonal(name, group):
    y, f = _real_rows(name, group)
    y_pad, f_pad, mask, _ = _padded(y, f, seed=3, scatter=True)
    _, grad, hess, closed_grad, closed_hess = _evaluate64(LOSSES[name], y_pad, f_pad, mask)
    np.testing.assert_allclose(closed_grad, grad, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(closed_hess, hess, rtol=1e-9, atol=1e-12)
    assert np.all(hess >= -1e-12)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_a_group_of_padding_only_gives_zero(name):
    y, f = _real_rows(name, "one_event" if name == "cox" else "one_row")
    y_pad, f_pad, _, _ = _padded(y, f, seed=4, scatter=True)
    for out in _evaluate64(LOSSES[name], y_pad, f_pad, np.zeros(M, bool)):
        assert np.all(out == 0)


def test_group_losses_are_declared_as_such():
    for loss in LOSSES.values():
        assert loss.per == "group" and loss.n_outputs == 1 and loss.link == "identity"
        assert loss.row_derivatives is not None and loss.convex and loss.smooth


def test_get_rebuilds_group_losses_and_pickling_round_trips():
    assert losses.get("lambdarank", k=5) is losses.lambdarank(k=5)
    assert losses.lambdarank(5, 1.0, True) is losses.lambdarank(k=5)
    assert losses.get("lambdarank") is losses.lambdarank(k=30)
    assert losses.get("ranknet") is losses.ranknet(sigma=1.0)
    assert losses.get("listnet") is losses.listnet and losses.get("cox") is losses.cox
    for loss in [*LOSSES.values(), losses.lambdarank(k=5)]:
        assert losses.get(loss.name, **loss.params) is loss
        assert pickle.loads(pickle.dumps(loss)) is loss


@pytest.mark.parametrize(
    "make",
    [
        lambda: losses.lambdarank(k=0),
        lambda: losses.lambdarank(k=2.5),
        lambda: losses.lambdarank(sigma=0.0),
        lambda: losses.ranknet(sigma=-1.0),
    ],
)
def test_group_loss_factories_reject_bad_parameters(make):
    with pytest.raises(ValueError, match="must be"):
        make()


# --- ranking values against numpy ------------------------------------------------------------


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.parametrize("group", sorted(RANKING_GROUPS))
def test_listnet_is_cross_entropy_of_label_and_score_softmaxes(group):
    y, f = _real_rows("listnet", group)
    value, *_ = _evaluate64(losses.listnet, *_padded(y, f, seed=5, scatter=True)[:3])
    expected = -np.sum(_softmax(y) * np.log(_softmax(f)))
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sigma", [1.0, 2.0])
@pytest.mark.parametrize("group", sorted(RANKING_GROUPS))
def test_ranknet_sums_logistic_loss_over_ordered_pairs(group, sigma):
    y, f = _real_rows("ranknet", group)
    value = _evaluate64(losses.ranknet(sigma), *_padded(y, f, seed=6, scatter=True)[:3])[0]
    expected = sum(
        np.log1p(np.exp(-sigma * (f[i] - f[j])))
        for i in range(len(f))
        for j in range(len(f))
        if y[i] > y[j]
    )
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-12)


# --- lambdarank against LightGBM -------------------------------------------------------------


def _lightgbm_lambdarank(label, score, k, sigma, norm) -> tuple[np.ndarray, np.ndarray]:
    """Numpy transcription of LightGBM's ``LambdarankNDCG::GetGradientsForOneQuery``
    (src/objective/rank_objective.hpp) and ``DCGCalculator::CalMaxDCGAtK``, with an
    exact sigmoid where LightGBM reads a table; ``k`` None counts every pair."""
    cnt = len(score)
    k = cnt if k is None else k
    gain = 2.0 ** np.asarray(label) - 1.0

    def discount(rank):
        return 1.0 / np.log2(2.0 + rank)

    ideal = np.sort(gain)[::-1][: min(k, cnt)]
    max_dcg = sum(ideal[r] * discount(r) for r in range(len(ideal)))
    inverse_max_dcg = 1.0 / max_dcg if max_dcg > 0 else 0.0
    order = sorted(range(cnt), key=lambda row: -score[row])  # stable
    best_score, worst_score = score[order[0]], score[order[-1]]
    lambdas, hessians, sum_lambdas = np.zeros(cnt), np.zeros(cnt), 0.0
    for i in range(min(cnt - 1, k)):
        for j in range(i + 1, cnt):
            if label[order[i]] == label[order[j]]:
                continue
            high_rank, low_rank = (i, j) if label[order[i]] > label[order[j]] else (j, i)
            high, low = order[high_rank], order[low_rank]
            delta_score = score[high] - score[low]
            dcg_gap = gain[high] - gain[low]
            paired_discount = abs(discount(high_rank) - discount(low_rank))
            delta_ndcg = dcg_gap * paired_discount * inverse_max_dcg
            if norm and best_score != worst_score:
                delta_ndcg /= 0.01 + abs(delta_score)
            p = 1.0 / (1.0 + np.exp(sigma * delta_score))
            p_lambda = -sigma * delta_ndcg * p
            p_hessian = sigma * sigma * delta_ndcg * p * (1.0 - p)
            lambdas[low] -= p_lambda
            hessians[low] += p_hessian
            lambdas[high] += p_lambda
            hessians[high] += p_hessian
            sum_lambdas -= 2 * p_lambda
    if norm and sum_lambdas > 0:
        norm_factor = np.log2(1 + sum_lambdas) / sum_lambdas
        lambdas, hessians = lambdas * norm_factor, hessians * norm_factor
    return lambdas, hessians


LAMBDARANK_PARAMS = [(30, 1.0, True), (2, 1.0, True), (3, 2.0, False), (None, 0.5, True)]


@pytest.mark.parametrize(("k", "sigma", "norm"), LAMBDARANK_PARAMS)
@pytest.mark.parametrize("group", sorted(RANKING_GROUPS))
def test_lambdarank_equals_lightgbm_loop(group, k, sigma, norm):
    y, f = _real_rows("lambdarank", group)
    y_pad, f_pad, mask, where = _padded(y, f, seed=7, scatter=True)
    _, grad, hess, closed_grad, closed_hess = _evaluate64(
        losses.lambdarank(k, sigma, norm), y_pad, f_pad, mask
    )
    expected_grad, expected_hess = _lightgbm_lambdarank(y, f, k, sigma, norm)
    for actual, expected in [(grad, expected_grad), (closed_grad, expected_grad)]:
        np.testing.assert_allclose(actual[where], expected, rtol=1e-9, atol=1e-12)
    for actual, expected in [(hess, expected_hess), (closed_hess, expected_hess)]:
        np.testing.assert_allclose(actual[where], expected, rtol=1e-9, atol=1e-12)


def _leaves(booster, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's leaf, and each leaf's value ``-G / H`` (no regularisation) and
    weight ``H`` (LightGBM's ``leaf_weight``, its sum of hessians)."""
    found: dict[int, tuple[float, float]] = {}

    def walk(node: dict) -> None:
        if "leaf_index" in node:
            found[node["leaf_index"]] = (node["leaf_value"], node["leaf_weight"])
        else:
            walk(node["left_child"])
            walk(node["right_child"])

    walk(booster.dump_model()["tree_info"][0]["tree_structure"])
    value, weight = np.array([found[leaf] for leaf in range(len(found))]).T
    return booster.predict(x, pred_leaf=True).ravel().astype(int), value, weight


@pytest.mark.parametrize(("k", "sigma", "norm"), [p for p in LAMBDARANK_PARAMS if p[0]])
def test_lambdarank_equals_lightgbm_trained_leaves(k, sigma, norm):
    """One LightGBM round on a feature with a bin per row, from ``init_score``,
    puts each row in a leaf of its own (rows of different ``g / h`` can always
    be split with gain): its value is ``-g / h``, its weight ``h``.

    Row weights ``1 / h`` (h ours; LightGBM scales g and h by them) keep the
    hessians near 1: LightGBM estimates a bin's row count from its hessian, and
    with hessians far apart it would not split off a row (min_data_in_leaf).
    """
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(8)
    sizes = [5, 7, 4, 6, 3]
    label = np.concatenate([rng.integers(0, 4, size) for size in sizes]).astype(float)
    score = rng.normal(size=sum(sizes))
    score[5:12][[1, 4, 6]] = 0.25  # tied scores in the second query
    score[12:16] = -0.5  # all scores equal in the third
    loss = losses.lambdarank(k, sigma, norm)
    grad, hess = np.zeros_like(score), np.zeros_like(score)
    for start, size in zip(np.cumsum([0, *sizes[:-1]]), sizes, strict=True):
        rows = slice(start, start + size)
        y_pad, f_pad, mask, where = _padded(label[rows], score[rows], seed=9, scatter=True)
        grad[rows], hess[rows] = (out[where] for out in _evaluate64(loss, y_pad, f_pad, mask)[3:])
    has_pairs = hess > 0
    weight = 1.0 / np.where(has_pairs, hess, 1.0)
    x = rng.permutation(len(score))[:, None] + 1.0  # a bin per row, queries interleaved
    params = {
        "objective": "lambdarank",
        "lambdarank_truncation_level": k,
        "sigmoid": sigma,
        "lambdarank_norm": norm,
        "num_leaves": len(score) + 1,
        "min_data_in_leaf": 1,
        "min_sum_hessian_in_leaf": 0.0,
        "min_data_in_bin": 1,
        "max_bin": len(score) + 5,
        "feature_pre_filter": False,
        "learning_rate": 1.0,
        "lambda_l2": 0.0,
        "num_threads": 1,
        "verbose": -1,
    }
    data = lgb.Dataset(x, label, group=sizes, init_score=score, weight=weight, params=params)
    leaf, leaf_value, leaf_weight = _leaves(lgb.train(params, data, num_boost_round=1), x)
    assert np.all(has_pairs) and np.all(np.bincount(leaf) == 1)
    lightgbm_hess = leaf_weight[leaf] / weight
    lightgbm_grad = -leaf_value[leaf] * lightgbm_hess
    # LightGBM's sigmoid table and float32 gradients: about 3e-5 apart
    np.testing.assert_allclose(lightgbm_grad, grad, rtol=2e-4, atol=1e-7)
    np.testing.assert_allclose(lightgbm_hess, hess, rtol=2e-4, atol=1e-7)


# --- cox -------------------------------------------------------------------------------------


def _breslow(time: np.ndarray, event: np.ndarray, f: np.ndarray) -> float:
    """Negative Breslow partial log-likelihood, pair by pair."""
    return -sum(
        f[i] - np.log(sum(np.exp(f[j]) for j in range(len(f)) if time[j] >= time[i]))
        for i in range(len(f))
        if event[i]
    )


@pytest.mark.parametrize("group", sorted(COX_GROUPS))
def test_cox_equals_brute_force_breslow_partial_likelihood(group):
    y, f = _real_rows("cox", group)
    value = _evaluate64(losses.cox, *_padded(y, f, seed=10, scatter=True)[:3])[0]
    np.testing.assert_allclose(value, _breslow(y[:, 0], y[:, 1], f), rtol=1e-12, atol=1e-12)


def test_cox_derivatives_stay_finite_and_exact_for_widely_spread_scores():
    # every score in the last risk set lies 150 below the largest: exp(f - max f)
    # underflows in float32, log-space sums do not
    y, f = _real_rows("cox", "tied_times")
    f = np.where(y[:, 0] == 3.0, f - 150.0, f)
    y_pad, f_pad, mask, _ = _padded(y, f, seed=11, scatter=True)
    expected = _evaluate64(losses.cox, y_pad, f_pad, mask)
    actual = _evaluate(
        losses.cox, jnp.asarray(y_pad, jnp.float32), jnp.asarray(f_pad, jnp.float32), mask
    )
    for got, want in zip(actual, expected, strict=True):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_cox_on_rows_in_time_order_skips_the_sort_and_agrees_with_any_order():
    # the engine gives a stratum's rows in time order (row_order); any other
    # order is sorted by the loss: both give the same value and derivatives
    rng = np.random.default_rng(21)
    m = 64
    time = np.round(rng.uniform(0.5, 5.0, m), 1)  # tied times
    y = np.stack([time, rng.integers(0, 2, m)], axis=1).astype(np.float32)
    f = rng.normal(size=m).astype(np.float32)
    mask = np.arange(m) < 50  # padding at the end, as the engine places it
    in_order = np.argsort(np.where(mask, time, np.inf), kind="stable")
    np.testing.assert_array_equal(losses.cox.row_order(y), y[:, 0])
    shuffled = rng.permutation(m)
    results = []
    for rows in (in_order, shuffled):
        args = (jnp.asarray(y[rows]), jnp.asarray(f[rows]), jnp.asarray(mask[rows]))
        value = losses.cox(*args)
        grad, hess = losses.cox.row_derivatives(*args)
        back = np.argsort(rows)  # to the original rows
        results.append((float(value), np.asarray(grad)[back], np.asarray(hess)[back]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-6, atol=1e-7)


def test_fit_checks_never_call_a_catalogue_group_loss_and_always_a_user_s(monkeypatch):
    from jaxboost.frontends.training import loss_checks
    from jaxboost.frontends.training.computation_keys import keyed_loss

    calls = []
    shape_of = jax.eval_shape
    monkeypatch.setattr(jax, "eval_shape", lambda fn, *a: calls.append(fn) or shape_of(fn, *a))
    y = np.array([0.0, 1.0, 2.0, 1.0, 3.0], np.float32)
    catalogue = losses.lambdarank(k=5)
    for loss in (catalogue, keyed_loss(catalogue, (), 1, widths=(8,))):
        loss_checks.check_group_loss(loss, y)
    assert calls == []  # the catalogue's tests check its shapes and padding

    def user(y, f, mask):
        return jnp.sum(jnp.where(mask, (f - y) ** 2, 0.0))

    loss_checks.check_group_loss(losses.declare(user, name="user", per="group"), y)
    assert len(calls) >= 2  # its value and its gradient, traced

"""Group losses in fit: groups given as sizes or ids, their derivatives, the
rows' placement, evaluation sets with groups, and the errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.group_metrics import ndcg_at
from jaxboost.engine.groups import group_grad_hess, mean_group_loss
from jaxboost.frontends.data.grouping import GroupedRows, grouped_rows, place_groups


@losses.declare(name="test_listnet", link="identity", per="group")
def listnet(y, f, mask):
    target = jax.nn.softmax(jnp.where(mask, y, -jnp.inf))
    return -jnp.sum(jnp.where(mask, target * jax.nn.log_softmax(jnp.where(mask, f, -jnp.inf)), 0))


@losses.declare(name="test_group_squares", link="identity", per="group")
def group_squares(y, f, mask):
    return 0.5 * jnp.sum(jnp.where(mask, (f - y) ** 2, 0.0))


def _ranking_data(n_groups=40, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 30, size=n_groups)
    n = int(sizes.sum())
    X = rng.normal(size=(n, 6)).astype(np.float32)
    relevance = np.clip(np.round(X[:, 0] + 0.5 * X[:, 1] + noise * rng.normal(size=n) + 1), 0, 4)
    return X, relevance.astype(np.float32), sizes


def test_a_group_loss_s_row_derivatives_are_those_of_its_sum_over_groups():
    _, y, sizes = _ranking_data(12)
    raw = np.random.default_rng(1).normal(size=(y.size, 1)).astype(np.float32)
    placement = place_groups(GroupedRows(np.arange(y.size), sizes), 1)
    y_rows, raw_rows = y[placement.gather], raw[placement.gather]
    tables = tuple(jax.tree.map(jnp.asarray, bucket) for bucket in placement.buckets)
    grad, hess = jax.jit(group_grad_hess, static_argnums=0)(
        listnet, jnp.asarray(y_rows), jnp.asarray(raw_rows), tables
    )

    def total(f):
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        return sum(
            listnet(y[s : s + m], f[s : s + m], np.ones(m, bool)) for s, m in zip(starts, sizes)
        )

    f = jnp.asarray(raw[:, 0])
    # (jitted: run op by op, the hessian of the sum over groups compiled some
    # hundred small programs, 28 s of the suite)
    expected_grad = jax.jit(jax.grad(total))(f)
    expected_hess = jnp.diagonal(jax.jit(jax.hessian(total))(f))
    present = placement.present
    assert sizes.min() == 1  # a group of one row: derivatives 0
    np.testing.assert_allclose(np.asarray(grad)[present, 0], expected_grad, atol=1e-6)
    np.testing.assert_allclose(np.asarray(hess)[present, 0], expected_hess, atol=1e-6)
    assert not np.any(np.asarray(grad)[~present]) and not np.any(np.asarray(hess)[~present])
    # the training loss: the mean over groups
    # (jitted, as in training: op by op, each bucket and each group's size
    # compiled programs of their own, some hundred)
    mean = jax.jit(mean_group_loss, static_argnums=0)(
        listnet, jnp.asarray(y_rows), jnp.asarray(raw_rows), tables, None
    )
    np.testing.assert_allclose(mean, jax.jit(total)(f) / sizes.size, rtol=1e-5)


def test_a_group_loss_equal_to_a_sum_of_sample_losses_grows_the_same_trees():
    X, y, sizes = _ranking_data()
    settings = {"n_estimators": 20, "max_depth": 4, "base_score": 0.0}
    grouped = jb.Booster(loss=group_squares, **settings).fit(X, y, group=sizes)
    per_row = jb.Booster(loss=lambda y, f: 0.5 * (f - y) ** 2, **settings).fit(X, y)
    np.testing.assert_array_equal(grouped.forest_.feature, per_row.forest_.feature)
    np.testing.assert_array_equal(grouped.forest_.threshold_bin, per_row.forest_.threshold_bin)
    np.testing.assert_allclose(grouped.predict(X), per_row.predict(X), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("leaf_method", ["newton", "joint_newton"])
def test_a_group_of_weight_two_is_the_group_twice_and_of_weight_zero_none(leaf_method):
    # features of few values: the bins are the same with rows repeated
    X, y, sizes = _ranking_data(30, seed=7)
    X = np.round(X).astype(np.float32)
    group_weight = np.random.default_rng(2).choice([0.0, 1.0, 2.0], size=sizes.size)
    group_weight[:2] = (2.0, 0.0)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rows = [np.arange(s, s + m) for s, m in zip(starts, sizes)]
    repeated = np.concatenate([r for r, w in zip(rows, group_weight) for _ in range(int(w))])
    repeated_sizes = np.repeat(sizes, group_weight.astype(int))
    settings = {
        "loss": listnet,
        "n_estimators": 8,
        "max_depth": 3,
        "learning_rate": 0.3,
        "leaf_method": leaf_method,
        "min_child_samples": 0,  # (it counts rows, not weights)
    }
    weighted = jb.Booster(**settings).fit(X, y, np.repeat(group_weight, sizes), group=sizes)
    copies = jb.Booster(**settings).fit(X[repeated], y[repeated], group=repeated_sizes)
    # (the rows of weight 0 have values of their own: the bins differ, not
    # the splits of the rows that count)
    np.testing.assert_array_equal(weighted.forest_.feature, copies.forest_.feature)
    counted = np.repeat(group_weight, sizes) > 0
    np.testing.assert_allclose(
        weighted.predict_raw(X[counted]), copies.predict_raw(X[counted]), atol=1e-5
    )
    # the training loss: the weighted mean over groups
    np.testing.assert_allclose(weighted.train_loss_, copies.train_loss_, rtol=1e-5)
    unweighted = jb.Booster(**settings).fit(X, y, group=sizes)
    assert not np.allclose(unweighted.predict_raw(X), weighted.predict_raw(X), atol=1e-3)


_QID_SETTINGS = {"loss": listnet, "n_estimators": 15, "max_depth": 4, "subsample": 0.8}


@pytest.fixture(scope="module")
def listnet_by_sizes():
    """``(X, y, sizes, model)``: a ListNet model of groups given by their sizes
    (shared: the qid test compares with it, the refit test only reads it)."""
    X, y, sizes = _ranking_data()
    return X, y, sizes, jb.Booster(**_QID_SETTINGS).fit(X, y, group=sizes)


def test_qid_in_any_row_order_gives_the_model_of_sorted_groups(listnet_by_sizes):
    X, y, sizes, by_sizes = listnet_by_sizes
    qid = np.repeat(np.arange(sizes.size) * 7 + 3, sizes)
    settings = _QID_SETTINGS
    # groups interleaved, each group's rows still in their order
    order = np.argsort(np.random.default_rng(3).permutation(sizes.size)[qid // 7], kind="stable")
    shuffled = jb.Booster(**settings).fit(X[order], y[order], qid=qid[order])
    np.testing.assert_array_equal(by_sizes.predict_raw(X), shuffled.predict_raw(X))
    np.testing.assert_array_equal(by_sizes.train_loss_, shuffled.train_loss_)


def _per_group(metric, y, f, sizes):
    """``metric(y, f, mask)`` of each group, ``(n_groups,)``: the groups padded
    to one width (padding rows never change a group metric), so one program
    for all of them instead of some ten per group size."""
    width = int(sizes.max())
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    index = starts[:, None] + np.arange(width)
    mask = np.arange(width) < sizes[:, None]
    index = np.where(mask, index, 0)
    return np.asarray(jax.jit(jax.vmap(metric))(y[index], f[index], mask))


def test_listnet_learns_to_rank_and_ndcg_stops_early():
    X, y, sizes = _ranking_data(80, noise=0.2)
    Xv, yv, sizes_v = _ranking_data(30, seed=5, noise=0.2)
    model = jb.Booster(loss=listnet, n_estimators=60, max_depth=3, learning_rate=0.3)
    model.fit(
        X,
        y,
        group=sizes,
        eval_set=[(Xv, yv)],
        eval_group=[sizes_v],
        eval_metric=["ndcg@5", "map@5", "loss"],
        early_stopping_rounds=10,
    )
    result = model.evals_result_["validation_0"]
    assert result["ndcg@5"][model.best_iteration_ - 1] == max(result["ndcg@5"])
    assert model.best_score_ == max(result["ndcg@5"])
    # against the ranking at the initial score (every score tied: row order)
    tied = np.mean(_per_group(ndcg_at(5), yv, np.zeros_like(yv), sizes_v))
    assert max(result["ndcg@5"]) > tied + 0.2
    assert result["loss"][-1] < result["loss"][0]
    assert model.train_loss_[-1] < model.train_loss_[0]


@losses.declare(per="group")
def top3_gain(y, f, mask):
    order = jnp.argsort(jnp.where(mask, -f, jnp.inf))
    return jnp.sum(jnp.where(mask[order[:3]], y[order[:3]], 0.0))


def test_a_declared_group_function_is_a_group_metric():
    X, y, sizes = _ranking_data()
    Xv, yv, sizes_v = _ranking_data(20, seed=5)
    model = jb.Booster(loss=listnet, n_estimators=5, max_depth=2).fit(
        X,
        y,
        group=sizes,
        eval_set=[(Xv, yv)],
        eval_group=[sizes_v],
        eval_metric=[top3_gain, jb.metric(top3_gain, name="top3", greater_is_better=True)],
    )
    result = model.evals_result_["validation_0"]
    # the mean over the set's groups of the function of each group
    expected = np.mean(_per_group(top3_gain, yv, model.predict_raw(Xv), sizes_v))
    np.testing.assert_allclose(result["top3_gain"][-1], expected, rtol=1e-6)
    np.testing.assert_array_equal(result["top3"], result["top3_gain"])


def test_group_settings_and_inputs_are_checked():
    X, y, sizes = _ranking_data(10)
    with pytest.raises(ValueError, match="group: the loss 'squared_error' is a function of one"):
        jb.Booster(loss="squared_error").fit(X, y, group=sizes)
    with pytest.raises(ValueError, match=r"group: expected the sizes .* summing to the number"):
        jb.Booster(loss=listnet).fit(X, y, group=sizes[:-1])
    with pytest.raises(ValueError, match="qid: expected one group id per row"):
        jb.Booster(loss=listnet).fit(X, y, qid=np.zeros(3))
    with pytest.raises(ValueError, match="give one of them"):
        jb.Booster(loss=listnet).fit(X, y, group=sizes, qid=np.zeros(y.size))
    with pytest.raises(ValueError, match="leaf_method: 'line_search' needs a per-sample loss"):
        jb.Booster(loss=listnet, leaf_method="line_search").fit(X, y, group=sizes)
    uneven = np.ones(y.size)
    uneven[sizes[0]] = 2.0  # the first row of group 1 (of 2 or more rows here)
    assert sizes[1] > 1
    with pytest.raises(
        ValueError, match="sample_weight: a group loss weighs whole groups.*group 1"
    ):
        jb.Booster(loss=listnet).fit(X, y, uneven, group=sizes)
    with pytest.raises(
        ValueError, match=r"eval_group: expected a list with one entry per eval_set"
    ):
        jb.Booster(loss=listnet).fit(X, y, group=sizes, eval_set=[(X, y)], eval_group=sizes)
    with pytest.raises(ValueError, match=r"loss 'bad': loss\(y, f, mask\) .* one number per group"):
        bad = losses.declare(name="bad", link="identity", per="group")(lambda y, f, mask: f)
        jb.Booster(loss=bad).fit(X, y, group=sizes)
    with pytest.raises(ValueError, match="needs the evaluation set's groups"):
        jb.Booster(loss="squared_error", n_estimators=2).fit(
            X, y, eval_set=[(X, y)], eval_metric="ndcg@3"
        )


def test_group_ids_are_stable_sorted_and_groups_placed_whole():
    groups = grouped_rows(None, np.array([5, 2, 5, 2, 9]), 5)
    np.testing.assert_array_equal(groups.order, [1, 3, 0, 2, 4])
    np.testing.assert_array_equal(groups.sizes, [2, 2, 1])
    sizes = np.array([3, 1, 7, 2, 2, 5, 1, 1])
    placement = place_groups(GroupedRows(np.arange(sizes.sum()), sizes), 4)
    per_shard = placement.gather.size // 4
    for bucket in placement.buckets:
        width = bucket.index.shape[1]
        assert width & (width - 1) == 0  # a power of two
        for slot in range(bucket.index.shape[0]):
            shard = slot // (bucket.index.shape[0] // 4)
            rows = bucket.index[slot][bucket.mask[slot]] + shard * per_shard
            if bucket.weight[slot]:
                assert placement.present[rows].all()
                # one group: consecutive row numbers
                assert np.all(np.diff(placement.row_number[rows]) == 1)
    assert np.sort(placement.row_number[placement.present]).tolist() == list(range(sizes.sum()))


def test_a_declared_row_order_sorts_each_group_s_rows():
    from jaxboost.frontends.data.grouping import in_row_order

    y = np.array([[5.0, 1], [2.0, 0], [9.0, 1], [1.0, 1], [3.0, 0]], np.float32)
    groups = GroupedRows(np.array([4, 0, 1, 2, 3]), np.array([2, 3]))
    ordered = in_row_order(groups, losses.cox, y)
    # group 1 = rows 4, 0 (times 3, 5); group 2 = rows 1, 2, 3 (times 2, 9, 1)
    np.testing.assert_array_equal(ordered.order, [4, 0, 3, 1, 2])
    assert in_row_order(groups, listnet, y) is groups


def test_groups_of_one_to_ten_thousand_rows_train_together():
    # LambdaRank's pairs are the top k rows against all: O(k m) for a query of
    # 10,000 rows (all pairs would be 10^8)
    rng = np.random.default_rng(4)
    sizes = np.array([10_000, 1, 1, 37, 250])
    n = int(sizes.sum())
    X = rng.normal(size=(n, 4)).astype(np.float32)
    relevance = np.clip(np.round(X[:, 0] + 0.5 * rng.normal(size=n) + 1), 0, 4).astype(np.float32)
    model = jb.Booster(loss=losses.lambdarank(k=10), n_estimators=10, max_depth=3)
    model.fit(
        X,
        relevance,
        group=sizes,
        eval_set=[(X, relevance)],
        eval_group=[sizes],
        eval_metric="ndcg@10",
    )
    ndcg = model.evals_result_["validation_0"]["ndcg@10"]
    assert np.all(np.isfinite(model.predict(X)))
    assert ndcg[-1] > 0.8 and ndcg[-1] > ndcg[0]


def test_refit_leaves_refuses_a_group_loss_by_name(listnet_by_sizes):
    X, y, _, model = listnet_by_sizes
    with pytest.raises(ValueError, match="refit_leaves minimises a per-sample loss"):
        jb.refit_leaves(model, X, y)


def _survival_data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    time = rng.exponential(np.exp(-X[:, 0])).astype(np.float32) + 0.01
    event = (rng.uniform(size=n) < 0.7).astype(np.float32)
    event[0] = 0.0  # a censored row: swapped columns have a time of 0
    return X, time, event


def _with(column, row, value):
    changed = column.copy()
    changed[row] = value
    return changed


COX_TARGETS = {
    "swapped": (lambda t, e: np.c_[e, t], r"columns look swapped.*y\[:, 0\] looks like the event"),
    "event 2": (lambda t, e: np.c_[t, _with(e, 17, 2.0)], r"got event 2 at row 17 \(1 row in"),
    "event -1": (lambda t, e: np.c_[t, _with(e, 3, -1.0)], "got event -1 at row 3"),
    "event 0.5": (lambda t, e: np.c_[t, _with(e, 5, 0.5)], "got event 0.5 at row 5"),
    "third column": (lambda t, e: np.c_[t, e, e], r"got y of shape \(40, 3\), where \(40, 2\)"),
    "time 0": (lambda t, e: np.c_[_with(t, 9, 0.0), e], "got time 0 at row 9"),
    "1-D": (lambda t, e: t, r"got y of shape \(40,\).*np.column_stack\(\[time, event\]\)"),
}


@pytest.mark.parametrize("case", sorted(COX_TARGETS))
def test_cox_refuses_targets_other_than_time_and_event(case):
    X, time, event = _survival_data()
    make, message = COX_TARGETS[case]
    rules = r"y\[:, 0\] the time > 0, y\[:, 1\] the event indicator 0/1"
    with pytest.raises(ValueError, match=rf"^y: the loss 'cox' needs targets .*{rules}.*{message}"):
        jb.Booster(loss=losses.cox, n_estimators=2).fit(X, make(time, event))
    good = np.c_[time, event]
    with pytest.raises(ValueError, match=rf"^eval_set\[0\] y: the loss 'cox' .*{message}"):
        jb.Booster(loss=losses.cox, n_estimators=2).fit(X, good, eval_set=[(X, make(time, event))])


RANKING_TARGETS = {
    "column": (losses.lambdarank(), lambda y: y[:, None], r"shape \(n_rows,\), got shape .*ravel"),
    "grade 200": (
        losses.lambdarank(),
        lambda y: _with(y, 3, 200.0),
        r"grades 0, 1, ..., 30.*row 3: 200.0; the largest is 200: .*label_gain.*np.unique",
    ),
    "grade 2.5": (losses.lambdarank(), lambda y: _with(y, 4, 2.5), "whole numbers.*row 4: 2.5"),
    "listnet -1": (losses.listnet, lambda y: _with(y, 2, -1.0), ">= 0.*row 2: -1.0"),
    "ranknet -1": (losses.ranknet(), lambda y: _with(y, 6, -1.0), ">= 0.*row 6: -1.0"),
}


@pytest.mark.parametrize("case", sorted(RANKING_TARGETS))
def test_ranking_losses_refuse_labels_outside_their_domain(case):
    X, y, sizes = _ranking_data(10)
    loss, make, message = RANKING_TARGETS[case]
    with pytest.raises(ValueError, match=rf"^y: the loss '{loss.name}' needs targets .*{message}"):
        jb.Booster(loss=loss, n_estimators=2).fit(X, make(y), group=sizes)


def test_lambdarank_takes_grades_up_to_thirty():
    from jaxboost.frontends.training.loss_checks import check_target_domain

    loss = losses.lambdarank()
    grades = np.array([30.0, 0.0, 29.0, 5.0, 30.0], np.float32)
    check_target_domain(loss, grades)
    with pytest.raises(ValueError, match="row 0: 31.0; the largest is 31"):
        check_target_domain(loss, grades + 1)
    f = jnp.asarray([0.3, -0.2, 1.0, 0.5, 0.1])
    grad, hess = jax.jit(loss.row_derivatives)(jnp.asarray(grades), f, jnp.ones(5, bool))
    assert np.all(np.isfinite(grad)) and np.all(np.isfinite(hess)) and np.any(grad != 0)


@losses.declare(name="unmasked_squares", per="group")
def unmasked_squares(y, f, mask):
    return 0.5 * jnp.sum((f - y) ** 2)


@losses.declare(name="unmasked_softmax", per="group")
def unmasked_softmax(y, f, mask):  # masks the sum, not the softmax's normaliser
    return -jnp.sum(jnp.where(mask, jax.nn.softmax(y) * jax.nn.log_softmax(f), 0.0))


@pytest.mark.parametrize("loss", [unmasked_squares, unmasked_softmax])
def test_a_group_loss_reading_its_padding_rows_is_refused_naming_mask(loss):
    X, y, sizes = _ranking_data(10)
    message = rf"loss '{loss.name}': loss\(y, f, mask\) reads its padding rows.*mask is False"
    with pytest.raises(ValueError, match=message):
        jb.Booster(loss=loss, n_estimators=2).fit(X, y, group=sizes)


@losses.declare(name="test_sorted_squares", link="identity", per="group")
def sorted_squares(y, f, mask):  # indexes mask with a jnp array, as a top-k loss does
    order = jnp.argsort(jnp.where(mask, -f, jnp.inf))
    return 0.5 * jnp.sum(jnp.where(mask[order], (f[order] - y[order]) ** 2, 0.0))


def test_a_group_loss_indexing_mask_with_jax_passes_the_padding_probe_and_trains():
    # the probe passes mask as training does (a traced jax array), not numpy
    X, y, sizes = _ranking_data(10)
    plain = jb.Booster(loss=group_squares, n_estimators=2, max_depth=2).fit(X, y, group=sizes)
    model = jb.Booster(loss=sorted_squares, n_estimators=2, max_depth=2).fit(X, y, group=sizes)
    np.testing.assert_allclose(model.predict(X), plain.predict(X), rtol=1e-5, atol=1e-5)


def test_a_group_loss_that_masks_and_the_catalogue_pass_the_padding_probe():
    from jaxboost.frontends.training.padding_check import check_mask_respected

    _, y, _ = _ranking_data(10)
    _, time, event = _survival_data()
    catalogue = [losses.listnet, losses.ranknet(), losses.lambdarank(), losses.lambdarank(k=2)]
    for loss in [listnet, group_squares, *catalogue]:  # this file's mask with jnp.where
        check_mask_respected(loss, y, skip_catalogue=False)
    check_mask_respected(losses.cox, np.c_[time, event], skip_catalogue=False)


@losses.declare(name="test_listnet_times_mask", per="group")
def listnet_times_mask(y, f, mask):  # 0 * -inf: NaN on the padding rows alone
    target = jax.nn.softmax(jnp.where(mask, y, -jnp.inf))
    log_q = jax.nn.log_softmax(jnp.where(mask, f, -jnp.inf))
    return -jnp.sum(mask.astype(jnp.float32) * target * log_q)


def test_a_group_loss_not_finite_on_its_padding_rows_alone_is_refused_naming_mask():
    # NaN on both paddings compared equal: it trained on groups of 32 rows
    # and failed on groups of 30 with advice about overflow
    X, y, sizes = _ranking_data(10)
    message = (
        r"loss 'test_listnet_times_mask': loss\(y, f, mask\) is finite on one group of 5 rows, "
        r"but its value is NaN or infinite once .* \(rows 5 to 7, where mask is False.*"
        r"jnp\.where\(mask, terms, 0\.0\) rather than multiplying by mask"
    )
    with pytest.raises(ValueError, match=message):
        jb.Booster(loss=listnet_times_mask, n_estimators=2).fit(X, y, group=sizes)
    # unpadded, it is the masked listnet
    f = jnp.linspace(-0.5, 0.5, 5)
    mask = jnp.ones(5, bool)
    np.testing.assert_allclose(
        listnet_times_mask(jnp.asarray(y[:5]), f, mask), listnet(jnp.asarray(y[:5]), f, mask)
    )

"""``min_child_samples``: no leaf holds fewer training rows of positive
weight where every row adds the same to the hessian sums, a stump takes the
best split that leaves enough on each side (brute force in numpy), and
where hessians differ each child's rows are estimated from its node's
counted rows, as documented, with no count column in the histograms."""

import numpy as np
import pytest

import jaxboost as jb
from jaxboost import losses


def _smallest_leaf(model, X, weight=None) -> int:
    """The fewest rows (of positive ``weight``) in a reached leaf of any tree."""
    leaves = model.apply(X if weight is None else X[weight > 0])
    return min(int(np.bincount(column)[np.bincount(column) > 0].min()) for column in leaves.T)


def _data(n_rows=500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 3)).astype(np.float32)
    # a few outlying rows a deep tree would isolate
    y = X[:, 0] + 5.0 * (X[:, 1] > 2.0) + 0.1 * rng.normal(size=n_rows)
    return rng, X, y.astype(np.float32)


@pytest.mark.parametrize("least", [0, 25, 60])
def test_no_leaf_holds_fewer_rows(least):
    _, X, y = _data()
    model = jb.Booster(n_estimators=4, max_depth=4, min_child_samples=least).fit(X, y)
    smallest = _smallest_leaf(model, X)
    assert smallest >= least
    if least == 0:
        assert smallest < 25  # the setting is what keeps leaves large


def test_rows_of_zero_weight_do_not_count_and_vector_outputs_follow():
    rng, X, y = _data(seed=1)
    weight = np.where(rng.uniform(size=500) < 0.4, 0.0, 1.0).astype(np.float32)
    model = jb.Booster(n_estimators=3, max_depth=4, min_child_samples=40).fit(X, y, weight)
    assert _smallest_leaf(model, X, weight) >= 40
    labels = np.digitize(y, [0.0, 1.0]).astype(np.float32)
    # (the first round: at the initial score every row's hessians are equal,
    # so the estimated rows are the counted ones)
    for strategy in ("multi_output_tree", "one_output_per_tree"):
        model = jb.Booster(
            losses.softmax_cross_entropy,
            n_estimators=1,
            max_depth=4,
            min_child_samples=50,
            multi_strategy=strategy,
        ).fit(X, labels)
        assert _smallest_leaf(model, X) >= 50


def test_a_stump_takes_the_best_split_with_enough_rows_on_each_side():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 40, size=400).astype(np.float32)  # 40 values: one bin each
    y = (x >= 37).astype(np.float32) * 3.0 + 0.1 * rng.normal(size=400).astype(np.float32)
    least = 60
    model = jb.Booster(
        n_estimators=1, max_depth=1, min_child_samples=least, reg_lambda=0.0, base_score=0.0
    ).fit(x[:, None], y)
    # squared error at 0: gradients -y, hessians 1; gain of left = x <= t
    best_gain, best_threshold = -np.inf, None
    for threshold in np.unique(x)[:-1]:
        left = x <= threshold
        if left.sum() < least or (~left).sum() < least:
            continue
        gain = y[left].sum() ** 2 / left.sum() + y[~left].sum() ** 2 / (~left).sum()
        if gain > best_gain:
            best_gain, best_threshold = gain, threshold
    # the same rows to the left (the stored threshold is a bin edge between values)
    np.testing.assert_array_equal(x <= model.forest_.threshold[0, 0], x <= best_threshold)
    unconstrained = jb.Booster(
        n_estimators=1, max_depth=1, min_child_samples=0, reg_lambda=0.0, base_score=0.0
    )
    threshold = unconstrained.fit(x[:, None], y).forest_.threshold[0, 0]
    np.testing.assert_array_equal(x <= threshold, x <= 36)  # (x >= 37 apart: too few rows)
    assert (x >= 37).sum() < least


def test_the_setting_round_trips_and_bad_values_are_refused(tmp_path):
    _, X, y = _data(n_rows=100, seed=3)
    model = jb.Booster(n_estimators=2, max_depth=2, min_child_samples=10).fit(X, y)
    model.save(tmp_path / "model.json")
    assert jb.load(tmp_path / "model.json").min_child_samples == 10
    assert (
        jb.Regressor(n_estimators=2, max_depth=2, min_child_samples=10)  # (the Booster's programs)
        .fit(X, y)
        .booster_.min_child_samples
        == 10
    )
    for bad in (-1, float("nan"), "many"):
        with pytest.raises(ValueError, match='min_child_samples: expected "auto" or a finite'):
            jb.Booster(min_child_samples=bad).fit(X, y)
    with pytest.raises(ValueError, match="min_child_samples: the quantised histograms"):
        jb.Booster(min_child_samples=5, use_quantized_grad=True).fit(X, y)


def test_auto_is_twenty_rows_or_none_with_quantised_gradients():
    _, X, y = _data(n_rows=300, seed=4)
    auto = jb.Booster(n_estimators=3, max_depth=5).fit(X, y)
    assert auto.min_child_samples == "auto"
    assert _smallest_leaf(auto, X) >= 20
    twenty = jb.Booster(n_estimators=3, max_depth=5, min_child_samples=20).fit(X, y)
    np.testing.assert_array_equal(auto.predict(X), twenty.predict(X))
    # quantised histograms carry no count: "auto" is 0 there, not an error
    quantised = {"n_estimators": 3, "max_depth": 5, "use_quantized_grad": True}
    off = jb.Booster(**quantised, min_child_samples=0).fit(X, y)
    np.testing.assert_array_equal(jb.Booster(**quantised).fit(X, y).predict(X), off.predict(X))
    assert _smallest_leaf(off, X) < 20


def test_hessians_that_depend_on_nothing_are_told_apart():
    """`hessian_is_constant` proves on the traced program that a loss's
    hessian depends on neither target nor score, and refuses the rest."""
    import jax.numpy as jnp

    from jaxboost.frontends.training.hessian_probe import hessian_is_constant

    target = np.float32(0.5)
    assert hessian_is_constant(losses.squared_error, target, 1)
    assert hessian_is_constant(lambda y, f: 3.0 * (f - y) ** 2, target, 1)
    assert not hessian_is_constant(losses.binary_logloss, target, 1)
    assert not hessian_is_constant(lambda y, f: jnp.logaddexp(f - y, y - f), target, 1)
    assert not hessian_is_constant(lambda y, f: f - y, target, 1)  # hessian 0
    vector = np.ones(3, np.float32)
    assert hessian_is_constant(lambda y, f: 0.5 * jnp.sum((f - y) ** 2), vector, 3)
    assert not hessian_is_constant(lambda y, f: jnp.sum(jnp.cosh(f - y)), vector, 3)


def test_a_constant_hessian_is_evaluated_as_one_program():
    """`hessian_is_constant` evaluates the hessian it proved constant as one
    compiled program: op by op, each of its operations (some 20, at a
    shape of its own) was compiled on its own, 0.4 s of a first fit's CPU."""
    import jax
    import jax.numpy as jnp
    from jax import monitoring

    from jaxboost.frontends.training.hessian_probe import hessian_is_constant

    compiles, listening = [], [True]

    def listen(name, duration, **kwargs):  # (stays registered: JAX has no public removal)
        if listening[0] and name.endswith("backend_compile_duration"):
            compiles.append(duration)

    monitoring.register_event_duration_secs_listener(listen)
    cached = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)  # (every program compiled)
    try:
        # 11 outputs: shapes no other test's operations take
        loss = lambda y, f: 0.25 * jnp.sum(jnp.square(f - y))
        assert hessian_is_constant(loss, np.ones(11, np.float32), 11)
    finally:
        jax.config.update("jax_enable_compilation_cache", cached)
        listening[0] = False
    assert len(compiles) == 1


def test_rows_read_off_the_hessian_grow_the_trees_of_the_counted_nodes(monkeypatch):
    """Squared error (hessian 1) and absolute error (the first-order
    criterion's weights), with rows of weight 0 and a subsample, read the
    rows off the hessian sums, counting nothing, and grow the very trees
    the nodes' counted rows grow (their hessians are equal: the estimate is
    exact); log loss and weights other than 0 and 1 count the nodes'
    rows."""
    from jaxboost.frontends.training import program_settings

    rng, X, y = _data(seed=5)
    weight = np.where(rng.uniform(size=500) < 0.3, 0.0, 1.0).astype(np.float32)
    routes = []

    def spied(*args):
        routes.append(booster_rows(*args))
        return routes[-1]

    booster_rows = program_settings.rows_from_hessian
    monkeypatch.setattr(program_settings, "rows_from_hessian", spied)
    settings = {"n_estimators": 3, "max_depth": 3, "min_child_samples": 30, "subsample": 0.7}
    fitted = {}
    for loss in (losses.squared_error, losses.absolute_error):
        fitted[loss] = jb.Booster(loss, **settings).fit(X, y, weight)
        assert _smallest_leaf(fitted[loss], X, weight) >= 30
    assert routes == [True, True]
    monkeypatch.setattr(program_settings, "rows_from_hessian", lambda *args: False)
    for loss, model in fitted.items():
        column = jb.Booster(loss, **settings).fit(X, y, weight)
        for field in ("feature", "threshold_bin", "leaf_value"):
            expected = getattr(column.forest_, field)
            np.testing.assert_array_equal(getattr(model.forest_, field), expected)
    monkeypatch.setattr(program_settings, "rows_from_hessian", spied)
    labels = (y > 0).astype(np.float32)
    jb.Booster(losses.binary_logloss, n_estimators=1, max_depth=2).fit(X, labels)
    jb.Booster(n_estimators=1, max_depth=2).fit(X, y, 2.0 * weight)
    assert routes[2:] == [False, False]


def _stump_split(x, y, weight, least, estimated):
    """The best stump split ``x <= t`` of squared error at score 0 without
    L2 (gain ``G_L^2 / H_L + G_R^2 / H_R``, ``G = -sum(w y)``, ``H =
    sum(w)``) whose children hold ``least`` rows each: counted, or
    ``estimated`` as the docs say, a child's share of the weight (the
    hessian) times the node's rows, rounded."""
    best_gain, best_threshold = -np.inf, None
    for threshold in np.unique(x)[:-1]:
        left = x <= threshold
        rows = [left.sum(), (~left).sum()]
        if estimated:
            rows = [np.round(weight[side].sum() / weight.sum() * len(x)) for side in (left, ~left)]
        if min(rows) < least:
            continue
        gain = sum((weight[s] * y[s]).sum() ** 2 / weight[s].sum() for s in (left, ~left))
        if gain > best_gain:
            best_gain, best_threshold = gain, threshold
    return best_threshold


def test_log_loss_refuses_a_child_below_the_limit():
    """Log loss at a constant first score: every row's hessian is the same,
    so the estimated rows are the counted ones, and the stump is the brute
    force's (``x >= 37``, 30 rows, is too few for 40)."""
    rng = np.random.default_rng(2)
    x = rng.integers(0, 40, size=400).astype(np.float32)
    labels = ((x >= 37) | (rng.uniform(size=400) < 0.1)).astype(np.float32)
    least = 40
    settings = {"n_estimators": 1, "max_depth": 1, "reg_lambda": 0.0, "base_score": 0.0}
    model = jb.Booster(losses.binary_logloss, min_child_samples=least, **settings)
    threshold = model.fit(x[:, None], labels).forest_.threshold[0, 0]
    # at score 0: gradient 0.5 - y, hessian 0.25 on every row
    expected = _stump_split(x, labels - 0.5, np.ones(400), least, estimated=False)
    np.testing.assert_array_equal(x <= threshold, x <= expected)
    unlimited = jb.Booster(losses.binary_logloss, min_child_samples=0, **settings)
    threshold = unlimited.fit(x[:, None], labels).forest_.threshold[0, 0]
    np.testing.assert_array_equal(x <= threshold, x <= 36)


def test_unequal_hessians_estimate_the_childrens_rows_from_their_nodes():
    """Weights 1 and 4 make the hessians unequal: a child's rows are its
    share of the hessian times its node's (counted) rows, as documented, so
    ``x >= 37`` (30 rows of weight 4: 69 estimated) may split off where
    counted rows would refuse it."""
    rng = np.random.default_rng(3)
    x = np.repeat(np.arange(40), 10).astype(np.float32)
    weight = np.where(x >= 30, 4.0, 1.0).astype(np.float32)
    y = (3.0 * (x >= 37) + 0.1 * rng.normal(size=400)).astype(np.float32)
    least = 40
    model = jb.Booster(
        n_estimators=1, max_depth=1, min_child_samples=least, reg_lambda=0.0, base_score=0.0
    ).fit(x[:, None], y, weight)
    estimated = _stump_split(x, y, weight, least, estimated=True)
    assert estimated != _stump_split(x, y, weight, least, estimated=False)
    np.testing.assert_array_equal(x <= model.forest_.threshold[0, 0], x <= estimated)


def test_the_estimate_never_lets_an_empty_child_through():
    """A child whose hessian sum is rounding of its node's (an empty one) is
    refused even in a node of 2^26 rows, where its share times the rows
    alone would pass; a child of one row's share passes."""
    import jax.numpy as jnp

    from jaxboost.engine.split import child_check, estimated_row_rule

    node = jnp.asarray([[0.0, 100.0]])  # [grad, hess] of one node
    rows = jnp.asarray([2.0**26])
    least, per_hessian = estimated_row_rule(node[..., None, :], rows, 1, 1.0)
    child_ok = child_check(1, 0.0, least, per_hessian)
    for hess, ok in ((0.0, False), (3 * 2.0**-24 * 100.0, False), (100.0 * 2.0**-15, True)):
        child = jnp.asarray([[[0.0, hess]]])
        assert bool(child_ok(child)[0, 0]) is ok, hess


def test_log_loss_at_the_default_sums_no_count_column(monkeypatch):
    """The default fit of log loss builds histograms of ``[grad, hess]``
    only (the kernel counts each node's rows as it routes them), as does
    ``min_child_samples=0``."""
    import jax

    from jaxboost.engine import training

    widths = []
    grow_tree = training.grow_tree

    def spied(bins, row_stats, *args, **kwargs):
        widths.append((row_stats.shape[1], kwargs.get("row_positive") is not None))
        return grow_tree(bins, row_stats, *args, **kwargs)

    monkeypatch.setattr(training, "grow_tree", spied)
    jax.clear_caches()  # (so that the programs are traced here)
    _, X, y = _data(n_rows=200, seed=6)
    labels = (y > 0).astype(np.float32)
    jb.Booster(losses.binary_logloss, n_estimators=1, max_depth=2).fit(X, labels)
    assert widths and set(widths) == {(2, True)}
    widths.clear()
    jb.Booster(losses.binary_logloss, n_estimators=1, max_depth=2, min_child_samples=0).fit(
        X, labels
    )
    assert widths and set(widths) == {(2, False)}

"""Monotone and interaction constraints (`jaxboost.engine.constraints`):
predictions monotone along each constrained column for every row, exactly
(whatever computes the leaves, on either split search), and every
root-to-leaf path of the stored forest within one interaction set."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine import packed_split
from jaxboost.engine.packed_split import find_best_packed_splits, packed_bins, slot_layout
from jaxboost.engine.split import find_best_splits
from jaxboost.kernels.histogram_reference import in_slots

_GRID = np.linspace(-4.0, 4.0, 33, dtype=np.float32)
_SMALL = {"n_estimators": 15, "max_depth": 4, "learning_rate": 0.3}


def _data(n=1500, seed=0, integer=False):
    """Rows where column 0 raises y along a wavy curve, column 3 lowers it,
    and columns 1 and 2 interact."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    if integer:  # few distinct values: the packed split search
        X = np.round(X * 2).astype(np.float32)
    y = 2 * X[:, 0] + np.sin(4 * X[:, 0]) - X[:, 3] + X[:, 1] * X[:, 2]
    return X, (y + 0.5 * rng.normal(size=n)).astype(np.float32)


def _swept(model, rows, column):
    """``(n_rows, grid)`` raw scores as ``column`` alone sweeps `_GRID`."""
    frame = rows if isinstance(rows, pd.DataFrame) else None
    swept = np.repeat(np.asarray(rows, np.float32), _GRID.size, axis=0)
    swept[:, column] = np.tile(_GRID, rows.shape[0])
    if frame is not None:
        swept = pd.DataFrame(swept, columns=frame.columns)
    return model.predict_raw(swept).reshape(rows.shape[0], _GRID.size)


def _assert_monotone(model, rows, directions):
    for column, direction in directions.items():
        steps = direction * np.diff(_swept(model, rows, column), axis=1)
        assert np.all(steps >= 0), (column, steps.min())


X, Y = _data()
_MONOTONE = [1, 0, 0, -1, 0]
_CASES = {
    "newton": {"loss": "squared_error"},
    "line_search": {"loss": "absolute_error", "leaf_method": "line_search"},
    # (line-search leaves also take Armijo's backtracking: armijo=None)
    "joint_newton": {"loss": losses.binary_logloss, "leaf_method": "joint_newton"},
}


@pytest.fixture(scope="module")
def models():
    fitted = {}
    for name, extra in _CASES.items():
        target = (Y > 0).astype(np.float32) if name == "joint_newton" else Y
        model = jb.Booster(monotone_constraints=_MONOTONE, **_SMALL, **extra)
        fitted[name] = model.fit(X, target)
    return fitted


@settings(max_examples=25, deadline=None)
@given(
    rows=hnp.arrays(
        np.float32,
        (4, 5),
        elements=st.floats(-5, 5, width=32) | st.just(np.float32(np.nan)),
    ),
    case=st.sampled_from(sorted(_CASES)),
)
def test_predictions_are_monotone_along_constrained_columns(models, rows, case):
    _assert_monotone(models[case], rows, {0: 1, 3: -1})


def test_a_split_against_the_constraint_is_not_taken():
    # unconstrained, sin(4 x) makes the fit dip along column 0: the test can fail
    free = jb.Booster(**_SMALL).fit(X, Y)
    steps = np.diff(_swept(free, X[:20], 0), axis=1)
    assert np.any(steps < 0)
    # -Y falls along column 0, constrained to rise: the fit cannot follow it
    against = jb.Booster(monotone_constraints=_MONOTONE, **_SMALL).fit(X, -Y)
    assert np.all(np.diff(_swept(against, X[:20], 0), axis=1) >= 0)
    free_against = jb.Booster(**_SMALL).fit(X, -Y)
    assert np.mean((against.predict(X) + Y) ** 2) > 2 * np.mean((free_against.predict(X) + Y) ** 2)
    assert np.mean((against.predict(X) + Y) ** 2) < np.var(Y)  # it learns the other columns


def test_monotone_on_the_packed_split_search(monkeypatch):
    monkeypatch.setattr(packed_split, "_PACKED_LEAST", 0)  # a small table, packed
    X_int, y_int = _data(integer=True)
    edges_of_few_values = np.sort(np.unique(X_int[:, 0]))
    assert edges_of_few_values.size < 20
    model = jb.Booster(monotone_constraints=_MONOTONE, **_SMALL).fit(X_int, y_int)
    # the fit's bins are packed (few values per column)
    edges = np.full((5, 255), np.inf, np.float32)
    for column in range(5):
        values = np.unique(X_int[:, column])
        edges[column, : values.size - 1] = (values[:-1] + values[1:]) / 2
    assert packed_bins(edges) is not None
    _assert_monotone(model, X_int[:30], {0: 1, 3: -1})
    free = jb.Booster(**_SMALL).fit(X_int, y_int)
    assert np.any(np.diff(_swept(free, X_int[:30], 0), axis=1) < 0)  # the test can fail


def test_all_zero_constraints_train_the_unconstrained_model():
    free = jb.Booster(**_SMALL).fit(X, Y)
    zero = jb.Booster(monotone_constraints=[0] * 5, **_SMALL).fit(X, Y)
    np.testing.assert_array_equal(zero.predict_raw(X), free.predict_raw(X))


def test_monotone_model_saves_and_loads(tmp_path, models):
    model = models["newton"]
    path = tmp_path / "monotone.json"
    model.save(path)
    loaded = jb.load(path)
    assert loaded.monotone_constraints == _MONOTONE
    np.testing.assert_array_equal(loaded.predict_raw(X), model.predict_raw(X))
    # continued from the file under the same constraints: still monotone
    more = jb.Booster(monotone_constraints=_MONOTONE, **_SMALL).fit(X, Y, init_model=loaded)
    assert more.forest_.feature.shape[0] == 2 * model.forest_.feature.shape[0]
    _assert_monotone(more, X[:10], {0: 1, 3: -1})


def test_refit_leaves_keeps_monotone_models_monotone(models, monkeypatch):
    from jaxboost.frontends import refit

    # fine-tuned on targets that fall along column 0: left free, the leaves break the order
    against = -Y
    with monkeypatch.context() as patch:
        patch.setattr(refit, "_monotone_leaves", lambda model, leaf_value: leaf_value)
        free = jb.refit_leaves(models["newton"], X, against, steps=30)
    assert np.any(np.diff(_swept(free, X[:10], 0), axis=1) < 0)  # the test can fail
    refitted = jb.refit_leaves(models["newton"], X, against, steps=30)
    _assert_monotone(refitted, X[:10], {0: 1, 3: -1})
    assert refitted.refit_loss_[-1] < refitted.refit_loss_[0]


def _level_histograms(used, n_nodes, n_value_bins, rng):
    """``(F, N, Bv + 1, 2)`` one-output histograms, bins past each feature's
    ``used`` empty, some missing rows."""
    hist = np.zeros((used.size, n_nodes, n_value_bins + 1, 2), np.float32)
    for feature, count in enumerate(used):
        hist[feature, :, :count, 0] = rng.normal(size=(n_nodes, count))
        hist[feature, :, :count, 1] = rng.uniform(0.5, 2.0, size=(n_nodes, count))
    hist[:, :, -1, 0] = rng.normal(size=(used.size, n_nodes))
    hist[:, :, -1, 1] = rng.uniform(0.0, 1.0, size=(used.size, n_nodes))
    # every feature holds the same rows: the node totals agree
    totals = hist.sum(axis=2, keepdims=True)
    hist[:, :, -1:] += totals[:1] - totals
    return hist


def _clipped_value_and_score(grad, hess, lower, upper, reg_lambda):
    value = np.clip(-grad / (hess + reg_lambda), lower, upper)
    return value, -(2 * grad * value + (hess + reg_lambda) * value * value)


def _brute_force_choice(hist, direction, lower, upper, node_mask, reg_lambda, least_hess):
    """Per node ``(gain, feature, threshold, missing_left, middle)`` of the
    best constrained split, by enumeration in float64."""
    hist = hist.astype(np.float64)
    n_features, n_nodes, n_bins, _ = hist.shape
    best = []
    for node in range(n_nodes):
        top = (-np.inf, 0, 0, 0, 0.0)
        for feature, threshold, missing_left in itertools.product(
            range(n_features), range(n_bins - 1), (0, 1)
        ):
            if not node_mask[feature, node]:
                continue
            column = hist[feature, node]
            total = column.sum(axis=0)
            left = column[: threshold + 1].sum(axis=0) + missing_left * column[-1]
            right = total - left
            if left[1] < least_hess or right[1] < least_hess:
                continue

            bounds = (lower[node], upper[node], reg_lambda)
            w_left, s_left = _clipped_value_and_score(*left, *bounds)
            w_right, s_right = _clipped_value_and_score(*right, *bounds)
            _, s_total = _clipped_value_and_score(*total, *bounds)
            if direction[feature] * (w_left - w_right) > 0:
                continue
            gain = 0.5 * (s_left + s_right - s_total)
            if gain > top[0] * (1 + 1e-5) + 1e-9:
                top = (gain, feature, threshold, missing_left, 0.5 * (w_left + w_right))
        best.append(top)
    return best


def test_constrained_search_matches_brute_force_on_both_layouts(monkeypatch):
    monkeypatch.setattr(packed_split, "_PACKED_LEAST", 0)  # a small table, packed
    rng = np.random.default_rng(3)
    n_features, n_nodes, n_value_bins = 6, 5, 63
    used = np.array([4, 6, 3, 5, 2, 6])
    edges = np.full((n_features, n_value_bins), np.inf, np.float32)
    for feature, count in enumerate(used):
        edges[feature, : count - 1] = np.sort(rng.normal(size=count - 1))
    packed = packed_bins(edges)
    assert packed is not None
    direction = np.array([1, -1, 0, 1, 0, -1], np.int32)
    packed = jax.tree.map(jnp.asarray, packed)
    slots = slot_layout(packed)
    settings = (1, 1.0, 0.1, 0.0)  # one output, lambda, least hessian, least gain

    @jax.jit
    def search_both(hist, lower, upper, node_mask):
        constraints = {"node_mask": node_mask, "monotone": (jnp.asarray(direction), lower, upper)}
        full = find_best_splits(hist, *settings, **constraints)
        found = find_best_packed_splits(in_slots(hist, slots), packed, *settings, **constraints)
        return full, found

    checked = 0
    for _ in range(6):
        hist = _level_histograms(used, n_nodes, n_value_bins, rng)
        lower = np.where(rng.uniform(size=n_nodes) < 0.5, rng.normal(size=n_nodes) - 1, -np.inf)
        upper = np.where(rng.uniform(size=n_nodes) < 0.5, rng.normal(size=n_nodes) + 1, np.inf)
        lower, upper = lower.astype(np.float32), upper.astype(np.float32)
        node_mask = rng.uniform(size=(n_features, n_nodes)) < 0.7
        full, found = search_both(hist, lower, upper, node_mask)
        for name in ("feature", "threshold_bin", "missing_left", "do_split"):
            np.testing.assert_array_equal(getattr(full, name), getattr(found, name), name)
        # (the packed running sums may round apart in the last bit)
        np.testing.assert_allclose(found.gain, full.gain, rtol=1e-6)
        np.testing.assert_allclose(found.middle, full.middle, rtol=1e-6, atol=1e-7)
        reference = _brute_force_choice(hist, direction, lower, upper, node_mask, 1.0, 0.1)
        for node, (gain, feature, threshold, missing_left, middle) in enumerate(reference):
            assert bool(full.do_split[node]) == (gain > 1e-6)
            if gain <= 1e-6:
                continue
            np.testing.assert_allclose(full.gain[node], gain, rtol=1e-4)
            chosen = (full.feature[node], full.threshold_bin[node], full.missing_left[node])
            assert tuple(int(v) for v in chosen) == (feature, threshold, missing_left)
            np.testing.assert_allclose(full.middle[node], middle, rtol=1e-4, atol=1e-6)
            checked += 1
    assert checked > 10


def _path_features(forest):
    """Every root-to-leaf path's set of split columns, over every tree."""
    feature, gain = np.asarray(forest.feature), np.asarray(forest.split_gain)
    n_internal = feature.shape[1]
    paths = []
    for tree in range(feature.shape[0]):
        stack = [(0, frozenset())]
        while stack:
            node, used = stack.pop()
            if node >= n_internal:
                paths.append(used)
                continue
            if gain[tree, node] > 0:
                used = used | {int(feature[tree, node])}
            stack += [(2 * node + 1, used), (2 * node + 2, used)]
    return paths


def test_interaction_constraints_hold_on_every_path_of_the_forest():
    sets = [{0, 1}, {2, 3}]
    free = jb.Booster(**_SMALL).fit(X, Y)
    # unconstrained, columns 1 and 2 (interacting in y) share paths
    assert any(
        not any(path <= allowed for allowed in sets) for path in _path_features(free.forest_)
    )
    model = jb.Booster(interaction_constraints=[[0, 1], [2, 3]], **_SMALL).fit(X, Y)
    paths = _path_features(model.forest_)
    assert all(any(path <= allowed for allowed in sets) for path in paths)
    used = set().union(*paths)
    assert 4 not in used  # in no set: never split on (LightGBM's rule)
    assert used == {0, 1, 2, 3}


def test_constraints_by_column_name_in_frames_and_estimators(tmp_path):
    frame = pd.DataFrame(X, columns=list("abcde"))
    settings = {
        "monotone_constraints": {"a": 1, "d": -1},
        "interaction_constraints": [["a", "b", "d"], ["c", "d"]],
    }
    model = jb.Booster(**settings, **_SMALL).fit(frame, Y)
    _assert_monotone(model, frame.iloc[:10], {0: 1, 3: -1})
    sets = [{0, 1, 3}, {2, 3}]
    assert all(any(p <= s for s in sets) for p in _path_features(model.forest_))
    path = tmp_path / "named.json"
    model.save(path)
    loaded = jb.load(path)
    assert loaded.monotone_constraints == {"a": 1, "d": -1}
    np.testing.assert_array_equal(loaded.predict_raw(frame), model.predict_raw(frame))
    estimator = jb.Regressor(**settings, **_SMALL).fit(frame, Y)
    np.testing.assert_array_equal(estimator.predict(frame), model.predict(frame))


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"monotone_constraints": [1, 0]}, "monotone_constraints: 2 directions for 5 columns"),
        ({"monotone_constraints": [2, 0, 0, 0, 0]}, r"monotone_constraints: entry 0 is 2; "),
        ({"monotone_constraints": {"x": 1}}, "monotone_constraints: the column name 'x' needs"),
        ({"monotone_constraints": {7: 1}}, "monotone_constraints: column index 7 out of range"),
        ({"monotone_constraints": "increasing"}, "monotone_constraints: expected a list"),
        ({"interaction_constraints": [[0, 9]]}, "interaction_constraints: column index 9 out of"),
        ({"interaction_constraints": [0, 1]}, "interaction_constraints: set 0 is 0; expected"),
        ({"interaction_constraints": [[]]}, "interaction_constraints: set 0 is empty"),
        ({"interaction_constraints": [[-1]]}, "interaction_constraints: column index -1 out of"),
    ],
)
def test_bad_settings_name_the_setting_and_the_fix(setting, message):
    with pytest.raises((ValueError, TypeError), match=message):
        jb.Booster(n_estimators=2, **setting).fit(X, Y)


def test_unknown_column_names_are_refused():
    frame = pd.DataFrame(X, columns=list("abcde"))
    with pytest.raises(ValueError, match=r"interaction_constraints: no column named 'z' in X"):
        jb.Booster(n_estimators=2, interaction_constraints=[["a", "z"]]).fit(frame, Y)


def test_vector_outputs_are_refused_with_monotone_constraints():
    classes = np.digitize(Y, [-1, 1]).astype(np.float32)
    with pytest.raises(ValueError, match="monotone_constraints: .* one output; this one has 3"):
        jb.Booster(
            loss=losses.softmax_cross_entropy, n_estimators=2, monotone_constraints=[1, 0, 0, 0, 0]
        ).fit(X, classes)

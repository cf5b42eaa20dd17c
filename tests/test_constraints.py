"""Monotone and interaction constraints (`jaxboost.engine.constraints`):
predictions monotone along each constrained column for every row, exactly
(whatever computes the leaves, on either split search), and every
root-to-leaf path of the stored forest within one interaction set."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.packed_split import packed_bins

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


def test_monotone_on_the_packed_split_search():
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


def test_refit_leaves_refuses_monotone_models(models):
    with pytest.raises(ValueError, match="monotone_constraints.*refit_leaves"):
        jb.refit_leaves(models["newton"], X, Y)


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

"""``monotone_constraints_method="intermediate"`` (`jaxboost.engine.neighbours`):
the neighbour pairs against routing every point of a small binned space,
bounds that keep any clipped values in order, predictions monotone for
every row on both growth policies and every leaf method, and leaves freed
where the "basic" method's nested midpoints hold them."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine import neighbours, packed_split
from jaxboost.engine.neighbours import (
    below_pairs,
    children_boxes,
    neighbour_bounds,
    ordered_leaves,
    root_boxes,
)

_BINS, _FEATURES, _DEPTH = 4, 3, 3
_MISSING = -1  # a point's missing value in `_route`


def _random_tree(rng):
    """Per level ``(feature, threshold_bin, missing_left, do_split)``, each
    ``(2^level,)``: a random depth-`_DEPTH` tree over `_BINS` bins."""
    levels = []
    for level in range(_DEPTH):
        n = 2**level
        levels.append(
            (
                rng.integers(0, _FEATURES, n),
                rng.integers(0, _BINS - 1, n),
                rng.uniform(size=n) < 0.5,
                rng.uniform(size=n) < 0.8,
            )
        )
    return levels


def _leaf_boxes(levels, values):
    boxes = root_boxes(_FEATURES, _BINS)
    for feature, threshold, missing_left, do_split in levels:
        n = feature.shape[0]
        child_values = jnp.zeros((n, 2), jnp.float32)
        boxes = children_boxes(
            boxes,
            jnp.asarray(feature, jnp.int32),
            jnp.asarray(threshold, jnp.int32),
            jnp.asarray(missing_left),
            child_values,
            jnp.asarray(do_split),
        )
    return boxes._replace(value=jnp.asarray(values, jnp.float32))


def _route(levels, point):
    """The leaf of ``point`` (a bin per feature, `_MISSING` for missing),
    walking the tree as prediction does: a non-split sends every row left."""
    node = 0
    for feature, threshold, missing_left, do_split in levels:
        value = point[feature[node]]
        if not do_split[node]:
            left = True
        elif value == _MISSING:
            left = bool(missing_left[node])
        else:
            left = value <= threshold[node]
        node = 2 * node + (0 if left else 1)
    return node


def _reference_below(levels, direction):
    """``[a, b]``: two points that differ only in a constrained feature, by
    one bin, reach leaves ``a`` and ``b`` with ``a`` on the side that must
    predict less."""
    below = np.zeros((2**_DEPTH, 2**_DEPTH), bool)
    values = [_MISSING, *range(_BINS)]
    for point in itertools.product(values, repeat=_FEATURES):
        for f in np.flatnonzero(direction):
            if point[f] == _MISSING or point[f] == _BINS - 1:
                continue
            higher = list(point)
            higher[f] += 1
            a, b = _route(levels, point), _route(levels, higher)
            if a != b:
                below[(a, b) if direction[f] > 0 else (b, a)] = True
    return below


@pytest.mark.parametrize("seed", range(8))
def test_neighbour_pairs_are_the_leaves_that_points_one_bin_apart_reach(seed, monkeypatch):
    if seed >= 4:  # the scan over features that deep trees take
        monkeypatch.setattr(neighbours, "PAIRWISE_LIMIT", 0)
    rng = np.random.default_rng(seed)
    levels = _random_tree(rng)
    direction = np.array([1, 0, -1], np.int32) if seed % 2 else np.array([0, 1, 0], np.int32)
    boxes = _leaf_boxes(levels, np.zeros(2**_DEPTH))
    found = np.asarray(below_pairs(jnp.asarray(direction), boxes))
    np.testing.assert_array_equal(found, _reference_below(levels, direction))


@pytest.mark.parametrize("seed", range(8))
def test_bounds_keep_any_clipped_values_in_order(seed):
    rng = np.random.default_rng(seed)
    levels = _random_tree(rng)
    direction = np.array([1, -1, 0], np.int32)
    below = _reference_below(levels, direction)
    assert below.any()
    values = rng.normal(size=2**_DEPTH).astype(np.float32)  # out of order
    lower, upper = map(np.asarray, neighbour_bounds(direction, _leaf_boxes(levels, values)))
    reached = np.unique([_route(levels, p) for p in itertools.product(range(_BINS), repeat=3)])
    assert np.all(lower[reached] <= upper[reached])
    for _ in range(5):  # whatever computes the leaves, clipped they are in order
        clipped = np.clip(rng.normal(size=values.size) * 3, lower, upper)
        a, b = np.nonzero(below)
        assert np.all(clipped[a] <= clipped[b])
    # values already in order lie within their bounds (clipping keeps them)
    ordered = np.zeros(values.size, np.float32)
    for _ in range(values.size):  # a value at least each one below it, plus a step
        for i, j in zip(*np.nonzero(below)):
            ordered[j] = max(ordered[j], ordered[i] + rng.uniform(0.1, 1.0))
    lower, upper = map(np.asarray, neighbour_bounds(direction, _leaf_boxes(levels, ordered)))
    assert np.all((lower <= ordered) & (ordered <= upper))
    # a tree's leaf values: kept where in order, put in order where not
    boxes = _leaf_boxes(levels, np.zeros(values.size))
    kept = np.asarray(ordered_leaves(direction, boxes, jnp.asarray(ordered[:, None])))
    np.testing.assert_array_equal(kept[:, 0], ordered)
    fixed = np.asarray(ordered_leaves(direction, boxes, jnp.asarray(values[:, None])))[:, 0]
    assert np.all(fixed[a] <= fixed[b])


def _data(n=1500, seed=0):
    """Column 0 raises y along a wavy curve, column 3 lowers it, columns 1
    and 2 interact; some values missing."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = 2 * X[:, 0] + np.sin(4 * X[:, 0]) - X[:, 3] + X[:, 1] * X[:, 2]
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    return X, (y + 0.5 * rng.normal(size=n)).astype(np.float32)


X, Y = _data()
_MONOTONE = [1, 0, 0, -1, 0]
_GRID = np.linspace(-4.0, 4.0, 33, dtype=np.float32)
_SMALL = {"n_estimators": 12, "learning_rate": 0.3, "monotone_constraints_method": "intermediate"}
_CASES = {
    "newton": {"loss": "squared_error", "max_depth": 4},
    "line_search": {"loss": "absolute_error", "leaf_method": "line_search", "max_depth": 4},
    "joint_newton": {"loss": losses.binary_logloss, "leaf_method": "joint_newton", "max_depth": 4},
    "lossguide": {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 6},
}


@pytest.fixture(scope="module")
def models():
    fitted = {}
    for name, extra in _CASES.items():
        target = (Y > 0).astype(np.float32) if name == "joint_newton" else Y
        model = jb.Booster(monotone_constraints=_MONOTONE, **_SMALL, **extra)
        fitted[name] = model.fit(X, target)
    return fitted


def _swept(model, rows, column):
    swept = np.repeat(np.asarray(rows, np.float32), _GRID.size, axis=0)
    swept[:, column] = np.tile(_GRID, rows.shape[0])
    return model.predict_raw(swept).reshape(rows.shape[0], _GRID.size)


@settings(max_examples=25, deadline=None)
@given(
    rows=hnp.arrays(
        np.float32, (4, 5), elements=st.floats(-5, 5, width=32) | st.just(np.float32(np.nan))
    ),
    case=st.sampled_from(sorted(_CASES)),
)
def test_predictions_are_monotone_along_constrained_columns(models, rows, case):
    for column, direction in {0: 1, 3: -1}.items():
        steps = direction * np.diff(_swept(models[case], rows, column), axis=1)
        assert np.all(steps >= 0), (case, column, steps.min())


def test_monotone_on_the_training_rows_and_the_packed_search(models, monkeypatch):
    monkeypatch.setattr(packed_split, "_PACKED_LEAST", 0)  # a small table, packed
    for model in models.values():
        for column, direction in {0: 1, 3: -1}.items():
            assert np.all(direction * np.diff(_swept(model, X[:40], column), axis=1) >= 0)
    integer = np.round(np.nan_to_num(X) * 2).astype(np.float32)  # few values: packed bins
    model = jb.Booster(monotone_constraints=_MONOTONE, max_depth=4, **_SMALL).fit(integer, Y)
    assert np.all(np.diff(_swept(model, integer[:40], 0), axis=1) >= 0)
    free = jb.Booster(max_depth=4, n_estimators=12, learning_rate=0.3).fit(integer, Y)
    assert np.any(np.diff(_swept(free, integer[:40], 0), axis=1) < 0)  # the test can fail


def _step_data(n=2000, seed=1):
    """y = 4 above x0 = 0.5, else 3 where x1 = 1 and 0 where x1 = 0: the
    root splits on x0 (midpoint 2.75), then the left side on x1."""
    rng = np.random.default_rng(seed)
    X = np.stack([rng.uniform(size=n), rng.integers(0, 2, n)], axis=1).astype(np.float32)
    y = np.where(X[:, 0] > 0.5, 4.0, 3.0 * X[:, 1]).astype(np.float32)
    return X, y


def test_intermediate_frees_a_leaf_that_basic_holds_at_a_midpoint():
    X_step, y_step = _step_data()
    one_tree = {"n_estimators": 1, "learning_rate": 1.0, "max_depth": 3, "reg_lambda": 1e-6}
    fits = {
        method: jb.Booster(
            monotone_constraints=[1, 0], monotone_constraints_method=method, **one_tree
        ).fit(X_step, y_step)
        for method in ("basic", "intermediate")
    }
    free = jb.Booster(**one_tree).fit(X_step, y_step)
    left_high = (X_step[:, 0] <= 0.5) & (X_step[:, 1] == 1)
    # basic: every leaf left of the root's cut stays at most its midpoint 2.75
    basic = fits["basic"].predict(X_step)
    assert np.max(basic[left_high]) <= 2.75 + 1e-4
    # intermediate: that leaf's neighbour across x0 = 0.5 is the region of
    # value 4, so it takes its own value 3, as the unconstrained tree does
    intermediate = fits["intermediate"].predict(X_step)
    np.testing.assert_allclose(intermediate, free.predict(X_step), atol=1e-4)
    np.testing.assert_allclose(intermediate[left_high], 3.0, atol=1e-4)
    grid = np.stack([np.linspace(0, 1, 101), np.ones(101)], axis=1).astype(np.float32)
    assert np.all(np.diff(fits["intermediate"].predict(grid)) >= 0)


def test_monotone_with_a_categorical_column():
    import pandas as pd

    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=1200).astype(np.float32),
            "shop": pd.Categorical(rng.choice(list("abcdefgh"), 1200)),
        }
    )
    effect = dict(zip("abcdefgh", rng.normal(size=8) * 2))
    y = (np.sin(3 * frame["x"]) + frame["x"] + frame["shop"].map(effect).astype(float)).to_numpy()
    model = jb.Booster(monotone_constraints={"x": 1}, max_depth=4, **_SMALL).fit(frame, y)
    for shop in "abcdefgh":
        grid = pd.DataFrame(
            {"x": _GRID, "shop": pd.Categorical([shop] * _GRID.size, categories=list("abcdefgh"))}
        )
        assert np.all(np.diff(model.predict_raw(grid)) >= 0), shop


def test_the_setting_saves_loads_and_reaches_the_estimators(tmp_path, models):
    path = tmp_path / "intermediate.json"
    models["newton"].save(path)
    loaded = jb.load(path)
    assert loaded.monotone_constraints_method == "intermediate"
    np.testing.assert_array_equal(loaded.predict_raw(X), models["newton"].predict_raw(X))
    settings_ = {"monotone_constraints": _MONOTONE, "max_depth": 4, **_SMALL}
    estimator = jb.Regressor(**settings_).fit(X, Y)
    np.testing.assert_array_equal(estimator.predict(X), models["newton"].predict(X))


@pytest.mark.parametrize("value", ["advanced", "Intermediate", None])
def test_a_bad_method_names_the_setting(value):
    with pytest.raises(ValueError, match=r"monotone_constraints_method: expected one of \['basic'"):
        jb.Booster(n_estimators=2, monotone_constraints_method=value).fit(X, Y)


def test_without_constraints_the_method_changes_nothing():
    free = jb.Booster(n_estimators=3, max_depth=3).fit(X, Y)
    other = jb.Booster(n_estimators=3, max_depth=3, monotone_constraints_method="intermediate")
    np.testing.assert_array_equal(other.fit(X, Y).predict_raw(X), free.predict_raw(X))

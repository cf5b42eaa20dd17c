"""Tests of ``jaxboost.engine.native_split`` with categorical features: the
native search chooses, bit for bit, what ``find_best_splits`` chooses with a
natively sorted `CategoricalSearch` (the feature, the candidate, the missing
direction, the gain and the set of bins sent left), on histograms of small
integers (ties everywhere), with missing categories, features of one
category, nodes whose rows all hold one category, one-category-against-the-
rest features, a small ``max_cat_threshold`` and children at the row rule's
limit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import clear_compiled_programs

import jaxboost as jb
import jaxboost.engine.tree as tree_module
from jaxboost.engine.categorical import CategoricalSettings, categorical_search
from jaxboost.engine.native_split import covers, native_best_splits
from jaxboost.engine.split import find_best_splits
from jaxboost.kernels.native_library import native_available

pytestmark = pytest.mark.skipif(
    not native_available(warn=False), reason="the native kernels did not build"
)

FIELDS = ("feature", "threshold_bin", "missing_left", "gain", "do_split", "category_left")
# (reg_lambda, min_child_weight, min_split_gain, min_child_samples)
SETTINGS = (1.0, 1e-3, 0.0, 3.0)
N_FEATURES, N_NODES, N_BINS = 6, 4, 13  # 12 value bins, then the missing bin
# features 1, 3 and 4 categorical: 12 categories (sets), 3 (one against the
# rest) and 7 (sets; bins 7.. always empty)
CATEGORIES = {1: 12, 3: 3, 4: 7}


def _histograms(rng, n_outputs):
    """``(F, N, B, 2K)`` float32 running sums of small integers (gradients
    in -3..3, hessians in 0..2); categories past a feature's count empty;
    at random a categorical feature's node with one category only (all its
    rows in it), some missing bins empty, node 0 empty of hessian."""
    shape = (N_FEATURES, N_NODES, N_BINS, n_outputs)
    grad = rng.integers(-3, 4, shape).astype(np.float32)
    hess = rng.integers(0, 3, shape).astype(np.float32)
    hess[rng.random(shape) < 0.3] = 0.0  # missing categories
    for feature, n_categories in CATEGORIES.items():
        hess[feature, :, n_categories:-1] = 0.0
        for node in np.flatnonzero(rng.random(N_NODES) < 0.3):
            only = rng.integers(0, n_categories)
            keep = hess[feature, node, only].copy()
            hess[feature, node, :-1] = 0.0
            hess[feature, node, only] = np.maximum(keep, 1.0)
    grad[3] *= 3.0  # (so that the one-against-the-rest feature wins at times)
    if n_outputs == 2:  # a present category whose key G / (H + cat_smooth) is +-inf or NaN
        for feature in (1, 3):
            for node in range(N_NODES):
                category = rng.integers(0, CATEGORIES[feature])
                hess[feature, node, category] = (-1.0, 3.0)  # (cat_smooth 1)
                grad[feature, node, category] = (rng.integers(-1, 2), 3.0)
    grad[hess == 0.0] = 0.0  # (a row brings both)
    empty_missing = rng.random((N_FEATURES, N_NODES)) < 0.5
    grad[:, :, -1][empty_missing] = 0.0
    hess[:, :, -1][empty_missing] = 0.0
    if rng.random() < 0.3:
        grad[:, 0] = hess[:, 0] = 0.0
    plain = np.concatenate([grad, hess], axis=-1)
    running = plain.copy()
    running[:, :, :-1] = np.cumsum(plain[:, :, :-1], axis=2, dtype=np.float32)
    return running


def _search(max_cat_threshold):
    settings = CategoricalSettings(
        columns=tuple(CATEGORIES),
        n_categories=tuple(CATEGORIES.values()),
        max_cat_to_onehot=4,
        max_cat_threshold=max_cat_threshold,
        cat_smooth=1.0,
    )
    return categorical_search(settings, N_FEATURES, None, native_order=True)


def _rule_arguments(rule, rng):
    if rule == "counted":
        return {"rows_per_hessian": jnp.float32(1.0)}
    if rule == "estimated":
        return {"node_rows": jnp.asarray(rng.integers(0, 12, N_NODES), jnp.int32)}
    return {}


@pytest.mark.parametrize(
    ("n_outputs", "rule", "max_cat_threshold"),
    [(1, "none", 32), (1, "counted", 2), (1, "estimated", 3), (2, "estimated", 2)],
)
def test_categorical_choice_equals_find_best_splits(n_outputs, rule, max_cat_threshold):
    reg_lambda, min_child_weight, min_split_gain, least_rows = SETTINGS
    least_rows = least_rows if rule != "none" else 0.0
    search = _search(max_cat_threshold)
    assert bool(search.one_hot[3]) and not bool(search.one_hot[1])

    def both(hist, mask, rule_arguments):
        common = (n_outputs, reg_lambda, min_child_weight, min_split_gain, mask)
        options = {"min_child_samples": least_rows, "categorical": search, **rule_arguments}
        xla = find_best_splits(hist, *common, cumulative=True, **options)
        return xla, native_best_splits(hist, *common, **options)

    both = jax.jit(both)
    rng = np.random.default_rng(n_outputs * 100 + len(rule) * 10 + max_cat_threshold)
    chosen = set()
    for draw in range(16):
        hist = _histograms(rng, n_outputs)
        mask = rng.random(N_FEATURES) < 0.8 if draw % 3 else np.ones(N_FEATURES, bool)
        xla, native = both(jnp.asarray(hist), jnp.asarray(mask), _rule_arguments(rule, rng))
        for field in FIELDS:
            np.testing.assert_array_equal(
                np.asarray(getattr(native, field)), np.asarray(getattr(xla, field)), err_msg=field
            )
        split = np.asarray(native.do_split)
        chosen.update(np.asarray(native.feature)[split].tolist())
        chosen.add(-1 if (~split).any() else -2)
    # both outcomes compared, and splits on set, one-hot and numeric features
    assert -1 in chosen and {1, 3} <= chosen and chosen & {0, 2, 5}


def test_categorical_sets_are_sorted_prefixes():
    """One node, one categorical feature: categories 0..3 with gradients
    +2, -2, +1, -1 (hessian 1 each, none missing): sorted by G / (H + 1)
    (cat_smooth 1) the order is 1, 3, 2, 0, and the best set {1, 3} (the
    negative gradients) against {0, 2}, a gain of 0.5 (9/3 + 9/3 - 0)."""
    hist = np.zeros((1, 1, 5, 2), np.float32)
    hist[0, 0, :4, 0] = np.cumsum([2.0, -2.0, 1.0, -1.0])
    hist[0, 0, :4, 1] = np.cumsum([1.0, 1.0, 1.0, 1.0])
    settings = CategoricalSettings(columns=(0,), n_categories=(4,), max_cat_to_onehot=2)
    search = categorical_search(settings, 1, None, native_order=True)
    choice = native_best_splits(jnp.asarray(hist), 1, 1.0, 0.0, 0.0, categorical=search)
    assert bool(choice.do_split[0]) and int(choice.threshold_bin[0]) == 1
    assert int(choice.category_left[0, 0]) == 0b1010  # bins 1 and 3
    np.testing.assert_allclose(float(choice.gain[0]), 0.5 * (9 / 3 + 9 / 3))


def test_a_category_whose_key_is_nan_sorts_after_the_empty_ones():
    """Two outputs, a present category whose first hessian is -cat_smooth
    (its key 0 / 0): sorted after every empty bin, as ``argsort`` sorts NaN,
    so the one-against-the-rest candidate at its place is an empty bin (not
    allowed), not it."""
    plain = np.zeros((1, 1, 6, 4), np.float32)  # 5 value bins, [g0, g1, h0, h1]
    plain[0, 0, 0] = (0.0, 30.0, -1.0, 3.0)  # present: hessians sum to 2
    plain[0, 0, 1] = (1.0, -1.0, 1.0, 1.0)
    plain[0, 0, 2] = (-1.0, 1.0, 1.0, 1.0)
    hist = plain.copy()
    hist[:, :, :-1] = np.cumsum(plain[:, :, :-1], axis=2)
    settings = CategoricalSettings((0,), (3,), max_cat_to_onehot=4, cat_smooth=1.0)
    search = categorical_search(settings, 1, None, native_order=True)
    arguments = (jnp.asarray(hist), 2, 1.0, 1e-3, 0.0)
    xla = find_best_splits(*arguments, cumulative=True, categorical=search)
    native = native_best_splits(*arguments, categorical=search)
    for field in FIELDS:
        np.testing.assert_array_equal(
            np.asarray(getattr(native, field)), np.asarray(getattr(xla, field)), err_msg=field
        )
    assert int(native.category_left[0, 0]) == 0b10  # category 1 alone


def test_covers_categorical_only_sorted_natively():
    natively = _search(32)
    assert covers("native", 1, None, natively, quantised=False)
    assert not covers("native", 1, None, natively._replace(native_order=False), quantised=False)
    assert not covers("native", 1, object(), natively, quantised=False)  # constraints
    assert not covers("native", 1, None, natively, quantised=True)


def _fit(native_search, monkeypatch, X, y):
    """A categorical fit (its programs compiled afresh) with the native
    split search, or with the XLA search on the same kernels."""
    clear_compiled_programs()
    searched = []  # (categorical features searched natively)
    native = tree_module.native_best_splits

    def recorded(*arguments, categorical=None, **options):
        searched.append(categorical is not None)
        return native(*arguments, categorical=categorical, **options)

    monkeypatch.setattr(tree_module, "native_best_splits", recorded)
    if not native_search:
        monkeypatch.setattr(tree_module, "covers", lambda *arguments: False)
    settings = {"n_estimators": 3, "max_depth": 3, "cat_smooth": 3.0, "max_cat_to_onehot": 5}
    model = jb.Booster(categorical_features=[1, 2], min_child_samples=30, **settings).fit(X, y)
    monkeypatch.undo()
    clear_compiled_programs()
    return model, any(searched)


def test_a_fit_with_the_native_categorical_search_is_the_xla_searchs(monkeypatch):
    """The same forest, bit for bit, from either search on the native
    kernels (a categorical column of 40 codes, one of 5: one against the
    rest, missing values in both)."""
    rng = np.random.default_rng(3)
    n_rows = 1500
    codes = rng.integers(0, 40, n_rows).astype(np.float32)
    few = rng.integers(0, 5, n_rows).astype(np.float32)
    codes[rng.random(n_rows) < 0.05] = np.nan
    few[rng.random(n_rows) < 0.05] = np.nan
    numeric = rng.normal(size=(n_rows, 2)).astype(np.float32)
    X = np.column_stack([numeric[:, 0], codes, few, numeric[:, 1]])
    y = rng.normal(size=40)[np.nan_to_num(codes).astype(int)] + (few == 2) + numeric[:, 0]
    xla, xla_native = _fit(False, monkeypatch, X, y)
    native, searched_natively = _fit(True, monkeypatch, X, y)
    assert searched_natively and not xla_native
    assert np.any(native.forest_.category_left != 0)  # some split is on a set
    for name in native.forest_._fields:
        np.testing.assert_array_equal(
            np.asarray(getattr(native.forest_, name)),
            np.asarray(getattr(xla.forest_, name)),
            err_msg=name,
        )

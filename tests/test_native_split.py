"""Tests of ``jaxboost.engine.native_split``: the native search chooses, bit
for bit, what ``find_best_splits`` and ``find_best_packed_splits`` choose, on
histograms of small integers (many exactly tied gains), with missing bins,
nodes of zero hessian, masked features and children at the row rule's limit."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.engine import packed_split
from jaxboost.engine.native_split import covers, native_best_splits
from jaxboost.engine.packed_split import find_best_packed_splits, packed_bins
from jaxboost.engine.split import find_best_splits
from jaxboost.kernels.native_library import native_available

pytestmark = pytest.mark.skipif(
    not native_available(warn=False), reason="the native kernels did not build"
)

FIELDS = ("feature", "threshold_bin", "missing_left", "gain", "do_split")
# (reg_lambda, min_child_weight, min_split_gain, min_child_samples)
SETTINGS = (1.0, 1e-3, 0.0, 3.0)


def _plain_histograms(rng, n_features, n_nodes, n_bins, n_outputs, used=None):
    """``(F, N, B, 2K)`` float32 sums of small integers: gradients in -3..3,
    hessians in 0..2 (ties everywhere); some missing bins and the node 0 of
    every other draw empty of hessian; bins past ``used[f]`` empty."""
    shape = (n_features, n_nodes, n_bins, n_outputs)
    grad = rng.integers(-3, 4, shape).astype(np.float32)
    hess = rng.integers(0, 3, shape).astype(np.float32)
    empty_missing = rng.random((n_features, n_nodes)) < 0.5
    grad[:, :, -1][empty_missing] = 0.0
    hess[:, :, -1][empty_missing] = 0.0
    if rng.random() < 0.5:
        hess[:, 0] = 0.0
    if used is not None:
        for feature, n_used in enumerate(used):
            grad[feature, :, n_used:-1] = 0.0
            hess[feature, :, n_used:-1] = 0.0
    return np.concatenate([grad, hess], axis=-1)


def _running(plain):
    """The value bins as running sums (the native histogram kernel's layout)."""
    hist = plain.copy()
    hist[:, :, :-1] = np.cumsum(plain[:, :, :-1], axis=2, dtype=np.float32)
    return hist


def _same(expected, got):
    for field in FIELDS:
        np.testing.assert_array_equal(
            np.asarray(getattr(got, field)), np.asarray(getattr(expected, field)), err_msg=field
        )


def _rule_arguments(rule, rng, n_nodes):
    """The row rule's keyword arguments: none, counted rows (one row per unit
    of hessian), or each node's rows (estimated), near the limit of 3."""
    if rule == "counted":
        return {"rows_per_hessian": jnp.float32(1.0)}
    if rule == "estimated":
        return {"node_rows": jnp.asarray(rng.integers(0, 12, n_nodes), jnp.int32)}
    return {}


@pytest.mark.parametrize(
    ("n_outputs", "rule"), [(1, "none"), (1, "counted"), (1, "estimated"), (3, "estimated")]
)
def test_padded_choice_equals_find_best_splits(n_outputs, rule):
    n_features, n_nodes, n_bins = 5, 4, 9
    reg_lambda, min_child_weight, min_split_gain, least_rows = SETTINGS
    least_rows = least_rows if rule != "none" else 0.0

    def both(hist, mask, rule_arguments):
        common = (n_outputs, reg_lambda, min_child_weight, min_split_gain, mask)
        options = {"min_child_samples": least_rows, **rule_arguments}
        xla = find_best_splits(hist, *common, cumulative=True, **options)
        return xla, native_best_splits(hist, *common, **options)

    both = jax.jit(both)
    rng = np.random.default_rng(n_outputs * 10 + len(rule))
    n_split = n_unsplit = 0
    for draw in range(12):
        plain = _plain_histograms(rng, n_features, n_nodes, n_bins, n_outputs)
        if rule == "counted":  # a further channel (a count), which neither search reads
            plain = np.concatenate([plain, rng.random((*plain.shape[:3], 1), np.float32)], -1)
        mask = rng.random(n_features) < 0.8 if draw % 3 else np.ones(n_features, bool)
        xla, native = both(
            jnp.asarray(_running(plain)), jnp.asarray(mask), _rule_arguments(rule, rng, n_nodes)
        )
        _same(xla, native)
        n_split += int(np.sum(np.asarray(native.do_split)))
        n_unsplit += int(np.sum(~np.asarray(native.do_split)))
    assert n_split > 0 and n_unsplit > 0  # (both outcomes compared)


def test_padded_choice_takes_the_first_of_exact_ties():
    """Two features with the same histograms: the first one is chosen, at
    its lowest threshold of the tied ones, and so the native search."""
    one = np.zeros((1, 1, 5, 2), np.float32)
    one[0, 0, :, 0] = [2.0, 0.0, 0.0, -2.0, 0.0]  # bins 1 and 2 empty: thresholds 0..2 tie
    one[0, 0, :, 1] = [1.0, 0.0, 0.0, 1.0, 0.0]
    hist = jnp.asarray(_running(np.concatenate([one, one], axis=0)))
    native = native_best_splits(hist, 1, *SETTINGS[:3])
    _same(find_best_splits(hist, 1, *SETTINGS[:3], cumulative=True), native)
    assert (int(native.feature[0]), int(native.threshold_bin[0])) == (0, 0)
    assert not bool(native.missing_left[0])
    # 0.5 (4 / 2 + 4 / 2 - 0): each side's G^2 / (H + lambda)
    assert float(native.gain[0]) == 2.0


@pytest.mark.parametrize(("n_outputs", "rule"), [(1, "none"), (1, "estimated"), (2, "estimated")])
def test_packed_choice_equals_find_best_packed_splits(n_outputs, rule, monkeypatch):
    monkeypatch.setattr(packed_split, "_PACKED_LEAST", 0)  # a small table, packed
    n_features, n_nodes, n_value_bins = 6, 3, 63
    rng = np.random.default_rng(7)
    used = rng.integers(1, 10, n_features)
    edges = np.full((n_features, n_value_bins), np.inf, np.float32)
    for feature, n_used in enumerate(used):
        edges[feature, : n_used - 1] = np.arange(n_used - 1)
    packed = packed_bins(edges)
    assert packed is not None
    packed = jax.tree.map(jnp.asarray, packed)
    n_slots = packed.feature.shape[0] + n_features
    reg_lambda, min_child_weight, min_split_gain, least_rows = SETTINGS

    def both(hist, mask, rule_arguments):
        common = (n_outputs, reg_lambda, min_child_weight, min_split_gain, mask)
        options = {"min_child_samples": least_rows, **rule_arguments}
        xla = find_best_packed_splits(hist, packed, *common, **options)
        return xla, native_best_splits(hist, *common, packed=packed, **options)

    both = jax.jit(both)
    for draw in range(12):
        plain = _plain_histograms(rng, n_features, n_nodes, n_value_bins + 1, n_outputs, used)
        running = _running(plain)
        hist = np.zeros((n_slots, n_nodes, 2 * n_outputs), np.float32)
        for feature, n_used in enumerate(used):
            start = int(packed.slot_start[feature])
            hist[start : start + n_used] = running[feature, :, :n_used].transpose(1, 0, 2)
            hist[start + n_used] = running[feature, :, -1]
        if draw % 2:  # no missing values at all: the XLA search's one direction
            for feature in range(n_features):
                hist[int(packed.slot_start[feature + 1]) - 1] = 0.0
        mask = rng.random(n_features) < 0.8
        xla, native = both(
            jnp.asarray(hist), jnp.asarray(mask), _rule_arguments(rule, rng, n_nodes)
        )
        _same(xla, native)


def test_covers_only_what_it_equals():
    assert covers("native", 1, None, None, quantised=False)
    assert not covers("packed", 1, None, None, quantised=False)  # XLA's sums
    assert not covers("native", 1, None, None, quantised=True)
    assert not covers("native", 17, None, None, quantised=False)  # summed by XLA's reduction
    assert not covers("native", 1, object(), None, quantised=False)  # constraints
    # categorical features sorted by XLA (tests/test_native_split_categorical.py: natively)
    unsorted = SimpleNamespace(native_order=False)
    assert not covers("native", 1, None, unsorted, quantised=False)

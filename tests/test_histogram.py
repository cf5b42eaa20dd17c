"""Tests of the histogram kernels against numpy loops, ``np.add.at`` and each other.

Every test runs on each kernel (``jaxboost.kernels.histogram_kernels.HISTOGRAM_KERNELS``): the
plain reference, the packed CPU kernel and the native (C++) CPU kernel, whose
levels below the root come from their parents by subtraction."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from native_levels import native_children

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.engine.binning import TILE_ROWS, tile_bins
from jaxboost.kernels.histogram_kernels import HISTOGRAM_KERNELS
from jaxboost.kernels.interfaces import LevelSplit, LiveSlots


def _bins_for(kernel, bins):
    """``bins`` (as the reference takes them) as ``kernel`` reads them: the
    native kernel by tiles of rows."""
    return tile_bins(bins) if kernel is HISTOGRAM_KERNELS["native"] else bins


def _one_level(kernel, bins, node_of_row, row_stats, n_nodes, n_bins):
    """A level summed afresh (no parent): the kernel's plain sums, as float32
    (the native kernel's float64 sums, rounded: its float32 result holds
    running sums, checked on their own below)."""
    bins = _bins_for(kernel, bins)
    hist, carry, _ = kernel.level(bins, node_of_row, row_stats, n_nodes, n_bins, None, None)
    return carry.astype(jnp.float32) if kernel.cumulative else hist


_BUILDERS = {
    name: jax.jit(functools.partial(_one_level, kernel), static_argnames=("n_nodes", "n_bins"))
    for name, kernel in HISTOGRAM_KERNELS.items()
}


def _reference_add_at(bins, node_of_row, row_stats, n_nodes, n_bins):
    n_features = bins.shape[0]
    hist = np.zeros((n_features, n_nodes, n_bins, row_stats.shape[1]), np.float64)
    for feature in range(n_features):
        np.add.at(hist[feature], (node_of_row, bins[feature].astype(np.int64)), row_stats)
    return hist


def _reference_loops(bins, node_of_row, row_stats, n_nodes, n_bins):
    n_features, n_rows = bins.shape
    hist = np.zeros((n_features, n_nodes, n_bins, row_stats.shape[1]), np.float64)
    for feature in range(n_features):
        for row in range(n_rows):
            hist[feature, node_of_row[row], bins[feature, row]] += row_stats[row]
    return hist


def _random_level(seed, n_features, n_rows, n_nodes, n_bins, n_stats):
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, n_bins, size=(n_features, n_rows)).astype(np.uint8)
    node_of_row = rng.integers(0, n_nodes, size=n_rows).astype(np.int32)
    row_stats = rng.normal(size=(n_rows, n_stats)).astype(np.float32)
    return bins, node_of_row, row_stats


def _run(build, bins, node_of_row, row_stats, n_nodes, n_bins):
    hist = build(
        jnp.asarray(bins),
        jnp.asarray(node_of_row),
        jnp.asarray(row_stats),
        n_nodes=n_nodes,
        n_bins=n_bins,
    )
    return np.asarray(hist)


@pytest.fixture(params=sorted(_BUILDERS))
def run(request):
    """``_run`` with one of the kernels."""
    return functools.partial(_run, _BUILDERS[request.param])


@pytest.mark.parametrize(
    "n_features, n_rows, n_nodes, n_bins, n_stats",
    [(1, 1, 1, 2, 1), (4, 200, 4, 9, 3), (3, 150, 8, 17, 7), (2, 300, 1, 256, 3)],
)
def test_matches_numpy_triple_loop(run, n_features, n_rows, n_nodes, n_bins, n_stats):
    bins, node_of_row, row_stats = _random_level(
        n_rows, n_features, n_rows, n_nodes, n_bins, n_stats
    )
    hist = run(bins, node_of_row, row_stats, n_nodes, n_bins)
    assert hist.shape == (n_features, n_nodes, n_bins, n_stats)
    assert hist.dtype == np.float32
    reference = _reference_loops(bins, node_of_row, row_stats, n_nodes, n_bins)
    np.testing.assert_allclose(hist, reference, rtol=1e-5, atol=1e-5)


def test_matches_add_at_on_a_larger_level(run):
    n_features, n_rows, n_nodes, n_bins, n_stats = 6, 5000, 16, 33, 5
    bins, node_of_row, row_stats = _random_level(0, n_features, n_rows, n_nodes, n_bins, n_stats)
    hist = run(bins, node_of_row, row_stats, n_nodes, n_bins)
    reference = _reference_add_at(bins, node_of_row, row_stats, n_nodes, n_bins)
    np.testing.assert_allclose(hist, reference, rtol=1e-5, atol=1e-4)


def test_integer_stats_are_exact_and_counts_add_up(run):
    rng = np.random.default_rng(5)
    n_features, n_rows, n_nodes, n_bins = 3, 400, 4, 12
    bins, node_of_row, _ = _random_level(5, n_features, n_rows, n_nodes, n_bins, 1)
    # empty a node and a bin, so zeros are checked too
    node_of_row[node_of_row == 2] = 3
    bins[bins == 5] = 6
    row_stats = np.stack([rng.integers(-5, 6, size=n_rows), np.ones(n_rows)], axis=1).astype(
        np.float32
    )
    hist = run(bins, node_of_row, row_stats, n_nodes, n_bins)
    reference = _reference_add_at(bins, node_of_row, row_stats, n_nodes, n_bins)
    np.testing.assert_array_equal(hist, reference)
    assert np.all(hist[:, 2] == 0)
    assert np.all(hist[:, :, 5] == 0)
    # every feature's histogram of a node holds all the node's rows
    counts = np.bincount(node_of_row, minlength=n_nodes)
    np.testing.assert_array_equal(hist[..., 1].sum(axis=2), np.broadcast_to(counts, (3, 4)))


def test_row_order_does_not_matter(run):
    n_features, n_rows, n_nodes, n_bins, n_stats = 3, 257, 4, 10, 3
    bins, node_of_row, row_stats = _random_level(9, n_features, n_rows, n_nodes, n_bins, n_stats)
    order = np.random.default_rng(9).permutation(n_rows)
    np.testing.assert_allclose(
        run(bins, node_of_row, row_stats, n_nodes, n_bins),
        run(bins[:, order], node_of_row[order], row_stats[order], n_nodes, n_bins),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("n_stats", [1, 2, 3, 4, 5])
def test_the_packed_kernel_equals_the_reference_exactly(n_stats):
    # the same float32 additions in the same row order, odd and even columns
    level = _random_level(11, 5, 3000, 8, 256, n_stats)
    reference = _run(_BUILDERS["reference"], *level, n_nodes=8, n_bins=256)
    packed = _run(_BUILDERS["packed"], *level, n_nodes=8, n_bins=256)
    np.testing.assert_array_equal(packed, reference)


def _with_routing_feature(bins, node_of_row):
    """``bins`` with one more feature, the last bit of ``node_of_row``: a
    split on it at bin 0 with missing values right sends the rows of node
    ``k // 2`` to ``node_of_row`` (bin 1 is a value bin above the threshold,
    or the missing bin when there are 2 bins)."""
    routing = (np.asarray(node_of_row) % 2).astype(np.uint8)[None]
    return np.concatenate([np.asarray(bins), routing])


def _native_children(bins, node_of_row, row_stats, n_nodes, n_bins):
    """The native kernel's level of ``n_nodes`` from its parents' sums (node
    ``k``'s parent is ``k // 2``), the rows routed in the same call by a
    routing feature (``_with_routing_feature``, whose bins must end
    ``bins``): the subtraction path.  Returns its sums and ``node_of_row``."""
    kernel = HISTOGRAM_KERNELS["native"]
    bins = _bins_for(kernel, bins)
    n_parents = n_nodes // 2
    parent = kernel.level(bins, node_of_row // 2, row_stats, n_parents, n_bins, None, None)[1]
    split = LevelSplit(
        jnp.full(n_parents, bins.shape[0] - 1, jnp.int32),
        jnp.zeros(n_parents, jnp.int32),
        jnp.zeros(n_parents, bool),
        missing_bin=n_bins - 1,
    )
    return kernel.level(bins, node_of_row // 2, row_stats, n_nodes, n_bins, parent, split)


def _running_sums(hist: np.ndarray) -> np.ndarray:
    """Value bins summed from bin 0 (axis 2), the missing bin (last) as it is."""
    return np.concatenate([np.cumsum(hist[:, :, :-1], axis=2), hist[:, :, -1:]], axis=2)


@pytest.mark.parametrize(
    "n_features, n_rows, n_nodes, n_bins, n_stats",
    [
        (1, 1, 2, 2, 1),
        (5, 3000, 2, 256, 2),
        (7, 2000, 16, 33, 2),
        (3, 500, 8, 17, 5),
        (3, 700, 32, 17, 5),  # float sums in row order from 16 nodes
        (5, 3000, 4, 256, 3),  # with a row count (min_child_samples): specialised
        (6, TILE_ROWS + 300, 8, 64, 3),
        # tiles of rows: two whole and a part, and exactly two
        (5, 2 * TILE_ROWS + 300, 8, 64, 2),
        (3, 2 * TILE_ROWS + 300, 16, 32, 2),
        (2, 2 * TILE_ROWS, 4, 16, 2),
    ],
)
def test_native_children_by_subtraction_match_the_reference(
    n_features, n_rows, n_nodes, n_bins, n_stats
):
    bins, node_of_row, row_stats = _random_level(3, n_features, n_rows, n_nodes, n_bins, n_stats)
    bins = _with_routing_feature(bins, node_of_row)
    hist, exact, routed = jax.jit(_native_children, static_argnames=("n_nodes", "n_bins"))(
        bins, node_of_row, row_stats, n_nodes=n_nodes, n_bins=n_bins
    )
    np.testing.assert_array_equal(np.asarray(routed), node_of_row)
    reference = _reference_add_at(bins, node_of_row, row_stats, n_nodes, n_bins)
    assert hist.dtype == np.float32 and exact.dtype == np.float64
    np.testing.assert_allclose(np.asarray(exact), reference, rtol=1e-9, atol=1e-9)
    # the float32 result: running sums over the value bins, rounded once
    np.testing.assert_allclose(np.asarray(hist), _running_sums(reference), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("n_rows", [900, TILE_ROWS + 700])
def test_native_children_route_their_rows_as_route_rows(quantised, n_rows):
    # random splits of 4 parents, missing values (the last bin) both ways: the
    # children kernel's routing equals the reference's, and it sums the rows
    # where they went
    from jaxboost.kernels.histogram_kernels import route_rows

    rng = np.random.default_rng(n_rows)
    n_features, n_bins, n_parents = 5, 17, 4
    bins = rng.integers(0, n_bins, size=(n_features, n_rows)).astype(np.uint8)
    parents = rng.integers(0, n_parents, size=n_rows).astype(np.int32)
    split = LevelSplit(
        jnp.asarray(rng.integers(0, n_features, n_parents), jnp.int32),
        jnp.asarray(rng.integers(0, n_bins - 1, n_parents), jnp.int32),
        jnp.asarray([True, False, True, False]),
        missing_bin=n_bins - 1,
    )
    stats = rng.integers(-3, 4, size=(n_rows, 2)).astype(np.int32)
    tiled = tile_bins(bins)

    children = functools.partial(
        native_children, split=split, n_parents=n_parents, n_bins=n_bins, quantised=quantised
    )
    _, exact, routed = jax.jit(children)(tiled, parents, stats)
    expected = route_rows(jnp.asarray(bins), jnp.asarray(parents), split)
    np.testing.assert_array_equal(np.asarray(routed), np.asarray(expected))
    reference = _reference_add_at(bins, np.asarray(expected), stats, 2 * n_parents, n_bins)
    sums = _unpacked(exact) if quantised else np.asarray(exact)
    np.testing.assert_array_equal(sums, reference)


@pytest.mark.parametrize("bad", ["node", "feature"])
def test_native_children_reject_parents_or_split_features_out_of_range(bad):
    n_rows, n_bins = 6, 3
    bins = jnp.zeros((2, n_rows), jnp.uint8)
    stats = jnp.ones((n_rows, 2), jnp.float32)
    kernel = HISTOGRAM_KERNELS["native"]
    parent = kernel.level(bins, jnp.zeros(n_rows, jnp.int32), stats, 1, n_bins, None, None)[1]
    parents = jnp.asarray([0, 0, 1, 0, 0, 0] if bad == "node" else [0] * n_rows, jnp.int32)
    feature = jnp.asarray([2 if bad == "feature" else 1], jnp.int32)
    split = LevelSplit(feature, jnp.zeros(1, jnp.int32), jnp.ones(1, bool), missing_bin=2)
    message = "node_of_row out of range" if bad == "node" else "split feature out of range"
    with pytest.raises(Exception, match=message):
        jax.block_until_ready(kernel.level(bins, parents, stats, 2, n_bins, parent, split))


@pytest.mark.parametrize(
    "n_nodes, n_rows", [(1, 700), (4, 700), (1, TILE_ROWS + 5), (4, 3 * TILE_ROWS)]
)
def test_native_root_returns_running_sums_over_value_bins(n_nodes, n_rows):
    bins, node_of_row, row_stats = _random_level(8, 3, n_rows, n_nodes, 20, 2)
    bins[0, :50] = 19  # the missing bin (the last) is not part of the running sums
    hist, exact, _ = jax.jit(
        HISTOGRAM_KERNELS["native"].level, static_argnames=("n_nodes", "n_bins", "parent", "split")
    )(tile_bins(bins), node_of_row, row_stats, n_nodes=n_nodes, n_bins=20, parent=None, split=None)
    reference = _reference_add_at(bins, node_of_row, row_stats, n_nodes, 20)
    np.testing.assert_allclose(np.asarray(exact), reference, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(hist), _running_sums(reference), rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(
        np.asarray(hist)[..., -1, :], reference[..., -1, :].astype(np.float32)
    )


def test_native_subtraction_of_lopsided_and_empty_children():
    # one parent keeps all its rows left, one all right, one splits 1 : 99;
    # the summed side is the smaller one, and an empty child is exactly 0
    rng = np.random.default_rng(4)
    n_rows, n_bins = 300, 16
    bins = rng.integers(0, n_bins, size=(2, n_rows)).astype(np.uint8)
    parent_of_row = np.repeat(np.arange(3), 100).astype(np.int32)
    right = np.zeros(n_rows, bool)
    right[100:200] = True
    right[200] = True
    node_of_row = (2 * parent_of_row + right).astype(np.int32)
    row_stats = np.stack([rng.integers(-4, 5, n_rows), np.ones(n_rows)], 1).astype(np.float32)
    bins = _with_routing_feature(bins, node_of_row)
    _, exact, _ = _native_children(
        jnp.asarray(bins), jnp.asarray(node_of_row), jnp.asarray(row_stats), 6, n_bins
    )
    reference = _reference_add_at(bins, node_of_row, row_stats, 6, n_bins)
    np.testing.assert_array_equal(np.asarray(exact), reference)
    assert np.all(np.asarray(exact)[:, [1, 2]] == 0)


@pytest.mark.parametrize(
    "nodes, n_nodes",
    [([0, 1, 2, 1], 2), ([0, -1, 0, 0], 2), ([0, 0, 0, 0, 0, 1], 1), ([-1, 0, 0, 0, 0, 0], 1)],
)
def test_native_kernel_rejects_nodes_out_of_range(nodes, n_nodes):
    n_rows = len(nodes)
    bins = jnp.zeros((1, n_rows), jnp.uint8)
    stats = jnp.ones((n_rows, 2), jnp.float32)
    node_of_row = jnp.asarray(nodes, jnp.int32)
    with pytest.raises(Exception, match="node_of_row out of range"):
        jax.block_until_ready(
            HISTOGRAM_KERNELS["native"].level(bins, node_of_row, stats, n_nodes, 3, None, None)
        )


# -- quantised statistics (jaxboost.engine.quantise): integer sums, scaled ----------------


def _random_quantised(seed, n_features, n_rows, n_nodes, n_bins, n_pairs, top=4):
    """A level with ``(n_rows, 2 n_pairs)`` int32 ``[gradients, hessians]``,
    hessians negative too, and a ``(2 n_pairs,)`` scale."""
    bins, node_of_row, _ = _random_level(seed, n_features, n_rows, n_nodes, n_bins, 1)
    rng = np.random.default_rng(seed)
    stats = rng.integers(-top, top + 1, size=(n_rows, 2 * n_pairs)).astype(np.int32)
    scale = rng.uniform(0.01, 3.0, size=2 * n_pairs).astype(np.float32)
    return bins, node_of_row, stats, scale


def _unpacked(exact: np.ndarray) -> np.ndarray:
    """The native kernel's packed int64 sums ``(..., K)`` as ``(..., 2K)``
    integer ``[gradients, hessians]``."""
    exact = np.asarray(exact, np.int64)
    low = (exact & 0xFFFFFFFF).astype(np.uint32).astype(np.int32).astype(np.int64)
    return np.concatenate([(exact - low) >> 32, low], axis=-1)


@functools.partial(jax.jit, static_argnames=("kernel", "n_nodes", "n_bins", "parent_nodes"))
def _quantised_level(kernel, bins, node_of_row, stats, scale, n_nodes, n_bins, parent_nodes):
    """A quantised level: afresh, or (``parent_nodes``) from its parents' sums."""
    level = HISTOGRAM_KERNELS[kernel].level_quantised
    bins = _bins_for(HISTOGRAM_KERNELS[kernel], bins)
    if not parent_nodes:
        return level(bins, node_of_row, stats, scale, n_nodes, n_bins, None, None)[:2]
    # routed by the routing feature, the last (_with_routing_feature)
    parents = node_of_row // 2
    parent = level(bins, parents, stats, scale, parent_nodes, n_bins, None, None)[1]
    split = LevelSplit(
        jnp.full(parent_nodes, bins.shape[0] - 1, jnp.int32),
        jnp.zeros(parent_nodes, jnp.int32),
        jnp.zeros(parent_nodes, bool),
        missing_bin=n_bins - 1,
    )
    return level(bins, parents, stats, scale, n_nodes, n_bins, parent, split)[:2]


@pytest.mark.parametrize(
    "n_features, n_rows, n_nodes, n_bins, n_pairs, from_parents",
    [
        (1, 1, 1, 2, 1, False),
        (5, 3000, 1, 256, 1, False),
        (4, 2000, 4, 33, 1, False),
        (6, 3000, 2, 256, 1, True),
        (7, 2000, 16, 33, 1, True),
        (3, 800, 8, 17, 3, True),
        (5, TILE_ROWS + 1000, 1, 256, 1, False),
        (5, 2 * TILE_ROWS + 1000, 32, 64, 1, True),
    ],
)
def test_native_quantised_sums_are_exact(
    n_features, n_rows, n_nodes, n_bins, n_pairs, from_parents
):
    bins, node_of_row, stats, scale = _random_quantised(
        n_rows + n_nodes, n_features, n_rows, n_nodes, n_bins, n_pairs
    )
    if from_parents:
        bins = _with_routing_feature(bins, node_of_row)
        n_features += 1
    hist, exact = _quantised_level(
        "native", bins, node_of_row, stats, scale, n_nodes, n_bins, n_nodes // 2 * from_parents
    )
    reference = _reference_add_at(bins, node_of_row, stats.astype(np.int64), n_nodes, n_bins)
    assert exact.shape == (n_features, n_nodes, n_bins, n_pairs) and exact.dtype == np.int64
    np.testing.assert_array_equal(_unpacked(exact), reference)
    assert hist.dtype == np.float32
    np.testing.assert_allclose(
        np.asarray(hist), _running_sums(reference) * scale, rtol=1e-6, atol=1e-5
    )


@pytest.mark.parametrize("kernel", ["reference", "packed"])
def test_xla_quantised_sums_are_the_scaled_integer_sums(kernel):
    bins, node_of_row, stats, scale = _random_quantised(21, 4, 2500, 8, 40, 2)
    hist, _ = _quantised_level(kernel, bins, node_of_row, stats, scale, 8, 40, 0)
    reference = _reference_add_at(bins, node_of_row, stats.astype(np.int64), 8, 40)
    np.testing.assert_allclose(np.asarray(hist), reference * scale, rtol=1e-6, atol=1e-6)


def test_native_quantised_sums_at_the_limits_of_the_packed_halves():
    # gradient sums near -2^31 and hessian sums near 2^31 - 1 in one word, and
    # hessians negative (the borrow from the gradient half): still exact
    n_rows = 4096
    bins = np.zeros((1, n_rows), np.uint8)
    stats = np.empty((n_rows, 2), np.int32)
    stats[:, 0] = -(2**31 // n_rows)
    stats[:, 1] = 2**31 // n_rows - 1
    stats[::2, 1] = -5  # half the hessians negative
    node_of_row = np.zeros(n_rows, np.int32)
    _, exact = _quantised_level("native", bins, node_of_row, stats, np.ones(2, np.float32), 1, 2, 0)
    np.testing.assert_array_equal(_unpacked(exact)[0, 0, 0], stats.astype(np.int64).sum(axis=0))


@pytest.mark.parametrize("heavy", ["left", "right"])
def test_native_quantised_children_sum_the_lighter_child_even_with_more_rows(heavy):
    # quantised children are summed for the child of smaller hessian sum (known
    # from the parent's histogram before the rows are routed), here the one
    # with nine tenths of the rows; the other is the parent minus it, exactly
    n_rows, n_bins = 3000, 64
    bins, node_of_row, stats, scale = _random_quantised(31, 4, n_rows, 2, n_bins, 1)
    many = np.arange(n_rows) % 10 != 0
    node_of_row[:] = np.where(many, 0, 1) if heavy == "right" else np.where(many, 1, 0)
    stats[:, 1] = np.where(many, 0, 4)  # the few rows hold all the hessian
    bins = _with_routing_feature(bins, node_of_row)
    hist, exact = _quantised_level("native", bins, node_of_row, stats, scale, 2, n_bins, 1)
    reference = _reference_add_at(bins, node_of_row, stats.astype(np.int64), 2, n_bins)
    np.testing.assert_array_equal(_unpacked(exact), reference)
    np.testing.assert_allclose(
        np.asarray(hist), _running_sums(reference) * scale, rtol=1e-6, atol=1e-5
    )


@pytest.mark.parametrize("heavy", ["left", "right"])
def test_native_float_children_where_few_rows_hold_the_hessian(heavy):
    # float children too are summed for the child of smaller hessian sum,
    # here the one with nine tenths of the rows (the other is the parent minus
    # it, to float64 rounding): the sums are the same either way
    rng = np.random.default_rng(32)
    n_rows, n_bins = 3000, 64
    bins = rng.integers(0, n_bins - 1, size=(4, n_rows)).astype(np.uint8)
    many = np.arange(n_rows) % 10 != 0
    node_of_row = (np.where(many, 0, 1) if heavy == "right" else np.where(many, 1, 0)).astype(
        np.int32
    )
    gradient = rng.normal(size=n_rows)
    hessian = np.where(many, 1e-3, 4.0)  # the few rows hold nearly all the hessian
    row_stats = np.stack([gradient, hessian], 1).astype(np.float32)
    bins = _with_routing_feature(bins, node_of_row)
    hist, exact, routed = _native_children(
        jnp.asarray(bins), jnp.asarray(node_of_row), jnp.asarray(row_stats), 2, n_bins
    )
    np.testing.assert_array_equal(np.asarray(routed), node_of_row)
    reference = _reference_add_at(bins, node_of_row, row_stats, 2, n_bins)
    np.testing.assert_allclose(np.asarray(exact), reference, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(hist), _running_sums(reference), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("quantised", [False, True])
def test_native_children_beyond_1024_nodes_match_the_reference(quantised):
    # 2048 children (depth 11): routed and counted first, the children with
    # fewer rows summed, listed by groups of 1024 nodes
    n_nodes, n_bins, n_rows = 2048, 8, 7000
    rng = np.random.default_rng(11)
    bins = rng.integers(0, n_bins - 1, size=(2, n_rows)).astype(np.uint8)
    node_of_row = rng.integers(0, n_nodes, n_rows).astype(np.int32)
    bins = _with_routing_feature(bins, node_of_row)
    stats = rng.integers(-3, 4, size=(n_rows, 2)).astype(np.int32)
    if quantised:
        scale = np.ones(2, np.float32)
        _, exact = _quantised_level(
            "native", bins, node_of_row, stats, scale, n_nodes, n_bins, n_nodes // 2
        )
        sums = _unpacked(exact)
    else:
        _, exact, _ = jax.jit(_native_children, static_argnames=("n_nodes", "n_bins"))(
            bins, node_of_row, stats.astype(np.float32), n_nodes=n_nodes, n_bins=n_bins
        )
        sums = np.asarray(exact)
    reference = _reference_add_at(bins, node_of_row, stats.astype(np.int64), n_nodes, n_bins)
    np.testing.assert_array_equal(sums, reference)


# -- the live nodes only (leaf-wise growth, jaxboost.kernels.interfaces.LiveSlots) --------

# a level of 8 nodes whose histograms hold the children of parents 3 and 0 (in
# that order) and a padding pair; the parents' sums lie permuted, parent
# _PARENT_ORDER[s] in slot s, as a level of live nodes leaves them
_LIVE_PARENTS = (3, 0, -1)
_PARENT_ORDER = (2, 0, 3, 1)


def _live_slots() -> LiveSlots:
    slot = [_PARENT_ORDER.index(p) if p >= 0 else 0 for p in _LIVE_PARENTS]
    return LiveSlots(jnp.asarray(_LIVE_PARENTS, jnp.int32), jnp.asarray(slot, jnp.int32))


@functools.partial(jax.jit, static_argnames=("kernel", "n_bins", "quantised"))
def _live_level(kernel, bins, node_of_row, stats, scale, n_bins, quantised):
    """The live level of ``node_of_row``'s 8 nodes, its rows routed from their
    parents by the routing feature (`_with_routing_feature`): ``(hist,
    exact)``, ``exact`` the native kernel's plain sums (None otherwise)."""
    chosen = HISTOGRAM_KERNELS[kernel]
    bins = _bins_for(chosen, bins)
    if quantised:
        level = functools.partial(chosen.level_quantised, scale=scale)
    else:
        level = chosen.level
    parents = node_of_row // 2
    parent = None
    if chosen.cumulative:  # sums children from the parents' (permuted) sums
        parent = level(bins, parents, stats, n_nodes=4, n_bins=n_bins, parent=None, split=None)[1]
        parent = jnp.take(parent, jnp.asarray(_PARENT_ORDER), axis=1)
    split = LevelSplit(
        jnp.full(4, bins.shape[0] - 1, jnp.int32),
        jnp.zeros(4, jnp.int32),
        jnp.zeros(4, bool),
        missing_bin=n_bins - 1,
    )
    hist, exact, routed = level(
        bins,
        parents,
        stats,
        n_nodes=8,
        n_bins=n_bins,
        parent=parent,
        split=split,
        live=_live_slots(),
    )
    return hist, exact, routed


@pytest.mark.parametrize("kernel", ["native", "reference", "packed"])
@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("n_rows", [3000, TILE_ROWS + 500])
def test_live_slots_hold_their_nodes_sums_and_nothing_of_the_others(kernel, quantised, n_rows):
    # the nodes without a slot (2 to 5) hold most rows: summed into any slot,
    # or subtracted from a parent's, they would show
    n_bins = 17
    rng = np.random.default_rng(n_rows)
    node_of_row = rng.choice(8, size=n_rows, p=[0.05, 0.05, 0.2, 0.2, 0.2, 0.2, 0.02, 0.08])
    node_of_row = node_of_row.astype(np.int32)
    bins = rng.integers(0, n_bins, size=(3, n_rows)).astype(np.uint8)
    bins = _with_routing_feature(bins, node_of_row)
    if quantised:
        stats = rng.integers(-4, 5, size=(n_rows, 2)).astype(np.int32)
        scale = np.asarray([0.5, 2.0], np.float32)
    else:
        stats, scale = rng.normal(size=(n_rows, 3)).astype(np.float32), None
    hist, exact, routed = _live_level(
        kernel, bins, node_of_row, stats, scale, n_bins=n_bins, quantised=quantised
    )
    np.testing.assert_array_equal(np.asarray(routed), node_of_row)  # heap nodes
    every_node = _reference_add_at(bins, node_of_row, stats.astype(np.float64), 8, n_bins)
    expected = np.zeros(every_node.shape[:1] + (6,) + every_node.shape[2:])
    expected[:, :4] = every_node[:, [6, 7, 0, 1]]
    if quantised:
        if kernel == "native":
            np.testing.assert_array_equal(_unpacked(exact), expected)
        expected = expected * scale
    elif kernel == "native":
        np.testing.assert_allclose(np.asarray(exact), expected, rtol=1e-9, atol=1e-9)
    if kernel == "native":
        expected = _running_sums(expected)
    # (the XLA kernels sum thousands of rows in float32)
    np.testing.assert_allclose(np.asarray(hist), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "parent_node, parent_slot",
    [([4, 0], [0, 0]), ([1, 1], [0, 1]), ([-2, 0], [0, 0]), ([0, 1], [0, 4])],
)
def test_native_live_slots_reject_nodes_or_slots_out_of_range(parent_node, parent_slot):
    bins = tile_bins(np.zeros((1, 10), np.uint8))
    stats = jnp.ones((10, 2), jnp.float32)
    native = HISTOGRAM_KERNELS["native"]
    parent = native.level(bins, jnp.zeros(10, jnp.int32), stats, 4, 3, None, None)[1]
    split = LevelSplit(
        jnp.zeros(4, jnp.int32), jnp.zeros(4, jnp.int32), jnp.zeros(4, bool), missing_bin=2
    )
    live = LiveSlots(jnp.asarray(parent_node, jnp.int32), jnp.asarray(parent_slot, jnp.int32))
    with pytest.raises(Exception, match="parent_node must hold nodes"):
        jax.block_until_ready(
            native.level(bins, jnp.zeros(10, jnp.int32), stats, 8, 3, parent, split, live=live)
        )


@pytest.mark.parametrize("kernel", sorted(HISTOGRAM_KERNELS))
@pytest.mark.parametrize(
    "n_nodes, live", [(1, None), (8, None), (8, ([3, 0], [3, 0])), (2048, None)]
)
def test_a_level_counts_each_nodes_rows_of_positive_weight(kernel, n_nodes, live):
    """``row_positive``'s rows per node of the level (every node, live or
    not), as the native kernel tallies them while it routes the rows (in
    row order up to 1024 nodes, routed first beyond) and the XLA kernels
    sum them: ``np.bincount``."""
    histograms = HISTOGRAM_KERNELS[kernel]
    rng = np.random.default_rng(11)
    n_rows, n_bins = 3000, 4
    node_of_row = rng.integers(0, n_nodes, n_rows).astype(np.int32)
    positive = rng.uniform(size=n_rows) < 0.7
    stats = jnp.asarray(rng.normal(size=(n_rows, 2)), jnp.float32)
    bins = rng.integers(0, n_bins, (2, n_rows)).astype(np.uint8)
    if n_nodes == 1:
        level = (bins, node_of_row, stats, 1, n_bins, None, None)
    else:  # routed from the parents by a routing feature
        bins = _with_routing_feature(bins, node_of_row)
        parent = histograms.level(
            _bins_for(histograms, bins), node_of_row // 2, stats, n_nodes // 2, n_bins, None, None
        )[1]
        split = LevelSplit(
            jnp.full(n_nodes // 2, bins.shape[0] - 1, jnp.int32),
            jnp.zeros(n_nodes // 2, jnp.int32),
            jnp.zeros(n_nodes // 2, bool),
            missing_bin=n_bins - 1,
        )
        level = (bins, node_of_row // 2, stats, n_nodes, n_bins, parent, split)
    slots = None if live is None else LiveSlots(*(jnp.asarray(part, jnp.int32) for part in live))
    bins_read = _bins_for(histograms, level[0])
    *_, routed, node_rows = histograms.level(bins_read, *level[1:], None, slots, positive)
    np.testing.assert_array_equal(np.asarray(routed), node_of_row)
    expected = np.bincount(node_of_row[positive], minlength=n_nodes)
    np.testing.assert_array_equal(np.asarray(node_rows), expected)

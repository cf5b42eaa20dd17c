"""Mistakes become clear errors at the boundary, never a JAX trace or a bad model."""

import os
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.frontends.data.validation import check_not_all_constant
from jaxboost.frontends.settings.checks import check_histogram_memory


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(np.float32)
    return X, X[:, 0].copy()


def _python_if(y, f):
    if f > y:  # not traceable: JAX cannot branch on a traced value
        return (f - y) ** 2
    return 2 * (f - y) ** 2


@pytest.mark.parametrize(
    "loss, settings, message",
    [
        (_python_if, {}, "Python control flow .* jnp.where"),
        (lambda y, f: jnp.stack([f - y, f]), {}, "scalar per sample, got shape \\(2,\\)"),
        (lambda y, f: jnp.int32(y), {}, "must return a float, got dtype int32"),
    ],
    ids=["python-if", "vector-result", "integer-result"],
)
def test_a_bad_loss_is_explained_before_training(data, loss, settings, message):
    X, y = data
    with pytest.raises(ValueError, match=f"loss: .*{message}"):
        jb.Booster(loss=loss, n_estimators=2, **settings).fit(X, y)


def test_a_column_of_targets_for_a_scalar_loss_gets_a_hint(data):
    X, y = data
    with pytest.raises(ValueError, match="scalar per sample.*pass y of shape \\(n_rows,\\)"):
        jb.Booster(loss="squared_error", n_estimators=2).fit(X, y[:, None])


def test_infinite_features_are_rejected_with_their_position(data):
    X, y = data
    X[3, 2] = np.inf
    with pytest.raises(
        ValueError, match="X: contains infinite values \\(first at row 3, column 2\\)"
    ):
        jb.Booster(n_estimators=2).fit(X, y)


def test_all_constant_features_are_rejected(data):
    _, y = data
    with pytest.raises(ValueError, match="every feature is constant"):
        jb.Booster(n_estimators=2).fit(np.ones((40, 3)), y)


@pytest.mark.parametrize(
    "columns",
    [
        [np.ones(3000), np.full(3000, np.nan)],  # constant, and missing everywhere
        [np.full(3000, np.nan), np.full(3000, -2.0)],
    ],
)
def test_constant_and_all_missing_features_are_rejected(columns):
    X = np.stack(columns, axis=1)
    with pytest.raises(ValueError, match="every feature is constant"):
        check_not_all_constant(X)


@pytest.mark.parametrize("where", [0, 1023, 1024, 2999])
def test_a_single_differing_or_missing_value_anywhere_makes_a_feature_vary(where):
    for value in (5.0, np.nan):
        X = np.ones((3000, 2))
        X[where, 1] = value
        check_not_all_constant(X)  # does not raise
    X = np.full((3000, 1), np.nan)
    X[where, 0] = 1.0
    check_not_all_constant(X)


def test_a_feature_that_is_only_sometimes_missing_is_not_constant(data):
    _, y = data
    X = np.ones((40, 1), np.float32)
    X[y > 0, 0] = np.nan
    # (min_child_samples 0: fewer than the default 20 rows are missing)
    model = jb.Booster(n_estimators=3, max_depth=1, min_child_samples=0).fit(X, y)
    assert model.forest_.split_gain[0, 0] > 0  # split on missing vs present


@pytest.mark.parametrize(
    "weight, message",
    [
        (np.full(40, -1.0), "non-negative"),
        (np.full(40, np.nan), "finite"),
        (np.zeros(40), "not all zero"),
        (np.ones(39), "expected shape \\(40,\\)"),
    ],
)
def test_bad_sample_weights_are_named(data, weight, message):
    X, y = data
    with pytest.raises(ValueError, match=f"sample_weight: .*{message}"):
        jb.Booster(n_estimators=2).fit(X, y, sample_weight=weight)


def test_a_loss_going_non_finite_mid_training_names_the_round(data):
    X, y = data

    def explodes(y, f):  # finite at the start (F0 near 0), NaN once a score passes 2
        return (f - y) ** 2 + jnp.where(f > 2.0, jnp.nan, 0.0)

    with pytest.raises(FloatingPointError, match="at round [0-9]+"):
        jb.Booster(loss=explodes, n_estimators=30, max_depth=2, learning_rate=0.5).fit(X, y * 4)


def test_a_tree_too_deep_for_the_device_memory_is_refused_before_any_work(monkeypatch):
    X = np.random.default_rng(0).normal(size=(1000, 3)).astype(np.float32)
    y = X[:, 0].copy()
    import jaxboost.frontends.training.placement
    import jaxboost.frontends.training.row_binning

    # 1 GiB a device; depth 17 with 3 features and 256 bins needs 16 x 3 x 2^16
    # x 256 x 2 bytes, 1.5 GiB.  The bins a fit needs are known from the bin
    # edges (a sample of rows), before any row is binned.
    monkeypatch.setattr(
        jaxboost.frontends.training.row_binning, "memory_per_device", lambda devices: 2**30
    )
    monkeypatch.setattr(jaxboost.frontends.training.placement, "shard_rows", _no_binning)
    message = r"max_depth: 17 needs about 1\.5 GiB per device: .* more than the 1\.0 GiB"
    with pytest.raises(ValueError, match=message):
        jb.Booster(n_estimators=1, max_depth=17, rounds_per_chunk=1).fit(X, y)


def test_a_deep_leafwise_tree_is_weighed_by_its_live_nodes(monkeypatch):
    X = np.random.default_rng(0).normal(size=(1000, 3)).astype(np.float32)
    y = X[:, 0].copy()
    import jaxboost.frontends.training.placement
    import jaxboost.frontends.training.row_binning

    # The depth-17 tree above, grown leaf-wise with 31 leaves: its levels
    # hold histograms for at most 30 live nodes, so it fits in 1 GiB and the
    # fit goes on to bin the rows.
    monkeypatch.setattr(
        jaxboost.frontends.training.row_binning, "memory_per_device", lambda devices: 2**30
    )
    monkeypatch.setattr(jaxboost.frontends.training.placement, "shard_rows", _reached_binning)
    booster = jb.Booster(n_estimators=1, max_depth=17, grow_policy="lossguide", max_leaves=31)
    with pytest.raises(_BinningReached):
        booster.fit(X, y)


class _BinningReached(Exception):
    pass


def _reached_binning(*args, **kwargs):
    raise _BinningReached


def _no_binning(*args, **kwargs):
    raise AssertionError("the fit should have been refused before binning the rows")


def test_histogram_memory_grows_with_depth_features_bins_and_outputs():
    gib = 2**30
    # 16 bytes x 2 statistics per (feature, node, bin): 4 x 2^21 x 256 x 32 = 64 GiB
    with pytest.raises(ValueError, match="64.0 GiB"):
        check_histogram_memory(22, 4, 256, 1, 63 * gib)
    check_histogram_memory(22, 4, 256, 1, 64 * gib)
    check_histogram_memory(22, 4, 256, 1, None)  # memory unknown: not checked
    with pytest.raises(ValueError, match="128.0 GiB"):
        check_histogram_memory(22, 4, 256, 2, 64 * gib)


def test_leafwise_histogram_memory_counts_the_live_nodes_and_the_trees():
    from jaxboost.engine.leafwise import live_capacity

    gib = 2**30
    # 31 leaves: the widest level (by 12 bytes a node and 8 a node above) is
    # depth 6 (28 live nodes, 30 above), whatever the depth below
    assert [live_capacity(depth, 31) for depth in (5, 6)] == [30, 28]
    assert max(live_capacity(depth, 31) for depth in range(7, 30)) == 28
    per_node = 28 * 256 * 2 * 5  # features x bins x statistics of 5 outputs
    histograms = per_node * (12 * 28 + 8 * 30)
    check_histogram_memory(30, 28, 256, 5, histograms, max_leaves=31)
    with pytest.raises(ValueError, match=r"28 nodes x 28 features x 256 bins.*max_leaves"):
        check_histogram_memory(30, 28, 256, 5, histograms - 1, max_leaves=31)
    # the depth-wise tree of depth 16 needs 2^15 nodes' worth: 35 GiB
    with pytest.raises(ValueError, match="35.0 GiB"):
        check_histogram_memory(16, 28, 256, 5, 34 * gib)
    # the trees a program returns: 50 rounds of one tree of 2^16 leaves, 5 outputs
    trees = 50 * 2**16 * (25 + 4 * 5)
    leafwise = histograms + trees
    check_histogram_memory(16, 28, 256, 5, leafwise, max_leaves=31, n_outputs=5, trees_per_chunk=50)
    with pytest.raises(ValueError, match=r"for the 50 trees of 2\^16 leaves"):
        check_histogram_memory(
            16, 28, 256, 5, leafwise - 1, max_leaves=31, n_outputs=5, trees_per_chunk=50
        )


def test_memory_per_device_of_cpu_devices_shares_the_machine():
    import jax

    from jaxboost.runtime.devices import memory_per_device

    per_device = memory_per_device(jax.devices("cpu"))
    assert per_device is not None and 2**28 < per_device
    assert per_device * len(jax.local_devices(backend="cpu")) <= os.sysconf("SC_PHYS_PAGES") * (
        os.sysconf("SC_PAGE_SIZE")
    )


def test_a_sparse_matrix_is_refused_with_what_to_pass(data):
    sparse = pytest.importorskip("scipy.sparse")
    X, y = data
    with pytest.raises(ValueError, match=r"X: sparse matrices are not supported.*toarray"):
        jb.Booster(n_estimators=1).fit(sparse.csr_matrix(X), y)


def test_a_column_of_neither_numbers_nor_strings_is_named(data):
    # (a category or string column is categorical: tests/test_categorical.py)
    pd = pytest.importorskip("pandas")
    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    colour = np.where(X[:, 0] > 0, "red", "blue").astype(object)
    colour[0] = 1  # a number among the strings
    frame["colour"] = pd.Series(colour, dtype=object)
    with pytest.raises(ValueError, match="X: column 'colour' holds object, not numbers"):
        jb.Booster(n_estimators=1).fit(frame, y)


def test_pandas_missing_values_of_nullable_columns_are_missing(data):
    pd = pytest.importorskip("pandas")
    X, y = data
    X = X.copy()
    X[::4, 1] = np.nan
    nullable = pd.DataFrame(
        {
            "a": X[:, 0],
            "b": pd.array(
                [None if np.isnan(v) else round(float(v) * 10) for v in X[:, 1]], "Int64"
            ),
            "c": X[:, 2],
        }
    )
    plain = nullable.astype("float32")  # pd.NA -> NaN
    model = jb.Booster(n_estimators=5, max_depth=2).fit(nullable, y)
    np.testing.assert_array_equal(model.predict(nullable), model.predict(plain))
    twin = jb.Booster(n_estimators=5, max_depth=2).fit(plain, y)
    np.testing.assert_array_equal(model.predict(plain), twin.predict(plain))


@pytest.mark.parametrize("argument", ["X", "y", "sample_weight"])
def test_finite_values_beyond_float32_are_named_not_called_infinite(data, argument):
    X, y = data
    arrays = {
        "X": X.astype(np.float64),
        "y": y.astype(np.float64),
        "sample_weight": np.ones(len(y)),
    }
    position = (4, 1) if argument == "X" else (4,)
    arrays[argument][position] = -1e300
    where = "row 4, column 1" if argument == "X" else "row 4"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no numpy overflow warning
        with pytest.raises(
            ValueError, match=f"{argument}: -1e\\+300 \\({where}\\) is beyond float32"
        ):
            jb.Booster(n_estimators=2).fit(
                arrays["X"], arrays["y"], sample_weight=arrays["sample_weight"]
            )


def test_a_dataframe_value_beyond_float32_is_named(data):
    pd = pytest.importorskip("pandas")
    X, y = data
    frame = pd.DataFrame(X.astype(np.float64), columns=[f"f{i}" for i in range(X.shape[1])])
    frame["count"] = pd.array([1] * (len(y) - 1) + [None], dtype="Int64")  # pd.NA is missing
    frame.iloc[7, 0] = 5e40
    with pytest.raises(ValueError, match="X: 5e\\+40 \\(row 7, column 0\\) is beyond float32"):
        jb.Booster(n_estimators=2).fit(frame, y)


def test_the_loss_check_is_cached_per_loss_and_shapes_and_never_caches_a_failure():
    from jaxboost.frontends.training.loss_checks import check_loss

    def first_target_only(y, f):  # fine for scalar targets, not for vectors
        return jnp.square(f - y)

    check_loss(first_target_only, np.zeros(20, np.float32), 1)
    check_loss(first_target_only, np.zeros(20, np.float32), 1)  # cached: passes again
    for _ in range(2):  # another target shape is checked afresh, and fails each time
        with pytest.raises(ValueError, match="must return a scalar per sample.*jb.Regressor"):
            check_loss(first_target_only, np.zeros((20, 3), np.float32), 1)
    with pytest.raises(ValueError, match="must return a float"):
        check_loss(lambda y, f: (f > y).astype(jnp.int32), np.zeros(20, np.float32), 1)


def test_the_loss_check_traces_a_keyed_loss_once_per_structure_not_per_value():
    """A grid search over alpha: a keyed loss of a new value and the same
    structure (its numbers lifted) has the shapes the check found; a new
    structure is checked afresh."""
    from jaxboost.frontends.training.computation_keys import keyed_loss
    from jaxboost.frontends.training.loss_checks import check_loss

    y = np.zeros(20, np.float32)
    traced = []

    def pinball(alpha, square=False):
        def loss(y, f):
            traced.append(alpha)
            diff = jnp.square(y - f) if square else y - f
            return jnp.maximum(alpha * diff, (alpha - 1.0) * diff)

        return loss

    check_loss(keyed_loss(pinball(0.2), (), 1), y, 1)
    for alpha in (0.4, 0.6):
        traced.clear()
        keyed = keyed_loss(pinball(alpha), (), 1)
        traced.clear()
        check_loss(keyed, y, 1)
        assert traced == [], alpha
    check_loss(keyed_loss(pinball(0.7, square=True), (), 1), y, 1)
    assert traced, "another structure is traced"


# -- columns at predict time ---------------------------------------------------------
@pytest.mark.parametrize(
    "names, fitted, message",
    [
        (["b", "a", "c"], ["a", "b", "c"], r"X: the columns seen in fit, in another order"),
        (["a", "b", "d"], ["a", "b", "c"], r"missing \['c'\], unexpected \['d'\]"),
        (["x", "b", "a"], ["a", "b", "c"], r"missing \['c'\], unexpected \['x'\]"),
    ],
    ids=["reordered", "renamed", "renamed_and_reordered"],
)
def test_columns_other_than_the_fitted_ones_are_named(names, fitted, message):
    from jaxboost.frontends.data.validation import check_columns

    with pytest.raises(ValueError, match=message):
        check_columns(names, fitted, 3, 3)


def test_names_on_one_side_only_warn_as_scikit_learn_does():
    from jaxboost.frontends.data.validation import check_columns

    with pytest.warns(UserWarning, match="X has feature names, but the model was fitted on an"):
        check_columns(["a", "b"], None, 2, 2)
    with pytest.warns(UserWarning, match=r"does not have feature names.* as \['a', 'b'\]"):
        check_columns(None, ["a", "b"], 2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_columns(["a", "b"], ["a", "b"], 2, 2)
        check_columns(None, None, 2, 2)


def test_a_booster_refuses_a_data_frame_whose_columns_differ_from_fit(data):
    pd = pytest.importorskip("pandas")
    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    model = jb.Booster(n_estimators=3, max_depth=2).fit(frame, y)
    with pytest.raises(ValueError, match=r"another order.*X\[model.feature_names_in_\]"):
        model.predict(frame[["c", "b", "a"]])
    np.testing.assert_array_equal(
        model.predict(frame[["c", "b", "a"]][model.feature_names_in_]), model.predict(frame)
    )
    with pytest.raises(ValueError, match=r"missing \['b'\], unexpected \['B'\]"):
        model.predict_raw(frame.rename(columns={"b": "B"}))
    with pytest.raises(ValueError, match=r"eval_set\[0\] X: the columns seen in fit, in another"):
        jb.Booster(n_estimators=3).fit(frame, y, eval_set=[(frame[["b", "a", "c"]], y)])


def test_a_booster_fitted_on_an_array_warns_of_a_data_frame_taken_by_position(data):
    pd = pytest.importorskip("pandas")
    X, y = data
    model = jb.Booster(n_estimators=3, max_depth=2).fit(X, y)
    reordered = pd.DataFrame(X, columns=["a", "b", "c"])[["c", "b", "a"]]
    with pytest.warns(UserWarning, match="X has feature names, but the model was fitted on an"):
        by_position = model.predict(reordered)
    np.testing.assert_array_equal(by_position, model.predict(X[:, ::-1]))

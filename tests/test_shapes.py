"""Row buckets: nearby data sizes share compiled programs."""

import jax
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.runtime.padding import (
    CPU_IN_PLACE_ALIGNMENT,
    aligned_empty,
    bucket_size,
    in_place_on,
    is_aligned,
    pad_rows,
    padded_slice,
)

_compilations = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **_: (
        _compilations.append(event)
        if event == "/jax/core/compile/backend_compile_duration"
        else None
    )
)


@pytest.mark.parametrize("n_rows", [1, 63, 64, 65, 1000, 1024, 1025, 5000, 1_000_000, 123_457])
def test_buckets_cover_the_rows_with_little_waste(n_rows):
    for multiple in (1, 2, 4):
        size = bucket_size(n_rows, multiple)
        assert size >= n_rows and size % multiple == 0
        if n_rows > 1024:
            assert size <= n_rows * 1.04 + multiple


def test_pad_rows_repeats_the_first_row():
    array = np.arange(6).reshape(3, 2)
    np.testing.assert_array_equal(pad_rows(array, 5)[3:], [[0, 1], [0, 1]])
    assert pad_rows(array, 3) is array


def test_padded_slices_cut_the_padded_array():
    array = np.arange(10).reshape(5, 2)
    padded = pad_rows(array, 12)
    for start, stop in [(0, 3), (3, 6), (4, 8), (6, 12), (0, 12)]:
        np.testing.assert_array_equal(padded_slice(array, start, stop), padded[start:stop])
    assert np.shares_memory(padded_slice(array, 1, 4), array)  # no copy without padding


def _misaligned(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` whose data starts 16 bytes past an aligned boundary."""
    raw = aligned_empty((array.nbytes + 16,), np.uint8)
    copy = raw[16:].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def test_aligned_slices_are_copied_onto_the_boundary_only_when_needed():
    array = np.arange(40, dtype=np.float32).reshape(10, 4)  # 16 bytes a row
    misaligned = _misaligned(array)
    assert not is_aligned(misaligned)
    for start, stop in [(0, 3), (1, 4), (4, 10), (6, 13), (0, 16)]:
        sliced = padded_slice(misaligned, start, stop, aligned=True)
        assert is_aligned(sliced)
        np.testing.assert_array_equal(sliced, pad_rows(array, 16)[start:stop])
    aligned = pad_rows(misaligned, 10, aligned=True)
    assert is_aligned(aligned) and not np.shares_memory(aligned, misaligned)
    assert pad_rows(aligned, 10, aligned=True) is aligned
    # a view where it starts on the boundary: 4 rows are 64 bytes
    assert np.shares_memory(padded_slice(aligned, 4, 8, aligned=True), aligned)
    assert not np.shares_memory(padded_slice(aligned, 1, 5, aligned=True), aligned)


def test_cpu_devices_take_aligned_host_rows_in_place():
    """What the alignment is for: PJRT's CPU client uses such an array as the
    device buffer itself (if a jaxlib changes this, the copy is back)."""
    rows = aligned_empty((256, 28), np.float32)
    rows[...] = 1.5
    assert rows.ctypes.data % CPU_IN_PLACE_ALIGNMENT == 0
    on_device = jax.device_put(rows, jax.devices("cpu")[0])
    assert on_device.unsafe_buffer_pointer() == rows.ctypes.data
    # only CPU devices get aligned copies (a GPU copies the rows anyway)
    assert in_place_on("cpu") and not in_place_on("gpu")


def test_a_fit_of_a_nearby_size_compiles_nothing():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(700, 4)).astype(np.float32)
    y = X[:, 0] + 0.1 * rng.normal(size=700).astype(np.float32)
    settings = {"loss": "squared_error", "n_estimators": 7, "max_depth": 3}
    first = jb.Booster(**settings).fit(X[:600], y[:600])
    first.predict(X[:600])
    before = len(_compilations)
    second = jb.Booster(**settings).fit(X[:650], y[:650])  # same 1024-row bucket
    second.predict(X[:650])
    assert len(_compilations) == before, "the second fit recompiled"
    # and the padding rows change nothing: the model equals one fit without them
    assert second.train_loss_[-1] == pytest.approx(
        np.mean(0.5 * (second.predict(X[:650]) - y[:650]) ** 2), rel=1e-5
    )


def test_changing_numeric_settings_compiles_nothing():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = X[:, 0] + 0.1 * rng.normal(size=300).astype(np.float32)
    jb.Booster(n_estimators=6, max_depth=3, subsample=0.9).fit(X, y)
    before = len(_compilations)
    tuned = jb.Booster(
        n_estimators=6,
        max_depth=3,
        learning_rate=0.3,
        reg_lambda=5.0,
        min_child_weight=2.0,
        min_split_gain=0.01,
        subsample=0.5,
        colsample_bytree=0.5,
    ).fit(X, y)
    assert len(_compilations) == before, "numeric settings should be values, not constants"
    assert tuned.train_loss_[-1] < tuned.train_loss_[0]


def test_changing_n_estimators_compiles_nothing():
    """A grid over n_estimators reuses the training program: every fit runs
    chunks of the same length and skips the last chunk's unused rounds."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = X[:, 0] + 0.1 * rng.normal(size=300).astype(np.float32)
    settings = {"loss": "squared_error", "max_depth": 3}
    longest = jb.Booster(n_estimators=57, **settings).fit(X, y)  # a full chunk and a partial one
    before = len(_compilations)
    for n_estimators in (3, 20, 50):
        model = jb.Booster(n_estimators=n_estimators, **settings).fit(X, y)
        assert model.n_estimators_ == n_estimators
        # the same rounds as the longer fit's first ones
        np.testing.assert_allclose(
            model.train_loss_, longest.train_loss_[: n_estimators + 1], rtol=1e-6
        )
    assert len(_compilations) == before, "another n_estimators recompiled"

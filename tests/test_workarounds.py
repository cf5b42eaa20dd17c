"""Tests of ``jaxboost.runtime.workarounds``: which jaxlibs get which workaround, and
that the workarounds reach the compiled programs."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxboost import losses
from jaxboost.engine import metrics
from jaxboost.engine.derivatives import HessianProbe
from jaxboost.engine.training import NumericSettings, ShardData, StaticSettings
from jaxboost.engine.training_programs import init_score_program, train_chunk_program
from jaxboost.frontends.booster import Booster
from jaxboost.frontends.training.hessian_probe import VECTOR_OPTIONS_ROWS
from jaxboost.frontends.training.program_settings import program_config
from jaxboost.runtime import workarounds as _workarounds
from jaxboost.runtime.devices import make_mesh


@pytest.mark.parametrize(
    ("version", "added"),
    [
        ((0, 10, 1), False),
        ((0, 10, 2), True),
        ((0, 11, 0), True),
        ((0, 11, 1), False),
        (None, False),
    ],
)
def test_the_gpu_scatter_flag_is_added_once_on_the_affected_jaxlibs(monkeypatch, version, added):
    monkeypatch.setattr(_workarounds, "_installed_jaxlib_version", lambda: version)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/nowhere")
    assert _workarounds.apply_gpu_scatter_workaround() is added
    assert ("nvptx-allow-ftz-atomics" in os.environ["XLA_FLAGS"]) is added
    assert os.environ["XLA_FLAGS"].startswith("--xla_dump_to=/tmp/nowhere")
    assert _workarounds.apply_gpu_scatter_workaround() is False  # never twice


@pytest.mark.parametrize(
    ("version", "applies"), [((0, 9, 9), False), ((0, 10, 2), True), ((0, 11, 0), False)]
)
def test_vector_output_options_only_on_the_jaxlibs_that_need_them(monkeypatch, version, applies):
    monkeypatch.setattr(_workarounds, "_installed_jaxlib_version", lambda: version)
    assert bool(_workarounds.vector_output_compiler_options("cpu")) is applies
    assert _workarounds.vector_output_compiler_options("gpu") == {}  # CPU only


def test_vector_output_programs_keep_their_reductions_out_of_ynnpack():
    """A sum over a short minor axis (softmax's over its outputs) compiles to a
    YNNPACK fusion by default on this jaxlib, and not in the programs of
    vector outputs (63 ms against 3 ms per (507904, 5) sum)."""
    options = _workarounds.vector_output_compiler_options("cpu")
    if not options:
        pytest.skip("this jaxlib gets no YNNPACK option")
    # (compiled, not run: at a few rows XLA sums in its own loops anyway)
    n_rows = 500_000
    x = jax.ShapeDtypeStruct((n_rows, 5), jnp.float32)
    by_default = jax.jit(lambda x: jax.nn.logsumexp(x, axis=1)).lower(x).compile().as_text()
    assert "%ynn_fusion" in by_default  # else the check below proves nothing
    mesh = make_mesh(jax.devices()[:1])
    y = weight = jax.ShapeDtypeStruct((n_rows,), jnp.float32)

    def build(loss, n_outputs, mesh):  # (the jitted program, for the loss's values and rows)
        return init_score_program(loss, n_outputs, mesh).compiled_for(y, weight)

    vector = build(losses.softmax_cross_entropy, 3, mesh).lower(y, weight).compile().as_text()
    assert "%ynn_fusion" not in vector
    scalar = build(losses.squared_error, 1, mesh).lower(y, weight).compile().as_text()
    assert "%ynn_fusion" in scalar  # one output keeps the default (faster there)


def test_vector_output_metrics_keep_their_reductions_out_of_ynnpack():
    if not _workarounds.vector_output_compiler_options("cpu"):
        pytest.skip("this jaxlib gets no YNNPACK option")
    n_rounds, n_rows = 4, 500_000
    y = weight = jax.ShapeDtypeStruct((n_rows,), jnp.float32)
    texts = {}
    for n_outputs in (1, 5):
        loss = losses.softmax_cross_entropy if n_outputs > 1 else losses.squared_error
        staged = jax.ShapeDtypeStruct((n_rounds, n_rows, n_outputs), jnp.float32)
        program = metrics._metric_program(n_outputs > 1, "cpu")
        metric = metrics.resolve_metric("loss", loss)
        texts[n_outputs] = program.lower(metric, (), y, staged, weight, ()).compile().as_text()
    assert "%ynn_fusion" not in texts[5]
    assert "%ynn_fusion" in texts[1]


def _train_program_text(vector_row_options: bool, n_rows: int) -> str:
    """The compiled training program of a 3-class softmax on ``n_rows`` rows
    (shapes only, nothing runs)."""
    struct = jax.ShapeDtypeStruct
    n_features, n_bins = 2, 16
    cfg = StaticSettings(
        loss=losses.softmax_cross_entropy,
        n_outputs=3,
        max_depth=2,
        rounds_per_chunk=1,
        vector_row_options=vector_row_options,
    )
    data = ShardData(
        bins=struct((n_features, n_rows), jnp.uint8),
        y=struct((n_rows,), jnp.float32),
        weight=struct((n_rows,), jnp.float32),
        row_id=struct((n_rows,), jnp.uint32),
    )
    scalar = struct((), jnp.int32)
    hyper = NumericSettings(*(struct((), jnp.float32) for _ in NumericSettings._fields))
    # (the factory itself, under the caches of its values and its shapes)
    program = train_chunk_program.__wrapped__.__wrapped__(cfg, make_mesh(jax.devices()[:1]))
    edges = struct((n_features, n_bins - 1), jnp.float32)
    raw = struct((n_rows, 3), jnp.float32)
    # (no lifted values: the loss is the catalogue's, passed as it is)
    lowered = program.lower((), data, edges, raw, scalar, scalar, struct((), jnp.uint32), hyper)
    return lowered.compile().as_text()


def test_training_rounds_of_vector_outputs_take_the_options_on_many_rows():
    """The training program compiles with the options where the booster asks
    for them (vector outputs, at least VECTOR_OPTIONS_ROWS rows per device),
    and the booster asks exactly there."""
    if not _workarounds.vector_output_compiler_options("cpu"):
        pytest.skip("this jaxlib gets no YNNPACK option")
    assert "%ynn_fusion" in _train_program_text(False, 65536)
    assert "%ynn_fusion" not in _train_program_text(True, 65536)
    booster = Booster(loss="softmax_cross_entropy")
    probe = HessianProbe(informative=True, negative=False)
    asks = {
        (n_outputs, rows): program_config(
            booster, losses.softmax_cross_entropy, n_outputs, False, probe, "cpu", rows, 2 * rows
        )[0].vector_row_options
        for n_outputs in (1, 3)
        for rows in (VECTOR_OPTIONS_ROWS // 2, VECTOR_OPTIONS_ROWS)
    }
    assert asks == {
        (1, VECTOR_OPTIONS_ROWS // 2): False,
        (1, VECTOR_OPTIONS_ROWS): False,
        (3, VECTOR_OPTIONS_ROWS // 2): False,
        (3, VECTOR_OPTIONS_ROWS): True,
    }


def test_small_fits_run_round_by_round_and_every_program_compiles_fast(monkeypatch):
    """Fits of at most FAST_COMPILE_ROWS rows run round by round, larger
    ones the fused program; every program compiles with the older fusion
    emitters (where the jaxlib has them), the fused one too, and both paths
    fit the same model."""
    from jaxboost.engine import round_programs, training_programs
    from jaxboost.frontends.training import initial_score_search
    from jaxboost.frontends.training import program_settings as settings_module
    from jaxboost.runtime.workarounds import FAST_COMPILE_ROWS, fast_compile_options

    assert fast_compile_options("gpu") == {}
    probe = HessianProbe(informative=True, negative=False)
    settings = [
        program_config(Booster(), losses.squared_error, 1, False, probe, "cpu", rows // 2, rows)[0]
        for rows in (FAST_COMPILE_ROWS, 2 * FAST_COMPILE_ROWS)
    ]
    assert [cfg.fast_compile for cfg in settings] == [True, False]
    asked = []

    def recorded(platform):
        asked.append(platform)
        return fast_compile_options(platform)

    monkeypatch.setattr(training_programs, "fast_compile_options", recorded)
    monkeypatch.setattr(round_programs, "fast_compile_options", recorded)
    # (the factory itself, under the caches of its values and its shapes)
    training_programs.train_chunk_program.__wrapped__.__wrapped__(
        settings[1], make_mesh(jax.devices()[:1])
    )
    assert asked == ["cpu"], "the fused program of a large fit compiles with the older emitters"
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 4)).astype(np.float32)
    y = (np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + rng.normal(size=500)).astype(np.float32)
    loss = lambda y, f: jnp.logaddexp(f - y, y - f)
    fast = Booster(loss=loss, n_estimators=20, max_depth=3).fit(X, y)
    monkeypatch.setattr(settings_module, "FAST_COMPILE_ROWS", 0)
    monkeypatch.setattr(initial_score_search, "FAST_COMPILE_ROWS", 0)  # (the initial score's too)
    default = Booster(loss=loss, n_estimators=20, max_depth=3).fit(X, y)
    np.testing.assert_array_equal(fast.predict_raw(X), default.predict_raw(X))

"""A fit's loss programs compiled ahead, and the hessian probe on the fit's rows."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import monitoring

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.derivatives import probe_hessian
from jaxboost.engine.round_programs import derivatives_program
from jaxboost.frontends.training.compile_ahead import start_loss_programs
from jaxboost.frontends.training.hessian_probe import (
    derivatives_settings,
    probe_fit,
    probe_rows,
    probe_targets,
)
from jaxboost.runtime.devices import make_mesh
from jaxboost.runtime.distributed import global_rows


class _Compiles:
    """Counts XLA compilations (JAX's monitoring events) while active."""

    def __init__(self):
        self.count = 0
        self.active = False
        monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, name, duration, **kwargs):
        if self.active and name.endswith("backend_compile_duration"):
            self.count += 1


_COMPILES = _Compiles()


def _placed(y, mesh):
    weight = np.ones(y.shape[0], np.float32)
    return global_rows(mesh, y), global_rows(mesh, weight)


def test_the_derivatives_program_compiled_ahead_is_the_one_the_fit_calls():
    mesh = make_mesh(jax.devices()[:1])
    y = np.linspace(-2, 2, 300).astype(np.float32)
    placed = _placed(y, mesh)
    # a constant new to the disk cache too (a program loaded from it is no
    # compilation either)
    shift = float(np.random.default_rng().uniform(0.1, 0.2))
    loss = eval(f"lambda y, f: jnp.log(jnp.cosh(f - 0.5 * y + {shift!r}))", {"jnp": jnp})
    booster = jb.Booster(loss=loss)
    future = start_loss_programs(booster, loss, 1, y, placed, y.shape[0])
    assert future is not None
    future.result()
    settings = derivatives_settings(loss, 1, "diag", y.shape[0])  # (hessian="auto": diag)
    raw = global_rows(mesh, np.zeros((y.shape[0], 1), np.float32))
    _COMPILES.active, _COMPILES.count = True, 0
    try:
        grad, *_ = derivatives_program(settings, mesh)(*placed, raw)
    finally:
        _COMPILES.active = False
    assert _COMPILES.count == 0
    np.testing.assert_allclose(np.asarray(grad)[:, 0], np.tanh(-0.5 * y + shift), atol=1e-6)


def tukey(y, f):
    r = jnp.minimum(jnp.abs(f - y) / 1.5, 1.0)
    return 1.5**2 / 6 * (1 - (1 - r**2) ** 3)


@pytest.mark.parametrize(
    ("loss", "n_outputs", "hessian", "expected"),
    [
        (lambda y, f: jnp.square(f - y), 1, "diagonal", (True, False)),
        (lambda y, f: jnp.abs(f - y), 1, "diagonal", (False, False)),
        (tukey, 1, "diagonal", (True, True)),
        (losses.gaussian_nll, 2, "full", (True, True)),
        (losses.gaussian_nll, 2, "diagonal", (True, False)),
    ],
)
def test_the_probe_on_the_fits_rows_agrees_with_the_sampled_probe(
    loss, n_outputs, hessian, expected
):
    """A small fit probes with its derivatives program on the fit's rows;
    larger ones with a program on a sample of them: the same answer."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=3000).astype(np.float32) * 2
    init_score = np.zeros(n_outputs, np.float32)
    mesh = make_mesh(jax.devices()[:1])
    on_rows = probe_fit(loss, y, init_score, hessian, _placed(y, mesh), y.shape[0])
    sample = probe_targets(y)
    sampled = probe_hessian(
        loss,
        jnp.asarray(sample[: probe_rows(y.shape[0]).size]),
        jnp.zeros((probe_rows(y.shape[0]).size, n_outputs)),
        full_hessian=hessian == "full",
    )
    assert tuple(on_rows[:2]) == tuple(sampled[:2]) == expected
    # and the same mean hessian (squared error's: 2), NaN for a declared loss
    assert on_rows.mean_hessian == pytest.approx(sampled.mean_hessian, rel=1e-5, nan_ok=True)

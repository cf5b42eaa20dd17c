"""Small fits run round by round on a small program per loss and a loss-free
tree program; their models are the fused program's, and a new loss compiles
only its small programs."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.engine.init_score import initial_score_on_host
from jaxboost.engine.round_programs import (
    derivatives_program,
    slope_sums_program,
    tree_round_program,
)
from jaxboost.engine.training_programs import init_score_program, train_chunk_program
from jaxboost.frontends.training import program_settings, round_by_round, rounds_loop
from jaxboost.runtime.devices import make_mesh


def _data(n_rows=400, n_features=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    y = (np.sin(2 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=n_rows)).astype(np.float32)
    return X, y


def _fused_only(monkeypatch):
    monkeypatch.setattr(round_by_round, "runs_round_by_round", lambda cfg: False)


def _forests_equal(a: jb.Booster, b: jb.Booster) -> None:
    for name, left, right in zip(a.forest_._fields, a.forest_, b.forest_, strict=True):
        if name in ("split_gain", "leaf_value", "leaf_cover"):
            # the same splits; sums the two programs may fuse differently
            # (float32 ulps: a full hessian's solve at XLA's test-suite -O0;
            # a leaf's hessian sum, its cover)
            # a gain is a difference of terms as large as the tree's largest
            # gain: its float32 ulps are that scale's (a 0.0087 gain beside
            # gains of 77 differed by 1.9e-6 with min_child_samples=20)
            scale = max(1.0, float(np.abs(right).max())) if name == "split_gain" else 1.0
            np.testing.assert_allclose(left, right, rtol=1e-5, atol=1e-6 * scale, err_msg=name)
        else:
            np.testing.assert_array_equal(left, right, err_msg=name)
    # (the loss's sum over rows may be fused differently: float32 rounding)
    np.testing.assert_allclose(a.train_loss_, b.train_loss_, rtol=1e-6)


def _pseudo_huber(y, f):
    return jnp.sqrt(1.0 + jnp.square(f - y)) - 1.0


def _softmax(y, f):
    return jax.nn.logsumexp(f) - f[y.astype(jnp.int32)]


@pytest.mark.parametrize(
    "settings",
    [
        {"loss": _pseudo_huber, "subsample": 0.7, "colsample_bytree": 0.5, "rounds_per_chunk": 7},
        {"loss": _softmax, "n_outputs": 3, "multi_strategy": "one_output_per_tree"},
        {"loss": _softmax, "n_outputs": 3, "hessian": "full"},
    ],
    ids=["subsampled", "one_output_per_tree", "full_hessian"],
)
def test_round_by_round_gives_the_fused_programs_model(monkeypatch, settings):
    X, y = _data()
    weight = np.random.default_rng(1).uniform(0.5, 2.0, size=y.shape[0])
    if settings.get("n_outputs"):
        y = np.digitize(y, [-0.5, 0.5]).astype(np.float32)
    settings = {"n_estimators": 20, "max_depth": 3, "random_state": 3, **settings}
    split = jb.Booster(**settings).fit(X, y, sample_weight=weight)
    _fused_only(monkeypatch)
    fused = jb.Booster(**settings).fit(X, y, sample_weight=weight)
    _forests_equal(split, fused)


# subsampled: its rounds' in-bag losses come from the derivatives program's
# rows' losses, summed by loss-free programs (no second program per loss)
@pytest.mark.parametrize("subsample", [1.0, 0.5])
def test_a_new_loss_compiles_only_its_small_programs(subsample):
    X, y = _data(seed=2)
    settings = {"n_estimators": 10, "max_depth": 3, "subsample": subsample}
    jb.Booster(loss=_pseudo_huber, **settings).fit(X, y)
    trees = tree_round_program.cache_info().misses
    fused = train_chunk_program.cache_info().misses
    derivatives = derivatives_program.cache_info().misses
    initial = init_score_program.cache_info().misses
    # (a loss of its own structure per case: a lambda written again, or with
    # another number, would share its programs; an integer power is structure)
    power = 3 if subsample == 1.0 else 5
    jb.Booster(
        loss=lambda y, f: jnp.logaddexp(f - y, y - f) + 0.0 * (f - y) ** power, **settings
    ).fit(X, y)
    assert tree_round_program.cache_info().misses == trees  # shared by every loss
    assert train_chunk_program.cache_info().misses == fused  # not used
    assert init_score_program.cache_info().misses == initial  # searched from the host
    assert derivatives_program.cache_info().misses == derivatives + 1


def test_a_round_whose_newton_leaves_need_a_line_search_runs_on_the_fused_program(monkeypatch):
    # -cos has negative curvature far from the target: with reg_lambda=0 and
    # no Armijo, some leaves' hessian sums are negative and only a line
    # search gives them a value (the fused program runs one)
    X, y = _data(seed=4)
    y = 0.2 * y

    def wave(y, f):
        return -jnp.cos(f - y)

    # started at pi, every row's hessian is negative: no split, and the root
    # leaf has no Newton step from the first round on
    settings = {
        "loss": wave,
        "n_estimators": 12,
        "max_depth": 3,
        "reg_lambda": 0.0,
        "armijo": False,
        "learning_rate": 0.5,
        "leaf_method": "newton",
        "base_score": float(np.pi),
        "min_child_samples": 0,  # (small leaves, some of negative hessian sum)
    }
    switched = []

    def fused_program(*args):
        switched.append(args)
        return round_by_round.fused_chunk_program(*args)

    monkeypatch.setattr(rounds_loop, "fused_chunk_program", fused_program)
    with warnings.catch_warnings(record=True) as split_said:
        warnings.simplefilter("always")
        split = jb.Booster(**settings).fit(X, y)
    assert len(switched) == 1  # a round had such leaves: the fit went on fused
    _fused_only(monkeypatch)
    with warnings.catch_warnings(record=True) as fused_said:
        warnings.simplefilter("always")
        fused = jb.Booster(**settings).fit(X, y)
    _forests_equal(split, fused)
    # the same warnings (the loss rises on this loss without Armijo)
    assert [str(w.message) for w in split_said] == [str(w.message) for w in fused_said]
    assert split_said


def test_a_large_fits_fused_program_reports_such_leaves_and_the_fit_goes_on_searching(
    monkeypatch,
):
    # a fit of more than FAST_COMPILE_ROWS rows runs the fused program
    # without the line search of leaves without a Newton step (a fifth of its
    # compile); a round with such leaves runs again on the program with it,
    # and the model is the one that program gives from the start
    monkeypatch.setattr(program_settings, "FAST_COMPILE_ROWS", 0)
    X, y = _data(seed=4)
    settings = {
        "loss": lambda y, f: -jnp.cos(f - y),
        "n_estimators": 6,
        "max_depth": 2,
        "reg_lambda": 0.0,
        "armijo": False,
        "leaf_method": "newton",
        "base_score": float(np.pi),  # every row's hessian negative: the root is stuck
        "min_child_samples": 0,
    }
    searched = []

    def fused_program(cfg, mesh):
        searched.append(cfg.searches_stuck_leaves)
        return round_by_round.fused_chunk_program(cfg, mesh)

    monkeypatch.setattr(rounds_loop, "fused_chunk_program", fused_program)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the loss rises without Armijo)
        reported = jb.Booster(**settings).fit(X, 0.2 * y)
        assert searched == [True]  # switched once, to the program that searches
        _fused_only(monkeypatch)
        fused = jb.Booster(**settings).fit(X, 0.2 * y)
    _forests_equal(reported, fused)
    assert np.any(reported.forest_.leaf_value != 0)


@pytest.mark.parametrize(
    "name, loss, targets",
    [
        (
            "absolute, ties",
            lambda y, f: jnp.abs(f - y),
            lambda rng, n: np.round(rng.normal(size=n)),
        ),
        (
            "pinball",
            lambda y, f: jnp.maximum(0.9 * (y - f), -0.1 * (y - f)),
            lambda rng, n: rng.exponential(2.0, n),
        ),
        (
            "log loss",
            lambda y, f: jnp.logaddexp(0.0, f) - y * f,
            lambda rng, n: (rng.random(n) < 0.2).astype(float),
        ),
        (
            "Tukey, far from 0",  # the median restart
            lambda y, f: 1 - (1 - jnp.minimum(jnp.square((f - y) / 4.685), 1.0)) ** 3,
            lambda rng, n: rng.normal(50.0, 2.0, n),
        ),
    ],
)
def test_the_host_initial_score_is_the_programs(name, loss, targets):
    rng = np.random.default_rng(5)
    n = 600
    y = jnp.asarray(targets(rng, n), jnp.float32)
    weight = jnp.asarray(rng.uniform(size=n) * (rng.random(n) < 0.8), jnp.float32)
    mesh = make_mesh(jax.devices()[:1])
    expected, expected_loss, converged = init_score_program(loss, 1, mesh)(y, weight)
    assert converged
    sums = slope_sums_program(loss, mesh)
    score, mean_loss = initial_score_on_host(
        lambda scores: np.asarray(sums(y, weight, scores)),
        np.asarray(y),
        np.asarray(weight),
        convex=False,
    )
    np.testing.assert_array_equal(score, np.asarray(expected))
    np.testing.assert_allclose(mean_loss, float(expected_loss), rtol=1e-5)

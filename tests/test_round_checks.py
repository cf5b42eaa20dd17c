"""After every chunk of rounds: non-finite derivatives stop the fit naming the
round, a loss that overflows only in float32 goes on in float64, and a round
that raises the training loss switches Armijo's safeguard on."""

import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.datasets import load_diabetes

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.round_checks import first_event
from jaxboost.engine.sampling import row_mask
from jaxboost.frontends.training import program_settings as settings_module
from jaxboost.frontends.training import rounds_loop


def _diabetes():
    X, y = load_diabetes(return_X_y=True)
    return X.astype(np.float32), y.astype(np.float32)


def _sqrt_trap(y, f):
    # finite everywhere, but its gradient is NaN where f <= 0: JAX
    # differentiates the branch that jnp.where does not take
    return jnp.where(f > 0, jnp.sqrt(f), 0.0) + (y - f) ** 2


def _sqrt_safe(y, f):
    return jnp.where(f > 0, jnp.sqrt(jnp.where(f > 0, f, 1.0)), 0.0) + (y - f) ** 2


def test_first_event_finds_the_first_round_that_went_wrong():
    losses_after = np.array([3.0, 2.0, 2.5, np.nan])
    assert first_event(losses_after, np.zeros(4, int), 4.0, True).index == 2
    assert first_event(losses_after, np.zeros(4, int), 4.0, True).kind == "loss_rose"
    assert first_event(losses_after, np.zeros(4, int), 4.0, False).kind == "not_finite_loss"
    event = first_event(losses_after, np.array([0, 7, 0, 0]), 4.0, True)
    assert (event.index, event.kind, event.n_rows) == (1, "not_finite_derivatives", 7)
    assert first_event(np.array([3.0, 2.9999999]), np.zeros(2, int), 3.0, True) is None


def test_first_event_judges_a_subsampled_round_on_its_in_bag_rows():
    losses_after = np.array([3.0, 3.5, 2.0])
    # the full loss rose at round 2 (3 -> 3.5), but not on the rows the round was fitted to
    in_bag = np.array([[4.0, 3.0], [2.8, 2.7], [3.0, 3.2]])
    assert first_event(losses_after[:2], np.zeros(2, int), 4.0, True, in_bag=in_bag[:2]) is None
    event = first_event(losses_after, np.zeros(3, int), 4.0, True, in_bag=in_bag)
    assert (event.index, event.kind, event.before, event.after, event.in_bag) == (
        2,
        "loss_rose",
        3.0,
        3.2,
        True,
    )


# fits of more rows run the fused chunk program; these reach it with few
_PATHS = ["round_by_round", "fused"]


def _take_path(monkeypatch, path):
    if path == "fused":
        monkeypatch.setattr(settings_module, "FAST_COMPILE_ROWS", 0)


# on the diabetes data's raw targets, a tree fitted to half the rows at
# learning rate 1 raises the other half's loss, and the full loss with it
_SUBSAMPLED = {
    "n_estimators": 10,
    "max_depth": 3,
    "subsample": 0.5,
    "learning_rate": 1.0,
    "random_state": 0,
    "rounds_per_chunk": 4,
}


@pytest.mark.parametrize("path", _PATHS)
def test_subsampling_alone_does_not_switch_armijo_on(monkeypatch, path):
    """A Newton step of squared error never raises its own rows' loss: the
    full loss's rises come from the out-of-bag rows, and leave Armijo off."""
    _take_path(monkeypatch, path)
    X, y = _diabetes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = jb.Booster(**_SUBSAMPLED).fit(X, y)
    assert model.armijo_ is False
    rises = np.diff(model.train_loss_) > 1e-3 * np.abs(model.train_loss_[:-1])
    assert np.any(rises)  # (what used to switch it on)
    plain = jb.Booster(**_SUBSAMPLED, armijo=False).fit(X, y)
    np.testing.assert_array_equal(model.predict_raw(X), plain.predict_raw(X))


@pytest.mark.parametrize("path", _PATHS)
def test_the_in_bag_losses_are_those_of_each_rounds_subsample(monkeypatch, path):
    """The losses a subsampled fit judges rises on equal numpy's, from the
    staged predictions and the rows each round drew."""
    _take_path(monkeypatch, path)
    reported = []

    def recording(*args, **kwargs):
        reported.append(kwargs.get("in_bag", args[5] if len(args) > 5 else None))
        return first_event(*args, **kwargs)

    monkeypatch.setattr(rounds_loop, "first_event", recording)
    X, y = _diabetes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (armijo=False's line about a rise: none either)
        model = jb.Booster(**_SUBSAMPLED, armijo=False).fit(X, y)
    # each chunk's first call (the second, for armijo=False's line, repeats it)
    in_bag = np.concatenate(reported[::2])
    staged = np.stack([np.full(y.shape, model.base_score_[0]), *model.staged_predict_raw(X)])
    row_loss = 0.5 * np.square(staged - y)  # (rounds + 1, rows): squared_error
    rows = np.arange(y.shape[0], dtype=np.uint32)
    expected = []
    for index in range(_SUBSAMPLED["n_estimators"]):
        drawn = np.asarray(row_mask(rows, index, np.uint32(0), np.float32(0.5)))
        expected.append(row_loss[index : index + 2, drawn].mean(axis=1))
    np.testing.assert_allclose(in_bag, np.array(expected), rtol=1e-5)


@pytest.mark.parametrize("path", _PATHS)
def test_a_newton_step_that_overshoots_its_own_rows_still_switches_armijo_on(monkeypatch, path):
    """Absolute error's Newton leaves -G / reg_lambda overshoot on the rows
    they were fitted to, subsample or not."""
    _take_path(monkeypatch, path)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 2)).astype(np.float32)
    settings = {"loss": "absolute_error", "leaf_method": "newton", "subsample": 0.5}
    with (
        pytest.warns(UserWarning, match="loss rose at round 1 on the rows its trees were fitted"),
        pytest.warns(UserWarning, match="leaf_method='newton' with a loss whose hessian"),
    ):
        model = jb.Booster(**settings, n_estimators=2, max_depth=2).fit(X, X[:, 0])
    assert model.armijo_ is True


def test_nan_gradients_at_the_initial_score_stop_the_fit_naming_the_cause():
    X, y = _diabetes()
    with pytest.raises(
        FloatingPointError, match=r"442 rows at round 1 \(at the initial score"
    ) as error:
        jb.Booster(loss=_sqrt_trap, n_estimators=5, max_depth=2).fit(X, y / 100 - 1.5)
    assert "jnp.where" in str(error.value)


# the trap's Newton steps overshoot before its NaN round (Armijo goes on, and says so)
@pytest.mark.filterwarnings("ignore:training loss rose:UserWarning")
def test_nan_gradients_in_a_later_round_stop_the_fit_naming_that_round():
    X, y = _diabetes()
    # a positive initial score; trees then take the scores of negative targets below 0
    targets = y / 100 - 1.0
    booster = jb.Booster(loss=_sqrt_trap, n_estimators=40, max_depth=3, base_score=1.0)
    with pytest.raises(
        FloatingPointError, match=r"rows at round ([2-9]|\d\d+) \(at the scores after"
    ):
        booster.fit(X, targets)


def test_a_round_that_raises_the_loss_switches_armijo_on_once():
    X, y = _diabetes()
    with pytest.warns(UserWarning, match="training loss rose at round") as record:
        # (min_child_samples=0: with the row rule's estimate of a child's rows
        # the trees differ and the loss no longer rises)
        model = jb.Booster(loss=_sqrt_safe, n_estimators=100, max_depth=3, min_child_samples=0).fit(
            X, y / 100
        )
    assert sum("rose" in str(w.message) for w in record) == 1
    assert model.armijo_ is True
    # from the switch on, no round raises the loss
    rises = np.diff(model.train_loss_) > 1e-3 * np.abs(model.train_loss_[:-1])
    assert not np.any(rises)
    assert model.train_loss_[-1] < 0.75 * model.train_loss_[0]


def test_armijo_false_keeps_it_off_and_says_so_once():
    X, y = _diabetes()
    with pytest.warns(UserWarning, match="armijo=False keeps") as record:
        # (min_child_samples=0: with the row rule's estimate of a child's rows
        # the trees differ and the loss no longer rises)
        model = jb.Booster(
            loss=_sqrt_safe, n_estimators=60, max_depth=3, armijo=False, min_child_samples=0
        ).fit(X, y / 100)
    assert sum("rose" in str(w.message) for w in record) == 1
    assert model.armijo_ is False


def test_a_loss_that_overflows_only_in_float32_is_evaluated_in_float64():
    X, y = _diabetes()
    natural = lambda y, f: jnp.log(jnp.cosh(f - y))
    settings = {"n_estimators": 40, "max_depth": 3, "learning_rate": 0.2}
    with pytest.warns(UserWarning, match="not finite in float32 at the initial score"):
        model = jb.Booster(loss=natural, **settings).fit(X, y)
    assert model.loss_dtype_ == "float64"
    # as good a model as the catalogue's log-cosh, written to stay finite in float32
    stable = jb.Booster(loss=losses.log_cosh, **settings).fit(X, y)
    assert stable.loss_dtype_ == "float32"
    assert model.train_loss_[-1] <= 1.05 * stable.train_loss_[-1]
    assert np.mean(np.abs(model.predict(X) - stable.predict(X))) < 0.1 * np.std(y)
    # asked for from the start: no warning, the same model
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        forced = jb.Booster(loss=natural, loss_dtype="float64", **settings).fit(X, y)
    np.testing.assert_array_equal(forced.predict(X), model.predict(X))
    with pytest.raises(ValueError, match=r"not finite, in float32\)"):
        jb.Booster(loss=natural, loss_dtype="float32", **settings).fit(X, y)
    with pytest.raises(ValueError, match="loss_dtype"):
        jb.Booster(loss=natural, loss_dtype="float16", **settings).fit(X, y)


def test_the_warnings_point_at_the_users_line():
    X, y = _diabetes()
    with pytest.warns(UserWarning, match="rose at round") as record:
        jb.Booster(loss=_sqrt_safe, n_estimators=60, max_depth=3, min_child_samples=0).fit(
            X, y / 100
        )
    assert {Path(w.filename).name for w in record} == {Path(__file__).name}

"""Tests of the loss catalogue: autodiff derivatives against closed forms, metadata, links."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxboost.losses import links

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.derivatives import grad_hess as eager_grad_hess

N_POINTS = 200
RTOL, ATOL = 1e-4, 1e-5

# Jitted once per (loss, shape): op-by-op dispatch of vmap(hessian) is slow.
grad_hess = jax.jit(eager_grad_hess, static_argnums=(0, 3))


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _grad_hess_1d(loss, y: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Autodiff gradient and hessian of a one-output loss, as ``(n_rows,)`` float64 arrays."""
    grad, hess = grad_hess(loss, jnp.asarray(y, jnp.float32), jnp.asarray(f, jnp.float32)[:, None])
    assert grad.shape == hess.shape == (len(f), 1)
    return np.asarray(grad[:, 0], np.float64), np.asarray(hess[:, 0], np.float64)


def _close(actual, expected, rtol: float = RTOL, atol: float = ATOL) -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=rtol, atol=atol)


# --- regression -------------------------------------------------------------------------------


def test_squared_error_negative_gradient_is_residual_and_hessian_is_one():
    rng = _rng(1)
    y, f = rng.normal(size=N_POINTS) * 3, rng.normal(size=N_POINTS) * 3
    grad, hess = _grad_hess_1d(losses.squared_error, y, f)
    _close(-grad, y - f)
    _close(hess, np.ones(N_POINTS))


def test_absolute_error_gradient_is_sign_away_from_kink():
    rng = _rng(2)
    y, f = rng.normal(size=N_POINTS), rng.normal(size=N_POINTS)
    keep = np.abs(f - y) > 1e-3
    grad, hess = _grad_hess_1d(losses.absolute_error, y[keep], f[keep])
    _close(grad, np.sign(f[keep] - y[keep]))
    _close(hess, 0.0)


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9])
def test_quantile_gradient_is_minus_alpha_above_and_one_minus_alpha_below(alpha):
    rng = _rng(3)
    y, f = rng.normal(size=N_POINTS), rng.normal(size=N_POINTS)
    keep = np.abs(f - y) > 1e-3
    y, f = y[keep], f[keep]
    grad, hess = _grad_hess_1d(losses.quantile(alpha), y, f)
    _close(grad, np.where(y > f, -alpha, 1.0 - alpha))
    _close(hess, 0.0)
    value = jax.vmap(losses.quantile(alpha))(y, f)
    _close(value, np.maximum(alpha * (y - f), (alpha - 1.0) * (y - f)))


@pytest.mark.parametrize("delta", [0.5, 1.0, 2.0])
def test_huber_matches_clipped_residual(delta):
    rng = _rng(4)
    y, f = rng.normal(size=N_POINTS) * 2, rng.normal(size=N_POINTS) * 2
    diff = f - y
    keep = np.abs(np.abs(diff) - delta) > 1e-3
    y, f, diff = y[keep], f[keep], diff[keep]
    grad, hess = _grad_hess_1d(losses.huber(delta), y, f)
    _close(grad, np.clip(diff, -delta, delta))
    _close(hess, (np.abs(diff) <= delta).astype(float))
    inside = np.abs(diff) <= delta
    expected = np.where(inside, 0.5 * diff**2, delta * (np.abs(diff) - 0.5 * delta))
    _close(jax.vmap(losses.huber(delta))(y, f), expected)


def test_log_cosh_gradient_is_tanh_including_zero_residual():
    rng = _rng(5)
    y, f = rng.normal(size=N_POINTS) * 3, rng.normal(size=N_POINTS) * 3
    f[:5] = y[:5]  # d = 0 exactly, where the |d| form must still give hessian 1
    diff = f - y
    grad, hess = _grad_hess_1d(losses.log_cosh, y, f)
    _close(grad, np.tanh(diff))
    _close(hess, 1.0 - np.tanh(diff) ** 2)
    _close(jax.vmap(losses.log_cosh)(y, f), np.log(np.cosh(diff)))


def test_log_cosh_gradient_is_exact_for_tiny_residuals():
    """Differentiated as written (|d| + softplus(-2|d|)), the gradient is
    1 - 2 sigmoid(-2|d|), which float32 rounds to 0 below |d| = 3e-8."""
    diff = jnp.asarray([1e-9, -2e-8, 1e-6, 1e-4], jnp.float32)
    grad, hess = _grad_hess_1d(losses.log_cosh, jnp.zeros(4), diff)
    np.testing.assert_allclose(grad, np.tanh(np.asarray(diff, np.float64)), rtol=1e-6)
    np.testing.assert_allclose(hess, 1.0, rtol=1e-6)


# --- classification ---------------------------------------------------------------------------


def test_binary_logloss_gradient_and_hessian_on_log_odds():
    rng = _rng(6)
    y, f = rng.integers(0, 2, N_POINTS).astype(float), rng.normal(size=N_POINTS) * 4
    p = _sigmoid(f)
    grad, hess = _grad_hess_1d(losses.binary_logloss, y, f)
    _close(grad, p - y)
    _close(hess, p * (1 - p))
    _close(jax.vmap(losses.binary_logloss)(y, f), -(y * np.log(p) + (1 - y) * np.log(1 - p)))


def test_likelihood_derivative_in_p_is_not_the_log_odds_gradient():
    """``y/p - (1-y)/(1-p)`` is d(log-likelihood)/dp, not the pseudo-residual ``y - p``."""
    rng = _rng(7)
    y = rng.integers(0, 2, N_POINTS).astype(np.float32)
    f = (rng.normal(size=N_POINTS) * 2).astype(np.float32)
    p = jax.nn.sigmoid(f)

    def log_likelihood(y, p):
        return y * jnp.log(p) + (1 - y) * jnp.log(1 - p)

    dll_dp = jax.vmap(jax.grad(log_likelihood, argnums=1))(y, p)
    p64, y64 = np.asarray(p, np.float64), y.astype(np.float64)
    _close(dll_dp, y64 / p64 - (1 - y64) / (1 - p64), rtol=1e-3)

    negative_grad, _ = _grad_hess_1d(losses.binary_logloss, y, f)
    negative_grad = -negative_grad
    _close(negative_grad, y64 - p64)
    # They differ by the factor 1 / (p (1 - p)) >= 4 (the chain rule's dp/df):
    assert not np.allclose(dll_dp, negative_grad, rtol=0.1)
    _close(np.asarray(dll_dp) * p64 * (1 - p64), negative_grad, rtol=1e-3, atol=1e-4)


def test_softmax_cross_entropy_gradient_and_hessians():
    rng = _rng(8)
    n_classes = 4
    y = rng.integers(0, n_classes, N_POINTS).astype(np.float32)
    raw = rng.normal(size=(N_POINTS, n_classes)) * 2
    p = _softmax(raw)
    one_hot = np.eye(n_classes)[y.astype(int)]
    grad, hess = grad_hess(losses.softmax_cross_entropy, jnp.asarray(y), jnp.asarray(raw))
    _, full = grad_hess(
        losses.softmax_cross_entropy, jnp.asarray(y), jnp.asarray(raw), full_hessian=True
    )
    assert grad.shape == hess.shape == (N_POINTS, n_classes)
    assert full.shape == (N_POINTS, n_classes, n_classes)
    _close(grad, p - one_hot)
    _close(hess, p * (1 - p))
    expected_full = jax.vmap(jnp.diag)(p) - p[:, :, None] * p[:, None, :]
    _close(full, expected_full)
    value = jax.vmap(losses.softmax_cross_entropy)(y, raw)
    _close(value, -np.log(p[np.arange(N_POINTS), y.astype(int)]))


def test_exponential_loss_closed_form():
    rng = _rng(9)
    y, f = rng.integers(0, 2, N_POINTS).astype(float), rng.normal(size=N_POINTS) * 2
    sign = 2 * y - 1
    grad, hess = _grad_hess_1d(losses.exponential, y, f)
    _close(grad, -sign * np.exp(-sign * f))
    _close(hess, np.exp(-sign * f))


def _focal_grad(y: np.ndarray, f: np.ndarray, gamma: float) -> np.ndarray:
    """Hand-derived d(focal)/df, float64; linear in y."""
    p = _sigmoid(f)
    grad_positive = (1 - p) ** gamma * (gamma * p * np.log(p) - (1 - p))
    grad_negative = p**gamma * (p - gamma * (1 - p) * np.log(1 - p))
    return y * grad_positive + (1 - y) * grad_negative


def test_focal_with_gamma_zero_is_binary_logloss():
    rng = _rng(10)
    y, f = rng.integers(0, 2, N_POINTS).astype(float), rng.normal(size=N_POINTS) * 4
    focal = losses.focal(0.0)
    _close(jax.vmap(focal)(y, f), jax.vmap(losses.binary_logloss)(y, f))
    for actual, expected in zip(
        _grad_hess_1d(focal, y, f), _grad_hess_1d(losses.binary_logloss, y, f), strict=True
    ):
        _close(actual, expected)


@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_focal_gradient_and_hessian_closed_form(gamma):
    rng = _rng(11)
    y, f = rng.integers(0, 2, N_POINTS).astype(float), rng.normal(size=N_POINTS) * 3
    grad, hess = _grad_hess_1d(losses.focal(gamma), y, f)
    _close(grad, _focal_grad(y, f, gamma))
    step = 1e-5  # central differences of the closed-form gradient, in float64
    expected_hess = (_focal_grad(y, f + step, gamma) - _focal_grad(y, f - step, gamma)) / (2 * step)
    _close(hess, expected_hess, rtol=1e-3, atol=1e-4)


# --- distributions ----------------------------------------------------------------------------


def test_poisson_closed_form():
    rng = _rng(12)
    y, f = rng.poisson(3.0, N_POINTS).astype(float), rng.normal(size=N_POINTS)
    grad, hess = _grad_hess_1d(losses.poisson, y, f)
    _close(grad, np.exp(f) - y)
    _close(hess, np.exp(f))


def test_gamma_closed_form():
    rng = _rng(13)
    y, f = rng.gamma(2.0, 1.5, N_POINTS), rng.normal(size=N_POINTS)
    grad, hess = _grad_hess_1d(losses.gamma, y, f)
    _close(grad, 1 - y * np.exp(-f))
    _close(hess, y * np.exp(-f))


@pytest.mark.parametrize("power", [1.2, 1.5, 1.8])
def test_tweedie_closed_form(power):
    rng = _rng(14)
    y = rng.poisson(1.0, N_POINTS) * rng.gamma(2.0, 1.0, N_POINTS)  # compound Poisson-gamma
    f = rng.normal(size=N_POINTS)
    grad, hess = _grad_hess_1d(losses.tweedie(power), y, f)
    _close(grad, -y * np.exp((1 - power) * f) + np.exp((2 - power) * f))
    _close(hess, -(1 - power) * y * np.exp((1 - power) * f) + (2 - power) * np.exp((2 - power) * f))


def test_gaussian_nll_closed_form():
    rng = _rng(15)
    y = rng.normal(size=N_POINTS) * 2
    raw = np.stack([rng.normal(size=N_POINTS), rng.normal(size=N_POINTS) * 0.5], axis=1)
    mean, log_scale = raw[:, 0], raw[:, 1]
    precision, resid = np.exp(-2 * log_scale), y - mean
    grad, full = grad_hess(
        losses.gaussian_nll, jnp.asarray(y, jnp.float32), jnp.asarray(raw, jnp.float32), True
    )
    expected_grad = np.stack([-resid * precision, 1 - resid**2 * precision], axis=1)
    cross = 2 * resid * precision
    expected_full = np.stack(
        [
            np.stack([precision, cross], axis=1),
            np.stack([cross, 2 * resid**2 * precision], axis=1),
        ],
        axis=1,
    )
    _close(grad, expected_grad)
    _close(full, expected_full, rtol=1e-4, atol=1e-4)
    expected_value = log_scale + 0.5 * resid**2 * precision
    _close(jax.vmap(losses.gaussian_nll)(y, raw), expected_value)


# --- every catalogue loss ---------------------------------------------------------------------

CASES = {
    "squared_error": losses.squared_error,
    "absolute_error": losses.absolute_error,
    "huber": losses.huber(1.5),
    "quantile": losses.quantile(0.9),
    "log_cosh": losses.log_cosh,
    "binary_logloss": losses.binary_logloss,
    "exponential": losses.exponential,
    "softmax_cross_entropy": losses.softmax_cross_entropy,
    "focal": losses.focal(2.0),
    "poisson": losses.poisson,
    "gamma": losses.gamma,
    "tweedie": losses.tweedie(1.5),
    "gaussian_nll": losses.gaussian_nll,
}
N_CLASSES = 3


def _sample(loss, n_rows: int, scale: float, seed: int = 0) -> tuple[jax.Array, jax.Array]:
    """Targets valid for the loss and raw scores ``(n_rows, n_outputs)`` of size ``scale``."""
    rng = _rng(seed)
    n_outputs = N_CLASSES if loss.n_outputs == "n_classes" else loss.n_outputs
    if loss.link in ("sigmoid", "sigmoid2"):
        y = rng.integers(0, 2, n_rows)
    elif loss.link == "softmax":
        y = rng.integers(0, N_CLASSES, n_rows)
    elif loss.link == "exp":
        y = rng.gamma(2.0, 1.0, n_rows)
    else:
        y = rng.normal(size=n_rows)
    raw = rng.uniform(-scale, scale, (n_rows, n_outputs))
    return jnp.asarray(y, jnp.float32), jnp.asarray(raw, jnp.float32)


def _per_sample(loss, y: jax.Array, raw: jax.Array) -> jax.Array:
    f = raw[:, 0] if raw.shape[1] == 1 else raw
    return jax.jit(jax.vmap(loss))(y, f)


# the catalogue's group losses, tested in test_group_losses.py
GROUP_LOSSES = {"listnet", "ranknet", "lambdarank", "cox"}
# the numpyro families, tested in test_distribution_losses.py
DISTRIBUTION_LOSSES = {f"distribution:{family}" for family in losses.FAMILIES}


def test_cases_cover_the_catalogue():
    assert set(CASES) | GROUP_LOSSES | DISTRIBUTION_LOSSES == set(losses.available())
    assert all(losses.get(name).per == "group" for name in GROUP_LOSSES)
    assert all(loss.per == "sample" for loss in CASES.values())
    assert set(losses.CATALOGUE) == set(losses.available())


@pytest.mark.parametrize("name", sorted(CASES))
def test_catalogue_loss_metadata(name):
    loss = CASES[name]
    assert loss.name == name
    assert loss.link in links.LINKS
    assert loss.n_outputs in (1, 2, "n_classes")
    expected = {"absolute_error": False, "quantile": False, "huber": None, "log_cosh": None}
    assert loss.hessian_informative is expected.get(name, True)
    assert isinstance(loss.params, dict)


@pytest.mark.parametrize("name", sorted(CASES))
def test_catalogue_loss_jit_vmap_float32_scalar(name):
    loss = CASES[name]
    y, raw = _sample(loss, 64, scale=3.0)
    value = _per_sample(loss, y, raw)
    assert value.shape == (64,)
    assert value.dtype == jnp.float32
    assert np.all(np.isfinite(value))


@pytest.mark.parametrize("name", sorted(CASES))
def test_catalogue_loss_finite_at_large_scores(name):
    loss = CASES[name]
    y, raw = _sample(loss, 32, scale=1.0, seed=1)
    raw = 30.0 * jnp.sign(raw)  # |f| = 30 in every output
    value = _per_sample(loss, y, raw)
    grad, hess = grad_hess(loss, y, raw)
    for array in (value, grad, hess):
        assert np.all(np.isfinite(array)), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_get_rebuilds_an_equivalent_loss(name):
    loss = CASES[name]
    rebuilt = losses.get(loss.name, **loss.params)
    assert (rebuilt.name, rebuilt.params, rebuilt.link) == (loss.name, loss.params, loss.link)
    y, raw = _sample(loss, 50, scale=3.0, seed=2)
    _close(_per_sample(rebuilt, y, raw), _per_sample(loss, y, raw), rtol=0, atol=0)


def test_get_aliases_and_errors():
    assert losses.get("l2") is losses.squared_error
    assert losses.get("squared_error") is losses.squared_error
    assert losses.get("l1") is losses.absolute_error
    assert losses.get("logloss") is losses.binary_logloss
    assert losses.get("binary_logloss") is losses.binary_logloss
    assert losses.get("softmax") is losses.softmax_cross_entropy
    assert losses.get("multiclass") is losses.softmax_cross_entropy
    assert losses.get("quantile", alpha=0.25).params == {"alpha": 0.25}
    with pytest.raises(ValueError, match="unknown loss 'nope'.*squared_error"):
        losses.get("nope")
    with pytest.raises(ValueError, match="takes no parameters"):
        losses.get("poisson", power=1.5)
    with pytest.raises(ValueError, match="bad parameters"):
        losses.get("huber", alpha=0.5)
    with pytest.raises(ValueError, match="alpha.*loss_params=.*losses.quantile"):
        losses.get("quantile")  # (a name without its required parameter)


@pytest.mark.parametrize(
    ("factory", "bad"),
    [
        (losses.huber, {"delta": 0.0}),
        (losses.quantile, {"alpha": 1.0}),
        (losses.tweedie, {"power": 2.0}),
        (losses.focal, {"gamma": -1.0}),
    ],
)
def test_factories_reject_bad_parameters(factory, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        factory(**bad)


def test_declare_rejects_unknown_link():
    with pytest.raises(ValueError, match="link must be one of"):
        losses.declare(name="x", link="probit")


# --- links ------------------------------------------------------------------------------------


def test_links_map_shapes_and_values():
    rng = _rng(16)
    raw_1d = rng.normal(size=20).astype(np.float32) * 3
    raw_2d = rng.normal(size=(20, 4)).astype(np.float32) * 3
    for name in ("identity", "sigmoid", "sigmoid2", "exp"):
        link = links.get(name)
        assert link(raw_1d).shape == (20,)
        assert link(raw_2d).shape == (20, 4)
    _close(links.get("identity")(raw_1d), raw_1d)
    _close(links.get("sigmoid")(raw_1d), _sigmoid(raw_1d.astype(np.float64)), rtol=1e-5)
    _close(links.get("sigmoid2")(raw_1d), _sigmoid(2 * raw_1d.astype(np.float64)), rtol=1e-5)
    _close(links.get("exp")(raw_1d), np.exp(raw_1d.astype(np.float64)), rtol=1e-5)

    proba = links.get("softmax")(raw_2d)
    assert proba.shape == (20, 4)
    _close(proba.sum(axis=1), np.ones(20))
    _close(proba, _softmax(raw_2d.astype(np.float64)), rtol=1e-5, atol=1e-7)

    mean_scale = links.get("mean_scale")(raw_2d[:, :2])
    assert mean_scale.shape == (20, 2)
    _close(mean_scale[:, 0], raw_2d[:, 0])
    _close(mean_scale[:, 1], np.exp(raw_2d[:, 1].astype(np.float64)), rtol=1e-5)


def test_links_errors():
    with pytest.raises(ValueError, match="unknown link 'probit'"):
        links.get("probit")
    with pytest.raises(ValueError, match="size 2"):
        links.mean_scale(np.zeros((3, 3)))


# --- optax adapter ----------------------------------------------------------------------------


def test_from_optax_huber_matches_catalogue_huber():
    rng = _rng(17)
    y, f = rng.normal(size=N_POINTS) * 3, rng.normal(size=N_POINTS) * 3
    adapted = losses.from_optax(optax.losses.huber_loss, delta=1.5)
    assert adapted.name == "optax:huber_loss" and adapted.link == "identity"
    _close(jax.vmap(adapted)(y, f), jax.vmap(losses.huber(1.5))(y, f))
    for actual, expected in zip(
        _grad_hess_1d(adapted, y, f), _grad_hess_1d(losses.huber(1.5), y, f), strict=True
    ):
        _close(actual, expected)


def test_from_optax_sigmoid_cross_entropy_matches_binary_logloss():
    rng = _rng(18)
    y, f = rng.integers(0, 2, N_POINTS).astype(float), rng.normal(size=N_POINTS) * 4
    adapted = losses.from_optax(optax.sigmoid_binary_cross_entropy, link="sigmoid")
    assert adapted.link == "sigmoid" and adapted.n_outputs == 1
    _close(jax.vmap(adapted)(y, f), jax.vmap(losses.binary_logloss)(y, f))
    grad, hess = _grad_hess_1d(adapted, y, f)
    _close(grad, _sigmoid(f) - y)
    _close(hess, _sigmoid(f) * (1 - _sigmoid(f)))


def test_from_optax_rebuilds_through_get():
    adapted = losses.from_optax(optax.losses.huber_loss, delta=0.7)
    rebuilt = losses.get(adapted.name, **adapted.params)
    assert rebuilt.params == adapted.params
    y, f = jnp.linspace(-3, 3, 11), jnp.zeros(11)
    _close(jax.vmap(rebuilt)(y, f), jax.vmap(adapted)(y, f), rtol=0, atol=0)
    with pytest.raises(ValueError, match="no optax loss named"):
        losses.get("optax:not_a_loss")


def test_factories_give_the_same_loss_for_the_same_parameters():
    # the engine caches compiled programs on the loss object
    assert losses.quantile(0.9) is losses.quantile(alpha=0.9)
    assert losses.huber() is losses.get("huber") is losses.huber(delta=1.0)
    assert losses.huber(1.0) is not losses.huber(2.0)
    assert losses.get("tweedie", power=1.3) is losses.tweedie(1.3)


@pytest.mark.parametrize(
    ("loss", "bad_targets", "message"),
    [
        (losses.binary_logloss, [0.0, 1.0, -1.0, 1.0], r"in \[0, 1\].*row 2: -1.0"),
        (losses.focal(2.0), [0.0, 2.0, 1.0, 0.0], r"in \[0, 1\].*row 1: 2.0"),
        (losses.exponential, [0.0, 0.5, 1.0, 1.0], "0 or 1.*row 1: 0.5"),
        (losses.softmax_cross_entropy, [0.0, 1.5, 2.0, 1.0], "class labels.*row 1: 1.5"),
        (losses.softmax_cross_entropy, [0.0, -1.0, 2.0, 1.0], "class labels.*row 1: -1.0"),
        (losses.poisson, [3.0, 0.0, -2.0, 1.0], ">= 0.*row 2: -2.0"),
        (losses.tweedie(1.5), [3.0, -0.1, 0.0, 1.0], ">= 0.*row 1: -0.1"),
        (losses.gamma, [3.0, 0.0, 2.0, 1.0], "> 0.*row 1: 0.0"),
    ],
)
def test_fit_refuses_targets_outside_a_catalogue_loss_domain(loss, bad_targets, message):
    X = np.arange(16, dtype=np.float32).reshape(8, 2)
    y = np.tile(np.asarray(bad_targets, np.float32), 2)
    with pytest.raises(ValueError, match=f"y: the loss '{loss.name}' needs targets .*{message}"):
        jb.Booster(loss=loss, n_estimators=2).fit(X, y)
    good = np.tile(np.asarray([0.0, 1.0, 1.0, 0.0], np.float32) + (loss is losses.gamma), 2)
    with pytest.raises(ValueError, match=r"eval_set\[0\] y: the loss"):
        jb.Booster(loss=loss, n_estimators=2).fit(X, good, eval_set=[(X, y)])
    jb.Booster(loss=loss, n_estimators=2).fit(X, good)  # targets in the domain: fits


def test_a_declared_target_domain_must_be_known():
    with pytest.raises(ValueError, match="target_domain must be one of"):
        losses.declare(name="mine", link="identity", target_domain="counts")
    assert losses.squared_error.target_domain == "any"


def test_a_class_loss_with_one_class_in_the_labels_is_refused():
    X = np.arange(16, dtype=np.float32).reshape(8, 2)
    with pytest.raises(ValueError, match="softmax_cross_entropy' scores classes .* at least two"):
        jb.Booster(loss="softmax_cross_entropy", n_estimators=2).fit(X, np.zeros(8))


def test_declare_defaults_the_name_and_link_and_takes_the_function():
    def asymmetric(y, f):
        return jnp.where(y > f, 2.0, 1.0) * (y - f) ** 2

    bare = losses.declare()(asymmetric)
    assert (bare.name, bare.link, bare.per) == ("asymmetric", "identity", "sample")
    direct = losses.declare(asymmetric, convex=True)
    assert (direct.name, direct.link, direct.convex) == ("asymmetric", "identity", True)
    assert float(direct(3.0, 1.0)) == 8.0
    named = losses.declare(asymmetric, name="mine", link="exp")
    assert (named.name, named.link) == ("mine", "exp")
    group = losses.declare(lambda y, f, mask: jnp.sum(jnp.where(mask, f - y, 0.0)), per="group")
    assert (group.name, group.per) == ("<lambda>", "group")


def test_a_three_argument_loss_not_declared_per_group_is_told_to_declare_it():
    def group_squares(y, f, mask):
        return jnp.sum(jnp.where(mask, (f - y) ** 2, 0.0))

    X = np.arange(16, dtype=np.float32).reshape(8, 2)
    y = np.arange(8, dtype=np.float32)
    message = r"'group_squares' takes 3 arguments \(y, f, mask\).*losses.declare\(group_squares"
    with pytest.raises(ValueError, match=message):
        jb.Booster(loss=group_squares, n_estimators=2).fit(X, y)
    declared = losses.declare(group_squares, per="sample")
    with pytest.raises(ValueError, match='per="group"'):
        jb.Booster(loss=declared, n_estimators=2).fit(X, y)
    # declared per group it trains (all rows one group), and a default makes it per sample
    jb.Booster(loss=losses.declare(group_squares, per="group"), n_estimators=2).fit(X, y)
    jb.Booster(loss=lambda y, f, scale=2.0: scale * (f - y) ** 2, n_estimators=2).fit(X, y)


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (losses.huber, "delta"),
        (losses.quantile, "alpha"),
        (losses.focal, "gamma"),
        (losses.tweedie, "power"),
        (losses.ranknet, "sigma"),
    ],
)
@pytest.mark.parametrize("value", [float("inf"), float("nan"), "1", None])
def test_a_factory_refuses_a_parameter_that_is_no_finite_number(factory, name, value):
    # huber(inf) was accepted and the fit then blamed y; huber("1") a bare TypeError
    with pytest.raises(ValueError, match=rf"{factory.__name__}: {name} must be a finite number"):
        factory(value)


def test_from_optax_takes_a_partial_binding_options_by_keyword():
    # it raised AttributeError: 'functools.partial' object has no attribute '__name__'
    bound = losses.from_optax(functools.partial(optax.losses.huber_loss, delta=2.0))
    assert bound is losses.from_optax(optax.losses.huber_loss, delta=2.0)
    with pytest.raises(ValueError, match="fn: functools.partial of huber_loss binds positional"):
        losses.from_optax(functools.partial(optax.losses.huber_loss, 1.0))

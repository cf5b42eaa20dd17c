"""The negative binomial family (`losses.negative_binomial`): its float32
log-probability up to the Poisson limit and its deterministic Fisher
information.

References: scipy.stats' ``nbinom`` in float64; the hessian (by autodiff) of
the expected negative log-likelihood, summed over scipy's probabilities;
the outer products of gradients at numpyro's draws.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from jaxboost.losses import negative_binomial

import jaxboost as jb
from jaxboost import losses
from jaxboost.frontends.fitted import distribution_predict

# (mean, concentration): overdispersed, near Poisson, few counts, large counts
_GRID = [(5.8, 1.3), (0.1, 0.1), (30.0, 0.5), (2.0, 15.0), (4.0, 300.0), (1000.0, 5.0)]
# counts 0 .. _COUNTS - 1 hold all but 1e-9 of every grid point's probability
_COUNTS = 8192


def _raw(mu: float, r: float) -> jax.Array:
    return jnp.log(jnp.array([mu, r], jnp.float32))


def _nbinom(mu: float, r: float):
    return st.nbinom(r, r / (r + mu))


@pytest.mark.parametrize("r", [0.7, 30.0, 1e4, 1e6, 1e8])
def test_log_prob_keeps_its_digits_up_to_the_poisson_limit(r):
    # numpyro's gammaln difference read a negative NLL at r of about 2e4
    loss = losses.distribution("negative_binomial")
    y = np.array([0, 1, 4, 9, 40], np.float32)
    nll = np.asarray(jax.vmap(loss, (0, None))(jnp.asarray(y), _raw(4.0, r)))
    np.testing.assert_allclose(nll, -_nbinom(4.0, r).logpmf(y), rtol=2e-5, atol=2e-5)


def test_past_the_largest_concentration_the_poisson_gains_a_barrier():
    loss = losses.distribution("negative_binomial")
    y = np.array([0, 3, 9], np.float32)
    f = jnp.array([np.log(4.0), np.log(negative_binomial.MAX_CONCENTRATION) + 2.0], jnp.float32)
    nll = np.asarray(jax.vmap(loss, (0, None))(jnp.asarray(y), f))
    np.testing.assert_allclose(nll, -st.poisson(4.0).logpmf(y) + 0.5 * 2.0**2, rtol=1e-5)


@jax.jit
def _expected_nll_hessian_at(weight: jax.Array, f: jax.Array) -> jax.Array:
    """``d^2 / df^2 sum_y weight[y] nll(y, f)``, ``y = 0, 1, ...`` (one program for the grid)."""
    loss = losses.distribution("negative_binomial")
    y = jnp.arange(weight.shape[0], dtype=jnp.float32)
    return jax.hessian(lambda f: jnp.sum(weight * jax.vmap(loss, (0, None))(y, f)))(f)


def _expected_nll_hessian(mu: float, r: float) -> np.ndarray:
    """The hessian of the expected NLL under scipy's probabilities at ``f0 =
    (log mu, log r)``, at ``f0``: the Fisher information."""
    weight = _nbinom(mu, r).pmf(np.arange(_COUNTS))
    assert weight.sum() > 1 - 1e-9  # the grid holds the counts
    return np.asarray(_expected_nll_hessian_at(jnp.asarray(weight, jnp.float32), _raw(mu, r)))


@pytest.mark.parametrize("mu, r", _GRID)
def test_fisher_is_the_hessian_of_the_expected_nll(mu, r):
    reference = _expected_nll_hessian(mu, r)
    exact = negative_binomial.log_concentration_information(jnp.float32(mu), jnp.float32(r))
    np.testing.assert_allclose(float(exact), reference[1, 1], rtol=0.01)
    info = np.asarray(losses.distribution("negative_binomial").fisher(_raw(mu, r)))
    expected = np.diag([reference[0, 0], max(reference[1, 1], 1e-3)])  # the floor
    np.testing.assert_allclose(info, expected, rtol=0.01, atol=1e-4 * np.abs(reference).max())
    assert info[0, 1] == info[1, 0] == 0.0


def test_fisher_matches_the_sampled_fisher_information():
    loss = losses.distribution("negative_binomial")
    f = _raw(5.8, 1.3)
    draws = loss.sampler(jax.random.PRNGKey(0), f, 30_000)
    grads = jax.vmap(jax.grad(loss, argnums=1), (0, None))(draws, f)
    sampled = np.asarray(grads.T @ grads) / draws.shape[0]
    closed = np.asarray(loss.fisher(f))
    np.testing.assert_allclose(sampled, closed, rtol=0.03, atol=0.03 * np.abs(closed).max())


def test_fisher_is_finite_and_semi_definite_over_the_raw_range():
    loss = losses.distribution("negative_binomial")
    grid = jnp.stack(jnp.meshgrid(jnp.linspace(-8, 8, 17), jnp.linspace(-8, 25, 34)), -1)
    info = np.asarray(jax.vmap(loss.fisher)(grid.reshape(-1, 2)))
    assert np.all(np.isfinite(info))
    assert np.all(info[:, [0, 1], [0, 1]] >= 0)


def _binomial_counts(n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts of Binomial(10, 0.5 +- 0.1 by the sign of x0): under-dispersed
    (variance 3.4 below the mean 5; 2.4 given x0)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 2)).astype(np.float32)
    y = rng.binomial(10, 0.5 + 0.1 * np.sign(X[:, 0])).astype(np.float32)
    return X, y


def _held_out_nll(loss, model, X, y) -> float:
    raw = jnp.asarray(model.predict_raw(X))
    return float(jnp.mean(jax.vmap(loss)(jnp.asarray(y), raw)))


def test_under_dispersed_counts_fit_as_a_poisson():
    # the log concentration's information vanishes near Poisson, so a Fisher
    # step grew as r: r reached inf and the fit failed with NaN gradients
    # at round 2 (and numpyro's density read a negative NLL on the way)
    X, y = _binomial_counts(700, 0)
    train, test = slice(0, 500), slice(500, None)
    assert y[train].var() < y[train].mean()
    nb = losses.distribution("negative_binomial")
    settings = {"n_estimators": 40, "early_stopping": False, "max_depth": 2}
    # (the likelihood is flat in float32 below the cap: the start's search may say so)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "loss 'distribution:negative_binomial': the search")
        model = jb.Booster(loss=nb, **settings).fit(X[train], y[train])
    raw = model.predict_raw(X[test])
    assert np.all(np.isfinite(raw))
    # the best a Poisson can do: the true means, 4 or 6 by the sign of x0
    true_mean = 10 * (0.5 + 0.1 * np.sign(X[test, 0]))
    for mean in (4.0, 6.0):
        assert np.mean(np.exp(raw[true_mean == mean, 0])) == pytest.approx(mean, rel=0.05)
    best_poisson = -np.mean(st.poisson(true_mean).logpmf(y[test]))
    assert _held_out_nll(nb, model, X[test], y[test]) == pytest.approx(best_poisson, abs=0.02)
    # near Poisson (the two differ by 1e-6 nats past 1e6), below the barrier
    assert np.all(raw[:, 1] > np.log(1e6))
    assert np.all(raw[:, 1] < np.log(negative_binomial.MAX_CONCENTRATION) + 0.1)


@pytest.mark.parametrize("r", [3.0, 1e3, 1e5, 1e8])
def test_quantiles_and_cdf_hold_up_to_the_poisson_limit(r):
    # numpyro's cdf read 0.06 for 0.13 at r = 1e6 and 1e8 at r = 1e8, so the
    # quantiles of a near-Poisson fit were -1
    loss = losses.distribution("negative_binomial")
    dist = distribution_predict.predict_distribution(loss, np.asarray(_raw(4.9, r))[None])
    levels = np.array([0.05, 0.3, 0.5, 0.9, 0.99])
    expected = _nbinom(4.9, r).ppf(levels)
    np.testing.assert_array_equal(distribution_predict.quantiles(dist, levels)[0], expected)
    x = np.arange(15.0)
    cdf = np.asarray(negative_binomial.cdf(dist, jnp.asarray(x, jnp.float32)))[..., :]
    np.testing.assert_allclose(cdf.ravel(), _nbinom(4.9, r).cdf(x), atol=1e-3)

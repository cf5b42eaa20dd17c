"""The negative binomial of mean ``mu`` and concentration ``r`` (variance
``mu + mu^2 / r``, numpyro's ``NegativeBinomial2``): a log-probability that
keeps its digits in float32 up to the Poisson limit ``r -> inf``, and its
Fisher information in the raw scores ``(log mu, log r)``.

The information is exact to about 1% (a deterministic rule, no draws):
``diag(mu r / (mu + r), I_r)``, the cross term 0, where ``I_r``, the log
concentration's, is ``r^2 (trigamma(r) - E[trigamma(r + y)] - mu / (r (r +
mu)))``.  Its expectation over the counts ``y`` is a one-dimensional integral,
whatever the counts' scale (``trigamma(x) = int t e^(-x t) / (1 - e^(-t))
dt`` and ``E[e^(-t y)]`` the probability generating function at ``e^(-t)``),
taken by the trapezoid rule in ``log t`` on `QUADRATURE_NODES` nodes; far
from the bulk of the counts (``r > 10 (mu + 1)``, near Poisson) the integral
cancels in float32 and the series ``mu^2 r / (2 (mu + r)^2 (r + 1))`` (off
by about ``mu / r^2``) takes over.  tests/test_distribution_losses.py checks
both against autodiff of the expected negative log-likelihood and draws.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaincc, gammaln

# nodes of the trapezoid rule in log t (its error falls exponentially with
# them for this analytic integrand: below 1e-6 where float32 lets it)
QUADRATURE_NODES = 128
# past this ratio r / (mu + 1) the near-Poisson series replaces the integral
_SERIES_RATIO = 10.0
# the least information of log r a row contributes: near Poisson the true one,
# about mu^2 / (2 r^2), vanishes, so that a Fisher step -g / I in log r grows
# as r and reaches r = inf in a few rounds (the Poisson limit is a finite
# distance away in Fisher's metric) where the counts are not over-dispersed;
# floored, the step shrinks as 1 / r and r stays finite
LOG_CONCENTRATION_FLOOR = 1e-3
# the concentration the density uses at most: past it the negative binomial
# is the Poisson to float32's precision (their log densities differ by about
# ((y - mu)^2 - y) / (2 r)); where the counts are not over-dispersed the
# likelihood rises towards r = inf, and searches run r up until float32
# slopes underflow or exp overflows, so past it a barrier (log(r / cap))^2 / 2
# makes the cap the minimum
MAX_CONCENTRATION = 1e8
# past this concentration the cdf is the Poisson's: numpyro's incomplete beta
# loses digits (off by 1e-2 at r = 1e5, cdfs of 1e8 at 1e8); the Poisson's
# differs from the negative binomial's by at most about 0.14 mu / r (7e-4 at
# mu 10 here; scipy's, float64)
_POISSON_CDF_FROM = 2e3
# past this concentration Stirling's series replaces gammaln's difference
# (its first omitted term, 1 / (1260 r^5), is below 1e-8 there)
_STIRLING_FROM = 10.0


def _stirling_remainder(x: jax.Array) -> jax.Array:
    """``log Gamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2)``, ``x >= 10``."""
    inverse = 1.0 / x
    inverse_square = inverse * inverse
    return inverse * (1.0 / 12.0 - inverse_square * (1.0 / 360.0 - inverse_square / 1260.0))


def log_prob(dist, y: jax.Array) -> jax.Array:
    """``log p(y | mu, r)`` for a numpyro ``NegativeBinomial2`` ``dist``.

    ``log Gamma(y + r) - log Gamma(r)`` in float32 loses every digit past
    ``r`` of about 1e5, and numpyro's density with it (a negative NLL, then
    NaN gradients, where a fit drives ``r`` up on counts not over-dispersed);
    past `_STIRLING_FROM` the difference is written by Stirling's series in
    ``log1p(y / r)``, whose limit is the Poisson's log-probability.  ``r``
    past `MAX_CONCENTRATION` counts as that, less the barrier.
    """
    mu, r = dist.mean, jnp.minimum(dist.concentration, MAX_CONCENTRATION)
    barrier = 0.5 * jnp.square(_log_excess(dist.concentration))
    large = r > _STIRLING_FROM
    small_r = jnp.where(large, 1.0, r)  # each branch finite, so where's gradient is
    large_r = jnp.where(large, r, 2.0 * _STIRLING_FROM)
    exact = (
        gammaln(y + small_r)
        - gammaln(small_r)
        - small_r * jnp.log1p(mu / small_r)
        - y * jnp.log(small_r + mu)
    )
    series = (
        (large_r + y - 0.5) * jnp.log1p(y / large_r)
        - (large_r + y) * jnp.log1p(mu / large_r)
        - y
        + _stirling_remainder(large_r + y)
        - _stirling_remainder(large_r)
    )
    log_density = jnp.where(large, series, exact) + y * jnp.log(mu) - gammaln(y + 1.0)
    return log_density - barrier


def cdf(dist, x: jax.Array) -> jax.Array:
    """``P(y <= x)`` for a numpyro ``NegativeBinomial2`` ``dist``: numpyro's,
    the Poisson's of the same mean past `_POISSON_CDF_FROM`."""
    mu, r = dist.mean, dist.concentration
    near_poisson = r > _POISSON_CDF_FROM
    counts = jnp.floor(x)
    poisson = jnp.where(counts >= 0, gammaincc(jnp.maximum(counts, 0.0) + 1.0, mu), 0.0)
    exact = type(dist)(mu, jnp.where(near_poisson, 1.0, r), validate_args=False).cdf(x)
    return jnp.where(near_poisson, poisson, exact)


def _log_excess(concentration: jax.Array) -> jax.Array:
    """``max(log(concentration / MAX_CONCENTRATION), 0)``."""
    return jnp.maximum(jnp.log(concentration) - jnp.log(MAX_CONCENTRATION), 0.0)


def log_concentration_information(mu: jax.Array, r: jax.Array) -> jax.Array:
    """The Fisher information of ``log r`` (scalars ``mu``, ``r`` > 0)."""
    near_poisson = r > _SERIES_RATIO * (mu + 1.0)
    quadrature_r = jnp.where(near_poisson, 1.0, r)  # each branch finite
    series = mu * mu * r / (2.0 * (mu + r) ** 2 * (r + 1.0))
    return jnp.where(near_poisson, series, _information_integral(mu, quadrature_r))


def _information_integral(mu: jax.Array, r: jax.Array) -> jax.Array:
    """``r^2 int_0^inf e^(-r t) (t / (1 - e^(-t)) (1 - G(e^(-t))) - (1 - e^(-mu
    t))) dt``, ``G`` the counts' generating function ``(r / (r + mu (1 -
    z)))^r``: the trapezoid rule in ``log t`` from ``1e-3 / (mu + r + 1)``
    (the integrand is O(t^2) below) to ``50 / r`` (``e^(-r t)`` is 2e-22)."""
    low, high = jnp.log(1e-3 / (mu + r + 1.0)), jnp.log(50.0 / r)
    step = (high - low) / QUADRATURE_NODES
    t = jnp.exp(low + step * (jnp.arange(QUADRATURE_NODES, dtype=mu.dtype) + 0.5))
    one_minus_generating = -jnp.expm1(-r * jnp.log1p(mu * -jnp.expm1(-t) / r))
    integrand = t / -jnp.expm1(-t) * one_minus_generating + jnp.expm1(-mu * t)
    return r * r * step * jnp.sum(jnp.exp(-r * t) * integrand * t)


def fisher(raw: jax.Array) -> jax.Array:
    """Raw scores ``(log mu, log r)`` ``(2,)`` -> the Fisher information ``(2,
    2)``, its log concentration's at least `LOG_CONCENTRATION_FLOOR` (plus
    the barrier's curvature past `MAX_CONCENTRATION`)."""
    mu, r = jnp.exp(raw[0]), jnp.minimum(jnp.exp(raw[1]), MAX_CONCENTRATION)
    mean_information = mu * r / (mu + r)
    # the barrier's curvature past MAX_CONCENTRATION is 1
    barrier = (_log_excess(jnp.exp(raw[1])) > 0).astype(mu.dtype)
    concentration_information = (
        jnp.maximum(log_concentration_information(mu, r), LOG_CONCENTRATION_FLOOR) + barrier
    )
    return jnp.diag(jnp.stack([mean_information, concentration_information]))

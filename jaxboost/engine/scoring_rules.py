"""Proper scoring rules of predicted distributions: the continuous ranked
probability score (CRPS), ``CRPS(F, y) = int (F(x) - 1{x >= y})^2 dx``.

Closed forms where the family has one (Normal, Student-t, LogNormal, Gamma,
Beta, Poisson; the formulas of the ``scoringrules`` package: Jordan, Krüger
and Lerch 2019), else the fair ensemble estimator on draws of the
distribution (Gneiting and Raftery 2007, eq. 21; Ferro 2014):
``mean_i |x_i - y| - sum_{i,j} |x_i - x_j| / (2 m (m - 1))``, unbiased for the
CRPS.  The draws come from one fixed key, so that the score of one set
changes between rounds only as the distribution does (early stopping reads
differences, not sampling noise).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.scipy.special import betainc, betaln, gammainc, gammaincc, gammaln, i0e, i1e
from jax.scipy.stats import norm

from ..losses.student_t import (
    log_gamma_half_ratio,
    student_t_cdf,
    student_t_log_density,
)

# draws per row of the sampled CRPS (Weibull, negative binomial, zero-inflated
# Poisson, a user's family): JAX draws gamma and Poisson variates by
# rejection, about 3 us each on a CPU core, and the estimator is unbiased, so
# a set's mean over its rows needs few per row
CRPS_DRAWS = 100
_DRAWS_KEY = 0


def crps_normal(y: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """CRPS of ``Normal(loc, scale)`` at ``y``, all ``(n,)``:
    ``scale (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi))``, ``z = (y - loc) / scale``."""
    z = (y - loc) / scale
    return scale * (z * (2.0 * norm.cdf(z) - 1.0) + 2.0 * norm.pdf(z) - 1.0 / jnp.sqrt(jnp.pi))


def crps_lognormal(y: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """CRPS of ``LogNormal(loc, scale)`` at ``y > 0``, all ``(n,)`` (Baran and
    Lerch 2015): ``y (2 Phi(z) - 1) - 2 exp(loc + scale^2 / 2) (Phi(z - scale)
    + Phi(scale / sqrt 2) - 1)``, ``z = (log y - loc) / scale``."""
    z = (jnp.log(y) - loc) / scale
    mean = jnp.exp(loc + 0.5 * scale**2)
    tail = norm.cdf(z - scale) + norm.cdf(scale / jnp.sqrt(2.0)) - 1.0
    return y * (2.0 * norm.cdf(z) - 1.0) - 2.0 * mean * tail


def crps_ensemble(y: jax.Array, draws: jax.Array) -> jax.Array:
    """Fair CRPS estimate from ``draws (n, m)`` at ``y (n,)`` -> ``(n,)``.

    ``sum_{i,j} |x_i - x_j| = 2 sum_k (2k - m - 1) x_(k)`` over the sorted
    draws (k from 1), so that a row costs a sort, not ``m^2`` pairs."""
    m = draws.shape[-1]
    to_target = jnp.mean(jnp.abs(draws - y[:, None]), axis=-1)
    ranks = 2.0 * jnp.arange(1, m + 1, dtype=draws.dtype) - m - 1.0
    spread = 2.0 * jnp.sum(ranks * jnp.sort(draws, axis=-1), axis=-1)
    return to_target - spread / (2.0 * m * (m - 1))


def crps_student_t(y, df, loc, scale):
    """CRPS of the Student-t, all ``(n,)``: +inf where ``df <= 1`` (no mean:
    ``E|X - y|`` diverges)."""
    z = (y - loc) / scale
    spread = (df + z**2) / (df - 1.0)
    # B(1/2, df - 1/2) / B(1/2, df / 2)^2, by the log gamma ratios that keep
    # their digits for large df (betaln(1/2, b) = log Gamma(1/2) - ratio(b))
    log_ratio = 2.0 * log_gamma_half_ratio(0.5 * df) - log_gamma_half_ratio(df - 0.5)
    ratio = jnp.exp(log_ratio - gammaln(0.5))
    constant = 2.0 * jnp.sqrt(df) / (df - 1.0) * ratio
    cdf, pdf = student_t_cdf(z, df), jnp.exp(student_t_log_density(z, df))
    value = scale * (z * (2.0 * cdf - 1.0) + 2.0 * pdf * spread - constant)
    return jnp.where(df > 1.0, value, jnp.inf)


def crps_gamma(y, concentration, rate):
    """CRPS of ``Gamma(concentration, rate)`` at ``y >= 0``, all ``(n,)``."""
    lower = gammainc(concentration, rate * y)
    lower_next = gammainc(concentration + 1.0, rate * y)
    constant = jnp.exp(-betaln(0.5, concentration)) / rate
    return y * (2.0 * lower - 1.0) - concentration / rate * (2.0 * lower_next - 1.0) - constant


def crps_beta(y, concentration1, concentration0):
    """CRPS of ``Beta(a, b)`` at ``y`` in [0, 1], all ``(n,)``."""
    a, b = concentration1, concentration0
    lower, lower_next = betainc(a, b, y), betainc(a + 1.0, b, y)
    ratio = 2.0 * jnp.exp(betaln(2.0 * a, 2.0 * b) - 2.0 * betaln(a, b)) / a
    return y * (2.0 * lower - 1.0) + a / (a + b) * (1.0 - 2.0 * lower_next - ratio)


def crps_poisson(y, rate):
    """CRPS of ``Poisson(rate)`` at a count ``y``, all ``(n,)``."""
    count = jnp.floor(y)
    cdf = gammaincc(count + 1.0, rate)
    pmf = jnp.exp(count * jnp.log(rate) - rate - gammaln(count + 1.0))
    bessel = i0e(2.0 * rate) + i1e(2.0 * rate)  # exp(-2 rate) (I0 + I1)(2 rate)
    return (y - rate) * (2.0 * cdf - 1.0) + 2.0 * rate * pmf - rate * bessel


# a family's closed form, on its numpyro distribution's attributes
_CLOSED_FORMS: dict[str, Callable] = {
    "normal": lambda y, d: crps_normal(y, d.loc, d.scale),
    "lognormal": lambda y, d: crps_lognormal(y, d.loc, d.scale),
    "student_t": lambda y, d: crps_student_t(y, d.df, d.loc, d.scale),
    "gamma": lambda y, d: crps_gamma(y, d.concentration, d.rate),
    "beta": lambda y, d: crps_beta(y, d.concentration1, d.concentration0),
    "poisson": lambda y, d: crps_poisson(y, d.rate),
}


def crps_of(loss) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``crps(y (n,), raw (n, K)) -> (n,)`` for a distribution loss
    (`jaxboost.losses.distribution`): closed form for the catalogue families
    that have one, else sampled (`CRPS_DRAWS` draws per row)."""
    closed = _CLOSED_FORMS.get(loss.family)
    if closed is not None:

        def crps(y, raw):
            return closed(y, loss.distribution_of(raw))

        return crps

    def sampled(y, raw):
        dist = loss.distribution_of(raw)
        draws = dist.sample(jax.random.PRNGKey(_DRAWS_KEY), (CRPS_DRAWS,))  # (m, n)
        return crps_ensemble(y, draws.T.astype(raw.dtype))

    return sampled

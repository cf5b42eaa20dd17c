"""The Student-t family's closed forms, accurate in float32 at any degrees
of freedom ``df``: its log density, cdf and Fisher information, and the
barrier that keeps ``df`` within reach of the rounds.

Its raw scores are ``(loc, log scale, log df)``.  On light-tailed targets
the likelihood rises towards the Normal, ``df = inf``, and the closed forms
meet the cancellations of two near-equal terms (``gammaln``'s, the
incomplete beta function's, two trigammas'): each switches to its series in
``1 / df`` where float32 loses the difference.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc, gammaln, polygamma
from jax.scipy.stats import norm


def log_gamma_half_ratio(b: jax.Array) -> jax.Array:
    """``log Gamma(b + 1/2) - log Gamma(b)``, ``b > 0``, accurate in float32 for
    any ``b``: the difference of the two ``gammaln`` loses all its digits past
    ``b`` of about 1e5 (``gammaln(1e6)`` is 1.3e7, whose float32 spacing is 1),
    so past ``b = 20`` the series ``log(b) / 2 - 1 / (8 b) + 1 / (192 b^3)``
    takes over (off by 5e-10 there, less beyond)."""
    large = b > 20.0
    small_b = jnp.where(large, 1.0, b)  # each branch finite, so where's gradient is
    large_b = jnp.where(large, b, 21.0)
    exact = gammaln(small_b + 0.5) - gammaln(small_b)
    series = 0.5 * jnp.log(large_b) - 1.0 / (8.0 * large_b) + 1.0 / (192.0 * large_b**3)
    return jnp.where(large, series, exact)


def student_t_log_density(z: jax.Array, df: jax.Array) -> jax.Array:
    """Log density of the standard Student-t at ``z``, accurate in float32 for
    any ``df`` (by `log_gamma_half_ratio`; JAX's ``t.logpdf`` is not past df
    of about 1e4)."""
    normaliser = log_gamma_half_ratio(0.5 * df) - 0.5 * jnp.log(df * np.pi)
    return normaliser - 0.5 * (df + 1.0) * jnp.log1p(z * z / df)


def student_t_cdf(z: jax.Array, df: jax.Array) -> jax.Array:
    """Standard Student-t cdf at ``z``, to float32 precision at any ``z`` and
    ``df`` (within 6e-6 of scipy's).  Up to df 100, by the incomplete beta
    function in the form exact where it is small: near the centre (``z^2 <
    df``) the probability between ``-|z|`` and ``|z|``, ``I(z^2 / (df + z^2);
    1/2, df/2)``, in the tails ``P(T > |z|) = I(df / (df + z^2); df/2, 1/2) /
    2`` (the tail form alone is flat near ``z = 0`` in float32: the median
    read -0.0005 at df 5).  Past df 100, where JAX's incomplete beta function
    loses digits (2e-5 at df 300, 0.5 for 0.58 at df 5e8), the expansion in
    ``1 / df`` to second order, ``Phi(z) - phi(z) [(z^3 + z) / (4 df) - (3 z
    + 5 z^3 + 7 z^5 - 3 z^7) / (96 df^2)]`` (Abramowitz and Stegun 26.7.5;
    off by 6e-7 at df 100, less beyond)."""
    large = df > 100.0
    small_df = jnp.where(large, 1.0, df)
    square = z * z
    central = square < small_df
    # each branch's arguments stay inside (0, 1), so where's gradients are finite
    centre_x = jnp.where(central, square / (small_df + square), 0.5)
    tail_x = jnp.where(central, 0.5, small_df / (small_df + square))
    inner = 0.5 * betainc(0.5, 0.5 * small_df, centre_x)  # P(0 < T < |z|)
    tail = 0.5 * betainc(0.5 * small_df, 0.5, tail_x)  # P(T > |z|)
    upper = jnp.where(central, 0.5 + inner, 1.0 - tail)  # cdf(|z|)
    lower = jnp.where(central, 0.5 - inner, tail)  # cdf(-|z|)
    exact = jnp.where(z < 0, lower, upper)
    large_df = jnp.where(large, df, 101.0)
    first = z * (square + 1.0) / (4.0 * large_df)
    second = z * (3.0 + square * (5.0 + square * (7.0 - 3.0 * square))) / (96.0 * large_df**2)
    series = norm.cdf(z) - norm.pdf(z) * (first - second)
    return jnp.where(large, series, exact)


# where the Student-t's degrees of freedom meet a barrier: past it the
# Student-t is the Normal within 0.2% in its 1% and 99% quantiles and within
# 1e-6 nats on normal targets.  Light-tailed targets (normal noise, diamonds'
# log price) raise the likelihood towards df = inf, where the search of the
# initial score ran df to 1e11; from there no round brought it back (its
# information vanishes as 1 / df^2), so a model of heavy-tailed residuals
# stayed Normal.  The barrier ``e^2 / 2``, ``e = softplus(4 log(df / MAX_DF))
# / 4`` (``log(df / MAX_DF)`` past it, below 1e-8 nats under df 135), makes a
# df near the cap the minimum there; smooth, so that Newton's search of the
# initial score converges to it (a kink at the cap stalled it one float32
# step below, its Newton steps as long as the curvature below is small).
MAX_DF = 1e3
_DF_BARRIER_SHARPNESS = 4.0


def log_prob(dist, y: jax.Array) -> jax.Array:
    """Student-t log density (numpyro's loses its normalising constant in
    float32 past df of about 1e5) less the barrier past `MAX_DF`."""
    z = (y - dist.loc) / dist.scale
    barrier = 0.5 * jnp.square(_df_excess(jnp.log(dist.df))[0])
    return student_t_log_density(z, dist.df) - jnp.log(dist.scale) - barrier


def _df_excess(log_df: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(e, de / dt, d^2 e / dt^2)`` of the barrier's excess at ``t = log df``."""
    sharpness = _DF_BARRIER_SHARPNESS
    x = sharpness * (log_df - np.log(MAX_DF))
    slope = jax.nn.sigmoid(x)
    return jax.nn.softplus(x) / sharpness, slope, sharpness * slope * (1.0 - slope)


# the least information of log df a row contributes: the true one falls as
# 3.5 / df^2, so that on light-tailed targets (whose likelihood rises towards
# df = inf) a Fisher step -g / I in log df grows as df^2 times the rows'
# noise, and df overflows float32 within a round or two (500 rows of normal
# noise: a NaN loss at round 1); floored, the step shrinks as 1 / df
LOG_DF_INFORMATION_FLOOR = 1e-3
# F_tt * df^2 of `fisher` past df 15: 7/2, -13, 79/2, ... (the
# trigamma difference's asymptotic series; within 1e-5 of it at df 15)
_STUDENT_T_DF_SERIES = (3.5, -13.0, 39.5, -119.0, 363.5, -1101.0, 3279.5, -9763.0)


def fisher(raw: jax.Array) -> jax.Array:
    """(loc, log scale s, log df t), with ``u = 1 / df``: ``F_ll = (1 + u) /
    ((1 + 3u) scale^2)``, ``F_ss = 2 / (1 + 3u)``, ``F_st = -2u / ((1 + u) (1 +
    3u))``, ``F_tt = df^2 / 4 [trigamma(df / 2) - trigamma((df + 1) / 2)] - (1
    + 5u) / (2 (1 + u) (1 + 3u))``, the other entries 0 (Lange, Little and
    Taylor 1989, in raw coordinates), ``F_tt`` plus the curvature of the
    barrier past `MAX_DF`.  ``F_tt`` is a difference of two terms
    near 1/2 that falls as ``3.5 / df^2``: past df 15 its series in ``u``
    takes over (float32's difference is off by 2% at df 100, NaN-prone
    beyond); it is at least `LOG_DF_INFORMATION_FLOOR`."""
    df = jnp.exp(raw[2])
    u = jnp.exp(-raw[2])
    location = (1.0 + u) / ((1.0 + 3.0 * u) * jnp.exp(2.0 * raw[1]))
    scale = 2.0 / (1.0 + 3.0 * u)
    cross = -2.0 * u / ((1.0 + u) * (1.0 + 3.0 * u))
    large = df > 15.0
    small_df = jnp.where(large, 1.0, df)  # each branch finite, so where's gradient is
    trigammas = polygamma(1, 0.5 * small_df) - polygamma(1, 0.5 * (small_df + 1.0))
    small_u = 1.0 / small_df
    exact = 0.25 * small_df**2 * trigammas - (1.0 + 5.0 * small_u) / (
        2.0 * (1.0 + small_u) * (1.0 + 3.0 * small_u)
    )
    large_u = jnp.where(large, u, 1.0 / 16.0)
    series = jnp.polyval(jnp.asarray(_STUDENT_T_DF_SERIES[::-1] + (0.0, 0.0)), large_u)
    excess, slope, curvature = _df_excess(raw[2])
    barrier = slope * slope + excess * curvature  # the barrier's second derivative
    df_df = jnp.maximum(jnp.where(large, series, exact), LOG_DF_INFORMATION_FLOOR) + barrier
    zero = jnp.zeros((), raw.dtype)
    return jnp.array(
        [[location, zero, zero], [zero, scale, cross], [zero, cross, df_df]], raw.dtype
    )

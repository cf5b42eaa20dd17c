"""Distribution families of the catalogue: their parameters, the links from raw
scores to them, their targets, and the closed forms a family has.

A family's parameters come from the raw scores one per output, in the order
of ``params``, each through its own link (`PARAMETER_LINKS`): ``identity``
for a location, ``exp`` for a scale, rate or shape, ``sigmoid`` for a
probability.  ``exp`` rather than softplus for scales keeps the raw scores
of a scale on the log scale, where the Fisher information of a location-scale
family is constant (``diag(1 / sigma^2, 2)`` for the Normal's (mean, log sd)).

Nothing here imports numpyro: the families name their numpyro class, and the
links and model files work without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc, gammaln, polygamma
from jax.scipy.stats import norm

from . import links, negative_binomial

# raw score -> parameter, and back (the start: parameters -> raw scores)
PARAMETER_LINKS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "identity": lambda raw: raw,
    "exp": jnp.exp,
    "softplus": jax.nn.softplus,
    "sigmoid": jax.nn.sigmoid,
}
INVERSE_LINKS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "identity": lambda value: value,
    "exp": np.log,
    "softplus": lambda value: value + np.log(-np.expm1(-value)),
    "sigmoid": lambda value: np.log(value) - np.log1p(-value),
}

_EULER_GAMMA = 0.5772156649015329


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


def _student_t_log_prob(dist, y):
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


class Family(NamedTuple):
    """A catalogue family: what `losses.distribution` needs beyond numpyro."""

    numpyro_class: str  # the class in numpyro.distributions
    params: tuple[str, ...]  # its constructor's parameters, one raw score each
    links: tuple[str, ...]  # default PARAMETER_LINKS key per parameter
    target_domain: str  # a key of losses.TARGET_DOMAINS
    # weighted targets (n,), weights (n,) -> the parameters' moment estimates
    start: Callable[[np.ndarray, np.ndarray], tuple[float, ...]]
    # (numpyro distribution, time) -> log survival log(1 - cdf(time)) in a
    # form that stays finite in the tail; None: not offered for censored targets
    log_survival: Callable | None = None
    # raw scores (K,) -> Fisher information (K, K) in raw coordinates, for the
    # default links; None where there is no closed form
    fisher: Callable[[jax.Array], jax.Array] | None = None
    # (numpyro distribution, y) -> log density, where numpyro's is not
    # accurate in float32; None: its log_prob
    log_prob: Callable | None = None
    # whether targets without spread leave the parameters without a finite
    # maximum-likelihood value (the likelihood grows without bound as the
    # distribution narrows onto them)
    needs_spread: bool = False


def _moments(y: np.ndarray, weight: np.ndarray) -> tuple[float, float]:
    """Weighted mean and variance (at least a 1e-12 of the mean's square)."""
    mean = float(np.average(y, weights=weight))
    variance = float(np.average((y - mean) ** 2, weights=weight))
    return mean, max(variance, 1e-12 * max(mean * mean, 1.0))


def _normal_start(y, weight):
    mean, variance = _moments(y, weight)
    return mean, np.sqrt(variance)


def _student_t_start(y, weight, df=5.0):
    # the start's df: heavy enough tails that outliers do not inflate the scale
    mean, variance = _moments(y, weight)
    return mean, np.sqrt(variance * (df - 2.0) / df), df


def _log_normal_start(y, weight):
    return _normal_start(np.log(y), weight)


def _gamma_start(y, weight):
    mean, variance = _moments(y, weight)
    return mean * mean / variance, mean / variance


def _poisson_start(y, weight):
    return (max(_moments(y, weight)[0], 1e-6),)


def _negative_binomial_start(y, weight):
    mean, variance = _moments(y, weight)
    mean = max(mean, 1e-6)
    if variance <= mean:
        # not over-dispersed: the likelihood rises with the concentration up
        # to the Poisson limit, negative_binomial.MAX_CONCENTRATION
        return mean, negative_binomial.MAX_CONCENTRATION
    # variance = mean + mean^2 / concentration
    return mean, mean * mean / (variance - mean)


def _zero_inflated_poisson_start(y, weight):
    positive = y > 0
    if not np.any(positive):
        return 0.5, 1e-3
    # the mean of the positive counts, m = rate / (1 - exp(-rate)), solved by iteration
    mean_positive = float(np.average(y[positive], weights=weight[positive]))
    rate = mean_positive
    for _ in range(50):
        rate = mean_positive * -np.expm1(-rate)
    rate = max(rate, 1e-6)
    zeros = float(np.average(~positive, weights=weight))
    gate = (zeros - np.exp(-rate)) / -np.expm1(-rate)
    return float(np.clip(gate, 1e-3, 1 - 1e-3)), rate


def _beta_start(y, weight):
    mean, variance = _moments(y, weight)
    total = max(mean * (1.0 - mean) / variance - 1.0, 1e-2)
    return mean * total, (1.0 - mean) * total


def _weibull_start(y, weight):
    # log T = log scale + G / concentration, G a standard minimum Gumbel
    # (mean -Euler's gamma, sd pi / sqrt 6)
    mean, variance = _moments(np.log(y), weight)
    concentration = np.pi / np.sqrt(6.0 * variance)
    return float(np.exp(mean + _EULER_GAMMA / concentration)), concentration


def _normal_log_survival(dist, time):
    return norm.logsf((time - dist.loc) / dist.scale)


def _log_normal_log_survival(dist, time):
    return norm.logsf((jnp.log(time) - dist.loc) / dist.scale)


def _weibull_log_survival(dist, time):
    return -((time / dist.scale) ** dist.concentration)


def _log_one_minus_cdf(dist, time):
    """``log(1 - cdf)``, floored at float32's smallest normal number."""
    return jnp.log(jnp.maximum(1.0 - dist.cdf(time), jnp.finfo(jnp.float32).tiny))


def _location_log_scale_fisher(raw):
    """Normal (mean, log sd): ``diag(1 / sd^2, 2)``, as NGBoost's."""
    return jnp.diag(jnp.stack([jnp.exp(-2.0 * raw[1]), jnp.asarray(2.0, raw.dtype)]))


def _poisson_fisher(raw):
    return jnp.exp(raw).reshape(1, 1)


def _gamma_fisher(raw):
    """(log concentration a, log rate b): ``[[a^2 trigamma(a), -a], [-a, a]]``."""
    concentration = jnp.exp(raw[0])
    cross = -concentration
    first = concentration**2 * polygamma(1, concentration)
    return jnp.array([[first, cross], [cross, concentration]])


def _weibull_fisher(raw):
    """(log scale, log concentration k): ``[[k^2, (gamma - 1) k], [(gamma - 1) k,
    (1 - gamma)^2 + pi^2 / 6]]``, gamma Euler's constant."""
    concentration = jnp.exp(raw[1])
    cross = (_EULER_GAMMA - 1.0) * concentration
    shape = (1.0 - _EULER_GAMMA) ** 2 + np.pi**2 / 6.0
    return jnp.array([[concentration**2, cross], [cross, jnp.asarray(shape, raw.dtype)]])


# the least information of log df a row contributes: the true one falls as
# 3.5 / df^2, so that on light-tailed targets (whose likelihood rises towards
# df = inf) a Fisher step -g / I in log df grows as df^2 times the rows'
# noise, and df overflows float32 within a round or two (500 rows of normal
# noise: a NaN loss at round 1); floored, the step shrinks as 1 / df
LOG_DF_INFORMATION_FLOOR = 1e-3
# F_tt * df^2 of `_student_t_fisher` past df 15: 7/2, -13, 79/2, ... (the
# trigamma difference's asymptotic series; within 1e-5 of it at df 15)
_STUDENT_T_DF_SERIES = (3.5, -13.0, 39.5, -119.0, 363.5, -1101.0, 3279.5, -9763.0)


def _student_t_fisher(raw):
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


FAMILIES: dict[str, Family] = {
    "normal": Family(
        "Normal",
        ("loc", "scale"),
        ("identity", "exp"),
        "any",
        _normal_start,
        _normal_log_survival,
        _location_log_scale_fisher,
        needs_spread=True,
    ),
    "student_t": Family(
        "StudentT",
        ("loc", "scale", "df"),
        ("identity", "exp", "exp"),
        "any",
        _student_t_start,
        fisher=_student_t_fisher,
        log_prob=_student_t_log_prob,
        needs_spread=True,
    ),
    "lognormal": Family(
        "LogNormal",
        ("loc", "scale"),
        ("identity", "exp"),
        "positive",
        _log_normal_start,
        _log_normal_log_survival,
        _location_log_scale_fisher,
        needs_spread=True,
    ),
    "gamma": Family(
        "Gamma",
        ("concentration", "rate"),
        ("exp", "exp"),
        "positive",
        _gamma_start,
        _log_one_minus_cdf,
        _gamma_fisher,
        needs_spread=True,
    ),
    "poisson": Family(
        "Poisson", ("rate",), ("exp",), "count", _poisson_start, fisher=_poisson_fisher
    ),
    "negative_binomial": Family(
        "NegativeBinomial2",
        ("mean", "concentration"),
        ("exp", "exp"),
        "count",
        _negative_binomial_start,
        fisher=negative_binomial.fisher,
        log_prob=negative_binomial.log_prob,
    ),
    "zero_inflated_poisson": Family(
        "ZeroInflatedPoisson",
        ("gate", "rate"),
        ("sigmoid", "exp"),
        "count",
        _zero_inflated_poisson_start,
    ),
    "beta": Family(
        "Beta",
        ("concentration1", "concentration0"),
        ("exp", "exp"),
        "open_unit_interval",
        _beta_start,
        needs_spread=True,
    ),
    "weibull": Family(
        "Weibull",
        ("scale", "concentration"),
        ("exp", "exp"),
        "positive",
        _weibull_start,
        _weibull_log_survival,
        _weibull_fisher,
        needs_spread=True,
    ),
}


def link_name(parameter_links: tuple[str, ...]) -> str:
    """The name of the link applying ``parameter_links`` column by column,
    registered in ``losses.links.LINKS`` (so that ``predict`` and model files
    find it): ``"parameters(identity,exp)"``."""
    name = f"parameters({','.join(parameter_links)})"
    if name not in links.LINKS:
        links.LINKS[name] = _columnwise(parameter_links)
    return name


def _columnwise(parameter_links: tuple[str, ...]) -> links.Link:
    transforms = [PARAMETER_LINKS[name] for name in parameter_links]

    def parameters(raw):
        """Raw scores ``(n_rows, K)`` (``(n_rows,)`` for one) -> parameters, same shape."""
        raw = jnp.asarray(raw)
        if len(transforms) == 1:
            return transforms[0](raw)
        columns = [transform(raw[..., k]) for k, transform in enumerate(transforms)]
        return jnp.stack(columns, axis=-1)

    return parameters


# the catalogue families' links exist before any model file is read
for _family in FAMILIES.values():
    link_name(_family.links)

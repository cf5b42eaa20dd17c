"""Distribution families of the catalogue: their parameters, the links from raw
scores to them, their targets, and the closed forms a family has.

A family's parameters come from the raw scores one per output, in the order
of ``parameter_names``, each through its own link (`PARAMETER_LINKS`): ``identity``
for a location, ``exp`` for a scale, rate or shape, ``sigmoid`` for a
probability.  ``exp`` rather than softplus for scales keeps the raw scores
of a scale on the log scale, where the Fisher information of a location-scale
family is constant (``diag(1 / sigma^2, 2)`` for the Normal's (mean, log sd)).

Nothing here imports numpyro: the families name their numpyro class, and the
links and model files work without it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, polygamma
from jax.scipy.stats import norm

from . import links, negative_binomial, student_t

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


class Family(NamedTuple):
    """A catalogue family: what `losses.distribution` needs beyond numpyro."""

    numpyro_class: str  # the class in numpyro.distributions
    parameter_names: tuple[str, ...]  # its constructor's parameters, one raw score each
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

    @property
    def params(self) -> tuple[str, ...]:
        """Deprecated: `parameter_names` (a loss's ``params`` are its factory's arguments)."""
        warnings.warn("Family.params is deprecated, use parameter_names", FutureWarning, 2)
        return self.parameter_names


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


def _zero_inflated_poisson_log_prob(dist, y):
    """``log p(y | gate, rate)`` with finite derivatives wherever it is finite.

    numpyro's writes a zero's ``log(gate + exp(log1p(-gate) - rate))``, whose
    derivative in the gate is ``0 * inf``, NaN, where a raw gate past about 17
    makes the float32 gate 1, and takes ``log1p(-gate)`` on every row (its
    derivative is needed on the zeros' rows only as 0, and ``where`` passes
    the NaN of ``0 * inf``): rare counts, whose gate a fit drives far out,
    ended in a NaN gradient at round 2.  Each branch here sees values where
    it is finite."""
    gate, rate = dist.gate, dist.rate
    zero = y == 0
    zero_gate = jnp.where(zero, gate, 0.5)
    zero_rate = jnp.where(zero, rate, 1.0)
    at_zero = jnp.log(zero_gate + (1.0 - zero_gate) * jnp.exp(-zero_rate))
    count_gate = jnp.where(zero, 0.0, gate)
    count_rate = jnp.where(zero, 1.0, rate)
    count = jnp.where(zero, 1.0, y)
    at_count = jnp.log1p(-count_gate) + count * jnp.log(count_rate) - count_rate
    return jnp.where(zero, at_zero, at_count - gammaln(count + 1.0))


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
        fisher=student_t.fisher,
        log_prob=student_t.log_prob,
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
        # (none: its survival's derivative in the concentration, JAX's
        # igamma_grad_a, has no derivative, and the fit's searches take two)
        None,
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
        log_prob=_zero_inflated_poisson_log_prob,
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

"""`distribution`: a probability distribution as a loss, the negative log
likelihood ``-log p(y | theta(f))`` of a numpyro distribution whose
parameters are the raw scores, each through its link.

The families are numpyro's (``numpyro.distributions``): they are pure JAX
(the engine differentiates their ``log_prob``), have ``log_prob``, ``cdf``,
``icdf`` (for many) and ``sample``, and are maintained; numpyro is the
optional ``distributions`` extra, imported when a distribution loss is built.

Right-censored targets (``censored=True``) are rows ``(time, event)``: an
observed row scores ``-log p(time)``, a censored one ``-log S(time)``, its
survival function's log, as accelerated failure time models do (XGBoost's
``survival:aft``, NGBoost's censored LogNormal).

A distribution loss is a declared loss named ``"distribution:<family>"``,
with these attributes besides the declared ones:

- ``family``: the catalogue name (``"gamma"``) or the numpyro class's name;
- ``parameter_names``, ``parameter_links``: tuples, one per raw output;
- ``censored``: whether targets are ``(time, event)`` rows;
- ``distribution_of(raw)``: raw scores ``(n_rows, K)`` (``(n_rows,)`` for
  one output, or one row's ``(K,)``) -> the numpyro distribution, batch
  shape ``(n_rows,)`` (or ``()``);
- ``init(y, weight) -> (K,)``: raw scores from the targets' weighted moments
  (None for a numpyro class given by the user);
- ``sampler(key, f, n) -> (n,)``: draws of ``y`` for one row's raw scores
  ``f`` (None for censored targets, whose censoring is not modelled);
- ``fisher(f) -> (K, K)``: the Fisher information in raw coordinates, where
  the family has a closed form with its default links (else None); for
  censored targets the uncensored family's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from . import families
from ._declare import DeclaredLoss, Loss, declare, loss_factory
from .distributions import gaussian_nll

PREFIX = "distribution:"
# numpyro support constraints -> the targets a family takes
_DOMAIN_OF_SUPPORT = {
    "Real": "any",
    "Positive": "positive",
    "UnitInterval": "open_unit_interval",
    "IntegerNonnegative": "count",
}
# numpyro argument constraints -> the default link of a parameter of a user's class
_LINK_OF_CONSTRAINT = {"Real": "identity", "Positive": "exp", "UnitInterval": "sigmoid"}


def numpyro_distributions() -> Any:
    """``numpyro.distributions``; an ImportError naming the extra if missing."""
    try:
        import numpyro.distributions
    except ImportError as error:
        raise ImportError(
            "distribution losses need numpyro: pip install 'jaxboost[distributions]' "
            "(or pip install numpyro)"
        ) from error
    return numpyro.distributions


def distribution(
    family: str | type,
    parameter_names: tuple[str, ...] | None = None,
    links: tuple[str, ...] | None = None,
    censored: bool = False,
    *,
    params: tuple[str, ...] | None = None,
) -> Loss:
    """A distribution's negative log-likelihood as a loss, one raw score per parameter.

    ``loss(y, f) = -log p(y | theta)`` with ``theta_k = link_k(f_k)``: for
    ``y`` of shape ``()`` and ``f`` of shape ``(K,)`` (``()`` for one
    parameter), ``K = len(parameter_names)``.  Censored: ``y`` is ``(time, event)``
    and a row with ``event`` 0 scores ``-log(1 - cdf(time))``.

    Args:
      family: a catalogue name, ``"normal"``, ``"student_t"``, ``"lognormal"``,
        ``"gamma"``, ``"poisson"``, ``"negative_binomial"``,
        ``"zero_inflated_poisson"``, ``"beta"`` or ``"weibull"``; or a
        ``numpyro.distributions`` class.
      parameter_names: the class's parameter names, in the order of the raw
        outputs (needed for a class; a catalogue family has its own).
      links: one of ``"identity"``, ``"exp"``, ``"softplus"``, ``"sigmoid"``
        per parameter (default: the family's; for a class, from each
        parameter's constraint: real -> identity, positive -> exp, unit
        interval -> sigmoid).
      censored: targets ``(n_rows, 2)`` of (time > 0, event 0/1), right-censored.
    Returns:
      a declared loss named ``"distribution:<family>"``, link
      ``"parameters(<links>)"`` (``predict`` gives the parameters), with the
      attributes in the module's docstring.
    Raises:
      ImportError: numpyro is not installed.
      ValueError, TypeError: an unknown family, link or parameter name.

    Reference: Rigby and Stasinopoulos (2005), generalized additive models for
    location, scale and shape; März (2019), XGBoostLSS.
    """
    if params is not None:  # (its name before 0.2: a loss's params are its factory's arguments)
        warnings.warn(
            "distribution: params= is deprecated, use parameter_names=", FutureWarning, stacklevel=2
        )
        parameter_names = params if parameter_names is None else parameter_names
    links = None if links is None else tuple(links)
    names = None if parameter_names is None else tuple(parameter_names)
    if isinstance(family, str) and family in families.FAMILIES:
        # the defaults filled in, so that equal calls give the same (compiled) loss
        links = families.FAMILIES[family].links if links is None else links
        names = families.FAMILIES[family].parameter_names if names is None else names
    return _distribution_loss(family, names, links, bool(censored))


def catalogue_factory(family: str) -> Callable[..., Loss]:
    """``get("distribution:<family>", links=..., censored=...)``'s factory."""

    def make(links: list | tuple | None = None, censored: bool = False) -> Loss:
        return distribution(family, links=links, censored=censored)

    make.__name__ = make.__qualname__ = f"distribution_{family}"
    return make


@loss_factory
def _distribution_loss(
    family: str | type,
    parameter_names: tuple[str, ...] | None,
    links: tuple[str, ...] | None,
    censored: bool,
) -> Loss:
    numpyro_dists = numpyro_distributions()
    spec = _spec(family, parameter_names, links, censored, numpyro_dists)
    cls, names, parameter_links, domain, log_survival, log_prob = spec
    n_outputs = len(names)
    transforms = [families.PARAMETER_LINKS[link] for link in parameter_links]

    def distribution_of(raw: ArrayLike) -> Any:
        raw = jnp.asarray(raw)
        if n_outputs == 1 and (raw.ndim < 2 or raw.shape[-1] != 1):
            raw = raw[..., None]
        values = {name: link(raw[..., k]) for k, (name, link) in enumerate(zip(names, transforms))}
        return cls(**values, validate_args=False)

    def nll(y: ArrayLike, f: ArrayLike) -> jax.Array:
        dist = distribution_of(f)
        if not censored:
            return -log_prob(dist, jnp.asarray(y))
        y = jnp.asarray(y)
        time, event = y[..., 0], y[..., 1]
        return -jnp.where(event > 0, log_prob(dist, time), log_survival(dist, time))

    catalogued = isinstance(family, str)
    name = family if catalogued else cls.__name__
    fisher = None
    if catalogued and parameter_links == families.FAMILIES[family].links:
        # censored: the uncensored family's, as NGBoost's censored LogNormal;
        # an upper bound (censoring only loses information), free of the
        # censoring, which is not modelled; the observed hessian collapses the
        # scale (bench_counts_survival.py)
        fisher = families.FAMILIES[family].fisher
    checked = declare(
        nll,
        name=PREFIX + name,
        params=_loss_params(family, names, parameter_links, censored),
        link=families.link_name(parameter_links),
        n_outputs=n_outputs,
        hessian_informative=True,
        convex=False,
        target_domain="time_event" if censored else domain,
        smooth=catalogued,  # a user's family may have kinks (Laplace)
        init=_init(family, parameter_links, censored) if catalogued else None,
        fisher=fisher,
        sampler=None if censored else _sampler(distribution_of),
    )
    declared = DeclaredLoss(
        nll,
        **{
            **checked.metadata(),
            "family": name,
            "parameter_names": names,
            "parameter_links": parameter_links,
            "censored": censored,
        },
    )
    declared.__doc__ = f"Negative log-likelihood of {name} ({', '.join(names)}); see distribution."
    declared.distribution_of = distribution_of
    return declared


def _spec(family, parameter_names, links, censored, numpyro_dists) -> tuple:
    """``(class, parameter names, links, target domain, log survival, log
    density)``, checked; raises naming the argument and the fix."""
    if isinstance(family, str):
        if family not in families.FAMILIES:
            raise ValueError(
                f"family: unknown distribution {family!r}; expected one of "
                f"{sorted(families.FAMILIES)} or a numpyro.distributions class"
            )
        spec = families.FAMILIES[family]
        if parameter_names is not None and parameter_names != spec.parameter_names:
            raise ValueError(
                f"parameter_names: the {family!r} family's parameters are "
                f"{spec.parameter_names}, got {parameter_names}; leave parameter_names unset"
            )
        if censored and spec.log_survival is None:
            censorable = sorted(k for k, v in families.FAMILIES.items() if v.log_survival)
            raise ValueError(
                f"censored: the {family!r} family takes no censored targets (JAX cannot "
                "differentiate its survival function twice in its parameters, as the fit "
                f"needs); use one of {censorable}"
            )
        cls = getattr(numpyro_dists, spec.numpyro_class)
        names, default_links, domain, log_survival = (
            spec.parameter_names,
            spec.links,
            spec.target_domain,
            spec.log_survival,
        )
        log_prob = spec.log_prob or _numpyro_log_prob
    else:
        cls, names = _user_class(family, parameter_names, numpyro_dists)
        default_links = tuple(_default_link(cls, name) for name in names)
        support = getattr(cls, "support", None)
        domain = _DOMAIN_OF_SUPPORT.get(_constraint_name(support), "any")
        log_survival = families._log_one_minus_cdf
        log_prob = _numpyro_log_prob
    links = default_links if links is None else links
    if len(links) != len(names) or any(link not in families.PARAMETER_LINKS for link in links):
        raise ValueError(
            f"links: expected one of {sorted(families.PARAMETER_LINKS)} per parameter "
            f"{names}, got {links}"
        )
    return cls, names, links, domain, log_survival, log_prob


def _numpyro_log_prob(dist: Any, y: jax.Array) -> jax.Array:
    return dist.log_prob(y)


def _user_class(family, parameter_names, numpyro_dists) -> tuple[type, tuple[str, ...]]:
    if not (isinstance(family, type) and issubclass(family, numpyro_dists.Distribution)):
        raise TypeError(
            f"family: expected a catalogue name or a numpyro.distributions class, got {family!r}"
        )
    known = tuple(getattr(family, "arg_constraints", {}))
    if not parameter_names or any(name not in known for name in parameter_names):
        raise ValueError(
            f"parameter_names: name the {family.__name__} parameters the raw outputs give, in "
            f"order, from {known}; got {parameter_names}"
        )
    return family, parameter_names


def _default_link(cls: type, name: str) -> str:
    constraint = _constraint_name(cls.arg_constraints[name])
    if constraint not in _LINK_OF_CONSTRAINT:
        raise ValueError(
            f"links: no default link for {cls.__name__}'s {name!r} (constraint {constraint}); "
            f"pass links, one of {sorted(families.PARAMETER_LINKS)} per parameter"
        )
    return _LINK_OF_CONSTRAINT[constraint]


def _constraint_name(constraint: Any) -> str:
    """``"Positive"`` for numpyro's ``constraints.positive`` (class ``_Positive``)."""
    return type(constraint).__name__.lstrip("_")


def _loss_params(family, names, parameter_links, censored) -> dict[str, Any]:
    """The loss's ``params`` (its factory's arguments): ``get(name, **params)``
    rebuilds a catalogue family (lists, as a model file holds them)."""
    params: dict[str, Any] = {"links": list(parameter_links), "censored": censored}
    if not isinstance(family, str):
        params = {"parameter_names": list(names), **params}
    return params


def _init(family: str, parameter_links, censored: bool) -> Callable:
    start = families.FAMILIES[family].start
    inverses = [families.INVERSE_LINKS[link] for link in parameter_links]

    def init(y: ArrayLike, weight: ArrayLike | None = None) -> np.ndarray:
        """Raw scores ``(K,)`` float32 from the weighted moments of ``y``
        ``(n_rows,)`` (censored: the times ``y[:, 0]``); traced values (the
        fit's initial score) go to the host."""
        if isinstance(y, jax.core.Tracer) or isinstance(weight, jax.core.Tracer):
            weight = jnp.ones(jnp.shape(y)[0]) if weight is None else weight
            shape = jax.ShapeDtypeStruct((len(inverses),), jnp.float32)
            return jax.pure_callback(from_moments, shape, y, weight)
        return from_moments(y, weight)

    def from_moments(y, weight) -> np.ndarray:
        y = np.asarray(y, np.float64)
        y = y[:, 0] if censored else y.reshape(-1)
        weight = np.ones_like(y) if weight is None else np.asarray(weight, np.float64)
        values = start(y, weight)
        raw = [inverse(np.float64(value)) for inverse, value in zip(inverses, values)]
        return np.asarray(raw, np.float32)

    return init


def _sampler(distribution_of: Callable) -> Callable:
    def sampler(key: jax.Array, f: ArrayLike, n: int) -> jax.Array:
        """``n`` draws ``(n,)`` of ``y`` given one row's raw scores ``f``."""
        return distribution_of(f).sample(key, (n,))

    return sampler


def as_distribution_loss(loss: Any) -> Loss | None:
    """The distribution loss a model's loss is (`gaussian_nll`: the
    ``"normal"`` family, whose raw scores are the same), or None."""
    if callable(getattr(loss, "distribution_of", None)):
        return loss
    if loss is gaussian_nll:
        return distribution("normal")
    return None

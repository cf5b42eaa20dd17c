"""Look up catalogue losses by name (to rebuild a loss from a saved model),
and resolve what a user passes as ``loss`` into the callable the engine trains."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from . import (
    adapters,
    classification,
    distribution_loss,
    distributions,
    families,
    ranking,
    regression,
    survival,
)
from ._declare import Loss

# Name -> a declared loss, or a factory returning one.
CATALOGUE: dict[str, Loss | Callable[..., Loss]] = {
    "squared_error": regression.squared_error,
    "absolute_error": regression.absolute_error,
    "huber": regression.huber,
    "quantile": regression.quantile,
    "log_cosh": regression.log_cosh,
    "binary_logloss": classification.binary_logloss,
    "exponential": classification.exponential,
    "softmax_cross_entropy": classification.softmax_cross_entropy,
    "focal": classification.focal,
    "poisson": distributions.poisson,
    "gamma": distributions.gamma,
    "tweedie": distributions.tweedie,
    "gaussian_nll": distributions.gaussian_nll,
    "listnet": ranking.listnet,
    "ranknet": ranking.ranknet,
    "lambdarank": ranking.lambdarank,
    "cox": survival.cox,
    # numpyro families: "distribution:normal", ... (losses.distribution)
    **{
        distribution_loss.PREFIX + family: distribution_loss.catalogue_factory(family)
        for family in families.FAMILIES
    },
}

ALIASES: dict[str, str] = {
    "l2": "squared_error",
    "l1": "absolute_error",
    "logloss": "binary_logloss",
    "softmax": "softmax_cross_entropy",
    "multiclass": "softmax_cross_entropy",
}


def available() -> tuple[str, ...]:
    """Names of the catalogue losses (without aliases), sorted."""
    return tuple(sorted(CATALOGUE))


def get(name: str, **params: Any) -> Loss:
    """The catalogue loss called ``name``, built with ``params``.

    ``get(loss.name, **loss.params)`` rebuilds a declared loss, including one
    made by ``from_optax`` from a function of optax (names ``"optax:<fn>"``).

    Args:
      name: a catalogue name, an alias (``"l2"``, ``"l1"``, ``"logloss"``,
        ``"softmax"``, ``"multiclass"``) or ``"optax:<function name>"``.
      **params: factory parameters, e.g. ``alpha=0.9`` for ``"quantile"``.
    Returns:
      the declared loss.
    """
    if name.startswith(adapters.OPTAX_PREFIX):
        fn = adapters.optax_function(name[len(adapters.OPTAX_PREFIX) :])
        return adapters.from_optax(fn, **params)
    entry = CATALOGUE.get(ALIASES.get(name, name))
    if entry is None:
        raise ValueError(
            f"unknown loss {name!r}; known losses: {list(available())}, "
            f"aliases: {sorted(ALIASES)}, or 'optax:<function name>'"
        )
    if hasattr(entry, "link"):  # a declared loss, not a factory
        if params:
            raise ValueError(f"loss {name!r} takes no parameters, got {sorted(params)}")
        return entry
    try:
        inspect.signature(entry).bind(**params)
    except TypeError as error:
        raise ValueError(
            f"bad parameters {params} for loss {name!r}: {error}; give them as "
            f"loss_params={{...}} (or loss__<name> in set_params), or pass the loss "
            f"losses.{ALIASES.get(name, name)}(...)"
        ) from None
    return entry(**params)


def is_catalogue_loss(loss: Any) -> bool:
    """Whether ``loss`` is the catalogue's loss of its name and parameters."""
    try:
        return get(loss.name, **loss.params) is loss
    except (AttributeError, ValueError, TypeError, ImportError):
        return False


def resolve(loss: str | Callable, params: dict[str, Any] | None = None) -> Callable:
    """What ``fit`` trains on for a given ``loss`` argument.

    A name goes through `get`; a function of optax (or a
    ``functools.partial`` of one with keyword options) is adapted by
    ``from_optax``, since optax takes ``(predictions, targets)``; a declared
    loss or any other callable ``loss(y, f)`` is returned as it is.
    ``params`` (the estimators' ``loss_params``) are a catalogue loss's
    parameters by name, in place of its own: ``resolve("quantile",
    {"alpha": 0.9})`` is ``quantile(0.9)``.

    Raises:
      TypeError: ``loss`` is neither a name nor callable.
      ValueError: an unknown name, an optax function that is no per-sample
        loss, or ``params`` that the loss does not take.
    """
    if params:
        return _with_params(loss, params)
    if isinstance(loss, str):
        return get(loss)
    if not callable(loss):
        raise TypeError(f"loss: expected a catalogue name or a callable loss(y, f), got {loss!r}")
    if adapters.is_optax(loss) and not hasattr(loss, "link"):
        return adapters.adapt_optax(loss)
    return loss


def parameters(loss: str | Callable) -> dict[str, Any] | None:
    """The parameters of the catalogue loss ``loss`` (a name or a loss the
    catalogue built) by name, with their values (a name's: its factory's
    defaults, None where it has none), or None for a loss not from the catalogue."""
    if isinstance(loss, str):
        entry = CATALOGUE.get(ALIASES.get(loss, loss))
        if entry is None or hasattr(entry, "link"):  # unknown, or a loss of no parameters
            return None if entry is None else {}
        return {
            name: None if parameter.default is parameter.empty else parameter.default
            for name, parameter in inspect.signature(entry).parameters.items()
        }
    if not is_catalogue_loss(loss):
        return None
    return {**(parameters(loss.name) or {}), **loss.params}


def _with_params(loss: str | Callable, params: dict[str, Any]) -> Loss:
    """The catalogue loss ``loss`` (a name or a catalogue loss) with ``params``
    in place of its own; a ValueError naming ``loss_params`` otherwise."""
    if not isinstance(params, dict) or not all(isinstance(key, str) for key in params):
        raise ValueError(f"loss_params: expected a dict of parameter names, got {params!r}")
    if isinstance(loss, str):
        name, own = loss, {}
    elif is_catalogue_loss(loss):
        name, own = loss.name, loss.params
    else:
        raise ValueError(
            f"loss_params: {sorted(params)} given for {loss!r}, which is not a catalogue loss; "
            "only catalogue losses take their parameters by name (bind a function's numbers "
            "with functools.partial instead)"
        )
    known = parameters(name)
    unknown = sorted(set(params) - set(known or ()))
    if known is not None and unknown:
        raise ValueError(
            f"loss_params: loss {name!r} takes {sorted(known) or 'no parameters'}, not {unknown}"
        )
    try:
        return get(name, **{**own, **params})
    except ValueError as error:
        raise ValueError(f"loss_params: {error}") from None

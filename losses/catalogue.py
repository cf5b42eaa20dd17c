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
        raise ValueError(f"bad parameters {params} for loss {name!r}: {error}") from None
    return entry(**params)


def is_catalogue_loss(loss: Any) -> bool:
    """Whether ``loss`` is the catalogue's loss of its name and parameters."""
    try:
        return get(loss.name, **loss.params) is loss
    except (AttributeError, ValueError, TypeError, ImportError):
        return False


def resolve(loss: str | Callable) -> Callable:
    """What ``fit`` trains on for a given ``loss`` argument.

    A name goes through `get`; a function of optax (or a
    ``functools.partial`` of one with keyword options) is adapted by
    ``from_optax``, since optax takes ``(predictions, targets)``; a declared
    loss or any other callable ``loss(y, f)`` is returned as it is.

    Raises:
      TypeError: ``loss`` is neither a name nor callable.
      ValueError: an unknown name, or an optax function that is no per-sample loss.
    """
    if isinstance(loss, str):
        return get(loss)
    if not callable(loss):
        raise TypeError(f"loss: expected a catalogue name or a callable loss(y, f), got {loss!r}")
    if adapters.is_optax(loss) and not hasattr(loss, "link"):
        return adapters.adapt_optax(loss)
    return loss
